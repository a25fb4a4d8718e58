"""The anomalies incidents are made of (`gold/incidents.py`), one small function per source.

Each source function returns *observations*: the times at which the source looked (`times`: cluster_id, at, and
node_id where each node has its own series, such as a node's scrapes) and the anomalous ones among them
(`ANOMALY_COLUMNS`: the series key kind, node_id, topic, partition; the time; a value; a description). An *episode*
(`episodes`) is a run of a series' anomalous observations with no clear observation of its source between them; it
ends at the source's first observation after the run that does not show it (`ended_at`, NULL while it lasts). A
single event (an election) is an episode that starts and ends at its time.

Kinds and sources:
- `broker_down`: silver.partition_states. A broker that is a replica of some partition, in the ISR of no partition
  that has a leader, and the leader of none: the cluster has dropped it from every ISR (a stopped or cut-off
  broker). A broker that hosts no partition is not seen.
- `broker_fenced`: silver.node_metrics, the active controller's `controller_fenced_broker_count` above 0 (the count
  names no broker: node_id NULL).
- `controller_down`: silver.replica_states. A voter, not the leader, that has not fetched from the leader for longer
  than `quorum_fetch_timeout_ms`, or never since the leader was elected (its fetch time unknown while the snapshot
  carries the fetch times of other replicas; DescribeQuorum v0 carries none).
- `voter_lagging`: a voter that is fetching but whose caught-up lag is above the replica SLO.
- `leader_election`: gold.quorum_events `leader_elected` (single events, node_id the new leader), and runs of quorum
  snapshots without a leader (node_id NULL; these make an incident critical).
- `hw_stalled`: gold.quorum_status `hw_stalled`.
- `partitions_at_min_isr`, `partitions_under_min_isr`, `partitions_offline`: silver.partition_states, per partition
  by its status (the worst that holds), so a partition that escalates moves from one kind to the next.
- `metadata_divergence`: gold.metadata_offset_divergence, a node more than `divergence_warn_records` behind the
  active controller or with a last-applied lag above `metadata_lag_warn_ms`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorumlake.gold.islands import consecutive_runs

# What each anomalous observation carries; `value` is the kind's measure (ms, records), 1.0 for a yes/no kind.
ANOMALY_COLUMNS = ("cluster_id", "kind", "node_id", "topic", "partition", "at", "value", "detail")
SERIES = ["cluster_id", "kind", "node_id", "topic", "partition"]
EPISODE_COLUMNS = (
    "cluster_id",
    "kind",
    "node_id",
    "topic",
    "partition",
    "event_at",
    "ended_at",
    "observations",
    "peak",
    "detail",
    "critical",
)
# Order of kinds at the same time: what failed before what it caused (the trigger of an incident is its first).
KIND_ORDER = (
    "broker_down",
    "controller_down",
    "broker_fenced",
    "leader_election",
    "voter_lagging",
    "hw_stalled",
    "metadata_divergence",
    "partitions_offline",
    "partitions_under_min_isr",
    "partitions_at_min_isr",
)
CRITICAL_KINDS = ("partitions_offline", "partitions_under_min_isr")


def _anomalies(df: DataFrame, kind: str, node: Column, value: Column, detail: Column, topic=None, partition=None):
    return df.select(
        "cluster_id",
        F.lit(kind).alias("kind"),
        node.cast("int").alias("node_id"),
        (topic if topic is not None else F.lit(None)).cast("string").alias("topic"),
        (partition if partition is not None else F.lit(None)).cast("int").alias("partition"),
        "at",
        value.cast("double").alias("value"),
        detail.alias("detail"),
    )


def _text(*parts) -> Column:
    return F.concat(*(p if isinstance(p, Column) else F.lit(p) for p in parts))


def _n(column: str) -> Column:
    return F.col(column).cast("bigint").cast("string")


# --- sources -----------------------------------------------------------------------------------------------------


def broker_down(partitions: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From silver.partition_states rows (cluster_id, collected_at, leader_id, replicas, isr)."""
    rows = partitions.withColumnRenamed("collected_at", "at")
    times = rows.select("cluster_id", "at").distinct()
    none = F.array().cast("array<int>")
    in_sync = F.when(F.col("leader_id").isNotNull(), F.array_union("isr", F.array("leader_id")))
    # each node a partition names (a replica, in its ISR or its leader), once per partition; then per node and
    # snapshot: how many partitions it is a replica of, and whether it is in sync in any that has a leader
    named = rows.select(
        "cluster_id",
        "at",
        F.coalesce("replicas", none).alias("_replicas"),
        F.coalesce(in_sync, none).alias("_in_sync"),
    ).select("*", F.explode(F.array_union("_replicas", "_in_sync")).alias("node_id"))
    nodes = named.groupBy("cluster_id", "at", "node_id").agg(
        F.sum(F.size(F.filter("_replicas", lambda r: r == F.col("node_id")))).alias("_hosted"),
        # an ISR that lists a NULL makes array_contains NULL for the nodes it lacks: not in sync there
        F.bool_or(F.coalesce(F.array_contains("_in_sync", F.col("node_id")), F.lit(False))).alias("_synced"),
    )
    down = nodes.where((F.col("_hosted") > 0) & ~F.col("_synced"))
    detail = _text("broker ", _n("node_id"), " in no ISR (replica of ", _n("_hosted"), " partitions)")
    return times, _anomalies(down, "broker_down", F.col("node_id"), F.lit(1.0), detail)


