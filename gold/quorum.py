"""gold.quorum_status (one row per quorum snapshot) and gold.quorum_health (one row per cluster per tumbling window).

`max_follower_lag` and `max_follower_lag_time_ms` are computed exactly as `kafka-metadata-quorum describe --status`
does (docs/kafka-surfaces.md §3.4): among the voters, the leader included, the one with the lowest log end offset
(an unknown offset counts as -1) is the "max lag follower", the first in response order on ties; the lag is the
leader's LEO minus its LEO; the time is 0 when that voter is the leader, the leader's minus its lastCaughtUp when
both are known, else -1.

Unknown is not bad: a snapshot whose lag time is unknown (-1) is neither good nor bad (`is_good` NULL), and a window's
`sli` is over the snapshots that are judged (`unknown_snapshots` says how many are not). `voters_not_fetching` counts
the followers whose last fetch is older than the fetch timeout: what moves on Kafka 4.x, where the raft metric
`number-unknown-voter-connections` is a constant 0.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_QUORUM_HEALTH, GOLD_QUORUM_STATUS


def window_start(ts: Column, window_minutes: int) -> Column:
    """Start of the epoch-aligned tumbling window holding `ts`."""
    width = window_minutes * 60_000
    return F.timestamp_millis(F.floor(F.unix_millis(ts) / width) * width)


def follower_lag(replicas: DataFrame, slo_ms: int, fetch_timeout_ms: int = 2000) -> DataFrame:
    """Per snapshot: max_follower_lag, max_follower_lag_time_ms, voters_within_slo, voters_lag_unknown and
    voters_not_fetching from its replica rows (needs cluster_id, collected_at, replica_id, is_voter, position, role,
    log_end_offset, last_caught_up_at, caught_up_lag_ms, fetch_age_ms)."""
    voters = replicas.where(F.col("is_voter"))
    leo = F.coalesce(F.col("log_end_offset"), F.lit(-1))
    caught_up = F.unix_millis("last_caught_up_at")
    per_snapshot = voters.groupBy("cluster_id", "collected_at").agg(
        # first minimum in response order: the smallest (LEO, position)
        F.min(
            F.struct(
                leo.alias("leo"),
                F.col("position").alias("position"),
                F.col("role").alias("role"),
                caught_up.alias("caught_up"),
            )
        ).alias("_min"),
        F.max(F.when(F.col("role") == "leader", F.struct(leo.alias("leo"), caught_up.alias("caught_up")))).alias(
            "_leader"
        ),
        F.count_if(F.col("caught_up_lag_ms") <= slo_ms).alias("voters_within_slo"),
        F.count_if(F.col("caught_up_lag_ms").isNull()).alias("voters_lag_unknown"),
        # followers whose last fetch (as the leader saw it) is older than the fetch timeout; unknown ages count
        # neither way, and with none known the number is unknown
        F.when(
            F.count(F.when(F.col("role") != "leader", F.col("fetch_age_ms"))) > 0,
            F.count_if((F.col("role") != "leader") & (F.col("fetch_age_ms") > fetch_timeout_ms)),
        ).alias("voters_not_fetching"),
    )
    lag = F.col("_leader.leo") - F.col("_min.leo")
    lag_time = (
        F.when(F.col("_min.role") == "leader", F.lit(0))
        .when(
            F.col("_leader.caught_up").isNotNull() & F.col("_min.caught_up").isNotNull(),
            F.col("_leader.caught_up") - F.col("_min.caught_up"),
        )
        .otherwise(F.lit(-1))
    )
    return per_snapshot.select(
        "cluster_id",
        "collected_at",
        F.when(F.col("_leader").isNotNull(), lag).cast("bigint").alias("max_follower_lag"),
        F.when(F.col("_leader").isNotNull(), lag_time).cast("bigint").alias("max_follower_lag_time_ms"),
        F.col("voters_within_slo").cast("int").alias("voters_within_slo"),
        F.col("voters_lag_unknown").cast("int").alias("voters_lag_unknown"),
        F.col("voters_not_fetching").cast("int").alias("voters_not_fetching"),
    )


def known_sli(good: Column, snapshots: Column, unknown: Column) -> Column:
    """good / the snapshots whose judgement is known; NULL when none is (unknown is not bad)."""
    known = snapshots - unknown
    return F.when(known > 0, good / known)


def build_quorum_status(
    snapshots: DataFrame,
    replicas: DataFrame,
    seed: DataFrame | None,
    *,
    slo_ms: int,
    window_minutes: int,
    stall_ms: int,
    fetch_timeout_ms: int = 2000,
    offset_lag_slo: int = -1,
) -> DataFrame:
    """One gold row per snapshot of `snapshots` (silver.quorum_snapshots rows, all of a cluster from some time on).

    `replicas` are the silver.replica_states rows of those snapshots. `seed` holds the gold.quorum_status rows
    just before that time (the previous snapshot, and the previous one with a known high watermark), so leader
    changes and high-watermark stalls look back across window starts without reading the whole history.
    `fetch_timeout_ms` judges `voters_not_fetching`; `offset_lag_slo` (records, -1 off) judges the snapshots whose
    lag time is unknown (see `_is_good`).
    """
    lags = follower_lag(replicas, slo_ms, fetch_timeout_ms)
    rows = snapshots.join(lags, ["cluster_id", "collected_at"], "left").select(
        "cluster_id",
        "collected_at",
        "source",
        "error_code",
        "leader_id",
        "leader_epoch",
        "high_watermark",
        # a CLI capture with only --status has no replica rows: the printed numbers are what the CLI computed
        F.coalesce("max_follower_lag", "cli_max_follower_lag").alias("max_follower_lag"),
        F.coalesce("max_follower_lag_time_ms", "cli_max_follower_lag_time_ms").alias("max_follower_lag_time_ms"),
        F.col("voter_count").alias("voters"),
        # without replica rows (--status alone) the voters' lags are unknown: NULL, not 0 voters within the SLO;
        # an error response has no voters, so its 0 (of 0) is known
        F.coalesce("voters_within_slo", F.when(F.col("voter_count") == 0, F.lit(0))).alias("voters_within_slo"),
        F.col("observer_count").alias("observers"),
        # without replica rows every voter's lag is unknown (an error response has none)
        F.coalesce("voters_lag_unknown", "voter_count").alias("voters_lag_unknown"),
        "voters_not_fetching",
        F.lit(False).alias("_is_seed"),
        F.lit(None).cast("timestamp").alias("_seed_increase_at"),
    )
    if seed is not None:
        rows = rows.unionByName(
            seed.select(
                "cluster_id",
                "collected_at",
                "source",
                "error_code",
                "leader_id",
                "leader_epoch",
                "high_watermark",
                "max_follower_lag",
                "max_follower_lag_time_ms",
                "voters",
                "voters_within_slo",
                "observers",
                "voters_lag_unknown",
                "voters_not_fetching",
                F.lit(True).alias("_is_seed"),
                F.col("hw_last_increase_at").alias("_seed_increase_at"),
            )
        )
    by_time = Window.partitionBy("cluster_id").orderBy("collected_at")
    prev_epoch = F.lag("leader_epoch").over(by_time)
    known_hw = F.col("high_watermark").isNotNull()
    with_prev = (
        rows.withColumn("_known_hw", known_hw)
        .withColumn("_prev_epoch", prev_epoch)
        .withColumn(
            "_prev_hw",
            F.lag("high_watermark").over(Window.partitionBy("cluster_id", "_known_hw").orderBy("collected_at")),
        )
    )
    increase_at = F.when(F.col("_is_seed"), F.col("_seed_increase_at")).when(
        F.col("_known_hw") & (F.col("_prev_hw").isNull() | (F.col("high_watermark") > F.col("_prev_hw"))),
        F.col("collected_at"),
    )
    upto = (
        Window.partitionBy("cluster_id", "_known_hw")
        .orderBy("collected_at")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    computed = (
        with_prev.withColumn("_increase_at", increase_at)
        .withColumn("hw_last_increase_at", F.when(F.col("_known_hw"), F.max("_increase_at").over(upto)))
        .withColumn(
            "leader_change",
            F.when(
                F.col("leader_epoch").isNotNull()
                & F.col("_prev_epoch").isNotNull()
                & (F.col("leader_epoch") > F.col("_prev_epoch")),
                1,
            ).otherwise(0),
        )
        .withColumn(
            "hw_stalled",
            F.when(
                F.col("_known_hw"), (F.unix_millis("collected_at") - F.unix_millis("hw_last_increase_at")) > stall_ms
            ),
        )
        .withColumn("is_good", _is_good(slo_ms, offset_lag_slo))
        .withColumn("window_start", window_start(F.col("collected_at"), window_minutes))
        .where(~F.col("_is_seed"))
    )
    return computed.select(*GOLD_QUORUM_STATUS.column_names)


def _is_good(slo_ms: int, offset_lag_slo: int = -1) -> Column:
    """A quorum snapshot is good when it has a leader and its MaxFollowerLagTimeMs is between 0 and the SLO; bad
    when it is an error response, has no leader or a known lag time over the SLO; unknown (NULL) when its lag time
    is unknown (-1: DescribeQuorum v0, a follower the leader has not heard from), unless `offset_lag_slo` >= 0,
    which then judges it by MaxFollowerLag (records)."""
    answered = F.coalesce((F.col("error_code") == 0) & F.col("leader_id").isNotNull(), F.lit(False))
    lag_ms = F.col("max_follower_lag_time_ms")
    by_offset = (
        F.when(F.col("max_follower_lag").isNotNull(), F.col("max_follower_lag") <= offset_lag_slo)
        if offset_lag_slo >= 0
        else F.lit(None).cast("boolean")
    )
    return F.when(~answered, F.lit(False)).when(lag_ms >= 0, lag_ms <= slo_ms).otherwise(by_offset)


def build_quorum_health(status: DataFrame, window_minutes: int) -> DataFrame:
    """One row per cluster per window from gold.quorum_status rows (all snapshots of each window given)."""
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(window_minutes))
    known_hw = F.col("high_watermark").isNotNull()
    known_time = F.when(F.col("max_follower_lag_time_ms") >= 0, F.col("max_follower_lag_time_ms"))
    return (
        status.groupBy("cluster_id", "window_start")
        .agg(
            F.count(F.lit(1)).cast("bigint").alias("snapshots"),
            F.sum("leader_change").cast("bigint").alias("leader_changes"),
            F.count_distinct("leader_id").cast("int").alias("leaders"),
            F.max(F.when(known_hw, F.struct("collected_at", "high_watermark"))).alias("_last_hw"),
            F.min(F.when(known_hw, F.struct("collected_at", "high_watermark"))).alias("_first_hw"),
            F.coalesce(F.bool_or(F.col("hw_stalled")), F.lit(False)).alias("high_watermark_stalled"),
            F.max("max_follower_lag").alias("max_follower_lag"),
            F.max(known_time).alias("max_follower_lag_time_ms"),
            F.count_if(F.col("is_good")).cast("bigint").alias("good_snapshots"),
            F.count_if(F.col("is_good").isNull()).cast("bigint").alias("unknown_snapshots"),
        )
        .select(
            "cluster_id",
            "window_start",
            (F.col("window_start") + width).alias("window_end"),
            "snapshots",
            "leader_changes",
            "leaders",
            (F.col("_last_hw.high_watermark") - F.col("_first_hw.high_watermark")).alias("high_watermark_advance"),
            "high_watermark_stalled",
            "max_follower_lag",
            "max_follower_lag_time_ms",
            "good_snapshots",
            known_sli(F.col("good_snapshots"), F.col("snapshots"), F.col("unknown_snapshots")).alias("sli"),
            "unknown_snapshots",
        )
        .select(*GOLD_QUORUM_HEALTH.column_names)
    )


def seed_before(status: DataFrame, starts: DataFrame) -> DataFrame:
    """For each cluster in `starts` (cluster_id, from_at): its last gold.quorum_status row before from_at and its
    last one with a known high watermark (one row when they are the same)."""
    before = status.join(starts, "cluster_id").where(F.col("collected_at") < F.col("from_at"))
    latest = Window.partitionBy("cluster_id").orderBy(F.col("collected_at").desc())
    latest_known = Window.partitionBy("cluster_id", F.col("high_watermark").isNotNull()).orderBy(
        F.col("collected_at").desc()
    )
    ranked = before.withColumn("_n", F.row_number().over(latest)).withColumn("_nk", F.row_number().over(latest_known))
    picked = ranked.where((F.col("_n") == 1) | ((F.col("_nk") == 1) & F.col("high_watermark").isNotNull()))
    return picked.drop("_n", "_nk", "from_at")


def with_voters_within_slo(status: DataFrame, replicas: DataFrame, slo_ms: int) -> DataFrame:
    """gold.quorum_status rows with `voters_within_slo` counted against `slo_ms` (the replica caught-up SLO, where it
    differs from the quorum's lag-time SLO that `build_quorum_status` counts against). Snapshots without replica
    rows keep what `build_quorum_status` decided (unknown, or 0 for an error response)."""
    within = (
        replicas.where(F.col("is_voter"))
        .groupBy("cluster_id", "collected_at")
        .agg(F.count_if(F.col("caught_up_lag_ms") <= slo_ms).cast("int").alias("_within"))
    )
    return (
        status.join(within, ["cluster_id", "collected_at"], "left")
        .withColumn("voters_within_slo", F.coalesce("_within", "voters_within_slo"))
        .drop("_within")
    )
