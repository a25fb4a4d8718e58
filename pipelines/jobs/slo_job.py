"""Gold's SLO step: error budgets, burn rates and cluster cohorts for the silver changes of a gold round.

It runs after the round's other steps, so gold.quorum_status and gold.metadata_offset_divergence already hold what
the changes made of them. From the changed keys:
1. the 5-minute windows they touch, per SLO (a changed node scrape also touches the windows within the pairing
   tolerance of it, whose divergence rows the divergence step may have re-paired) are recounted from the SLOs'
   sources, reads bounded by the windows' times and clusters;
2. gold.slo_burn: every window whose 6-hour lookback holds a touched window is recomputed from the counts of the
   windows 6 hours around them (the table's own `good` / `total`), the touched windows' counts replaced;
3. gold.slo_budget: every day whose 28 days hold a touched day is recomputed from the daily counts 27 days around
   them (the table's own `good` / `total`), the touched days' counts summed anew from gold.slo_burn;
4. gold.cluster_cohorts: the days of changed quorum snapshots, from those days' snapshots and the voters of each
   day's latest DescribeQuorum v2 answer.
Each write replaces exactly its scope: a re-run writes nothing, a late file re-opens the windows and days it touches
and those whose lookbacks hold them.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import (
    GOLD_CLUSTER_COHORTS,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_STATUS,
    GOLD_SLO_BUDGET,
    GOLD_SLO_BURN,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
)
from quorumlake.gold.cohorts import build_cluster_cohorts, latest_v2_answers
from quorumlake.gold.slo import (
    BUDGET_DAYS,
    LONGEST_LOOKBACK_MS,
    METADATA_FRESHNESS,
    QUORUM_LAG,
    WINDOW_MS,
    WRITE_AVAILABILITY,
    budget_scope,
    build_slo_budget,
    build_slo_burn,
    burn_scope,
    daily_counts,
    metadata_freshness_events,
    quorum_lag_events,
    slo_window,
    utc_day,
    window_counts,
    write_availability_events,
)
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.session import cached, release
from quorumlake.pipelines.storage import Bounds, Lakehouse

_WINDOW_KEY = ["cluster_id", "slo", "window_start"]
_DAY_KEY = ["cluster_id", "slo", "day"]
_DAY_US = 86_400_000_000


def objectives(config: Config) -> dict[str, float]:
    return {
        QUORUM_LAG: config.slo_objective_quorum_lag,
        WRITE_AVAILABILITY: config.slo_objective_write_availability,
        METADATA_FRESHNESS: config.slo_objective_metadata_freshness,
    }


def slo_step(
    lakehouse: Lakehouse,
    quorum_keys: DataFrame | None,
    partitions: DataFrame | None,
    metrics: DataFrame | None,
) -> None:
    """The SLO tables for a round's changes: `quorum_keys` (cluster_id, collected_at) of changed quorum snapshots and
    replica states, `partitions` and `metrics` the changed silver.partition_states and silver.node_metrics rows
    (None where the round changed none)."""
    slos = {
        slo
        for slo, batch in ((QUORUM_LAG, quorum_keys), (WRITE_AVAILABILITY, partitions), (METADATA_FRESHNESS, metrics))
        if batch is not None
    }
    touched = _touched_windows(lakehouse.config, quorum_keys, partitions, metrics)
    if touched is None:
        return
    touched = cached(touched)
    try:
        bounds = Bounds.of(touched, "window_start")
        if bounds is None:
            return
        days = cached(touched.select("cluster_id", "slo", utc_day(F.col("window_start")).alias("day")).distinct())
        try:
            _burn(lakehouse, touched, bounds, slos)
            _budget(lakehouse, days, bounds)
        finally:
            release(days)
        if quorum_keys is not None:
            _cohorts(lakehouse, quorum_keys, bounds)
    finally:
        release(touched)


def _touched_windows(
    config: Config, quorum_keys: DataFrame | None, partitions: DataFrame | None, metrics: DataFrame | None
) -> DataFrame | None:
    parts = []
    if quorum_keys is not None:
        parts.append(
            quorum_keys.select("cluster_id", F.lit(QUORUM_LAG).alias("slo"), slo_window(F.col("collected_at")))
        )
    if partitions is not None:
        parts.append(
            partitions.select("cluster_id", F.lit(WRITE_AVAILABILITY).alias("slo"), slo_window(F.col("collected_at")))
        )
    if metrics is not None:
        # a changed scrape re-pairs the scrapes within the pairing tolerance of it (gold_job._divergence): the windows
        # from the one holding its time minus the tolerance to the one holding its time plus it hold every divergence
        # row it may change
        tolerance = F.expr(f"INTERVAL {config.divergence_tolerance_ms / 1000} SECONDS")
        scraped = F.col("scraped_at")
        windows = F.sequence(
            slo_window(scraped - tolerance),
            slo_window(scraped + tolerance),
            F.expr(f"INTERVAL {WINDOW_MS // 1000} SECONDS"),
        )
        parts.append(
            metrics.select("cluster_id", F.lit(METADATA_FRESHNESS).alias("slo"), F.explode(windows).alias("w"))
        )
    if not parts:
        return None
    out = parts[0].toDF(*_WINDOW_KEY)
    for p in parts[1:]:
        out = out.unionByName(p.toDF(*_WINDOW_KEY))
    return out.distinct()


def _in_windows(rows: DataFrame, time_column: str, slo: str, touched: DataFrame) -> DataFrame:
    """The rows whose 5-minute window the SLO's touched windows hold."""
    windows = touched.where(F.col("slo") == slo).select("cluster_id", "window_start")
    return rows.withColumn("window_start", slo_window(F.col(time_column))).join(
        windows, ["cluster_id", "window_start"], "left_semi"
    )


