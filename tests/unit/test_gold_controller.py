"""quorumlake.gold.controller: build_controller_health (gold.controller_health, one row per node per window) on tiny
silver.node_metrics rows, and from real JMX exporter text in both namings (tests/data/jmx_exporter: Strimzi rules
and the exporter's default names) through silver's parser.

Idle raft latency readings are NaN and count as unknown; latency averages are means of the scraped averages,
maxima the largest scraped maximum; health counts are the worst of the window; state, vote and active-controller
count are those of the node's last scrape in the window.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_CONTROLLER_HEALTH
from quorumlake.gold.controller import build_controller_health, counter_increase
from quorumlake.silver.metrics import build_node_metrics
from tests.frames import assert_frames_equal, check_rows
from tests.helpers import ts

METRICS = (
    "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, metric STRING, value DOUBLE, node_role STRING, state STRING"
)
HEALTH = GOLD_CONTROLLER_HEALTH.spark_schema
T0 = datetime(2024, 10, 27, 3, 35, 0)  # a 5-minute window start
WINDOW = 5
EXPORTER = Path(__file__).parents[1] / "data" / "jmx_exporter"
BRONZE = (
    "record_id STRING, format STRING, cluster_id STRING, node_id INT, collected_at TIMESTAMP, payload STRING, "
    "source_file STRING, line_number INT, ingested_at TIMESTAMP, parse_error STRING"
)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sample(node, at, metric, value, role="controller", state=None, cluster="c"):
    return (cluster, node, at, metric, float(value), role, state)


def health(spark, rows):
    return build_controller_health(spark.createDataFrame(rows, METRICS), WINDOW)


def row(
    node,
    start,
    *,
    role="controller",
    scrapes=1,
    last=None,
    state=None,
    vote=None,
    commit_avg=None,
    commit_max=None,
    election_avg=None,
    election_max=None,
    unknown=None,
    append=None,
    fetch=None,
    fenced=None,
    active=None,
    errors=None,
    timed_out=None,
    acc=None,
    cluster="c",
    voters=None,
    observers=None,
    uncommitted=None,
    ignored=None,
    idle=None,
    elr=None,
    unclean=None,
    prospective=None,
    candidate=None,
):
    # a window whose scrapes carry the raft state counts election states (0 when none); without one: unknown
    prospective = prospective if prospective is not None or state is None else 0
    candidate = candidate if candidate is not None or state is None else 0
    return (
        cluster,
        node,
        start,
        start + timedelta(minutes=WINDOW),
        role,
        scrapes,
        last,
        state,
        vote,
        commit_avg,
        commit_max,
        election_avg,
        election_max,
        unknown,
        append,
        fetch,
        fenced,
        active,
        errors,
        timed_out,
        acc,
        voters,
        observers,
        uncommitted,
        ignored,
        idle,
        elr,
        unclean,
        prospective,
        candidate,
    )


def check(actual, rows):
    expected = actual.sparkSession.createDataFrame(rows, HEALTH)
    assert_frames_equal(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_latency_averages_maxima_and_last_state_per_node_window(spark):
    rows = [
        sample(3000, s(10), "raft_current_state", 1, state="follower"),
        sample(3000, s(10), "raft_current_vote", 3001),
        sample(3000, s(10), "raft_commit_latency_avg", 4.0),
        sample(3000, s(10), "raft_commit_latency_max", 9.0),
        sample(3000, s(10), "controller_active_controller_count", 0),
        # it won the next election within the window
        sample(3000, s(70), "raft_current_state", 1, state="leader"),
        sample(3000, s(70), "raft_current_vote", 3000),
        sample(3000, s(70), "raft_commit_latency_avg", 2.0),
        sample(3000, s(70), "raft_commit_latency_max", 30.0),
        sample(3000, s(70), "raft_election_latency_avg", 250.0),
        sample(3000, s(70), "raft_election_latency_max", 250.0),
        sample(3000, s(70), "controller_active_controller_count", 1),
        # the next window is its own row
        sample(3000, s(310), "raft_commit_latency_avg", 1.5),
    ]
    check(
        health(spark, rows),
        [
            row(
                3000,
                T0,
                scrapes=2,
                last=s(70),
                state="leader",
                vote=3000,
                commit_avg=3.0,
                commit_max=30.0,
                election_avg=250.0,
                election_max=250.0,
                acc=1,
            ),
            row(3000, s(300), last=s(310), commit_avg=1.5),
        ],
    )


def test_nan_readings_are_unknown_and_break_nothing(spark):
    rows = [
        sample(3001, s(5), "raft_commit_latency_avg", math.nan),
        sample(3001, s(5), "raft_commit_latency_max", math.nan),
        sample(3001, s(5), "raft_election_latency_max", math.nan),
        sample(3001, s(5), "raft_fetch_records_rate", 2.0),
        sample(3001, s(35), "raft_commit_latency_avg", 6.0),
        sample(3001, s(35), "raft_commit_latency_max", math.nan),
        sample(3001, s(35), "raft_fetch_records_rate", 3.0),
    ]
    check(
        health(spark, rows),
        [
            row(3001, T0, scrapes=2, last=s(35), commit_avg=6.0, fetch=2.5),
        ],
    )


def test_health_counts_are_the_worst_of_the_window(spark):
    rows = [
        sample(3000, s(0), "controller_fenced_broker_count", 0),
        sample(3000, s(0), "controller_active_broker_count", 3),
        sample(3000, s(0), "controller_metadata_error_count", 0),
        sample(3000, s(0), "controller_timed_out_broker_heartbeat_count", 4),
        sample(3000, s(0), "raft_number_unknown_voter_connections", 0),
        sample(3000, s(60), "controller_fenced_broker_count", 1),
        sample(3000, s(60), "controller_active_broker_count", 2),
        sample(3000, s(60), "controller_metadata_error_count", 1),
        sample(3000, s(60), "controller_timed_out_broker_heartbeat_count", 5),
        sample(3000, s(60), "raft_number_unknown_voter_connections", 1),
        sample(3000, s(120), "controller_fenced_broker_count", 0),
        sample(3000, s(120), "controller_active_broker_count", 3),
        sample(3000, s(120), "raft_number_unknown_voter_connections", 0),
    ]
    check(
        health(spark, rows),
        [
            row(3000, T0, scrapes=3, last=s(120), unknown=1, fenced=1, active=2, errors=1, timed_out=5),
        ],
    )


def test_broker_metadata_errors_add_up_and_other_metrics_are_ignored(spark):
    rows = [
        sample(1, s(1), "broker_metadata_load_error_count", 1, role="broker"),
        sample(1, s(1), "broker_metadata_apply_error_count", 2, role="broker"),
        sample(1, s(1), "raft_current_vote", -1, role="broker"),
        sample(1, s(1), "raft_append_records_rate", 0, role="broker"),
        sample(1, s(1), "broker_last_applied_record_offset", 1000, role="broker"),
        sample(1, s(1), "kafka_server_raftmetrics_poll_idle_ratio_avg", 0.9, role="broker"),
        # a node of another cluster with the same id is its own row
        sample(1, s(2), "raft_fetch_records_rate", 7, role="broker", cluster="d"),
    ]
    check(
        health(spark, rows),
        [
            row(1, T0, role="broker", last=s(1), vote=-1, append=0.0, errors=3),
            row(1, T0, role="broker", last=s(2), fetch=7.0, cluster="d"),
        ],
    )


# --- real JMX exporter text, both namings ---------------------------------------------------------------------


def _scrapes(spark, naming: str):
    rows = []
    for path in sorted((EXPORTER / naming).glob("*.prom")):
        cluster, node, scraped_ms = path.name.removesuffix(".prom").split(".")
        at = datetime.fromtimestamp(int(scraped_ms) / 1000, tz=timezone.utc).replace(tzinfo=None)
        rows.append(
            (
                path.name,
                "prometheus_text",
                cluster,
                int(node),
                at,
                path.read_text(),
                str(path),
                None,
                datetime(2024, 10, 28),
                None,
            )
        )
    metrics, rejected = build_node_metrics(spark.createDataFrame(rows, BRONZE))
    assert rejected.collect() == []
    return metrics


def test_strimzi_exporter_scrapes(spark):
    """jmx_exporter 1.x with Strimzi's rules: `*_max_total` counters, `current_state` label series, NaN when idle."""
    start = ts(1730000100000)
    check(
        build_controller_health(_scrapes(spark, "strimzi"), WINDOW),
        [
            row(
                3000,
                start,
                cluster="strimzi-a",
                scrapes=2,
                last=ts(1730000131500),
                state="leader",
                vote=3000,
                commit_avg=3.5,
                commit_max=20.0,
                election_avg=212.0,
                election_max=212.0,
                unknown=0,
                append=2.25,
                fetch=0.0,
                fenced=1,
                active=2,
                errors=0,
                timed_out=3,
                acc=1,
                voters=3,
            ),
            row(
                3001,
                start,
                cluster="strimzi-a",
                last=ts(1730000102000),
                state="follower",
                vote=3000,
                unknown=1,
                append=0.0,
                fetch=2.0,
                fenced=1,
                active=2,
                errors=0,
                timed_out=0,
                acc=0,
            ),
        ],
    )


