"""quorumlake.gold.views on tiny gold tables: the fleet overview's status rules for Kafka 4.x signals (unknown lag is
not bad, voters not fetching, fenced brokers from gold.broker_registrations, the min-ISR rule setting), the daily
SLO view's SLI over judged snapshots, and the partitions-at-min-ISR view by rule.

Each view's query runs against temporary views holding the rows given (and empty tables for the rest), with the
settings substituted as the gold job substitutes them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from quorumlake.contract.tables import (
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_BROKER_REGISTRATIONS,
    GOLD_CONTROLLER_HEALTH,
    GOLD_INCIDENTS,
    GOLD_ISR_HEALTH,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_HEALTH,
    GOLD_QUORUM_STATUS,
    SILVER_PARTITION_STATES,
    resolve_names,
)
from quorumlake.gold.views import FLEET_OVERVIEW, PARTITIONS_AT_MIN_ISR, SLO_ATTAINMENT_DAILY

T0 = datetime(2026, 11, 27, 10, 0, 0)
TABLES = (
    GOLD_QUORUM_STATUS,
    GOLD_QUORUM_HEALTH,
    GOLD_ISR_HEALTH,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_CONTROLLER_HEALTH,
    GOLD_BROKER_REGISTRATIONS,
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_INCIDENTS,
    SILVER_PARTITION_STATES,
)
SETTINGS = {
    "divergence_warn_records": 1000,
    "metadata_lag_warn_ms": 30000,
    "stale_after_minutes": 0,
    "window_minutes": 5,
    "min_isr_rule": "effective",
}


def query(spark, view, rows: dict, **settings) -> dict[str, dict]:
    """The view's rows over `rows` by cluster (one row per cluster)."""
    return {r["cluster_id"]: r for r in view_rows(spark, view, rows, **settings)}


def view_rows(spark, view, rows: dict, **settings) -> list[dict]:
    """The view's rows over `rows` ({table spec: [dict of some columns]}; other columns NULL)."""
    for spec in TABLES:
        given = rows.get(spec, [])
        names = spec.column_names
        data = [tuple(r.get(c) for c in names) for r in given]
        spark.createDataFrame(data, spec.spark_schema).createOrReplaceTempView(_temp(spec.name))
    sql = resolve_names(view.sql, _temp)
    for key, value in {**SETTINGS, **settings}.items():
        sql = sql.replace("{" + key + "}", str(value))
    return [r.asDict() for r in spark.sql(sql).collect()]


def _temp(name: str) -> str:
    return "t_" + name.replace(".", "_")


def status(cluster, lag_ms=10, within=3, unknown=0, not_fetching=0, is_good=True, at=T0):
    return {
        "cluster_id": cluster,
        "collected_at": at,
        "window_start": at,
        "error_code": 0,
        "leader_id": 1,
        "leader_epoch": 5,
        "max_follower_lag": 0,
        "max_follower_lag_time_ms": lag_ms,
        "voters": 3,
        "voters_within_slo": within,
        "observers": 3,
        "is_good": is_good,
        "voters_lag_unknown": unknown,
        "voters_not_fetching": not_fetching,
    }


def test_fleet_status_for_kafka_4x_signals(spark):
    rows = {
        GOLD_QUORUM_STATUS: [
            status("ok"),
            # DescribeQuorum v0: the lag is unknown, only the leader's is known: not a warning
            status("v0", lag_ms=-1, within=1, unknown=2, not_fetching=None, is_good=None),
            # a follower stopped fetching: its lag is still within the SLO, but it is not fetching
            status("silent", not_fetching=1),
            # Kafka 3.x style unknown voter connections (a constant 0 on 4.x) no longer warn
            status("unknown-conn"),
            status("fenced"),
            status("misconfigured"),
            # a known lag over the SLO still warns
            status("slow", lag_ms=2500, within=2, is_good=False),
        ],
        GOLD_CONTROLLER_HEALTH: [
            {
                "cluster_id": "unknown-conn",
                "node_id": 1,
                "window_start": T0,
                "last_scraped_at": T0,
                "unknown_voter_connections": 1,
                "active_controller_count": 1,
            },
            # the controller's FencedBrokerCount says 0, its per-broker registration says fenced
            {
                "cluster_id": "fenced",
                "node_id": 1,
                "window_start": T0,
                "last_scraped_at": T0,
                "fenced_brokers": 0,
                "active_controller_count": 1,
            },
        ],
        GOLD_BROKER_REGISTRATIONS: [
            {
                "cluster_id": "fenced",
                "broker_id": 4,
                "window_start": T0,
                "last_scraped_at": T0,
                "registration_state": "fenced",
            },
            {
                "cluster_id": "fenced",
                "broker_id": 5,
                "window_start": T0,
                "last_scraped_at": T0,
                "registration_state": "active",
            },
            # broker 6 was fenced in an earlier window and is active in its latest one
            {
                "cluster_id": "fenced",
                "broker_id": 6,
                "window_start": T0 - timedelta(minutes=5),
                "last_scraped_at": T0 - timedelta(minutes=4),
                "registration_state": "fenced",
            },
            {
                "cluster_id": "fenced",
                "broker_id": 6,
                "window_start": T0,
                "last_scraped_at": T0,
                "registration_state": "active",
            },
        ],
        GOLD_ISR_HEALTH: [
            # RF 2, min.insync.replicas 3: under min ISR by kafka-topics' rule, at min ISR by the effective one
            {
                "cluster_id": "misconfigured",
                "collected_at": T0,
                "partitions": 2,
                "offline": 0,
                "under_min_isr": 2,
                "at_min_isr": 0,
                "under_min_isr_effective": 0,
                "at_min_isr_effective": 2,
                "min_isr_above_replicas": 2,
            },
        ],
    }
    got = query(spark, FLEET_OVERVIEW, rows)
    assert {c: r["status"] for c, r in got.items()} == {
        "ok": "ok",
        "v0": "ok",
        "silent": "warn",
        "unknown-conn": "ok",
        "fenced": "warn",
        "misconfigured": "warn",
        "slow": "warn",
    }
    assert got["v0"]["is_good"] is None and got["v0"]["voters_lag_unknown"] == 2
    assert got["silent"]["voters_not_fetching"] == 1
    assert got["fenced"]["fenced_brokers"] == 1
    assert (got["misconfigured"]["at_min_isr"], got["misconfigured"]["under_min_isr"]) == (2, 0)
    assert got["misconfigured"]["min_isr_rule"] == "effective"

    by_tool = query(spark, FLEET_OVERVIEW, rows, min_isr_rule="kafka_topics")
    assert by_tool["misconfigured"]["status"] == "critical" and by_tool["misconfigured"]["under_min_isr"] == 2
    assert by_tool["misconfigured"]["min_isr_rule"] == "kafka_topics"


