"""SLO error budgets and burn rates: gold.slo_burn (per cluster, SLO and 5-minute window) and gold.slo_budget (per
cluster, SLO and UTC day, over the 28 days ending with it).

The three SLOs (docs/contract.md §2, "SLOs"), each a stream of events that are good or not:
- `quorum_lag`: quorum snapshots (gold.quorum_status) whose MaxFollowerLagTimeMs is known; good when the response has
  no error, the quorum has a leader and that lag is between 0 and the lag-time SLO (`quorum_lag_time_slo_ms`);
- `write_availability`: partition snapshots (silver.partition_states); good when the partition has a leader and its
  ISR holds at least the effective min ISR, min(min.insync.replicas, replica count), which is what a broker checks
  an acks=all write against (KIP-966, `Partition.effectiveMinIsr`);
- `metadata_freshness`: node scrapes with a divergence reading (gold.metadata_offset_divergence); good when the node
  is at most `divergence_warn_records` behind the active controller.

Events are counted per 5-minute window (epoch-aligned, by event time; independent of `window_minutes`, because the
burn-rate lookbacks are defined on this grid) and per UTC day (a day holds whole windows). The burn rate over a
lookback is the error rate of the events in the windows that end within it, over the error budget: (1 - good /
total) / (1 - objective) (the SRE workbook's multi-window, multi-burn-rate alerts): `fast_burn` when the 1-hour and
the 5-minute rates are both above 14.4, `slow_burn` when the 6-hour and the 30-minute rates are both above 6.

Incremental: a run recounts the windows its changes touch (`window_counts`), then recomputes the burn rates of every
window whose 6-hour lookback holds one of them (`build_slo_burn`, from the windows' counts alone) and the budgets of
every day whose 28 days hold a touched day (`build_slo_budget`, from the daily counts alone).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_SLO_BUDGET, GOLD_SLO_BURN

QUORUM_LAG = "quorum_lag"
WRITE_AVAILABILITY = "write_availability"
METADATA_FRESHNESS = "metadata_freshness"
SLOS = (QUORUM_LAG, WRITE_AVAILABILITY, METADATA_FRESHNESS)

WINDOW_MINUTES = 5
WINDOW_MS = WINDOW_MINUTES * 60_000
DAY_MS = 86_400_000
# burn-rate lookbacks, in minutes, on the 5-minute grid: (name, minutes)
LOOKBACKS = (("5m", 5), ("30m", 30), ("1h", 60), ("6h", 360))
LONGEST_LOOKBACK_MS = max(minutes for _, minutes in LOOKBACKS) * 60_000
FAST_BURN = 14.4  # 1h and 5m: 2 % of a 30-day budget in an hour
SLOW_BURN = 6.0  # 6h and 30m: 5 % of a 30-day budget in six hours
BUDGET_DAYS = 28

_SERIES = ("cluster_id", "slo")
_WINDOW_KEY = ("cluster_id", "slo", "window_start")
_DAY_KEY = ("cluster_id", "slo", "day")


def slo_window(ts: Column) -> Column:
    """Start of the 5-minute window holding `ts`."""
    return F.timestamp_millis(F.floor(F.unix_millis(ts) / WINDOW_MS) * WINDOW_MS)


def utc_day(ts: Column) -> Column:
    """The UTC date of `ts`, whatever the session's time zone."""
    return F.date_from_unix_date(F.floor(F.unix_millis(ts) / DAY_MS).cast("int"))


# --- events ----------------------------------------------------------------------------------------------------------


def quorum_lag_events(status: DataFrame, slo_ms: int) -> DataFrame:
    """(cluster_id, at, is_good) per gold.quorum_status row whose MaxFollowerLagTimeMs is known."""
    lag = F.col("max_follower_lag_time_ms")
    good = (F.col("error_code") == 0) & F.col("leader_id").isNotNull() & lag.between(0, slo_ms)
    return status.where(lag.isNotNull() & (lag >= 0)).select(
        "cluster_id", F.col("collected_at").alias("at"), F.coalesce(good, F.lit(False)).alias("is_good")
    )