def test_default_exporter_scrapes(spark):
    """jmx_exporter 1.x without rules: every series untyped, `KafkaController_Value{name=...}`, no raft state."""
    start = ts(1730000100000)
    check(
        build_controller_health(_scrapes(spark, "default"), WINDOW),
        [
            row(
                3000,
                start,
                cluster="default-b",
                last=ts(1730000101400),
                vote=3000,
                commit_avg=3.5,
                commit_max=11.0,
                unknown=0,
                append=2.0,
                fetch=0.0,
                fenced=0,
                active=3,
                errors=0,
                timed_out=5,
                acc=1,
            ),
            row(
                3002,
                start,
                cluster="default-b",
                last=ts(1730000101600),
                vote=3000,
                unknown=0,
                append=0.0,
                fetch=2.0,
                fenced=0,
                active=3,
                errors=1,
                timed_out=0,
                acc=0,
            ),
            row(
                1,
                start,
                cluster="default-b",
                role="broker",
                last=ts(1730000101900),
                vote=-1,
                unknown=0,
                append=0.0,
                fetch=2.5,
                errors=2,
            ),
        ],
    )


# --- Kafka 4.x columns ---------------------------------------------------------------------------------------------


def test_dynamic_quorum_and_idle_ratio_are_as_of_the_last_scrape_and_the_mean(spark):
    rows = [
        sample(3000, s(10), "raft_number_of_voters", 3),
        sample(3000, s(10), "raft_number_of_observers", 3),
        sample(3000, s(10), "raft_uncommitted_voter_change", 1),
        sample(3000, s(10), "controller_ignored_static_voters", 0),
        sample(3000, s(10), "controller_avg_idle_ratio", 0.5),
        # the add-voter committed: 4 voters, nothing uncommitted; the static voters are ignored from now on
        sample(3000, s(70), "raft_number_of_voters", 4),
        sample(3000, s(70), "raft_number_of_observers", 2),
        sample(3000, s(70), "raft_uncommitted_voter_change", 0),
        sample(3000, s(70), "controller_ignored_static_voters", 1),
        sample(3000, s(70), "controller_avg_idle_ratio", 0.9),
        sample(3000, s(130), "controller_avg_idle_ratio", math.nan),  # no reading: ignored
        # a broker reports ignored-static-voters from broker-metadata-metrics
        sample(4, s(20), "broker_ignored_static_voters", 1, role="broker"),
        sample(4, s(20), "raft_number_of_voters", 3, role="broker"),
    ]
    check(
        health(spark, rows),
        [
            row(3000, T0, scrapes=3, last=s(130), voters=4, observers=2, uncommitted=False, ignored=True, idle=0.7),
            row(4, T0, role="broker", last=s(20), voters=3, ignored=True),
        ],
    )