def _recount(lakehouse: Lakehouse, touched: DataFrame, bounds: Bounds, slos: set[str]) -> DataFrame:
    """(cluster_id, slo, window_start, good, total) of the touched windows of `slos` that hold events now."""
    config = lakehouse.config
    upto = bounds.widened(after_us=WINDOW_MS * 1000 - 1)
    counts = []
    if QUORUM_LAG in slos:
        status = lakehouse.read(GOLD_QUORUM_STATUS).where(upto.on("collected_at").sql())
        events = quorum_lag_events(
            _in_windows(status, "collected_at", QUORUM_LAG, touched), config.quorum_lag_time_slo_ms
        )
        counts.append(window_counts(events, QUORUM_LAG))
    if WRITE_AVAILABILITY in slos:
        states = lakehouse.read(SILVER_PARTITION_STATES).where(upto.on("collected_at").sql())
        events = write_availability_events(_in_windows(states, "collected_at", WRITE_AVAILABILITY, touched))
        counts.append(window_counts(events, WRITE_AVAILABILITY))
    if METADATA_FRESHNESS in slos:
        divergence = lakehouse.read(GOLD_METADATA_OFFSET_DIVERGENCE).where(upto.on("scraped_at").sql())
        events = metadata_freshness_events(
            _in_windows(divergence, "scraped_at", METADATA_FRESHNESS, touched), config.divergence_warn_records
        )
        counts.append(window_counts(events, METADATA_FRESHNESS))
    out = counts[0]
    for c in counts[1:]:
        out = out.unionByName(c)
    return out


def _burn(lakehouse: Lakehouse, touched: DataFrame, bounds: Bounds, slos: set[str]) -> None:
    reach_us = (LONGEST_LOOKBACK_MS - WINDOW_MS) * 1000
    around = Bounds("window_start", bounds.lo_us - reach_us, bounds.hi_us + reach_us, bounds.clusters)
    fresh = _recount(lakehouse, touched, bounds, slos)
    scope = burn_scope(touched)
    held = (
        lakehouse.read(GOLD_SLO_BURN)
        .where(around.sql())
        .join(scope, ["cluster_id", "slo"])
        .where(F.col("window_start").between(F.col("lo"), F.col("hi")))
        .drop("lo", "hi")
    )
    rows = cached(build_slo_burn(held, fresh, touched, objectives(lakehouse.config)))
    try:
        groups = rows.select(*_WINDOW_KEY).unionByName(touched.select(*_WINDOW_KEY))
        lakehouse.replace_groups(GOLD_SLO_BURN, rows, groups, around)
    finally:
        release(rows)


