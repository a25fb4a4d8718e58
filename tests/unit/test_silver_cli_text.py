"""quorumlake.silver.cli_text: the kafka-metadata-quorum and kafka-topics capture parsers (plain Python, no Spark)."""

from __future__ import annotations

import pytest

from quorumlake.silver.cli_text import CaptureError, parse_replication, parse_status, parse_topics
from tests.captures import REPLICATION_39, REPLICATION_HUMAN, STATUS_38, STATUS_39, TOPICS_38

COLLECTED_AT_MS = 1730000000500

# docs/kafka-surfaces.md §3.3, up to 3.8: a voter that has not fetched since the election (LEO and timestamps -1).
REPLICATION_38 = (
    "NodeId\tLogEndOffset\tLag  \tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n"
    "3002  \t18542       \t0    \t1730000000500     \t1730000000500        \tLeader  \t\n"
    "3000  \t-1          \t18543\t-1                \t-1                   \tFollower\t\n"
)


def with_status(text: str, line: str, replacement: str) -> str:
    lines = text.splitlines()
    index = next(i for i, existing in enumerate(lines) if existing.startswith(line))
    lines[index] = replacement
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# describe --replication


def test_replication_39_exact_bytes():
    rows = parse_replication(REPLICATION_39, COLLECTED_AT_MS)
    assert rows == [
        {
            "position": 0, "replica_id": 3002, "replica_directory_id": "g42deArWBTRM5A1yuVpMCg",
            "log_end_offset": 18542, "lag": 0, "last_fetch_ms": 1730000000500, "last_caught_up_ms": 1730000000500,
            "status": "Leader", "layout": "3.9+", "human_readable": False,
        },
        {
            "position": 1, "replica_id": 3000, "replica_directory_id": "ILZ5MPTeRWakmJu99uBJCA",
            "log_end_offset": 18542, "lag": 0, "last_fetch_ms": 1730000000480, "last_caught_up_ms": 1730000000480,
            "status": "Follower", "layout": "3.9+", "human_readable": False,
        },
        {
            "position": 2, "replica_id": 3001, "replica_directory_id": "b-DwmhtOheTqZzPoh52kfA",
            "log_end_offset": 18530, "lag": 12, "last_fetch_ms": 1730000000200, "last_caught_up_ms": 1729999998100,
            "status": "Follower", "layout": "3.9+", "human_readable": False,
        },
        {
            "position": 3, "replica_id": 0, "replica_directory_id": "3Db5QLSqSZieL3rJBUUegA",
            "log_end_offset": 18542, "lag": 0, "last_fetch_ms": 1730000000450, "last_caught_up_ms": 1730000000450,
            "status": "Observer", "layout": "3.9+", "human_readable": False,
        },
    ]  # fmt: skip


def test_replication_human_readable_is_relative_to_collected_at():
    rows = parse_replication(REPLICATION_HUMAN, COLLECTED_AT_MS)
    assert [(r["replica_id"], r["last_fetch_ms"], r["last_caught_up_ms"]) for r in rows] == [
        (3002, 1730000000500, 1730000000500),
        (3000, 1730000000480, 1730000000480),
        (3001, 1730000000200, 1729999998100),
        (0, 1730000000450, 1730000000450),
    ]
    assert {(r["layout"], r["human_readable"], r["replica_directory_id"]) for r in rows} == {("3.3-3.8", True, None)}


def test_human_readable_and_epoch_captures_agree():
    strip = ("layout", "human_readable", "replica_directory_id")
    human = [
        {k: v for k, v in r.items() if k not in strip} for r in parse_replication(REPLICATION_HUMAN, 1730000000500)
    ]
    epoch = [{k: v for k, v in r.items() if k not in strip} for r in parse_replication(REPLICATION_39, 0)]
    assert human == epoch


def test_replication_voter_with_unknown_leo_and_timestamps():
    rows = parse_replication(REPLICATION_38, COLLECTED_AT_MS)
    assert rows[1] == {
        "position": 1, "replica_id": 3000, "replica_directory_id": None, "log_end_offset": None, "lag": 18543,
        "last_fetch_ms": None, "last_caught_up_ms": None, "status": "Follower", "layout": "3.3-3.8",
        "human_readable": False,
    }  # fmt: skip


