"""Gold: silver changes -> affected keys -> bounded recompute -> MERGE.

Each silver table is read through its Delta change data feed as a stream (availableNow, one checkpoint per gold
flow). A micro-batch's changed rows name the affected keys; only those are recomputed, from bounded reads of silver
(plus, where a rule looks back in time, the gold row just before the affected range), and MERGEd so that rows whose
values did not change are not rewritten. A late file therefore re-opens exactly the windows and episodes it touches.

- quorum snapshots / replica states -> gold.quorum_status from the earliest affected snapshot of each cluster on,
  then gold.quorum_health for the windows from there on; replica states also -> gold.replica_lag_sli per window;
- partition states -> gold.isr_health and gold.isr_health_by_topic per snapshot, gold.at_min_isr_episodes per
  partition from the start of the episode the earliest change falls in;
- node metrics -> gold.metadata_offset_divergence for the scrapes within the pairing tolerance of the changes, and
  gold.controller_health for the node windows the changes fall in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gold.controller import build_controller_health
from gold.divergence import build_metadata_offset_divergence
from gold.isr import build_at_min_isr_episodes, build_isr_health, build_isr_health_by_topic
from gold.quorum import build_quorum_health, build_quorum_status, seed_before, window_start
from gold.replicas import build_replica_lag_sli
from gold.views import view_statements
from pipelines.io import Lakehouse
from pipelines.tables import (
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_CONTROLLER_HEALTH,
    GOLD_ISR_HEALTH,
    GOLD_ISR_HEALTH_BY_TOPIC,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_HEALTH,
    GOLD_QUORUM_STATUS,
    GOLD_REPLICA_LAG_SLI,
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
    by_name,
)

Progress = Callable[[str], None]


def run_gold(lakehouse: Lakehouse, progress: Progress) -> dict[str, int]:
    """Run every gold flow; returns rows written (inserted or changed) per gold table."""
    versions_before = {spec.name: _version(lakehouse, spec) for spec in _GOLD}
    flows = [
        (SILVER_QUORUM_SNAPSHOTS, "gold_quorum", lambda b: _quorum(lakehouse, _keys(b, "cluster_id", "collected_at"))),
        (SILVER_REPLICA_STATES, "gold_replicas", lambda b: _replicas(lakehouse, b)),
        (SILVER_PARTITION_STATES, "gold_isr", lambda b: _isr(lakehouse, b)),
        (SILVER_NODE_METRICS, "gold_divergence", lambda b: _divergence(lakehouse, b)),
        (SILVER_NODE_METRICS, "gold_controller_health", lambda b: _controller_health(lakehouse, b)),
    ]
    for spec, consumer, handle in flows:
        progress(f"gold: changes of {spec.name}")
        started = time.monotonic()
        lakehouse.stream_table(spec, consumer, lambda batch, _id, handle=handle: _guarded(batch, handle),
                               change_feed=True)
        progress(f"gold: {spec.name} changes handled in {time.monotonic() - started:.1f}s")
    return {spec.name: _rows_written_since(lakehouse, spec, versions_before[spec.name]) for spec in _GOLD}


_GOLD = (GOLD_QUORUM_STATUS, GOLD_QUORUM_HEALTH, GOLD_REPLICA_LAG_SLI, GOLD_ISR_HEALTH, GOLD_ISR_HEALTH_BY_TOPIC,
         GOLD_AT_MIN_ISR_EPISODES, GOLD_METADATA_OFFSET_DIVERGENCE, GOLD_CONTROLLER_HEALTH)


def create_views(lakehouse: Lakehouse) -> None:
    """(Re)create the gold views; cheap, so done at every start (the local catalog lives in the process)."""
    config = lakehouse.config
    settings = {"divergence_warn_records": config.divergence_warn_records,
                "metadata_lag_warn_ms": config.metadata_lag_warn_ms,
                "stale_after_minutes": config.stale_after_minutes,
                "window_minutes": config.window_minutes}

    def resolve(name: str) -> str:
        try:
            return lakehouse.table_name(by_name(name))
        except KeyError:
            schema, view = name.split(".")
            return f"{lakehouse.schema_name(schema)}.{view}"

    for statement in view_statements(resolve, settings):
        lakehouse.spark.sql(statement)


def _guarded(batch: DataFrame, handle: Callable[[DataFrame], None]) -> None:
    batch = batch.where(F.col("_change_type") != "update_preimage").persist()
    try:
        if not batch.isEmpty():
            handle(batch)
    finally:
        batch.unpersist()


def _keys(batch: DataFrame, *cols: str) -> DataFrame:
    return batch.select(*cols).distinct()


# --- quorum ----------------------------------------------------------------------------------------------------------

def _quorum(lakehouse: Lakehouse, snapshot_keys: DataFrame) -> None:
    """Recompute gold.quorum_status from each affected cluster's earliest changed snapshot on, then its windows."""
    config = lakehouse.config
    starts = snapshot_keys.groupBy("cluster_id").agg(F.min("collected_at").alias("from_at")).persist()
    snapshots = lakehouse.read(SILVER_QUORUM_SNAPSHOTS).join(starts, "cluster_id").where(
        F.col("collected_at") >= F.col("from_at")).drop("from_at")
    replicas = lakehouse.read(SILVER_REPLICA_STATES).join(starts, "cluster_id").where(
        F.col("collected_at") >= F.col("from_at")).drop("from_at")
    seed = seed_before(lakehouse.read(GOLD_QUORUM_STATUS), starts)
    status = build_quorum_status(
        snapshots, replicas, seed, slo_ms=config.quorum_lag_time_slo_ms, window_minutes=config.window_minutes,
        stall_ms=config.high_watermark_stall_ms,
    )
    # voters_within_slo uses the replica SLO; the quorum snapshot SLO is on MaxFollowerLagTimeMs
    if config.replica_caught_up_slo_ms != config.quorum_lag_time_slo_ms:
        status = _with_voters_within(status, replicas, config.replica_caught_up_slo_ms)
    lakehouse.replace_scope(GOLD_QUORUM_STATUS, status, starts, _from_time("collected_at"))

    window_starts = starts.select("cluster_id", window_start(F.col("from_at"), config.window_minutes).alias("from_at"))
    in_windows = lakehouse.read(GOLD_QUORUM_STATUS).join(window_starts, "cluster_id").where(
        F.col("window_start") >= F.col("from_at")).drop("from_at")
    health = build_quorum_health(in_windows, config.window_minutes)
    lakehouse.replace_scope(GOLD_QUORUM_HEALTH, health, window_starts, _from_time("window_start"))
    starts.unpersist()


