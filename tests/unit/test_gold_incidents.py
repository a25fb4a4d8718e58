"""quorumlake.gold.anomalies and quorumlake.gold.incidents: each anomaly source, episodes, grouping anomalies into
incidents with the grace period, severity, trigger, peak partition counts and the summary, on tiny frames."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_INCIDENT_EVENTS, GOLD_INCIDENTS
from quorumlake.gold.anomalies import (
    EPISODE_COLUMNS,
    broker_down,
    broker_fenced,
    build_episodes,
    controller_down,
    episodes,
    hw_stalled,
    leaderless,
    metadata_divergence,
    partition_status,
    voter_lagging,
)
from quorumlake.gold.incidents import build_incident_events, build_incidents, group_episodes
from tests.frames import check_rows

T0 = datetime(2024, 10, 27, 3, 33, 20)
EPISODE = (
    "cluster_id STRING, kind STRING, node_id INT, topic STRING, partition INT, event_at TIMESTAMP, "
    "ended_at TIMESTAMP, observations BIGINT, peak DOUBLE, detail STRING, critical BOOLEAN"
)
EP_COLS = list(EPISODE_COLUMNS)
PARTITIONS = (
    "cluster_id STRING, collected_at TIMESTAMP, topic STRING, partition INT, leader_id INT, replicas ARRAY<INT>, "
    "isr ARRAY<INT>, min_isr INT, isr_size INT, status STRING"
)
REPLICAS = (
    "cluster_id STRING, collected_at TIMESTAMP, replica_id INT, is_voter BOOLEAN, role STRING, fetch_age_ms BIGINT, "
    "caught_up_lag_ms BIGINT"
)


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def part(minute, topic, p, leader, replicas, isr, min_isr=2):
    size = len(isr)
    status = (
        "offline"
        if leader is None
        else "under_min_isr"
        if size < min_isr
        else "at_min_isr"
        if size == min_isr
        else "under_replicated"
        if size < len(replicas)
        else "healthy"
    )
    return ("c", t(minute), topic, p, leader, replicas, isr, min_isr, size, status)


# Brokers 4, 5, 6; "orders" RF 3 (min ISR 2), "audit" RF 2 on brokers 5 and 6 (min ISR 1).
def broker_story():
    return [
        part(0, "orders", 0, 4, [4, 5, 6], [4, 5, 6]),
        part(0, "audit", 0, 5, [5, 6], [5, 6], 1),
        part(1, "orders", 0, 4, [4, 5, 6], [4, 5]),  # broker 6 stopped
        part(1, "audit", 0, 5, [5, 6], [5], 1),
        part(2, "orders", 0, 4, [4, 5, 6], [4]),  # broker 5 too: audit-0 offline, its ISR keeps 5
        part(2, "audit", 0, None, [5, 6], [5], 1),
        part(3, "orders", 0, 4, [4, 5, 6], [4, 5, 6]),  # both back
        part(3, "audit", 0, 5, [5, 6], [5, 6], 1),
    ]


def test_broker_down_is_a_broker_in_no_isr_of_a_partition_with_a_leader(spark):
    frame = spark.createDataFrame(broker_story(), PARTITIONS)
    got = episodes(*broker_down(frame))
    check_rows(
        got,
        ["kind", "node_id", "event_at", "ended_at", "observations", "critical"],
        "kind STRING, node_id INT, event_at TIMESTAMP, ended_at TIMESTAMP, observations BIGINT, critical BOOLEAN",
        [("broker_down", 6, t(1), t(3), 2, False), ("broker_down", 5, t(2), t(3), 1, False)],
    )


def test_a_broker_down_is_seen_whatever_else_a_partition_lists(spark):
    rows = [
        part(0, "orders", 0, 4, [4, 5, 6], [4, None]),  # a NULL in the ISR does not put 5 or 6 in it
        part(0, "audit", 0, 5, [5], [5, 7], 1),  # 7 in an ISR but a replica of nothing: not a broker that is down
        part(0, "logs", 0, 4, [4, 4], [4], 1),  # broker 4 listed twice
        part(1, "orders", 0, 4, [4, 5, 6], [4, 5, 6]),
        part(1, "audit", 0, 5, [5], [5], 1),
        part(1, "logs", 0, 4, [4, 4], [4], 1),
    ]
    times, down = broker_down(spark.createDataFrame(rows, PARTITIONS))
    check_rows(
        down,
        ["node_id", "at", "detail"],
        "node_id INT, at TIMESTAMP, detail STRING",
        [(6, t(0), "broker 6 in no ISR (replica of 1 partitions)")],
    )
    assert times.count() == 2


def test_partition_kinds_follow_the_status_and_escalation_moves_between_kinds(spark):
    frame = spark.createDataFrame(broker_story(), PARTITIONS)
    got = episodes(*partition_status(frame))
    check_rows(
        got,
        ["kind", "topic", "partition", "event_at", "ended_at", "critical"],
        "kind STRING, topic STRING, partition INT, event_at TIMESTAMP, ended_at TIMESTAMP, critical BOOLEAN",
        [
            ("partitions_at_min_isr", "orders", 0, t(1), t(2), False),
            ("partitions_under_min_isr", "orders", 0, t(2), t(3), True),
            ("partitions_at_min_isr", "audit", 0, t(1), t(2), False),
            ("partitions_offline", "audit", 0, t(2), t(3), True),
        ],
    )


def voter_rows():
    rows = []
    for m in range(5):
        rows.append(("c", t(m), 1, True, "leader", 0, 0))
        rows.append(("c", t(m), 4, False, "observer", 100, 100))
    # voter 2: fetching but lagging at t1, t2; voter 3 stopped at t2 (fetch age grows), back at t4
    for m, (fetch2, lag2), fetch3 in [
        (0, (100, 100), 100),
        (1, (300, 3500), 400),
        (2, (200, 4000), 2500),
        (3, (100, 100), 62500),
        (4, (100, 100), 100),
    ]:
        rows.append(("c", t(m), 2, True, "follower", fetch2, lag2))
        rows.append(("c", t(m), 3, True, "follower", fetch3, fetch3))
    return rows


def test_controller_down_and_voter_lagging(spark):
    frame = spark.createDataFrame(voter_rows(), REPLICAS)
    down = episodes(*controller_down(frame, 2000))
    lagging = episodes(*voter_lagging(frame, 2000, 2000))
    cols = ["kind", "node_id", "event_at", "ended_at", "observations", "peak"]
    schema = "kind STRING, node_id INT, event_at TIMESTAMP, ended_at TIMESTAMP, observations BIGINT, peak DOUBLE"
    check_rows(down, cols, schema, [("controller_down", 3, t(2), t(4), 2, 62500.0)])
    check_rows(lagging, cols, schema, [("voter_lagging", 2, t(1), t(3), 2, 4000.0)])


def test_a_voter_that_never_fetched_from_the_new_leader_is_down(spark):
    frame = spark.createDataFrame(
        [
            ("c", t(0), 2, True, "leader", 0, 0),
            ("c", t(0), 1, True, "follower", None, None),
            ("c", t(0), 3, True, "follower", 300, 300),
            # DescribeQuorum v0: no fetch times at all, nothing is known to be down
            ("v0", t(0), 2, True, "leader", 0, 0),
            ("v0", t(0), 1, True, "follower", None, None),
            ("v0", t(0), 4, False, "observer", None, None),
        ],
        REPLICAS,
    )
    got = episodes(*controller_down(frame, 2000))
    assert [(r.cluster_id, r.node_id, r.ended_at, r.detail) for r in got.collect()] == [
        ("c", 1, None, "voter 1 has not fetched since the election")
    ]


STATUS = (
    "cluster_id STRING, collected_at TIMESTAMP, error_code INT, leader_id INT, high_watermark BIGINT, "
    "hw_last_increase_at TIMESTAMP, hw_stalled BOOLEAN"
)


def test_leaderless_and_stalled_quorum_snapshots(spark):
    status = spark.createDataFrame(
        [
            ("c", t(0), 0, 1, 100, t(0), False),
            ("c", t(1), 0, None, None, None, None),  # no leader: critical
            ("c", t(2), 7, None, None, None, None),  # error response: neither clears nor continues
            ("c", t(3), 0, 2, 100, t(0), True),  # stalled 3 minutes
            ("c", t(4), 0, 2, 150, t(4), False),
        ],
        STATUS,
    )
    got = episodes(*leaderless(status)).unionByName(episodes(*hw_stalled(status)))
    check_rows(
        got,
        ["kind", "node_id", "event_at", "ended_at", "peak", "critical"],
        "kind STRING, node_id INT, event_at TIMESTAMP, ended_at TIMESTAMP, peak DOUBLE, critical BOOLEAN",
        [("leader_election", None, t(1), t(3), 1.0, True), ("hw_stalled", None, t(3), t(4), 180000.0, False)],
    )


METRICS = "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, metric STRING, value DOUBLE"


def test_broker_fenced_counts_only_the_active_controller(spark):
    rows = []
    for m, fenced in [(0, 0.0), (1, 2.0), (2, 1.0), (3, 0.0)]:
        rows += [
            ("c", 1, t(m), "controller_active_controller_count", 1.0),
            ("c", 1, t(m), "controller_fenced_broker_count", fenced),
            ("c", 2, t(m), "controller_active_controller_count", 0.0),
            ("c", 2, t(m), "controller_fenced_broker_count", 5.0),  # not the active controller: not counted
        ]
    got = episodes(*broker_fenced(spark.createDataFrame(rows, METRICS)))
    check_rows(
        got,
        ["kind", "node_id", "event_at", "ended_at", "peak"],
        "kind STRING, node_id INT, event_at TIMESTAMP, ended_at TIMESTAMP, peak DOUBLE",
        [("broker_fenced", None, t(1), t(3), 2.0)],
    )


def test_metadata_divergence_per_node_scrape_series(spark):
    frame = spark.createDataFrame(
        [
            ("c", 4, t(0), 10, 5),
            ("c", 5, t(0.1), 10, 5),
            ("c", 4, t(1), 5000, 5),
            ("c", 5, t(1.1), 10, 5),  # node 5's scrapes do not end node 4's episode
            ("c", 4, t(2), 20, 40000),
            ("c", 4, t(3), 20, 5),
        ],
        "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, divergence_records BIGINT, last_applied_lag_ms BIGINT",
    )
    got = episodes(*metadata_divergence(frame, 1000, 30000))
    check_rows(
        got,
        ["node_id", "event_at", "ended_at", "observations", "peak"],
        "node_id INT, event_at TIMESTAMP, ended_at TIMESTAMP, observations BIGINT, peak DOUBLE",
        [(4, t(1), t(3), 2, 5000.0)],
    )


# --- grouping --------------------------------------------------------------------------------------------------


def ep(kind, start, end, node=None, topic=None, partition=None, critical=False, peak=1.0):
    return ("c", kind, node, topic, partition, t(start), None if end is None else t(end), 1, peak, kind, critical)


def grouped(spark, rows, grace):
    return group_episodes(spark.createDataFrame(rows, EPISODE), grace)


def test_overlapping_and_grace_joined_anomalies_make_one_incident(spark):
    rows = [
        ep("broker_down", 0, 3, node=6),
        ep("partitions_at_min_isr", 0, 3, topic="orders", partition=0),
        ep("voter_lagging", 4, 5, node=2),  # 1 min after the last cleared: within 2 min of grace
        ep("controller_down", 8, None, node=3),  # 3 min after: a new incident, still open
    ]
    got = grouped(spark, rows, 2)
    ids = {(r.kind, r.incident_id) for r in got.collect()}
    assert ids == {
        ("broker_down", "20241027T033320.000Z"),
        ("partitions_at_min_isr", "20241027T033320.000Z"),
        ("voter_lagging", "20241027T033320.000Z"),
        ("controller_down", "20241027T034120.000Z"),
    }
    # without grace the lagging voter is an incident of its own
    assert grouped(spark, rows, 0).select("incident_id").distinct().count() == 3


def test_an_open_anomaly_holds_the_incident_open_and_absorbs_later_ones(spark):
    rows = [ep("controller_down", 0, None, node=3), ep("broker_down", 30, 31, node=5)]
    assert grouped(spark, rows, 2).select("incident_id").distinct().count() == 1


ISR = "cluster_id STRING, collected_at TIMESTAMP, at_min_isr INT, under_min_isr INT, offline INT"


def test_incident_severity_trigger_nodes_peaks_and_summary(spark):
    rows = [
        ep("partitions_at_min_isr", 1, 2, topic="orders", partition=0),
        ep("broker_down", 1, 4, node=6),  # same time as the partition: the broker is the trigger
        ep("broker_down", 2, 4, node=5),
        ep("partitions_under_min_isr", 2, 4, topic="orders", partition=0, critical=True),
        ep("voter_lagging", 3, 4, node=2, peak=28000.0),
        ep("controller_down", 9, None, node=3),
        # the leader stopped: its followers elect another (a single event) while it no longer fetches
        ep("leader_election", -10, -10, node=2),
        ep("controller_down", -10, -8, node=1),
        # a node applying metadata late without being records behind (a stalled quorum): no "up to 0 records"
        ep("metadata_divergence", -20, -19, node=4, peak=0.0),
    ]
    isr = spark.createDataFrame(
        [
            ("c", t(-20), 0, 0, 0),
            ("c", t(-10), 0, 0, 0),
            ("c", t(0), 0, 0, 0),
            ("c", t(1), 11, 0, 0),
            ("c", t(2), 8, 3, 1),
            ("c", t(4), 0, 0, 0),
            ("c", t(9), 0, 0, 0),
        ],
        ISR,
    )
    latest = spark.createDataFrame([("c", t(12))], "cluster_id STRING, latest_at TIMESTAMP")
    g = grouped(spark, rows, 2)
    got = build_incidents(g, isr, latest)
    assert got.columns == GOLD_INCIDENTS.column_names
    check_rows(
        got,
        GOLD_INCIDENTS.column_names,
        ", ".join(f"{n} {ty}" for n, ty, _ in GOLD_INCIDENTS.columns),
        [
            (
                "c",
                "20241027T031320.000Z",
                t(-20),
                t(-19),
                "warn",
                "metadata_divergence",
                4,
                [4],
                0,
                0,
                0,
                "node 4 diverging (last applied record too old) (for 60 s)",
                1,
                t(-20),
                60000,
                None,
            ),
            (
                "c",
                "20241027T032320.000Z",
                t(-10),
                t(-8),
                "warn",
                "controller_down",
                1,
                [1, 2],
                0,
                0,
                0,
                "controller 1 not fetching; leader elected (now 2) (for 2 min)",
                2,
                t(-10),
                120000,
                None,
            ),
            (
                "c",
                "20241027T033420.000Z",
                t(1),
                t(4),
                "critical",
                "broker_down",
                6,
                [2, 5, 6],
                11,
                3,
                1,
                "broker 6 down: brokers 5, 6 down; voter 2 lagging up to 28 s; 11 partitions at min ISR, "
                "3 under min ISR, 1 offline (for 3 min)",
                5,
                t(3),
                180000,
                t(2),
            ),
            (
                "c",
                "20241027T034220.000Z",
                t(9),
                None,
                "warn",
                "controller_down",
                3,
                [3],
                0,
                0,
                0,
                "controller 3 not fetching (ongoing for 3 min)",
                1,
                t(9),
                180000,
                None,
            ),
        ],
    )
    events = build_incident_events(g)
    assert events.columns == GOLD_INCIDENT_EVENTS.column_names
    assert events.count() == 9


def test_build_episodes_from_every_source_together(spark):
    partitions = spark.createDataFrame(broker_story(), PARTITIONS)
    replicas = spark.createDataFrame(voter_rows(), REPLICAS)
    got = build_episodes(partitions=partitions, replicas=replicas)
    assert got.columns == EP_COLS
    kinds = sorted(r.kind for r in got.select("kind").collect())
    assert kinds == [
        "broker_down",
        "broker_down",
        "controller_down",
        "partitions_at_min_isr",
        "partitions_at_min_isr",
        "partitions_offline",
        "partitions_under_min_isr",
        "voter_lagging",
    ]
    assert build_episodes() is None
    assert got.where(F.col("kind") == "partitions_offline").first().critical