def test_election_counters_add_their_increases_across_the_window_start_and_restarts(spark):
    elr, unclean = "controller_elr_elections_total", "controller_unclean_leader_elections_total"
    rows = [
        # the window before: the last reading there is where the next window's increase starts
        sample(3000, s(-100), elr, 2),
        sample(3000, s(-40), elr, 5),
        sample(3000, s(-40), unclean, 1),
        # in the window: 5 -> 7 (+2), then the controller restarted: 7 -> 1 counts 1, then 1 -> 4 (+3)
        sample(3000, s(20), elr, 7),
        sample(3000, s(20), unclean, 1),
        sample(3000, s(80), elr, 1),
        sample(3000, s(140), elr, 4),
        # a node whose previous reading is more than a window back starts from 0 in its window
        sample(3001, s(-400), elr, 10),
        sample(3001, s(30), elr, 12),
        sample(3001, s(90), elr, 13),
    ]
    actual = health(spark, rows).where(F.col("window_start") == T0)
    check_rows(
        actual,
        ["node_id", "elr_elections", "unclean_elections"],
        "node_id INT, elr_elections BIGINT, unclean_elections BIGINT",
        [(3000, 6, 0), (3001, 1, None)],
    )
    # the window before is its own row, complete only when its own previous window is given (here: its first is 0)
    earlier = health(spark, rows).where(F.col("window_start") == T0 - timedelta(minutes=WINDOW))
    check_rows(earlier, ["node_id", "elr_elections"], "node_id INT, elr_elections BIGINT", [(3000, 3)])