def test_replication_minus_one_stays_unknown_in_human_readable_mode():
    text = REPLICATION_HUMAN.replace(
        "3000  \t18542       \t0  \t20 ms ago         \t20 ms ago            \tFollower\t",
        "3000  \t-1          \t18543\t-1               \t-1                   \tFollower\t",
    )
    rows = parse_replication(text, COLLECTED_AT_MS)
    assert (rows[1]["log_end_offset"], rows[1]["last_fetch_ms"], rows[1]["last_caught_up_ms"]) == (None, None, None)
    assert rows[1]["lag"] == 18543
    assert all(r["human_readable"] for r in rows)


def test_replication_all_zero_directory_id_is_none():
    text = REPLICATION_39.replace("3Db5QLSqSZieL3rJBUUegA", "AAAAAAAAAAAAAAAAAAAAAA")
    assert parse_replication(text, COLLECTED_AT_MS)[3]["replica_directory_id"] is None


def test_replication_tolerates_missing_trailing_tabs_crlf_and_blank_lines():
    text = "\r\n".join(line.rstrip("\t") for line in REPLICATION_39.splitlines()) + "\r\n\r\n"
    assert parse_replication(text, COLLECTED_AT_MS) == parse_replication(REPLICATION_39, COLLECTED_AT_MS)


def test_replication_without_any_tabs_falls_back_to_whitespace():
    text = REPLICATION_HUMAN.replace("\t", " ")
    assert parse_replication(text, COLLECTED_AT_MS) == parse_replication(REPLICATION_HUMAN, COLLECTED_AT_MS)


def test_replication_columns_found_by_name():
    text = (
        "Status\tNodeId\tLag\tLogEndOffset\tLastCaughtUpTimestamp\tLastFetchTimestamp\n"
        "Leader\t1\t0\t10\t100\t200\n"
        "Follower\t2\t3\t7\t90\t190\n"
    )
    rows = parse_replication(text, COLLECTED_AT_MS)
    keys = ("replica_id", "log_end_offset", "lag", "last_fetch_ms", "last_caught_up_ms")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        (1, 10, 0, 200, 100),
        (2, 7, 3, 190, 90),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no header"),
        ("\n\n", "no header"),
        ("3002\t18542\t0\t1\t1\tLeader\t\n", "line 1: no header"),
        ("NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tStatus\t\n", r"missing column\(s\) LastCaughtUpTimestamp"),
        ("NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t\n", "no data rows"),
        (
            "NodeId\tNodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t\n",
            "duplicate column",
        ),
    ],
)
def test_replication_header_errors(text, message):
    with pytest.raises(CaptureError, match=message):
        parse_replication(text, COLLECTED_AT_MS)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("3000\t18542\t0\t1\t1\tCandidate\t", "line 3: unknown status 'Candidate'"),
        ("3000\t18542\t0\t1\t1\tleader\t", "line 3: unknown status"),
        ("30x0\t18542\t0\t1\t1\tFollower\t", "line 3: NodeId '30x0' is not an integer"),
        ("3000\t1.5\t0\t1\t1\tFollower\t", "line 3: LogEndOffset '1.5' is not an integer"),
        ("3000\t18542\t\t1\t1\tFollower\t", "line 3: Lag '' is not an integer"),
        ("3000\t18542\t0\tyesterday\t1\tFollower\t", "line 3: LastFetchTimestamp 'yesterday'"),
        ("3000\t18542\t0\t1\t5 s ago\tFollower\t", "line 3: LastCaughtUpTimestamp '5 s ago'"),
        ("3000\t18542\t0\t1\tFollower\t", "line 3: expected 6 cells, found 5"),
        ("3000\t18542\t0\t1\t1\tFollower\textra\t", "line 3: expected 6 cells, found 7"),
        ("3000\t18542\t0\t1\t1\tLeader\t", "line 3: second Leader row"),
        ("3000\t18542\t0\t7 ms ago\t1\tFollower\t", "line 3: mixes 'N ms ago' and epoch-ms"),
    ],
)
def test_replication_row_errors(row, message):
    text = (
        "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t\n3002\t5\t0\t1\t1\tLeader\t\n"
    )
    with pytest.raises(CaptureError, match=message):
        parse_replication(text + row + "\n", COLLECTED_AT_MS)