def _with_voters_within(status: DataFrame, replicas: DataFrame, slo_ms: int) -> DataFrame:
    within = replicas.where(F.col("is_voter")).groupBy("cluster_id", "collected_at").agg(
        F.count_if(F.col("caught_up_lag_ms") <= slo_ms).cast("int").alias("_within"))
    # snapshots without replica rows keep what build_quorum_status decided (unknown, or 0 for an error response)
    return status.join(within, ["cluster_id", "collected_at"], "left").withColumn(
        "voters_within_slo", F.coalesce("_within", "voters_within_slo")).drop("_within")


def _from_time(column: str):
    def match(target: DataFrame, scope: DataFrame):
        return (target["cluster_id"] == scope["cluster_id"]) & (target[column] >= scope["from_at"])
    return match


def _replicas(lakehouse: Lakehouse, batch: DataFrame) -> None:
    config = lakehouse.config
    _quorum(lakehouse, _keys(batch, "cluster_id", "collected_at"))
    windows = batch.select("cluster_id", window_start(F.col("collected_at"), config.window_minutes)
                           .alias("window_start")).distinct().persist()
    bounds = windows.agg(F.min("window_start").alias("lo"), F.max("window_start").alias("hi")).first()
    hi = bounds["hi"] + timedelta(minutes=config.window_minutes)
    rows = (
        lakehouse.read(SILVER_REPLICA_STATES)
        .where(F.col("collected_at").between(F.lit(bounds["lo"]), F.lit(hi)))
        .withColumn("window_start", window_start(F.col("collected_at"), config.window_minutes))
        .join(windows, ["cluster_id", "window_start"], "left_semi")
        .drop("window_start")
    )
    sli = build_replica_lag_sli(rows, slo_ms=config.replica_caught_up_slo_ms, window_minutes=config.window_minutes)
    lakehouse.replace_groups(GOLD_REPLICA_LAG_SLI, sli, windows)
    windows.unpersist()


# --- partitions ------------------------------------------------------------------------------------------------------