def write_availability_events(partitions: DataFrame) -> DataFrame:
    """(cluster_id, at, is_good) per silver.partition_states row: not offline and the ISR at least the effective min
    ISR, min(min.insync.replicas, replica count)."""
    effective = F.least(F.col("min_isr"), F.size("replicas"))
    good = F.col("leader_id").isNotNull() & (F.col("isr_size") >= effective)
    return partitions.select(
        "cluster_id", F.col("collected_at").alias("at"), F.coalesce(good, F.lit(False)).alias("is_good")
    )


def metadata_freshness_events(divergence: DataFrame, warn_records: int) -> DataFrame:
    """(cluster_id, at, is_good) per gold.metadata_offset_divergence row with a divergence reading."""
    records = F.col("divergence_records")
    return divergence.where(records.isNotNull()).select(
        "cluster_id", F.col("scraped_at").alias("at"), (records <= warn_records).alias("is_good")
    )


def window_counts(events: DataFrame, slo: str) -> DataFrame:
    """(cluster_id, slo, window_start, good, total) per 5-minute window with events."""
    return (
        events.groupBy("cluster_id", slo_window(F.col("at")).alias("window_start"))
        .agg(F.count_if("is_good").alias("good"), F.count(F.lit(1)).alias("total"))
        .select("cluster_id", F.lit(slo).alias("slo"), "window_start", "good", "total")
    )


def objective_of(objectives: Mapping[str, float]) -> Column:
    """The objective of each row's `slo`."""
    column = None
    for slo in SLOS:
        column = (F.when if column is None else column.when)(F.col("slo") == slo, F.lit(float(objectives[slo])))
    return column.cast("double")


def _burn_rate(good: Column, total: Column) -> Column:
    return (F.lit(1.0) - good / total) / (F.lit(1.0) - F.col("objective"))


