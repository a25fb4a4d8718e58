"""quorumlake.gold.quorum: follower_lag / build_quorum_status (gold.quorum_status) and build_quorum_health (gold.quorum_health)
on tiny silver-shaped rows.

MaxFollowerLag / MaxFollowerLagTimeMs follow docs/kafka-surfaces.md §3.4: voters only (leader included), the voter with
the lowest log end offset (unknown = -1), first in response order on ties; time 0 when that voter is the leader, the
leader's minus its lastCaughtUp when both are known, else -1. The reference scenario is §1.5: voters 3000, 3001,
3002 (leader, listed last), leader clock 1730000000500 = 03:33:20.500, voter 3001 12 records and 2400 ms behind.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from quorumlake.contract.tables import GOLD_QUORUM_STATUS
from quorumlake.gold.quorum import build_quorum_health, build_quorum_status, follower_lag
from tests.frames import assert_frames_equal, check_rows
from tests.helpers import at

SLO_MS = 2000
STALL_MS = 5000

REPLICAS = (
    "cluster_id STRING, collected_at TIMESTAMP, replica_id INT, is_voter BOOLEAN, position INT, role STRING, "
    "log_end_offset BIGINT, last_caught_up_at TIMESTAMP, caught_up_lag_ms BIGINT, fetch_age_ms BIGINT"
)
LAGS = (
    "cluster_id STRING, collected_at TIMESTAMP, max_follower_lag BIGINT, max_follower_lag_time_ms BIGINT, "
    "voters_within_slo INT"
)
LAG_COLUMNS = [c.split()[0] for c in LAGS.split(", ")]
SNAPSHOTS = (
    "cluster_id STRING, collected_at TIMESTAMP, source STRING, error_code INT, leader_id INT, leader_epoch INT, "
    "high_watermark BIGINT, voter_count INT, observer_count INT, cli_max_follower_lag BIGINT, "
    "cli_max_follower_lag_time_ms BIGINT"
)
SEED = (
    "cluster_id STRING, collected_at TIMESTAMP, source STRING, error_code INT, leader_id INT, leader_epoch INT, "
    "high_watermark BIGINT, max_follower_lag BIGINT, max_follower_lag_time_ms BIGINT, voters INT, "
    "voters_within_slo INT, observers INT, hw_last_increase_at TIMESTAMP, voters_lag_unknown INT, "
    "voters_not_fetching INT"
)
STATUS = (
    "cluster_id STRING, collected_at TIMESTAMP, window_start TIMESTAMP, source STRING, error_code INT, leader_id INT, "
    "leader_epoch INT, high_watermark BIGINT, max_follower_lag BIGINT, max_follower_lag_time_ms BIGINT, voters INT, "
    "voters_within_slo INT, observers INT, is_good BOOLEAN, leader_change INT, hw_last_increase_at TIMESTAMP, "
    "hw_stalled BOOLEAN"
)
HEALTH_IN = (
    "cluster_id STRING, window_start TIMESTAMP, collected_at TIMESTAMP, leader_id INT, leader_change INT, "
    "high_watermark BIGINT, hw_stalled BOOLEAN, max_follower_lag BIGINT, max_follower_lag_time_ms BIGINT, "
    "is_good BOOLEAN"
)
HEALTH = (
    "cluster_id STRING, window_start TIMESTAMP, window_end TIMESTAMP, snapshots BIGINT, leader_changes BIGINT, "
    "leaders INT, high_watermark_advance BIGINT, high_watermark_stalled BOOLEAN, max_follower_lag BIGINT, "
    "max_follower_lag_time_ms BIGINT, good_snapshots BIGINT, sli DOUBLE"
)


LEADER_NOW = at("03:33:20.500")  # 1730000000500
COLLECTED = at("03:33:20.600")  # 1730000000600
W0330 = at("03:30:00")
W0335 = at("03:35:00")


def voter(cluster, collected, replica_id, position, leo, caught_up, now=LEADER_NOW, leader=False):
    """A voter row; caught_up_lag_ms is derived from the leader's clock `now` as silver does."""
    lag = None if caught_up is None else int((now - caught_up) / timedelta(milliseconds=1))
    # a caught-up follower fetched at or after it caught up: its fetch age is taken as its caught-up lag here
    role = "leader" if leader else "follower"
    return (cluster, collected, replica_id, True, position, role, leo, caught_up, lag, lag)


