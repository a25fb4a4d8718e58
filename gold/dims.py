"""Gold's dimension tables, the model BI tools expect beside the fact tables: one row per cluster
(`gold.dim_cluster`), per node of a cluster (`gold.dim_node`) and per day (`gold.dim_date`).

The cluster and node dimensions are built incrementally: each gold round summarizes what silver changed (first and
last time seen, the latest values) and re-aggregates those summaries with the rows the dimension already holds for the
same keys, so a dimension row never needs the whole history re-read. `build_dim_cluster` and `build_dim_node` take
the changed silver rows and the existing dimension rows (both optional) and return the new rows for their keys.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_DIM_CLUSTER, GOLD_DIM_DATE, GOLD_DIM_NODE


def _latest(value: str, at: str) -> Column:
    """The value at the latest `at` among the rows that have one (rows without a value do not count)."""
    return F.max_by(F.col(value), F.when(F.col(value).isNotNull(), F.col(at)))


def _typed(df: DataFrame, spec) -> DataFrame:
    """The table's columns in its order and types; a column the frame lacks is NULL."""
    return df.select(*((F.col(n) if n in df.columns else F.lit(None)).cast(t).alias(n) for n, t, _ in spec.columns))


def _summaries(spec, frames: list[DataFrame]) -> DataFrame:
    out = None
    for frame in frames:
        frame = _typed(frame, spec)
        out = frame if out is None else out.unionByName(frame)
    return out


_COHORT = ("kafka_version", "metadata_version", "kraft_version", "quorum_mode")


def build_dim_cluster(
    snapshots: DataFrame | None = None,
    partitions: DataFrame | None = None,
    metrics: DataFrame | None = None,
    existing: DataFrame | None = None,
    cohorts: DataFrame | None = None,
) -> DataFrame:
    """One row per cluster of the given silver rows (quorum snapshots, partition states, node metrics), merged with
    the cluster's `existing` dimension row; its version and quorum mode are those of the cluster's latest day in
    `cohorts` (gold.cluster_cohorts rows), else the existing row's."""
    none = F.lit(None)
    frames = []
    if snapshots is not None:
        frames.append(
            snapshots.groupBy("cluster_id").agg(
                _latest("kafka_cluster_id", "collected_at").alias("kafka_cluster_id"),
                F.max("api_version").alias("describe_quorum_api_version"),
                F.max_by("voter_count", "collected_at").alias("voters"),
                F.max("collected_at").alias("last_quorum_snapshot_at"),
                F.min("collected_at").alias("first_seen_at"),
                F.max("collected_at").alias("last_seen_at"),
            )
        )
    for rows, at in ((partitions, "collected_at"), (metrics, "scraped_at")):
        if rows is not None:
            frames.append(
                rows.groupBy("cluster_id").agg(
                    none.alias("kafka_cluster_id"),
                    none.alias("describe_quorum_api_version"),
                    none.alias("voters"),
                    none.alias("last_quorum_snapshot_at"),
                    F.min(at).alias("first_seen_at"),
                    F.max(at).alias("last_seen_at"),
                )
            )
    if existing is not None:
        frames.append(existing)
    if not frames:
        raise ValueError("build_dim_cluster needs at least one source")
    rows = (
        _summaries(GOLD_DIM_CLUSTER, frames)
        .groupBy("cluster_id")
        .agg(
            _latest("kafka_cluster_id", "last_quorum_snapshot_at").alias("kafka_cluster_id"),
            F.max("describe_quorum_api_version").alias("describe_quorum_api_version"),
            _latest("voters", "last_quorum_snapshot_at").alias("voters"),
            *(F.first(c, ignorenulls=True).alias(c) for c in _COHORT),  # only the existing row has them
            F.max("last_quorum_snapshot_at").alias("last_quorum_snapshot_at"),
            F.min("first_seen_at").alias("first_seen_at"),
            F.max("last_seen_at").alias("last_seen_at"),
        )
    )
    if cohorts is not None:
        latest = cohorts.groupBy("cluster_id").agg(
            *(F.max_by(c, "day").alias(f"_{c}") for c in _COHORT), F.max("day").alias("_day")
        )
        rows = rows.join(latest, "cluster_id", "left").select(
            "*",
            *(F.when(F.col("_day").isNotNull(), F.col(f"_{c}")).otherwise(F.col(c)).alias(f"__{c}") for c in _COHORT),
        )
        rows = rows.drop(*_COHORT).select("*", *(F.col(f"__{c}").alias(c) for c in _COHORT))
    return _typed(rows, GOLD_DIM_CLUSTER)


