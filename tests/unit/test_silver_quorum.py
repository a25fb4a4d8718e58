"""quorumlake.silver.quorum: build_quorum_snapshots (silver.quorum_snapshots, silver.replica_states) on tiny bronze rows, and
the pure-Python cli_snapshot. Scenario of docs/kafka-surfaces.md §1.5 and §3: voters 3000, 3001, 3002; leader 3002 in
epoch 7 (listed last in the response); HW 18542; voter 3001 behind; broker 0 an observer; leader clock 1730000000500.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime

import pytest
from pyspark.sql import DataFrame

from quorumlake.silver.quorum import build_quorum_snapshots as build
from quorumlake.silver.quorum import cli_snapshot
from tests.captures import REPLICATION_39, REPLICATION_HUMAN, STATUS_38, STATUS_39
from tests.frames import check_rows
from tests.helpers import RUN_1, RUN_2, ts

pytestmark = pytest.mark.usefixtures("drop_cached")

BRONZE = (
    "record_id STRING, format STRING, cluster_id STRING, collected_at TIMESTAMP, api_version INT, payload STRING, "
    "source_file STRING, line_number INT, ingested_at TIMESTAMP, parse_error STRING"
)
COLLECTED_MS = 1730000000600
LEADER_NOW = 1730000000500

SNAPSHOT_COLUMNS = [
    "cluster_id",
    "collected_at",
    "source",
    "api_version",
    "leader_id",
    "leader_epoch",
    "high_watermark",
    "voter_count",
    "observer_count",
    "voter_ids",
    "error_code",
    "error_message",
    "ref_at",
    "record_ids",
]
SNAPSHOT_SCHEMA = (
    "cluster_id STRING, collected_at TIMESTAMP, source STRING, api_version INT, leader_id INT, leader_epoch INT, "
    "high_watermark BIGINT, voter_count INT, observer_count INT, voter_ids ARRAY<INT>, error_code INT, "
    "error_message STRING, ref_at TIMESTAMP, record_ids ARRAY<STRING>"
)
LAG_COLUMNS = [
    "replica_id",
    "is_voter",
    "position",
    "role",
    "log_end_offset",
    "offset_lag",
    "caught_up_lag_ms",
    "fetch_age_ms",
]
LAG_SCHEMA = (
    "replica_id INT, is_voter BOOLEAN, position INT, role STRING, log_end_offset BIGINT, offset_lag BIGINT, "
    "caught_up_lag_ms BIGINT, fetch_age_ms BIGINT"
)
TIME_COLUMNS = [
    "replica_id",
    "is_voter",
    "replica_directory_id",
    "last_fetch_at",
    "last_caught_up_at",
    "source",
    "record_id",
]
TIME_SCHEMA = (
    "replica_id INT, is_voter BOOLEAN, replica_directory_id STRING, last_fetch_at TIMESTAMP, "
    "last_caught_up_at TIMESTAMP, source STRING, record_id STRING"
)
NOT_LEADER = (
    "For requests intended only for the leader, this error indicates that the broker is not the current "
    "leader. For requests intended for any replica, this error indicates that the broker is not a replica "
    "of the topic partition."
)
DIRECTORY = {
    3000: "ILZ5MPTeRWakmJu99uBJCA",
    3001: "b-DwmhtOheTqZzPoh52kfA",
    3002: "g42deArWBTRM5A1yuVpMCg",
    0: "3Db5QLSqSZieL3rJBUUegA",
}


def replica(
    version: int, replica_id: int, leo: int, fetch: int = -1, caught_up: int = -1, directory: str | None = None
) -> dict:
    """A ReplicaState as the JSON converter renders it at `version` (§1.3: fields outside the version are absent)."""
    state: dict = {"replicaId": replica_id}
    if version >= 2:
        state["replicaDirectoryId"] = directory or DIRECTORY.get(replica_id, "AAAAAAAAAAAAAAAAAAAAAA")
    state["logEndOffset"] = leo
    if version >= 1:
        state["lastFetchTimestamp"] = fetch
        state["lastCaughtUpTimestamp"] = caught_up
    return state


def scenario_voters(version: int) -> list[dict]:
    """§1.5: the leader 3002 is listed last (voterStates is a HashMap)."""
    return [
        replica(version, 3000, 18542, 1730000000480, 1730000000480),
        replica(version, 3001, 18530, 1730000000200, 1729999998100),
        replica(version, 3002, 18542, LEADER_NOW, LEADER_NOW),
    ]


def scenario_observers(version: int) -> list[dict]:
    return [replica(version, 0, 18542, 1730000000450, 1730000000450)]


def response(
    version: int,
    voters: list[dict],
    observers: list[dict],
    leader: int = 3002,
    epoch: int = 7,
    hw: int = 18542,
    error: int = 0,
    message: str = "",
    top_error: int = 0,
    top_message: str = "",
) -> dict:
    partition: dict = {"partitionIndex": 0, "errorCode": error}
    if version >= 2:
        partition["errorMessage"] = message
    partition.update(
        {"leaderId": leader, "leaderEpoch": epoch, "highWatermark": hw, "currentVoters": voters, "observers": observers}
    )
    body: dict = {"errorCode": top_error}
    if version >= 2:
        body["errorMessage"] = top_message
    body["topics"] = [{"topicName": "__cluster_metadata", "partitions": [partition]}]
    if version >= 2:
        body["nodes"] = []
    return body


def admin(
    record_id: str,
    resp: dict,
    version: int,
    cluster: str = "c1",
    collected_ms: int = COLLECTED_MS,
    ingested_at: datetime = RUN_1,
    parse_error: str | None = None,
) -> tuple:
    payload = json.dumps(
        {"cluster_id": cluster, "collected_at_ms": collected_ms, "api_version": version, "response": resp},
        separators=(",", ":"),
    )
    return (
        record_id,
        "describe_quorum_json",
        cluster,
        ts(collected_ms),
        version,
        payload,
        "file:/landing/quorum/q.jsonl",
        1,
        ingested_at,
        parse_error,
    )


def capture(
    record_id: str,
    kind: str,
    text: str,
    cluster: str = "c1",
    collected_ms: int = COLLECTED_MS,
    ingested_at: datetime = RUN_1,
) -> tuple:
    """A kafka-metadata-quorum capture: kind is 'replication' or 'status'."""
    return (
        record_id,
        f"quorum_cli_{kind}",
        cluster,
        ts(collected_ms),
        None,
        text,
        f"file:/landing/quorum/cluster={cluster}/{collected_ms}.{kind}.txt",
        None,
        ingested_at,
        None,
    )


# Every test's bronze rows are built in one input frame, once per module (`built`): one plan and three Spark actions
# for the module instead of a plan and a handful of actions per test (building quorumlake.silver.quorum's plan alone
# takes seconds).
CASES: list[Callable[[], list[tuple]]] = []
MARK = re.compile("\u00a7[0-9]+\u00a7")  # §<case>§, put before a case's record ids and clusters


def case(rows: Callable[[], list[tuple]]) -> Callable[[], list[tuple]]:
    """A test's bronze rows (record_id, format, cluster_id, ... in the order of BRONZE), built with the others."""
    CASES.append(rows)
    return rows


