"""`quorumlake collect`: poll a Kafka KRaft cluster and write its landing zone in the data contract's formats.

- `settings`: TLS/SASL from a standard client properties file;
- `wire`: a bounded, blocking Kafka connection on kafka-python's protocol classes;
- `quorum`: DescribeQuorum (API key 55) and its JSON-converter rendering;
- `partitions`: partition states with the effective min.insync.replicas;
- `landing`: atomic writes in the contract's layout, error records;
- `runner`: the poll loop.
"""

from quorumlake.collector.settings import ClientSettings, SettingsError, load_settings

__all__ = ["ClientSettings", "SettingsError", "load_settings"]