def test_replication_without_leader_row():
    text = (
        "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t\n3000\t5\t0\t1\t1\tFollower\t\n"
    )
    with pytest.raises(CaptureError, match="no Leader row"):
        parse_replication(text, COLLECTED_AT_MS)


def test_replication_empty_directory_id_is_an_error():
    text = REPLICATION_39.replace("ILZ5MPTeRWakmJu99uBJCA", "                      ")
    with pytest.raises(CaptureError, match="line 3: empty DirectoryId"):
        parse_replication(text, COLLECTED_AT_MS)


def test_capture_error_is_a_value_error():
    assert issubclass(CaptureError, ValueError)


# ---------------------------------------------------------------------------------------------------------------
# describe --status


def test_status_39():
    assert parse_status(STATUS_39) == {
        "kafka_cluster_id": "MkU3OEVBNTcwNTJENDM2Qk",
        "leader_id": 3002,
        "leader_epoch": 7,
        "high_watermark": 18542,
        "max_follower_lag": 12,
        "max_follower_lag_time_ms": 2400,
        "voters": [
            {"id": 3000, "directory_id": "ILZ5MPTeRWakmJu99uBJCA", "endpoints": ["CONTROLLER://controller-0:9093"]},
            {"id": 3001, "directory_id": "b-DwmhtOheTqZzPoh52kfA", "endpoints": ["CONTROLLER://controller-1:9093"]},
            {"id": 3002, "directory_id": "g42deArWBTRM5A1yuVpMCg", "endpoints": ["CONTROLLER://controller-2:9093"]},
        ],
        "observers": [{"id": 0, "directory_id": "3Db5QLSqSZieL3rJBUUegA", "endpoints": []}],
        "layout": "3.9+",
    }


def test_status_38():
    status = parse_status(STATUS_38)
    assert status["layout"] == "3.3-3.8"
    assert status["voters"] == [
        {"id": 3000, "directory_id": None, "endpoints": []},
        {"id": 3001, "directory_id": None, "endpoints": []},
        {"id": 3002, "directory_id": None, "endpoints": []},
    ]
    assert status["observers"] == [{"id": 0, "directory_id": None, "endpoints": []}]
    assert (status["leader_id"], status["leader_epoch"], status["high_watermark"]) == (3002, 7, 18542)


def test_status_scala_trailing_empty_line_and_crlf():
    text = STATUS_38.replace("\n", "\r\n") + "\r\n"
    assert parse_status(text) == parse_status(STATUS_38)


def test_status_unknowns():
    text = with_status(STATUS_38, "HighWatermark", "HighWatermark:          -1")
    text = with_status(text, "MaxFollowerLagTimeMs", "MaxFollowerLagTimeMs:   -1")
    text = with_status(text, "CurrentObservers", "CurrentObservers:       []")
    status = parse_status(text)
    assert (status["high_watermark"], status["max_follower_lag_time_ms"], status["observers"]) == (None, -1, [])


def test_status_null_and_zero_directory_ids_are_none():
    text = with_status(
        STATUS_39,
        "CurrentObservers",
        'CurrentObservers:       [{"id": 0, "directoryId": null}, {"id": 1, "directoryId": "AAAAAAAAAAAAAAAAAAAAAA"}]',
    )
    assert parse_status(text)["observers"] == [
        {"id": 0, "directory_id": None, "endpoints": []},
        {"id": 1, "directory_id": None, "endpoints": []},
    ]


def test_status_empty_lists_have_no_layout():
    text = with_status(STATUS_38, "CurrentVoters", "CurrentVoters:          []")
    text = with_status(text, "CurrentObservers", "CurrentObservers:       []")
    assert parse_status(text)["layout"] is None