@pytest.fixture(scope="module")
def built(spark) -> dict[Callable, tuple[DataFrame, DataFrame, DataFrame]]:
    """(snapshots, replicas, rejected) of each case: every case's rows through build_quorum_snapshots in one input
    frame, a case's record ids and clusters marked as its own (no two cases share a snapshot key, and each output
    row names the records it came from), each output collected once; a case gets its own rows back, marks removed,
    as local DataFrames of the output's schema (checking them runs no Spark job)."""
    rows = [
        (f"\u00a7{i}\u00a7{r[0]}", r[1], None if r[2] is None else f"\u00a7{i}\u00a7{r[2]}", *r[3:])
        for i, rows_of in enumerate(CASES)
        for r in rows_of()
    ]
    outputs = build(spark.createDataFrame(rows, BRONZE))
    per_case: dict[Callable, list[DataFrame]] = {rows_of: [] for rows_of in CASES}
    for df in outputs:
        collected = df.collect()
        for i, rows_of in enumerate(CASES):
            mine = [_unmarked(r) for r in collected if f"\u00a7{i}\u00a7" in repr(r)]
            per_case[rows_of].append(spark.createDataFrame(mine, df.schema))
    return {rows_of: tuple(frames) for rows_of, frames in per_case.items()}


def run(spark, *rows: tuple):
    """(snapshots, replicas, rejected) of `rows` built on their own, each cached (a test looks at an output more than
    once): for tests elsewhere that build these tables from rows of their own."""
    return tuple(df.cache() for df in build(spark.createDataFrame(list(rows), BRONZE)))


def _unmarked(value):
    if isinstance(value, str):
        return MARK.sub("", value)
    if isinstance(value, dict):
        return {_unmarked(k): _unmarked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # a Row is a tuple
        return tuple(_unmarked(v) for v in value) if isinstance(value, tuple) else [_unmarked(v) for v in value]
    return value


def snapshot(
    cluster="c1",
    source="admin",
    api_version=1,
    leader=3002,
    epoch=7,
    hw=18542,
    voters=(3000, 3001, 3002),
    observers=1,
    error=0,
    message=None,
    ref_ms=LEADER_NOW,
    record_ids=("r1",),
    collected_ms=COLLECTED_MS,
):
    return (
        cluster,
        ts(collected_ms),
        source,
        api_version,
        leader,
        epoch,
        hw,
        len(voters),
        observers,
        list(voters),
        error,
        message,
        ts(ref_ms),
        list(record_ids),
    )


# The §1.5 scenario as silver.replica_states rows (ref = the leader's clock, 1730000000500).
SCENARIO_LAGS = [
    (3000, True, 0, "follower", 18542, 0, 20, 20),
    (3001, True, 1, "follower", 18530, 12, 2400, 300),
    (3002, True, 2, "leader", 18542, 0, 0, 0),
    (0, False, 0, "observer", 18542, 0, 50, 50),
]


# --- DescribeQuorum JSON, by version ----------------------------------------------------------------------------


@case
def v0() -> list[tuple]:
    return [admin("r1", response(0, scenario_voters(0), scenario_observers(0)), 0)]


def test_v0_has_no_timestamps_so_only_the_leader_has_time_lags_and_ref_is_the_capture_time(built):
    snapshots, replicas, rejected = built[v0]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(api_version=0, ref_ms=COLLECTED_MS)])
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3000, True, 0, "follower", 18542, 0, None, None),
            (3001, True, 1, "follower", 18530, 12, None, None),
            (3002, True, 2, "leader", 18542, 0, 0, 0),
            (0, False, 0, "observer", 18542, 0, None, None),
        ],
    )
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3000, True, None, None, None, "admin", "r1"),
            (3001, True, None, None, None, "admin", "r1"),
            (3002, True, None, None, None, "admin", "r1"),
            (0, False, None, None, None, "admin", "r1"),
        ],
    )
    assert rejected.collect() == []


@case
def v1() -> list[tuple]:
    return [admin("r1", response(1, scenario_voters(1), scenario_observers(1)), 1)]


