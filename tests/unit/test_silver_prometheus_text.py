"""quorumlake.silver.prometheus_text: exposition parsing and canonical metric names (plain Python, no Spark)."""

from __future__ import annotations

import math

import pytest

from quorumlake.silver.prometheus_text import (
    canonical_from_mbean,
    canonical_metric,
    node_role,
    parse_exposition,
    sanitize,
)

# docs/kafka-surfaces.md §6.4, Strimzi rules, jmx_exporter 1.x, combined node 3002 (HELP lines too long for the
# source).
HELP_LEADER = (
    "# HELP kafka_server_raftmetrics_current_leader The current quorum leader's id; -1 indicates unknown "
    "kafka.server:name=null,type=raft-metrics,attribute=current-leader"
)
HELP_STATE = (
    "# HELP kafka_server_raftmetrics_current_state The current state of this member; possible values are leader, "
    "candidate, voted, follower, unattached, observer kafka.server:name=null,type=raft-metrics,attribute=current-state"
)
STRIMZI_1X = """\
{help_leader}
# TYPE kafka_server_raftmetrics_current_leader gauge
kafka_server_raftmetrics_current_leader 3002.0
{help_state}
# TYPE kafka_server_raftmetrics_current_state untyped
kafka_server_raftmetrics_current_state{current_state="leader"} 1.0
# TYPE kafka_server_raftmetrics_current_epoch gauge
kafka_server_raftmetrics_current_epoch 7.0
# TYPE kafka_server_raftmetrics_high_watermark gauge
kafka_server_raftmetrics_high_watermark 18542.0
# TYPE kafka_server_raftmetrics_log_end_offset gauge
kafka_server_raftmetrics_log_end_offset 18542.0
# TYPE kafka_server_raftmetrics_commit_latency_avg gauge
kafka_server_raftmetrics_commit_latency_avg 2.5
# TYPE kafka_server_raftmetrics_commit_latency_max_total counter
kafka_server_raftmetrics_commit_latency_max_total 11.0
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE kafka_controller_kafkacontroller_lastappliedrecordoffset gauge
kafka_controller_kafkacontroller_lastappliedrecordoffset 18542.0
# TYPE kafka_controller_kafkacontroller_lastcommittedrecordoffset gauge
kafka_controller_kafkacontroller_lastcommittedrecordoffset 18542.0
# TYPE kafka_controller_kafkacontroller_lastappliedrecordtimestamp gauge
kafka_controller_kafkacontroller_lastappliedrecordtimestamp 1.7300000005E12
# TYPE kafka_controller_kafkacontroller_lastappliedrecordlagms gauge
kafka_controller_kafkacontroller_lastappliedrecordlagms 312.0
# TYPE kafka_controller_kafkacontroller_offlinepartitionscount gauge
kafka_controller_kafkacontroller_offlinepartitionscount 1.0
# TYPE kafka_server_brokermetadatametrics_last_applied_record_offset gauge
kafka_server_brokermetadatametrics_last_applied_record_offset 18542.0
# TYPE kafka_server_brokermetadatametrics_last_applied_record_lag_ms gauge
kafka_server_brokermetadatametrics_last_applied_record_lag_ms 87.0
# TYPE kafka_server_brokermetadatametrics_metadata_apply_error_count gauge
kafka_server_brokermetadatametrics_metadata_apply_error_count 0.0
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 1.0
# TYPE kafka_server_replicamanager_underminisrpartitioncount gauge
kafka_server_replicamanager_underminisrpartitioncount 0.0
# TYPE kafka_server_replicamanager_atminisrpartitioncount gauge
kafka_server_replicamanager_atminisrpartitioncount 1.0
# TYPE kafka_cluster_partition_atminisr gauge
kafka_cluster_partition_atminisr{partition="1",topic="orders"} 1.0
kafka_cluster_partition_atminisr{partition="0",topic="orders"} 0.0
# TYPE kafka_cluster_partition_underreplicated gauge
kafka_cluster_partition_underreplicated{partition="1",topic="orders"} 1.0
""".replace("{help_leader}", HELP_LEADER).replace("{help_state}", HELP_STATE)