def test_fenced_brokers_fall_back_to_the_controllers_count_without_registrations(spark):
    rows = {
        GOLD_QUORUM_STATUS: [status("kafka-3.9")],
        GOLD_CONTROLLER_HEALTH: [
            {
                "cluster_id": "kafka-3.9",
                "node_id": 1,
                "window_start": T0,
                "last_scraped_at": T0,
                "fenced_brokers": 2,
                "active_controller_count": 1,
            },
        ],
    }
    got = query(spark, FLEET_OVERVIEW, rows)["kafka-3.9"]
    assert (got["status"], got["fenced_brokers"]) == ("warn", 2)
    # registration rows without a state (a restarted active controller reports heartbeat ages alone): the same
    rows[GOLD_BROKER_REGISTRATIONS] = [
        {
            "cluster_id": "kafka-3.9",
            "broker_id": 4,
            "window_start": T0,
            "last_scraped_at": T0,
            "registration_state": None,
            "max_heartbeat_age_ms": 4000,
        }
    ]
    got = query(spark, FLEET_OVERVIEW, rows)["kafka-3.9"]
    assert (got["status"], got["fenced_brokers"]) == ("warn", 2)


def test_daily_sli_is_over_the_judged_snapshots(spark):
    day = T0.date()
    rows = {
        GOLD_QUORUM_STATUS: [
            status("c", at=T0),
            status("c", at=T0 + timedelta(minutes=1), is_good=False),
            status("c", at=T0 + timedelta(minutes=2), is_good=None),
            status("v0", at=T0, is_good=None),
        ]
    }
    got = query(spark, SLO_ATTAINMENT_DAILY, rows)
    assert {
        c: (r["day"], r["snapshots"], r["good_snapshots"], r["unknown_snapshots"], r["sli"]) for c, r in got.items()
    } == {
        "c": (day, 3, 1, 1, 0.5),
        "v0": (day, 1, 0, 1, None),
    }


@pytest.mark.parametrize("rule,listed", [("effective", {"misconfigured", "fine"}), ("kafka_topics", {"fine"})])
def test_partitions_at_min_isr_follow_the_rule(spark, rule, listed):
    def partition(topic, isr, min_isr, replicas):
        return {"cluster_id": "c", "collected_at": T0, "topic": topic, "partition": 0, "leader_id": 1,
                "replicas": list(range(1, replicas + 1)), "isr": list(range(1, isr + 1)), "isr_size": isr,
                "min_isr": min_isr, "is_offline": False, "is_at_min_isr": isr == min_isr,
                "is_under_min_isr": isr < min_isr}  # fmt: skip

    rows = {
        SILVER_PARTITION_STATES: [partition("misconfigured", 2, 3, 2), partition("fine", 2, 2, 2)],
        GOLD_ISR_HEALTH: [{"cluster_id": "c", "collected_at": T0, "partitions": 2}],
    }
    got = view_rows(spark, PARTITIONS_AT_MIN_ISR, rows, min_isr_rule=rule)
    assert {r["topic"] for r in got} == listed
    assert all(r["min_isr_rule"] == rule and r["status"] == "at_min_isr" for r in got)
