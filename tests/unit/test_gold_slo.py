"""quorumlake.gold.slo and quorumlake.gold.cohorts on tiny frames: each SLO's event and good rule, the 5-minute grid
and UTC days, burn rates over their lookbacks and which windows a recount re-opens, the 28-day budget arithmetic,
and the cohort rules."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from quorumlake.contract.tables import GOLD_CLUSTER_COHORTS, GOLD_SLO_BUDGET, GOLD_SLO_BURN
from quorumlake.gold.cohorts import build_cluster_cohorts, latest_v2_answers
from quorumlake.gold.slo import (
    METADATA_FRESHNESS,
    QUORUM_LAG,
    WRITE_AVAILABILITY,
    build_slo_budget,
    build_slo_burn,
    daily_counts,
    metadata_freshness_events,
    quorum_lag_events,
    slo_window,
    utc_day,
    window_counts,
    write_availability_events,
)
from quorumlake.pipelines.config import Config
from tests.frames import check_rows

pytestmark = pytest.mark.usefixtures("drop_cached")

OBJECTIVES = {QUORUM_LAG: 0.999, WRITE_AVAILABILITY: 0.999, METADATA_FRESHNESS: 0.99}
T0 = datetime(2024, 10, 27, 12, 0, 0)
EVENTS = "cluster_id STRING, at TIMESTAMP, is_good BOOLEAN"
COUNTS = "cluster_id STRING, slo STRING, window_start TIMESTAMP, good BIGINT, total BIGINT"
DAYS = "cluster_id STRING, slo STRING, day DATE, good BIGINT, total BIGINT"


def t(minutes: float = 0, seconds: float = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def test_the_objectives_are_settings_with_the_issue_s_defaults():
    config = Config()
    assert (
        config.slo_objective_quorum_lag,
        config.slo_objective_write_availability,
        config.slo_objective_metadata_freshness,
    ) == (0.999, 0.999, 0.99)


# --- events ----------------------------------------------------------------------------------------------------------


def test_quorum_lag_counts_snapshots_whose_lag_time_is_known(spark):
    status = spark.createDataFrame(
        [
            ("c", t(0), 0, 1, 0),  # the leader is the max-lag voter: good
            ("c", t(1), 0, 1, 2000),  # at the SLO: good
            ("c", t(2), 0, 1, 2001),  # over it: bad
            ("c", t(3), 0, 1, -1),  # unknown (-1): not an event
            ("c", t(4), 0, 1, None),  # unknown (NULL): not an event
            ("c", t(5), 6, None, None),  # an error response: no lag, not an event
            ("c", t(6), 0, None, 300),  # no leader (a CLI --status capture): an event, not good
        ],
        "cluster_id STRING, collected_at TIMESTAMP, error_code INT, leader_id INT, max_follower_lag_time_ms BIGINT",
    )
    check_rows(
        quorum_lag_events(status, 2000),
        ["cluster_id", "at", "is_good"],
        EVENTS,
        [("c", t(0), True), ("c", t(1), True), ("c", t(2), False), ("c", t(6), False)],
    )


def test_write_availability_judges_the_isr_against_the_effective_min_isr(spark):
    partitions = spark.createDataFrame(
        [
            ("c", t(0), 1, [1, 2, 3], 2, 3),  # full ISR
            ("c", t(1), 1, [1, 2, 3], 2, 2),  # at min ISR: still writable
            ("c", t(2), 1, [1, 2, 3], 2, 1),  # under min ISR
            ("c", t(3), None, [1, 2, 3], 2, 3),  # offline
            ("c", t(4), 1, [1, 2], 3, 2),  # min.insync.replicas 3 on 2 replicas: effective 2, writable
            ("c", t(5), 1, [1, 2], 3, 1),  # ... under the effective 2
        ],
        "cluster_id STRING, collected_at TIMESTAMP, leader_id INT, replicas ARRAY<INT>, min_isr INT, isr_size INT",
    )
    check_rows(
        write_availability_events(partitions),
        ["cluster_id", "at", "is_good"],
        EVENTS,
        [
            ("c", t(0), True),
            ("c", t(1), True),
            ("c", t(2), False),
            ("c", t(3), False),
            ("c", t(4), True),
            ("c", t(5), False),
        ],
    )


def test_metadata_freshness_counts_scrapes_with_a_divergence_reading(spark):
    divergence = spark.createDataFrame(
        [("c", t(0), 1000), ("c", t(1), 1001), ("c", t(2), -3), ("c", t(3), None)],
        "cluster_id STRING, scraped_at TIMESTAMP, divergence_records BIGINT",
    )
    check_rows(
        metadata_freshness_events(divergence, 1000),
        ["cluster_id", "at", "is_good"],
        EVENTS,
        [("c", t(0), True), ("c", t(1), False), ("c", t(2), True)],
    )


def test_windows_are_five_epoch_aligned_minutes_and_days_are_utc(spark):
    events = spark.createDataFrame(
        [
            ("c", datetime(2024, 10, 27, 12, 4, 59, 999000), True),
            ("c", datetime(2024, 10, 27, 12, 5, 0), False),
            ("c", datetime(2024, 10, 27, 12, 9, 0), True),
            ("c", datetime(2024, 10, 27, 23, 59, 59, 999000), False),
            ("c", datetime(2024, 10, 28, 0, 0, 0), True),
        ],
        EVENTS,
    )
    counts = window_counts(events, QUORUM_LAG)
    check_rows(
        counts,
        ["cluster_id", "slo", "window_start", "good", "total"],
        COUNTS,
        [
            ("c", QUORUM_LAG, datetime(2024, 10, 27, 12, 0), 1, 1),
            ("c", QUORUM_LAG, datetime(2024, 10, 27, 12, 5), 1, 2),
            ("c", QUORUM_LAG, datetime(2024, 10, 27, 23, 55), 0, 1),
            ("c", QUORUM_LAG, datetime(2024, 10, 28, 0, 0), 1, 1),
        ],
    )
    check_rows(
        daily_counts(counts),
        ["cluster_id", "slo", "day", "good", "total"],
        DAYS,
        [("c", QUORUM_LAG, date(2024, 10, 27), 2, 4), ("c", QUORUM_LAG, date(2024, 10, 28), 1, 1)],
    )
    # the session's time zone does not move a day (the suite runs in UTC; a session in another zone must agree)
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        days = events.select(utc_day(events["at"]).alias("d"), slo_window(events["at"]).alias("w")).collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert [r["d"] for r in days] == [date(2024, 10, 27)] * 4 + [date(2024, 10, 28)]


# --- burn rates ------------------------------------------------------------------------------------------------------


def burn_reference(series: dict[datetime, tuple[int, int]], objective: float) -> dict[datetime, tuple]:
    """Burn rates and flags per window, computed here the plain way: sums over the windows that start within the
    lookback ending at the window's end."""
    out = {}
    for w in series:
        rates = []
        for minutes in (5, 30, 60, 360):
            inside = [v for s, v in series.items() if w - timedelta(minutes=minutes - 5) <= s <= w]
            good, total = sum(g for g, _ in inside), sum(n for _, n in inside)
            rates.append((1.0 - good / total) / (1.0 - objective))
        fast = rates[2] > 14.4 and rates[0] > 14.4
        slow = rates[3] > 6 and rates[1] > 6
        out[w] = (*series[w], *rates, fast, slow)
    return out


