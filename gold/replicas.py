"""gold.replica_lag_sli: one row per replica (voter or observer) per cluster per tumbling window.

Percentiles are nearest-rank (`percentile_disc`: the smallest value with at least p% of the window's values at or
below it); maxima and percentiles ignore unknown values; a replica snapshot is good when its caught-up lag is known
and within the SLO, unknown when its caught-up lag is unknown (a DescribeQuorum v0 answer, a replica the leader has
not heard from yet): `sli` = good / the snapshots whose lag is known, NULL when none is (unknown is not bad).
`is_removed_voter` marks the observer rows of a voter removed from the quorum that Kafka still lists as an
observer: a decommissioned voter, not a failing observer.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_REPLICA_LAG_SLI
from quorumlake.gold.quorum import known_sli, window_start


def build_replica_lag_sli(replicas: DataFrame, *, slo_ms: int, window_minutes: int) -> DataFrame:
    """From silver.replica_states rows (all rows of each window given): cluster_id, replica_id, is_voter,
    collected_at, offset_lag, caught_up_lag_ms, fetch_age_ms, and optionally is_removed_voter
    (`quorumlake.gold.membership.mark_removed_voters`; without it no row is a removed voter's)."""
    removed = F.col("is_removed_voter") if "is_removed_voter" in replicas.columns else F.lit(False)
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(window_minutes))
    return (
        replicas.withColumn("window_start", window_start(F.col("collected_at"), window_minutes))
        .groupBy("cluster_id", "replica_id", "is_voter", "window_start")
        .agg(
            F.count(F.lit(1)).cast("bigint").alias("snapshots"),
            F.max("offset_lag").alias("max_offset_lag"),
            F.expr("percentile_disc(0.5) WITHIN GROUP (ORDER BY caught_up_lag_ms)")
            .cast("bigint")
            .alias("p50_caught_up_lag_ms"),
            F.expr("percentile_disc(0.99) WITHIN GROUP (ORDER BY caught_up_lag_ms)")
            .cast("bigint")
            .alias("p99_caught_up_lag_ms"),
            F.max("caught_up_lag_ms").alias("max_caught_up_lag_ms"),
            F.max("fetch_age_ms").alias("max_fetch_age_ms"),
            F.count_if(F.col("caught_up_lag_ms") <= slo_ms).cast("bigint").alias("good_snapshots"),
            F.count_if(F.col("caught_up_lag_ms").isNull()).cast("bigint").alias("unknown_snapshots"),
            F.coalesce(F.bool_or(removed), F.lit(False)).alias("is_removed_voter"),
        )
        .withColumn("window_end", F.col("window_start") + width)
        .withColumn("sli", known_sli(F.col("good_snapshots"), F.col("snapshots"), F.col("unknown_snapshots")))
        .select(*GOLD_REPLICA_LAG_SLI.column_names)
    )
