"""expectations: every rule of every suite (expectations/*.json) has a row that passes and a row that fails, checked
row by row through with_failed_rules, and Great Expectations (GxValidator) counts the same failures per rule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path

import pytest

from quorumlake.contract.tables import (
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
    by_name,
)
from quorumlake.expectations.rules import Rule, Suite, load_suite, rule_params, with_failed_rules
from quorumlake.silver.common import row_failures

ROOT = Path(__file__).resolve().parents[2]

RUN_AT = datetime(2024, 10, 28, 0, 0, 0, tzinfo=timezone.utc)
SKEW_MS = 300_000
PARAMS = rule_params(RUN_AT, SKEW_MS)
NAIVE_RUN_AT = RUN_AT.replace(tzinfo=None)
AT = datetime(2024, 10, 27, 3, 33, 20, 600000)
LATEST_OK = NAIVE_RUN_AT + timedelta(milliseconds=SKEW_MS)  # the bound is inclusive
TOO_LATE = LATEST_OK + timedelta(milliseconds=1)
TABLES = [
    SILVER_QUORUM_SNAPSHOTS.name,
    SILVER_REPLICA_STATES.name,
    SILVER_PARTITION_STATES.name,
    SILVER_NODE_METRICS.name,
]

# One valid row per table; each case below changes only what its rule looks at.
BASE = {
    SILVER_QUORUM_SNAPSHOTS.name: {
        "cluster_id": "c",
        "collected_at": AT,
        "source": "admin",
        "api_version": 2,
        "leader_id": 3002,
        "leader_epoch": 7,
        "high_watermark": 18542,
        "voter_count": 3,
        "observer_count": 1,
        "voter_ids": [3000, 3001, 3002],
        "error_code": 0,
        "error_message": None,
        "ref_at": AT,
        "kafka_cluster_id": None,
        "cli_max_follower_lag": None,
        "cli_max_follower_lag_time_ms": None,
        "record_ids": ["r"],
        "ingested_at": NAIVE_RUN_AT,
        "kafka_version": None,
        "metadata_version_level": None,
        "kraft_version": None,
    },
    SILVER_REPLICA_STATES.name: {
        "cluster_id": "c",
        "collected_at": AT,
        "replica_id": 3002,
        "is_voter": True,
        "position": 2,
        "replica_directory_id": None,
        "role": "leader",
        "log_end_offset": 18542,
        "last_fetch_at": AT,
        "last_caught_up_at": AT,
        "offset_lag": 0,
        "caught_up_lag_ms": 0,
        "fetch_age_ms": 0,
        "source": "admin",
        "record_id": "r",
        "ingested_at": NAIVE_RUN_AT,
        "endpoints": None,
    },
    SILVER_PARTITION_STATES.name: {
        "cluster_id": "c",
        "collected_at": AT,
        "topic": "orders",
        "partition": 0,
        "leader_id": 1,
        "replicas": [1, 2, 3],
        "isr": [1, 2, 3],
        "min_isr": 2,
        "replication_factor": 3,
        "isr_size": 3,
        "is_offline": False,
        "is_under_min_isr": False,
        "is_at_min_isr": False,
        "is_under_replicated": False,
        "status": "healthy",
        "adding_replicas": None,
        "removing_replicas": None,
        "elr": None,
        "source": "json",
        "record_id": "r",
        "source_file": "f",
        "ingested_at": NAIVE_RUN_AT,
    },
    SILVER_NODE_METRICS.name: {
        "cluster_id": "c",
        "node_id": 3002,
        "scraped_at": AT,
        "metric": "raft_current_epoch",
        "topic": None,
        "partition": None,
        "broker_id": None,
        "value": 7.0,
        "node_role": "combined",
        "source_name": "kafka_server_raftmetrics_current_epoch",
        "state": None,
        "source": "prometheus",
        "record_id": "r",
        "source_file": "f",
        "ingested_at": NAIVE_RUN_AT,
    },
}

# table -> rule -> {"pass": [row changes], "fail": [row changes], "also": rules a failing row fails besides this one,
# "context": passing rows that share the failing rows' cluster}. Every row has a cluster of its own, unless the case
# says "together": then the rows of its pass list share one cluster and those of its fail (and context) list
# another, for the rules over a key or a snapshot.
CASES: dict[str, dict[str, dict]] = {
    SILVER_QUORUM_SNAPSHOTS.name: {
        "cluster_id_not_null": {"pass": [{}], "fail": [{"cluster_id": None}]},
        "collected_at_not_null": {
            "pass": [{}],
            "fail": [{"collected_at": None}],
            "also": ["collected_at_not_in_future"],
        },
        "snapshot_key_unique": {
            "together": True,
            "pass": [{}, {"collected_at": AT + timedelta(milliseconds=1)}],
            "fail": [{}, {}],
        },
        "source_known": {"pass": [{"source": "cli", "api_version": None}], "fail": [{"source": "jmx"}]},
        "leader_epoch_not_negative": {
            "pass": [{"leader_epoch": 0}, {"leader_epoch": None}],
            "fail": [{"leader_epoch": -1}],
        },
        "high_watermark_not_negative": {
            "pass": [{"high_watermark": 0}, {"high_watermark": None}],
            "fail": [{"high_watermark": -1}],
        },
        "collected_at_not_in_future": {"pass": [{"collected_at": LATEST_OK}], "fail": [{"collected_at": TOO_LATE}]},
        "good_response_has_voters": {
            "pass": [{"error_code": 6, "leader_id": None, "voter_count": 0, "voter_ids": []}],
            "fail": [{"leader_id": None, "voter_count": 0, "voter_ids": []}],
        },
        "leader_among_voters": {
            "pass": [{"leader_id": None}, {"error_code": 6, "leader_id": 0, "voter_count": 0, "voter_ids": []}],
            "fail": [{"leader_id": 4000}],
        },
    },
    SILVER_REPLICA_STATES.name: {
        "cluster_id_not_null": {"pass": [{}], "fail": [{"cluster_id": None}]},
        "collected_at_not_null": {"pass": [{}], "fail": [{"collected_at": None}]},
        "replica_id_not_null": {"pass": [{}], "fail": [{"replica_id": None}]},
        "replica_key_unique": {
            "together": True,
            "pass": [
                {},
                {"replica_id": 3000, "role": "follower"},
                {"replica_id": 3002, "is_voter": False, "role": "observer"},
            ],
            "fail": [{}, {"role": "follower"}],
        },
        "role_known": {
            "together": True,
            "pass": [{}, {"replica_id": 0, "is_voter": False, "role": "observer"}],
            "fail": [{"replica_id": 3000, "role": "candidate"}],
            "context": [{}],
        },
        "log_end_offset_not_negative": {
            "pass": [{"log_end_offset": 0}, {"log_end_offset": None}],
            "fail": [{"log_end_offset": -1}],
        },
        "caught_up_lag_not_negative": {
            "pass": [{"caught_up_lag_ms": 0}, {"caught_up_lag_ms": None}],
            "fail": [{"caught_up_lag_ms": -1}],
        },
        "one_leader_per_snapshot": {
            "together": True,
            "pass": [{}, {"replica_id": 3000, "role": "follower"}],
            "fail": [{}, {"replica_id": 3000}],
        },
        "timestamps_not_in_future": {
            "pass": [{"last_fetch_at": LATEST_OK, "last_caught_up_at": None}],
            "fail": [{"last_fetch_at": TOO_LATE}, {"last_caught_up_at": TOO_LATE}, {"collected_at": TOO_LATE}],
        },
    },
    SILVER_PARTITION_STATES.name: {
        "cluster_id_not_null": {"pass": [{}], "fail": [{"cluster_id": None}]},
        "collected_at_not_null": {
            "pass": [{}],
            "fail": [{"collected_at": None}],
            "also": ["collected_at_not_in_future"],
        },
        "topic_not_null": {"pass": [{}], "fail": [{"topic": None}]},
        "partition_not_negative": {"pass": [{"partition": 0}], "fail": [{"partition": -1}]},
        "partition_key_unique": {
            "together": True,
            "pass": [{}, {"partition": 1}, {"topic": "payments"}],
            "fail": [{}, {}],
        },
        "min_isr_at_least_one": {"pass": [{"min_isr": 1}], "fail": [{"min_isr": 0}]},
        "min_isr_not_null": {"pass": [{}], "fail": [{"min_isr": None}]},
        "has_replicas": {
            "pass": [{"replicas": [1], "isr": [1]}],
            "fail": [{"replicas": [], "isr": [], "leader_id": None}],
        },
        "isr_subset_of_replicas": {"pass": [{"isr": []}, {"isr": [3]}], "fail": [{"isr": [1, 4]}]},
        "leader_among_replicas": {"pass": [{"leader_id": None}, {"leader_id": 3}], "fail": [{"leader_id": 4}]},
        "status_known": {
            "pass": [{"status": s} for s in ("offline", "under_min_isr", "at_min_isr", "under_replicated")],
            "fail": [{"status": "degraded"}],
        },
        "collected_at_not_in_future": {"pass": [{"collected_at": LATEST_OK}], "fail": [{"collected_at": TOO_LATE}]},
    },
    SILVER_NODE_METRICS.name: {
        "cluster_id_not_null": {"pass": [{}], "fail": [{"cluster_id": None}]},
        "node_id_not_null": {"pass": [{}], "fail": [{"node_id": None}]},
        "scraped_at_not_null": {"pass": [{}], "fail": [{"scraped_at": None}], "also": ["scraped_at_not_in_future"]},
        "metric_not_null": {"pass": [{}], "fail": [{"metric": None}]},
        "value_not_null": {"pass": [{"value": float("nan")}, {"value": float("-inf")}], "fail": [{"value": None}]},
        "sample_key_unique": {
            "together": True,
            "pass": [
                {"metric": "partition_at_min_isr", "topic": "orders", "partition": 0},
                {"metric": "partition_at_min_isr", "topic": "orders", "partition": 1},
                {"metric": "partition_at_min_isr"},
                {"metric": "controller_broker_registration_state", "broker_id": 4},
                {"metric": "controller_broker_registration_state", "broker_id": 5},
            ],
            # topic and partition are NULL in both rows: still the same key
            "fail": [{}, {"value": 8.0}],
        },
        "node_role_known": {
            "pass": [{"node_role": "controller"}, {"node_role": "broker"}, {"node_role": None}],
            "fail": [{"node_role": "zookeeper"}],
        },
        "scraped_at_not_in_future": {"pass": [{"scraped_at": LATEST_OK}], "fail": [{"scraped_at": TOO_LATE}]},
    },
}


def suite_rules() -> list[tuple[str, str]]:
    return [(table, rule.name) for table in TABLES for rule in load_suite(table).rules]


def case_rows(table: str) -> list[tuple[str, str, str, dict]]:
    """(rule, kind, row id, row) for every row of every case of a table."""
    out = []
    for rule, case in CASES[table].items():
        for kind in ("pass", "fail", "context"):
            for i, change in enumerate(case.get(kind, [])):
                row_id = f"{rule}/{kind}/{i}"
                cluster = f"{rule}/{'pass' if kind == 'pass' else 'fail'}" if case.get("together") else row_id
                out.append((rule, kind, row_id, {**BASE[table], "cluster_id": cluster, **change}))
    return out


def table_rows(spark, table: str):
    spec = by_name(table)
    rows = [tuple(row[c] for c in spec.column_names) + (row_id,) for _, _, row_id, row in case_rows(table)]
    return spark.createDataFrame(rows, spec.spark_schema + ", row_id STRING")


@pytest.fixture(scope="module")
def flagged(spark):
    """row id -> failed_rules, per table, from one with_failed_rules pass over all of a table's cases."""
    out = {}
    for table in TABLES:
        result = with_failed_rules(table_rows(spark, table), load_suite(table), PARAMS)
        out[table] = {r["row_id"]: r["failed_rules"] for r in result.select("row_id", "failed_rules").collect()}
    return out