def counts_frame(spark, series: dict[datetime, tuple[int, int]], slo: str = QUORUM_LAG, cluster: str = "c"):
    return spark.createDataFrame([(cluster, slo, w, g, n) for w, (g, n) in sorted(series.items())], COUNTS)


BURN_COLUMNS = [
    "window_start",
    "good",
    "total",
    "burn_rate_5m",
    "burn_rate_30m",
    "burn_rate_1h",
    "burn_rate_6h",
    "fast_burn",
    "slow_burn",
]


def burn_rows(df) -> dict[datetime, tuple]:
    return {r["window_start"]: tuple(r[c] for c in BURN_COLUMNS[1:]) for r in df.collect()}


def approx_rows(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12), key


def test_burn_rates_over_their_lookbacks_and_the_flags(spark):
    # 12 hours of windows; a burst of bad events between 3:00 and 3:20 (fast burn), a trickle after (slow burn)
    series = {}
    for i in range(144):
        w = t(5 * i)
        bad = 30 if 36 <= i < 40 else (1 if 60 <= i < 100 else 0)
        if i in (20, 21):  # windows without events have no row: the lookbacks are times, not rows
            continue
        series[w] = (100 - bad, 100)
    counts = counts_frame(spark, series)
    rows = build_slo_burn(counts.limit(0), counts, counts.select("cluster_id", "slo", "window_start"), OBJECTIVES)
    assert rows.columns == GOLD_SLO_BURN.column_names
    got = burn_rows(rows)
    want = burn_reference(series, 0.999)
    approx_rows(got, want)
    assert {w for w, r in got.items() if r[-2]} == {t(5 * i) for i in range(36, 40)}
    slow = {w for w, r in got.items() if r[-1]}
    assert t(5 * 36) in slow and t(5 * 99) in slow and t(5 * 110) not in slow
    row = rows.where(rows.window_start == t(0)).first()
    assert (row["window_end"], row["objective"], row["slo"]) == (t(5), 0.999, QUORUM_LAG)