# docs/kafka-surfaces.md §6.4, the same node in jmx_exporter's default format (no rules), 1.x.
DEFAULT_1X = """\
# TYPE kafka_server_ReplicaManager_Value untyped
kafka_server_ReplicaManager_Value{name="AtMinIsrPartitionCount"} 1.0
kafka_server_ReplicaManager_Value{name="UnderMinIsrPartitionCount"} 0.0
kafka_server_ReplicaManager_Value{name="UnderReplicatedPartitions"} 1.0
# TYPE kafka_cluster_Partition_Value untyped
kafka_cluster_Partition_Value{name="AtMinIsr",partition="1",topic="orders"} 1.0
# TYPE kafka_controller_KafkaController_Value untyped
kafka_controller_KafkaController_Value{name="LastAppliedRecordLagMs"} 312.0
kafka_controller_KafkaController_Value{name="OfflinePartitionsCount"} 1.0
# TYPE kafka_server_raft_metrics_current_leader untyped
kafka_server_raft_metrics_current_leader 3002.0
# TYPE kafka_server_broker_metadata_metrics_last_applied_record_offset untyped
kafka_server_broker_metadata_metrics_last_applied_record_offset 18542.0
"""


def one(line: str) -> dict:
    samples, errors = parse_exposition(line)
    assert errors == []
    (sample,) = samples
    return sample


def canonical(sample: dict) -> tuple:
    mapped = canonical_metric(sample["name"], sample["labels"])
    return mapped["metric"], mapped["topic"], mapped["partition"], sample["value"]


# ---------------------------------------------------------------------------------------------------------------
# parse_exposition


def test_strimzi_example_samples():
    samples, errors = parse_exposition(STRIMZI_1X)
    assert errors == []
    assert len(samples) == 22
    assert samples[0] == {
        "name": "kafka_server_raftmetrics_current_leader",
        "labels": {},
        "value": 3002.0,
        "timestamp_ms": None,
        "line_number": 3,
        "type": "gauge",
    }
    assert samples[1]["labels"] == {"current_state": "leader"}
    assert samples[1]["type"] == "untyped"
    assert samples[-2]["labels"] == {"partition": "0", "topic": "orders"}
    assert samples[-2]["line_number"] == 43


def test_strimzi_example_exponent_value():
    samples, _ = parse_exposition(STRIMZI_1X)
    by_name = {s["name"]: s["value"] for s in samples}
    assert by_name["kafka_controller_kafkacontroller_lastappliedrecordtimestamp"] == 1730000000500.0


def test_default_example_samples():
    samples, errors = parse_exposition(DEFAULT_1X)
    assert errors == []
    assert [(s["name"], s["labels"].get("name"), s["type"]) for s in samples][:2] == [
        ("kafka_server_ReplicaManager_Value", "AtMinIsrPartitionCount", "untyped"),
        ("kafka_server_ReplicaManager_Value", "UnderMinIsrPartitionCount", "untyped"),
    ]
    assert samples[3]["labels"] == {"name": "AtMinIsr", "partition": "1", "topic": "orders"}


def test_escaped_label_values_are_unescaped():
    sample = one('m{path="C:\\\\x",quote="say \\"hi\\"",nl="a\\nb",other="\\t"} 1\n')
    assert sample["labels"] == {"path": "C:\\x", "quote": 'say "hi"', "nl": "a\nb", "other": "\\t"}


def test_label_values_may_hold_braces_commas_and_spaces():
    assert one('m{a="x}, y=\\"z\\"{"} 1')["labels"] == {"a": 'x}, y="z"{'}


def test_trailing_comma_in_label_set():
    sample = one('kafka_cluster_partition_atminisr{topic="a",partition="1",} 1.0')
    assert sample["labels"] == {"topic": "a", "partition": "1"}
    assert one('m{a="1", } 2')["labels"] == {"a": "1"}


def test_empty_label_set_and_spaces_inside():
    assert one("m{} 1")["labels"] == {}
    assert one('m{ a = "1" , b="2" } 1')["labels"] == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf), ("Inf", math.inf),
     ("1.7300000005E12", 1.7300000005e12), ("-1", -1.0), ("3e-2", 0.03), (".5", 0.5), ("7.", 7.0)],
)  # fmt: skip
def test_special_values(text, expected):
    value = one(f"m {text}")["value"]
    assert (math.isnan(value) and math.isnan(expected)) or value == expected


def test_timestamp_in_milliseconds():
    assert one("m 1 1730000000500")["timestamp_ms"] == 1730000000500
    assert one('m{a="b"} 1 -5')["timestamp_ms"] == -5