def test_v1_leader_listed_last_is_the_reference_and_has_zero_lags(built):
    snapshots, replicas, rejected = built[v1]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(api_version=1, ref_ms=LEADER_NOW)])
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS)
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3000, True, None, ts(1730000000480), ts(1730000000480), "admin", "r1"),
            (3001, True, None, ts(1730000000200), ts(1729999998100), "admin", "r1"),
            (3002, True, None, ts(LEADER_NOW), ts(LEADER_NOW), "admin", "r1"),
            (0, False, None, ts(1730000000450), ts(1730000000450), "admin", "r1"),
        ],
    )
    assert rejected.collect() == []


@case
def v2_zero_directory() -> list[tuple]:
    voters = scenario_voters(2)
    voters[1]["replicaDirectoryId"] = "AAAAAAAAAAAAAAAAAAAAAA"
    return [admin("r1", response(2, voters, scenario_observers(2)), 2)]


@case
def v2_nodes() -> list[tuple]:
    resp = response(2, scenario_voters(2), scenario_observers(2))
    resp["nodes"] = [
        {"nodeId": 3000, "listeners": [{"name": "CONTROLLER", "host": "controller-0", "port": 9093}]},
        {
            "nodeId": 3002,
            "listeners": [
                {"name": "CONTROLLER", "host": "controller-2", "port": 9093},
                {"name": "SSL", "host": "controller-2", "port": 9094},
            ],
        },
    ]
    return [admin("r1", resp, 2)]


def test_v2_nodes_give_the_voters_endpoints(built):
    """DescribeQuorum v2 `nodes`: each voter's listeners as NAME://host:port; a voter the list leaves out, and every
    observer, has NULL."""
    _, replicas, _ = built[v2_nodes]
    check_rows(
        replicas,
        ["replica_id", "is_voter", "endpoints"],
        "replica_id INT, is_voter BOOLEAN, endpoints ARRAY<STRING>",
        [
            (3000, True, ["CONTROLLER://controller-0:9093"]),
            (3001, True, None),
            (3002, True, ["CONTROLLER://controller-2:9093", "SSL://controller-2:9094"]),
            (0, False, None),
        ],
    )


def test_v2_directory_ids_all_zero_becomes_null_and_empty_error_message_is_null(built):
    snapshots, replicas, _ = built[v2_zero_directory]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(api_version=2)])
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3000, True, "ILZ5MPTeRWakmJu99uBJCA", ts(1730000000480), ts(1730000000480), "admin", "r1"),
            (3001, True, None, ts(1730000000200), ts(1729999998100), "admin", "r1"),
            (3002, True, "g42deArWBTRM5A1yuVpMCg", ts(LEADER_NOW), ts(LEADER_NOW), "admin", "r1"),
            (0, False, "3Db5QLSqSZieL3rJBUUegA", ts(1730000000450), ts(1730000000450), "admin", "r1"),
        ],
    )
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS)


@case
def v3_unknown_fields() -> list[tuple]:
    resp = response(2, scenario_voters(2), scenario_observers(2))
    resp["throttleTimeMs"] = 0
    resp["topics"][0]["partitions"][0]["futurePartitionField"] = {"a": [1, 2]}
    resp["topics"][0]["partitions"][0]["currentVoters"][0]["futureField"] = "x"
    return [admin("r1", resp, 3)]


def test_v3_is_read_by_the_fields_we_know_and_unknown_fields_are_ignored(built):
    snapshots, replicas, rejected = built[v3_unknown_fields]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(api_version=3)])
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS)
    assert rejected.collect() == []


# --- what the collector records of the answering node (envelope kafka_version, finalized_features) ---------------


def with_envelope(row: tuple, **extra) -> tuple:
    """An `admin` bronze row whose envelope carries more keys."""
    payload = json.loads(row[5])
    payload.update(extra)
    return (*row[:5], json.dumps(payload, separators=(",", ":")), *row[6:])


@case
def collector_records() -> list[tuple]:
    resp = response(2, scenario_voters(2), scenario_observers(2))
    return [
        with_envelope(
            admin("r1", resp, 2, collected_ms=COLLECTED_MS),
            kafka_version="4.1",
            finalized_features={"metadata.version": 27, "kraft.version": 1, "group.version": 1},
        ),
        # kraft.version 0 is not listed by Kafka (levels above 0 only)
        with_envelope(
            admin("r2", resp, 2, collected_ms=COLLECTED_MS + 1000),
            kafka_version="3.9",
            finalized_features={"metadata.version": 21},
        ),
        # malformed extras never make the response unreadable: they are unknown
        with_envelope(
            admin("r3", resp, 2, collected_ms=COLLECTED_MS + 2000),
            kafka_version="",
            finalized_features={"metadata.version": "x", "kraft.version": 1.5},
        ),
        with_envelope(admin("r4", resp, 2, collected_ms=COLLECTED_MS + 3000), finalized_features="garbage"),
        admin("r5", resp, 2, collected_ms=COLLECTED_MS + 4000),  # a collector that records nothing
    ]


def test_the_collector_s_release_and_feature_levels_become_snapshot_columns(built):
    snapshots, replicas, rejected = built[collector_records]
    check_rows(
        snapshots,
        ["collected_at", "kafka_version", "metadata_version_level", "kraft_version", "leader_id"],
        "collected_at TIMESTAMP, kafka_version STRING, metadata_version_level INT, kraft_version INT, leader_id INT",
        [
            (ts(COLLECTED_MS), "4.1", 27, 1, 3002),
            (ts(COLLECTED_MS + 1000), "3.9", 21, 0, 3002),
            (ts(COLLECTED_MS + 2000), None, None, None, 3002),
            (ts(COLLECTED_MS + 3000), None, None, None, 3002),
            (ts(COLLECTED_MS + 4000), None, None, None, 3002),
        ],
    )
    assert replicas.count() == 5 * 4 and rejected.collect() == []


# --- unknown values (-1) ----------------------------------------------------------------------------------------


