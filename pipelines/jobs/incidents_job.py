"""Gold's membership ledger, quorum events and incidents: which rows a round's silver changes affect, what is read to
rebuild them, and the MERGEs (called by `gold_job._round`).

- Membership (gold.quorum_membership, and the membership events of gold.quorum_events), per cluster from its
  earliest changed replica snapshot `from_at`. When every stretch the table holds for the cluster was last seen
  before `from_at` (new snapshots after the known ones, the usual case), the stretches still open continue from
  what the table holds (their start and snapshot count) and only the new snapshots are read; otherwise (a late
  snapshot inside known stretches, or a re-run after a crash that already wrote them) the cluster's membership is
  rebuilt from all its snapshots.
- Leader events (`leader_elected`), per cluster from its earliest changed quorum snapshot, against the last
  snapshot before it that knows the leader and the epoch.
- Incidents (gold.incidents, gold.incident_events), per cluster from `S`: the start of the incident the earliest
  change of the round falls in (or follows within the grace period), else that change itself. Every anomaly source
  is read from `S` on and the incidents from `S` on are rebuilt; the MERGE leaves the ones that come out the same
  untouched, so a late file re-opens only the incidents it touches and a re-run writes nothing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import (
    GOLD_INCIDENT_EVENTS,
    GOLD_INCIDENTS,
    GOLD_ISR_HEALTH,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_EVENTS,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_QUORUM_STATUS,
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
)
from quorumlake.gold.anomalies import build_episodes
from quorumlake.gold.incidents import build_incident_events, build_incidents, group_episodes
from quorumlake.gold.membership import (
    build_leader_events,
    build_membership_events,
    build_quorum_membership,
    membership_islands,
    membership_rows,
    with_neighbours,
)
from quorumlake.pipelines.engine.session import cached, literal, release
from quorumlake.pipelines.storage import Bounds, Lakehouse

MEMBERSHIP_EVENTS = ("voter_added", "voter_removed", "observer_joined", "observer_left", "directory_changed")
# The metrics the incident sources read from silver.node_metrics.
INCIDENT_METRICS = ("controller_active_controller_count", "controller_fenced_broker_count")
# How far back the last snapshot knowing the leader's epoch is looked for first (then over the whole table).
SEED_LOOKBACK_US = 6 * 3600 * 1_000_000


def _since(frame: DataFrame, column: str, starts: DataFrame) -> DataFrame:
    return frame.join(starts, "cluster_id").where(F.col(column) >= F.col("from_at")).drop("from_at")


def _from(column: str):
    def match(target: DataFrame, scope: DataFrame):
        return (target["cluster_id"] == scope["cluster_id"]) & (target[column] >= scope["from_at"])

    return match


# --- membership and quorum events -----------------------------------------------------------------------------------


def membership(lakehouse: Lakehouse, replica_keys: DataFrame) -> None:
    """Rebuild gold.quorum_membership and the membership events for the clusters of `replica_keys`
    (cluster_id, collected_at of changed silver.replica_states rows)."""
    changed = replica_keys.groupBy("cluster_id").agg(F.min("collected_at").alias("_changed"))
    held = lakehouse.read(GOLD_QUORUM_MEMBERSHIP)
    last = held.groupBy("cluster_id").agg(F.max("last_seen_at").alias("_last"))
    # clusters whose known stretches all end before the change continue them; the others are rebuilt whole
    seeded = F.coalesce(F.col("_last") < F.col("_changed"), F.lit(False))
    kept = literal(
        changed.join(last, "cluster_id", "left").select(
            "cluster_id",
            F.when(seeded, F.col("_changed")).otherwise(F.timestamp_seconds(F.lit(0))).alias("from_at"),
            seeded.alias("_seeded"),
        )
    )
    bounds = Bounds.of(kept, "from_at")
    if bounds is None:
        return
    continued = [r["cluster_id"] for r in kept.where("_seeded").select("cluster_id").collect()]
    scope = kept.drop("_seeded")
    rows = membership_rows(
        _since(lakehouse.read(SILVER_REPLICA_STATES).where(bounds.since("collected_at").sql()), "collected_at", scope)
    ).transform(cached)
    seeds = held.where(F.col("valid_to").isNull() & F.col("cluster_id").isin(*continued)) if continued else None
    # both builders start from the same stretches: computed once (the islands, which their neighbours read three
    # times, kept too)
    islands, times = membership_islands(rows, seeds)
    islands = cached(islands)
    stretched = (cached(with_neighbours(islands)), cached(times))
    stretches = build_quorum_membership(rows, seeds, stretched)
    events = build_membership_events(rows, seeds, stretched)

    def open_or_later(target: DataFrame, s: DataFrame):
        return (target["cluster_id"] == s["cluster_id"]) & (
            target["valid_to"].isNull() | (target["valid_from"] >= s["from_at"])
        )

    # an open stretch may have started long before: the bounds name the clusters only
    in_clusters = Bounds("valid_from", clusters=bounds.clusters)
    lakehouse.replace_scope(GOLD_QUORUM_MEMBERSHIP, stretches, scope, open_or_later, in_clusters)

    def membership_events(target: DataFrame, s: DataFrame):
        return _from("event_at")(target, s) & target["event"].isin(*MEMBERSHIP_EVENTS)

    lakehouse.replace_scope(GOLD_QUORUM_EVENTS, events, scope, membership_events, bounds.since("event_at"))
    for frame in (*stretched, islands, rows):
        release(frame)


def leader_events(lakehouse: Lakehouse, snapshot_keys: DataFrame) -> None:
    """Rebuild the `leader_elected` events of gold.quorum_events from each cluster's earliest changed quorum
    snapshot on (`snapshot_keys`: cluster_id, collected_at)."""
    starts = snapshot_keys.groupBy("cluster_id").agg(F.min("collected_at").alias("from_at")).transform(cached)
    since = Bounds.of(starts, "from_at")
    if since is None:
        release(starts)
        return
    columns = ["cluster_id", "collected_at", "leader_id", "leader_epoch"]
    snapshots = lakehouse.read(SILVER_QUORUM_SNAPSHOTS)
    rows = _since(snapshots.where(since.since("collected_at").sql()), "collected_at", starts).select(*columns)
    known = snapshots.where(F.col("leader_id").isNotNull() & F.col("leader_epoch").isNotNull()).select(*columns)
    recent = _seed(
        known.where(Bounds("collected_at", since.lo_us - SEED_LOOKBACK_US, None, since.clusters).sql()), starts
    )
    recent = recent.transform(cached)
    found = {r["cluster_id"] for r in recent.select("cluster_id").collect()}
    missing = [c for c in (since.clusters or ()) if c not in found]
    seed = recent
    if since.clusters is None or missing:
        rest = starts if since.clusters is None else starts.where(F.col("cluster_id").isin(*missing))
        seed = recent.where(~F.col("cluster_id").isin(*missing)) if missing else recent.limit(0)
        seed = seed.unionByName(_seed(known, rest))
    events = build_leader_events(rows, seed)

    def elections(target: DataFrame, s: DataFrame):
        return _from("event_at")(target, s) & (target["event"] == "leader_elected")

    lakehouse.replace_scope(GOLD_QUORUM_EVENTS, events, starts, elections, since.since("event_at"))
    release(recent)
    release(starts)


def _seed(known: DataFrame, starts: DataFrame) -> DataFrame:
    """Each cluster's last snapshot before its from_at among `known`."""
    before = known.join(starts, "cluster_id").where(F.col("collected_at") < F.col("from_at"))
    last = before.groupBy("cluster_id").agg(F.max("collected_at").alias("collected_at"))
    return before.join(last, ["cluster_id", "collected_at"], "left_semi").drop("from_at")