def test_type_matches_family_for_suffixed_series():
    text = (
        "# TYPE req counter\nreq_total 3\n"
        '# TYPE lat histogram\nlat_bucket{le="+Inf"} 2\nlat_sum 1.5\nlat_count 2\n'
        "# TYPE x_total counter\nx_total 1\n"
        "untyped_series 4\n"
    )
    samples, errors = parse_exposition(text)
    assert errors == []
    assert [(s["name"], s["type"]) for s in samples] == [
        ("req_total", "counter"),
        ("lat_bucket", "histogram"),
        ("lat_sum", "histogram"),
        ("lat_count", "histogram"),
        ("x_total", "counter"),
        ("untyped_series", None),
    ]


def test_type_only_applies_after_its_type_line():
    samples, _ = parse_exposition("m 1\n# TYPE m gauge\nm 2\n")
    assert [s["type"] for s in samples] == [None, "gauge"]


def test_comments_help_blank_lines_and_crlf_are_skipped():
    text = "# just a comment\r\n\r\n   \r\n# HELP m some help\r\n# TYPE m gauge\r\nm 1\r\n# EOF\r\n"
    samples, errors = parse_exposition(text)
    assert errors == []
    assert [(s["name"], s["value"], s["line_number"], s["type"]) for s in samples] == [("m", 1.0, 6, "gauge")]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("m", "missing value"),
        ('m{a="1"}', "missing value"),
        ("m abc", "value 'abc' is not a number"),
        ("m 1_000", "value '1_000' is not a number"),
        ("m 1 2.5", "timestamp '2.5' is not an integer"),
        ("m 1 2 3", "unexpected text after the timestamp"),
        ("1m 1", "does not start with a metric name"),
        ("m-x 1", "neither labels nor whitespace"),
        ('m{a="1" 1', "expected ',' or '}' after label a"),
        ('m{a="1', "unterminated value of label a"),
        ("m{a=1} 1", "label a has no quoted value"),
        ('m{a "1"} 1', "label a has no '='"),
        ('m{1a="x"} 1', "bad label name"),
        ('m{a="1",a="2"} 1', "duplicate label a"),
        ('m{a="1"} 1 }', "timestamp '}' is not an integer"),
        ('m{a="x"}} 1', "value '}' is not a number"),
        ("m 1 }", "timestamp '}' is not an integer"),
        ("# TYPE m", "malformed # TYPE line"),
        ("# TYPE m gauges", "malformed # TYPE line"),
    ],
)
def test_bad_lines_become_errors(line, reason):
    samples, errors = parse_exposition(line)
    assert samples == []
    assert errors == [{"line_number": 1, "line": line, "reason": errors[0]["reason"]}]
    assert reason in errors[0]["reason"]


def test_a_series_read_again_gives_the_same_sample_with_labels_of_its_own():
    line = 'kafka_cluster_partition_atminisr{topic="a",partition="1"} 1.0'
    first, again = one(line), one(line.replace("1.0", "2.0 17"))
    first["labels"]["topic"] = "changed by the caller"
    assert again["labels"] == {"topic": "a", "partition": "1"}
    assert (again["name"], again["value"], again["timestamp_ms"]) == ("kafka_cluster_partition_atminisr", 2.0, 17)
    mapped = canonical_metric(again["name"], again["labels"])
    mapped["metric"] = "changed by the caller"
    assert canonical_metric(again["name"], again["labels"])["metric"] == "partition_at_min_isr"


def test_parsing_continues_after_a_bad_line():
    samples, errors = parse_exposition("a 1\nb{x=} 2\r\nc 3\n")
    assert [(s["name"], s["line_number"]) for s in samples] == [("a", 1), ("c", 3)]
    assert [(e["line_number"], e["line"]) for e in errors] == [(2, "b{x=} 2")]


def test_empty_text():
    assert parse_exposition("") == ([], [])


# ---------------------------------------------------------------------------------------------------------------
# canonical_metric