@case
def voter_leo_minus_one() -> list[tuple]:
    voters = [
        replica(1, 3002, 18542, LEADER_NOW, LEADER_NOW),
        replica(1, 3000, -1, -1, -1),
        replica(1, 3001, 18530, 1730000000200, -1),
    ]
    return [admin("r1", response(1, voters, []), 1)]


def test_voter_with_leo_minus_one_has_unknown_offsets_and_times(built):
    """§3.3: a voter that has not fetched since the election reports LEO -1 and -1 timestamps."""
    snapshots, replicas, _ = built[voter_leo_minus_one]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(voters=(3002, 3000, 3001), observers=0)])
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3002, True, 0, "leader", 18542, 0, 0, 0),
            (3000, True, 1, "follower", None, None, None, None),
            (3001, True, 2, "follower", 18530, 12, None, 300),
        ],
    )
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3002, True, None, ts(LEADER_NOW), ts(LEADER_NOW), "admin", "r1"),
            (3000, True, None, None, None, "admin", "r1"),
            (3001, True, None, ts(1730000000200), None, "admin", "r1"),
        ],
    )


@case
def unknown_leader() -> list[tuple]:
    voters = [replica(1, 3000, 100, 1730000000480, 1730000000480), replica(1, 3001, 90, 1730000000200, -1)]
    return [admin("r1", response(1, voters, [], leader=-1, hw=-1), 1)]


def test_unknown_leader_and_high_watermark_are_null(built):
    """leaderId -1: no leader row, so no leader LEO (offset lags unknown) and ref falls back to the capture time."""
    snapshots, replicas, _ = built[unknown_leader]
    check_rows(
        snapshots,
        SNAPSHOT_COLUMNS,
        SNAPSHOT_SCHEMA,
        [snapshot(leader=None, hw=None, voters=(3000, 3001), observers=0, ref_ms=COLLECTED_MS)],
    )
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3000, True, 0, "follower", 100, None, 120, 120),
            (3001, True, 1, "follower", 90, None, None, 400),
        ],
    )


@case
def hw_minus_one() -> list[tuple]:
    return [admin("r1", response(1, scenario_voters(1), scenario_observers(1), hw=-1), 1)]


def test_high_watermark_minus_one_is_null_but_the_rest_is_kept(built):
    snapshots, replicas, _ = built[hw_minus_one]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot(hw=None)])
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS)


# --- error responses ----------------------------------------------------------------------------------------------


ERROR_CASES = {
    # cluster: (api version, response, expected error_code, expected error_message)
    "v2-partition-error-from-a-non-leader": (
        2,
        response(2, [], [], leader=0, epoch=0, hw=0, error=6, message=NOT_LEADER),
        6,
        NOT_LEADER,
    ),
    "v2-partition-error-empty-message": (2, response(2, [], [], leader=0, epoch=0, hw=0, error=6), 6, None),
    "v1-partition-error-has-no-message-field": (1, response(1, [], [], leader=0, epoch=0, hw=0, error=3), 3, None),
    # DescribeQuorumResponse.getTopLevelErrorResponse: only the error code (and message), no topics.
    "v2-top-level-error-without-topics": (
        2,
        {"errorCode": 31, "errorMessage": "Cluster authorization failed.", "topics": [], "nodes": []},
        31,
        "Cluster authorization failed.",
    ),
    "v0-top-level-error-without-topics": (0, {"errorCode": 8, "topics": []}, 8, None),
    "top-level-code-wins-over-partition-code": (
        2,
        response(
            2,
            scenario_voters(2),
            scenario_observers(2),
            error=6,
            message="partition says",
            top_error=8,
            top_message="top says",
        ),
        8,
        "top says",
    ),
    "top-level-error-with-voters-and-empty-message": (2, response(2, scenario_voters(2), [], top_error=8), 8, None),
}


@case
def error_responses() -> list[tuple]:
    rows = [admin(f"r-{name}", resp, version, cluster=name) for name, (version, resp, _, _) in ERROR_CASES.items()]
    return rows


def test_error_response_keeps_its_snapshot_with_null_leader_and_no_replica_rows(built):
    snapshots, replicas, rejected = built[error_responses]
    check_rows(
        snapshots,
        [
            "cluster_id",
            "api_version",
            "leader_id",
            "leader_epoch",
            "high_watermark",
            "error_code",
            "error_message",
            "ref_at",
            "record_ids",
        ],
        "cluster_id STRING, api_version INT, leader_id INT, leader_epoch INT, high_watermark BIGINT, "
        "error_code INT, error_message STRING, ref_at TIMESTAMP, record_ids ARRAY<STRING>",
        [
            (
                name,
                version,
                None,
                None,
                None,
                code,
                message,
                # the leader's clock when the error response still lists it, else the capture time
                ts(LEADER_NOW) if "with-voters" in name or "wins" in name else ts(COLLECTED_MS),
                [f"r-{name}"],
            )
            for name, (version, _, code, message) in ERROR_CASES.items()
        ],
    )
    assert replicas.collect() == []
    assert rejected.collect() == []


# --- shape and field problems -----------------------------------------------------------------------------------


def _two_partitions() -> dict:
    resp = response(1, scenario_voters(1), [])
    resp["topics"][0]["partitions"].append(dict(resp["topics"][0]["partitions"][0], partitionIndex=1))
    return resp


BAD_SHAPES = {
    "no-topics-without-error": {"errorCode": 0, "topics": []},
    "two-partitions": _two_partitions(),
    "two-topics": {"errorCode": 0, "topics": [response(1, [], [])["topics"][0]] * 2},
    "no-topics-field": {"errorCode": 0},
}


@case
def bad_shapes() -> list[tuple]:
    return [admin(f"r-{name}", resp, 1, cluster=name) for name, resp in BAD_SHAPES.items()]


