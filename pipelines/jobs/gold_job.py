"""Gold: silver changes -> affected keys -> bounded recompute -> MERGE.

The rows each silver table changed since gold last ran (Delta versions after the ones recorded for gold in
`bronze.pipeline_runs`) are read through its change data feed. The changed rows name the affected keys; only those
are recomputed, from bounded reads of silver (plus, where a rule looks back in time, the gold row just before the
affected range), and MERGEd so that rows whose values did not change are not rewritten. A late file therefore
re-opens exactly the windows and episodes it touches.

- quorum snapshots and replica states (their keys together, computed once) -> gold.quorum_status from the earliest
  affected snapshot of each cluster on, then gold.quorum_health for the windows from there on; replica states also
  -> gold.replica_lag_sli per window;
- partition states -> gold.isr_health and gold.isr_health_by_topic per snapshot, gold.at_min_isr_episodes per
  partition from the start of the episode the earliest change falls in;
- node metrics -> gold.metadata_offset_divergence for the scrapes within the pairing tolerance of the changes, and
  gold.controller_health for the node windows the changes fall in;
- replica states -> gold.quorum_membership and its events, quorum snapshots -> the leader_elected events of
  gold.quorum_events, and any change -> gold.incidents and gold.incident_events (`incidents_job`: membership before
  the replica lag SLI, which marks removed voters from it; incidents after them, from the other gold tables);
- then all of them -> gold.slo_burn, gold.slo_budget and gold.cluster_cohorts for the windows and days they touch
  (`slo_job`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import (
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_BROKER_REGISTRATIONS,
    GOLD_CLUSTER_COHORTS,
    GOLD_CONTROLLER_HEALTH,
    GOLD_DIM_CLUSTER,
    GOLD_DIM_DATE,
    GOLD_DIM_NODE,
    GOLD_DIMENSIONS,
    GOLD_ISR_HEALTH,
    GOLD_ISR_HEALTH_BY_TOPIC,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_HEALTH,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_QUORUM_STATUS,
    GOLD_REPLICA_LAG_SLI,
    GOLD_TABLES,
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
)
from quorumlake.gold import brokers
from quorumlake.gold.controller import build_controller_health
from quorumlake.gold.dims import build_dim_cluster, build_dim_date, build_dim_node
from quorumlake.gold.divergence import divergence_of_scrapes, divergence_scope, node_scrapes
from quorumlake.gold.isr import (
    build_at_min_isr_episodes,
    build_isr_health,
    build_isr_health_by_topic,
    earlier_starts,
    episode_scope,
)
from quorumlake.gold.keys import constraint_statements
from quorumlake.gold.membership import mark_removed_voters
from quorumlake.gold.metric_views import metric_view_statements
from quorumlake.gold.quorum import (
    build_quorum_health,
    build_quorum_status,
    seed_before,
    window_start,
    with_voters_within_slo,
)
from quorumlake.gold.replicas import build_replica_lag_sli
from quorumlake.gold.views import view_statements
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.session import cached, release
from quorumlake.pipelines.jobs import incidents_job
from quorumlake.pipelines.jobs.faults import reached
from quorumlake.pipelines.jobs.slo_job import slo_step
from quorumlake.pipelines.progress import Progress
from quorumlake.pipelines.storage import Bounds, Lakehouse

CONSUMER = "gold"
SOURCES = (SILVER_QUORUM_SNAPSHOTS, SILVER_REPLICA_STATES, SILVER_PARTITION_STATES, SILVER_NODE_METRICS)
# The columns of a silver table's changed rows that a round's steps read: the keys and times that scope each step's
# recompute (the rows themselves are read again from silver, bounded), and what the dimensions summarise. A round keeps
# the changed rows with these columns only: a backfill's changes are all of silver, and its full rows (every label
# and measure) crowd the driver's heap for the whole round.
CHANGED_COLUMNS = {
    SILVER_QUORUM_SNAPSHOTS.name: ("cluster_id", "collected_at", "kafka_cluster_id", "api_version", "voter_count"),
    SILVER_REPLICA_STATES.name: ("cluster_id", "collected_at", "replica_id", "is_voter"),
    SILVER_PARTITION_STATES.name: ("cluster_id", "topic", "partition", "collected_at"),
    SILVER_NODE_METRICS.name: ("cluster_id", "node_id", "scraped_at", "metric", "node_role"),
}


def run_gold(lakehouse: Lakehouse, progress: Progress) -> dict[str, int]:
    """Recompute what the silver changes since gold last ran affect; returns rows written per gold table. A backlog
    (a backfill) is taken in rounds of at most `batch_bytes` of each silver table's changes, progress recorded after
    each: every round recomputes what its changes affect from silver as it is, so the rounds end in the same tables
    as one batch would, with memory bounded by a round."""
    config = lakehouse.config
    done = lakehouse.progress(CONSUMER)
    plans = {}
    for spec in SOURCES:
        after, upto = done.get(spec.name, -1), lakehouse.version(spec)
        if upto != after:
            plans[spec.name] = lakehouse.version_ranges(spec, after, upto)
    versions = dict(done)
    written = {spec.name: 0 for spec in (*GOLD_TABLES, *GOLD_DIMENSIONS)}
    rounds = max((len(ranges) for ranges in plans.values()), default=0)
    for i in range(rounds):
        ranges = {name: plan[i] for name, plan in plans.items() if i < len(plan)}
        for name, rows in _round(lakehouse, ranges, progress).items():
            written[name] += rows
        versions.update({name: hi for name, (_lo, hi) in ranges.items()})
        if i < rounds - 1:  # a backlog: what this round did is kept before the next one starts
            lakehouse.save_progress(CONSUMER, versions)
            done = dict(versions)
            reached("gold:round")
    if versions != done:
        lakehouse.save_progress(CONSUMER, versions, hold=True)  # the run writes the ledger once, when it ends
    if config.catalog:
        # Unity Catalog keeps the views between runs: each gold run publishes them with its own settings (the
        # bundle's stale_after_minutes, ...), and the metric views over them; and adds the star schema's keys a table
        # does not have yet
        create_views(lakehouse)
        added = _add_keys(lakehouse)
        progress(f"gold: views and metric views published; {added} key constraints added")
    return written


def _add_keys(lakehouse: Lakehouse) -> int:
    """Add the informational primary and foreign keys of quorumlake.gold.keys that gold's tables lack (Unity
    Catalog only); returns how many statements ran."""
    catalog, schema = lakehouse.catalog.schema_name("gold").split(".", 1)
    existing = {
        r["constraint_name"]
        for r in lakehouse.reads.query(
            f"SELECT constraint_name FROM `{catalog}`.information_schema.table_constraints "
            f"WHERE table_schema = '{schema}'"
        ).collect()
    }
    statements = constraint_statements(lakehouse.name_of, existing)
    for statement in statements:
        lakehouse.reads.query(statement).collect()
    return len(statements)


def _dimensions(lakehouse: Lakehouse, changed: dict[str, DataFrame]) -> None:
    """Merge what silver's changes say about clusters, nodes and days into gold's dimensions (quorumlake.gold.dims):
    the dimension rows of the keys the changes touch are rebuilt from the changes and those rows themselves."""
    snapshots, replicas = changed.get(SILVER_QUORUM_SNAPSHOTS.name), changed.get(SILVER_REPLICA_STATES.name)
    partitions, metrics = changed.get(SILVER_PARTITION_STATES.name), changed.get(SILVER_NODE_METRICS.name)
    clusters = [b.select("cluster_id") for b in (snapshots, partitions, metrics) if b is not None]
    if clusters:
        keys = _union(clusters).distinct()
        existing = lakehouse.read(GOLD_DIM_CLUSTER).join(keys, "cluster_id", "left_semi")
        cohorts = lakehouse.read(GOLD_CLUSTER_COHORTS).join(keys, "cluster_id", "left_semi")
        rows = build_dim_cluster(snapshots, partitions, metrics, existing, cohorts)
        lakehouse.replace_groups(GOLD_DIM_CLUSTER, rows, keys)
    nodes = [
        b.select("cluster_id", F.col(c).alias("node_id"))
        for b, c in ((replicas, "replica_id"), (metrics, "node_id"))
        if b is not None
    ]
    if nodes:
        keys = _union(nodes).where(F.col("node_id").isNotNull()).distinct()
        existing = lakehouse.read(GOLD_DIM_NODE).join(keys, ["cluster_id", "node_id"], "left_semi")
        lakehouse.replace_groups(GOLD_DIM_NODE, build_dim_node(replicas, metrics, existing), keys)
    times = [
        b.select(F.to_date(c).alias("date"))
        for b, c in (
            (snapshots, "collected_at"),
            (replicas, "collected_at"),
            (partitions, "collected_at"),
            (metrics, "scraped_at"),
        )
        if b is not None
    ]
    held = lakehouse.read(GOLD_DIM_DATE).agg(F.min("date").alias("lo"), F.max("date").alias("hi"))
    days = _union([*times, held.select(F.col("lo").alias("date")), held.select(F.col("hi").alias("date"))])
    lakehouse.insert_new(GOLD_DIM_DATE, build_dim_date(days.where(F.col("date").isNotNull())))


def _round(lakehouse: Lakehouse, ranges: dict[str, tuple[int, int]], progress: Progress) -> dict[str, int]:
    """Gold for the silver changes in the given version ranges (lo, hi] per silver table; rows written per table."""
    changed: dict[str, DataFrame] = {}
    for spec in SOURCES:
        if spec.name in ranges:
            lo, hi = ranges[spec.name]
            batch = lakehouse.changes(spec, lo, hi).where(F.col("_change_type") != "update_preimage")
            if lakehouse.changes_hold_rows(spec, lo, hi, batch):  # silver's appends: its log says, no query
                # only a batch with rows is kept, and only the columns the steps read from it
                changed[spec.name] = cached(batch.select(*CHANGED_COLUMNS[spec.name]))
    written = {spec.name: 0 for spec in (*GOLD_TABLES, *GOLD_DIMENSIONS)}
    if changed:
        versions_before = {spec.name: lakehouse.version(spec) for spec in (*GOLD_TABLES, *GOLD_DIMENSIONS)}
        snapshots, replicas = changed.get(SILVER_QUORUM_SNAPSHOTS.name), changed.get(SILVER_REPLICA_STATES.name)
        steps = []
        if snapshots is not None or replicas is not None:
            keys = [b.select("cluster_id", "collected_at") for b in (snapshots, replicas) if b is not None]
            steps.append(("quorum status and health", lambda: _quorum(lakehouse, _union(keys).distinct())))
        if snapshots is not None:
            steps.append(("leader elections", lambda: incidents_job.leader_events(lakehouse, _keys(snapshots, *KEY))))
        if replicas is not None:
            steps.append(("quorum membership", lambda: incidents_job.membership(lakehouse, _keys(replicas, *KEY))))
            steps.append(("replica lag SLI", lambda: _replicas(lakehouse, replicas)))
        if SILVER_PARTITION_STATES.name in changed:
            steps.append(
                ("ISR health and AtMinIsr episodes", lambda: _isr(lakehouse, changed[SILVER_PARTITION_STATES.name]))
            )
        if SILVER_NODE_METRICS.name in changed:
            metrics = changed[SILVER_NODE_METRICS.name]
            steps.append(("metadata offset divergence", lambda: _divergence(lakehouse, metrics)))
            steps.append(("controller health", lambda: _controller_health(lakehouse, metrics)))
            steps.append(("broker registrations", lambda: _broker_registrations(lakehouse, metrics)))
        # after the steps whose gold rows it reads
        steps.append(("incidents", lambda: incidents_job.incidents(lakehouse, changed)))
        # last: it counts the SLOs' events in the gold rows the steps above wrote
        quorum_keys = _union(keys).distinct() if snapshots is not None or replicas is not None else None
        steps.append(
            (
                "SLO budgets, burn rates and cohorts",
                lambda: slo_step(
                    lakehouse,
                    quorum_keys,
                    changed.get(SILVER_PARTITION_STATES.name),
                    changed.get(SILVER_NODE_METRICS.name),
                ),
            )
        )
        # after the SLO step: the cluster dimension takes its version and quorum mode from gold.cluster_cohorts
        steps.append(("dimensions", lambda: _dimensions(lakehouse, changed)))
        for what, step in steps:
            started = time.monotonic()
            step()
            progress(f"gold: {what} in {time.monotonic() - started:.1f}s")
            reached(f"gold:{what}")
        written = {
            spec.name: _rows_written_since(lakehouse, spec, versions_before[spec.name])
            for spec in (*GOLD_TABLES, *GOLD_DIMENSIONS)
        }
    for batch in changed.values():
        release(batch)
    return written


KEY = ("cluster_id", "collected_at")


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def create_views(lakehouse: Lakehouse) -> None:
    """(Re)create the gold views; cheap, so done at every start (the local catalog lives in the process), and by
    every gold run on Unity Catalog, where they (and the metric views) are the catalog's own objects."""
    lakehouse.catalog.define_views(gold_view_statements(lakehouse.config, lakehouse.name_of))