def test_strimzi_example_canonical_names():
    samples, _ = parse_exposition(STRIMZI_1X)
    assert [canonical(s) for s in samples] == [
        ("raft_current_leader", None, None, 3002.0),
        ("raft_current_state", None, None, 1.0),
        ("raft_current_epoch", None, None, 7.0),
        ("raft_high_watermark", None, None, 18542.0),
        ("raft_log_end_offset", None, None, 18542.0),
        ("raft_commit_latency_avg", None, None, 2.5),
        ("raft_commit_latency_max", None, None, 11.0),
        ("controller_active_controller_count", None, None, 1.0),
        ("controller_last_applied_record_offset", None, None, 18542.0),
        ("controller_last_committed_record_offset", None, None, 18542.0),
        ("controller_last_applied_record_timestamp", None, None, 1730000000500.0),
        ("controller_last_applied_record_lag_ms", None, None, 312.0),
        ("controller_offline_partitions_count", None, None, 1.0),
        ("broker_last_applied_record_offset", None, None, 18542.0),
        ("broker_last_applied_record_lag_ms", None, None, 87.0),
        ("broker_metadata_apply_error_count", None, None, 0.0),
        ("replica_manager_under_replicated_partitions", None, None, 1.0),
        ("replica_manager_under_min_isr_partition_count", None, None, 0.0),
        ("replica_manager_at_min_isr_partition_count", None, None, 1.0),
        ("partition_at_min_isr", "orders", 1, 1.0),
        ("partition_at_min_isr", "orders", 0, 0.0),
        ("partition_under_replicated", "orders", 1, 1.0),
    ]


def test_default_example_canonical_names():
    samples, _ = parse_exposition(DEFAULT_1X)
    assert [canonical(s) for s in samples] == [
        ("replica_manager_at_min_isr_partition_count", None, None, 1.0),
        ("replica_manager_under_min_isr_partition_count", None, None, 0.0),
        ("replica_manager_under_replicated_partitions", None, None, 1.0),
        ("partition_at_min_isr", "orders", 1, 1.0),
        ("controller_last_applied_record_lag_ms", None, None, 312.0),
        ("controller_offline_partitions_count", None, None, 1.0),
        ("raft_current_leader", None, None, 3002.0),
        ("broker_last_applied_record_offset", None, None, 18542.0),
    ]