def test_every_suite_file_is_covered_and_every_rule_has_a_case():
    files = sorted(f.name for f in resources.files("quorumlake.expectations").iterdir() if f.name.endswith(".json"))
    assert files == sorted(t.replace(".", "_") + ".json" for t in TABLES)
    for table in TABLES:
        assert set(CASES[table]) == {rule.name for rule in load_suite(table).rules}, table


@pytest.mark.parametrize(("table", "rule"), suite_rules())
def test_rule_has_a_passing_and_a_failing_row(flagged, table, rule):
    case = CASES[table][rule]
    assert case["pass"] and case["fail"]
    for _, kind, row_id, _ in case_rows(table):
        if not row_id.startswith(f"{rule}/"):
            continue
        expected = sorted([rule, *case.get("also", [])]) if kind == "fail" else []
        assert sorted(flagged[table][row_id]) == expected, row_id


@pytest.mark.parametrize("table", TABLES)
def test_great_expectations_counts_the_same_failures_as_the_row_level_split(spark, flagged, table):
    from quorumlake.expectations.gx_runner import GxValidator

    suite = load_suite(table)
    outcomes = GxValidator().validate(table_rows(spark, table), suite, PARAMS)
    expected = {rule.name: sum(rule.name in failed for failed in flagged[table].values()) for rule in suite.rules}
    assert all(count > 0 for count in expected.values())
    assert {o.rule: (o.unexpected_count, o.success, o.error) for o in outcomes} == {
        name: (count, False, None) for name, count in expected.items()
    }
    assert {o.rule: o.element_count for o in outcomes if o.expectation != "unexpected_rows_expectation"} == {
        r.name: len(flagged[table]) for r in suite.rules if r.expectation != "unexpected_rows_expectation"
    }