def gold_view_statements(config: Config, name_of: Callable[[str], str]) -> list[str]:
    """The statements that (re)create gold's views with this configuration's settings; on Unity Catalog (a catalog
    is set: Databricks) the metric views too, which open-source Spark cannot create."""
    settings = {
        "divergence_warn_records": config.divergence_warn_records,
        "metadata_lag_warn_ms": config.metadata_lag_warn_ms,
        "stale_after_minutes": config.stale_after_minutes,
        "window_minutes": config.window_minutes,
        "min_isr_rule": config.min_isr_rule,
    }
    statements = view_statements(name_of, settings)
    if config.catalog:
        statements += metric_view_statements(name_of)
    return statements


def _keys(batch: DataFrame, *cols: str) -> DataFrame:
    return batch.select(*cols).distinct()


# --- quorum ----------------------------------------------------------------------------------------------------------


def _quorum(lakehouse: Lakehouse, snapshot_keys: DataFrame) -> None:
    """Recompute gold.quorum_status from each affected cluster's earliest changed snapshot on, then its windows."""
    config = lakehouse.config
    starts = snapshot_keys.groupBy("cluster_id").agg(F.min("collected_at").alias("from_at")).transform(cached)
    # every row in scope is at or after its cluster's from_at: the bounds let Delta skip older files
    since = Bounds.of(starts, "from_at")
    if since is None:
        release(starts)
        return
    since = since.since("collected_at")
    snapshots = (
        lakehouse.read(SILVER_QUORUM_SNAPSHOTS)
        .where(since.sql())
        .join(starts, "cluster_id")
        .where(F.col("collected_at") >= F.col("from_at"))
        .drop("from_at")
    )
    replicas = (
        lakehouse.read(SILVER_REPLICA_STATES)
        .where(since.sql())
        .join(starts, "cluster_id")
        .where(F.col("collected_at") >= F.col("from_at"))
        .drop("from_at")
    )
    seed = _seed(lakehouse, starts, since)
    status = build_quorum_status(
        snapshots,
        replicas,
        seed,
        slo_ms=config.quorum_lag_time_slo_ms,
        window_minutes=config.window_minutes,
        stall_ms=config.high_watermark_stall_ms,
        fetch_timeout_ms=config.quorum_fetch_timeout_ms,
        offset_lag_slo=config.quorum_offset_lag_slo,
    )
    # voters_within_slo uses the replica SLO; the quorum snapshot SLO is on MaxFollowerLagTimeMs
    if config.replica_caught_up_slo_ms != config.quorum_lag_time_slo_ms:
        status = with_voters_within_slo(status, replicas, config.replica_caught_up_slo_ms)
    lakehouse.replace_scope(GOLD_QUORUM_STATUS, status, starts, _from_time("collected_at"), since)

    window_starts = starts.select("cluster_id", window_start(F.col("from_at"), config.window_minutes).alias("from_at"))
    window_us = config.window_minutes * 60_000_000
    window_bounds = Bounds("window_start", since.lo_us - since.lo_us % window_us, None, since.clusters)
    in_windows = (
        lakehouse.read(GOLD_QUORUM_STATUS)
        .where(window_bounds.sql())
        .join(window_starts, "cluster_id")
        .where(F.col("window_start") >= F.col("from_at"))
        .drop("from_at")
    )
    health = build_quorum_health(in_windows, config.window_minutes)
    lakehouse.replace_scope(GOLD_QUORUM_HEALTH, health, window_starts, _from_time("window_start"), window_bounds)
    release(starts)