def _replaced(held: DataFrame, fresh: DataFrame, touched: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """`held`'s counts with those of the touched keys replaced by `fresh`, each row marked `_touched`. Every touched
    key also gets a row of zero counts: one that has no events any more still re-opens the rows whose sums held it
    (the zeros add nothing to any sum, and rows without events are never written)."""
    kept = held.select(*key, "good", "total").join(touched.select(*key), list(key), "left_anti")
    zeros = touched.select(*key, F.lit(0).cast("bigint").alias("good"), F.lit(0).cast("bigint").alias("total"))
    return (
        kept.withColumn("_touched", F.lit(False))
        .unionByName(fresh.select(*key, "good", "total").withColumn("_touched", F.lit(True)))
        .unionByName(zeros.withColumn("_touched", F.lit(True)))
    )


# --- gold.slo_burn ---------------------------------------------------------------------------------------------------


def build_slo_burn(held: DataFrame, fresh: DataFrame, touched: DataFrame, objectives: Mapping[str, float]) -> DataFrame:
    """gold.slo_burn rows of every window whose 6-hour lookback holds a touched window.

    `touched` (cluster_id, slo, window_start): the windows recounted; `fresh`: their counts now (cluster_id, slo,
    window_start, good, total; a touched window without events has none); `held`: the table's rows (the same
    columns at least) of the other windows within 6 hours before and after the touched ones."""
    rows = _replaced(held, fresh, touched, _WINDOW_KEY).withColumn(
        "_t", F.floor(F.unix_millis("window_start") / WINDOW_MS)
    )  # the window's index on the grid

    def ending_here(minutes: int) -> Window:
        return Window.partitionBy(*_SERIES).orderBy("_t").rangeBetween(-(minutes // WINDOW_MINUTES - 1), 0)

    longest = ending_here(LONGEST_LOOKBACK_MS // 60_000)
    sums = []
    for name, minutes in LOOKBACKS:
        frame = ending_here(minutes)
        sums += [F.sum("good").over(frame).alias(f"_good_{name}"), F.sum("total").over(frame).alias(f"_total_{name}")]
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(WINDOW_MINUTES))
    windowed = rows.select(
        "*",
        *sums,
        # a window is affected when a touched one ends within its 6-hour lookback (itself included)
        F.max(F.when(F.col("_touched"), F.col("_t"))).over(longest).isNotNull().alias("_affected"),
    ).where(F.col("_affected") & (F.col("total") > 0))
    burns = windowed.withColumn("objective", objective_of(objectives)).select(
        "*",
        *[_burn_rate(F.col(f"_good_{n}"), F.col(f"_total_{n}")).alias(f"burn_rate_{n}") for n, _ in LOOKBACKS],
    )
    return burns.select(
        "cluster_id",
        "slo",
        "window_start",
        (F.col("window_start") + width).alias("window_end"),
        "objective",
        "good",
        "total",
        "burn_rate_5m",
        "burn_rate_30m",
        "burn_rate_1h",
        "burn_rate_6h",
        ((F.col("burn_rate_1h") > FAST_BURN) & (F.col("burn_rate_5m") > FAST_BURN)).alias("fast_burn"),
        ((F.col("burn_rate_6h") > SLOW_BURN) & (F.col("burn_rate_30m") > SLOW_BURN)).alias("slow_burn"),
    ).select(*GOLD_SLO_BURN.column_names)


def burn_scope(touched: DataFrame) -> DataFrame:
    """(cluster_id, slo, lo, hi) per series: the window starts whose rows a recompute of the touched windows reads
    (6 hours before the first, for its lookback, to 6 hours after the last, whose lookbacks it enters)."""
    reach = F.expr(f"INTERVAL {LONGEST_LOOKBACK_MS // 1000 - WINDOW_MS // 1000} SECONDS")
    return touched.groupBy(*_SERIES).agg(
        (F.min("window_start") - reach).alias("lo"), (F.max("window_start") + reach).alias("hi")
    )


# --- gold.slo_budget -------------------------------------------------------------------------------------------------


def daily_counts(windows: DataFrame) -> DataFrame:
    """(cluster_id, slo, day, good, total) from per-window counts (whole days of them)."""
    return windows.groupBy("cluster_id", "slo", utc_day(F.col("window_start")).alias("day")).agg(
        F.sum("good").alias("good"), F.sum("total").alias("total")
    )


def build_slo_budget(
    held: DataFrame, fresh: DataFrame, touched: DataFrame, objectives: Mapping[str, float]
) -> DataFrame:
    """gold.slo_budget rows of every day whose 28 days hold a touched day.

    `touched` (cluster_id, slo, day): the days recounted; `fresh`: their daily counts now (cluster_id, slo, day, good,
    total; a touched day without events has none); `held`: the table's rows (the same columns at least) of the
    other days within 27 days before and after the touched ones."""
    rows = _replaced(held, fresh, touched, _DAY_KEY).withColumn("_d", F.unix_date("day"))
    span = Window.partitionBy(*_SERIES).orderBy("_d").rangeBetween(-(BUDGET_DAYS - 1), 0)
    summed = rows.select(
        "*",
        F.sum("good").over(span).alias("good_28d"),
        F.sum("total").over(span).alias("total_28d"),
        F.count(F.when(F.col("total") > 0, F.lit(1))).over(span).cast("int").alias("days_28d"),
        F.max(F.when(F.col("_touched"), F.col("_d"))).over(span).isNotNull().alias("_affected"),
    ).where(F.col("_affected") & (F.col("total") > 0))
    attainment = F.col("good_28d") / F.col("total_28d")
    return (
        summed.withColumn("objective", objective_of(objectives))
        .withColumn("attainment_28d", attainment)
        .withColumn(
            "budget_remaining_28d", F.lit(1.0) - (F.lit(1.0) - F.col("attainment_28d")) / (1 - F.col("objective"))
        )
        .select(*GOLD_SLO_BUDGET.column_names)
    )


def budget_scope(touched: DataFrame) -> DataFrame:
    """(cluster_id, slo, lo, hi) per series: the days a recompute of the touched days reads (27 before the first, for
    its 28-day sum, to 27 after the last, whose sums it enters)."""
    reach = BUDGET_DAYS - 1
    return touched.groupBy(*_SERIES).agg(
        F.date_sub(F.min("day"), reach).alias("lo"), F.date_add(F.max("day"), reach).alias("hi")
    )
