"""quorumlake.gold.brokers: build_broker_registrations (gold.broker_registrations, one row per broker per window) on
tiny silver.node_metrics rows: only the active controller's scrapes count, the state is the last one of the window,
the heartbeat age the largest, and `fenced_at` the first scrape of the fenced stretch, looked back across windows
through the broker's previous row (the seed)."""

from __future__ import annotations

from datetime import datetime, timedelta

from quorumlake.contract.tables import GOLD_BROKER_REGISTRATIONS
from quorumlake.gold.brokers import build_broker_registrations, seed_before
from tests.frames import check_rows

METRICS = "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, metric STRING, broker_id INT, value DOUBLE"
T0 = datetime(2026, 11, 27, 10, 0, 0)  # a 5-minute window start
WINDOW = 5
STATE = "controller_broker_registration_state"
AGE = "controller_time_since_last_heartbeat_received_ms"
ACTIVE = "controller_active_controller_count"
COLUMNS = ["broker_id", "window_start", "registration_state", "registration_state_code", "max_heartbeat_age_ms",
           "fenced_at", "controller_id", "scrapes", "last_scraped_at"]  # fmt: skip
SCHEMA = (
    "broker_id INT, window_start TIMESTAMP, registration_state STRING, registration_state_code INT, "
    "max_heartbeat_age_ms BIGINT, fenced_at TIMESTAMP, controller_id INT, scrapes BIGINT, last_scraped_at TIMESTAMP"
)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def scrape(at, brokers: dict[int, tuple[int, float | None]], node=1, active=1, cluster="c"):
    """One controller scrape: ActiveControllerCount and, per broker, (state code, heartbeat age or None)."""
    rows = [(cluster, node, at, ACTIVE, None, float(active))]
    for broker, (code, age) in brokers.items():
        rows.append((cluster, node, at, STATE, broker, float(code)))
        if age is not None:
            rows.append((cluster, node, at, AGE, broker, float(age)))
    return rows


def build(spark, rows, seed=None):
    return build_broker_registrations(spark.createDataFrame(rows, METRICS), seed, WINDOW)


def test_states_are_named_and_only_the_active_controller_counts(spark):
    rows = [
        *scrape(s(10), {4: (30, 120), 5: (20, 300), 6: (-1, None), 7: (99, 10)}),
        # a standby controller replays the registrations too, with other values: ignored
        *scrape(s(20), {4: (10, None), 5: (10, None)}, node=2, active=0),
    ]
    check_rows(
        build(spark, rows),
        COLUMNS,
        SCHEMA,
        [
            (4, T0, "active", 30, 120, None, 1, 1, s(10)),
            (5, T0, "controlled_shutdown", 20, 300, None, 1, 1, s(10)),
            (6, T0, "unregistered", -1, None, None, 1, 1, s(10)),
            (7, T0, None, 99, 10, None, 1, 1, s(10)),  # a value without a name keeps its code
        ],
    )


def test_last_state_of_the_window_largest_heartbeat_age_and_the_fenced_stretch(spark):
    rows = [
        *scrape(s(0), {4: (30, 500)}),
        *scrape(s(60), {4: (30, 3900)}),  # heartbeats stopped: the age grows
        *scrape(s(120), {4: (10, 8000)}),  # fenced: the stretch starts here
        *scrape(s(180), {4: (10, 14000)}),
        # the next window: still fenced since s(120), then active again
        *scrape(s(310), {4: (10, 20000)}),
        *scrape(s(370), {4: (30, 400)}),
        # fenced again in the window after: a new stretch
        *scrape(s(610), {4: (10, 9000)}),
    ]
    check_rows(
        build(spark, rows),
        COLUMNS,
        SCHEMA,
        [
            (4, T0, "fenced", 10, 14000, s(120), 1, 4, s(180)),
            (4, s(300), "active", 30, 20000, None, 1, 2, s(370)),
            (4, s(600), "fenced", 10, 9000, s(610), 1, 1, s(610)),
        ],
    )


def test_a_fenced_stretch_continues_from_the_previous_row(spark):
    earlier = [*scrape(s(-200), {4: (30, 100), 5: (30, 100)}), *scrape(s(-100), {4: (10, 9000), 5: (10, 9000)})]
    before = build(spark, earlier)
    seed = seed_before(before, spark.createDataFrame([("c", T0)], "cluster_id STRING, from_at TIMESTAMP"))
    # broker 4 is still fenced; broker 5 came back; a new controller (3) took over
    rows = [*scrape(s(30), {4: (10, 15000), 5: (30, 200)}, node=3)]
    check_rows(
        build(spark, rows, seed),
        COLUMNS,
        SCHEMA,
        [
            (4, T0, "fenced", 10, 15000, s(-100), 3, 1, s(30)),
            (5, T0, "active", 30, 200, None, 3, 1, s(30)),
        ],
    )
    # the same result as building everything at once
    check_rows(
        build(spark, earlier + rows).where(f"window_start = '{T0}'"),
        COLUMNS,
        SCHEMA,
        [
            (4, T0, "fenced", 10, 15000, s(-100), 3, 1, s(30)),
            (5, T0, "active", 30, 200, None, 3, 1, s(30)),
        ],
    )


def test_brokers_and_clusters_are_their_own_rows(spark):
    rows = [*scrape(s(5), {4: (30, 10)}, cluster="a"), *scrape(s(6), {4: (10, 9000)}, cluster="b")]
    got = build(spark, rows).select("cluster_id", "broker_id", "registration_state").collect()
    assert sorted(tuple(r) for r in got) == [("a", 4, "active"), ("b", 4, "fenced")]
    assert build(spark, rows).columns == GOLD_BROKER_REGISTRATIONS.column_names