# How far back the previous gold row of a cluster is looked for first; clusters without one there are looked up
# over the whole table (only they pay for it).
SEED_LOOKBACK_US = 6 * 3600 * 1_000_000


def _seed(lakehouse: Lakehouse, starts: DataFrame, since: Bounds) -> DataFrame:
    """The gold.quorum_status rows that the look-back rules (leader changes, stalls) need before each start."""
    status = lakehouse.read(GOLD_QUORUM_STATUS)
    recent = seed_before(
        status.where(Bounds("collected_at", since.lo_us - SEED_LOOKBACK_US, None, since.clusters).sql()), starts
    ).transform(cached)
    complete = {
        r["cluster_id"]
        for r in recent.groupBy("cluster_id")
        .agg(F.count_if(F.col("high_watermark").isNotNull()).alias("known"))
        .where("known > 0")
        .collect()
    }
    missing = [c for c in (since.clusters or ()) if c not in complete]
    if since.clusters is None or missing:
        rest = starts if since.clusters is None else starts.where(F.col("cluster_id").isin(missing))
        older = seed_before(status, rest)
        if since.clusters is not None:
            recent = recent.where(~F.col("cluster_id").isin(missing))
        return recent.unionByName(older)
    return recent


def _from_time(column: str):
    def match(target: DataFrame, scope: DataFrame):
        return (target["cluster_id"] == scope["cluster_id"]) & (target[column] >= scope["from_at"])

    return match


