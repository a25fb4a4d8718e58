"""gold.cluster_cohorts: per cluster and UTC day, the Kafka version, metadata.version, kraft.version and quorum mode
that the day's latest quorum snapshots show, the cohorts by which gold.v_slo_attainment_by_cohort compares SLO
attainment.

Where each comes from (silver.quorum_snapshots and, for the quorum mode, silver.replica_states):
- `kafka_version`, `metadata_version_level`, `kraft_version`: what the collector recorded with the DescribeQuorum
  envelope (the answering node's release and the cluster's finalized features), at the day's latest snapshot that
  has each; without a recorded release, `3.9+` when the day's latest DescribeQuorum answer was v2 or newer (KIP-853
  added v2 in Kafka 3.9);
- `quorum_mode`: `dynamic` when kraft.version >= 1, `static` when it is 0 (KIP-853); without a recorded
  kraft.version, the voters of the day's latest good DescribeQuorum v2+ answer: a voter with a directory id means a
  dynamic quorum (a static voter set, from `controller.quorum.voters`, has none), none means static.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.kafka import METADATA_VERSIONS
from quorumlake.contract.tables import GOLD_CLUSTER_COHORTS
from quorumlake.gold.slo import utc_day

_DAY = ["cluster_id", "day"]


def _last(column: str) -> Column:
    """The column's value at the latest snapshot of the group that has one."""
    return F.max_by(column, F.when(F.col(column).isNotNull(), F.col("collected_at")))


def _is_v2_answer() -> Column:
    return (F.col("source") == "admin") & (F.col("api_version") >= 2) & (F.col("error_code") == 0)


def latest_v2_answers(snapshots: DataFrame) -> DataFrame:
    """(cluster_id, collected_at) of each day's latest good DescribeQuorum v2+ answer (from silver.quorum_snapshots
    rows): the snapshot whose voters tell the quorum mode."""
    return (
        snapshots.where(_is_v2_answer())
        .groupBy("cluster_id", utc_day(F.col("collected_at")).alias("day"))
        .agg(F.max("collected_at").alias("collected_at"))
        .select("cluster_id", "collected_at")
    )


def metadata_version_name(level: Column) -> Column:
    """`4.1-IV1` for level 27 (contract.kafka.METADATA_VERSIONS); `level N` for a level the table does not know."""
    names = F.create_map(*[F.lit(x) for pair in sorted(METADATA_VERSIONS.items()) for x in pair])
    return F.when(level.isNotNull(), F.coalesce(names[level], F.concat(F.lit("level "), level.cast("string"))))


def build_cluster_cohorts(snapshots: DataFrame, voters: DataFrame) -> DataFrame:
    """One row per cluster and day of `snapshots` (silver.quorum_snapshots rows, every snapshot of each day given).

    `voters`: silver.replica_states rows (cluster_id, collected_at, is_voter, replica_directory_id) of the snapshots
    `latest_v2_answers` names (other rows are ignored)."""
    per_day = (
        snapshots.withColumn("day", utc_day(F.col("collected_at")))
        .groupBy(*_DAY)
        .agg(
            F.max("collected_at").alias("last_snapshot_at"),
            _last("kafka_version").alias("_reported"),
            _last("metadata_version_level").alias("metadata_version_level"),
            _last("kraft_version").alias("kraft_version"),
            F.max_by("api_version", F.when(F.col("source") == "admin", F.col("collected_at"))).alias("_admin_version"),
            F.max(F.when(_is_v2_answer(), F.col("collected_at"))).alias("_v2_at"),
        )
    )
    directories = (
        voters.where(F.col("is_voter"))
        .groupBy("cluster_id", "collected_at")
        .agg(F.bool_or(F.col("replica_directory_id").isNotNull()).alias("_dynamic"))
        .withColumnRenamed("collected_at", "_v2_at")
    )
    joined = per_day.join(directories, ["cluster_id", "_v2_at"], "left")
    kraft = F.col("kraft_version")
    mode = (
        F.when(kraft >= 1, "dynamic")
        .when(kraft == 0, "static")
        .when(F.col("_dynamic"), "dynamic")
        .when(~F.col("_dynamic"), "static")
    )
    return joined.select(
        "cluster_id",
        "day",
        F.coalesce("_reported", F.when(F.col("_admin_version") >= 2, F.lit("3.9+"))).alias("kafka_version"),
        metadata_version_name(F.col("metadata_version_level")).alias("metadata_version"),
        "metadata_version_level",
        "kraft_version",
        mode.alias("quorum_mode"),
        "last_snapshot_at",
    ).select(*GOLD_CLUSTER_COHORTS.column_names)