def _spark_jobs(spark, action, group: str) -> int:
    """How many Spark jobs `action()` ran (this thread's jobs, tagged with `group`, a name of their own)."""
    sc = spark.sparkContext
    sc.setLocalProperty("spark.jobGroup.id", group)
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_stated_predicates_are_counted_with_the_built_in_rules_and_cost_no_job_of_their_own(spark):
    from quorumlake.expectations.gx_runner import GxValidator

    table = SILVER_PARTITION_STATES.name
    suite = load_suite(table)
    stated = [r for r in suite.rules if r.expectation == "expect_rows_to_satisfy_predicate"]
    assert len(stated) == 4
    # a name of its own: the validator keeps the latest GX definition per suite name, so both stay built
    built_in = Suite(f"{table}_built_in", tuple(r for r in suite.rules if r not in stated))
    rows = table_rows(spark, table).cache()
    rows.count()
    validator = GxValidator()
    validator.validate(rows, suite, PARAMS)  # GX's first validation of a suite builds its objects
    validator.validate(rows, built_in, PARAMS)
    with_them = _spark_jobs(spark, lambda: validator.validate(rows, suite, PARAMS), "gx-stated-and-built-in")
    without = _spark_jobs(spark, lambda: validator.validate(rows, built_in, PARAMS), "gx-built-in")
    rows.unpersist()
    assert 0 < with_them == without