def test_status_ignores_unknown_labels():
    assert parse_status(STATUS_38 + "SomethingNew:           42\n") == parse_status(STATUS_38)


@pytest.mark.parametrize(
    ("label", "replacement", "message"),
    [
        ("LeaderEpoch", "LeaderEpoch:            seven", "line 3: LeaderEpoch 'seven' is not an integer"),
        ("HighWatermark", "HighWatermark:          1.5", "line 4: HighWatermark '1.5' is not an integer"),
        ("MaxFollowerLag:", "MaxFollowerLag:", "line 5: MaxFollowerLag has no value"),
        ("CurrentVoters", "CurrentVoters:          [3000,", "line 7: CurrentVoters is not a replica list"),
        ("CurrentVoters", "CurrentVoters:          3000", "line 7: CurrentVoters is not a replica list"),
        ("CurrentVoters", 'CurrentVoters:          ["x"]', "line 7: CurrentVoters element 'x' has no integer id"),
        ("CurrentVoters", 'CurrentVoters:          [{"id": 1, "directoryId": 5}]', "line 7: .*directoryId 5"),
        ("CurrentVoters", 'CurrentVoters:          [{"id": 1, "endpoints": "x"}]', "line 7: .*endpoints 'x'"),
        ("CurrentVoters", 'CurrentVoters:          [{"id": 1, "directoryId": null}]', "line 8: mixes bare ids"),
        ("ClusterId", "Error while describing the quorum", "line 1: not a 'Label: value' line"),
        ("LeaderId", "ClusterId:              again", "line 2: duplicate label ClusterId"),
    ],
)
def test_status_errors(label, replacement, message):
    with pytest.raises(CaptureError, match=message):
        parse_status(with_status(STATUS_38, label, replacement))


def test_status_missing_labels():
    text = "\n".join(line for line in STATUS_38.splitlines() if not line.startswith(("LeaderEpoch", "CurrentVoters")))
    with pytest.raises(CaptureError, match="missing label\\(s\\) LeaderEpoch, CurrentVoters"):
        parse_status(text)


def test_status_empty_text():
    with pytest.raises(CaptureError, match="missing label"):
        parse_status("")


# ---------------------------------------------------------------------------------------------------------------
# kafka-topics --describe


def test_topics_38_example():
    assert parse_topics(TOPICS_38) == [
        {
            "topic": "orders", "partition": 0, "leader_id": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3],
            "adding_replicas": [], "removing_replicas": [], "elr": [], "last_known_elr": [], "min_isr": 2,
            "topic_id": "q8VZlRdhS0m8CxwYk9RWbA", "marked_for_deletion": False, "line_number": 2,
        },
        {
            "topic": "orders", "partition": 1, "leader_id": 2, "replicas": [2, 3, 1], "isr": [2, 3],
            "adding_replicas": [], "removing_replicas": [], "elr": [], "last_known_elr": [], "min_isr": 2,
            "topic_id": "q8VZlRdhS0m8CxwYk9RWbA", "marked_for_deletion": False, "line_number": 3,
        },
        {
            "topic": "orders", "partition": 2, "leader_id": None, "replicas": [3, 1, 2], "isr": [3],
            "adding_replicas": [], "removing_replicas": [], "elr": [], "last_known_elr": [], "min_isr": 2,
            "topic_id": "q8VZlRdhS0m8CxwYk9RWbA", "marked_for_deletion": False, "line_number": 4,
        },
    ]  # fmt: skip


def test_topics_pre_38_has_no_elr():
    text = TOPICS_38.replace("\tElr: \tLastKnownElr: ", "")
    rows = parse_topics(text)
    assert [(r["elr"], r["last_known_elr"]) for r in rows] == [(None, None)] * 3
    assert [r["isr"] for r in rows] == [[1, 2, 3], [2, 3], [3]]


def test_topics_elr_values_and_not_available():
    text = (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: 2,3\tLastKnownElr: 3\n"
        "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: N/A\tLastKnownElr: N/A\n"
    )
    rows = parse_topics(text)
    assert [(r["elr"], r["last_known_elr"]) for r in rows] == [([2, 3], [3]), (None, None)]