def test_a_recount_re_opens_its_window_and_the_six_hours_after_it(spark):
    # the table holds 9 hours of clean windows; a late file makes 2:00 bad and removes every event of 2:05
    series = {t(5 * i): (10, 10) for i in range(108)}
    held = counts_frame(spark, series)
    fresh = counts_frame(spark, {t(120): (0, 10)})
    touched = spark.createDataFrame([("c", QUORUM_LAG, t(120), 0, 0), ("c", QUORUM_LAG, t(125), 0, 0)], COUNTS)
    got = burn_rows(build_slo_burn(held, fresh, touched.select("cluster_id", "slo", "window_start"), OBJECTIVES))
    after = {**series, t(120): (0, 10)}
    del after[t(125)]
    want = burn_reference(after, 0.999)
    # 2:00 itself, not 2:05 (no events any more: the write deletes it), and every window up to 8:00, the last whose
    # 6-hour lookback held 2:05
    assert sorted(got) == [w for w in sorted(want) if t(120) <= w <= t(125 + 355)]
    approx_rows(got, {w: want[w] for w in got})
    # a series (another cluster or SLO) is never mixed in
    other = counts_frame(spark, {t(120): (0, 10)}, cluster="d").union(
        counts_frame(spark, {t(120): (0, 10)}, METADATA_FRESHNESS)
    )
    again = build_slo_burn(held.union(other), fresh, touched.select("cluster_id", "slo", "window_start"), OBJECTIVES)
    assert burn_rows(again) == got


# --- budgets ---------------------------------------------------------------------------------------------------------


def budget_reference(days: dict[date, tuple[int, int]], objective: float) -> dict[date, tuple]:
    out = {}
    for d, (good, total) in days.items():
        inside = [v for e, v in days.items() if d - timedelta(days=27) <= e <= d]
        g, n = sum(x for x, _ in inside), sum(x for _, x in inside)
        attainment = g / n
        out[d] = (good, total, g, n, len(inside), attainment, 1 - (1 - attainment) / (1 - objective))
    return out


BUDGET_COLUMNS = [
    "day",
    "good",
    "total",
    "good_28d",
    "total_28d",
    "days_28d",
    "attainment_28d",
    "budget_remaining_28d",
]