def test_a_stated_predicate_must_be_there_and_a_window_keeps_its_own_query():
    with pytest.raises(ValueError, match="rule r: expect_rows_to_satisfy_predicate needs a predicate"):
        Rule("r", "expect_rows_to_satisfy_predicate")
    with pytest.raises(ValueError, match="rule r: unexpected_rows_expectation needs a predicate"):
        Rule("r", "unexpected_rows_expectation")
    with pytest.raises(ValueError, match="declare it as unexpected_rows_expectation"):
        Rule("r", "expect_rows_to_satisfy_predicate", predicate="count(1) over (partition by k) = 1")
    windowed = Rule("r", "unexpected_rows_expectation", predicate="count(1) OVER (PARTITION BY k) = 1")
    assert windowed.row_predicate(PARAMS) == "count(1) OVER (PARTITION BY k) = 1"
    # the shipped suites: the one rule that needs a window is the one that keeps a query of its own
    windows = [r.name for t in TABLES for r in load_suite(t).rules if r.expectation == "unexpected_rows_expectation"]
    assert windows == ["one_leader_per_snapshot"]


def test_failed_rows_become_quarantine_rows_naming_every_rule(spark):
    table = SILVER_QUORUM_SNAPSHOTS.name
    spec = by_name(table)
    good = {**BASE[table]}
    bad = {
        **BASE[table],
        "cluster_id": "bad",
        "collected_at": TOO_LATE,
        "leader_epoch": -1,
        "leader_id": 4000,
        "source": "cli",
        "api_version": None,
        "record_ids": ["rep", "st"],
    }
    rows = spark.createDataFrame([tuple(r[c] for c in spec.column_names) for r in (good, bad)], spec.spark_schema)
    quarantine = row_failures(with_failed_rules(rows, load_suite(table), PARAMS), table).collect()
    assert [(q["target_table"], q["failed_rules"], q["reason"], q["record_id"]) for q in quarantine] == [
        (
            table,
            ["leader_epoch_not_negative", "collected_at_not_in_future", "leader_among_voters"],
            "failed data-quality rules: leader_epoch_not_negative, collected_at_not_in_future, leader_among_voters",
            "rep+st",
        )
    ]  # the bronze records the snapshot came from
    assert '"cluster_id":"bad"' in quarantine[0]["record"] and '"leader_epoch":-1' in quarantine[0]["record"]