@pytest.mark.parametrize(
    ("name", "labels", "metric"),
    [
        # Strimzi rule names
        ("kafka_controller_kafkacontroller_lastappliedrecordoffset", {}, "controller_last_applied_record_offset"),
        ("kafka_server_raftmetrics_current_leader", {}, "raft_current_leader"),
        ("kafka_server_brokermetadatametrics_last_applied_record_offset", {}, "broker_last_applied_record_offset"),
        ("kafka_server_brokermetadatametrics_last_applied_record_timestamp", {},
         "broker_last_applied_record_timestamp"),
        ("kafka_server_brokermetadatametrics_metadata_load_error_count", {}, "broker_metadata_load_error_count"),
        ("kafka_server_replicamanager_atminisrpartitioncount", {}, "replica_manager_at_min_isr_partition_count"),
        ("kafka_cluster_partition_underminisr", {"topic": "t", "partition": "0"}, "partition_under_min_isr"),
        # jmx_exporter default names
        ("kafka_controller_KafkaController_Value", {"name": "LastAppliedRecordOffset"},
         "controller_last_applied_record_offset"),
        ("kafka_controller_KafkaController_Value", {"name": "LastCommittedRecordOffset"},
         "controller_last_committed_record_offset"),
        ("kafka_controller_KafkaController_Value", {"name": "LastAppliedRecordTimestamp"},
         "controller_last_applied_record_timestamp"),
        ("kafka_controller_KafkaController_Value", {"name": "ActiveControllerCount"},
         "controller_active_controller_count"),
        ("kafka_server_raft_metrics_current_epoch", {}, "raft_current_epoch"),
        ("kafka_server_raft_metrics_high_watermark", {}, "raft_high_watermark"),
        ("kafka_server_raft_metrics_log_end_offset", {}, "raft_log_end_offset"),
        ("kafka_server_broker_metadata_metrics_last_applied_record_lag_ms", {}, "broker_last_applied_record_lag_ms"),
        ("kafka_server_broker_metadata_metrics_metadata_apply_error_count", {}, "broker_metadata_apply_error_count"),
        ("kafka_server_ReplicaManager_Value", {"name": "UnderReplicatedPartitions"},
         "replica_manager_under_replicated_partitions"),
        ("kafka_cluster_Partition_Value", {"name": "UnderReplicated", "topic": "t", "partition": "2"},
         "partition_under_replicated"),
        # lowercaseOutputName: true with the default format (label values keep their case)
        ("kafka_controller_kafkacontroller_value", {"name": "LastAppliedRecordLagMs"},
         "controller_last_applied_record_lag_ms"),
        ("kafka_server_replicamanager_value", {"name": "UnderMinIsrPartitionCount"},
         "replica_manager_under_min_isr_partition_count"),
        ("kafka_cluster_partition_value", {"name": "AtMinIsr", "topic": "t", "partition": "0"}, "partition_at_min_isr"),
        # jmx_exporter 1.x appended _total to something typed COUNTER whose base is known
        ("kafka_server_brokermetadatametrics_metadata_load_error_count_total", {}, "broker_metadata_load_error_count"),
        ("kafka_controller_kafkacontroller_offlinepartitionscount_total", {}, "controller_offline_partitions_count"),
        # KRaft controller health, Strimzi rule names
        ("kafka_server_raftmetrics_current_vote", {}, "raft_current_vote"),
        ("kafka_server_raftmetrics_number_unknown_voter_connections", {}, "raft_number_unknown_voter_connections"),
        ("kafka_server_raftmetrics_commit_latency_avg", {}, "raft_commit_latency_avg"),
        ("kafka_server_raftmetrics_commit_latency_max_total", {}, "raft_commit_latency_max"),
        ("kafka_server_raftmetrics_election_latency_avg", {}, "raft_election_latency_avg"),
        ("kafka_server_raftmetrics_election_latency_max_total", {}, "raft_election_latency_max"),
        ("kafka_server_raftmetrics_append_records_rate", {}, "raft_append_records_rate"),
        ("kafka_server_raftmetrics_fetch_records_rate", {}, "raft_fetch_records_rate"),
        ("kafka_controller_kafkacontroller_fencedbrokercount", {}, "controller_fenced_broker_count"),
        ("kafka_controller_kafkacontroller_activebrokercount", {}, "controller_active_broker_count"),
        ("kafka_controller_kafkacontroller_metadataerrorcount", {}, "controller_metadata_error_count"),
        ("kafka_controller_kafkacontroller_timedoutbrokerheartbeatcount", {},
         "controller_timed_out_broker_heartbeat_count"),
        # KRaft controller health, jmx_exporter default names
        ("kafka_server_raft_metrics_current_vote", {}, "raft_current_vote"),
        ("kafka_server_raft_metrics_number_unknown_voter_connections", {}, "raft_number_unknown_voter_connections"),
        ("kafka_server_raft_metrics_commit_latency_avg", {}, "raft_commit_latency_avg"),
        ("kafka_server_raft_metrics_commit_latency_max", {}, "raft_commit_latency_max"),
        ("kafka_server_raft_metrics_election_latency_avg", {}, "raft_election_latency_avg"),
        ("kafka_server_raft_metrics_election_latency_max", {}, "raft_election_latency_max"),
        ("kafka_server_raft_metrics_append_records_rate", {}, "raft_append_records_rate"),
        ("kafka_server_raft_metrics_fetch_records_rate", {}, "raft_fetch_records_rate"),
        ("kafka_controller_KafkaController_Value", {"name": "FencedBrokerCount"}, "controller_fenced_broker_count"),
        ("kafka_controller_KafkaController_Value", {"name": "ActiveBrokerCount"}, "controller_active_broker_count"),
        ("kafka_controller_KafkaController_Value", {"name": "MetadataErrorCount"}, "controller_metadata_error_count"),
        ("kafka_controller_KafkaController_Value", {"name": "TimedOutBrokerHeartbeatCount"},
         "controller_timed_out_broker_heartbeat_count"),
    ],
)  # fmt: skip
def test_canonical_names_across_exporter_naming(name, labels, metric):
    assert canonical_metric(name, labels)["metric"] == metric


def test_partition_metrics_carry_topic_and_int_partition():
    for labels in ({"topic": "orders", "partition": "1"}, {"partition": "1", "topic": "orders"}):
        mapped = canonical_metric("kafka_cluster_partition_atminisr", labels)
        assert (mapped["metric"], mapped["topic"], mapped["partition"]) == ("partition_at_min_isr", "orders", 1)
    mapped = canonical_metric("kafka_cluster_partition_atminisr", {"topic": "orders", "partition": "x"})
    assert mapped["partition"] is None


def test_current_state_keeps_the_state():
    mapped = canonical_metric("kafka_server_raftmetrics_current_state", {"current_state": "follower"})
    assert mapped == {
        "metric": "raft_current_state",
        "topic": None,
        "partition": None,
        "broker_id": None,
        "source_name": 'kafka_server_raftmetrics_current_state{current_state="follower"}',
        "state": "follower",
    }
    assert canonical_metric("kafka_server_raftmetrics_current_leader", {})["state"] is None