def budget_rows(df) -> dict[date, tuple]:
    return {r["day"]: tuple(r[c] for c in BUDGET_COLUMNS[1:]) for r in df.collect()}


def days_frame(spark, days: dict[date, tuple[int, int]], slo: str = WRITE_AVAILABILITY):
    return spark.createDataFrame([("c", slo, d, g, n) for d, (g, n) in sorted(days.items())], DAYS)


def test_28_day_budgets_with_short_history_gaps_and_overspending(spark):
    first = date(2024, 10, 1)
    history = {first + timedelta(days=i): (1000, 1000) for i in range(40) if i not in (5, 6)}  # two days without data
    history[first + timedelta(days=2)] = (990, 1000)  # 1 % bad: ten times the 0.1 % budget of a day
    frame = days_frame(spark, history)
    rows = build_slo_budget(frame.limit(0), frame, frame.select("cluster_id", "slo", "day"), OBJECTIVES)
    assert rows.columns == GOLD_SLO_BUDGET.column_names
    got = budget_rows(rows)
    want = budget_reference(history, 0.999)
    approx_rows(got, want)
    assert got[first][3:5] == (1000, 1)  # day 1: a sum of one day
    assert got[first + timedelta(days=27)][4] == 26  # 28 days of calendar, two of them without data
    assert got[first + timedelta(days=29)][2] == 26 * 1000 - 10  # day 3 still inside: the span is days 3..30
    assert got[first + timedelta(days=30)][2] == 26 * 1000  # ... and out on day 31
    assert got[first + timedelta(days=2)][-1] == pytest.approx(1 - (10 / 3000) / 0.001)  # negative: overspent
    assert got[first + timedelta(days=2)][-1] < 0


def test_a_recounted_day_re_opens_itself_and_the_27_days_after_it(spark):
    first = date(2024, 10, 1)
    history = {first + timedelta(days=i): (100, 100) for i in range(60)}
    held = days_frame(spark, history)
    touched = days_frame(spark, {first + timedelta(days=10): (0, 0), first + timedelta(days=11): (0, 0)})
    fresh = days_frame(spark, {first + timedelta(days=10): (50, 100)})  # day 12 lost its events
    got = budget_rows(build_slo_budget(held, fresh, touched.select("cluster_id", "slo", "day"), OBJECTIVES))
    after = {**history, first + timedelta(days=10): (50, 100)}
    del after[first + timedelta(days=11)]
    want = budget_reference(after, 0.999)
    # day 11 itself, not day 12 (no events any more), and every day up to day 39, the last whose 28 days held day 12
    assert sorted(got) == [d for d in sorted(want) if first + timedelta(days=10) <= d <= first + timedelta(days=38)]
    approx_rows(got, {d: want[d] for d in got})


# --- cohorts ---------------------------------------------------------------------------------------------------------

SNAPSHOTS = (
    "cluster_id STRING, collected_at TIMESTAMP, source STRING, api_version INT, error_code INT, kafka_version STRING, "
    "metadata_version_level INT, kraft_version INT"
)
VOTERS = "cluster_id STRING, collected_at TIMESTAMP, is_voter BOOLEAN, replica_directory_id STRING"
D1, D2, D3 = datetime(2024, 10, 27), datetime(2024, 10, 28), datetime(2024, 10, 29)


