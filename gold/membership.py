"""gold.quorum_membership (who was in the quorum, in which role, when) and gold.quorum_events (what changed), from
the leader's view of the quorum: the replica rows of silver.replica_states.

A *membership snapshot* is a quorum snapshot with replica rows: a DescribeQuorum response without error, or a
`kafka-metadata-quorum describe --replication` capture. Error responses and `--status`-only captures list no
observers, so they neither extend nor break a stretch. A *stretch* is a run of a cluster's consecutive membership
snapshots in which a node is listed in one role (`voter` or `observer`) with one directory id; `valid_to` is the
first membership snapshot that no longer shows it so (NULL while current).

Events are the stretches' starts and ends, at the time of the first snapshot that shows the change: `voter_added`,
`voter_removed`, `observer_joined`, `observer_left`, and `directory_changed` where a node keeps its role under a new
directory id (KIP-853: a controller whose disk was replaced); a cluster's first snapshot makes no events.
`leader_elected` comes from every two consecutive snapshots *that know the leader and the epoch*, whatever lies
between them (a `--replication`-only capture does not carry the epoch), with the new epoch.

A removed voter that Kafka keeps listing as an observer (it does until the node stops fetching) is an observer
stretch that directly follows a voter stretch of the same node: `is_removed_voter`.

Incremental: `seeds` are the stretches open before the first rebuilt snapshot (each as it was at that time: its
`valid_from`, `snapshots` and state); they continue into the rebuilt snapshots when the node keeps its state.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_QUORUM_EVENTS, GOLD_QUORUM_MEMBERSHIP
from quorumlake.gold.islands import consecutive_runs

_CLUSTER_NODE = ["cluster_id", "node_id"]


def membership_rows(replicas: DataFrame) -> DataFrame:
    """From silver.replica_states rows: one row per node per membership snapshot (cluster_id, collected_at, node_id,
    role, directory_id, endpoints)."""
    return replicas.select(
        "cluster_id",
        "collected_at",
        F.col("replica_id").alias("node_id"),
        F.when(F.col("is_voter"), "voter").otherwise("observer").alias("role"),
        F.col("replica_directory_id").alias("directory_id"),
        "endpoints",
    )


def membership_islands(rows: DataFrame, seeds: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """(islands, snapshot times): one row per stretch with its first and last snapshot index (`_first`, `_last`)
    within the cluster's sequence of membership snapshots, and that sequence (cluster_id, _i, at). `with_neighbours`
    reads the islands three times, so a caller that keeps frames keeps them."""
    rows = rows.select(
        *rows.columns,
        F.lit(1).cast("bigint").alias("_weight"),
        F.col("collected_at").alias("_from"),
        F.lit(None).cast("boolean").alias("_removed"),
    )
    if seeds is not None:
        rows = rows.unionByName(
            seeds.select(
                "cluster_id",
                F.col("last_seen_at").alias("collected_at"),
                "node_id",
                "role",
                "directory_id",
                "endpoints",
                F.col("snapshots").alias("_weight"),
                F.col("valid_from").alias("_from"),
                F.col("is_removed_voter").alias("_removed"),
            )
        )
    rows = rows.withColumn("_dir", F.coalesce("directory_id", F.lit("")))
    state = ["cluster_id", "node_id", "role", "_dir"]
    runs, numbered = consecutive_runs(rows, rows, ["cluster_id"], state, "collected_at")
    islands = (
        runs.groupBy(*state, "_run")
        .agg(
            F.first("directory_id").alias("directory_id"),
            F.min("_from").alias("valid_from"),
            F.max("collected_at").alias("last_seen_at"),
            F.min("_i").alias("_first"),
            F.max("_i").alias("_last"),
            F.sum("_weight").alias("snapshots"),
            F.max_by("endpoints", F.when(F.col("endpoints").isNotNull(), F.col("_i"))).alias("endpoints"),
            F.bool_or("_removed").alias("_seed_removed"),
        )
        .drop("_run", "_dir")
    )
    return islands, numbered.withColumnRenamed("collected_at", "at")


def with_neighbours(islands: DataFrame) -> DataFrame:
    """Each stretch of `membership_islands` with the role and directory of the node's stretch just before it
    (`_prev_*`, ending at the snapshot before this one starts) and just after it (`_next_*`)."""
    prev = islands.select(
        *_CLUSTER_NODE,
        (F.col("_last") + 1).alias("_first"),
        F.col("role").alias("_prev_role"),
        F.col("directory_id").alias("_prev_dir"),
    )
    nxt = islands.select(
        *_CLUSTER_NODE,
        (F.col("_first") - 1).alias("_last"),
        F.col("role").alias("_next_role"),
        F.col("directory_id").alias("_next_dir"),
    )
    # a node is in one role per snapshot, so at most one stretch ends right before (starts right after) another
    return islands.join(prev, [*_CLUSTER_NODE, "_first"], "left").join(nxt, [*_CLUSTER_NODE, "_last"], "left")


Stretched = tuple[DataFrame, DataFrame]


def membership_stretches(rows: DataFrame, seeds: DataFrame | None = None) -> Stretched:
    """What `build_quorum_membership` and `build_membership_events` both start from: the stretches, each with its
    node's stretches just before and after it, and the clusters' numbered membership snapshots (cluster_id, _i, at).
    A caller that builds both can compute it once and pass it to each (`stretched`)."""
    islands, times = membership_islands(rows, seeds)
    return with_neighbours(islands), times


def build_quorum_membership(
    rows: DataFrame, seeds: DataFrame | None = None, stretched: Stretched | None = None
) -> DataFrame:
    """gold.quorum_membership rows from `membership_rows` (all membership snapshots of each cluster from some time
    on) and the stretches open just before that time (`seeds`, gold.quorum_membership rows whose `last_seen_at`
    is the cluster's last membership snapshot before the rows); `stretched`: `membership_stretches` of the same."""
    stretches, times = stretched or membership_stretches(rows, seeds)
    ends = times.select("cluster_id", (F.col("_i") - 1).alias("_last"), F.col("at").alias("valid_to"))
    removed = (F.col("role") == "observer") & (F.col("_prev_role") == "voter")
    return (
        stretches.join(ends, ["cluster_id", "_last"], "left")
        .withColumn("is_removed_voter", F.coalesce(F.col("_seed_removed"), removed, F.lit(False)))
        .select(*GOLD_QUORUM_MEMBERSHIP.column_names)
    )


def build_membership_events(
    rows: DataFrame, seeds: DataFrame | None = None, stretched: Stretched | None = None
) -> DataFrame:
    """voter_added, voter_removed, observer_joined, observer_left and directory_changed events (gold.quorum_events
    rows) from the same input as `build_quorum_membership`; none at a cluster's first snapshot of `rows` (its
    state before is unknown) or at the seeds' snapshot; `stretched`: `membership_stretches` of the same."""
    stretches, times = stretched or membership_stretches(rows, seeds)
    at = times.select("cluster_id", "_i", "at")
    same_role_new_dir_before = (F.col("_prev_role") == F.col("role")) & ~F.col("_prev_dir").eqNullSafe(
        F.col("directory_id")
    )
    same_role_new_dir_after = (F.col("_next_role") == F.col("role")) & ~F.col("_next_dir").eqNullSafe(
        F.col("directory_id")
    )
    starts = stretches.where(F.col("_first") > 1).select(
        "cluster_id",
        "node_id",
        "role",
        "directory_id",
        "endpoints",
        F.col("_first").alias("_i"),
        (F.col("_first") - 1).alias("_pi"),
        F.when(same_role_new_dir_before, "directory_changed")
        .when(F.col("role") == "voter", "voter_added")
        .otherwise("observer_joined")
        .alias("event"),
        F.col("_prev_dir").alias("_old_dir"),
        (F.col("_prev_role") != F.col("role")).alias("_switch"),
    )
    ends = stretches.where(~F.coalesce(same_role_new_dir_after, F.lit(False))).select(
        "cluster_id",
        "node_id",
        "role",
        "directory_id",
        "endpoints",
        (F.col("_last") + 1).alias("_i"),
        F.col("_last").alias("_pi"),
        F.when(F.col("role") == "voter", "voter_removed").otherwise("observer_left").alias("event"),
        F.lit(None).cast("string").alias("_old_dir"),
        (F.col("_next_role") != F.col("role")).alias("_switch"),
    )
    located = (
        starts.unionByName(ends)
        .join(at, ["cluster_id", "_i"])  # an end after the cluster's last snapshot has no time yet: dropped here
        .join(
            at.select("cluster_id", F.col("_i").alias("_pi"), F.col("at").alias("previous_at")), ["cluster_id", "_pi"]
        )
    )
    # the voters of the snapshots that have an event (a few), not of every snapshot
    event_times = located.select("cluster_id", F.col("at").alias("collected_at")).distinct()
    voters = (
        rows.where(F.col("role") == "voter")
        .join(event_times, ["cluster_id", "collected_at"], "left_semi")
        .groupBy("cluster_id", "collected_at")
        .agg(F.array_sort(F.collect_list("node_id")).alias("_voters"))
    )
    if seeds is not None:
        seeded = (
            seeds.where(F.col("role") == "voter")
            .groupBy("cluster_id", F.col("last_seen_at").alias("collected_at"))
            .agg(F.array_sort(F.collect_list("node_id")).alias("_voters"))
        )
        voters = voters.unionByName(seeded)
    events = located.join(voters.withColumnRenamed("collected_at", "at"), ["cluster_id", "at"], "left")
    return events.select(
        "cluster_id",
        F.col("at").alias("event_at"),
        "event",
        "node_id",
        F.lit(None).cast("int").alias("leader_epoch"),
        "previous_at",
        _detail().alias("detail"),
    ).select(*GOLD_QUORUM_EVENTS.column_names)


def _detail() -> Column:
    node = F.col("node_id").cast("string")
    directory = F.coalesce(F.col("directory_id"), F.lit("unknown"))
    endpoints = F.when(
        F.col("endpoints").isNotNull(), F.concat(F.lit(", "), F.array_join(F.col("endpoints"), " "))
    ).otherwise(F.lit(""))
    voters = F.concat(F.lit("; voters now ["), F.array_join(F.coalesce("_voters", F.array()), ", "), F.lit("]"))
    switch = F.coalesce(F.col("_switch"), F.lit(False))

    def noted(note: str) -> Column:
        return F.when(switch, F.lit(note)).otherwise(F.lit(""))

    text = (
        F.when(
            F.col("event") == "voter_added",
            F.concat(
                F.lit("voter "),
                node,
                F.lit(" added"),
                noted(" (was an observer)"),
                F.lit(" (directory "),
                directory,
                endpoints,
                F.lit(")"),
            ),
        )
        .when(
            F.col("event") == "voter_removed",
            F.concat(F.lit("voter "), node, F.lit(" removed"), noted(" (still listed as an observer)")),
        )
        .when(
            F.col("event") == "observer_joined",
            F.concat(F.lit("observer "), node, F.lit(" joined"), noted(" (a removed voter)")),
        )
        .when(
            F.col("event") == "observer_left",
            F.concat(F.lit("observer "), node, F.lit(" left"), noted(" (added as a voter)")),
        )
        .otherwise(
            F.concat(
                F.col("role"),
                F.lit(" "),
                node,
                F.lit(" changed directory "),
                F.coalesce(F.col("_old_dir"), F.lit("unknown")),
                F.lit(" -> "),
                directory,
            )
        )
    )
    return F.concat(text, voters)


def build_leader_events(snapshots: DataFrame, seed: DataFrame | None = None) -> DataFrame:
    """leader_elected events (gold.quorum_events rows) from quorum snapshots (cluster_id, collected_at, leader_id,
    leader_epoch): between every two consecutive snapshots that both know the leader and the epoch, an epoch
    increase is an election, at the later one. `seed` (same columns): each cluster's last such snapshot before."""
    known = snapshots.where(F.col("leader_id").isNotNull() & F.col("leader_epoch").isNotNull()).select(
        "cluster_id", "collected_at", "leader_id", "leader_epoch", F.lit(False).alias("_seed")
    )
    if seed is not None:
        known = known.unionByName(
            seed.select("cluster_id", "collected_at", "leader_id", "leader_epoch", F.lit(True).alias("_seed"))
        )
    by_time = Window.partitionBy("cluster_id").orderBy("collected_at")
    paired = (
        known.withColumn("_prev_epoch", F.lag("leader_epoch").over(by_time))
        .withColumn("_prev_leader", F.lag("leader_id").over(by_time))
        .withColumn("previous_at", F.lag("collected_at").over(by_time))
        .where(~F.col("_seed") & (F.col("leader_epoch") > F.col("_prev_epoch")))
    )
    rounds = F.col("leader_epoch") - F.col("_prev_epoch")
    detail = F.concat(
        F.lit("leader "),
        F.col("leader_id").cast("string"),
        F.lit(" elected in epoch "),
        F.col("leader_epoch").cast("string"),
        F.lit(" (was leader "),
        F.col("_prev_leader").cast("string"),
        F.lit(" in epoch "),
        F.col("_prev_epoch").cast("string"),
        F.when(rounds > 1, F.concat(F.lit(", "), rounds.cast("string"), F.lit(" epochs later"))).otherwise(F.lit("")),
        F.lit(")"),
    )
    return paired.select(
        "cluster_id",
        F.col("collected_at").alias("event_at"),
        F.lit("leader_elected").alias("event"),
        F.col("leader_id").alias("node_id"),
        "leader_epoch",
        "previous_at",
        detail.alias("detail"),
    ).select(*GOLD_QUORUM_EVENTS.column_names)


def mark_removed_voters(replicas: DataFrame, membership: DataFrame) -> DataFrame:
    """silver.replica_states rows with `is_removed_voter`: an observer row inside a gold.quorum_membership stretch
    marked as a removed voter's."""
    removed = membership.where(F.col("is_removed_voter")).select(
        "cluster_id",
        F.col("node_id").alias("_node"),
        F.col("valid_from").alias("_from"),
        F.col("valid_to").alias("_to"),
    )
    inside = (
        (replicas["cluster_id"] == removed["cluster_id"])
        & (F.col("replica_id") == F.col("_node"))
        & ~F.col("is_voter")
        & (F.col("collected_at") >= F.col("_from"))
        & (F.col("_to").isNull() | (F.col("collected_at") < F.col("_to")))
    )
    flagged = replicas.join(removed, inside, "left_semi").select(
        "cluster_id", "collected_at", "replica_id", "is_voter", F.lit(True).alias("is_removed_voter")
    )
    return replicas.join(flagged, ["cluster_id", "collected_at", "replica_id", "is_voter"], "left").withColumn(
        "is_removed_voter", F.coalesce("is_removed_voter", F.lit(False))
    )