def test_counter_increase_rule(spark):
    frame = spark.createDataFrame(
        [(5.0, 3.0), (1.0, 7.0), (4.0, None), (None, 2.0), (2.0, 2.0)], "value DOUBLE, previous DOUBLE"
    )
    got = [r[0] for r in frame.select(counter_increase(F.col("value"), F.col("previous"))).collect()]
    assert got == [2.0, 1.0, 0.0, None, 0.0]


def test_prospective_and_candidate_windows_show_an_election_between_leader_scrapes(spark):
    rows = [
        # Kafka 4.x: the follower lost the leader, pre-voted (prospective), then stood as a candidate, then led
        sample(3001, s(10), "raft_current_state", 1, state="follower"),
        sample(3001, s(40), "raft_current_state", 1, state="prospective"),
        sample(3001, s(45), "raft_current_state", 1, state="prospective-voted"),
        sample(3001, s(50), "raft_current_state", 1, state="candidate"),
        sample(3001, s(70), "raft_current_state", 1, state="leader"),
        # another voter granted its vote: unattached-voted (3.x called it voted), not an election of its own
        sample(3002, s(48), "raft_current_state", 1, state="unattached-voted"),
        # the exporter's default names drop the state: unknown, not 0
        sample(3003, s(48), "raft_current_vote", 3001),
    ]
    check_rows(
        health(spark, rows),
        ["node_id", "raft_state", "prospective_scrapes", "candidate_scrapes"],
        "node_id INT, raft_state STRING, prospective_scrapes INT, candidate_scrapes INT",
        [(3001, "leader", 2, 1), (3002, "unattached-voted", 0, 0), (3003, None, None, None)],
    )