def test_bad_response_shape_is_rejected_with_rule_response_shape(built):
    snapshots, replicas, rejected = built[bad_shapes]
    assert snapshots.collect() == [] and replicas.collect() == []
    check_rows(
        rejected,
        ["target_table", "failed_rules", "reason", "record_id", "source_file", "ingested_at"],
        "target_table STRING, failed_rules ARRAY<STRING>, reason STRING, record_id STRING, source_file STRING, "
        "ingested_at TIMESTAMP",
        [
            (
                "silver.quorum_snapshots",
                ["response_shape"],
                "the response must hold exactly one topic with one partition (__cluster_metadata-0)",
                f"r-{name}",
                "file:/landing/quorum/q.jsonl",
                RUN_1,
            )
            for name in BAD_SHAPES
        ],
    )
    # The quarantined record is the bronze record, payload unchanged.
    records = {json.loads(r["record"])["record_id"]: json.loads(r["record"]) for r in rejected.collect()}
    assert {k: v["payload"] for k, v in records.items()} == {row[0]: row[5] for row in bad_shapes()}


@case
def replica_without_leo() -> list[tuple]:
    voters = scenario_voters(1)
    del voters[0]["logEndOffset"]
    return [admin("r1", response(1, voters, scenario_observers(1)), 1)]


def test_replica_entry_without_log_end_offset_is_rejected_and_the_others_kept(built):
    snapshots, replicas, rejected = built[replica_without_leo]
    check_rows(snapshots, SNAPSHOT_COLUMNS, SNAPSHOT_SCHEMA, [snapshot()])
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS[1:])
    check_rows(
        rejected,
        ["target_table", "failed_rules", "record_id"],
        "target_table STRING, failed_rules ARRAY<STRING>, record_id STRING",
        [("silver.replica_states", ["replica_fields_present"], "r1")],
    )
    assert rejected.first()["reason"].startswith("replica entry without replicaId or logEndOffset: ")


@case
def every_reject_kind() -> list[tuple]:
    """One batch with each way a DescribeQuorum record (or an entry of it) is rejected, and two that look alike but
    are not: an error response whose voters lack fields (its replicas are never read) and a record with a number out
    of range that also lacks a field (rejected once, for the number)."""
    no_leo = scenario_voters(1)
    del no_leo[0]["logEndOffset"]
    no_id = scenario_observers(1)
    del no_id[0]["replicaId"]
    return [
        admin("r-range", response(1, scenario_voters(1), [], hw=2**63), 1, cluster="range"),
        admin("r-shape", BAD_SHAPES["two-topics"], 1, cluster="shape"),
        admin("r-missing", response(1, no_leo, no_id), 1, cluster="missing"),
        admin("r-error", response(1, no_leo, [], error=6), 1, cluster="error"),
        admin("r-range-missing", response(1, no_leo, [], hw=2**63), 1, cluster="range-missing"),
    ]


def test_every_reject_kind_of_a_batch_is_found_and_each_record_once_per_reason(built):
    snapshots, replicas, rejected = built[every_reject_kind]
    assert sorted(r["cluster_id"] for r in snapshots.collect()) == ["error", "missing"]
    assert {r["cluster_id"] for r in replicas.collect()} == {"missing"}
    assert sorted(r["replica_id"] for r in replicas.collect()) == [3001, 3002]
    check_rows(
        rejected,
        ["target_table", "failed_rules", "record_id"],
        "target_table STRING, failed_rules ARRAY<STRING>, record_id STRING",
        [
            ("silver.quorum_snapshots", ["values_in_range"], "r-range"),
            ("silver.quorum_snapshots", ["values_in_range"], "r-range-missing"),
            ("silver.quorum_snapshots", ["response_shape"], "r-shape"),
            ("silver.replica_states", ["replica_fields_present"], "r-missing"),
            ("silver.replica_states", ["replica_fields_present"], "r-missing"),
        ],
    )
    # each entry's reason quotes it: the voter without its log end offset, the observer without its id
    entries = [
        json.loads(r["reason"].removeprefix("replica entry without replicaId or logEndOffset: "))
        for r in rejected.collect()
        if r["record_id"] == "r-missing"
    ]
    voter = {"replicaId": 3000, "lastFetchTimestamp": 1730000000480, "lastCaughtUpTimestamp": 1730000000480}
    observer = {"logEndOffset": 18542, "lastFetchTimestamp": 1730000000450, "lastCaughtUpTimestamp": 1730000000450}
    assert len(entries) == 2 and voter in entries and observer in entries


@case
def unreadable() -> list[tuple]:
    return [admin("r1", response(1, scenario_voters(1), []), 1, parse_error="malformed JSON")]


def test_unreadable_bronze_records_are_left_to_the_record_readable_quarantine(built):
    snapshots, replicas, rejected = built[unreadable]
    assert snapshots.collect() == [] and replicas.collect() == [] and rejected.collect() == []


# --- duplicates and ties ------------------------------------------------------------------------------------------


@case
def duplicates() -> list[tuple]:
    earlier = admin("r-old", response(1, scenario_voters(1), scenario_observers(1), hw=18000), 1, ingested_at=RUN_2)
    later_voters = [
        replica(1, 3002, 18600, LEADER_NOW, LEADER_NOW),
        replica(1, 3000, 18590, 1730000000490, 1730000000400),
    ]
    later = admin("r-new", response(1, later_voters, [], hw=18600), 1, ingested_at=datetime(2024, 10, 28, 3))
    other = admin("r-other", response(0, scenario_voters(0), []), 0, cluster="c2", ingested_at=RUN_1)
    return [earlier, later, other]


