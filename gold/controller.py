"""gold.controller_health: one row per node per cluster per tumbling window (by scrape time), the KRaft controller
and raft-client health that Strimzi's dashboards show, from the scrapes already in silver.node_metrics.

Sources (docs/kafka-surfaces.md §4.1, §4.3): `kafka.server:type=raft-metrics` on every node (state, vote, commit
and election latency, unknown voter connections, append/fetch record rates) and
`kafka.controller:type=KafkaController` on controllers (fenced/active brokers, metadata errors, timed-out broker
heartbeats, active controller count); brokers add their metadata load/apply error counts. Kafka 4.x adds the
dynamic quorum's raft metrics (KIP-853: voters, observers, an uncommitted voter change; IgnoredStaticVoters), the
controller event thread's AvgIdleRatio (KIP-1190) and ControllerStats' election meters (unclean, and from Eligible
Leader Replicas, KIP-966).

Rules:
- A sample whose value is NaN (an idle `commit-latency-*` or `election-latency-*`: no sample in the exporter's own
  window) is unknown: ignored by every aggregate, never an error. A window with only NaN samples gives NULL.
- Latency averages are the mean of the scraped `*-avg` values (each already an average over the exporter's
  window); maxima are the largest scraped `*-max`. Rates are the mean of the scraped rates.
- Worst-of-window for health counts (most fenced brokers, fewest active brokers, most metadata errors, most
  unknown voter connections); state-like values (raft state, vote, active controller count) as of the node's last
  scrape in the window that has them (`last_scraped_at`); so are the quorum's voters and observers, the uncommitted
  voter change and IgnoredStaticVoters (the controller's, else the broker's).
- Election meters are counters: a window gets the sum of their increases between consecutive scrapes of the node
  (the step into the window's first scrape included, from a scrape at most one window earlier; a drop is a restart).
- Raft states of an election in progress are counted per window (`prospective_scrapes`, `candidate_scrapes`), so an
  election between two leader scrapes still shows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_CONTROLLER_HEALTH
from quorumlake.gold.quorum import window_start

# per-scrape column -> canonical metric of silver.node_metrics (silver/prometheus_text.py)
_METRICS = {
    "_vote": "raft_current_vote",
    "_commit_avg": "raft_commit_latency_avg",
    "_commit_max": "raft_commit_latency_max",
    "_election_avg": "raft_election_latency_avg",
    "_election_max": "raft_election_latency_max",
    "_unknown_voters": "raft_number_unknown_voter_connections",
    "_append_rate": "raft_append_records_rate",
    "_fetch_rate": "raft_fetch_records_rate",
    "_fenced": "controller_fenced_broker_count",
    "_active_brokers": "controller_active_broker_count",
    "_controller_errors": "controller_metadata_error_count",
    "_broker_load_errors": "broker_metadata_load_error_count",
    "_broker_apply_errors": "broker_metadata_apply_error_count",
    "_timed_out": "controller_timed_out_broker_heartbeat_count",
    "_active_controller": "controller_active_controller_count",
    # Kafka 4.x (KIP-853 dynamic quorum, KIP-1190 controller idleness, ControllerStats election meters)
    "_voters": "raft_number_of_voters",
    "_observers": "raft_number_of_observers",
    "_uncommitted": "raft_uncommitted_voter_change",
    "_ignored_controller": "controller_ignored_static_voters",
    "_ignored_broker": "broker_ignored_static_voters",
    "_idle": "controller_avg_idle_ratio",
    "_elr": "controller_elr_elections_total",
    "_unclean": "controller_unclean_leader_elections_total",
}
# raft `current-state` values of an election in progress (KIP-996: a 4.x voter is prospective, sending pre-votes,
# before it bumps the epoch as a candidate)
PROSPECTIVE_STATES = ("prospective", "prospective-voted")
CANDIDATE_STATES = ("candidate",)


def known(value: Column) -> Column:
    """NULL for NaN (an idle Avg/Max reading), the value otherwise."""
    return F.when(~F.isnan(value), value)


def build_controller_health(node_metrics: DataFrame, window_minutes: int) -> DataFrame:
    """From silver.node_metrics rows (all rows of each node window given): cluster_id, node_id, scraped_at, metric,
    value, node_role, state.

    A counter's increase in a window (`elr_elections`, `unclean_elections`) includes the step from the node's scrape
    before the window's first one, when that scrape is at most one window earlier: a window's row is complete when
    the rows of the window before it are given too (the rows built for that earlier window are then partial: keep
    only the windows whose previous window was given)."""
    return (
        node_metrics.transform(_per_scrape)
        .transform(_with_increases, window_minutes)
        .transform(_windowed, window_minutes)
        .select(*GOLD_CONTROLLER_HEALTH.column_names)
    )


def counter_increase(value: Column, previous: Column) -> Column:
    """The increase of a monotonic counter from `previous` to `value`; a drop is a restart (the counter began again
    at 0), so the new value is the increase. NULL without a value; 0 without a previous one."""
    return (
        F.when(value.isNull(), F.lit(None))
        .when(previous.isNull(), F.lit(0.0))
        .when(value >= previous, value - previous)
        .otherwise(value)
    )


def _with_increases(scrapes: DataFrame, window_minutes: int) -> DataFrame:
    """`_elr_inc` / `_unclean_inc`: each counter's increase since the node's previous scrape that reported it, if
    that scrape is at most one window earlier (else 0: a node that came back is not charged a whole history)."""
    ordered = (
        Window.partitionBy("cluster_id", "node_id").orderBy("scraped_at").rowsBetween(Window.unboundedPreceding, -1)
    )
    reach_ms = window_minutes * 60_000
    out = scrapes
    for name in ("_elr", "_unclean"):
        seen = F.when(F.col(name).isNotNull(), F.struct(F.col("scraped_at").alias("at"), F.col(name).alias("v")))
        previous = F.last(seen, ignorenulls=True).over(ordered)
        out = out.withColumn(f"{name}_prev", previous)
        near = F.unix_millis("scraped_at") - F.unix_millis(F.col(f"{name}_prev.at")) <= reach_ms
        out = out.withColumn(f"{name}_inc", counter_increase(F.col(name), F.when(near, F.col(f"{name}_prev.v")))).drop(
            f"{name}_prev"
        )
    return out


def _per_scrape(metrics: DataFrame) -> DataFrame:
    value = known(F.col("value"))
    return metrics.groupBy("cluster_id", "node_id", "scraped_at").agg(
        F.first("node_role", ignorenulls=True).alias("node_role"),
        F.max(F.when(F.col("metric") == "raft_current_state", F.col("state"))).alias("_state"),
        *[F.max(F.when(F.col("metric") == metric, value)).alias(name) for name, metric in _METRICS.items()],
    )


def _last(column: str) -> Column:
    """The column's value at the latest scrape of the window that has one."""
    return F.max_by(column, F.when(F.col(column).isNotNull(), F.col("scraped_at")))


