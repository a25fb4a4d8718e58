"""THE table registry: every table of the lakehouse, with its schema, key and meaning.

A table is found here by its name alone (`bronze.quorum_raw`); `quorumlake.pipelines.storage` creates and registers
them from these specs, and the contract tests compare each layer function's output with the schema declared here.

`clustering` names each table's liquid-clustering keys (`CLUSTER BY (...)`): the columns of the predicates its
readers and MERGEs use, cluster first, then the time the incremental jobs bound their reads by. Every table is
created with these keys, locally and on Databricks. (Creating tables with these keys is
`quorumlake.pipelines.storage`'s job.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableSpec:
    schema: str
    table: str
    columns: tuple[tuple[str, str, str], ...]  # (name, SQL type, comment)
    key: tuple[str, ...]
    comment: str
    partitioned_by: tuple[str, ...] = field(default=())
    properties: tuple[tuple[str, str], ...] = field(default=())
    # liquid-clustering keys (at most 4, never together with partitioned_by); empty: not clustered
    clustering: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def ddl(self) -> str:
        return ", ".join(f"`{n}` {t} COMMENT '{sql_string(c)}'" for n, t, c in self.columns)

    @property
    def column_names(self) -> list[str]:
        return [n for n, _, _ in self.columns]

    @property
    def spark_schema(self) -> str:
        return ", ".join(f"`{n}` {t}" for n, t, _ in self.columns)


def sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


# Bronze is MERGEd on record_id (a hash: no layout helps a hash lookup more than file statistics on a sorted
# column would), and silver reads it back by the keys a batch touches: cluster and capture time.
_RAW_CLUSTERING = ("cluster_id", "collected_at")

_RAW_COLUMNS = (
    ("record_id", "STRING", "Idempotency key: hash of format, meaningful path segments, file content and line number"),
    (
        "format",
        "STRING",
        "Landing format: describe_quorum_json, quorum_cli_replication, quorum_cli_status, "
        "prometheus_text, jmx_json, partition_json, kafka_topics_cli, or unknown",
    ),
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

# Silver reads the rows each bronze table gained since its last run through Delta's change data feed.
_CDF = (("delta.enableChangeDataFeed", "true"),)
BRONZE_QUORUM_RAW = TableSpec(
    "bronze",
    "quorum_raw",
    _RAW_COLUMNS,
    ("record_id",),
    "Raw DescribeQuorum responses (JSON Lines) and kafka-metadata-quorum captures; one row per landing record",
    properties=_CDF,
    clustering=_RAW_CLUSTERING,
)
BRONZE_METRICS_RAW = TableSpec(
    "bronze",
    "metrics_raw",
    _RAW_COLUMNS,
    ("record_id",),
    "Raw Prometheus scrapes (one row per file) and JMX JSON samples (one row per line); one row per landing record",
    properties=_CDF,
    clustering=_RAW_CLUSTERING,
)
BRONZE_PARTITIONS_RAW = TableSpec(
    "bronze",
    "partitions_raw",
    _RAW_COLUMNS,
    ("record_id",),
    "Raw partition-state JSON Lines and kafka-topics --describe captures; one row per landing record",
    properties=_CDF,
    clustering=_RAW_CLUSTERING,
)
# Run bookkeeping: which landing files were ingested, and how far each layer has read the tables it builds from.
BRONZE_INGEST_RUNS = TableSpec(
    "bronze",
    "ingest_runs",
    (
        ("source", "STRING", "Landing source folder: quorum, metrics or partitions"),
        ("path", "STRING", "Landing file, as file:/... (or the platform's URI)"),
        ("file_size", "BIGINT", "Size in bytes when it was ingested"),
        ("file_modified_at", "TIMESTAMP", "Modification time when it was ingested"),
        ("run_at", "TIMESTAMP", "Start time of the run that ingested it"),
    ),
    ("path", "file_size", "file_modified_at"),
    "One row per landing file version ingested (path, size, modification time): a file that changes is read again",
    clustering=("source", "path"),
)
PIPELINE_RUNS = TableSpec(
    "bronze",
    "pipeline_runs",
    (
        ("run_at", "TIMESTAMP", "Start time of the run"),
        ("consumer", "STRING", "The layer step that read the table (silver, gold)"),
        ("source_table", "STRING", "The table it read"),
        ("source_version", "BIGINT", "Delta version of source_table processed up to and including; -1 = none"),
        ("fingerprint", "STRING", "For bronze: a hash of the landing listing (paths, sizes, times) it ingested"),
    ),
    ("run_at", "consumer", "source_table"),
    "How far each layer has processed each table it reads: one row per consumer, source table and run",
    clustering=("consumer", "source_table"),
)

# landing source folder -> bronze table
BRONZE_SOURCES: dict[str, TableSpec] = {
    "quorum": BRONZE_QUORUM_RAW,
    "metrics": BRONZE_METRICS_RAW,
    "partitions": BRONZE_PARTITIONS_RAW,
}

_TS = "TIMESTAMP"
SILVER_QUORUM_SNAPSHOTS = TableSpec(
    "silver",
    "quorum_snapshots",
    (
        ("cluster_id", "STRING", "Cluster (from the envelope, or the cluster=<id> path of a CLI capture)"),
        ("collected_at", _TS, "Capture time (UTC)"),
        ("source", "STRING", "admin (DescribeQuorum JSON) or cli (kafka-metadata-quorum captures)"),
        ("api_version", "INT", "DescribeQuorum api version of the response (admin only)"),
        ("leader_id", "INT", "Quorum leader; NULL if unknown (-1) or for an error response"),
        ("leader_epoch", "INT", "Leader epoch; NULL for an error response or a CLI capture without --status"),
        ("high_watermark", "BIGINT", "Leader's high watermark; NULL if unknown (-1) or for an error response"),
        ("voter_count", "INT", "Number of voters in the response"),
        ("observer_count", "INT", "Number of observers in the response"),
        ("voter_ids", "ARRAY<INT>", "Voter ids in response order"),
        ("error_code", "INT", "Kafka error code (top level, else partition level); 0 when the response is good"),
        ("error_message", "STRING", "Kafka error message; NULL when empty"),
        ("ref_at", _TS, "Reference time: the leader's own lastCaughtUpTimestamp, else the capture time"),
        ("kafka_cluster_id", "STRING", "ClusterId printed by kafka-metadata-quorum --status"),
        ("cli_max_follower_lag", "BIGINT", "MaxFollowerLag printed by --status (CLI captures only)"),
        ("cli_max_follower_lag_time_ms", "BIGINT", "MaxFollowerLagTimeMs printed by --status (CLI captures only)"),
        ("record_ids", "ARRAY<STRING>", "bronze.quorum_raw records this snapshot was built from"),
        ("ingested_at", _TS, "When the (latest) source record was ingested into bronze"),
        (
            "kafka_version",
            "STRING",
            "Kafka release of the node that answered, as the collector recorded it (envelope kafka_version)",
        ),
        (
            "metadata_version_level",
            "INT",
            "Finalized metadata.version feature level the collector recorded (envelope finalized_features)",
        ),
        ("kraft_version", "INT", "Finalized kraft.version the collector recorded (0 when features omit it)"),
    ),
    ("cluster_id", "collected_at"),
    "One row per quorum snapshot (cluster, capture time)",
    properties=_CDF,
    clustering=("cluster_id", "collected_at"),
)
SILVER_REPLICA_STATES = TableSpec(
    "silver",
    "replica_states",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("collected_at", _TS, "Capture time of the snapshot (UTC)"),
        ("replica_id", "INT", "Replica (node) id"),
        ("is_voter", "BOOLEAN", "True for voters (currentVoters), false for observers"),
        ("position", "INT", "0-based position in the response's voter or observer list (tie rule of MaxFollowerLag)"),
        ("replica_directory_id", "STRING", "Directory id (v2+); NULL if absent or all-zero"),
        (
            "endpoints",
            "ARRAY<STRING>",
            "Voter's listener endpoints as NAME://host:port (DescribeQuorum v2 nodes, --status CurrentVoters); "
            "NULL when unknown, and for observers",
        ),
        ("role", "STRING", "leader, follower or observer"),
        ("log_end_offset", "BIGINT", "Replica's log end offset as the leader knows it; NULL if unknown (-1)"),
        ("last_fetch_at", _TS, "Leader-clock time of the replica's last fetch; NULL if unknown"),
        ("last_caught_up_at", _TS, "Leader-clock time the replica was last caught up; NULL if unknown"),
        ("offset_lag", "BIGINT", "Leader LEO minus replica LEO; NULL when either is unknown; 0 for the leader"),
        ("caught_up_lag_ms", "BIGINT", "Reference time minus last caught-up time; NULL when unknown; 0 for the leader"),
        ("fetch_age_ms", "BIGINT", "Reference time minus last fetch time; NULL when unknown; 0 for the leader"),
        ("source", "STRING", "admin or cli"),
        ("record_id", "STRING", "bronze.quorum_raw record the row came from"),
        ("ingested_at", _TS, "When the source record was ingested into bronze"),
    ),
    ("cluster_id", "collected_at", "replica_id", "is_voter"),
    "One row per replica per quorum snapshot",
    properties=_CDF,
    clustering=("cluster_id", "collected_at"),
)
SILVER_PARTITION_STATES = TableSpec(
    "silver",
    "partition_states",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("collected_at", _TS, "Capture time (UTC)"),
        ("topic", "STRING", "Topic"),
        ("partition", "INT", "Partition"),
        ("leader_id", "INT", "Leader broker; NULL when the partition has none"),
        ("replicas", "ARRAY<INT>", "Assigned replicas"),
        ("isr", "ARRAY<INT>", "In-sync replicas"),
        ("min_isr", "INT", "Effective min.insync.replicas"),
        ("replication_factor", "INT", "Replicas minus adding replicas (during a reassignment)"),
        ("isr_size", "INT", "Number of in-sync replicas"),
        ("is_offline", "BOOLEAN", "No leader"),
        ("is_under_min_isr", "BOOLEAN", "Offline, or ISR size below min ISR"),
        ("is_at_min_isr", "BOOLEAN", "ISR size equals min ISR (KIP-427 AtMinIsr, as kafka-topics decides it)"),
        ("is_under_replicated", "BOOLEAN", "Replication factor minus ISR size above 0"),
        ("status", "STRING", "Most severe of offline, under_min_isr, at_min_isr, under_replicated, healthy"),
        ("adding_replicas", "ARRAY<INT>", "Replicas being added by a reassignment"),
        ("removing_replicas", "ARRAY<INT>", "Replicas being removed by a reassignment"),
        ("elr", "ARRAY<INT>", "Eligible leader replicas (KIP-966), when known"),
        ("source", "STRING", "json (partition-state JSON Lines) or cli (kafka-topics --describe)"),
        ("record_id", "STRING", "bronze.partitions_raw record the row came from"),
        ("source_file", "STRING", "Landing file the row came from"),
        ("ingested_at", _TS, "When the source record was ingested into bronze"),
    ),
    ("cluster_id", "collected_at", "topic", "partition"),
    "One row per partition per snapshot",
    properties=_CDF,
    clustering=("cluster_id", "collected_at"),
)
SILVER_NODE_METRICS = TableSpec(
    "silver",
    "node_metrics",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("node_id", "INT", "Node"),
        ("scraped_at", _TS, "Scrape time (UTC)"),
        ("metric", "STRING", "Canonical metric name (contract), or the series' own sanitized name"),
        ("topic", "STRING", "Topic, for per-partition metrics"),
        ("partition", "INT", "Partition, for per-partition metrics"),
        (
            "broker_id",
            "INT",
            "Broker a per-broker controller metric is about (the broker label of KIP-1131 gauges); NULL otherwise",
        ),
        ("value", "DOUBLE", "Sample value (NaN and infinities kept)"),
        ("node_role", "STRING", "controller, broker or combined, from the metrics the node exposes"),
        ("source_name", "STRING", "The Prometheus series or MBean/attribute the sample came from"),
        ("state", "STRING", "Raft state for raft_current_state (leader, follower, ...)"),
        ("source", "STRING", "prometheus or jmx"),
        ("record_id", "STRING", "bronze.metrics_raw record the row came from"),
        ("source_file", "STRING", "Landing file the row came from"),
        ("ingested_at", _TS, "When the source record was ingested into bronze"),
    ),
    ("cluster_id", "node_id", "scraped_at", "metric", "topic", "partition", "broker_id"),
    "One row per metric sample",
    properties=_CDF,
    clustering=("cluster_id", "scraped_at", "metric"),
)
SILVER_QUARANTINE = TableSpec(
    "silver",
    "quarantine",
    (
        ("quarantine_id", "STRING", "Stable id: hash of target table, bronze record and rejected row"),
        ("target_table", "STRING", "The table the record or row was meant for"),
        ("failed_rules", "ARRAY<STRING>", "Names of every rule it failed (suite rule names, or parse rules)"),
        ("reason", "STRING", "Human-readable reason"),
        ("record", "STRING", "The rejected record or row, as JSON text"),
        ("record_id", "STRING", "bronze record it came from"),
        ("source_file", "STRING", "Landing file it came from"),
        ("ingested_at", _TS, "When the bronze record was ingested"),
        ("quarantined_at", _TS, "Start time of the run that quarantined it"),
    ),
    ("quarantine_id",),
    "One row per rejected record or row, with the rules it failed",
    clustering=("target_table", "quarantined_at"),
)
SILVER_DQ_VALIDATIONS = TableSpec(
    "silver",
    "dq_validations",
    (
        ("run_at", _TS, "Start time of the run"),
        ("table_name", "STRING", "Validated silver table"),
        ("batch", "STRING", "Identifier of the validated batch within the run"),
        ("rule", "STRING", "Rule name (suite)"),
        ("expectation", "STRING", "Great Expectations expectation type"),
        ("success", "BOOLEAN", "Whether every row passed"),
        ("element_count", "BIGINT", "Rows evaluated (where GX reports it)"),
        ("unexpected_count", "BIGINT", "Rows that failed"),
        ("batch_rows", "BIGINT", "Rows in the batch"),
        ("error", "STRING", "Exception raised by the expectation, if any"),
    ),
    ("run_at", "table_name", "batch", "rule"),
    "Great Expectations results: one row per rule per validated batch",
    clustering=("table_name", "run_at"),
)

GOLD_QUORUM_STATUS = TableSpec(
    "gold",
    "quorum_status",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("collected_at", _TS, "Capture time of the quorum snapshot (UTC)"),
        ("window_start", _TS, "Start of the tumbling window holding the snapshot"),
        ("source", "STRING", "admin (DescribeQuorum JSON) or cli (kafka-metadata-quorum captures)"),
        ("error_code", "INT", "Kafka error code of the response; 0 when good"),
        ("leader_id", "INT", "Quorum leader; NULL when unknown or for an error response"),
        ("leader_epoch", "INT", "Leader epoch; NULL when unknown"),
        ("high_watermark", "BIGINT", "Leader's high watermark; NULL when unknown"),
        ("max_follower_lag", "BIGINT", "MaxFollowerLag exactly as kafka-metadata-quorum --status prints it (records)"),
        (
            "max_follower_lag_time_ms",
            "BIGINT",
            "MaxFollowerLagTimeMs exactly as kafka-metadata-quorum --status prints it; -1 when unknown",
        ),
        ("voters", "INT", "Number of voters"),
        ("voters_within_slo", "INT", "Voters whose caught-up lag is known and within the SLO (leader included)"),
        ("observers", "INT", "Number of observers"),
        (
            "is_good",
            "BOOLEAN",
            "Has a leader and MaxFollowerLagTimeMs between 0 and the SLO; false for an error response, no leader or a "
            "lag over the SLO; NULL (unknown, not bad) when the lag time is unknown (-1) and no offset-lag SLO is set",
        ),
        ("leader_change", "INT", "1 when the leader epoch rose since the previous snapshot (both known), else 0"),
        ("hw_last_increase_at", _TS, "When the high watermark last increased (looking back across windows)"),
        ("hw_stalled", "BOOLEAN", "High watermark known and not increased for longer than the stall threshold"),
        (
            "voters_lag_unknown",
            "INT",
            "Voters whose caught-up lag is unknown (DescribeQuorum v0, not yet heard from, or a --status capture "
            "alone)",
        ),
        (
            "voters_not_fetching",
            "INT",
            "Followers (voters) whose last fetch is older than quorum_fetch_timeout_ms; NULL when no follower's "
            "fetch time is known",
        ),
    ),
    ("cluster_id", "collected_at"),
    "Per quorum snapshot: leader, MaxFollowerLag/TimeMs as the CLI computes them, voters within the SLO",
    clustering=("cluster_id", "collected_at"),
)
GOLD_QUORUM_HEALTH = TableSpec(
    "gold",
    "quorum_health",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("window_start", _TS, "Window start (epoch-aligned tumbling window)"),
        ("window_end", _TS, "Window end (exclusive)"),
        ("snapshots", "BIGINT", "Quorum snapshots in the window, error responses included"),
        ("leader_changes", "BIGINT", "Leader epoch increases between consecutive snapshots that both know it"),
        ("leaders", "INT", "Distinct leaders seen in the window"),
        ("high_watermark_advance", "BIGINT", "Last known minus first known high watermark in the window (records)"),
        (
            "high_watermark_stalled",
            "BOOLEAN",
            "A snapshot in the window came more than the stall threshold after the high watermark last increased",
        ),
        ("max_follower_lag", "BIGINT", "Largest MaxFollowerLag in the window (records)"),
        ("max_follower_lag_time_ms", "BIGINT", "Largest known MaxFollowerLagTimeMs in the window (-1 ignored)"),
        ("good_snapshots", "BIGINT", "Snapshots with a leader and MaxFollowerLagTimeMs within the SLO"),
        (
            "sli",
            "DOUBLE",
            "good_snapshots / (snapshots - unknown_snapshots): over the judged snapshots; NULL when none is",
        ),
        ("unknown_snapshots", "BIGINT", "Snapshots neither good nor bad: their lag time is unknown (is_good NULL)"),
    ),
    ("cluster_id", "window_start"),
    "Quorum health SLI per cluster per window",
    clustering=("cluster_id", "window_start"),
)
GOLD_REPLICA_LAG_SLI = TableSpec(
    "gold",
    "replica_lag_sli",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("replica_id", "INT", "Replica (node) id"),
        ("is_voter", "BOOLEAN", "Voter (true) or observer (false)"),
        ("window_start", _TS, "Window start (epoch-aligned tumbling window)"),
        ("window_end", _TS, "Window end (exclusive)"),
        ("snapshots", "BIGINT", "Snapshots of this replica in the window"),
        ("max_offset_lag", "BIGINT", "Largest known offset lag (records)"),
        ("p50_caught_up_lag_ms", "BIGINT", "Median caught-up lag, nearest rank, unknown values ignored (ms)"),
        ("p99_caught_up_lag_ms", "BIGINT", "99th percentile caught-up lag, nearest rank (ms)"),
        ("max_caught_up_lag_ms", "BIGINT", "Largest known caught-up lag (ms)"),
        ("max_fetch_age_ms", "BIGINT", "Largest known time since the last fetch (ms)"),
        ("good_snapshots", "BIGINT", "Snapshots with a known caught-up lag within the SLO"),
        (
            "sli",
            "DOUBLE",
            "good_snapshots / (snapshots - unknown_snapshots): over the snapshots with a known caught-up lag; NULL "
            "when none has one",
        ),
        ("unknown_snapshots", "BIGINT", "Snapshots whose caught-up lag is unknown (neither good nor bad)"),
        (
            "is_removed_voter",
            "BOOLEAN",
            "An observer row of a voter that was removed from the quorum (still listed as an observer): a "
            "decommissioned voter, not a failing observer",
        ),
    ),
    ("cluster_id", "replica_id", "is_voter", "window_start"),
    "Replica lag SLI per replica per window",
    clustering=("cluster_id", "window_start"),
)
_ISR_COUNTS = (
    ("partitions", "INT", "Partitions in the snapshot"),
    ("offline", "INT", "Partitions without a leader"),
    ("under_min_isr", "INT", "Partitions offline or with fewer in-sync replicas than min ISR"),
    ("at_min_isr", "INT", "Partitions whose ISR size equals min ISR (KIP-427 AtMinIsr)"),
    ("under_replicated", "INT", "Partitions whose ISR is smaller than the replication factor"),
    (
        "under_min_isr_effective",
        "INT",
        "Partitions offline or with fewer in-sync replicas than min(min.insync.replicas, replica count), the "
        "effective min ISR brokers judge acks=all writes by (KIP-966)",
    ),
    (
        "at_min_isr_effective",
        "INT",
        "Partitions whose ISR size equals min(min.insync.replicas, replica count) (the brokers' AtMinIsr)",
    ),
    (
        "min_isr_above_replicas",
        "INT",
        "Partitions whose min.insync.replicas exceeds their replica count (a misconfiguration: kafka-topics lists "
        "them under min ISR for ever)",
    ),
)
GOLD_ISR_HEALTH = TableSpec(
    "gold",
    "isr_health",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("collected_at", _TS, "Capture time of the partition snapshot"),
        *_ISR_COUNTS,
    ),
    ("cluster_id", "collected_at"),
    "Partition replication health per cluster snapshot (flags counted, not status)",
    clustering=("cluster_id", "collected_at"),
)
GOLD_ISR_HEALTH_BY_TOPIC = TableSpec(
    "gold",
    "isr_health_by_topic",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("collected_at", _TS, "Capture time of the partition snapshot"),
        ("topic", "STRING", "Topic"),
        *_ISR_COUNTS,
    ),
    ("cluster_id", "collected_at", "topic"),
    "Partition replication health per cluster snapshot and topic",
    clustering=("cluster_id", "collected_at"),
)
GOLD_AT_MIN_ISR_EPISODES = TableSpec(
    "gold",
    "at_min_isr_episodes",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("topic", "STRING", "Topic"),
        ("partition", "INT", "Partition"),
        ("started_at", _TS, "First snapshot at min ISR"),
        ("ended_at", _TS, "First snapshot neither at min ISR nor worse; NULL while ongoing"),
        ("duration_ms", "BIGINT", "ended_at - started_at, or latest snapshot - started_at while ongoing"),
        ("snapshots", "BIGINT", "Snapshots in the episode (the closing one not counted)"),
        ("escalated", "BOOLEAN", "Reached under-min-ISR or offline inside the episode"),
        ("max_status", "STRING", "Worst status in the episode: at_min_isr, under_min_isr or offline"),
        ("bounces", "INT", "Earlier episodes of this partition that started within the flap window before this one"),
        (
            "min_isr_rule",
            "STRING",
            "The min-ISR rule the episode follows: effective (min(min.insync.replicas, replica count), as brokers "
            "judge it) or kafka_topics (the raw min.insync.replicas, as kafka-topics lists it)",
        ),
    ),
    ("cluster_id", "topic", "partition", "started_at"),
    "AtMinIsr episodes per partition (KIP-427)",
    clustering=("cluster_id", "topic", "partition", "started_at"),
)
GOLD_METADATA_OFFSET_DIVERGENCE = TableSpec(
    "gold",
    "metadata_offset_divergence",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("node_id", "INT", "Node"),
        ("scraped_at", _TS, "Scrape time of the node"),
        ("node_role", "STRING", "controller, broker or combined"),
        ("active_controller_id", "INT", "Active controller whose scrape was paired with this one"),
        ("controller_scraped_at", _TS, "Scrape time of that active-controller scrape"),
        (
            "node_last_applied_offset",
            "BIGINT",
            "broker_last_applied_record_offset, or controller_last_applied_record_offset for a controller-only node",
        ),
        ("controller_last_committed_offset", "BIGINT", "Active controller's LastCommittedRecordOffset"),
        ("divergence_records", "BIGINT", "Controller committed minus node applied; NULL without a close scrape"),
        ("last_applied_lag_ms", "BIGINT", "Node's last-applied-record lag (ms, KIP-835)"),
    ),
    ("cluster_id", "node_id", "scraped_at"),
    "Metadata offset divergence per node scrape (KIP-835)",
    clustering=("cluster_id", "scraped_at"),
)
GOLD_CONTROLLER_HEALTH = TableSpec(
    "gold",
    "controller_health",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("node_id", "INT", "Node"),
        ("window_start", _TS, "Window start (epoch-aligned tumbling window, by scrape time)"),
        ("window_end", _TS, "Window end (exclusive)"),
        ("node_role", "STRING", "controller, broker or combined, as of the node's last scrape in the window"),
        ("scrapes", "BIGINT", "Scrapes of this node in the window"),
        ("last_scraped_at", _TS, "The node's last scrape in the window"),
        (
            "raft_state",
            "STRING",
            "Raft state at the last scrape that has it: Kafka 3.x leader, candidate, voted, follower, unattached, "
            "observer; 4.x (KIP-996) leader, prospective, prospective-voted, candidate, unattached-voted, follower, "
            "unattached, observer (Strimzi names only; the exporter's default names drop this String attribute)",
        ),
        ("current_vote", "INT", "Voted-for node at the last scrape (raft current-vote; -1: none)"),
        ("avg_commit_latency_ms", "DOUBLE", "Mean of the scraped raft commit-latency-avg values (ms; NaN ignored)"),
        ("max_commit_latency_ms", "DOUBLE", "Largest scraped raft commit-latency-max (ms; idle NaN ignored)"),
        ("avg_election_latency_ms", "DOUBLE", "Mean of the scraped raft election-latency-avg values (ms)"),
        ("max_election_latency_ms", "DOUBLE", "Largest scraped raft election-latency-max (ms)"),
        (
            "unknown_voter_connections",
            "INT",
            "Most voters whose connection information was unknown (raft number-unknown-voter-connections)",
        ),
        ("append_records_per_s", "DOUBLE", "Mean raft append-records-rate (records/s appended as leader)"),
        ("fetch_records_per_s", "DOUBLE", "Mean raft fetch-records-rate (records/s fetched from the leader)"),
        ("fenced_brokers", "INT", "Most fenced brokers a controller reported (FencedBrokerCount)"),
        ("active_brokers", "INT", "Fewest unfenced brokers a controller reported (ActiveBrokerCount)"),
        (
            "metadata_errors",
            "BIGINT",
            "Largest metadata error count: controller MetadataErrorCount plus broker metadata load and apply errors",
        ),
        (
            "timed_out_broker_heartbeats",
            "BIGINT",
            "Largest TimedOutBrokerHeartbeatCount (counted since the controller started)",
        ),
        ("active_controller_count", "INT", "ActiveControllerCount at the last scrape: 1 on the active controller"),
        ("number_of_voters", "INT", "Voters in the quorum (raft number-of-voters, KIP-853) at the last scrape"),
        (
            "number_of_observers",
            "INT",
            "Observers the leader knows (raft number-of-observers; reported by the leader only) at the last scrape",
        ),
        (
            "uncommitted_voter_change",
            "BOOLEAN",
            "A voter add or remove not committed yet (raft uncommitted-voter-change; leader only) at the last scrape",
        ),
        (
            "ignored_static_voters",
            "BOOLEAN",
            "controller.quorum.voters is set but ignored: the quorum is dynamic (IgnoredStaticVoters, KIP-853)",
        ),
        (
            "avg_idle_ratio",
            "DOUBLE",
            "Mean of the controller event thread's AvgIdleRatio (0 always busy, 1 idle; KIP-1190) in the window",
        ),
        (
            "elr_elections",
            "BIGINT",
            "Increase of ElectionFromEligibleLeaderReplicasPerSec's count in the window (leaders elected from ELR)",
        ),
        ("unclean_elections", "BIGINT", "Increase of UncleanLeaderElectionsPerSec's count in the window"),
        (
            "prospective_scrapes",
            "INT",
            "Scrapes in the window at which the node was prospective or prospective-voted (KIP-996 pre-vote); "
            "NULL when no scrape carries the raft state",
        ),
        (
            "candidate_scrapes",
            "INT",
            "Scrapes in the window at which the node was a candidate; NULL when no scrape carries the raft state",
        ),
    ),
    ("cluster_id", "node_id", "window_start"),
    "KRaft controller and raft-client health per node per window (latency, votes, broker fencing, metadata errors)",
    clustering=("cluster_id", "window_start"),
)

GOLD_QUORUM_MEMBERSHIP = TableSpec(
    "gold",
    "quorum_membership",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("node_id", "INT", "Node (replica) id"),
        ("role", "STRING", "voter or observer"),
        ("valid_from", _TS, "Time of the first quorum snapshot of the stretch"),
        (
            "valid_to",
            _TS,
            "Time of the first quorum snapshot that no longer shows the node in this role with this directory id; "
            "NULL while current",
        ),
        ("directory_id", "STRING", "The node's directory id during the stretch (KIP-853); NULL when unknown"),
        (
            "endpoints",
            "ARRAY<STRING>",
            "Listener endpoints as NAME://host:port (DescribeQuorum v2 nodes, --status CurrentVoters), the latest "
            "known in the stretch; NULL when unknown (observers never have them)",
        ),
        ("snapshots", "BIGINT", "Quorum snapshots of the stretch"),
        (
            "is_removed_voter",
            "BOOLEAN",
            "An observer stretch that directly follows a voter stretch of the node: a removed voter Kafka still "
            "lists as an observer",
        ),
        ("last_seen_at", _TS, "Time of the stretch's last snapshot"),
    ),
    ("cluster_id", "node_id", "role", "valid_from"),
    "Quorum membership ledger: one row per stretch of snapshots in which a node held one role with one directory id",
    clustering=("cluster_id", "valid_from"),
)
GOLD_QUORUM_EVENTS = TableSpec(
    "gold",
    "quorum_events",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("event_at", _TS, "Time of the first quorum snapshot that shows the change"),
        (
            "event",
            "STRING",
            "voter_added, voter_removed, observer_joined, observer_left, leader_elected or directory_changed",
        ),
        ("node_id", "INT", "The node the event is about (the new leader for leader_elected)"),
        ("leader_epoch", "INT", "The new leader epoch (leader_elected); else the snapshot's epoch when known"),
        ("previous_at", _TS, "Time of the snapshot before the change that the event compares with"),
        ("detail", "STRING", "What changed, in words"),
    ),
    ("cluster_id", "event_at", "event", "node_id"),
    "Quorum membership and leadership events: voters added and removed, observers joining and leaving, elections",
    clustering=("cluster_id", "event_at"),
)
GOLD_INCIDENTS = TableSpec(
    "gold",
    "incidents",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("incident_id", "STRING", "Incident id: its start time, yyyyMMddTHHmmss.SSSZ (unique within the cluster)"),
        ("started_at", _TS, "Time of the incident's first anomaly"),
        ("ended_at", _TS, "When the last of its anomalies cleared; NULL while open"),
        (
            "severity",
            "STRING",
            "critical (a partition offline or under min ISR, or the quorum without a leader) or warn",
        ),
        (
            "trigger",
            "STRING",
            "Kind of the first anomaly: broker_down, broker_fenced, controller_down, voter_lagging, leader_election, "
            "hw_stalled, partitions_at_min_isr, partitions_under_min_isr, partitions_offline, metadata_divergence",
        ),
        ("trigger_node_id", "INT", "Node of the first anomaly; NULL when it concerns no single node"),
        ("nodes", "ARRAY<INT>", "Nodes involved in the incident's anomalies (sorted)"),
        ("max_partitions_at_min_isr", "INT", "Most partitions at min ISR in one partition snapshot of the incident"),
        ("max_partitions_under_min_isr", "INT", "Most partitions under min ISR in one partition snapshot"),
        ("max_partitions_offline", "INT", "Most offline partitions in one partition snapshot"),
        ("summary", "STRING", "One line a person reads: what happened, to whom, for how long"),
        ("anomalies", "BIGINT", "Anomalies joined into the incident (rows of gold.incident_events)"),
        ("last_anomaly_at", _TS, "Start of its latest anomaly"),
        ("duration_ms", "BIGINT", "ended_at - started_at, or while open the cluster's latest observation - started_at"),
        ("critical_at", _TS, "When the incident became critical (its first critical anomaly); NULL for warn"),
    ),
    ("cluster_id", "incident_id"),
    "Incidents: a cluster's anomalies (quorum, broker, partition, metadata) that overlap or follow each other within "
    "the grace period, joined into one",
    clustering=("cluster_id", "started_at"),
)
GOLD_INCIDENT_EVENTS = TableSpec(
    "gold",
    "incident_events",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("incident_id", "STRING", "The incident (gold.incidents) it joined"),
        ("event_at", _TS, "First observation of the anomaly"),
        ("kind", "STRING", "Anomaly kind (as gold.incidents.trigger)"),
        ("node_id", "INT", "Node concerned; NULL when none"),
        ("topic", "STRING", "Topic, for a partition anomaly"),
        ("partition", "INT", "Partition, for a partition anomaly"),
        ("ended_at", _TS, "First observation without the anomaly; NULL while ongoing; event_at for a single event"),
        ("observations", "BIGINT", "Observations (snapshots, scrapes) that showed the anomaly"),
        ("peak", "DOUBLE", "Worst value seen: lag (ms), divergence (records), stall (ms), or 1 for a yes/no kind"),
        ("detail", "STRING", "What was seen, in words"),
    ),
    ("cluster_id", "incident_id", "event_at", "kind", "node_id", "topic", "partition"),
    "The anomalies joined into each incident, with their start and end, for timelines",
    clustering=("cluster_id", "event_at"),
)
GOLD_BROKER_REGISTRATIONS = TableSpec(
    "gold",
    "broker_registrations",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("broker_id", "INT", "Broker"),
        ("window_start", _TS, "Window start (epoch-aligned tumbling window, by the active controller's scrape time)"),
        ("window_end", _TS, "Window end (exclusive)"),
        (
            "registration_state",
            "STRING",
            "active, fenced, controlled_shutdown or unregistered: the active controller's BrokerRegistrationState "
            "for the broker at its last scrape in the window (KIP-1131)",
        ),
        (
            "registration_state_code",
            "INT",
            "BrokerRegistrationState as reported: -1 unregistered, 10 fenced, 20 controlled shutdown, 30 active",
        ),
        (
            "max_heartbeat_age_ms",
            "BIGINT",
            "Largest TimeSinceLastHeartbeatReceivedMs the active controller reported for the broker in the window",
        ),
        (
            "fenced_at",
            _TS,
            "First scrape of the fenced stretch the broker is in at the window's end (across windows); NULL when "
            "not fenced",
        ),
        ("controller_id", "INT", "The active controller whose scrapes the row is from (its last in the window)"),
        ("scrapes", "BIGINT", "Active-controller scrapes reporting the broker in the window"),
        ("last_scraped_at", _TS, "The last of those scrapes"),
    ),
    ("cluster_id", "broker_id", "window_start"),
    "Per broker per window: registration state and heartbeat age as the active controller sees them (KIP-1131)",
    clustering=("cluster_id", "window_start"),
)

# SLO error budgets and burn rates (quorumlake.gold.slo): the three SLOs of the contract, their events counted per
# 5-minute window and per UTC day.
_SLO_NAME = ("slo", "STRING", "SLO: quorum_lag, write_availability or metadata_freshness")
_OBJECTIVE = ("objective", "DOUBLE", "The SLO's objective (share of good events) when the row was computed")
GOLD_SLO_BURN = TableSpec(
    "gold",
    "slo_burn",
    (
        ("cluster_id", "STRING", "Cluster"),
        _SLO_NAME,
        ("window_start", _TS, "Start of the 5-minute window (epoch-aligned, by event time)"),
        ("window_end", _TS, "Window end (exclusive)"),
        _OBJECTIVE,
        ("good", "BIGINT", "Good events in the window"),
        ("total", "BIGINT", "Events in the window"),
        (
            "burn_rate_5m",
            "DOUBLE",
            "Error rate over the 5 minutes ending at window_end, over the error budget (1 - objective)",
        ),
        ("burn_rate_30m", "DOUBLE", "Error rate over the 30 minutes ending at window_end, over the error budget"),
        ("burn_rate_1h", "DOUBLE", "Error rate over the hour ending at window_end, over the error budget"),
        ("burn_rate_6h", "DOUBLE", "Error rate over the 6 hours ending at window_end, over the error budget"),
        ("fast_burn", "BOOLEAN", "burn_rate_1h and burn_rate_5m both above 14.4 (page)"),
        ("slow_burn", "BOOLEAN", "burn_rate_6h and burn_rate_30m both above 6 (ticket)"),
    ),
    ("cluster_id", "slo", "window_start"),
    "SLO burn rates per cluster, SLO and 5-minute window with events (multi-window, multi-burn-rate)",
    clustering=("cluster_id", "window_start"),
)
GOLD_SLO_BUDGET = TableSpec(
    "gold",
    "slo_budget",
    (
        ("cluster_id", "STRING", "Cluster"),
        _SLO_NAME,
        ("day", "DATE", "UTC day"),
        _OBJECTIVE,
        ("good", "BIGINT", "Good events that day"),
        ("total", "BIGINT", "Events that day"),
        ("good_28d", "BIGINT", "Good events in the 28 days ending with this day (this day included)"),
        ("total_28d", "BIGINT", "Events in the 28 days ending with this day (this day included)"),
        ("days_28d", "INT", "Days with events among those 28 (fewer than 28 while the history is shorter)"),
        ("attainment_28d", "DOUBLE", "good_28d / total_28d"),
        (
            "budget_remaining_28d",
            "DOUBLE",
            "Share of the 28-day error budget left, 1 - (1 - attainment_28d) / (1 - objective); negative: overspent",
        ),
    ),
    ("cluster_id", "slo", "day"),
    "SLO error budget per cluster, SLO and UTC day, over the 28 days ending with that day",
    clustering=("cluster_id", "day"),
)
GOLD_CLUSTER_COHORTS = TableSpec(
    "gold",
    "cluster_cohorts",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("day", "DATE", "UTC day"),
        (
            "kafka_version",
            "STRING",
            "Kafka release the collector recorded (e.g. 4.1); else 3.9+ when the day's latest DescribeQuorum answer "
            "was v2; NULL when unknown",
        ),
        ("metadata_version", "STRING", "Finalized metadata.version (e.g. 4.1-IV1) the collector recorded"),
        ("metadata_version_level", "INT", "Its feature level"),
        ("kraft_version", "INT", "Finalized kraft.version the collector recorded (0: static voters, 1: dynamic)"),
        (
            "quorum_mode",
            "STRING",
            "static or dynamic (KIP-853): from kraft.version, else from the voters' directory ids in the day's latest "
            "DescribeQuorum v2 answer; NULL when unknown",
        ),
        ("last_snapshot_at", _TS, "The day's latest quorum snapshot"),
    ),
    ("cluster_id", "day"),
    "Kafka version, metadata.version, kraft.version and quorum mode per cluster and UTC day, as the day's latest "
    "quorum snapshots show them (the cohorts of gold.v_slo_attainment_by_cohort)",
    clustering=("cluster_id", "day"),
)

GOLD_TABLES: tuple[TableSpec, ...] = (
    GOLD_QUORUM_STATUS,
    GOLD_QUORUM_HEALTH,
    GOLD_REPLICA_LAG_SLI,
    GOLD_ISR_HEALTH,
    GOLD_ISR_HEALTH_BY_TOPIC,
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_CONTROLLER_HEALTH,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_QUORUM_EVENTS,
    GOLD_INCIDENTS,
    GOLD_INCIDENT_EVENTS,
    GOLD_BROKER_REGISTRATIONS,
    GOLD_SLO_BURN,
    GOLD_SLO_BUDGET,
    GOLD_CLUSTER_COHORTS,
)

# Dimension tables for BI tools (quorumlake.gold.dims, docs/bi.md): one row per cluster, per node, per day. Their keys
# are informational PRIMARY KEYs on Unity Catalog, and the fact tables' cluster_id / (cluster_id, node_id) FOREIGN
# KEYs referencing them (quorumlake.gold.keys); open-source Delta has no such constraints.
GOLD_DIM_CLUSTER = TableSpec(
    "gold",
    "dim_cluster",
    (
        ("cluster_id", "STRING", "Cluster (the fleet's name for it; the key every gold table joins on)"),
        ("kafka_cluster_id", "STRING", "Kafka's ClusterId as kafka-metadata-quorum --status last printed it"),
        (
            "describe_quorum_api_version",
            "INT",
            "Highest DescribeQuorum version the cluster answered (2 and up: KIP-853 voter endpoints and directory ids)",
        ),
        ("voters", "INT", "Voters in the latest quorum snapshot"),
        ("kafka_version", "STRING", "Kafka version on the latest day gold.cluster_cohorts has for the cluster"),
        ("metadata_version", "STRING", "Finalized metadata.version on that day"),
        ("kraft_version", "INT", "Finalized kraft.version on that day (0: static voters, 1: dynamic)"),
        ("quorum_mode", "STRING", "static or dynamic (KIP-853) on that day; NULL when unknown"),
        ("last_quorum_snapshot_at", _TS, "Capture time of the latest quorum snapshot"),
        ("first_seen_at", _TS, "Earliest capture of any kind (quorum, partitions, metrics)"),
        ("last_seen_at", _TS, "Latest capture of any kind"),
    ),
    ("cluster_id",),
    "One row per cluster: identity, quorum shape, and the time span of its data",
    clustering=("cluster_id",),
)
GOLD_DIM_NODE = TableSpec(
    "gold",
    "dim_node",
    (
        ("cluster_id", "STRING", "Cluster"),
        ("node_id", "INT", "Node id (broker.id / node.id; a quorum replica id)"),
        ("node_role", "STRING", "controller, broker or combined, from the node's latest scrape that tells"),
        ("role_seen_at", _TS, "Scrape that node_role comes from"),
        ("is_voter", "BOOLEAN", "A voter (true) or observer (false) in the latest quorum snapshot listing it"),
        ("voter_seen_at", _TS, "Quorum snapshot that is_voter comes from"),
        ("first_seen_at", _TS, "Earliest quorum snapshot or scrape with this node"),
        ("last_seen_at", _TS, "Latest quorum snapshot or scrape with this node"),
    ),
    ("cluster_id", "node_id"),
    "One row per node of a cluster: role, quorum membership, and the time span of its data",
    clustering=("cluster_id", "node_id"),
)
GOLD_DIM_DATE = TableSpec(
    "gold",
    "dim_date",
    (
        ("date", "DATE", "UTC calendar day"),
        ("year", "INT", "Year"),
        ("quarter", "INT", "Quarter (1-4)"),
        ("month", "INT", "Month (1-12)"),
        ("month_name", "STRING", "Month name (English)"),
        ("day_of_month", "INT", "Day of the month"),
        ("day_of_week", "INT", "ISO day of the week: Monday = 1 ... Sunday = 7"),
        ("day_name", "STRING", "Day name (English)"),
        ("iso_week", "INT", "ISO 8601 week of the year"),
        ("is_weekend", "BOOLEAN", "Saturday or Sunday"),
    ),
    ("date",),
    "One row per UTC day from the first to the last day with data, without gaps (a calendar for BI date slicers)",
    clustering=("date",),
)
GOLD_DIMENSIONS: tuple[TableSpec, ...] = (GOLD_DIM_CLUSTER, GOLD_DIM_NODE, GOLD_DIM_DATE)

ALL_TABLES: tuple[TableSpec, ...] = (
    BRONZE_QUORUM_RAW,
    BRONZE_METRICS_RAW,
    BRONZE_PARTITIONS_RAW,
    BRONZE_INGEST_RUNS,
    PIPELINE_RUNS,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
    SILVER_PARTITION_STATES,
    SILVER_NODE_METRICS,
    SILVER_QUARANTINE,
    SILVER_DQ_VALIDATIONS,
    *GOLD_TABLES,
    *GOLD_DIMENSIONS,
)
# The medallion layers in run order; each is a schema of the lakehouse holding its tables.
LAYERS: tuple[str, ...] = tuple(dict.fromkeys(spec.schema for spec in ALL_TABLES))


_PLACEHOLDER = re.compile(r"\{((?:bronze|silver|gold)\.[a-z_]+)\}")


def resolve_names(sql: str, resolve: Callable[[str], str]) -> str:
    """`sql` with each contract name in braces (`{gold.quorum_status}`, `{gold.v_fleet_overview}`) replaced by
    `resolve(name)`, the name a lakehouse gives it (a catalog and a schema prefix on Databricks)."""
    return _PLACEHOLDER.sub(lambda m: resolve(m.group(1)), sql)


def by_name(name: str) -> TableSpec:
    for spec in ALL_TABLES:
        if spec.name == name:
            return spec
    raise KeyError(name)