def _replicas(lakehouse: Lakehouse, batch: DataFrame) -> None:
    config = lakehouse.config
    windows = (
        batch.select("cluster_id", window_start(F.col("collected_at"), config.window_minutes).alias("window_start"))
        .distinct()
        .transform(cached)
    )
    bounds = Bounds.of(windows, "window_start")
    rows = (
        lakehouse.read(SILVER_REPLICA_STATES)
        .where(bounds.on("collected_at").widened(after_us=config.window_minutes * 60_000_000).sql())
        .withColumn("window_start", window_start(F.col("collected_at"), config.window_minutes))
        .join(windows, ["cluster_id", "window_start"], "left_semi")
        .drop("window_start")
    )
    # observer rows of a removed voter that Kafka still lists are marked from the membership ledger
    stretches = lakehouse.read(GOLD_QUORUM_MEMBERSHIP).where(Bounds("valid_from", clusters=bounds.clusters).sql())
    rows = mark_removed_voters(rows, stretches)
    sli = build_replica_lag_sli(rows, slo_ms=config.replica_caught_up_slo_ms, window_minutes=config.window_minutes)
    lakehouse.replace_groups(GOLD_REPLICA_LAG_SLI, sli, windows, bounds)
    release(windows)


# --- partitions ------------------------------------------------------------------------------------------------------