def test_source_name_is_the_series_as_written():
    assert (
        canonical_metric("kafka_controller_KafkaController_Value", {"name": "LastAppliedRecordOffset"})["source_name"]
        == 'kafka_controller_KafkaController_Value{name="LastAppliedRecordOffset"}'
    )
    assert canonical_metric("kafka_server_raftmetrics_current_leader", {})["source_name"] == (
        "kafka_server_raftmetrics_current_leader"
    )
    labels = one('m{topic="a",b="q\\"\\\\\\n"} 1')["labels"]
    assert canonical_metric("m", labels)["source_name"] == 'm{topic="a",b="q\\"\\\\\\n"}'


def test_unknown_series_keep_their_sanitized_name():
    assert canonical_metric("kafka_server_raftmetrics_poll_idle_ratio_avg", {})["metric"] == (
        "kafka_server_raftmetrics_poll_idle_ratio_avg"
    )
    assert canonical_metric("Kafka_Log:Size", {"topic": "t", "partition": "3"}) == {
        "metric": "kafka_log_size",
        "topic": "t",
        "partition": 3,
        "broker_id": None,
        "source_name": 'Kafka_Log:Size{topic="t",partition="3"}',
        "state": None,
    }


def test_unknown_series_total_is_kept():
    # a counter whose base is not a known metric keeps its `_total` (Strimzi's raft-channel-metrics rule)
    assert canonical_metric("kafka_server_raftchannelmetrics_request_total", {})["metric"] == (
        "kafka_server_raftchannelmetrics_request_total"
    )


def test_commit_latency_max_is_one_metric_in_0x_and_1x():
    # jmx_exporter 0.x writes `commit_latency_max`, 1.x `commit_latency_max_total` (Strimzi types `*-max` COUNTER)
    for name in (
        "kafka_server_raftmetrics_commit_latency_max",
        "kafka_server_raftmetrics_commit_latency_max_total",
        "kafka_server_raft_metrics_commit_latency_max",
    ):
        assert canonical_metric(name, {})["metric"] == "raft_commit_latency_max"


def test_unknown_series_told_apart_by_labels_get_distinct_names():
    leaders = canonical_metric("kafka_server_ReplicaManager_Value", {"name": "LeaderCount"})
    quantile = canonical_metric("kafka_controller_controllereventmanager_eventqueuetimems", {"quantile": "0.99"})
    assert leaders["metric"] == "kafka_server_replicamanager_value_leadercount"
    assert quantile["metric"] == "kafka_controller_controllereventmanager_eventqueuetimems_0_99"
    # label order does not matter (0.x keeps bean order, 1.x sorts)
    a = canonical_metric("m", {"name": "X", "request": "Fetch", "topic": "t"})
    b = canonical_metric("m", {"topic": "t", "request": "Fetch", "name": "X"})
    assert a["metric"] == b["metric"] == "m_x_fetch"


def test_canonical_metric_returns_none_only_for_an_empty_name():
    assert canonical_metric("", {}) is None


def test_sanitize():
    assert sanitize("Kafka.Server:Type-X_1") == "kafka_server_type_x_1"


# ---------------------------------------------------------------------------------------------------------------
# canonical_from_mbean