# --- incidents ------------------------------------------------------------------------------------------------------


def incidents(lakehouse: Lakehouse, changed: dict[str, DataFrame]) -> None:
    """Rebuild the incidents that the round's silver changes (`changed`: silver table name -> changed rows) may
    touch, and every later one of their clusters."""
    config = lakehouse.config
    times = []
    for spec, column in (
        (SILVER_QUORUM_SNAPSHOTS, "collected_at"),
        (SILVER_REPLICA_STATES, "collected_at"),
        (SILVER_PARTITION_STATES, "collected_at"),
        (SILVER_NODE_METRICS, "scraped_at"),
    ):
        if spec.name in changed:
            times.append(changed[spec.name].select("cluster_id", F.col(column).alias("at")))
    if not times:
        return
    union = times[0]
    for frame in times[1:]:
        union = union.unionByName(frame)
    # a scrape pairs with the active controller's within the tolerance: a change reaches back that far
    tolerance = F.expr(f"INTERVAL {config.divergence_tolerance_ms / 1000} SECONDS")
    earliest = union.groupBy("cluster_id").agg((F.min("at") - tolerance).alias("from_at"))
    grace = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(config.incident_grace_minutes))
    held = lakehouse.read(GOLD_INCIDENTS).select("cluster_id", "started_at", "ended_at")
    covering = (
        held.join(earliest, "cluster_id")
        .where(F.col("ended_at").isNull() | (F.col("ended_at") + grace >= F.col("from_at")))
        .groupBy("cluster_id")
        .agg(F.min("started_at").alias("_covering"))
    )
    # a row per cluster, kept as literal rows: the sources' reads below join it, and would otherwise each carry the
    # whole lineage of the round's changes in their plans
    scope = literal(
        earliest.join(covering, "cluster_id", "left").select(
            "cluster_id", F.least("from_at", F.coalesce("_covering", "from_at")).alias("from_at")
        )
    )
    bounds = Bounds.of(scope, "from_at")
    if bounds is None:
        return

    def read(spec, column, *cols):
        frame = lakehouse.read(spec).where(bounds.since(column).sql())
        if cols:
            frame = frame.select(*cols)
        return _since(frame, column, scope)

    partitions = read(SILVER_PARTITION_STATES, "collected_at")
    replicas = read(SILVER_REPLICA_STATES, "collected_at")
    metrics = read(SILVER_NODE_METRICS, "scraped_at").where(F.col("metric").isin(*INCIDENT_METRICS))
    status = read(GOLD_QUORUM_STATUS, "collected_at")
    events = read(GOLD_QUORUM_EVENTS, "event_at").where(F.col("event") == "leader_elected")
    divergence = read(GOLD_METADATA_OFFSET_DIVERGENCE, "scraped_at")
    isr = read(GOLD_ISR_HEALTH, "collected_at")
    episodes = build_episodes(
        partitions=partitions,
        replicas=replicas,
        metrics=metrics,
        status=status,
        events=events,
        divergence=divergence,
        fetch_timeout_ms=config.quorum_fetch_timeout_ms,
        slo_ms=config.replica_caught_up_slo_ms,
        warn_records=config.divergence_warn_records,
        lag_warn_ms=config.metadata_lag_warn_ms,
    )
    grouped = group_episodes(episodes, config.incident_grace_minutes).transform(cached)
    latest = (
        status.select("cluster_id", F.col("collected_at").alias("at"))
        .unionByName(isr.select("cluster_id", F.col("collected_at").alias("at")))
        .unionByName(divergence.select("cluster_id", F.col("scraped_at").alias("at")))
        .groupBy("cluster_id")
        .agg(F.max("at").alias("latest_at"))
    )
    lakehouse.replace_scope(
        GOLD_INCIDENTS, build_incidents(grouped, isr, latest), scope, _from("started_at"), bounds.since("started_at")
    )
    lakehouse.replace_scope(
        GOLD_INCIDENT_EVENTS, build_incident_events(grouped), scope, _from("event_at"), bounds.since("event_at")
    )
    release(grouped)
