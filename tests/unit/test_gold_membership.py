"""quorumlake.gold.membership: stretches of quorum membership, membership and leader events, removed voters, on tiny
silver.replica_states-like rows.

The story (one cluster, one membership snapshot a minute): voters 1, 2, 3 and observers 4, 5 (brokers); at t2
controller 6 starts and fetches as an observer; at t3 `add-controller` makes it a voter; at t4 `remove-controller`
removes voter 3, which Kafka keeps listing as an observer; at t5 node 3 is stopped and leaves the list; at t6 voter 2
comes back with a new directory id (its disk was replaced).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_QUORUM_EVENTS, GOLD_QUORUM_MEMBERSHIP
from quorumlake.gold.membership import (
    build_leader_events,
    build_membership_events,
    build_quorum_membership,
    mark_removed_voters,
    membership_rows,
    membership_stretches,
)
from tests.frames import assert_frames_equal, check_rows

T0 = datetime(2024, 10, 27, 3, 33, 20)
REPLICAS = (
    "cluster_id STRING, collected_at TIMESTAMP, replica_id INT, is_voter BOOLEAN, replica_directory_id STRING, "
    "endpoints ARRAY<STRING>"
)
MEMBERSHIP = ", ".join(f"{n} {t}" for n, t, _ in GOLD_QUORUM_MEMBERSHIP.columns)
EVENTS = ", ".join(f"{n} {t}" for n, t, _ in GOLD_QUORUM_EVENTS.columns)


def t(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def ep(node: int) -> list[str]:
    return [f"CONTROLLER://127.0.0.1:1909{node}"]


def snapshot(minute: int, voters: dict[int, str], observers: dict[int, str | None]) -> list[tuple]:
    at = t(minute)
    return [("c", at, n, True, d, ep(n)) for n, d in voters.items()] + [
        ("c", at, n, False, d, None) for n, d in observers.items()
    ]


BROKERS = {4: "d4", 5: "d5"}
STORY = [
    snapshot(0, {1: "d1", 2: "d2", 3: "d3"}, BROKERS),
    snapshot(1, {1: "d1", 2: "d2", 3: "d3"}, BROKERS),
    snapshot(2, {1: "d1", 2: "d2", 3: "d3"}, {**BROKERS, 6: "d6"}),
    snapshot(3, {1: "d1", 2: "d2", 3: "d3", 6: "d6"}, BROKERS),
    snapshot(4, {1: "d1", 2: "d2", 6: "d6"}, {**BROKERS, 3: "d3"}),
    snapshot(5, {1: "d1", 2: "d2", 6: "d6"}, BROKERS),
    snapshot(6, {1: "d1", 2: "d2b", 6: "d6"}, BROKERS),
]


def rows(spark, minutes=range(7)):
    data = [r for m in minutes for r in STORY[m]]
    return membership_rows(spark.createDataFrame(data, REPLICAS))


def stretch(node, role, start, end, directory, snapshots, removed=False, last=None):
    endpoints = ep(node) if role == "voter" else None
    last_seen = t(last if last is not None else (end - 1 if end is not None else 6))
    return (
        "c",
        node,
        role,
        t(start),
        None if end is None else t(end),
        directory,
        endpoints,
        snapshots,
        removed,
        last_seen,
    )


EXPECTED_MEMBERSHIP = [
    stretch(1, "voter", 0, None, "d1", 7),
    stretch(2, "voter", 0, 6, "d2", 6),
    stretch(2, "voter", 6, None, "d2b", 1),
    stretch(3, "voter", 0, 4, "d3", 4),
    stretch(3, "observer", 4, 5, "d3", 1, removed=True),
    stretch(4, "observer", 0, None, "d4", 7),
    stretch(5, "observer", 0, None, "d5", 7),
    stretch(6, "observer", 2, 3, "d6", 1),
    stretch(6, "voter", 3, None, "d6", 4),
]


def test_stretches_of_one_role_and_directory(spark):
    got = build_quorum_membership(rows(spark))
    assert got.columns == GOLD_QUORUM_MEMBERSHIP.column_names
    check_rows(got, GOLD_QUORUM_MEMBERSHIP.column_names, MEMBERSHIP, EXPECTED_MEMBERSHIP)


def event(minute, name, node, previous, detail):
    return ("c", t(minute), name, node, None, t(previous), detail)


EXPECTED_EVENTS = [
    event(2, "observer_joined", 6, 1, "observer 6 joined; voters now [1, 2, 3]"),
    event(3, "observer_left", 6, 2, "observer 6 left (added as a voter); voters now [1, 2, 3, 6]"),
    event(
        3,
        "voter_added",
        6,
        2,
        "voter 6 added (was an observer) (directory d6, CONTROLLER://127.0.0.1:19096); voters now [1, 2, 3, 6]",
    ),
    event(4, "voter_removed", 3, 3, "voter 3 removed (still listed as an observer); voters now [1, 2, 6]"),
    event(4, "observer_joined", 3, 3, "observer 3 joined (a removed voter); voters now [1, 2, 6]"),
    event(5, "observer_left", 3, 4, "observer 3 left; voters now [1, 2, 6]"),
    event(6, "directory_changed", 2, 5, "voter 2 changed directory d2 -> d2b; voters now [1, 2, 6]"),
]


def test_membership_events_at_the_first_snapshot_that_shows_the_change(spark):
    got = build_membership_events(rows(spark))
    assert got.columns == GOLD_QUORUM_EVENTS.column_names
    check_rows(got, GOLD_QUORUM_EVENTS.column_names, EVENTS, EXPECTED_EVENTS)


def test_seeded_rebuild_equals_the_full_one(spark):
    """Built from t4 on with the stretches open at t3 as seeds: the same stretches (those still open at t3 or
    starting later) and the same events from t4 on as one build over everything."""
    first = build_quorum_membership(rows(spark, range(4)))
    seeds = first.where(F.col("valid_to").isNull())
    later = build_quorum_membership(rows(spark, range(4, 7)), seeds)
    expected = [r for r in EXPECTED_MEMBERSHIP if r[4] is None or r[4] >= t(4)]
    check_rows(later, GOLD_QUORUM_MEMBERSHIP.column_names, MEMBERSHIP, expected)
    events = build_membership_events(rows(spark, range(4, 7)), seeds)
    check_rows(events, GOLD_QUORUM_EVENTS.column_names, EVENTS, [e for e in EXPECTED_EVENTS if e[1] >= t(4)])


def test_stretches_computed_once_for_both_builders_give_the_same_tables(spark):
    """As the gold job builds them: `membership_stretches` once, handed to both builders, with seeds."""
    seeds = build_quorum_membership(rows(spark, range(4))).where(F.col("valid_to").isNull())
    later = rows(spark, range(4, 7))
    stretched = membership_stretches(later, seeds)
    membership = build_quorum_membership(later, seeds, stretched)
    expected = [r for r in EXPECTED_MEMBERSHIP if r[4] is None or r[4] >= t(4)]
    check_rows(membership, GOLD_QUORUM_MEMBERSHIP.column_names, MEMBERSHIP, expected)
    events = build_membership_events(later, seeds, stretched)
    check_rows(events, GOLD_QUORUM_EVENTS.column_names, EVENTS, [e for e in EXPECTED_EVENTS if e[1] >= t(4)])


def test_a_voter_set_that_never_changes_makes_no_events(spark):
    assert build_membership_events(rows(spark, range(2))).count() == 0


SNAPSHOTS = "cluster_id STRING, collected_at TIMESTAMP, leader_id INT, leader_epoch INT"


def test_elections_found_across_snapshots_without_an_epoch(spark):
    """A --replication-only capture (leader known, epoch not) between two epochs does not hide the election; an
    error snapshot (neither known) neither; a leaderless snapshot with a new epoch is not yet an election."""
    snapshots = spark.createDataFrame(
        [
            ("c", t(0), 1, 5),
            ("c", t(1), 1, None),  # --replication only
            ("c", t(2), None, None),  # error response
            ("c", t(3), 2, 7),
            ("c", t(4), None, 8),  # no leader yet in epoch 8
            ("c", t(5), 3, 8),
            ("c", t(6), 3, 8),
        ],
        SNAPSHOTS,
    )
    got = build_leader_events(snapshots)
    check_rows(
        got,
        GOLD_QUORUM_EVENTS.column_names,
        EVENTS,
        [
            (
                "c",
                t(3),
                "leader_elected",
                2,
                7,
                t(0),
                "leader 2 elected in epoch 7 (was leader 1 in epoch 5, 2 epochs later)",
            ),
            ("c", t(5), "leader_elected", 3, 8, t(3), "leader 3 elected in epoch 8 (was leader 2 in epoch 7)"),
        ],
    )


def test_election_against_the_seed_before_the_rebuilt_snapshots(spark):
    seed = spark.createDataFrame([("c", t(0), 1, 5)], SNAPSHOTS)
    snapshots = spark.createDataFrame([("c", t(1), 1, None), ("c", t(2), 2, 6)], SNAPSHOTS)
    got = build_leader_events(snapshots, seed).select("event_at", "node_id", "leader_epoch", "previous_at")
    assert [tuple(r) for r in got.collect()] == [(t(2), 2, 6, t(0))]


def test_removed_voter_rows_are_marked(spark):
    membership = build_quorum_membership(rows(spark))
    replicas = spark.createDataFrame([r for m in range(7) for r in STORY[m]], REPLICAS)
    got = mark_removed_voters(replicas, membership).where(F.col("is_removed_voter"))
    assert [(r.collected_at, r.replica_id, r.is_voter) for r in got.collect()] == [(t(4), 3, False)]
    assert mark_removed_voters(replicas, membership).count() == replicas.count()


def test_directory_ids_unknown_make_one_stretch(spark):
    """A static quorum (kraft.version 0) has no directory ids: NULL throughout is one directory."""
    data = [("c", t(m), 1, True, None, None) for m in range(3)]
    got = build_quorum_membership(membership_rows(spark.createDataFrame(data, REPLICAS)))
    assert_frames_equal(
        got.select("node_id", "role", "valid_from", "valid_to", "snapshots"),
        spark.createDataFrame(
            [(1, "voter", t(0), None, 3)],
            "node_id INT, role STRING, valid_from TIMESTAMP, valid_to TIMESTAMP, snapshots BIGINT",
        ),
        ignore_nullable=True,
    )
