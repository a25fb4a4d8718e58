"""quorumlake.gold.isr: build_isr_health / build_isr_health_by_topic (counts of flags per snapshot) and
build_at_min_isr_episodes (gold.at_min_isr_episodes), on tiny silver.partition_states rows.

The three examples are KIP-427's ("Examples", one partition each, one broker failing per step), one snapshot a
minute from 03:33:20 as in tests/data/landing/partitions/date=2024-10-27/kip427.jsonl.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from quorumlake.gold.isr import build_at_min_isr_episodes, build_isr_health, build_isr_health_by_topic
from tests.frames import assert_frames_equal, check_rows

FLAGS = (
    "is_offline BOOLEAN, is_under_min_isr BOOLEAN, is_at_min_isr BOOLEAN, is_under_replicated BOOLEAN, "
    "min_isr INT, replicas ARRAY<INT>, isr_size INT"
)
HEALTH_IN = f"cluster_id STRING, collected_at TIMESTAMP, {FLAGS}"
BY_TOPIC_IN = f"cluster_id STRING, collected_at TIMESTAMP, topic STRING, {FLAGS}"
COUNTS = "partitions INT, offline INT, under_min_isr INT, at_min_isr INT, under_replicated INT"
STATES = (
    "cluster_id STRING, topic STRING, partition INT, collected_at TIMESTAMP, is_at_min_isr BOOLEAN, "
    "is_under_min_isr BOOLEAN, is_offline BOOLEAN, status STRING, is_under_replicated BOOLEAN, min_isr INT, "
    "replicas ARRAY<INT>, isr_size INT"
)
EPISODES = (
    "cluster_id STRING, topic STRING, partition INT, started_at TIMESTAMP, ended_at TIMESTAMP, duration_ms BIGINT, "
    "snapshots BIGINT, escalated BOOLEAN, max_status STRING, bounces INT"
)
STARTS = "cluster_id STRING, topic STRING, partition INT, started_at TIMESTAMP"

T0 = datetime(2024, 10, 27, 3, 33, 20)  # 1730000000000


def t(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def flags(isr: int, min_isr: int, rf: int, leader: bool = True) -> dict:
    """The silver flags of a partition (docs/contract.md §2, silver, as kafka-topics --describe decides them)."""
    offline = not leader
    at_min = isr == min_isr
    under_min = offline or isr < min_isr
    under_replicated = rf - isr > 0
    status = (
        "offline"
        if offline
        else "under_min_isr"
        if under_min
        else "at_min_isr"
        if at_min
        else "under_replicated"
        if under_replicated
        else "healthy"
    )
    return {
        "is_offline": offline,
        "is_under_min_isr": under_min,
        "is_at_min_isr": at_min,
        "is_under_replicated": under_replicated,
        "status": status,
    }


def state(topic, minute, isr, min_isr=2, rf=3, leader=True, partition=0, cluster="kip427"):
    f = flags(isr, min_isr, rf, leader)
    return (
        cluster,
        topic,
        partition,
        t(minute),
        f["is_at_min_isr"],
        f["is_under_min_isr"],
        f["is_offline"],
        f["status"],
        f["is_under_replicated"],
        min_isr,
        list(range(rf)),
        isr,
    )


def episodes(spark, rows, earlier=None, flap_window_minutes=60, rule="effective"):
    """The episodes without their `min_isr_rule` column (each test below checks it once)."""
    earlier_df = None if earlier is None else spark.createDataFrame(earlier, STARTS)
    built = build_at_min_isr_episodes(spark.createDataFrame(rows, STATES), earlier_df, flap_window_minutes, rule)
    assert {r[0] for r in built.select("min_isr_rule").distinct().collect()} <= {rule}
    return built.drop("min_isr_rule")


# --- isr_health ----------------------------------------------------------------------------------------------------


def test_isr_health_counts_flags_not_status(spark):
    def row(collected, topic, isr, min_isr, rf, leader=True, cluster="c"):
        f = flags(isr, min_isr, rf, leader)
        return (
            cluster,
            collected,
            topic,
            f["is_offline"],
            f["is_under_min_isr"],
            f["is_at_min_isr"],
            f["is_under_replicated"],
            min_isr,
            list(range(rf)),
            isr,
        )

    rows = [
        row(t(0), "a", 3, 2, 3),  # healthy
        row(t(0), "a", 2, 2, 3),  # at min ISR and under-replicated: counts in both
        row(t(0), "b", 1, 2, 3, leader=False),  # offline, under min ISR, under-replicated
        row(t(0), "b", 1, 1, 3, leader=False),  # offline with its last ISR member: also at min ISR by size
        row(t(1), "a", 3, 2, 3),
        row(t(1), "b", 3, 1, 3),
        row(t(0), "a", 2, 2, 3, cluster="d"),
    ]
    by_topic = spark.createDataFrame(rows, BY_TOPIC_IN)

    expected = spark.createDataFrame(
        [
            ("c", t(0), 4, 2, 2, 2, 3),
            ("c", t(1), 2, 0, 0, 0, 0),
            ("d", t(0), 1, 0, 0, 1, 1),
        ],
        f"cluster_id STRING, collected_at TIMESTAMP, {COUNTS}",
    )
    raw = ["cluster_id", "collected_at", "partitions", "offline", "under_min_isr", "at_min_isr", "under_replicated"]
    assert_frames_equal(
        build_isr_health(by_topic.drop("topic")).select(*raw), expected, ignore_row_order=True, ignore_nullable=True
    )

    expected_by_topic = spark.createDataFrame(
        [
            ("c", t(0), "a", 2, 0, 0, 1, 1),
            ("c", t(0), "b", 2, 2, 2, 1, 2),
            ("c", t(1), "a", 1, 0, 0, 0, 0),
            ("c", t(1), "b", 1, 0, 0, 0, 0),
            ("d", t(0), "a", 1, 0, 0, 1, 1),
        ],
        f"cluster_id STRING, collected_at TIMESTAMP, topic STRING, {COUNTS}",
    )
    assert_frames_equal(
        build_isr_health_by_topic(by_topic).select(*raw[:2], "topic", *raw[2:]),
        expected_by_topic,
        ignore_row_order=True,
        ignore_nullable=True,
    )


# --- at_min_isr_episodes: KIP-427 ----------------------------------------------------------------------------------

KIP427 = {
    # Example 1: RF 3, min ISR 2: [0,1,2] -> broker 0 fails [1,2] (AtMinIsr) -> broker 1 fails [2] (UnderMinIsr)
    "example1": [state("example1", 0, 3), state("example1", 1, 2), state("example1", 2, 1)],
    # Example 2: RF 3, min ISR 1: [0,1,2] -> [1,2] (UnderReplicated) -> [2] (AtMinIsr) -> [] (Offline)
    "example2": [
        state("example2", 0, 3, min_isr=1),
        state("example2", 1, 2, min_isr=1),
        state("example2", 2, 1, min_isr=1),
        state("example2", 3, 0, min_isr=1, leader=False),
    ],
    # Example 3: RF 4, min ISR 2: [0,1,2,3] -> [1,2,3] (UnderReplicated) -> [2,3] (AtMinIsr) -> [3] (UnderMinIsr)
    "example3": [
        state("example3", 0, 4, rf=4),
        state("example3", 1, 3, rf=4),
        state("example3", 2, 2, rf=4),
        state("example3", 3, 1, rf=4),
    ],
}
KIP427_STEPS = {
    1: [],
    2: [("example1", t(1), None, 0, 1, False, "at_min_isr")],
    3: [
        ("example1", t(1), None, 60_000, 2, True, "under_min_isr"),
        ("example2", t(2), None, 0, 1, False, "at_min_isr"),
        ("example3", t(2), None, 0, 1, False, "at_min_isr"),
    ],
    4: [
        ("example1", t(1), None, 60_000, 2, True, "under_min_isr"),  # no snapshot at t(3): ongoing since t(1)
        ("example2", t(2), None, 60_000, 2, True, "offline"),
        ("example3", t(2), None, 60_000, 2, True, "under_min_isr"),
    ],
}


@pytest.mark.parametrize("steps", sorted(KIP427_STEPS))
def test_kip427_examples_step_by_step(spark, steps):
    rows = [r for example in KIP427.values() for r in example[:steps]]
    expected = spark.createDataFrame(
        [
            ("kip427", topic, 0, started, ended, duration, snapshots, escalated, worst, 0)
            for topic, started, ended, duration, snapshots, escalated, worst in KIP427_STEPS[steps]
        ],
        EPISODES,
    )
    assert_frames_equal(episodes(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_an_episode_ends_at_the_first_snapshot_neither_at_min_nor_worse(spark):
    rows = [
        state("t", 0, 3),
        state("t", 1, 2),  # starts
        state("t", 2, 1),  # escalates
        state("t", 3, 2),  # still in it
        state("t", 4, 3),  # ends it: not counted in `snapshots`
        state("t", 5, 3),
    ]
    expected = spark.createDataFrame(
        [
            ("kip427", "t", 0, t(1), t(4), 180_000, 3, True, "under_min_isr", 0),
        ],
        EPISODES,
    )
    assert_frames_equal(episodes(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


def test_going_straight_to_under_min_isr_or_offline_starts_no_episode(spark):
    rows = [
        state("under", 0, 3),
        state("under", 1, 1),
        state("under", 2, 3),
        # min ISR 1: every broker but one fails at once; KRaft keeps the last ISR member, so the ISR size equals
        # min ISR, but the partition is offline, not at min ISR
        state("offline", 0, 3, min_isr=1),
        state("offline", 1, 1, min_isr=1, leader=False),
        state("offline", 2, 3, min_isr=1),
        # recovering from under min ISR through min ISR does start one, at the at-min snapshot
        state("recovering", 0, 3),
        state("recovering", 1, 1),
        state("recovering", 2, 2),
        state("recovering", 3, 3),
    ]
    expected = spark.createDataFrame(
        [
            ("kip427", "recovering", 0, t(2), t(3), 60_000, 1, False, "at_min_isr", 0),
        ],
        EPISODES,
    )
    assert_frames_equal(episodes(spark, rows), expected, ignore_row_order=True, ignore_nullable=True)


FLAPPING = [state("flappy", m, isr) for m, isr in enumerate([3, 2, 3, 2, 3, 2])]


def test_a_flapping_partition_gives_several_episodes_and_counts_bounces(spark):
    expected = spark.createDataFrame(
        [
            ("kip427", "flappy", 0, t(1), t(2), 60_000, 1, False, "at_min_isr", 0),
            ("kip427", "flappy", 0, t(3), t(4), 60_000, 1, False, "at_min_isr", 1),
            ("kip427", "flappy", 0, t(5), None, 0, 1, False, "at_min_isr", 2),
        ],
        EPISODES,
    )
    assert_frames_equal(episodes(spark, FLAPPING), expected, ignore_row_order=True, ignore_nullable=True)

    # a 2-minute flap window reaches back exactly 2 minutes (inclusive), not 4
    narrow = spark.createDataFrame(
        [
            ("kip427", "flappy", 0, t(1), t(2), 60_000, 1, False, "at_min_isr", 0),
            ("kip427", "flappy", 0, t(3), t(4), 60_000, 1, False, "at_min_isr", 1),
            ("kip427", "flappy", 0, t(5), None, 0, 1, False, "at_min_isr", 1),
        ],
        EPISODES,
    )
    assert_frames_equal(
        episodes(spark, FLAPPING, flap_window_minutes=2), narrow, ignore_row_order=True, ignore_nullable=True
    )


def test_bounces_count_earlier_starts_already_known(spark):
    earlier = [
        ("kip427", "flappy", 0, t(-30)),  # within 60 minutes of every new episode
        ("kip427", "flappy", 0, t(-59)),  # within 60 minutes of t(1) only
        ("kip427", "flappy", 0, t(-90)),  # too old
        ("kip427", "other", 0, t(-10)),  # another partition
        ("kip427", "flappy", 1, t(-10)),
    ]
    expected = spark.createDataFrame(
        [
            ("kip427", "flappy", 0, t(1), t(2), 60_000, 1, False, "at_min_isr", 2),
            ("kip427", "flappy", 0, t(3), t(4), 60_000, 1, False, "at_min_isr", 2),
            ("kip427", "flappy", 0, t(5), None, 0, 1, False, "at_min_isr", 3),
        ],
        EPISODES,
    )
    # the earlier starts are context only: they are not returned as rows
    assert_frames_equal(
        episodes(spark, FLAPPING, earlier=earlier), expected, ignore_row_order=True, ignore_nullable=True
    )


SCOPE = "cluster_id STRING, topic STRING, partition INT, from_at TIMESTAMP"
CHANGES = "cluster_id STRING, topic STRING, partition INT, collected_at TIMESTAMP"


def episode(topic, partition, started, ended):
    return ("c1", topic, partition, t(started), None if ended is None else t(ended), 0, 1, False, "at_min_isr", 0)


def test_episode_scope_starts_at_the_episode_a_change_falls_in_else_at_the_change(spark):
    changes = spark.createDataFrame(
        [
            ("c1", "open", 0, t(12)),  # inside an ongoing episode (started at 10): redone from 10
            ("c1", "open", 0, t(14)),
            ("c1", "closed", 0, t(6)),  # inside a closed one (5 to 8): from 5
            ("c1", "after", 0, t(9)),  # after a closed one (2 to 4): from the change
            ("c1", "new", 0, t(3)),  # no episode at all: from the change
            ("c1", "edge", 0, t(4)),  # at the end of an episode (1 to 4): inside it, from 1
        ],
        CHANGES,
    )
    episodes = spark.createDataFrame(
        [
            episode("open", 0, 10, None),
            episode("closed", 0, 5, 8),
            episode("after", 0, 2, 4),
            episode("edge", 0, 1, 4),
            episode("open", 1, 0, None),  # another partition: not in scope
        ],
        EPISODES,
    )
    expected = spark.createDataFrame(
        [
            ("c1", "open", 0, t(10)),
            ("c1", "closed", 0, t(5)),
            ("c1", "after", 0, t(9)),
            ("c1", "new", 0, t(3)),
            ("c1", "edge", 0, t(1)),
        ],
        SCOPE,
    )
    from quorumlake.gold.isr import episode_scope

    assert_frames_equal(episode_scope(changes, episodes), expected, ignore_row_order=True, ignore_nullable=True)


def test_earlier_starts_are_the_episodes_within_the_flap_window_before_the_scope(spark):
    from quorumlake.gold.isr import earlier_starts

    scope = spark.createDataFrame([("c1", "t", 0, t(60))], SCOPE)
    episodes = spark.createDataFrame(
        [
            episode("t", 0, 0, 1),  # exactly 60 minutes before: inside the window
            episode("t", 0, 30, 31),
            episode("t", 0, 60, None),  # the episode being rebuilt: not earlier
            episode("t", 0, -1, 0),  # 61 minutes before: outside
            episode("t", 1, 30, 31),  # another partition
        ],
        EPISODES,
    )
    expected = spark.createDataFrame([("c1", "t", 0, t(0)), ("c1", "t", 0, t(30))], STARTS)
    assert_frames_equal(earlier_starts(episodes, scope, 60), expected, ignore_row_order=True, ignore_nullable=True)


# --- the effective min ISR (KIP-966, KAFKA-21377) -----------------------------------------------------------------


def test_effective_min_isr_counts_beside_the_kafka_topics_rule(spark):
    from quorumlake.gold.min_isr import effective_min_isr

    def row(topic, isr, min_isr, rf, leader=True):
        f = flags(isr, min_isr, rf, leader)
        return ("c", t(0), topic, f["is_offline"], f["is_under_min_isr"], f["is_at_min_isr"],
                f["is_under_replicated"], min_isr, list(range(rf)), isr)  # fmt: skip

    rows = [
        # RF 2, min.insync.replicas 3: kafka-topics says under min ISR for ever; brokers say at min ISR (2 = min(3, 2))
        row("misconfigured", 2, 3, 2),
        # ... and with one replica out, under min ISR by both rules
        row("misconfigured", 1, 3, 2),
        # min ISR within the replica count: both rules agree
        row("fine", 2, 2, 3),
        row("fine", 3, 2, 3),
        # offline is under min ISR by both rules
        row("fine", 0, 2, 3, leader=False),
    ]
    frame = spark.createDataFrame(rows, BY_TOPIC_IN)
    assert [r[0] for r in frame.select(effective_min_isr()).collect()] == [2, 2, 2, 2, 2]
    columns = ["topic", "under_min_isr", "at_min_isr", "under_min_isr_effective", "at_min_isr_effective",
               "min_isr_above_replicas"]  # fmt: skip
    schema = ", ".join(f"{c} {'STRING' if c == 'topic' else 'INT'}" for c in columns)
    check_rows(
        build_isr_health_by_topic(frame), columns, schema, [("misconfigured", 2, 0, 1, 1, 2), ("fine", 1, 1, 1, 1, 0)]
    )
    check_rows(build_isr_health(frame.drop("topic")), columns[1:], schema.split(", ", 1)[1], [(3, 1, 2, 2, 2)])


def test_episodes_follow_the_chosen_min_isr_rule_and_say_which(spark):
    # RF 2, min.insync.replicas 3, full ISR: at (effective) min ISR from the first snapshot; by kafka-topics' rule
    # it is under min ISR, which starts no episode
    rows = [state("misconfigured", m, 2, min_isr=3, rf=2) for m in range(3)]
    for rule, expected in [
        ("effective", [("kip427", "misconfigured", 0, t(0), None, 120_000, 3, False, "at_min_isr", 0, "effective")]),
        ("kafka_topics", []),
    ]:
        built = build_at_min_isr_episodes(spark.createDataFrame(rows, STATES), None, 60, rule)
        assert_frames_equal(
            built,
            spark.createDataFrame(expected, f"{EPISODES}, min_isr_rule STRING"),
            ignore_row_order=True,
            ignore_nullable=True,
        )
    # a replica drops out: under the effective min ISR too, so the effective episode escalates
    escalating = [*rows, state("misconfigured", 3, 1, min_isr=3, rf=2), state("misconfigured", 4, 2, min_isr=3, rf=2)]
    check_rows(
        build_at_min_isr_episodes(spark.createDataFrame(escalating, STATES), None, 60, "effective"),
        ["started_at", "ended_at", "escalated", "max_status"],
        "started_at TIMESTAMP, ended_at TIMESTAMP, escalated BOOLEAN, max_status STRING",
        [(t(0), None, True, "under_min_isr")],
    )
    with pytest.raises(ValueError, match="min_isr_rule"):
        build_at_min_isr_episodes(spark.createDataFrame(rows, STATES), None, 60, "brokers")