def _budget(lakehouse: Lakehouse, days: DataFrame, bounds: Bounds) -> None:
    first, last = _utc_date(bounds.lo_us), _utc_date(bounds.hi_us)
    # the touched days' windows, as gold.slo_burn holds them now
    whole_days = Bounds("window_start", _day_start_us(first), _day_start_us(last) + _DAY_US - 1, bounds.clusters)
    windows = (
        lakehouse.read(GOLD_SLO_BURN)
        .where(whole_days.sql())
        .withColumn("day", utc_day(F.col("window_start")))
        .join(days, _DAY_KEY, "left_semi")
    )
    fresh = daily_counts(windows)
    lo = date.fromordinal(first.toordinal() - (BUDGET_DAYS - 1))
    hi = date.fromordinal(last.toordinal() + (BUDGET_DAYS - 1))
    scope = budget_scope(days)
    held = (
        lakehouse.read(GOLD_SLO_BUDGET)
        .where(_day_filter(lo, hi, bounds.clusters))
        .join(scope, ["cluster_id", "slo"])
        .where(F.col("day").between(F.col("lo"), F.col("hi")))
        .drop("lo", "hi")
    )
    rows = cached(build_slo_budget(held, fresh, days, objectives(lakehouse.config)))
    try:
        groups = rows.select(*_DAY_KEY).unionByName(days.select(*_DAY_KEY))
        lakehouse.replace_groups(GOLD_SLO_BUDGET, rows, groups, _day_bounds(lo, hi, bounds.clusters))
    finally:
        release(rows)


def _cohorts(lakehouse: Lakehouse, quorum_keys: DataFrame, bounds: Bounds) -> None:
    """`bounds`: the touched windows' bounds, which hold the changed quorum snapshots."""
    days = cached(quorum_keys.select("cluster_id", utc_day(F.col("collected_at")).alias("day")).distinct())
    try:
        first, last = _utc_date(bounds.lo_us), _utc_date(bounds.hi_us)
        whole_days = Bounds("collected_at", _day_start_us(first), _day_start_us(last) + _DAY_US - 1, bounds.clusters)
        snapshots = (
            lakehouse.read(SILVER_QUORUM_SNAPSHOTS)
            .where(whole_days.sql())
            .withColumn("day", utc_day(F.col("collected_at")))
            .join(days, ["cluster_id", "day"], "left_semi")
            .drop("day")
            .transform(cached)
        )
        try:
            answers = latest_v2_answers(snapshots)
            voters = (
                lakehouse.read(SILVER_REPLICA_STATES)
                .where(whole_days.sql())
                .where(F.col("is_voter"))
                .join(answers, ["cluster_id", "collected_at"], "left_semi")
            )
            rows = build_cluster_cohorts(snapshots, voters)
            groups = days.select("cluster_id", "day")
            lakehouse.replace_groups(GOLD_CLUSTER_COHORTS, rows, groups, _day_bounds(first, last, bounds.clusters))
        finally:
            release(snapshots)
    finally:
        release(days)


# --- days ------------------------------------------------------------------------------------------------------------


def _utc_date(us: int) -> date:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc).date()


def _day_start_us(day: date) -> int:
    return (day.toordinal() - date(1970, 1, 1).toordinal()) * _DAY_US


def _day_filter(lo: date, hi: date, clusters: tuple[str, ...] | None):
    condition = F.col("day").between(F.lit(lo), F.lit(hi))
    if clusters is not None:
        condition = condition & (F.col("cluster_id").isin(list(clusters)) | F.col("cluster_id").isNull())
    return condition


def _day_bounds(lo: date, hi: date, clusters: tuple[str, ...] | None) -> Bounds:
    """Bounds for a MERGE into a table keyed by a DATE `day`: the SQL compares it as a timestamp, which a session's
    time zone shifts, so the bounds are a day wider on each side than the days they must hold."""
    return Bounds("day", _day_start_us(lo) - _DAY_US, _day_start_us(hi) + 2 * _DAY_US, clusters)