def broker_fenced(metrics: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From silver.node_metrics rows: the active controller's FencedBrokerCount at each of its scrapes."""
    metric, value = F.col("metric"), F.col("value")
    scrapes = (
        metrics.where(F.col("cluster_id").isNotNull() & F.col("node_id").isNotNull() & F.col("scraped_at").isNotNull())
        .groupBy("cluster_id", "node_id", "scraped_at")
        .agg(
            F.bool_or((metric == "controller_active_controller_count") & (value == 1)).alias("_active"),
            F.count_if(metric == "controller_fenced_broker_count").alias("_reported"),
            F.max(F.when(metric == "controller_fenced_broker_count", value)).alias("_fenced"),
        )
    )
    fenced = (
        scrapes.where(F.coalesce("_active", F.lit(False)) & (F.col("_reported") > 0))
        .groupBy("cluster_id", F.col("scraped_at").alias("at"))
        .agg(F.max("_fenced").alias("fenced"))
    )
    times = fenced.select("cluster_id", "at")
    anomalous = fenced.where(F.col("fenced") > 0)
    detail = _text(_n("fenced"), " fenced broker(s) reported by the active controller")
    return times, _anomalies(anomalous, "broker_fenced", F.lit(None), F.col("fenced"), detail)


def _voters(replicas: DataFrame, fetch_timeout_ms: int, slo_ms: int) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(snapshot times, voters down, voters lagging) of silver.replica_states rows (cluster_id, collected_at,
    replica_id, is_voter, role, fetch_age_ms, caught_up_lag_ms). A voter whose fetch time is unknown is down only
    when the snapshot carries the fetch times of other replicas (`_timed`), which DescribeQuorum v0 and the 3.3-3.5
    CLI do not."""
    rows = replicas.withColumnRenamed("collected_at", "at")
    follower = F.col("role") != "leader"
    # one row per snapshot: its time, and whether any replica other than the leader has a fetch time
    times = rows.groupBy("cluster_id", "at").agg(
        F.coalesce(F.bool_or(follower & F.col("fetch_age_ms").isNotNull()), F.lit(False)).alias("_timed")
    )
    voters = rows.where(follower & F.col("is_voter"))
    fetch = F.col("fetch_age_ms")
    down = (
        voters.where(fetch.isNull() | (fetch > fetch_timeout_ms))
        .join(times, ["cluster_id", "at"])
        .where((fetch.isNull() & F.col("_timed")) | (fetch > fetch_timeout_ms))
    )
    lagging = voters.where((fetch <= fetch_timeout_ms) & (F.col("caught_up_lag_ms") > slo_ms))
    return times.select("cluster_id", "at"), down, lagging


def _controllers_down(down: DataFrame) -> DataFrame:
    detail = F.when(
        F.col("fetch_age_ms").isNull(), _text("voter ", _n("replica_id"), " has not fetched since the election")
    ).otherwise(_text("voter ", _n("replica_id"), " last fetched ", _n("fetch_age_ms"), " ms before"))
    return _anomalies(down, "controller_down", F.col("replica_id"), F.col("fetch_age_ms"), detail)


def _voters_lagging(lagging: DataFrame) -> DataFrame:
    detail = _text("voter ", _n("replica_id"), " caught up ", _n("caught_up_lag_ms"), " ms before")
    return _anomalies(lagging, "voter_lagging", F.col("replica_id"), F.col("caught_up_lag_ms"), detail)


def controller_down(replicas: DataFrame, fetch_timeout_ms: int) -> tuple[DataFrame, DataFrame]:
    """From silver.replica_states rows (cluster_id, collected_at, replica_id, is_voter, role, fetch_age_ms): a voter,
    not the leader, that has not fetched for longer than the fetch timeout, or never since the election."""
    times, down, _ = _voters(replicas, fetch_timeout_ms, 0)
    return times, _controllers_down(down)


def voter_lagging(replicas: DataFrame, fetch_timeout_ms: int, slo_ms: int) -> tuple[DataFrame, DataFrame]:
    """A voter fetching (within the fetch timeout) whose caught-up lag is above the SLO."""
    times, _, lagging = _voters(replicas, fetch_timeout_ms, slo_ms)
    return times, _voters_lagging(lagging)


def leaderless(status: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From gold.quorum_status rows: good responses (error_code 0) without a leader."""
    rows = status.where(F.col("error_code") == 0).withColumnRenamed("collected_at", "at")
    times = rows.select("cluster_id", "at")
    none = rows.where(F.col("leader_id").isNull())
    return times, _anomalies(none, "leader_election", F.lit(None), F.lit(1.0), F.lit("no quorum leader"))


def elections(events: DataFrame) -> DataFrame:
    """Single-event episodes from gold.quorum_events `leader_elected` rows."""
    elected = events.where(F.col("event") == "leader_elected").withColumnRenamed("event_at", "at")
    return _single(_anomalies(elected, "leader_election", F.col("node_id"), F.col("leader_epoch"), F.col("detail")))


def hw_stalled(status: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From gold.quorum_status rows with a known high watermark."""
    rows = status.where(F.col("high_watermark").isNotNull()).withColumnRenamed("collected_at", "at")
    times = rows.select("cluster_id", "at")
    stalled = rows.where(F.col("hw_stalled")).withColumn(
        "_ms", F.unix_millis("at") - F.unix_millis("hw_last_increase_at")
    )
    detail = _text("high watermark ", _n("high_watermark"), " not advanced for ", _n("_ms"), " ms")
    return times, _anomalies(stalled, "hw_stalled", F.lit(None), F.col("_ms"), detail)


def partition_status(partitions: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From silver.partition_states rows: each partition at min ISR, under min ISR or offline, by its status."""
    rows = partitions.withColumnRenamed("collected_at", "at")
    times = rows.select("cluster_id", "at").distinct()
    bad = rows.where(F.col("status").isin("at_min_isr", "under_min_isr", "offline"))
    kind = F.concat(F.lit("partitions_"), F.col("status"))
    isr = F.array_join(F.col("isr"), ",")
    detail = _text(
        F.col("topic"),
        "-",
        _n("partition"),
        " ",
        F.regexp_replace("status", "_", " "),
        ": ISR [",
        isr,
        "], min ISR ",
        _n("min_isr"),
        ", leader ",
        F.coalesce(F.col("leader_id").cast("string"), F.lit("none")),
    )
    out = bad.select(
        "cluster_id",
        kind.alias("kind"),
        F.lit(None).cast("int").alias("node_id"),
        F.col("topic").cast("string"),
        F.col("partition").cast("int"),
        "at",
        F.col("isr_size").cast("double").alias("value"),
        detail.alias("detail"),
    )
    return times, out


def metadata_divergence(divergence: DataFrame, warn_records: int, lag_warn_ms: int) -> tuple[DataFrame, DataFrame]:
    """From gold.metadata_offset_divergence rows: per node scrape (times keyed by node)."""
    rows = divergence.withColumnRenamed("scraped_at", "at")
    times = rows.select("cluster_id", "node_id", "at")
    bad = rows.where((F.col("divergence_records") > warn_records) | (F.col("last_applied_lag_ms") > lag_warn_ms))
    detail = _text(
        "node ",
        _n("node_id"),
        " ",
        F.coalesce(_n("divergence_records"), F.lit("?")),
        " records behind the active controller, last applied ",
        F.coalesce(_n("last_applied_lag_ms"), F.lit("?")),
        " ms ago",
    )
    value = F.coalesce(F.col("divergence_records"), F.lit(0))
    return times, _anomalies(bad, "metadata_divergence", F.col("node_id"), value, detail)


# --- episodes ----------------------------------------------------------------------------------------------------


def episodes(times: DataFrame, anomalies: DataFrame) -> DataFrame:
    """Runs of each series' anomalous observations among its source's observations (`times`: cluster_id, at, and
    node_id when each node is a series of its own), as EPISODE_COLUMNS rows."""
    return _episodes_of([("source", times, anomalies)])


def _episodes_of(sources: list[tuple[str, DataFrame, DataFrame]]) -> DataFrame:
    """`episodes` of several sources in one pass (one set of shuffles for all of them, not one per source): each
    source's times and anomalies are tagged with its name and, for sources whose nodes each have their own times,
    the node (`_scope`; -1 otherwise)."""
    all_times, all_anomalies = None, None
    for name, times, anomalies in sources:
        by_node = "node_id" in times.columns
        scope = F.col("node_id") if by_node else F.lit(-1)
        t = times.select("cluster_id", F.lit(name).alias("_source"), scope.cast("int").alias("_scope"), "at")
        a = anomalies.select(*ANOMALY_COLUMNS, F.lit(name).alias("_source"), scope.cast("int").alias("_scope"))
        all_times = t if all_times is None else all_times.unionByName(t)
        all_anomalies = a if all_anomalies is None else all_anomalies.unionByName(a)
    key = ["cluster_id", "_source", "_scope"]
    series = [*SERIES, "_source", "_scope"]
    runs, _ = consecutive_runs(all_anomalies, all_times, key, series, "at")
    # a run ends at its source's next observation after its last one (`_next_at`), none while it lasts
    grouped = runs.groupBy(*series, "_run").agg(
        F.min("at").alias("event_at"),
        F.max_by("_next_at", "_i").alias("ended_at"),
        F.count(F.lit(1)).cast("bigint").alias("observations"),
        F.max("value").alias("peak"),
        F.max_by("detail", F.struct(F.coalesce("value", F.lit(float("-inf"))), "at")).alias("detail"),
    )
    return grouped.select(*EPISODE_COLUMNS[:-1], _critical().alias("critical"))


def _single(anomalies: DataFrame) -> DataFrame:
    return anomalies.select(
        *SERIES,
        F.col("at").alias("event_at"),
        F.col("at").alias("ended_at"),
        F.lit(1).cast("bigint").alias("observations"),
        F.col("value").alias("peak"),
        "detail",
        _critical().alias("critical"),
    )


def _critical() -> Column:
    """Partitions offline or under min ISR, or a quorum without a leader."""
    return F.col("kind").isin(*CRITICAL_KINDS) | ((F.col("kind") == "leader_election") & F.col("node_id").isNull())


def build_episodes(
    *,
    partitions: DataFrame | None = None,
    replicas: DataFrame | None = None,
    metrics: DataFrame | None = None,
    status: DataFrame | None = None,
    events: DataFrame | None = None,
    divergence: DataFrame | None = None,
    fetch_timeout_ms: int = 2000,
    slo_ms: int = 2000,
    warn_records: int = 1000,
    lag_warn_ms: int = 30_000,
) -> DataFrame | None:
    """Every anomaly episode of the given sources (each from some time on, the same for all of a cluster), as
    EPISODE_COLUMNS rows; None when no source is given."""
    sources: list[tuple[str, DataFrame, DataFrame]] = []
    singles: list[DataFrame] = []
    # kinds observed at the same times (a partition snapshot's, a replica snapshot's) share one source
    if partitions is not None:
        times, down = broker_down(partitions)
        sources.append(("partitions", times, down.unionByName(partition_status(partitions)[1])))
    if replicas is not None:
        times, down, lagging = _voters(replicas, fetch_timeout_ms, slo_ms)
        sources.append(("voters", times, _controllers_down(down).unionByName(_voters_lagging(lagging))))
    if metrics is not None:
        sources.append(("broker_fenced", *broker_fenced(metrics)))
    if status is not None:
        sources += [("leaderless", *leaderless(status)), ("hw_stalled", *hw_stalled(status))]
    if events is not None:
        singles.append(elections(events))
    if divergence is not None:
        sources.append(("metadata_divergence", *metadata_divergence(divergence, warn_records, lag_warn_ms)))
    parts = ([_episodes_of(sources)] if sources else []) + singles
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
