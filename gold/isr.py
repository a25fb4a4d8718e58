"""gold.isr_health (per cluster snapshot), gold.isr_health_by_topic (per cluster snapshot and topic) and
gold.at_min_isr_episodes (per partition and episode start), from silver.partition_states.

Counts count flags, not `status`: a partition at min ISR and under-replicated counts in both columns. Both min-ISR
rules are counted (`gold/min_isr.py`): `under_min_isr` / `at_min_isr` as kafka-topics lists them, the `_effective`
ones against min(min.insync.replicas, replica count) as brokers judge them. Episodes follow one rule, the
`min_isr_rule` setting (effective by default), and say which. An AtMinIsr
episode starts at a snapshot with `is_at_min_isr` and runs through the following snapshots that are at min ISR or
worse (under min ISR, offline); it ends at the first snapshot that is neither (`ended_at`). Going straight to
under-min-ISR or offline does not start one. `escalated`: under min ISR or offline inside the episode.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_AT_MIN_ISR_EPISODES, GOLD_ISR_HEALTH, GOLD_ISR_HEALTH_BY_TOPIC
from quorumlake.gold.min_isr import DEFAULT_RULE, with_effective_flags, with_min_isr_rule


def _counts():
    return [
        F.count(F.lit(1)).cast("int").alias("partitions"),
        F.count_if("is_offline").cast("int").alias("offline"),
        F.count_if("is_under_min_isr").cast("int").alias("under_min_isr"),
        F.count_if("is_at_min_isr").cast("int").alias("at_min_isr"),
        F.count_if("is_under_replicated").cast("int").alias("under_replicated"),
        F.count_if("is_under_min_isr_effective").cast("int").alias("under_min_isr_effective"),
        F.count_if("is_at_min_isr_effective").cast("int").alias("at_min_isr_effective"),
        F.count_if("is_min_isr_above_replicas").cast("int").alias("min_isr_above_replicas"),
    ]


def build_isr_health(partitions: DataFrame) -> DataFrame:
    """Per snapshot counts (needs cluster_id, collected_at, the four is_* flags, min_isr, replicas and isr_size)."""
    return (
        with_effective_flags(partitions)
        .groupBy("cluster_id", "collected_at")
        .agg(*_counts())
        .select(*GOLD_ISR_HEALTH.column_names)
    )


def build_isr_health_by_topic(partitions: DataFrame) -> DataFrame:
    return (
        with_effective_flags(partitions)
        .groupBy("cluster_id", "collected_at", "topic")
        .agg(*_counts())
        .select(*GOLD_ISR_HEALTH_BY_TOPIC.column_names)
    )


def build_at_min_isr_episodes(
    partitions: DataFrame,
    earlier_starts: DataFrame | None = None,
    flap_window_minutes: int = 60,
    min_isr_rule: str = DEFAULT_RULE,
) -> DataFrame:
    """Episodes of each partition, from its snapshots in time order (all of them from some point on that is not
    inside an episode, or an episode's start).

    `bounces` is how often the partition came back to AtMinIsr within `flap_window_minutes` before this episode
    started (KIP-427's "AtMinIsr bounces between zero and non-zero repeatedly"): the number of its earlier episodes
    that started in that window. `earlier_starts` (cluster_id, topic, partition, started_at) are the episodes
    already known before the given snapshots. `min_isr_rule` (`effective` or `kafka_topics`, `gold/min_isr.py`)
    decides what is at and under min ISR; the episodes carry it in `min_isr_rule`.
    """
    key = ["cluster_id", "topic", "partition"]
    partitions = with_min_isr_rule(partitions, min_isr_rule)
    ordered = Window.partitionBy(*key).orderBy("collected_at")
    in_run = F.col("is_at_min_isr") | F.col("is_under_min_isr") | F.col("is_offline")
    runs = (
        partitions.select(*key, "collected_at", "is_at_min_isr", "is_under_min_isr", "is_offline", "status")
        .withColumn("_in", in_run)
        .withColumn("_next_at", F.lead("collected_at").over(ordered))
        .withColumn("_last_at", F.max("collected_at").over(Window.partitionBy(*key)))
        .withColumn("_run_start", F.col("_in") & ~F.coalesce(F.lag("_in").over(ordered), F.lit(False)))
        .withColumn("_run", F.sum(F.col("_run_start").cast("int")).over(ordered))
        .where(F.col("_in"))
    )
    # inside a run, the episode begins at the run's first at-min-ISR snapshot; an offline snapshot whose (stale)
    # ISR happens to be min ISR in size is offline, not at min ISR, so it starts nothing
    run_key = [*key, "_run"]
    starts_episode = F.col("is_at_min_isr") & ~F.col("is_offline")
    started = F.min(F.when(starts_episode, F.col("collected_at"))).over(Window.partitionBy(*run_key))
    episode_rows = runs.withColumn("_started", started).where(
        F.col("_started").isNotNull() & (F.col("collected_at") >= F.col("_started"))
    )
    severity = (
        F.when(F.col("status") == "offline", 3)
        .when(F.col("status") == "under_min_isr", 2)
        .when(F.col("status") == "at_min_isr", 1)
        .otherwise(0)
    )
    episode_rows = episode_rows.withColumn("_sev", severity)
    grouped = episode_rows.groupBy(*run_key).agg(
        F.min("collected_at").alias("started_at"),
        F.max("collected_at").alias("_last_in"),
        F.max_by("_next_at", "collected_at").alias("ended_at"),
        F.max("_last_at").alias("_partition_last"),
        F.count(F.lit(1)).cast("bigint").alias("snapshots"),
        F.bool_or(F.col("is_under_min_isr") | F.col("is_offline")).alias("escalated"),
        F.max("_sev").alias("_max_sev"),
    )
    end = F.coalesce(F.col("ended_at"), F.col("_partition_last"))
    episodes = grouped.select(
        *key,
        "started_at",
        "ended_at",
        (F.unix_millis(end) - F.unix_millis("started_at")).alias("duration_ms"),
        "snapshots",
        "escalated",
        F.when(F.col("_max_sev") == 3, "offline")
        .when(F.col("_max_sev") == 2, "under_min_isr")
        .otherwise("at_min_isr")
        .alias("max_status"),
        F.lit(False).alias("_earlier"),
    )
    if earlier_starts is not None:
        episodes = episodes.unionByName(
            earlier_starts.select(*key, "started_at").withColumn("_earlier", F.lit(True)), allowMissingColumns=True
        )
    recent = (
        Window.partitionBy(*key).orderBy(F.unix_millis("started_at")).rangeBetween(-flap_window_minutes * 60_000, -1)
    )
    return (
        episodes.withColumn("bounces", F.count(F.lit(1)).over(recent).cast("int"))
        .where(~F.col("_earlier"))
        .withColumn("min_isr_rule", F.lit(min_isr_rule))
        .select(*GOLD_AT_MIN_ISR_EPISODES.column_names)
    )


_PARTITION = ["cluster_id", "topic", "partition"]


def episode_scope(changes: DataFrame, episodes: DataFrame) -> DataFrame:
    """From which time each changed partition's episodes must be rebuilt: the start of the known episode its
    earliest change falls in (so an ongoing episode and a late snapshot inside a closed one are both redone), else
    that change itself. `changes`: silver.partition_states rows (cluster_id, topic, partition, collected_at);
    `episodes`: gold.at_min_isr_episodes rows. Returns cluster_id, topic, partition, from_at."""
    changed = changes.groupBy(*_PARTITION).agg(F.min("collected_at").alias("changed_at"))
    covering = (
        episodes.join(changed, _PARTITION)
        .where(
            (F.col("started_at") < F.col("changed_at"))
            & (F.col("ended_at").isNull() | (F.col("ended_at") >= F.col("changed_at")))
        )
        .groupBy(*_PARTITION)
        .agg(F.min("started_at").alias("episode_start"))
    )
    return changed.join(covering, _PARTITION, "left").select(
        *_PARTITION, F.least("changed_at", F.coalesce("episode_start", "changed_at")).alias("from_at")
    )


def earlier_starts(episodes: DataFrame, scope: DataFrame, flap_window_minutes: int) -> DataFrame:
    """The starts of the known episodes within `flap_window_minutes` before each partition's `from_at` (`scope`, as
    `episode_scope` returns it): what `build_at_min_isr_episodes` counts as bounces of the episodes it rebuilds."""
    window = F.expr(f"INTERVAL {int(flap_window_minutes) * 60} SECONDS")
    return (
        episodes.join(scope, _PARTITION)
        .where((F.col("started_at") < F.col("from_at")) & (F.col("started_at") >= F.col("from_at") - window))
        .select(*_PARTITION, "started_at")
    )