def test_cohorts_from_what_the_collector_recorded_else_from_describe_quorum(spark):
    h = timedelta(hours=1)
    snapshots = spark.createDataFrame(
        [
            # day 1: the collector recorded 3.9 then (after an upgrade) 4.1; the latest recorded values win
            ("rec", D1 + h, "admin", 2, 0, "3.9", 21, 0),
            ("rec", D1 + 2 * h, "admin", 2, 0, "4.1", 27, 1),
            ("rec", D1 + 3 * h, "cli", None, 0, None, None, None),  # a later CLI capture records nothing
            # a level newer than the table knows
            ("rec", D2 + h, "admin", 2, 0, "4.9", 99, 1),
            # no record: v2 answers say 3.9+, the voters of the day's latest good v2 answer say the mode
            ("v2", D1 + h, "admin", 2, 0, None, None, None),
            ("v2", D1 + 2 * h, "admin", 2, 0, None, None, None),
            ("v2", D1 + 3 * h, "admin", 2, 6, None, None, None),  # an error answer has no voters
            ("v2", D2 + h, "admin", 2, 0, None, None, None),
            # v1 and CLI only: unknown
            ("v1", D1 + h, "admin", 1, 0, None, None, None),
            ("v1", D3 + h, "cli", None, 0, None, None, None),
        ],
        SNAPSHOTS,
    )
    voters = spark.createDataFrame(
        [
            ("v2", D1 + h, True, "ILZ5MPTeRWakmJu99uBJCA"),  # an earlier answer: not the day's latest
            ("v2", D1 + 2 * h, True, None),
            ("v2", D1 + 2 * h, False, "3Db5QLSqSZieL3rJBUUegA"),  # observers always have directory ids
            ("v2", D2 + h, True, None),
            ("v2", D2 + h, True, "g42deArWBTRM5A1yuVpMCg"),
        ],
        VOTERS,
    )
    latest = latest_v2_answers(snapshots)
    check_rows(
        latest,
        ["cluster_id", "collected_at"],
        "cluster_id STRING, collected_at TIMESTAMP",
        [("rec", D1 + 2 * h), ("rec", D2 + h), ("v2", D1 + 2 * h), ("v2", D2 + h)],
    )
    rows = build_cluster_cohorts(snapshots, voters.join(latest, ["cluster_id", "collected_at"], "left_semi"))
    assert rows.columns == GOLD_CLUSTER_COHORTS.column_names
    check_rows(
        rows,
        GOLD_CLUSTER_COHORTS.column_names,
        "cluster_id STRING, day DATE, kafka_version STRING, metadata_version STRING, metadata_version_level INT, "
        "kraft_version INT, quorum_mode STRING, last_snapshot_at TIMESTAMP",
        [
            ("rec", D1.date(), "4.1", "4.1-IV1", 27, 1, "dynamic", D1 + 3 * h),
            ("rec", D2.date(), "4.9", "level 99", 99, 1, "dynamic", D2 + h),
            ("v2", D1.date(), "3.9+", None, None, None, "static", D1 + 3 * h),
            ("v2", D2.date(), "3.9+", None, None, None, "dynamic", D2 + h),
            ("v1", D1.date(), None, None, None, None, None, D1 + h),
            ("v1", D3.date(), None, None, None, None, None, D3 + h),
        ],
    )


def test_changes_touch_their_windows_and_a_scrape_those_within_the_pairing_tolerance(spark):
    from quorumlake.pipelines.jobs.slo_job import _touched_windows

    quorum = spark.createDataFrame([("c", t(4, 59.9)), ("c", t(3))], "cluster_id STRING, collected_at TIMESTAMP")
    partitions = spark.createDataFrame([("c", t(12))], "cluster_id STRING, collected_at TIMESTAMP")
    metrics = spark.createDataFrame([("d", t(30, 10))], "cluster_id STRING, scraped_at TIMESTAMP")
    rows = lambda config: {tuple(r) for r in _touched_windows(config, quorum, partitions, metrics).collect()}
    assert rows(Config()) == {
        ("c", QUORUM_LAG, t(0)),
        ("c", WRITE_AVAILABILITY, t(10)),
        ("d", METADATA_FRESHNESS, t(25)),  # 15 s before 12:30:10 is in the window of 12:25
        ("d", METADATA_FRESHNESS, t(30)),
    }
    wide = {r for r in rows(Config(divergence_tolerance_ms=600_000)) if r[1] == METADATA_FRESHNESS}
    assert wide == {("d", METADATA_FRESHNESS, t(m)) for m in (20, 25, 30, 35, 40)}