def _state_scrapes(states: tuple[str, ...]) -> Column:
    """Scrapes in the window whose raft state is one of `states`; NULL when no scrape carries the state (the
    exporter's default names drop this String attribute): unknown, not 0."""
    return F.when(F.count("_state") > 0, F.count_if(F.col("_state").isin(*states))).cast("int")


def _windowed(scrapes: DataFrame, window_minutes: int) -> DataFrame:
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(window_minutes))
    errors = F.when(
        F.col("_controller_errors").isNotNull()
        | F.col("_broker_load_errors").isNotNull()
        | F.col("_broker_apply_errors").isNotNull(),
        F.coalesce("_controller_errors", F.lit(0.0))
        + F.coalesce("_broker_load_errors", F.lit(0.0))
        + F.coalesce("_broker_apply_errors", F.lit(0.0)),
    )
    return (
        scrapes.withColumn("window_start", window_start(F.col("scraped_at"), window_minutes))
        .withColumn("_errors", errors)
        .withColumn("_ignored", F.coalesce("_ignored_controller", "_ignored_broker"))
        .groupBy("cluster_id", "node_id", "window_start")
        .agg(
            _last("node_role").alias("node_role"),
            F.count(F.lit(1)).cast("bigint").alias("scrapes"),
            F.max("scraped_at").alias("last_scraped_at"),
            _last("_state").alias("raft_state"),
            _last("_vote").cast("int").alias("current_vote"),
            F.avg("_commit_avg").alias("avg_commit_latency_ms"),
            F.max("_commit_max").alias("max_commit_latency_ms"),
            F.avg("_election_avg").alias("avg_election_latency_ms"),
            F.max("_election_max").alias("max_election_latency_ms"),
            F.max("_unknown_voters").cast("int").alias("unknown_voter_connections"),
            F.avg("_append_rate").alias("append_records_per_s"),
            F.avg("_fetch_rate").alias("fetch_records_per_s"),
            F.max("_fenced").cast("int").alias("fenced_brokers"),
            F.min("_active_brokers").cast("int").alias("active_brokers"),
            F.max("_errors").cast("bigint").alias("metadata_errors"),
            F.max("_timed_out").cast("bigint").alias("timed_out_broker_heartbeats"),
            _last("_active_controller").cast("int").alias("active_controller_count"),
            _last("_voters").cast("int").alias("number_of_voters"),
            _last("_observers").cast("int").alias("number_of_observers"),
            (_last("_uncommitted") > 0).alias("uncommitted_voter_change"),
            (_last("_ignored") > 0).alias("ignored_static_voters"),
            F.avg("_idle").alias("avg_idle_ratio"),
            F.sum("_elr_inc").cast("bigint").alias("elr_elections"),
            F.sum("_unclean_inc").cast("bigint").alias("unclean_elections"),
            _state_scrapes(PROSPECTIVE_STATES).alias("prospective_scrapes"),
            _state_scrapes(CANDIDATE_STATES).alias("candidate_scrapes"),
        )
        .withColumn("window_end", F.col("window_start") + width)
    )