def observer(cluster, collected, replica_id, position, leo, caught_up, now=LEADER_NOW):
    lag = None if caught_up is None else int((now - caught_up) / timedelta(milliseconds=1))
    return (cluster, collected, replica_id, False, position, "observer", leo, caught_up, lag, lag)


def reference_scenario(cluster, collected=COLLECTED, v0=False):
    """docs/kafka-surfaces.md §1.5 (v1; with v0 there are no timestamps, but the leader's own lag is still 0)."""

    def c(hms):
        return None if v0 else at(hms)

    rows = [
        voter(cluster, collected, 3000, 0, 18542, c("03:33:20.480")),
        voter(cluster, collected, 3001, 1, 18530, c("03:33:18.100")),
        voter(cluster, collected, 3002, 2, 18542, c("03:33:20.500"), leader=True),
        observer(cluster, collected, 0, 0, 18542, c("03:33:20.450")),
    ]
    if v0:  # silver gives the leader's own row 0 lag in every version
        rows[2] = rows[2][:-2] + (0, 0)
    return rows


def snapshot(
    cluster,
    collected,
    epoch=7,
    hw=18542,
    leader_id=3002,
    error_code=0,
    voters=3,
    observers=1,
    source="admin",
    cli_lag=None,
    cli_time=None,
):
    return (cluster, collected, source, error_code, leader_id, epoch, hw, voters, observers, cli_lag, cli_time)


def error_snapshot(cluster, collected):
    return (cluster, collected, "admin", 6, None, None, None, 0, 0, None, None)


def status(spark, snapshots, replicas, seed=None, window_minutes=5, stall_ms=STALL_MS):
    seed_df = None if seed is None else spark.createDataFrame(seed, SEED)
    return build_quorum_status(
        spark.createDataFrame(snapshots, SNAPSHOTS),
        spark.createDataFrame(replicas, REPLICAS),
        seed_df,
        slo_ms=SLO_MS,
        window_minutes=window_minutes,
        stall_ms=stall_ms,
    )


# --- follower_lag ------------------------------------------------------------------------------------------------