def test_topics_reassignment_and_marked_for_deletion():
    text = (
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: \tMarkedForDeletion: true\n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,4\tIsr: 1,2\tAdding Replicas: 4\tRemoving Replicas: 2"
        "\tElr: \tLastKnownElr: \tMarkedForDeletion: true\n"
    )
    (row,) = parse_topics(text)
    assert (row["adding_replicas"], row["removing_replicas"], row["marked_for_deletion"]) == ([4], [2], True)
    assert (row["topic_id"], row["min_isr"]) == (None, 1)


def test_topics_header_marked_for_deletion_applies_to_its_partitions():
    text = (
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \tMarkedForDeletion: true\n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
    )
    assert parse_topics(text)[0]["marked_for_deletion"] is True


def test_topics_missing_header_uses_default_min_isr():
    text = "\tTopic: orders\tPartition: 3\tLeader: 1\tReplicas: 1,2\tIsr: 1\n"
    assert parse_topics(text, default_min_isr=2)[0]["min_isr"] == 2
    assert parse_topics(text)[0]["min_isr"] == 1
    assert parse_topics(text)[0]["topic_id"] is None


def test_topics_header_without_min_isr_config_uses_default():
    text = (
        "Topic: a\tTopicId: x\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact\n"
        "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
    )
    assert parse_topics(text, default_min_isr=3)[0]["min_isr"] == 3


def test_topics_configs_with_commas_in_values():
    text = (
        "Topic: a\tPartitionCount: 1\tReplicationFactor: 2\t"
        "Configs: leader.replication.throttled.replicas=0:1,0:2,min.insync.replicas=2,retention.ms=1000\n"
        "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
    )
    assert parse_topics(text)[0]["min_isr"] == 2


def test_topics_several_topics_keep_their_own_header():
    text = (
        "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: min.insync.replicas=3\n"
        "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
        "Topic: b\tTopicId: idb\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
        "\tTopic: b\tPartition: 0\tLeader: -1\tReplicas: 1\tIsr: \n"
    )
    rows = parse_topics(text)
    assert [(r["topic"], r["min_isr"], r["topic_id"], r["leader_id"], r["isr"]) for r in rows] == [
        ("a", 3, None, 1, [1]),
        ("b", 1, "idb", None, []),
    ]


def test_topics_crlf_trailing_whitespace_stripped_and_empty_output():
    text = TOPICS_38.replace(" \n", "\n").replace("\n", "\r\n") + "\r\n"
    assert parse_topics(text) == parse_topics(TOPICS_38)
    assert parse_topics("") == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("\tTopic: t\tPartition: x\tLeader: 1\tReplicas: 1\tIsr: 1", "line 2: Partition 'x' is not an integer"),
        ("\tTopic: t\tPartition: 0\tLeader: one\tReplicas: 1\tIsr: 1", "line 2: Leader 'one' is not an integer"),
        ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,a\tIsr: 1", "line 2: Replicas 'a' is not an integer"),
        ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1,,2", "line 2: Isr '' is not an integer"),
        ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: x", "line 2: Elr 'x' is not an integer"),
        ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1", "line 2: partition line without Isr"),
        ("\tTopic: t\tPartition: 0\tLeader 1\tReplicas: 1\tIsr: 1", "line 2: field 'Leader 1' is not 'Key: value'"),
        ("\tTopic: t\tPartition: 0\tPartition: 1\tLeader: 1", "line 2: duplicate field Partition"),
        ("Error while executing topic command : boom", "line 2: neither a topic header nor a partition line"),
        ("\tTopic: \tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1", "line 2: neither"),
        ("Topic: u\tPartitionCount: three\tReplicationFactor: 1\tConfigs: ", "line 2: PartitionCount 'three'"),
        ("Topic: u\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: min.insync.replicas=two", "line 2: min.insync"),
        ("Topic: u\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: garbage", "line 2: config entry 'garbage'"),
    ],
)
def test_topics_errors(line, message):
    text = "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n" + line + "\n"
    with pytest.raises(CaptureError, match=message):
        parse_topics(text)