# The same Kafka 4.x readings of an active controller in the three namings a scrape or a read can carry.
STRIMZI_4X = """\
# TYPE kafka_controller_controllereventmanager_avgidleratio gauge
kafka_controller_controllereventmanager_avgidleratio 0.75
# TYPE kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total counter
kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total {elr}
# TYPE kafka_controller_controllerstats_uncleanleaderelections_total counter
kafka_controller_controllerstats_uncleanleaderelections_total 0.0
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE kafka_controller_kafkacontroller_ignoredstaticvoters gauge
kafka_controller_kafkacontroller_ignoredstaticvoters 1.0
# TYPE kafka_server_raftmetrics_current_state untyped
kafka_server_raftmetrics_current_state{{current_state="leader"}} 1.0
# TYPE kafka_server_raftmetrics_number_of_observers gauge
kafka_server_raftmetrics_number_of_observers 3.0
# TYPE kafka_server_raftmetrics_number_of_voters gauge
kafka_server_raftmetrics_number_of_voters 3.0
# TYPE kafka_server_raftmetrics_uncommitted_voter_change gauge
kafka_server_raftmetrics_uncommitted_voter_change 0.0
"""
DEFAULT_4X = """\
kafka_controller_ControllerEventManager_Value{{name="AvgIdleRatio"}} 0.75
kafka_controller_ControllerStats_Count{{name="ElectionFromEligibleLeaderReplicasPerSec"}} {elr}
kafka_controller_ControllerStats_Count{{name="UncleanLeaderElectionsPerSec"}} 0.0
kafka_controller_ControllerStats_OneMinuteRate{{name="UncleanLeaderElectionsPerSec"}} 0.0
kafka_controller_KafkaController_Value{{name="ActiveControllerCount"}} 1.0
kafka_controller_KafkaController_Value{{name="IgnoredStaticVoters"}} 1.0
kafka_server_raft_metrics_number_of_observers 3.0
kafka_server_raft_metrics_number_of_voters 3.0
kafka_server_raft_metrics_uncommitted_voter_change 0.0
"""
JOLOKIA_4X = [
    ("kafka.controller:type=ControllerEventManager,name=AvgIdleRatio", "Value", 0.75),
    ("kafka.controller:type=ControllerStats,name=ElectionFromEligibleLeaderReplicasPerSec", "Count", None),
    ("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", "Count", 0.0),
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value", 1.0),
    ("kafka.controller:type=KafkaController,name=IgnoredStaticVoters", "Value", 1.0),
    ("kafka.server:type=raft-metrics", "number-of-observers", 3.0),
    ("kafka.server:type=raft-metrics", "number-of-voters", 3.0),
    ("kafka.server:type=raft-metrics", "uncommitted-voter-change", 0.0),
]


def test_kafka_4x_columns_in_every_exporter_naming(spark):
    bronze = []
    for i, (at, elr) in enumerate(((s(10), 2.0), (s(40), 3.0))):
        for cluster, text in (("strimzi", STRIMZI_4X), ("default", DEFAULT_4X)):
            payload = text.format(elr=elr)
            bronze.append((f"{cluster}{i}", "prometheus_text", cluster, 1, at, payload, "f", None, T0, None))
        for j, (mbean, attribute, value) in enumerate(JOLOKIA_4X):
            line = json.dumps({"mbean": mbean, "attribute": attribute, "value": elr if value is None else value})
            bronze.append((f"j{i}-{j}", "jmx_json", "jolokia", 1, at, line, "f", j, T0, None))
    metrics, rejected = build_node_metrics(spark.createDataFrame(bronze, BRONZE))
    assert rejected.collect() == []
    expected = {
        "number_of_voters": 3,
        "number_of_observers": 3,
        "uncommitted_voter_change": False,
        "ignored_static_voters": True,
        "avg_idle_ratio": 0.75,
        "elr_elections": 1,
        "unclean_elections": 0,
        "active_controller_count": 1,
    }
    rows = {r["cluster_id"]: r for r in build_controller_health(metrics, WINDOW).collect()}
    assert set(rows) == {"strimzi", "default", "jolokia"}
    for cluster, r in rows.items():
        assert {k: r[k] for k in expected} == expected, cluster
    # only Strimzi-style names carry the raft state
    assert (rows["strimzi"]["raft_state"], rows["strimzi"]["prospective_scrapes"]) == ("leader", 0)
    assert rows["default"]["prospective_scrapes"] is None and rows["jolokia"]["raft_state"] is None