def _isr(lakehouse: Lakehouse, batch: DataFrame) -> None:
    config = lakehouse.config
    snapshots = _keys(batch, "cluster_id", "collected_at").transform(cached)
    snapshot_bounds = Bounds.of(snapshots, "collected_at")
    states = lakehouse.read(SILVER_PARTITION_STATES)
    in_snapshots = states.where(snapshot_bounds.sql()).join(snapshots, ["cluster_id", "collected_at"], "left_semi")
    lakehouse.replace_groups(GOLD_ISR_HEALTH, build_isr_health(in_snapshots), snapshots, snapshot_bounds)
    lakehouse.replace_groups(
        GOLD_ISR_HEALTH_BY_TOPIC, build_isr_health_by_topic(in_snapshots), snapshots, snapshot_bounds
    )
    release(snapshots)

    # Episodes: each affected partition from the start of the episode its earliest change falls in
    key = ["cluster_id", "topic", "partition"]
    episodes = lakehouse.read(GOLD_AT_MIN_ISR_EPISODES)
    starts = episode_scope(batch, episodes).transform(cached)
    since = Bounds.of(starts, "from_at").since("collected_at")
    history = (
        states.where(since.sql()).join(starts, key).where(F.col("collected_at") >= F.col("from_at")).drop("from_at")
    )
    earlier = earlier_starts(episodes, starts, config.flap_window_minutes)
    built = build_at_min_isr_episodes(history, earlier, config.flap_window_minutes, config.min_isr_rule)

    def match(target: DataFrame, scope: DataFrame):
        return (
            (target["cluster_id"] == scope["cluster_id"])
            & (target["topic"] == scope["topic"])
            & (target["partition"] == scope["partition"])
            & (target["started_at"] >= scope["from_at"])
        )

    lakehouse.replace_scope(GOLD_AT_MIN_ISR_EPISODES, built, starts, match, since.since("started_at"))
    release(starts)


# --- metrics ---------------------------------------------------------------------------------------------------------


