"""quorumlake.silver.partitions: build_partition_states (silver.partition_states) on tiny bronze rows; the KIP-427 flags as
kafka-topics decides them (docs/contract.md §2, docs/kafka-surfaces.md §5.2, the examples of KIP-427)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from quorumlake.silver.partitions import build_partition_states, topics_capture
from tests.captures import TOPICS_38
from tests.frames import check_rows
from tests.helpers import RUN_1, RUN_2, ts

pytestmark = pytest.mark.usefixtures("drop_cached")

BRONZE = (
    "record_id STRING, format STRING, cluster_id STRING, collected_at TIMESTAMP, payload STRING, source_file STRING, "
    "line_number INT, ingested_at TIMESTAMP, parse_error STRING"
)
T0 = 1730000000000

FLAG_COLUMNS = [
    "topic",
    "partition",
    "collected_at",
    "leader_id",
    "isr",
    "min_isr",
    "replication_factor",
    "isr_size",
    "is_offline",
    "is_under_min_isr",
    "is_at_min_isr",
    "is_under_replicated",
    "status",
]
FLAG_SCHEMA = (
    "topic STRING, partition INT, collected_at TIMESTAMP, leader_id INT, isr ARRAY<INT>, min_isr INT, "
    "replication_factor INT, isr_size INT, is_offline BOOLEAN, is_under_min_isr BOOLEAN, is_at_min_isr BOOLEAN, "
    "is_under_replicated BOOLEAN, status STRING"
)


def state(
    record_id: str,
    topic: str,
    leader: int,
    replicas: list[int],
    isr: list[int],
    min_isr: int,
    collected_ms: int = T0,
    partition: int = 0,
    ingested_at: datetime = RUN_1,
    cluster: str = "c1",
    **optional: list[int],
) -> tuple:
    """A partition-state JSON line as bronze holds it."""
    payload = json.dumps(
        {
            "cluster_id": cluster,
            "collected_at_ms": collected_ms,
            "topic": topic,
            "partition": partition,
            "leader": leader,
            "replicas": replicas,
            "isr": isr,
            "min_isr": min_isr,
            **optional,
        },
        separators=(",", ":"),
    )
    return (
        record_id,
        "partition_json",
        cluster,
        ts(collected_ms),
        payload,
        "file:/landing/partitions/p.jsonl",
        1,
        ingested_at,
        None,
    )


def topics(
    record_id: str, text: str, collected_ms: int = T0, ingested_at: datetime = RUN_1, cluster: str = "c1"
) -> tuple:
    """A kafka-topics --describe capture as bronze holds it."""
    return (
        record_id,
        "kafka_topics_cli",
        cluster,
        ts(collected_ms),
        text,
        f"file:/landing/partitions/cluster={cluster}/{collected_ms}.topics.txt",
        None,
        ingested_at,
        None,
    )


def run(spark, *rows: tuple, default_min_isr: int = 1):
    states, rejected = build_partition_states(spark.createDataFrame(list(rows), BRONZE), default_min_isr)
    return states.cache(), rejected.cache()


def flags(topic, step, leader, isr, min_isr, rf, offline, under_min, at_min, under_replicated, status, partition=0):
    return (
        topic,
        partition,
        ts(T0 + 60_000 * step),
        leader,
        isr,
        min_isr,
        rf,
        len(isr),
        offline,
        under_min,
        at_min,
        under_replicated,
        status,
    )


# --- KIP-427 "Examples", one snapshot per step ------------------------------------------------------------------

KIP427 = {
    # Example 1 (min_isr_size = replica_replication_factor - 1): RF 3, min ISR 2.
    "example1": (
        3,
        2,
        [
            (0, [0, 1, 2], False, False, False, False, "healthy"),
            (1, [1, 2], False, False, True, True, "at_min_isr"),  # 1. Broker 0 fails: UnderReplicated and AtMinIsr
            (2, [2], False, True, False, True, "under_min_isr"),  # 2. Broker 1 fails: UnderMinIsr
        ],
    ),
    # Example 2 (min.insync.replicas = 1 AND replica_replication_factor > 2): RF 3, min ISR 1.
    "example2": (
        3,
        1,
        [
            (0, [0, 1, 2], False, False, False, False, "healthy"),
            (1, [1, 2], False, False, False, True, "under_replicated"),  # 1. Broker 0 fails: UnderReplicated
            (2, [2], False, False, True, True, "at_min_isr"),  # 2. Broker 1 fails: UnderReplicated and AtMinIsr
            (-1, [], True, True, False, True, "offline"),  # 3. Broker 2 fails: OfflinePartition
        ],
    ),
    # Example 3 (replication-factor - min.insync.replicas > 1): RF 4, min ISR 2.
    "example3": (
        4,
        2,
        [
            (0, [0, 1, 2, 3], False, False, False, False, "healthy"),
            (1, [1, 2, 3], False, False, False, True, "under_replicated"),  # 1. Broker 0 fails: UnderReplicated
            (2, [2, 3], False, False, True, True, "at_min_isr"),  # 2. Broker 1 fails: UnderReplicated and AtMinIsr
            (3, [3], False, True, False, True, "under_min_isr"),  # 3. Broker 2 fails: UnderMinIsr
        ],
    ),
}


@pytest.mark.parametrize("example", sorted(KIP427))
def test_kip427_examples_step_by_step(spark, example):
    rf, min_isr, steps = KIP427[example]
    replicas = list(range(rf))
    rows = [
        state(f"{example}-{step}", example, leader, replicas, isr, min_isr, collected_ms=T0 + 60_000 * step)
        for step, (leader, isr, *_) in enumerate(steps)
    ]
    states, rejected = run(spark, *rows)
    check_rows(
        states,
        FLAG_COLUMNS,
        FLAG_SCHEMA,
        [
            flags(example, step, None if leader == -1 else leader, isr, min_isr, rf, *outcome)
            for step, (leader, isr, *outcome) in enumerate(steps)
        ],
    )
    check_rows(
        states,
        ["collected_at", "replicas", "source", "record_id", "source_file", "ingested_at"],
        "collected_at TIMESTAMP, replicas ARRAY<INT>, source STRING, record_id STRING, source_file STRING, "
        "ingested_at TIMESTAMP",
        [
            (ts(T0 + 60_000 * step), replicas, "json", f"{example}-{step}", "file:/landing/partitions/p.jsonl", RUN_1)
            for step in range(len(steps))
        ],
    )
    assert rejected.collect() == []


# --- reassignment, offline at min ISR ---------------------------------------------------------------------------


def test_adding_replicas_are_not_counted_in_the_replication_factor(spark):
    states, _ = run(
        spark,
        # ISR = old set + new replica 4: not under-replicated, because RF excludes the adding replica.
        state(
            "a",
            "moving",
            1,
            [1, 2, 3, 4],
            [1, 2, 3, 4],
            2,
            partition=0,
            adding_replicas=[4],
            removing_replicas=[3],
            elr=[],
        ),
        state("b", "moving", 1, [1, 2, 3, 4], [1, 2, 3], 2, partition=1, adding_replicas=[4], removing_replicas=[3]),
        state("c", "moving", 1, [1, 2, 3, 4], [1, 2], 2, partition=2, adding_replicas=[4], removing_replicas=[3]),
        # Without a reassignment every replica counts.
        state("d", "moving", 1, [1, 2, 3, 4], [1, 2, 3], 2, partition=3),
    )
    check_rows(
        states,
        [
            "partition",
            "replication_factor",
            "isr_size",
            "is_under_replicated",
            "is_at_min_isr",
            "status",
            "adding_replicas",
            "removing_replicas",
            "elr",
        ],
        "partition INT, replication_factor INT, isr_size INT, is_under_replicated BOOLEAN, is_at_min_isr BOOLEAN, "
        "status STRING, adding_replicas ARRAY<INT>, removing_replicas ARRAY<INT>, elr ARRAY<INT>",
        [
            (0, 3, 4, False, False, "healthy", [4], [3], []),
            (1, 3, 3, False, False, "healthy", [4], [3], None),
            (2, 3, 2, True, True, "at_min_isr", [4], [3], None),
            (3, 4, 3, True, False, "under_replicated", None, None, None),
        ],
    )


def test_offline_partition_at_min_isr_is_flagged_both_and_status_is_offline(spark):
    """kafka-topics lists a leaderless partition under --at-min-isr-partitions too when |ISR| = min ISR."""
    states, _ = run(spark, state("a", "t", -1, [1, 2, 3], [3], 1))
    check_rows(states, FLAG_COLUMNS, FLAG_SCHEMA, [flags("t", 0, None, [3], 1, 3, True, True, True, True, "offline")])


# --- kafka-topics --describe captures -------------------------------------------------------------------------------

# TOPICS_38 (docs/kafka-surfaces.md §5.2, 3.8+), plus a topic without min.insync.replicas (cluster default applies),
# a topic that configures 1 (beats any default), and a reassignment.
TOPICS = TOPICS_38 + (
    "Topic: payments\tTopicId: 7Zr2nH1WQd2v0pQ9c8kL1A\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: \n"
    "\tTopic: payments\tPartition: 0\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1\tElr: \tLastKnownElr: \n"
    "Topic: audit\tTopicId: 1Zr2nH1WQd2v0pQ9c8kL1A\tPartitionCount: 1\tReplicationFactor: 3\t"
    "Configs: cleanup.policy=compact,delete,min.insync.replicas=1\n"
    "\tTopic: audit\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: \tLastKnownElr: \n"
    "Topic: moving\tTopicId: 2Zr2nH1WQd2v0pQ9c8kL1A\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: \n"
    "\tTopic: moving\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4\tIsr: 1,2,3,4\tAdding Replicas: 4\t"
    "Removing Replicas: 3\tElr: 2\tLastKnownElr: \n"
)


@pytest.mark.parametrize(
    ("default_min_isr", "payments", "moving"),
    [
        (1, (1, False, False, True, "under_replicated"), (1, False, False, False, "healthy")),
        (2, (2, False, True, True, "at_min_isr"), (2, False, False, False, "healthy")),
        (3, (3, True, False, True, "under_min_isr"), (3, False, False, False, "healthy")),
    ],
)
def test_kafka_topics_capture_with_leader_none_and_the_cluster_default_min_isr(
    spark, default_min_isr, payments, moving
):
    states, rejected = run(spark, topics("cap", TOPICS), default_min_isr=default_min_isr)
    check_rows(
        states,
        FLAG_COLUMNS,
        FLAG_SCHEMA,
        [
            flags("orders", 0, 1, [1, 2, 3], 2, 3, False, False, False, False, "healthy", partition=0),
            flags("orders", 0, 2, [2, 3], 2, 3, False, False, True, True, "at_min_isr", partition=1),
            flags("orders", 0, None, [3], 2, 3, True, True, False, True, "offline", partition=2),
            flags("payments", 0, 3, [3, 1], payments[0], 3, False, *payments[1:]),
            flags("audit", 0, 1, [1], 1, 3, False, False, True, True, "at_min_isr"),
            flags("moving", 0, 1, [1, 2, 3, 4], moving[0], 3, False, *moving[1:]),
        ],
    )
    check_rows(
        states.where("topic = 'moving'"),
        ["cluster_id", "replicas", "adding_replicas", "removing_replicas", "elr", "source", "record_id", "source_file"],
        "cluster_id STRING, replicas ARRAY<INT>, adding_replicas ARRAY<INT>, removing_replicas ARRAY<INT>, "
        "elr ARRAY<INT>, source STRING, record_id STRING, source_file STRING",
        [("c1", [1, 2, 3, 4], [4], [3], [2], "cli", "cap", f"file:/landing/partitions/cluster=c1/{T0}.topics.txt")],
    )
    assert rejected.collect() == []


def test_broken_topics_capture_is_rejected_with_rule_topics_capture_parses(spark):
    broken = "Topic: t\tPartitionCount: 1\n\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,x\tIsr: 1\n"
    headers_only = "Topic: t\tTopicId: q8VZlRdhS0m8CxwYk9RWbA\tPartitionCount: 0\tReplicationFactor: 3\tConfigs: \n"
    states, rejected = run(
        spark,
        topics("bad", broken, cluster="c1"),
        topics("empty", headers_only, cluster="c2"),
        topics("good", TOPICS, cluster="c3"),
    )
    assert {r["cluster_id"] for r in states.collect()} == {"c3"}
    check_rows(
        rejected,
        ["target_table", "failed_rules", "reason", "record_id", "source_file"],
        "target_table STRING, failed_rules ARRAY<STRING>, reason STRING, record_id STRING, source_file STRING",
        [
            (
                "silver.partition_states",
                ["topics_capture_parses"],
                "line 2: Replicas 'x' is not an integer",
                "bad",
                f"file:/landing/partitions/cluster=c1/{T0}.topics.txt",
            ),
            (
                "silver.partition_states",
                ["topics_capture_parses"],
                "no partition lines in the capture",
                "empty",
                f"file:/landing/partitions/cluster=c2/{T0}.topics.txt",
            ),
        ],
    )
    record = json.loads(rejected.where("record_id = 'bad'").first()["record"])
    assert (record["format"], record["cluster_id"], record["payload"]) == ("kafka_topics_cli", "c1", broken)


def test_topics_capture_function():
    assert topics_capture("", 1) == {"error": "no partition lines in the capture", "partitions": None}
    parsed = topics_capture(TOPICS, 2)
    assert parsed["error"] is None
    assert [(p["topic"], p["partition"], p["leader_id"], p["min_isr"]) for p in parsed["partitions"]] == [
        ("orders", 0, 1, 2),
        ("orders", 1, 2, 2),
        ("orders", 2, None, 2),
        ("payments", 0, 3, 2),
        ("audit", 0, 1, 1),
        ("moving", 0, 1, 2),
    ]


# --- duplicates -----------------------------------------------------------------------------------------------------


def test_duplicates_keep_the_later_ingested_record(spark):
    capture = "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 1,2\tIsr: 2\n"
    states, _ = run(
        spark,
        state("old", "t", 1, [1, 2], [1, 2], 1, partition=0, ingested_at=RUN_1),
        state("new", "t", 1, [1, 2], [1], 1, partition=0, ingested_at=RUN_2),
        # the same partition from a capture and a JSON line: the later-ingested capture wins
        state("json", "t", 2, [1, 2], [1, 2], 1, partition=1, ingested_at=RUN_1),
        topics("cli", capture, ingested_at=RUN_2),
        # other snapshots and clusters stay apart
        state("other-time", "t", 1, [1, 2], [1, 2], 1, partition=0, collected_ms=T0 + 1),
        state("other-cluster", "t", 1, [1, 2], [1, 2], 1, partition=0, cluster="c2"),
    )
    check_rows(
        states,
        ["cluster_id", "collected_at", "partition", "isr", "status", "source", "record_id"],
        "cluster_id STRING, collected_at TIMESTAMP, partition INT, isr ARRAY<INT>, status STRING, source STRING, "
        "record_id STRING",
        [
            ("c1", ts(T0), 0, [1], "at_min_isr", "json", "new"),
            ("c1", ts(T0), 1, [2], "at_min_isr", "cli", "cli"),
            ("c1", ts(T0 + 1), 0, [1, 2], "healthy", "json", "other-time"),
            ("c2", ts(T0), 0, [1, 2], "healthy", "json", "other-cluster"),
        ],
    )


def test_unreadable_bronze_records_are_left_to_the_record_readable_quarantine(spark):
    row = state("x", "t", 1, [1], [1], 1)
    states, rejected = run(spark, row[:-1] + ("field 'isr' must be an array of integers, not string",))
    assert states.collect() == [] and rejected.collect() == []