def test_follower_lag_prints_what_describe_status_prints_for_the_reference_scenario(spark):
    replicas = reference_scenario("v1") + reference_scenario("v0", v0=True)
    expected = spark.createDataFrame(
        [
            ("v1", COLLECTED, 12, 2400, 2),  # 3000 (20 ms) and the leader (0 ms) within the SLO, 3001 (2400 ms) not
            ("v0", COLLECTED, 12, -1, 1),  # v0: no timestamps, so the time is unknown; only the leader's 0 is known
        ],
        LAGS,
    )
    assert_frames_equal(
        follower_lag(spark.createDataFrame(replicas, REPLICAS), SLO_MS).select(*LAG_COLUMNS),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_all_caught_up_with_the_leader_listed_last_picks_the_first_voter(spark):
    replicas = [
        # every voter at the leader's LEO; the tie goes to 3000 (first in response order), caught up 30 ms ago
        voter("tie", COLLECTED, 3000, 0, 100, at("03:33:20.470")),
        voter("tie", COLLECTED, 3001, 1, 100, at("03:33:20.495")),
        voter("tie", COLLECTED, 3002, 2, 100, LEADER_NOW, leader=True),
        # the docs/ops.html example: the same, but 3000's lastCaughtUp is unknown -> 0 / -1
        voter("ops", COLLECTED, 3000, 0, 100, None),
        voter("ops", COLLECTED, 3001, 1, 100, at("03:33:20.495")),
        voter("ops", COLLECTED, 3002, 2, 100, LEADER_NOW, leader=True),
    ]
    expected = spark.createDataFrame(
        [
            ("tie", COLLECTED, 0, 30, 3),
            ("ops", COLLECTED, 0, -1, 2),
        ],
        LAGS,
    )
    assert_frames_equal(
        follower_lag(spark.createDataFrame(replicas, REPLICAS), SLO_MS).select(*LAG_COLUMNS),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_the_leader_itself_as_max_lag_follower_gives_time_zero(spark):
    replicas = [
        # the leader strictly lowest (its LEO behind its followers' fetch offsets for a moment)
        voter("lowest", COLLECTED, 3000, 0, 100, at("03:33:10")),
        voter("lowest", COLLECTED, 3001, 1, 100, at("03:33:10")),
        voter("lowest", COLLECTED, 3002, 2, 95, LEADER_NOW, leader=True),
        # all equal with the leader listed first: the leader is the first minimum
        voter("first", COLLECTED, 3002, 0, 100, LEADER_NOW, leader=True),
        voter("first", COLLECTED, 3000, 1, 100, at("03:33:10")),
        voter("first", COLLECTED, 3001, 2, 100, at("03:33:10")),
    ]
    expected = spark.createDataFrame(
        [
            ("lowest", COLLECTED, 0, 0, 1),
            ("first", COLLECTED, 0, 0, 1),
        ],
        LAGS,
    )
    assert_frames_equal(
        follower_lag(spark.createDataFrame(replicas, REPLICAS), SLO_MS).select(*LAG_COLUMNS),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_a_voter_with_unknown_log_end_offset_lags_leader_leo_plus_one_with_unknown_time(spark):
    replicas = [
        voter("c", COLLECTED, 3000, 0, 18542, at("03:33:20.480")),
        voter("c", COLLECTED, 3001, 1, None, None),  # not fetched since the election: LEO -1, timestamps -1
        voter("c", COLLECTED, 3002, 2, 18542, LEADER_NOW, leader=True),
    ]
    expected = spark.createDataFrame([("c", COLLECTED, 18543, -1, 2)], LAGS)
    assert_frames_equal(
        follower_lag(spark.createDataFrame(replicas, REPLICAS), SLO_MS).select(*LAG_COLUMNS),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_observers_are_never_considered(spark):
    replicas = [
        voter("c", COLLECTED, 3002, 0, 500, LEADER_NOW, leader=True),
        voter("c", COLLECTED, 3000, 1, 500, at("03:33:20.490")),
        voter("c", COLLECTED, 3001, 2, 500, at("03:33:20.480")),
        observer("c", COLLECTED, 0, 0, 3, at("03:20:00")),  # far behind in offsets and in time
        observer("c", COLLECTED, 1, 1, 500, at("03:33:20.490")),  # caught up, but not a voter
    ]
    expected = spark.createDataFrame([("c", COLLECTED, 0, 0, 3)], LAGS)
    assert_frames_equal(
        follower_lag(spark.createDataFrame(replicas, REPLICAS), SLO_MS).select(*LAG_COLUMNS),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


# --- build_quorum_status -----------------------------------------------------------------------------------------


def test_status_rows_carry_the_snapshot_lag_voters_within_slo_and_goodness(spark):
    snapshots = [
        snapshot("slow", COLLECTED),
        snapshot("v0", COLLECTED),
        snapshot("edge", COLLECTED, observers=0),
        error_snapshot("err", COLLECTED),
        # kafka-metadata-quorum --status alone: no replica rows, the printed numbers stand
        snapshot("cli", COLLECTED, source="cli", cli_lag=12, cli_time=1500),
    ]
    replicas = (
        reference_scenario("slow")
        + reference_scenario("v0", v0=True)
        + [
            voter("edge", COLLECTED, 3000, 0, 18540, at("03:33:18.500")),  # exactly the SLO behind: good
            voter("edge", COLLECTED, 3001, 1, 18542, at("03:33:20.500")),
            voter("edge", COLLECTED, 3002, 2, 18542, LEADER_NOW, leader=True),
        ]
    )
    expected = spark.createDataFrame(
        [
            ("slow", COLLECTED, W0330, "admin", 0, 3002, 7, 18542, 12, 2400, 3, 2, 1, False, 0, COLLECTED, False),
            # v0: the lag time is unknown, so the snapshot is neither good nor bad
            ("v0", COLLECTED, W0330, "admin", 0, 3002, 7, 18542, 12, -1, 3, 1, 1, None, 0, COLLECTED, False),
            ("edge", COLLECTED, W0330, "admin", 0, 3002, 7, 18542, 2, 2000, 3, 3, 0, True, 0, COLLECTED, False),
            ("err", COLLECTED, W0330, "admin", 6, None, None, None, None, None, 0, 0, 0, False, 0, None, None),
            # the voters' own lags are unknown without replica rows: NULL, not "none within the SLO"
            ("cli", COLLECTED, W0330, "cli", 0, 3002, 7, 18542, 12, 1500, 3, None, 1, True, 0, COLLECTED, False),
        ],
        STATUS,
    )
    actual = status(spark, snapshots, replicas)
    assert actual.columns == GOLD_QUORUM_STATUS.column_names
    assert_frames_equal(actual.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)
    check_rows(
        actual,
        ["cluster_id", "voters_lag_unknown", "voters_not_fetching"],
        "cluster_id STRING, voters_lag_unknown INT, voters_not_fetching INT",
        # v0: the two followers' lags and fetch times are unknown; --status alone: every voter's; an error: none
        [("slow", 0, 1), ("v0", 2, None), ("edge", 0, 0), ("err", 0, None), ("cli", 3, None)],
    )


def test_leader_change_counts_epoch_increases_between_consecutive_snapshots_that_both_know_it(spark):
    snapshots = [
        snapshot("c", at("03:31:00"), epoch=7),
        snapshot("c", at("03:32:00"), epoch=7),
        snapshot("c", at("03:33:00"), epoch=8),  # 7 -> 8
        error_snapshot("c", at("03:34:00")),  # epoch unknown: no pair with either neighbour
        snapshot("c", at("03:35:00"), epoch=9),
        snapshot("c", at("03:36:00"), epoch=11),  # 9 -> 11 is one pair, one change
        snapshot("other", at("03:32:30"), epoch=3),  # another cluster never pairs with c
    ]
    expected = spark.createDataFrame(
        [
            ("c", at("03:31:00"), 7, 0),
            ("c", at("03:32:00"), 7, 0),
            ("c", at("03:33:00"), 8, 1),
            ("c", at("03:34:00"), None, 0),
            ("c", at("03:35:00"), 9, 0),
            ("c", at("03:36:00"), 11, 1),
            ("other", at("03:32:30"), 3, 0),
        ],
        "cluster_id STRING, collected_at TIMESTAMP, leader_epoch INT, leader_change INT",
    )
    actual = status(spark, snapshots, []).select("cluster_id", "collected_at", "leader_epoch", "leader_change")
    assert_frames_equal(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_high_watermark_last_increase_and_stall(spark):
    def ms(n: int) -> datetime:
        return at("03:33:20") + timedelta(milliseconds=n)

    snapshots = [
        snapshot("c", ms(0), hw=100),  # the cluster's first known snapshot counts as an increase
        snapshot("c", ms(2000), hw=100),
        error_snapshot("c", ms(3000)),  # unknown HW: skipped, no last increase, no stall verdict
        snapshot("c", ms(5000), hw=100),  # exactly the threshold after the increase: not stalled
        snapshot("c", ms(5001), hw=100),  # more than 5000 ms: stalled
        snapshot("c", ms(6000), hw=150),  # greater than the known snapshot before it (the error is skipped)
        snapshot("c", ms(7000), hw=140),  # lower: not an increase
        snapshot("c", ms(11001), hw=140),  # 5001 ms after the increase at 6000
        snapshot("c", ms(12000), hw=145),  # 145 > 140, the known snapshot before it: an increase again
    ]
    expected = spark.createDataFrame(
        [
            ("c", ms(0), 100, ms(0), False),
            ("c", ms(2000), 100, ms(0), False),
            ("c", ms(3000), None, None, None),
            ("c", ms(5000), 100, ms(0), False),
            ("c", ms(5001), 100, ms(0), True),
            ("c", ms(6000), 150, ms(6000), False),
            ("c", ms(7000), 140, ms(6000), False),
            ("c", ms(11001), 140, ms(6000), True),
            ("c", ms(12000), 145, ms(12000), False),
        ],
        "cluster_id STRING, collected_at TIMESTAMP, high_watermark BIGINT, hw_last_increase_at TIMESTAMP, "
        "hw_stalled BOOLEAN",
    )
    actual = status(spark, snapshots, []).select(
        "cluster_id", "collected_at", "high_watermark", "hw_last_increase_at", "hw_stalled"
    )
    assert_frames_equal(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_the_seed_carries_the_previous_epoch_and_the_last_increase_across_a_recompute_boundary(spark):
    seed = [
        # cluster a: the row just before the recomputed range; its HW last rose at 03:33:10
        ("a", at("03:33:20"), "admin", 0, 3002, 7, 200, 0, 5, 3, 3, 1, at("03:33:10"), 0, 0),
        # cluster b: the row just before is an error; the last known-HW row is older and rose at 03:33:00
        ("b", at("03:33:20"), "admin", 6, None, None, None, None, None, 0, 0, 0, None, 0, None),
        ("b", at("03:33:18"), "admin", 0, 3002, 7, 300, 0, 5, 3, 3, 1, at("03:33:00"), 0, 0),
    ]
    snapshots = [
        snapshot("a", at("03:33:21"), epoch=8, hw=200),  # 7 -> 8 against the seed; HW unchanged since 03:33:10
        snapshot("a", at("03:33:22"), epoch=8, hw=201),
        snapshot("b", at("03:33:21"), epoch=8, hw=300),  # the seed's last row knows no epoch: no change
        snapshot("b", at("03:33:22"), epoch=8, hw=300),
    ]
    expected = spark.createDataFrame(
        [
            ("a", at("03:33:21"), 1, at("03:33:10"), True),
            ("a", at("03:33:22"), 0, at("03:33:22"), False),
            ("b", at("03:33:21"), 0, at("03:33:00"), True),
            ("b", at("03:33:22"), 0, at("03:33:00"), True),
        ],
        "cluster_id STRING, collected_at TIMESTAMP, leader_change INT, hw_last_increase_at TIMESTAMP, "
        "hw_stalled BOOLEAN",
    )
    actual = status(spark, snapshots, [], seed=seed).select(
        "cluster_id", "collected_at", "leader_change", "hw_last_increase_at", "hw_stalled"
    )
    # the seed rows themselves are not output
    assert_frames_equal(actual, expected, ignore_row_order=True, ignore_nullable=True)


# --- build_quorum_health -----------------------------------------------------------------------------------------


def test_quorum_health_aggregates_each_window(spark):
    rows = [
        # window 03:30: an error snapshot counts in `snapshots`; the HW advance is last known - first known
        ("c", W0330, at("03:31:00"), 3002, 0, 100, False, 12, 2400, False),
        ("c", W0330, at("03:32:00"), None, 0, None, None, None, None, False),
        ("c", W0330, at("03:33:00"), 3001, 1, 130, False, 0, 10, True),
        ("c", W0330, at("03:34:00"), 3001, 0, 120, True, 18543, -1, False),
        # window 03:35: the only time is unknown (-1), so the window's maximum time is unknown
        ("c", W0335, at("03:36:00"), 3001, 0, 120, False, 5, -1, False),
        # another cluster, errors only
        ("d", W0330, at("03:31:00"), None, 0, None, None, None, None, False),
    ]
    expected = spark.createDataFrame(
        [
            ("c", W0330, W0335, 4, 1, 2, 20, True, 18543, 2400, 1, 0.25),
            ("c", W0335, at("03:40:00"), 1, 0, 1, 0, False, 5, None, 0, 0.0),
            ("d", W0330, W0335, 1, 0, 0, None, False, None, None, 0, 0.0),
        ],
        HEALTH,
    )
    actual = build_quorum_health(spark.createDataFrame(rows, HEALTH_IN), 5)
    assert_frames_equal(actual.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_a_leader_change_across_a_window_start_counts_in_the_later_window(spark):
    snapshots = [
        snapshot("c", at("03:34:50"), epoch=7, hw=100),
        snapshot("c", at("03:35:10"), epoch=8, hw=110),
        snapshot("c", at("03:36:10"), epoch=8, hw=120),
    ]
    expected = spark.createDataFrame(
        [
            # no lag is known in these snapshots (no replica rows): neither good nor bad, no SLI
            ("c", W0330, W0335, 1, 0, 1, 0, False, None, None, 0, None),
            # the 03:34:50 -> 03:35:10 pair counts here; the advance is within the window (120 - 110)
            ("c", W0335, at("03:40:00"), 2, 1, 1, 10, False, None, None, 0, None),
        ],
        HEALTH,
    )
    actual = build_quorum_health(status(spark, snapshots, []), 5)
    assert_frames_equal(actual.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_windows_are_epoch_aligned_for_5_and_1_minute_settings(spark):
    snapshots = [
        snapshot("c", at("03:33:20"), epoch=7, hw=100),
        snapshot("c", at("03:34:59.999"), epoch=7, hw=101),
        snapshot("c", at("03:35:00"), epoch=7, hw=102),
    ]
    cols = ["cluster_id", "window_start", "window_end", "snapshots", "high_watermark_advance"]
    schema = (
        "cluster_id STRING, window_start TIMESTAMP, window_end TIMESTAMP, snapshots BIGINT, "
        "high_watermark_advance BIGINT"
    )

    five = build_quorum_health(status(spark, snapshots, [], window_minutes=5), 5).select(*cols)
    assert_frames_equal(
        five,
        spark.createDataFrame(
            [
                ("c", W0330, W0335, 2, 1),
                ("c", W0335, at("03:40:00"), 1, 0),
            ],
            schema,
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )

    one = build_quorum_health(status(spark, snapshots, [], window_minutes=1), 1).select(*cols)
    assert_frames_equal(
        one,
        spark.createDataFrame(
            [
                ("c", at("03:33:00"), at("03:34:00"), 1, 0),
                ("c", at("03:34:00"), W0335, 1, 0),
                ("c", W0335, at("03:36:00"), 1, 0),
            ],
            schema,
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_voters_within_the_replica_slo_recount_snapshots_with_replica_rows_only(spark):
    from quorumlake.gold.quorum import with_voters_within_slo

    rows = "cluster_id STRING, collected_at TIMESTAMP, voters_within_slo INT"
    status_rows = spark.createDataFrame([("a", COLLECTED, 1), ("cli", COLLECTED, None), ("err", COLLECTED, 0)], rows)
    replicas = spark.createDataFrame(
        [
            ("a", COLLECTED, 3000, True, 0, "follower", 10, None, 1000, 1000),
            ("a", COLLECTED, 3001, True, 1, "follower", 10, None, 1500, 1500),  # exactly the SLO: within
            ("a", COLLECTED, 3002, True, 2, "leader", 10, None, 0, 0),
            ("a", COLLECTED, 3003, True, 3, "follower", 10, None, 1501, 1501),
            ("a", COLLECTED, 3004, True, 4, "follower", 10, None, None, None),  # unknown: not within
            ("a", COLLECTED, 4000, False, 5, "observer", 10, None, 0, 0),  # observers never count
        ],
        REPLICAS,
    )
    expected = spark.createDataFrame([("a", COLLECTED, 3), ("cli", COLLECTED, None), ("err", COLLECTED, 0)], rows)
    actual = with_voters_within_slo(status_rows, replicas, 1500)
    assert_frames_equal(actual, expected, ignore_row_order=True, ignore_nullable=True)


# --- unknown is not bad; voters not fetching ------------------------------------------------------------------------


def test_unknown_lag_is_neither_good_nor_bad_and_the_sli_counts_only_judged_snapshots(spark):
    snapshots = [
        snapshot("c", at("03:31:00")),  # v0-like: every follower's time unknown
        snapshot("c", at("03:32:00")),  # known, within the SLO
        snapshot("c", at("03:33:00")),  # known, over the SLO
        error_snapshot("c", at("03:34:00")),  # an error is bad, never unknown
        snapshot("v0", at("03:31:00")),  # only unknown snapshots in its window: no SLI at all
    ]
    replicas = (
        reference_scenario("c", at("03:31:00"), v0=True)
        + reference_scenario("c", at("03:32:00"))[:1]
        + [
            voter("c", at("03:32:00"), 3001, 1, 18542, at("03:33:20.400")),
            voter("c", at("03:32:00"), 3002, 2, 18542, LEADER_NOW, leader=True),
        ]
        + reference_scenario("c", at("03:33:00"))
        + reference_scenario("v0", at("03:31:00"), v0=True)
    )
    built = status(spark, snapshots, replicas)
    check_rows(
        built,
        ["cluster_id", "collected_at", "is_good", "voters_lag_unknown"],
        "cluster_id STRING, collected_at TIMESTAMP, is_good BOOLEAN, voters_lag_unknown INT",
        [
            ("c", at("03:31:00"), None, 2),
            ("c", at("03:32:00"), True, 0),
            ("c", at("03:33:00"), False, 0),
            ("c", at("03:34:00"), False, 0),
            ("v0", at("03:31:00"), None, 2),
        ],
    )
    check_rows(
        build_quorum_health(built, 5),
        ["cluster_id", "snapshots", "good_snapshots", "unknown_snapshots", "sli"],
        "cluster_id STRING, snapshots BIGINT, good_snapshots BIGINT, unknown_snapshots BIGINT, sli DOUBLE",
        [("c", 4, 1, 1, 1 / 3), ("v0", 1, 0, 1, None)],
    )


def test_an_offset_lag_slo_judges_the_snapshots_whose_time_is_unknown(spark):
    snapshots = [snapshot("near", COLLECTED), snapshot("far", COLLECTED)]
    replicas = reference_scenario("near", v0=True) + [
        voter("far", COLLECTED, 3000, 0, 100, None),
        voter("far", COLLECTED, 3001, 1, 18542, None),
        voter("far", COLLECTED, 3002, 2, 18542, LEADER_NOW, leader=True),
    ]
    for slo, expected in [(-1, [None, None]), (12, [True, False]), (11, [False, False])]:
        built = build_quorum_status(
            spark.createDataFrame(snapshots, SNAPSHOTS),
            spark.createDataFrame(replicas, REPLICAS),
            None,
            slo_ms=SLO_MS,
            window_minutes=5,
            stall_ms=STALL_MS,
            offset_lag_slo=slo,
        )
        got = {r["cluster_id"]: r["is_good"] for r in built.collect()}
        assert [got["near"], got["far"]] == expected, slo  # MaxFollowerLag 12 and 18442


def test_voters_not_fetching_counts_followers_past_the_fetch_timeout(spark):
    def row(replica_id, position, role, fetch_age, is_voter=True):
        return ("c", COLLECTED, replica_id, is_voter, position, role, 10, None, None, fetch_age)

    replicas = [
        row(3002, 0, "leader", 0),
        row(3000, 1, "follower", 2000),  # exactly the timeout: still fetching
        row(3001, 2, "follower", 2001),
        row(3003, 3, "follower", None),  # unknown: not counted either way
        row(4, 0, "observer", 60_000, is_voter=False),  # observers are not voters
        # a snapshot where no follower's fetch time is known (DescribeQuorum v0)
        ("v0", COLLECTED, 3002, True, 0, "leader", 10, None, 0, 0),
        ("v0", COLLECTED, 3000, True, 1, "follower", 10, None, None, None),
    ]
    frame = spark.createDataFrame(replicas, REPLICAS)
    check_rows(
        follower_lag(frame, SLO_MS, fetch_timeout_ms=2000),
        ["cluster_id", "voters_not_fetching"],
        "cluster_id STRING, voters_not_fetching INT",
        [("c", 1), ("v0", None)],
    )
    check_rows(
        follower_lag(frame, SLO_MS, fetch_timeout_ms=1000),
        ["cluster_id", "voters_not_fetching"],
        "cluster_id STRING, voters_not_fetching INT",
        [("c", 2), ("v0", None)],
    )