def test_duplicates_of_a_key_keep_the_later_ingested_record_and_only_its_replica_rows(built):
    snapshots, replicas, _ = built[duplicates]
    check_rows(
        snapshots,
        SNAPSHOT_COLUMNS,
        SNAPSHOT_SCHEMA,
        [
            snapshot(hw=18600, voters=(3002, 3000), observers=0, record_ids=("r-new",)),
            snapshot(cluster="c2", api_version=0, observers=0, ref_ms=COLLECTED_MS, record_ids=("r-other",)),
        ],
    )
    check_rows(
        replicas.where("cluster_id = 'c1'"),
        LAG_COLUMNS + ["record_id"],
        LAG_SCHEMA + ", record_id STRING",
        [
            (3002, True, 0, "leader", 18600, 0, 0, 0, "r-new"),
            (3000, True, 1, "follower", 18590, 10, 100, 10, "r-new"),
        ],
    )


@case
def tie() -> list[tuple]:
    voters = [
        replica(1, 3001, 500, 1730000000490, 1730000000490),
        replica(1, 3000, 500, 1730000000450, -1),
        replica(1, 3002, 500, LEADER_NOW, LEADER_NOW),
    ]
    return [admin("r1", response(1, voters, [], hw=500), 1)]


def test_tie_response_order_is_kept_in_position(built):
    """§3.4: on a tie of LEOs the first voter in response order is MaxFollowerLag's pick; keep that order."""
    _, replicas, _ = built[tie]
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3001, True, 0, "follower", 500, 0, 10, 10),
            (3000, True, 1, "follower", 500, 0, None, 50),
            (3002, True, 2, "leader", 500, 0, 0, 0),
        ],
    )


# --- kafka-metadata-quorum captures ---------------------------------------------------------------------------------

# REPLICATION_39, REPLICATION_HUMAN, STATUS_39 and STATUS_38 (tests/captures.py): the examples of docs/kafka-surfaces.md
# §3.2 and §3.3 as the test landing zone holds them.
CLI_SNAPSHOT_COLUMNS = SNAPSHOT_COLUMNS + ["kafka_cluster_id", "cli_max_follower_lag", "cli_max_follower_lag_time_ms"]
CLI_SNAPSHOT_SCHEMA = (
    SNAPSHOT_SCHEMA + ", kafka_cluster_id STRING, cli_max_follower_lag BIGINT, cli_max_follower_lag_time_ms BIGINT"
)


def cli_row(
    leader=3002,
    epoch=7,
    hw=18542,
    ref_ms=LEADER_NOW,
    record_ids=("rep",),
    kafka_cluster_id=None,
    lag=None,
    lag_ms=None,
    collected_ms=COLLECTED_MS,
    observers=1,
):
    return snapshot(
        source="cli",
        api_version=None,
        leader=leader,
        epoch=epoch,
        hw=hw,
        ref_ms=ref_ms,
        record_ids=record_ids,
        collected_ms=collected_ms,
        observers=observers,
    ) + (kafka_cluster_id, lag, lag_ms)


@case
def cli_replication_alone() -> list[tuple]:
    return [capture("rep", "replication", REPLICATION_39)]


def test_cli_replication_alone_has_no_epoch_or_high_watermark_and_ref_from_the_leader_row(built):
    snapshots, replicas, rejected = built[cli_replication_alone]
    row = cli_row(epoch=None, hw=None)
    # Without --status the response order is unknown: voters are taken in printed order (leader first).
    row = row[:9] + ([3002, 3000, 3001],) + row[10:]
    check_rows(snapshots, CLI_SNAPSHOT_COLUMNS, CLI_SNAPSHOT_SCHEMA, [row])
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3002, True, 0, "leader", 18542, 0, 0, 0),
            (3000, True, 1, "follower", 18542, 0, 20, 20),
            (3001, True, 2, "follower", 18530, 12, 2400, 300),
            (0, False, 0, "observer", 18542, 0, 50, 50),
        ],
    )
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3002, True, "g42deArWBTRM5A1yuVpMCg", ts(LEADER_NOW), ts(LEADER_NOW), "cli", "rep"),
            (3000, True, "ILZ5MPTeRWakmJu99uBJCA", ts(1730000000480), ts(1730000000480), "cli", "rep"),
            (3001, True, "b-DwmhtOheTqZzPoh52kfA", ts(1730000000200), ts(1729999998100), "cli", "rep"),
            (0, False, "3Db5QLSqSZieL3rJBUUegA", ts(1730000000450), ts(1730000000450), "cli", "rep"),
        ],
    )
    assert rejected.collect() == []


@case
def cli_status_alone() -> list[tuple]:
    return [capture("st", "status", STATUS_39, cluster="c1")]


def test_cli_status_alone_gives_the_snapshot_and_no_replica_rows(built):
    snapshots, replicas, rejected = built[cli_status_alone]
    check_rows(
        snapshots,
        CLI_SNAPSHOT_COLUMNS,
        CLI_SNAPSHOT_SCHEMA,
        [
            cli_row(
                ref_ms=COLLECTED_MS, record_ids=("st",), kafka_cluster_id="MkU3OEVBNTcwNTJENDM2Qk", lag=12, lag_ms=2400
            )
        ],
    )
    assert replicas.collect() == [] and rejected.collect() == []


@case
def cli_both() -> list[tuple]:
    return [capture("rep", "replication", REPLICATION_39), capture("st", "status", STATUS_39)]


def test_cli_replication_and_status_together_take_positions_from_the_status_voter_order(built):
    """The leader is printed first by --replication but is last in the response (and in --status)."""
    snapshots, replicas, rejected = built[cli_both]
    check_rows(
        snapshots,
        CLI_SNAPSHOT_COLUMNS,
        CLI_SNAPSHOT_SCHEMA,
        [cli_row(record_ids=("rep", "st"), kafka_cluster_id="MkU3OEVBNTcwNTJENDM2Qk", lag=12, lag_ms=2400)],
    )
    check_rows(
        replicas,
        LAG_COLUMNS + ["record_id"],
        LAG_SCHEMA + ", record_id STRING",
        [lag + ("rep",) for lag in SCENARIO_LAGS],
    )
    assert rejected.collect() == []