def _isr(lakehouse: Lakehouse, batch: DataFrame) -> None:
    config = lakehouse.config
    snapshots = _keys(batch, "cluster_id", "collected_at").persist()
    bounds = snapshots.agg(F.min("collected_at").alias("lo"), F.max("collected_at").alias("hi")).first()
    states = lakehouse.read(SILVER_PARTITION_STATES)
    in_snapshots = states.where(F.col("collected_at").between(F.lit(bounds["lo"]), F.lit(bounds["hi"]))).join(
        snapshots, ["cluster_id", "collected_at"], "left_semi")
    lakehouse.replace_groups(GOLD_ISR_HEALTH, build_isr_health(in_snapshots), snapshots)
    lakehouse.replace_groups(GOLD_ISR_HEALTH_BY_TOPIC, build_isr_health_by_topic(in_snapshots), snapshots)
    snapshots.unpersist()

    # Episodes: each affected partition from the start of the episode its earliest change falls in (else from
    # the change itself), so an ongoing episode and a late snapshot inside a closed one are both redone.
    key = ["cluster_id", "topic", "partition"]
    changed = batch.groupBy(*key).agg(F.min("collected_at").alias("changed_at"))
    episodes = lakehouse.read(GOLD_AT_MIN_ISR_EPISODES)
    covering = (
        episodes.join(changed, key)
        .where((F.col("started_at") < F.col("changed_at"))
               & (F.col("ended_at").isNull() | (F.col("ended_at") >= F.col("changed_at"))))
        .groupBy(*key).agg(F.min("started_at").alias("episode_start"))
    )
    starts = changed.join(covering, key, "left").select(
        *key, F.least("changed_at", F.coalesce("episode_start", "changed_at")).alias("from_at")).persist()
    lo = starts.agg(F.min("from_at")).first()[0]
    history = (
        states.where(F.col("collected_at") >= F.lit(lo)).join(starts, key)
        .where(F.col("collected_at") >= F.col("from_at")).drop("from_at")
    )
    flap = timedelta(minutes=config.flap_window_minutes)
    earlier = (
        episodes.join(starts, key)
        .where((F.col("started_at") < F.col("from_at"))
               & (F.col("started_at") >= F.col("from_at") - F.expr(f"INTERVAL {int(flap.total_seconds())} SECONDS")))
        .select(*key, "started_at")
    )
    built = build_at_min_isr_episodes(history, earlier, config.flap_window_minutes)

    def match(target: DataFrame, scope: DataFrame):
        return ((target["cluster_id"] == scope["cluster_id"]) & (target["topic"] == scope["topic"])
                & (target["partition"] == scope["partition"]) & (target["started_at"] >= scope["from_at"]))

    lakehouse.replace_scope(GOLD_AT_MIN_ISR_EPISODES, built, starts, match)
    starts.unpersist()


# --- metrics ---------------------------------------------------------------------------------------------------------

def _divergence(lakehouse: Lakehouse, batch: DataFrame) -> None:
    tolerance = lakehouse.config.divergence_tolerance_ms
    tol = F.expr(f"INTERVAL {tolerance / 1000} SECONDS")
    # every scrape within the tolerance of a change may pair differently now (a late controller scrape)
    ranges = batch.groupBy("cluster_id").agg((F.min("scraped_at") - tol).alias("lo"),
                                             (F.max("scraped_at") + tol).alias("hi")).persist()
    bounds = ranges.agg(F.min("lo").alias("lo"), F.max("hi").alias("hi")).first()
    margin = timedelta(milliseconds=tolerance)
    metrics = (
        lakehouse.read(SILVER_NODE_METRICS)
        .where(F.col("scraped_at").between(F.lit(bounds["lo"] - margin), F.lit(bounds["hi"] + margin)))
        .join(ranges, "cluster_id")
        .where(F.col("scraped_at").between(F.col("lo") - tol, F.col("hi") + tol))
        .drop("lo", "hi")
    )
    rows = build_metadata_offset_divergence(metrics, tolerance).join(ranges, "cluster_id").where(
        F.col("scraped_at").between(F.col("lo"), F.col("hi"))).drop("lo", "hi")

    def match(target: DataFrame, scope: DataFrame):
        return (target["cluster_id"] == scope["cluster_id"]) & target["scraped_at"].between(scope["lo"], scope["hi"])

    lakehouse.replace_scope(GOLD_METADATA_OFFSET_DIVERGENCE, rows, ranges, match)
    ranges.unpersist()


def _controller_health(lakehouse: Lakehouse, batch: DataFrame) -> None:
    """Recompute gold.controller_health for every node window a change of silver.node_metrics falls in."""
    minutes = lakehouse.config.window_minutes
    key = ["cluster_id", "node_id", "window_start"]
    windows = batch.select("cluster_id", "node_id", window_start(F.col("scraped_at"), minutes).alias("window_start")
                           ).distinct().persist()
    bounds = windows.agg(F.min("window_start").alias("lo"), F.max("window_start").alias("hi")).first()
    rows = (
        lakehouse.read(SILVER_NODE_METRICS)
        .where(F.col("scraped_at").between(F.lit(bounds["lo"]), F.lit(bounds["hi"] + timedelta(minutes=minutes))))
        .withColumn("window_start", window_start(F.col("scraped_at"), minutes))
        .join(windows, key, "left_semi")
        .drop("window_start")
    )
    lakehouse.replace_groups(GOLD_CONTROLLER_HEALTH, build_controller_health(rows, minutes), windows)
    windows.unpersist()


# --- bookkeeping -----------------------------------------------------------------------------------------------------

def _version(lakehouse: Lakehouse, spec) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forName(lakehouse.spark, lakehouse.table_name(spec)).history(1).first()["version"]


def _rows_written_since(lakehouse: Lakehouse, spec, version: int) -> int:
    from delta.tables import DeltaTable

    history = DeltaTable.forName(lakehouse.spark, lakehouse.table_name(spec)).history().where(
        F.col("version") > version).select("operationMetrics").collect()
    total = 0
    for row in history:
        metrics = row["operationMetrics"] or {}
        total += int(metrics.get("numTargetRowsInserted", 0)) + int(metrics.get("numTargetRowsUpdated", 0))
    return total
