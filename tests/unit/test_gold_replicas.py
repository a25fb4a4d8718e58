"""quorumlake.gold.replicas: build_replica_lag_sli (gold.replica_lag_sli, one row per replica per window) on tiny
silver.replica_states rows. Percentiles are nearest-rank; maxima and percentiles ignore unknown (NULL) values; an
unknown caught-up lag is neither good nor bad (`unknown_snapshots`); `sli` = good / the snapshots with a known lag.
"""

from __future__ import annotations

from quorumlake.gold.replicas import build_replica_lag_sli
from tests.frames import assert_frames_equal
from tests.helpers import at

REPLICAS = (
    "cluster_id STRING, replica_id INT, is_voter BOOLEAN, collected_at TIMESTAMP, offset_lag BIGINT, "
    "caught_up_lag_ms BIGINT, fetch_age_ms BIGINT"
)
SLI = (
    "cluster_id STRING, replica_id INT, is_voter BOOLEAN, window_start TIMESTAMP, window_end TIMESTAMP, "
    "snapshots BIGINT, max_offset_lag BIGINT, p50_caught_up_lag_ms BIGINT, p99_caught_up_lag_ms BIGINT, "
    "max_caught_up_lag_ms BIGINT, max_fetch_age_ms BIGINT, good_snapshots BIGINT, sli DOUBLE, unknown_snapshots BIGINT, is_removed_voter BOOLEAN"
)


W0330, W0335, W0340 = at("03:30:00"), at("03:35:00"), at("03:40:00")


def sli(spark, rows, window_minutes=5):
    return build_replica_lag_sli(spark.createDataFrame(rows, REPLICAS), slo_ms=2000, window_minutes=window_minutes)


def test_nearest_rank_percentiles_maxima_and_sli_ignore_unknown_values(spark):
    rows = [
        ("c", 3001, True, at("03:30:10"), 3, 10, 5),
        ("c", 3001, True, at("03:31:10"), 12, 40, 300),
        ("c", 3001, True, at("03:32:10"), None, 30, None),
        ("c", 3001, True, at("03:33:10"), 1, 20, 20),
        ("c", 3001, True, at("03:34:10"), None, None, None),  # LEO and timestamps unknown: counted, not judged
    ]
    expected = spark.createDataFrame(
        [
            # 10,20,30,40: p50 = 20 (the smallest value with >= 50% at or below), p99 = 40
            ("c", 3001, True, W0330, W0335, 5, 12, 20, 40, 40, 300, 4, 1.0, 1, False),
        ],
        SLI,
    )
    assert_frames_equal(sli(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_the_slo_boundary_is_good_and_every_unknown_window_has_no_percentiles(spark):
    rows = [
        ("c", 3001, True, at("03:31:00"), 50, 2000, 100),  # exactly the SLO: good
        ("c", 3001, True, at("03:32:00"), 60, 2001, 100),  # 1 ms over: not good
        ("c", 3001, True, at("03:33:00"), 70, 2500, 100),
        # a v0 follower: every lag in time is unknown
        ("v0", 3000, True, at("03:31:00"), 0, None, None),
        ("v0", 3000, True, at("03:32:00"), 2, None, None),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 3001, True, W0330, W0335, 3, 70, 2001, 2500, 2500, 100, 1, 1 / 3, 0, False),
            # unknown is not bad: no SLI, not 0 %
            ("v0", 3000, True, W0330, W0335, 2, 2, None, None, None, None, 0, None, 2, False),
        ],
        SLI,
    )
    assert_frames_equal(sli(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_one_row_per_replica_role_and_epoch_aligned_window(spark):
    rows = [
        # the same id as a voter and as an observer are two replicas; other clusters never mix in
        ("c", 1, True, at("03:34:59.999"), 0, 0, 0),
        ("c", 1, False, at("03:34:00"), 7, 3000, 3000),
        ("c", 1, True, at("03:35:00"), 4, 100, 90),  # the next window starts exactly here
        ("d", 1, True, at("03:31:00"), 9, 9, 9),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 1, True, W0330, W0335, 1, 0, 0, 0, 0, 0, 1, 1.0, 0, False),
            ("c", 1, False, W0330, W0335, 1, 7, 3000, 3000, 3000, 3000, 0, 0.0, 0, False),
            ("c", 1, True, W0335, W0340, 1, 4, 100, 100, 100, 90, 1, 1.0, 0, False),
            ("d", 1, True, W0330, W0335, 1, 9, 9, 9, 9, 9, 1, 1.0, 0, False),
        ],
        SLI,
    )
    assert_frames_equal(sli(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_one_minute_windows(spark):
    rows = [
        ("c", 3001, True, at("03:33:20"), 1, 100, 10),
        ("c", 3001, True, at("03:33:50"), 2, 3000, 20),
        ("c", 3001, True, at("03:34:10"), 3, 300, 30),
    ]
    expected = spark.createDataFrame(
        [
            # two values: p50 is the first (50% at or below it), p99 the second
            ("c", 3001, True, at("03:33:00"), at("03:34:00"), 2, 2, 100, 3000, 3000, 20, 1, 0.5, 0, False),
            ("c", 3001, True, at("03:34:00"), W0335, 1, 3, 300, 300, 300, 30, 1, 1.0, 0, False),
        ],
        SLI,
    )
    assert_frames_equal(sli(spark, rows, window_minutes=1), expected, ignore_row_order=True, ignore_nullable=True)
