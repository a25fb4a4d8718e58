"""quorumlake.gold.divergence: build_metadata_offset_divergence (gold.metadata_offset_divergence, one row per node scrape,
KIP-835) on tiny silver.node_metrics rows.

Each node scrape is paired with the active controller's scrape (controller_active_controller_count = 1) nearest in
time within ±15 s, inclusive, the earlier one on a tie; divergence = that scrape's last committed offset minus the
node's last applied offset (broker_* metrics, controller_* for a controller-only node); NULL with no close scrape.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from quorumlake.gold.divergence import build_metadata_offset_divergence
from tests.frames import assert_frames_equal

METRICS = "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, metric STRING, value DOUBLE, node_role STRING"
DIVERGENCE = (
    "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, node_role STRING, active_controller_id INT, "
    "controller_scraped_at TIMESTAMP, node_last_applied_offset BIGINT, controller_last_committed_offset BIGINT, "
    "divergence_records BIGINT, last_applied_lag_ms BIGINT"
)
TOLERANCE_MS = 15_000
T0 = datetime(2024, 10, 27, 3, 33, 20)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def active_controller(cluster, node, at, committed, applied, lag_ms=0):
    return [
        (cluster, node, at, "controller_active_controller_count", 1.0, "controller"),
        (cluster, node, at, "controller_last_committed_record_offset", float(committed), "controller"),
        (cluster, node, at, "controller_last_applied_record_offset", float(applied), "controller"),
        (cluster, node, at, "controller_last_applied_record_lag_ms", float(lag_ms), "controller"),
    ]


def broker(cluster, node, at, applied, lag_ms):
    return [
        (cluster, node, at, "broker_last_applied_record_offset", float(applied), "broker"),
        (cluster, node, at, "broker_last_applied_record_lag_ms", float(lag_ms), "broker"),
    ]


def divergence(spark, rows):
    return build_metadata_offset_divergence(spark.createDataFrame(rows, METRICS), TOLERANCE_MS)


def test_each_scrape_pairs_with_the_nearest_active_controller_scrape_within_the_tolerance(spark):
    rows = [
        *active_controller("c", 3000, s(0), committed=1000, applied=1000),
        *active_controller("c", 3000, s(30), committed=1300, applied=1300),
        *broker("c", 0, s(10), applied=990, lag_ms=40),  # 10 s from s(0), 20 s from s(30)
        *broker("c", 0, s(15), applied=995, lag_ms=45),  # 15 s from both: the earlier scrape wins
        *broker("c", 0, s(-15), applied=980, lag_ms=50),  # exactly 15 s before s(0): inclusive
        *broker("c", 0, s(-15.001), applied=979, lag_ms=51),  # just outside: the row exists, divergence unknown
        *broker("c", 0, s(50), applied=1250, lag_ms=60),  # 20 s after the last controller scrape
        # an active controller of another cluster, scraped at the same moment, never pairs with cluster c
        *active_controller("d", 3000, s(10), committed=5, applied=5),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 3000, s(0), "controller", 3000, s(0), 1000, 1000, 0, 0),
            ("c", 3000, s(30), "controller", 3000, s(30), 1300, 1300, 0, 0),
            ("c", 0, s(10), "broker", 3000, s(0), 990, 1000, 10, 40),
            ("c", 0, s(15), "broker", 3000, s(0), 995, 1000, 5, 45),
            ("c", 0, s(-15), "broker", 3000, s(0), 980, 1000, 20, 50),
            ("c", 0, s(-15.001), "broker", None, None, 979, None, None, 51),
            ("c", 0, s(50), "broker", None, None, 1250, None, None, 60),
            ("d", 3000, s(10), "controller", 3000, s(10), 5, 5, 0, 0),
        ],
        DIVERGENCE,
    )
    assert_frames_equal(divergence(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_controllers_and_combined_nodes_use_their_own_metrics(spark):
    rows = [
        # the active controller has applied records it has not committed yet: slightly negative
        *active_controller("c", 3002, s(0), committed=18540, applied=18542, lag_ms=312),
        # a controller-only standby: controller_last_applied_record_offset / _lag_ms
        ("c", 3001, s(1), "controller_active_controller_count", 0.0, "controller"),
        ("c", 3001, s(1), "controller_last_committed_record_offset", 18530.0, "controller"),
        ("c", 3001, s(1), "controller_last_applied_record_offset", 18530.0, "controller"),
        ("c", 3001, s(1), "controller_last_applied_record_lag_ms", 900.0, "controller"),
        # a combined node exposes both families: its broker_* metrics are what brokers read
        ("c", 1, s(2), "broker_last_applied_record_offset", 18535.0, "combined"),
        ("c", 1, s(2), "broker_last_applied_record_lag_ms", 40.0, "combined"),
        ("c", 1, s(2), "controller_last_applied_record_offset", 18500.0, "combined"),
        ("c", 1, s(2), "controller_last_applied_record_lag_ms", 70.0, "combined"),
        ("c", 1, s(2), "controller_active_controller_count", 0.0, "combined"),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 3002, s(0), "controller", 3002, s(0), 18542, 18540, -2, 312),
            ("c", 3001, s(1), "controller", 3002, s(0), 18530, 18540, 10, 900),
            ("c", 1, s(2), "combined", 3002, s(0), 18535, 18540, 5, 40),
        ],
        DIVERGENCE,
    )
    assert_frames_equal(divergence(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_without_any_active_controller_scrape_every_row_is_kept_with_unknown_divergence(spark):
    rows = [
        *broker("c", 0, s(0), applied=100, lag_ms=5),
        *broker("c", 1, s(0), applied=101, lag_ms=6),
        ("c", 3000, s(0), "controller_active_controller_count", 0.0, "controller"),
        ("c", 3000, s(0), "controller_last_applied_record_offset", 102.0, "controller"),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 0, s(0), "broker", None, None, 100, None, None, 5),
            ("c", 1, s(0), "broker", None, None, 101, None, None, 6),
            ("c", 3000, s(0), "controller", None, None, 102, None, None, None),
        ],
        DIVERGENCE,
    )
    assert_frames_equal(divergence(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_values_beyond_bigint_are_unknown_not_a_failed_batch(spark):
    # NaN, infinities and 1e300 are valid Prometheus samples; ANSI mode would fail a plain cast to BIGINT
    rows = [
        *active_controller("c", 3000, s(0), committed=float("inf"), applied=1e300, lag_ms=float("nan")),
        *broker("c", 0, s(1), applied=float("nan"), lag_ms=float("-inf")),
        *broker("c", 1, s(2), applied=1000, lag_ms=5),
    ]
    expected = spark.createDataFrame(
        [
            ("c", 3000, s(0), "controller", 3000, s(0), None, None, None, None),
            ("c", 0, s(1), "broker", 3000, s(0), None, None, None, None),
            ("c", 1, s(2), "broker", 3000, s(0), 1000, None, None, 5),
        ],
        DIVERGENCE,
    )
    assert_frames_equal(divergence(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_pairing_matches_a_brute_force_search_across_many_scrapes(spark):
    """Scrapes every few seconds (some exactly a tolerance apart, across the boundaries of the time buckets the
    pairing joins within) pair with the same controller scrape a search over every pair picks."""
    import random

    rng = random.Random(7)
    controllers = sorted({rng.choice([0, 15, 30, 45, 60, 75]) + rng.randint(0, 3) * 7.5 for _ in range(9)})
    brokers = sorted(
        {round(rng.uniform(-20, 110), 3) for _ in range(25)} | {c + 15 for c in controllers} | {-15.0, 90.0}
    )
    rows = [r for i, c in enumerate(controllers) for r in active_controller("c", 3000, s(c), 1000 + i, 1000 + i)]
    rows += [r for b in brokers for r in broker("c", 0, s(b), applied=900, lag_ms=1)]
    got = {r["scraped_at"]: r["controller_scraped_at"] for r in divergence(spark, rows).where("node_id = 0").collect()}
    for b in brokers:
        close = [c for c in controllers if abs(s(b) - s(c)) <= timedelta(milliseconds=TOLERANCE_MS)]
        best = min(close, key=lambda c: (abs(s(b) - s(c)), c)) if close else None
        assert got[s(b)] == (s(best) if best is not None else None), b


def test_the_scope_of_changed_scrapes_is_their_span_per_cluster_widened_by_the_tolerance(spark):
    from quorumlake.gold.divergence import divergence_scope

    changes = spark.createDataFrame(
        [
            ("c1", 3, s(10), "m", 1.0, "broker"),
            ("c1", 1, s(40), "m", 1.0, "controller"),
            ("c2", 3, s(5), "m", 1.0, "broker"),
        ],
        METRICS,
    )
    expected = spark.createDataFrame(
        [("c1", s(8.5), s(41.5)), ("c2", s(3.5), s(6.5))], "cluster_id STRING, lo TIMESTAMP, hi TIMESTAMP"
    )
    assert_frames_equal(divergence_scope(changes, 1500), expected, ignore_row_order=True, ignore_nullable=True)