def _divergence(lakehouse: Lakehouse, batch: DataFrame) -> None:
    tolerance = lakehouse.config.divergence_tolerance_ms
    tol = F.expr(f"INTERVAL {tolerance / 1000} SECONDS")
    ranges = divergence_scope(batch, tolerance).transform(cached)
    bounds = Bounds.of(ranges, "hi", lo_column="lo").on("scraped_at")
    metrics = (
        lakehouse.read(SILVER_NODE_METRICS)
        .where(bounds.widened(tolerance * 1000, tolerance * 1000).sql())
        .join(ranges, "cluster_id")
        .where(F.col("scraped_at").between(F.col("lo") - tol, F.col("hi") + tol))
        .drop("lo", "hi")
    )
    scrapes = node_scrapes(metrics).transform(cached)  # a few rows per scrape, read three times
    rows = (
        divergence_of_scrapes(scrapes, tolerance)
        .join(ranges, "cluster_id")
        .where(F.col("scraped_at").between(F.col("lo"), F.col("hi")))
        .drop("lo", "hi")
    )

    def match(target: DataFrame, scope: DataFrame):
        return (target["cluster_id"] == scope["cluster_id"]) & target["scraped_at"].between(scope["lo"], scope["hi"])

    lakehouse.replace_scope(GOLD_METADATA_OFFSET_DIVERGENCE, rows, ranges, match, bounds)
    release(scrapes)
    release(ranges)


def _controller_health(lakehouse: Lakehouse, batch: DataFrame) -> None:
    """Recompute gold.controller_health for every node window a change of silver.node_metrics falls in."""
    minutes = lakehouse.config.window_minutes
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(minutes))
    width_us = minutes * 60_000_000
    key = ["cluster_id", "node_id", "window_start"]
    touched = batch.select(
        "cluster_id", "node_id", window_start(F.col("scraped_at"), minutes).alias("window_start")
    ).distinct()
    # a counter's increase reaches back to the node's scrape in the window before: a change also changes the next
    # window's row, and each window's row is built with the window before it read too
    windows = (
        touched.unionByName(touched.withColumn("window_start", F.col("window_start") + width))
        .distinct()
        .transform(cached)
    )
    bounds = Bounds.of(windows, "window_start")
    read = windows.unionByName(windows.withColumn("window_start", F.col("window_start") - width)).distinct()
    rows = (
        lakehouse.read(SILVER_NODE_METRICS)
        .where(bounds.on("scraped_at").widened(before_us=width_us, after_us=width_us).sql())
        .withColumn("window_start", window_start(F.col("scraped_at"), minutes))
        .join(read, key, "left_semi")
        .drop("window_start")
    )
    health = build_controller_health(rows, minutes).join(windows, key, "left_semi")
    lakehouse.replace_groups(GOLD_CONTROLLER_HEALTH, health, windows, bounds)
    release(windows)


def _broker_registrations(lakehouse: Lakehouse, batch: DataFrame) -> None:
    """Recompute gold.broker_registrations of each cluster from the window of its earliest changed registration
    scrape on (a fenced stretch runs on across windows), seeded with each broker's row before that window."""
    minutes = lakehouse.config.window_minutes
    changed = batch.where(F.col("metric").isin(*brokers.METRICS))
    starts = (
        changed.groupBy("cluster_id").agg(window_start(F.min("scraped_at"), minutes).alias("from_at")).transform(cached)
    )
    since = Bounds.of(starts, "from_at")
    if since is None:
        release(starts)
        return
    metrics = (
        lakehouse.read(SILVER_NODE_METRICS)
        .where(since.since("scraped_at").sql())
        .where(F.col("metric").isin(*brokers.METRICS))
        .join(starts, "cluster_id")
        .where(F.col("scraped_at") >= F.col("from_at"))
        .drop("from_at")
    )
    lookback = Bounds("window_start", since.lo_us - brokers.SEED_LOOKBACK_US, None, since.clusters)
    seed = brokers.seed_before(lakehouse.read(GOLD_BROKER_REGISTRATIONS).where(lookback.sql()), starts)
    rows = brokers.build_broker_registrations(metrics, seed, minutes)
    window_bounds = since.since("window_start")
    lakehouse.replace_scope(GOLD_BROKER_REGISTRATIONS, rows, starts, _from_time("window_start"), window_bounds)
    release(starts)


# --- bookkeeping -----------------------------------------------------------------------------------------------------


def _rows_written_since(lakehouse: Lakehouse, spec, version: int) -> int:
    total = 0
    for metrics in lakehouse.log.last_commit_metrics(spec, version):
        # a MERGE's inserted and updated rows, or an append's rows (a table's first write)
        total += int(metrics.get("numTargetRowsInserted", 0)) + int(metrics.get("numTargetRowsUpdated", 0))
        total += int(metrics.get("numOutputRows", 0)) if "numTargetRowsInserted" not in metrics else 0
    return total