HUMAN_COLLECTED_MS = 1730000000500


@case
def cli_human_readable() -> list[tuple]:
    return [
        capture("rep", "replication", REPLICATION_HUMAN, collected_ms=HUMAN_COLLECTED_MS),
        capture("st", "status", STATUS_38, collected_ms=HUMAN_COLLECTED_MS),
    ]


def test_cli_human_readable_times_are_relative_to_the_capture_time(built):
    snapshots, replicas, _ = built[cli_human_readable]
    collected = HUMAN_COLLECTED_MS
    check_rows(
        snapshots,
        CLI_SNAPSHOT_COLUMNS,
        CLI_SNAPSHOT_SCHEMA,
        [
            cli_row(
                ref_ms=collected,
                record_ids=("rep", "st"),
                kafka_cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
                lag=12,
                lag_ms=2400,
                collected_ms=collected,
            )
        ],
    )
    check_rows(replicas, LAG_COLUMNS, LAG_SCHEMA, SCENARIO_LAGS)
    check_rows(
        replicas,
        TIME_COLUMNS,
        TIME_SCHEMA,
        [
            (3000, True, None, ts(collected - 20), ts(collected - 20), "cli", "rep"),
            (3001, True, None, ts(collected - 300), ts(collected - 2400), "cli", "rep"),
            (3002, True, None, ts(collected), ts(collected), "cli", "rep"),
            (0, False, None, ts(collected - 50), ts(collected - 50), "cli", "rep"),
        ],
    )


@case
def cli_leo_minus_one() -> list[tuple]:
    text = (
        "NodeId\tLogEndOffset\tLag  \tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n"
        "3002  \t18542       \t0    \t1730000000500     \t1730000000500        \tLeader  \t\n"
        "3000  \t-1          \t18543\t-1                \t-1                   \tFollower\t\n"
    )
    return [capture("rep", "replication", text)]


def test_cli_voter_with_leo_minus_one(built):
    _, replicas, _ = built[cli_leo_minus_one]
    check_rows(
        replicas,
        LAG_COLUMNS,
        LAG_SCHEMA,
        [
            (3002, True, 0, "leader", 18542, 0, 0, 0),
            (3000, True, 1, "follower", None, None, None, None),
        ],
    )


BROKEN_CAPTURES = {
    # cluster: (replication text, status text, reason)
    "row-with-a-missing-cell": (REPLICATION_39.replace("\t12 \t", "\t"), None, "line 4: expected 7 cells, found 6"),
    "no-leader-row": (REPLICATION_39.replace("Leader  ", "Follower"), None, "no Leader row (expected exactly one)"),
    "status-without-epoch": (
        None,
        STATUS_39.replace("LeaderEpoch:            7\n", ""),
        "missing label(s) LeaderEpoch",
    ),
    "captures-disagree": (
        REPLICATION_39,
        STATUS_39.replace("LeaderId:               3002", "LeaderId:               3000"),
        "--status says leader 3000 but --replication says 3002",
    ),
}


@case
def cli_broken() -> list[tuple]:
    rows = []
    for name, (replication, status, _reason) in BROKEN_CAPTURES.items():
        if replication is not None:
            rows.append(capture(f"{name}-rep", "replication", replication, cluster=name))
        if status is not None:
            rows.append(capture(f"{name}-st", "status", status, cluster=name))
    return rows


def test_broken_cli_capture_is_rejected_with_rule_cli_capture_parses(built):
    snapshots, replicas, rejected = built[cli_broken]
    expected = [
        (
            "silver.quorum_snapshots",
            ["cli_capture_parses"],
            reason,
            "+".join(f"{name}-{kind}" for kind, text in (("rep", replication), ("st", status)) if text is not None),
        )
        for name, (replication, status, reason) in BROKEN_CAPTURES.items()
    ]
    assert snapshots.collect() == [] and replicas.collect() == []
    check_rows(
        rejected,
        ["target_table", "failed_rules", "reason", "record_id"],
        "target_table STRING, failed_rules ARRAY<STRING>, reason STRING, record_id STRING",
        expected,
    )
    # Each quarantined snapshot holds every capture it was built from, text unchanged.
    held = sorted((r["record_id"], r["payload"]) for q in rejected.collect() for r in json.loads(q["record"]))
    assert held == sorted((r[0], r[5]) for r in cli_broken())


@case
def cli_twice() -> list[tuple]:
    older = REPLICATION_39.replace("18530       \t12 ", "18500       \t42 ")
    return [
        capture("rep-new", "replication", REPLICATION_39, ingested_at=RUN_2),
        capture("rep-old", "replication", older, ingested_at=RUN_1),
    ]


def test_cli_capture_sent_twice_keeps_the_later_ingested_one(built):
    snapshots, replicas, _ = built[cli_twice]
    assert [r["record_ids"] for r in snapshots.collect()] == [["rep-new"]]
    check_rows(
        replicas.where("replica_id = 3001"),
        ["replica_id", "log_end_offset", "offset_lag", "record_id"],
        "replica_id INT, log_end_offset BIGINT, offset_lag BIGINT, record_id STRING",
        [(3001, 18530, 12, "rep-new")],
    )


@case
def cli_other_times() -> list[tuple]:
    return [
        capture("a", "replication", REPLICATION_39, cluster="kraft-a"),
        capture("b", "status", STATUS_39, cluster="kraft-a", collected_ms=COLLECTED_MS + 1000),
    ]