def build_dim_node(
    replicas: DataFrame | None = None, metrics: DataFrame | None = None, existing: DataFrame | None = None
) -> DataFrame:
    """One row per node (cluster, node id) of the given silver rows: quorum replicas (voters and observers of
    DescribeQuorum) and scraped nodes, merged with the node's `existing` dimension row."""
    none = F.lit(None)
    frames = []
    if replicas is not None:
        frames.append(
            replicas.groupBy("cluster_id", F.col("replica_id").alias("node_id")).agg(
                none.alias("node_role"),
                none.alias("role_seen_at"),
                F.max_by("is_voter", "collected_at").alias("is_voter"),
                F.max("collected_at").alias("voter_seen_at"),
                F.min("collected_at").alias("first_seen_at"),
                F.max("collected_at").alias("last_seen_at"),
            )
        )
    if metrics is not None:
        frames.append(
            metrics.groupBy("cluster_id", "node_id").agg(
                _latest("node_role", "scraped_at").alias("node_role"),
                F.max(F.when(F.col("node_role").isNotNull(), F.col("scraped_at"))).alias("role_seen_at"),
                none.alias("is_voter"),
                none.alias("voter_seen_at"),
                F.min("scraped_at").alias("first_seen_at"),
                F.max("scraped_at").alias("last_seen_at"),
            )
        )
    if existing is not None:
        frames.append(existing)
    if not frames:
        raise ValueError("build_dim_node needs at least one source")
    return _typed(
        _summaries(GOLD_DIM_NODE, frames)
        .groupBy("cluster_id", "node_id")
        .agg(
            _latest("node_role", "role_seen_at").alias("node_role"),
            F.max("role_seen_at").alias("role_seen_at"),
            _latest("is_voter", "voter_seen_at").alias("is_voter"),
            F.max("voter_seen_at").alias("voter_seen_at"),
            F.min("first_seen_at").alias("first_seen_at"),
            F.max("last_seen_at").alias("last_seen_at"),
        ),
        GOLD_DIM_NODE,
    )


def build_dim_date(days: DataFrame) -> DataFrame:
    """One row per day from the earliest to the latest `date` in `days` (no gaps: a calendar, not the days with
    data), with the attributes date slicers and fiscal-calendar-free BI models use (ISO weeks, Monday = 1)."""
    bounds = days.agg(F.min("date").alias("lo"), F.max("date").alias("hi"))
    calendar = bounds.where(F.col("lo").isNotNull()).select(F.explode(F.sequence("lo", "hi")).alias("date"))
    iso_day = (F.dayofweek("date") + 5) % 7 + 1  # Spark: Sunday = 1; ISO: Monday = 1
    return _typed(
        calendar.select(
            "date",
            F.year("date").alias("year"),
            F.quarter("date").alias("quarter"),
            F.month("date").alias("month"),
            F.date_format("date", "MMMM").alias("month_name"),
            F.dayofmonth("date").alias("day_of_month"),
            iso_day.alias("day_of_week"),
            F.date_format("date", "EEEE").alias("day_name"),
            F.weekofyear("date").alias("iso_week"),
            (iso_day >= 6).alias("is_weekend"),
        ),
        GOLD_DIM_DATE,
    )