@pytest.mark.parametrize(
    ("mbean", "attribute", "metric", "topic", "partition"),
    [
        ("kafka.controller:type=KafkaController,name=LastAppliedRecordOffset", "Value",
         "controller_last_applied_record_offset", None, None),
        ("kafka.controller:type=KafkaController,name=OfflinePartitionsCount", "Value",
         "controller_offline_partitions_count", None, None),
        ("kafka.server:type=raft-metrics", "current-leader", "raft_current_leader", None, None),
        ("kafka.server:type=raft-metrics", "high-watermark", "raft_high_watermark", None, None),
        ("kafka.server:type=broker-metadata-metrics", "last-applied-record-offset",
         "broker_last_applied_record_offset", None, None),
        ("kafka.server:type=broker-metadata-metrics", "metadata-load-error-count",
         "broker_metadata_load_error_count", None, None),
        ("kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount", "Value",
         "replica_manager_at_min_isr_partition_count", None, None),
        ("kafka.cluster:type=Partition,name=AtMinIsr,topic=orders,partition=1", "Value",
         "partition_at_min_isr", "orders", 1),
        ("kafka.cluster:type=Partition,name=UnderMinIsr,partition=4,topic=orders", "Value",
         "partition_under_min_isr", "orders", 4),
        ("kafka.server:type=raft-metrics", "commit-latency-avg", "raft_commit_latency_avg", None, None),
        ("kafka.server:type=raft-metrics", "number-unknown-voter-connections",
         "raft_number_unknown_voter_connections", None, None),
        ("kafka.controller:type=KafkaController,name=FencedBrokerCount", "Value", "controller_fenced_broker_count",
         None, None),
        ("kafka.controller:type=KafkaController,name=TimedOutBrokerHeartbeatCount", "Value",
         "controller_timed_out_broker_heartbeat_count", None, None),
        ("kafka.server:type=raft-metrics", "poll-idle-ratio-avg", "kafka_server_raft_metrics_poll_idle_ratio_avg",
         None, None),
        ("kafka.server:type=ReplicaManager,name=LeaderCount", "Value", "kafka_server_replicamanager_leadercount_value",
         None, None),
        ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders", "Count",
         "kafka_server_brokertopicmetrics_messagesinpersec_count", "orders", None),
        ("kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-0-1,topic=t,partition=0",
         "Value", "kafka_server_fetcherlagmetrics_consumerlag_value_replicafetcherthread_0_1", "t", 0),
        ('kafka.server:type=x,name="a,b",topic=t', "Value", "kafka_server_x_a_b_value", "t", None),
        ("not-an-object-name", "Value", "not_an_object_name_value", None, None),
    ],
)  # fmt: skip
def test_canonical_from_mbean(mbean, attribute, metric, topic, partition):
    mapped = canonical_from_mbean(mbean, attribute)
    assert (mapped["metric"], mapped["topic"], mapped["partition"]) == (metric, topic, partition)
    assert mapped["source_name"] == f"{mbean}/{attribute}"
    assert mapped["state"] is None


def test_canonical_from_mbean_empty():
    assert canonical_from_mbean("", "Value") is None


def test_mbean_and_prometheus_agree():
    pairs = [
        (("kafka.server:type=raft-metrics", "current-epoch"), ("kafka_server_raftmetrics_current_epoch", {})),
        (
            ("kafka.controller:type=KafkaController,name=LastCommittedRecordOffset", "Value"),
            ("kafka_controller_KafkaController_Value", {"name": "LastCommittedRecordOffset"}),
        ),
    ]
    for (mbean, attribute), (name, labels) in pairs:
        assert canonical_from_mbean(mbean, attribute)["metric"] == canonical_metric(name, labels)["metric"]


# ---------------------------------------------------------------------------------------------------------------
# node_role


@pytest.mark.parametrize(
    ("metrics", "role"),
    [
        (["raft_current_leader", "controller_last_applied_record_offset"], "controller"),
        (["raft_current_leader", "broker_last_applied_record_offset"], "broker"),
        (["replica_manager_at_min_isr_partition_count"], "broker"),
        (["partition_at_min_isr"], "broker"),
        (["controller_active_controller_count", "broker_last_applied_record_offset"], "combined"),
        (["raft_current_leader", "raft_current_epoch", "raft_commit_latency_avg"], None),
        (["raft_current_vote", "controller_fenced_broker_count"], "controller"),
        ([], None),
        (iter(["controller_offline_partitions_count", None]), "controller"),
    ],
)
def test_node_role(metrics, role):
    assert node_role(metrics) == role


def test_node_role_of_the_example_scrapes():
    for text in (STRIMZI_1X, DEFAULT_1X):
        samples, _ = parse_exposition(text)
        assert node_role(canonical_metric(s["name"], s["labels"])["metric"] for s in samples) == "combined"