def test_cli_cluster_comes_from_the_path_and_captures_of_other_times_stay_apart(built):
    snapshots, _, _ = built[cli_other_times]
    check_rows(
        snapshots,
        ["cluster_id", "collected_at", "leader_epoch", "record_ids", "kafka_cluster_id"],
        "cluster_id STRING, collected_at TIMESTAMP, leader_epoch INT, record_ids ARRAY<STRING>, "
        "kafka_cluster_id STRING",
        [
            ("kraft-a", ts(COLLECTED_MS), None, ["a"], None),
            ("kraft-a", ts(COLLECTED_MS + 1000), 7, ["b"], "MkU3OEVBNTcwNTJENDM2Qk"),
        ],
    )


# --- cli_snapshot (pure Python) -------------------------------------------------------------------------------------


def _replicas(snap: dict) -> list[tuple]:
    return [
        (r["replica_id"], r["is_voter"], r["position"], r["is_leader"], r["log_end_offset"]) for r in snap["replicas"]
    ]


def test_cli_snapshot_replication_only():
    snap = cli_snapshot(REPLICATION_39, None, COLLECTED_MS)
    assert {k: v for k, v in snap.items() if k != "replicas"} == {
        "error": None,
        "kafka_cluster_id": None,
        "leader_id": 3002,
        "leader_epoch": None,
        "high_watermark": None,
        "voter_ids": [3002, 3000, 3001],
        "observer_count": 1,
        "ref_ms": LEADER_NOW,
        "max_follower_lag": None,
        "max_follower_lag_time_ms": None,
    }
    assert _replicas(snap) == [
        (3002, True, 0, True, 18542),
        (3000, True, 1, False, 18542),
        (3001, True, 2, False, 18530),
        (0, False, 0, False, 18542),
    ]
    assert snap["replicas"][2] == {
        "replica_id": 3001,
        "is_voter": True,
        "position": 2,
        "replica_directory_id": "b-DwmhtOheTqZzPoh52kfA",
        "endpoints": None,
        "log_end_offset": 18530,
        "last_fetch_ms": 1730000000200,
        "last_caught_up_ms": 1729999998100,
        "is_leader": False,
    }


def test_cli_snapshot_voters_take_their_endpoints_from_status_39():
    """--status (3.9+) prints each voter's endpoints; observers have none, and --replication alone gives none."""
    snap = cli_snapshot(REPLICATION_39, STATUS_39, COLLECTED_MS)
    assert {r["replica_id"]: r["endpoints"] for r in snap["replicas"]} == {
        3000: ["CONTROLLER://controller-0:9093"],
        3001: ["CONTROLLER://controller-1:9093"],
        3002: ["CONTROLLER://controller-2:9093"],
        0: None,
    }


def test_cli_snapshot_status_only():
    snap = cli_snapshot(None, STATUS_38, COLLECTED_MS)
    assert snap == {
        "error": None,
        "kafka_cluster_id": "MkU3OEVBNTcwNTJENDM2Qk",
        "leader_id": 3002,
        "leader_epoch": 7,
        "high_watermark": 18542,
        "voter_ids": [3000, 3001, 3002],
        "observer_count": 1,
        "ref_ms": COLLECTED_MS,
        "max_follower_lag": 12,
        "max_follower_lag_time_ms": 2400,
        "replicas": [],
    }


def test_cli_snapshot_both_uses_status_order_and_human_readable_times():
    snap = cli_snapshot(REPLICATION_HUMAN, STATUS_38, 1730000000500)
    assert snap["voter_ids"] == [3000, 3001, 3002]
    assert (snap["leader_id"], snap["leader_epoch"], snap["high_watermark"], snap["ref_ms"]) == (
        3002,
        7,
        18542,
        1730000000500,
    )
    assert _replicas(snap) == [
        (3002, True, 2, True, 18542),
        (3000, True, 0, False, 18542),
        (3001, True, 1, False, 18530),
        (0, False, 0, False, 18542),
    ]
    assert [(r["last_fetch_ms"], r["last_caught_up_ms"]) for r in snap["replicas"]] == [
        (1730000000500, 1730000000500),
        (1730000000480, 1730000000480),
        (1730000000200, 1729999998100),
        (1730000000450, 1730000000450),
    ]


def test_cli_snapshot_unknown_high_watermark_and_leo():
    status = STATUS_38.replace("HighWatermark:          18542", "HighWatermark:          -1")
    replication = (
        "NodeId\tLogEndOffset\tLag  \tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n"
        "3002  \t18542       \t0    \t1730000000500     \t1730000000500        \tLeader  \t\n"
        "3000  \t-1          \t18543\t-1                \t-1                   \tFollower\t\n"
    )
    snap = cli_snapshot(replication, status, COLLECTED_MS)
    assert snap["high_watermark"] is None
    assert snap["replicas"][1] == {
        "replica_id": 3000,
        "is_voter": True,
        "position": 0,
        "replica_directory_id": None,
        "endpoints": None,
        "log_end_offset": None,
        "last_fetch_ms": None,
        "last_caught_up_ms": None,
        "is_leader": False,
    }


@pytest.mark.parametrize(
    ("replication", "status", "error"),
    [
        ("", None, "empty capture: no header"),
        (
            "Error while executing: TimeoutException\n",
            None,
            "line 1: no header (missing column(s) NodeId, LogEndOffset, Lag, LastFetchTimestamp, "
            "LastCaughtUpTimestamp, Status)",
        ),
        (
            None,
            "LeaderId: x\n",
            "missing label(s) ClusterId, LeaderEpoch, HighWatermark, MaxFollowerLag, "
            "MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers",
        ),
        (
            REPLICATION_39,
            STATUS_39.replace("LeaderId:               3002", "LeaderId:               3001"),
            "--status says leader 3001 but --replication says 3002",
        ),
    ],
)
def test_cli_snapshot_reports_broken_captures(replication, status, error):
    assert cli_snapshot(replication, status, COLLECTED_MS) == {"error": error}
