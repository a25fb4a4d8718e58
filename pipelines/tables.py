"""THE table registry: every table of the lakehouse, with its schema, key and meaning.

A table is found here by its name alone (`bronze.quorum_raw`); `pipelines.io` creates and registers them from
these specs, and the contract tests compare each layer function's output with the schema declared here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableSpec:
    schema: str
    table: str
    columns: tuple[tuple[str, str, str], ...]  # (name, SQL type, comment)
    key: tuple[str, ...]
    comment: str
    partitioned_by: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def ddl(self) -> str:
        return ", ".join(f"`{n}` {t} COMMENT '{_sql_str(c)}'" for n, t, c in self.columns)

    @property
    def column_names(self) -> list[str]:
        return [n for n, _, _ in self.columns]

    @property
    def spark_schema(self) -> str:
        return ", ".join(f"`{n}` {t}" for n, t, _ in self.columns)


def _sql_str(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


_RAW_COLUMNS = (
    ("record_id", "STRING", "Idempotency key: hash of format, meaningful path segments, file content and line number"),
    ("format", "STRING", "Landing format: describe_quorum_json, quorum_cli_replication, quorum_cli_status, "
                         "prometheus_text, jmx_json, partition_json, kafka_topics_cli, or unknown"),
    ("cluster_id", "STRING", "Cluster, from the record or else the cluster=<id> path segment"),
    ("node_id", "INT", "Node, from the record or else the node=<id> path segment (metrics only)"),
    ("collected_at", "TIMESTAMP", "Capture time (UTC), from the record or else the file name"),
    ("api_version", "INT", "DescribeQuorum api version of the envelope (quorum JSON only)"),
    ("payload", "STRING", "The record's text, unchanged (a JSON line or a whole capture file)"),
    ("payload_base64", "STRING", "The record's bytes in base64 when they are not UTF-8 text, else NULL"),
    ("source_file", "STRING", "Landing file the record came from"),
    ("line_number", "INT", "1-based line within a JSON Lines file; NULL for whole-file records"),
    ("file_sha256", "STRING", "SHA-256 of the landing file's bytes as stored"),
    ("file_size", "BIGINT", "Size of the landing file in bytes as stored"),
    ("file_modified_at", "TIMESTAMP", "Modification time of the landing file"),
    ("ingested_at", "TIMESTAMP", "Start time of the run that ingested the record"),
    ("parse_error", "STRING", "Why the record could not be read; NULL when it was readable"),
)

BRONZE_QUORUM_RAW = TableSpec(
    "bronze", "quorum_raw", _RAW_COLUMNS, ("record_id",),
    "Raw DescribeQuorum responses (JSON Lines) and kafka-metadata-quorum captures; one row per landing record",
)
BRONZE_METRICS_RAW = TableSpec(
    "bronze", "metrics_raw", _RAW_COLUMNS, ("record_id",),
    "Raw Prometheus scrapes (one row per file) and JMX JSON samples (one row per line); one row per landing record",
)
BRONZE_PARTITIONS_RAW = TableSpec(
    "bronze", "partitions_raw", _RAW_COLUMNS, ("record_id",),
    "Raw partition-state JSON Lines and kafka-topics --describe captures; one row per landing record",
)

# landing source folder -> bronze table
BRONZE_SOURCES: dict[str, TableSpec] = {
    "quorum": BRONZE_QUORUM_RAW,
    "metrics": BRONZE_METRICS_RAW,
    "partitions": BRONZE_PARTITIONS_RAW,
}

ALL_TABLES: tuple[TableSpec, ...] = (BRONZE_QUORUM_RAW, BRONZE_METRICS_RAW, BRONZE_PARTITIONS_RAW)
SCHEMAS = ("bronze", "silver", "gold")


def by_name(name: str) -> TableSpec:
    for spec in ALL_TABLES:
        if spec.name == name:
            return spec
    raise KeyError(name)