# Kafka 4.x signals (KIP-853, KIP-1131, KIP-1190, KIP-966's ELR elections): each in the three namings a scrape or a
# JMX read can carry, Strimzi-style rules, the exporter's default names, and a Jolokia read of the MBean.
KAFKA_4X = [
    (
        "raft_number_of_voters",
        None,
        ("kafka_server_raftmetrics_number_of_voters", {}),
        ("kafka_server_raft_metrics_number_of_voters", {}),
        ("kafka.server:type=raft-metrics", "number-of-voters"),
    ),
    (
        "raft_number_of_observers",
        None,
        ("kafka_server_raftmetrics_number_of_observers", {}),
        ("kafka_server_raft_metrics_number_of_observers", {}),
        ("kafka.server:type=raft-metrics", "number-of-observers"),
    ),
    (
        "raft_uncommitted_voter_change",
        None,
        ("kafka_server_raftmetrics_uncommitted_voter_change", {}),
        ("kafka_server_raft_metrics_uncommitted_voter_change", {}),
        ("kafka.server:type=raft-metrics", "uncommitted-voter-change"),
    ),
    (
        "controller_ignored_static_voters",
        None,
        ("kafka_controller_kafkacontroller_ignoredstaticvoters", {}),
        ("kafka_controller_KafkaController_Value", {"name": "IgnoredStaticVoters"}),
        ("kafka.controller:type=KafkaController,name=IgnoredStaticVoters", "Value"),
    ),
    (
        "broker_ignored_static_voters",
        None,
        ("kafka_server_brokermetadatametrics_ignored_static_voters", {}),
        ("kafka_server_broker_metadata_metrics_ignored_static_voters", {}),
        ("kafka.server:type=broker-metadata-metrics", "ignored-static-voters"),
    ),
    (
        "controller_avg_idle_ratio",
        None,
        ("kafka_controller_controllereventmanager_avgidleratio", {}),
        ("kafka_controller_ControllerEventManager_Value", {"name": "AvgIdleRatio"}),
        ("kafka.controller:type=ControllerEventManager,name=AvgIdleRatio", "Value"),
    ),
    (
        "controller_unclean_leader_elections_total",
        None,
        ("kafka_controller_controllerstats_uncleanleaderelections_total", {}),
        ("kafka_controller_ControllerStats_Count", {"name": "UncleanLeaderElectionsPerSec"}),
        ("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", "Count"),
    ),
    (
        "controller_elr_elections_total",
        None,
        ("kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total", {}),
        ("kafka_controller_ControllerStats_Count", {"name": "ElectionFromEligibleLeaderReplicasPerSec"}),
        ("kafka.controller:type=ControllerStats,name=ElectionFromEligibleLeaderReplicasPerSec", "Count"),
    ),
    (
        "controller_broker_registration_state",
        5,
        ("kafka_controller_kafkacontroller_brokerregistrationstate", {"broker": "5"}),
        ("kafka_controller_KafkaController_Value", {"broker": "5", "name": "BrokerRegistrationState"}),
        ("kafka.controller:type=KafkaController,name=BrokerRegistrationState,broker=5", "Value"),
    ),
    (
        "controller_time_since_last_heartbeat_received_ms",
        6,
        ("kafka_controller_kafkacontroller_timesincelastheartbeatreceivedms", {"broker": "6"}),
        ("kafka_controller_KafkaController_Value", {"broker": "6", "name": "TimeSinceLastHeartbeatReceivedMs"}),
        ("kafka.controller:type=KafkaController,name=TimeSinceLastHeartbeatReceivedMs,broker=6", "Value"),
    ),
    (
        "controller_controlled_shutdown_broker_count",
        None,
        ("kafka_controller_kafkacontroller_controlledshutdownbrokercount", {}),
        ("kafka_controller_KafkaController_Value", {"name": "ControlledShutdownBrokerCount"}),
        ("kafka.controller:type=KafkaController,name=ControlledShutdownBrokerCount", "Value"),
    ),
]


@pytest.mark.parametrize("metric,broker,strimzi,default,jolokia", KAFKA_4X, ids=[k[0] for k in KAFKA_4X])
def test_kafka_4x_signals_have_one_name_in_every_naming(metric, broker, strimzi, default, jolokia):
    for name, labels in (strimzi, default):
        mapped = canonical_metric(name, labels)
        assert (mapped["metric"], mapped["broker_id"]) == (metric, broker), (name, labels)
    mapped = canonical_from_mbean(*jolokia)
    assert (mapped["metric"], mapped["broker_id"]) == (metric, broker), jolokia


def test_other_meter_counts_and_rates_keep_their_own_names():
    # only the two election meters' Count is canonical; their rates and other meters keep their own names
    assert canonical_metric("kafka_controller_ControllerStats_OneMinuteRate", {"name": "UncleanLeaderElectionsPerSec"})[
        "metric"
    ] == ("kafka_controller_controllerstats_oneminuterate_uncleanleaderelectionspersec")
    own = canonical_metric("kafka_server_ReplicaManager_Count", {"name": "IsrShrinksPerSec"})
    assert own["metric"] == "kafka_server_replicamanager_count_isrshrinkspersec" and own["broker_id"] is None
    # a broker label on a series outside the canonical list stays in its name, not in broker_id
    other = canonical_metric("kafka_controller_kafkacontroller_somethingelse", {"broker": "4"})
    assert other["metric"] == "kafka_controller_kafkacontroller_somethingelse_4" and other["broker_id"] is None
