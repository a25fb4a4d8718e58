"""gold.metadata_offset_divergence: one row per node scrape (cluster, node, scrape time), KIP-835.

For each node scrape, the active controller's scrape (the node reporting controller_active_controller_count = 1)
nearest in time within ±tolerance (inclusive; on a tie the earlier one wins) gives the last committed offset; the
node's last applied offset is its broker_last_applied_record_offset, or controller_last_applied_record_offset for a
controller-only node; divergence_records = controller committed − node applied, NULL when no active-controller scrape
is close enough. Every node scrape gets a row, controllers too.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_METADATA_OFFSET_DIVERGENCE


def _value(metric: str):
    return F.max(F.when(F.col("metric") == metric, F.col("value")))


def node_scrapes(metrics: DataFrame) -> DataFrame:
    """One row per scrape with the metrics divergence needs (from silver.node_metrics rows)."""
    return metrics.groupBy("cluster_id", "node_id", "scraped_at").agg(
        F.first("node_role", ignorenulls=True).alias("node_role"),
        _value("broker_last_applied_record_offset").alias("_broker_applied"),
        _value("controller_last_applied_record_offset").alias("_controller_applied"),
        _value("broker_last_applied_record_lag_ms").alias("_broker_lag"),
        _value("controller_last_applied_record_lag_ms").alias("_controller_lag"),
        _value("controller_active_controller_count").alias("_active"),
        _value("controller_last_committed_record_offset").alias("_committed"),
    )


def build_metadata_offset_divergence(metrics: DataFrame, tolerance_ms: int) -> DataFrame:
    """From silver.node_metrics rows: every scrape of the affected nodes, plus the active-controller scrapes
    within ±tolerance of them."""
    return divergence_of_scrapes(node_scrapes(metrics), tolerance_ms)


def divergence_of_scrapes(scrapes: DataFrame, tolerance_ms: int) -> DataFrame:
    """`build_metadata_offset_divergence` from `node_scrapes` rows, which it reads three times (a caller that keeps
    frames keeps them)."""
    controllers = scrapes.where(F.col("_active") == 1).select(
        "cluster_id",
        F.col("node_id").alias("active_controller_id"),
        F.col("scraped_at").alias("controller_scraped_at"),
        F.col("_committed").alias("controller_last_committed_offset"),
    )
    distance = F.abs(F.unix_millis("scraped_at") - F.unix_millis("controller_scraped_at"))
    # Paired within time buckets as wide as the tolerance (a scrape with its own and both neighbouring buckets), so
    # each scrape meets only the controller scrapes near it: a join on the cluster alone paired every scrape with
    # every controller scrape of its cluster, which grows with the square of the history a batch spans.
    width = max(tolerance_ms, 1)
    bucket = F.floor(F.unix_millis("scraped_at") / width)
    near = scrapes.select("*", F.explode(F.array(bucket - 1, bucket, bucket + 1)).alias("_bucket"))
    candidates = controllers.withColumn("_bucket", F.floor(F.unix_millis("controller_scraped_at") / width))
    pairs = (
        near.join(candidates, ["cluster_id", "_bucket"], "left")
        .drop("_bucket")
        .where(F.col("controller_scraped_at").isNull() | (distance <= tolerance_ms))
    )
    nearest = Window.partitionBy("cluster_id", "node_id", "scraped_at").orderBy(
        distance.asc_nulls_last(), F.col("controller_scraped_at").asc_nulls_last()
    )
    best = pairs.withColumn("_n", F.row_number().over(nearest)).where(F.col("_n") == 1)
    # scrapes with no controller within the tolerance lost their rows in the join filter: add them back
    matched = best.select("cluster_id", "node_id", "scraped_at")
    unmatched = scrapes.join(matched, ["cluster_id", "node_id", "scraped_at"], "left_anti").select(
        "*",
        F.lit(None).cast("int").alias("active_controller_id"),
        F.lit(None).cast("timestamp").alias("controller_scraped_at"),
        F.lit(None).cast("double").alias("controller_last_committed_offset"),
    )
    all_rows = best.drop("_n").unionByName(unmatched)
    controller_only = F.col("node_role") == "controller"
    applied = F.when(controller_only, F.col("_controller_applied")).otherwise(
        F.coalesce("_broker_applied", "_controller_applied")
    )
    lag = F.when(controller_only, F.col("_controller_lag")).otherwise(F.coalesce("_broker_lag", "_controller_lag"))
    committed = F.col("controller_last_committed_offset")
    return all_rows.select(
        "cluster_id",
        "node_id",
        "scraped_at",
        "node_role",
        F.when(committed.isNotNull(), F.col("active_controller_id")).cast("int").alias("active_controller_id"),
        F.when(committed.isNotNull(), F.col("controller_scraped_at")).alias("controller_scraped_at"),
        # try_cast: a scraped value is a double (NaN, ±Inf or 1e300 are valid samples); under ANSI mode a plain
        # cast of one would fail the whole batch, and every later run with it. Beyond BIGINT it is unknown (NULL).
        applied.try_cast("bigint").alias("node_last_applied_offset"),
        committed.try_cast("bigint").alias("controller_last_committed_offset"),
        (committed - applied).try_cast("bigint").alias("divergence_records"),
        F.round(lag).try_cast("bigint").alias("last_applied_lag_ms"),
    ).select(*GOLD_METADATA_OFFSET_DIVERGENCE.column_names)


def divergence_scope(changes: DataFrame, tolerance_ms: int) -> DataFrame:
    """The scrape times whose divergence rows a change of silver.node_metrics may alter, per cluster (cluster_id,
    lo, hi): from the earliest to the latest changed scrape, widened by the pairing tolerance on both sides (a late
    controller scrape re-pairs every node scrape within the tolerance of it)."""
    tolerance = F.expr(f"INTERVAL {tolerance_ms / 1000} SECONDS")
    return changes.groupBy("cluster_id").agg(
        (F.min("scraped_at") - tolerance).alias("lo"), (F.max("scraped_at") + tolerance).alias("hi")
    )
