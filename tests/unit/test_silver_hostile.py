"""Hostile records in silver: a value no column can hold, or a parser that fails, costs one record (a quarantine row
with its reason), never the batch; nothing readable vanishes between bronze and silver."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import types as T

from quorumlake.silver.udf_guard import guarded, out_of_range
from tests.captures import REPLICATION_39
from tests.helpers import set_field
from tests.unit import test_silver_metrics as metrics
from tests.unit import test_silver_partitions as partitions
from tests.unit import test_silver_quorum as quorum

pytestmark = pytest.mark.usefixtures("drop_cached")


def _reasons(rejected) -> dict[str, tuple[list[str], str]]:
    return {r["record_id"]: (r["failed_rules"], r["reason"]) for r in rejected.collect()}


# --- the guard every Python UDF goes through -----------------------------------------------------------------------


def test_out_of_range_names_the_first_integer_a_column_cannot_hold():
    schema = T.StructType(
        [
            T.StructField("id", T.IntegerType()),
            T.StructField("xs", T.ArrayType(T.StructType([T.StructField("v", T.LongType())]))),
        ]
    )
    assert out_of_range({"id": 2**31 - 1, "xs": [{"v": -(2**63)}]}, schema) is None
    assert out_of_range({"id": 2**31, "xs": []}, schema) == "id"
    assert out_of_range({"id": 1, "xs": [{"v": 1}, {"v": 2**63}]}, schema) == "xs[1].v"


def test_guarded_turns_exceptions_and_unholdable_results_into_the_error_value():
    schema = T.StructType([T.StructField("error", T.StringType()), T.StructField("n", T.IntegerType())])

    def parse(text: str) -> dict:
        return {"error": None, "n": int(text)}

    safe = guarded(parse, schema, lambda reason: {"error": reason, "n": None})
    assert safe("7") == {"error": None, "n": 7}
    assert safe("x") == {
        "error": "cannot be parsed (ValueError: invalid literal for int() with base 10: 'x')",
        "n": None,
    }
    assert safe("4294967296") == {"error": "value out of range for its column: n", "n": None}
    assert safe("9" * 5000)["error"].startswith("cannot be parsed (ValueError: Exceeds the limit")


# --- silver.quorum_snapshots / replica_states ------------------------------------------------------------------------


def _admin_with(record_id: str, change, cluster: str) -> tuple:
    resp = quorum.response(1, quorum.scenario_voters(1), quorum.scenario_observers(1))
    change(resp["topics"][0]["partitions"][0])
    return quorum.admin(record_id, resp, 1, cluster=cluster)


def _set(path: str, value):
    def change(partition: dict) -> None:
        set_field(partition, path, value)

    return change


def _both(*changes):
    def change(partition: dict) -> None:
        for one in changes:
            one(partition)

    return change


def test_numbers_beyond_their_column_quarantine_the_snapshot_with_rule_values_in_range(spark):
    rows = [
        _admin_with("hw", _set("highWatermark", 2**63), "c-hw"),
        _admin_with("leader", _set("leaderId", 2**32), "c-leader"),
        _admin_with("epoch", _set("leaderEpoch", "seven"), "c-epoch"),
        _admin_with("leo", _set("currentVoters.1.logEndOffset", int("1" + "0" * 30)), "c-leo"),
        _admin_with("fetch", _set("observers.0.lastFetchTimestamp", 9 * 10**15), "c-fetch"),  # year 287168
        _admin_with("caught", _set("currentVoters.0.lastCaughtUpTimestamp", -5), "c-caught"),
        _admin_with("two", _both(_set("highWatermark", 2**63), _set("observers.0.replicaId", 2**31)), "c-two"),
        _admin_with("ok", lambda p: None, "c-ok"),
    ]
    snapshots, replicas, rejected = quorum.run(spark, *rows)
    assert [r["cluster_id"] for r in snapshots.collect()] == ["c-ok"]
    assert {r["cluster_id"] for r in replicas.collect()} == {"c-ok"}
    prefix = "numbers out of range or not integers: "
    timestamp = "(not -1 or epoch ms up to year 9999)"
    assert _reasons(rejected) == {
        "hw": (["values_in_range"], prefix + "highWatermark"),
        "leader": (["values_in_range"], prefix + "leaderId"),
        "epoch": (["values_in_range"], prefix + "leaderEpoch"),
        "leo": (["values_in_range"], prefix + "currentVoters[].logEndOffset"),
        "fetch": (["values_in_range"], prefix + f"observers[].lastFetchTimestamp {timestamp}"),
        "caught": (["values_in_range"], prefix + f"currentVoters[].lastCaughtUpTimestamp {timestamp}"),
        "two": (["values_in_range"], prefix + "highWatermark, observers[].replicaId"),
    }
    assert {r["target_table"] for r in rejected.collect()} == {"silver.quorum_snapshots"}
    # the quarantined record is the bronze record, payload unchanged
    assert json.loads(rejected.where("record_id = 'hw'").first()["record"])["payload"] == rows[0][5]


def test_offsets_whose_difference_overflows_do_not_fail_the_batch(spark):
    # LEOs within BIGINT whose difference is not: ANSI arithmetic would raise; the row keeps a NULL lag and is then
    # quarantined by its data-quality rule (log_end_offset_not_negative)
    row = _admin_with(
        "r",
        lambda p: (
            p["currentVoters"][2].update(logEndOffset=2**63 - 1),
            p["currentVoters"][1].update(logEndOffset=-(2**62) * 2),
        ),
        "c1",
    )
    _, replicas, rejected = quorum.run(spark, row)
    lags = {r["replica_id"]: (r["log_end_offset"], r["offset_lag"]) for r in replicas.collect()}
    assert lags[3001] == (-(2**63), None)
    assert lags[3002] == (2**63 - 1, 0)
    assert rejected.collect() == []


CLI_BEYOND_COLUMNS = [
    ("18530       ", "9" * 5000, "line 4: LogEndOffset '" + "9" * 40 + "'... is out of range (more than 64 bits)"),
    (
        "1730000000200     ",
        "9000000000000000",
        "replica 3001: LastFetchTimestamp 9000000000000000 is out of range (epoch milliseconds up to year 9999)",
    ),
    ("3001  \tb-", "4294967296\tb-", "value out of range for its column: voter_ids[2]"),
]


@pytest.fixture(scope="module")
def cli_beyond_columns(spark) -> tuple[list[str], dict]:
    """Each case of CLI_BEYOND_COLUMNS as the capture of a cluster of its own (record `rep<i>`), beside one good
    capture, in one build: (the clusters silver.quorum_snapshots holds, the rejected records' rules and reasons)."""
    bad = [
        quorum.capture(f"rep{i}", "replication", REPLICATION_39.replace(old, new), cluster=f"bad{i}")
        for i, (old, new, _) in enumerate(CLI_BEYOND_COLUMNS)
    ]
    snapshots, _replicas, rejected = quorum.run(
        spark, *bad, quorum.capture("ok", "replication", REPLICATION_39, cluster="c2")
    )
    return [r["cluster_id"] for r in snapshots.collect()], _reasons(rejected)


@pytest.mark.parametrize(("old", "new", "reason"), CLI_BEYOND_COLUMNS)
def test_cli_capture_with_values_no_column_can_hold_is_quarantined(cli_beyond_columns, old, new, reason):
    assert REPLICATION_39.replace(old, new) != REPLICATION_39
    clusters, reasons = cli_beyond_columns
    assert clusters == ["c2"]
    assert set(reasons) == {f"rep{i}" for i in range(len(CLI_BEYOND_COLUMNS))}
    assert reasons[f"rep{CLI_BEYOND_COLUMNS.index((old, new, reason))}"] == (["cli_capture_parses"], reason)


# --- silver.partition_states ---------------------------------------------------------------------------------------


def test_topics_capture_with_a_partition_beyond_32_bits_is_quarantined(spark):
    bad = partitions.TOPICS.replace("Partition: 1\t", "Partition: 4294967296\t")
    states, rejected = partitions.run(
        spark, partitions.topics("bad", bad, cluster="c1"), partitions.topics("good", partitions.TOPICS, cluster="c2")
    )
    assert {r["cluster_id"] for r in states.collect()} == {"c2"}
    assert _reasons(rejected) == {
        "bad": (["topics_capture_parses"], "value out of range for its column: partitions[1].partition")
    }


# --- silver.node_metrics -------------------------------------------------------------------------------------------


def test_jmx_sample_without_a_metric_name_is_quarantined_not_dropped(spark):
    good = json.loads(metrics.JOLOKIA[0])
    rows = [
        metrics.jolokia("ok", json.dumps(good)),
        metrics.jolokia("empty", json.dumps({**good, "mbean": ""}), line_number=2),
        metrics.jolokia("blank", json.dumps({**good, "mbean": "kafka.server:type=x", "attribute": " "}), line_number=3),
    ]
    samples, rejected = metrics.run(spark, *rows)
    assert {r["record_id"] for r in samples.collect()} == {"ok"}
    source = rows[0][6]
    assert _reasons(rejected) == {
        "empty": (["jmx_sample_maps"], f"JMX sample of {source}: empty mbean: no metric name can be derived"),
        "blank": (["jmx_sample_maps"], f"JMX sample of {source}: empty attribute: no metric name can be derived"),
    }


def test_jmx_samples_share_the_mapping_of_their_mbean_and_one_without_an_mbean_is_quarantined(spark):
    good = json.loads(metrics.JOLOKIA[0])
    rows = [
        metrics.jolokia("a", json.dumps(good)),
        metrics.jolokia("b", json.dumps({**good, "node_id": good["node_id"] + 1, "value": 7}), line_number=2),
        metrics.jolokia("none", json.dumps({k: v for k, v in good.items() if k != "mbean"}), line_number=3),
    ]
    samples, rejected = metrics.run(spark, *rows)
    got = sorted((r["record_id"], r["node_id"], r["metric"], r["value"]) for r in samples.collect())
    metric = got[0][2]
    assert metric is not None
    assert got == [("a", good["node_id"], metric, got[0][3]), ("b", good["node_id"] + 1, metric, 7.0)]
    assert _reasons(rejected) == {
        "none": (["jmx_sample_maps"], f"JMX sample of {rows[0][6]}: empty mbean: no metric name can be derived")
    }


def test_a_partition_label_beyond_32_bits_costs_its_line_only(spark):
    text = (
        'kafka_cluster_partition_underreplicated{topic="t",partition="4294967296"} 1.0\n'
        'kafka_cluster_partition_underreplicated{topic="t",partition="' + "9" * 5000 + '"} 1.0\n'
        'kafka_cluster_partition_underreplicated{topic="t",partition="3"} 0.0\n'
    )
    samples, rejected = metrics.run(spark, metrics.scrape("s1", text))
    assert [(r["metric"], r["partition"]) for r in samples.collect()] == [("partition_under_replicated", 3)]
    source = metrics.scrape("s1", text)[6]
    reasons = sorted(r["reason"] for r in rejected.collect())
    assert reasons[0] == f"line 1 of {source}: partition label is out of range (not a 32-bit integer)"
    assert reasons[1].startswith(f"line 2 of {source}: cannot be mapped (ValueError: Exceeds the limit")
