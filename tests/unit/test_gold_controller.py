"""quorumlake.gold.controller: build_controller_health (gold.controller_health, one row per node per window) on tiny
silver.node_metrics rows, and from real JMX exporter text in both namings (tests/data/jmx_exporter: Strimzi rules
and the exporter's default names) through silver's parser.

Idle raft latency readings are NaN and count as unknown; latency averages are means of the scraped averages,
maxima the largest scraped maximum; health counts are the worst of the window; state, vote and active-controller
count are those of the node's last scrape in the window.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

from quorumlake.contract.tables import GOLD_CONTROLLER_HEALTH
from quorumlake.gold.controller import build_controller_health
from quorumlake.silver.metrics import build_node_metrics
from tests.frames import assert_frames_equal
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
):
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
