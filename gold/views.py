"""SQL views in `gold` for the questions operators ask first; each column carries a comment for BI tools.

`view_statements(names, settings)` returns CREATE OR REPLACE VIEW statements; `names` maps `schema.table` to the
name to use (so the same SQL serves `gold.x` locally and `<catalog>.<prefix>gold.x` on Databricks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from quorumlake.contract.tables import resolve_names


@dataclass(frozen=True)
class ViewSpec:
    name: str
    comment: str
    columns: tuple[tuple[str, str], ...]  # (name, comment)
    sql: str  # uses {gold.table} / {silver.table} placeholders and {setting} values


FLEET_OVERVIEW = ViewSpec(
    "gold.v_fleet_overview",
    "Latest health of every cluster: quorum leader and lag, ISR health, worst metadata divergence, controller "
    "health, data freshness, overall status",
    (
        ("cluster_id", "Cluster"),
        ("as_of", "Time of the latest data for the cluster"),
        (
            "status",
            "critical, warn, stale or ok, the first that holds. critical: no leader, quorum error, known voter "
            "lag leaving less than a majority within the SLO, under-min-ISR or offline partitions (by min_isr_rule), "
            "or an active-controller count other than 1; warn: AtMinIsr partitions, a known lag over the SLO, a "
            "stalled high watermark, a node diverging from the controller, metadata errors, voters not fetching "
            "or fenced brokers; stale: no quorum snapshot for the configured minutes. An unknown lag (n/a) is "
            "neither good nor bad",
        ),
        ("leader_id", "Quorum leader in the latest snapshot"),
        ("leader_epoch", "Leader epoch in the latest snapshot"),
        ("max_follower_lag", "MaxFollowerLag in the latest snapshot (records)"),
        ("max_follower_lag_time_ms", "MaxFollowerLagTimeMs in the latest snapshot (-1: unknown, shown as n/a)"),
        ("voters", "Voters in the latest snapshot"),
        ("voters_within_slo", "Voters whose caught-up lag is known and within the SLO"),
        ("high_watermark_stalled", "The high watermark stalled in the latest window"),
        ("at_min_isr", "Partitions at min ISR in the latest partition snapshot, by min_isr_rule"),
        ("under_min_isr", "Partitions under min ISR in the latest partition snapshot, by min_isr_rule"),
        ("offline", "Offline partitions in the latest partition snapshot"),
        ("worst_divergence_records", "Largest metadata offset divergence among the nodes' latest scrapes (records)"),
        ("worst_last_applied_lag_ms", "Largest last-applied-record lag among the nodes' latest scrapes (ms)"),
        ("last_snapshot_at", "Time of the cluster's latest quorum snapshot"),
        (
            "is_stale",
            "No quorum snapshot (or, without any, no data at all) for the configured minutes, by the query's clock",
        ),
        ("active_controllers", "Sum of ActiveControllerCount over the nodes' latest scrapes (1 when healthy)"),
        (
            "unknown_voter_connections",
            "Most unknown voter connections a node reported in its latest window (informational: Kafka 4.x reports "
            "a constant 0; voters_not_fetching is the signal)",
        ),
        ("metadata_errors", "Largest metadata error count a node reported in its latest window"),
        (
            "fenced_brokers",
            "Brokers fenced in their latest gold.broker_registrations row (KIP-1131, Kafka 4.1+); else the most "
            "fenced brokers a controller reported in its latest window (FencedBrokerCount)",
        ),
        (
            "is_good",
            "The latest quorum snapshot is good (leader, lag within the SLO); NULL when its lag is unknown (n/a)",
        ),
        ("voters_lag_unknown", "Voters whose caught-up lag is unknown in the latest snapshot"),
        (
            "voters_not_fetching",
            "Followers whose last fetch is older than quorum_fetch_timeout_ms in the latest snapshot (NULL: unknown)",
        ),
        ("min_isr_rule", "The min-ISR rule of at_min_isr, under_min_isr and the status: effective or kafka_topics"),
    ),
    """
    WITH q AS (
      SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id ORDER BY collected_at DESC) AS n
                     FROM {gold.quorum_status}) WHERE n = 1),
    h AS (
      SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id ORDER BY window_start DESC) AS n
                     FROM {gold.quorum_health}) WHERE n = 1),
    i AS (
      SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id ORDER BY collected_at DESC) AS n
                     FROM {gold.isr_health}) WHERE n = 1),
    d AS (
      SELECT cluster_id, max(scraped_at) AS scraped_at, max(divergence_records) AS worst_divergence_records,
             max(last_applied_lag_ms) AS worst_last_applied_lag_ms
      FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id, node_id ORDER BY scraped_at DESC) AS n
            FROM {gold.metadata_offset_divergence}) WHERE n = 1 GROUP BY cluster_id),
    ch AS (
      -- each node's latest window, counted only when the node was scraped within one window of the cluster's latest
      -- scrape (a node that went away does not keep its last ActiveControllerCount forever)
      SELECT cluster_id, max(last_scraped_at) AS scraped_at,
             CAST(sum(active_controller_count) AS INT) AS active_controllers,
             max(unknown_voter_connections) AS unknown_voter_connections, max(metadata_errors) AS metadata_errors,
             max(fenced_brokers) AS fenced_brokers
      FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id, node_id ORDER BY window_start DESC) AS n,
                   max(last_scraped_at) OVER (PARTITION BY cluster_id) AS cluster_scraped_at
            FROM {gold.controller_health})
      WHERE n = 1 AND last_scraped_at >= cluster_scraped_at - make_dt_interval(0, 0, {window_minutes}, 0)
      GROUP BY cluster_id),
    br AS (
      -- each broker's latest registration row, counted only when it is within one window of the cluster's latest
      -- registration scrape (a broker the controller no longer reports does not stay fenced forever)
      SELECT cluster_id, max(last_scraped_at) AS scraped_at,
             CAST(count_if(registration_state = 'fenced') AS INT) AS fenced_brokers
      FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id, broker_id ORDER BY window_start DESC) AS n,
                   max(last_scraped_at) OVER (PARTITION BY cluster_id) AS cluster_scraped_at
            FROM {gold.broker_registrations})
      WHERE n = 1 AND last_scraped_at >= cluster_scraped_at - make_dt_interval(0, 0, {window_minutes}, 0)
      GROUP BY cluster_id),
    c AS (SELECT cluster_id FROM q UNION SELECT cluster_id FROM i UNION SELECT cluster_id FROM d
          UNION SELECT cluster_id FROM ch),
    o AS (
      SELECT
        c.cluster_id,
        greatest(q.collected_at, i.collected_at, d.scraped_at, ch.scraped_at) AS as_of,
        q.collected_at AS last_snapshot_at,
        q.cluster_id IS NOT NULL AS has_quorum,
        q.error_code, q.is_good, q.leader_id, q.leader_epoch, q.max_follower_lag, q.max_follower_lag_time_ms,
        q.voters, q.voters_within_slo, q.voters_lag_unknown, q.voters_not_fetching, h.high_watermark_stalled,
        CASE WHEN '{min_isr_rule}' = 'effective' THEN i.at_min_isr_effective ELSE i.at_min_isr END AS at_min_isr,
        CASE WHEN '{min_isr_rule}' = 'effective' THEN i.under_min_isr_effective ELSE i.under_min_isr END
          AS under_min_isr,
        i.offline, d.worst_divergence_records, d.worst_last_applied_lag_ms, ch.active_controllers,
        ch.unknown_voter_connections, ch.metadata_errors,
        coalesce(br.fenced_brokers, ch.fenced_brokers) AS fenced_brokers
      FROM c
      LEFT JOIN q ON q.cluster_id = c.cluster_id
      LEFT JOIN h ON h.cluster_id = c.cluster_id
      LEFT JOIN i ON i.cluster_id = c.cluster_id
      LEFT JOIN d ON d.cluster_id = c.cluster_id
      LEFT JOIN ch ON ch.cluster_id = c.cluster_id
      LEFT JOIN br ON br.cluster_id = c.cluster_id),
    f AS (
      SELECT *,
             {stale_after_minutes} > 0 AND coalesce(last_snapshot_at, as_of)
               < current_timestamp() - make_dt_interval(0, 0, {stale_after_minutes}, 0) AS is_stale
      FROM o)
    SELECT
      cluster_id,
      as_of,
      CASE
        WHEN (has_quorum AND (error_code <> 0 OR leader_id IS NULL
                              OR (max_follower_lag_time_ms >= 0 AND voters_within_slo < floor(voters / 2) + 1)))
             OR coalesce(under_min_isr, 0) > 0 OR coalesce(offline, 0) > 0
             OR coalesce(active_controllers <> 1, false) THEN 'critical'
        WHEN coalesce(at_min_isr, 0) > 0 OR NOT coalesce(is_good, true)
             OR coalesce(voters_within_slo + coalesce(voters_lag_unknown, 0) < voters, false)
             OR coalesce(high_watermark_stalled, false)
             OR coalesce(worst_divergence_records, 0) > {divergence_warn_records}
             OR coalesce(worst_last_applied_lag_ms, 0) > {metadata_lag_warn_ms}
             OR coalesce(metadata_errors, 0) > 0 OR coalesce(voters_not_fetching, 0) > 0
             OR coalesce(fenced_brokers, 0) > 0 THEN 'warn'
        WHEN is_stale THEN 'stale'
        ELSE 'ok'
      END AS status,
      leader_id, leader_epoch, max_follower_lag, max_follower_lag_time_ms, voters, voters_within_slo,
      high_watermark_stalled, at_min_isr, under_min_isr, offline, worst_divergence_records, worst_last_applied_lag_ms,
      last_snapshot_at, is_stale, active_controllers, unknown_voter_connections, metadata_errors, fenced_brokers,
      is_good, voters_lag_unknown, voters_not_fetching, '{min_isr_rule}' AS min_isr_rule
    FROM f
    """,
)

SLO_ATTAINMENT_DAILY = ViewSpec(
    "gold.v_slo_attainment_daily",
    "Quorum SLO attainment per cluster per UTC day. To roll up (several days, several clusters), divide the sums: "
    "sum(good_snapshots) / (sum(snapshots) - sum(unknown_snapshots)); never average sli (an average of ratios weighs "
    "a quiet day like a busy one)",
    (
        ("cluster_id", "Cluster"),
        ("day", "UTC day"),
        ("snapshots", "Quorum snapshots that day, error responses included (additive: sum it)"),
        ("good_snapshots", "Snapshots with a leader and MaxFollowerLagTimeMs within the SLO (additive: sum it)"),
        (
            "sli",
            "good_snapshots / (snapshots - unknown_snapshots) for this cluster and day only, NULL when no snapshot "
            "was judged; roll up as sum(good_snapshots) / (sum(snapshots) - sum(unknown_snapshots)), never avg(sli)",
        ),
        (
            "unknown_snapshots",
            "Snapshots whose lag time is unknown: neither good nor bad (additive: sum it)",
        ),
    ),
    """
    SELECT cluster_id, to_date(collected_at) AS day, count(*) AS snapshots, count_if(is_good) AS good_snapshots,
           count_if(is_good) / nullif(count_if(is_good IS NOT NULL), 0) AS sli,
           count_if(is_good IS NULL) AS unknown_snapshots
    FROM {gold.quorum_status}
    GROUP BY cluster_id, to_date(collected_at)
    """,
)

PARTITIONS_AT_MIN_ISR = ViewSpec(
    "gold.v_partitions_at_min_isr",
    "Partitions at min ISR (by min_isr_rule) in their cluster's latest partition snapshot, with the episode they "
    "are in",
    (
        ("cluster_id", "Cluster"),
        ("topic", "Topic"),
        ("partition", "Partition"),
        ("as_of", "Time of the cluster's latest partition snapshot"),
        ("leader_id", "Leader broker"),
        ("isr", "In-sync replicas"),
        ("min_isr", "min.insync.replicas"),
        ("status", "Partition status (offline or at_min_isr, by min_isr_rule)"),
        ("started_at", "Start of the ongoing AtMinIsr episode"),
        ("duration_ms", "How long the partition has been at min ISR or worse (ms)"),
        ("snapshots", "Snapshots in the episode"),
        ("escalated", "Reached under-min-ISR or offline in the episode"),
        ("bounces", "Earlier episodes within the flap window"),
        (
            "min_isr_rule",
            "effective: ISR size = min(min.insync.replicas, replicas); kafka_topics: ISR size = min.insync.replicas",
        ),
    ),
    """
    WITH latest AS (SELECT cluster_id, max(collected_at) AS collected_at FROM {gold.isr_health} GROUP BY cluster_id)
    SELECT p.cluster_id, p.topic, p.`partition`, p.collected_at AS as_of, p.leader_id, p.isr, p.min_isr,
           CASE WHEN p.is_offline THEN 'offline' ELSE 'at_min_isr' END AS status,
           e.started_at, e.duration_ms, e.snapshots, e.escalated, e.bounces, '{min_isr_rule}' AS min_isr_rule
    FROM {silver.partition_states} p
    JOIN latest l ON l.cluster_id = p.cluster_id AND l.collected_at = p.collected_at
    LEFT JOIN {gold.at_min_isr_episodes} e
      ON e.cluster_id = p.cluster_id AND e.topic = p.topic AND e.`partition` = p.`partition` AND e.ended_at IS NULL
    WHERE CASE WHEN '{min_isr_rule}' = 'effective' THEN p.isr_size = least(p.min_isr, size(p.replicas))
               ELSE p.is_at_min_isr END
    """,
)

VIEWS = (FLEET_OVERVIEW, SLO_ATTAINMENT_DAILY, PARTITIONS_AT_MIN_ISR)


@dataclass(frozen=True)
class MetricViewSpec:
    """A Unity Catalog metric view (Databricks SQL `CREATE VIEW ... WITH METRICS LANGUAGE YAML`): measures are
    aggregate expressions over the source's rows, evaluated at whatever grain a query groups by, so a ratio measure
    re-aggregates correctly in every BI tool. Open-source Spark cannot create one: locally the documented view
    `gold.v_slo_attainment_daily` (additive counts + roll-up rule in its comments) stands in."""

    name: str
    yaml: str  # the metric view definition, with {gold.table} placeholders for the source


QUORUM_SLO_METRICS = MetricViewSpec(
    "gold.m_quorum_slo",
    """\
version: "1.1"
comment: >-
  Quorum SLO attainment over any slice of clusters and time: a quorum snapshot is good when it has a leader and
  MaxFollowerLagTimeMs is between 0 and the SLO, unknown when its lag time is unknown. sli is sum(good) /
  sum(judged snapshots) at the query's grain.
source: {gold.quorum_status}
dimensions:
  - name: cluster_id
    expr: cluster_id
    comment: Cluster
  - name: day
    expr: DATE_TRUNC('DAY', collected_at)
    comment: UTC day of the snapshot
  - name: hour
    expr: DATE_TRUNC('HOUR', collected_at)
    comment: UTC hour of the snapshot
  - name: window_start
    expr: window_start
    comment: Start of the tumbling window holding the snapshot
measures:
  - name: snapshots
    expr: COUNT(1)
    comment: Quorum snapshots, error responses included
  - name: good_snapshots
    expr: COUNT_IF(is_good)
    comment: Snapshots with a leader and MaxFollowerLagTimeMs within the SLO
  - name: unknown_snapshots
    expr: COUNT_IF(is_good IS NULL)
    comment: Snapshots whose lag time is unknown, neither good nor bad
  - name: sli
    expr: COUNT_IF(is_good) / NULLIF(COUNT_IF(is_good IS NOT NULL), 0)
    comment: good_snapshots / judged snapshots over the rows of the query's grain (never an average of ratios)
  - name: leader_changes
    expr: SUM(leader_change)
    comment: Leader epoch increases
""",
)

REPLICA_SLO_METRICS = MetricViewSpec(
    "gold.m_replica_slo",
    """\
version: "1.1"
comment: >-
  Replica caught-up-lag SLO attainment over any slice of clusters, replicas and time, from the per-window counts of
  gold.replica_lag_sli: sli is sum(good_snapshots) / (sum(snapshots) - sum(unknown_snapshots)) at the query's grain.
source: {gold.replica_lag_sli}
dimensions:
  - name: cluster_id
    expr: cluster_id
    comment: Cluster
  - name: replica_id
    expr: replica_id
    comment: Replica (node) id
  - name: is_voter
    expr: is_voter
    comment: Voter (true) or observer (false)
  - name: day
    expr: DATE_TRUNC('DAY', window_start)
    comment: UTC day of the window
  - name: window_start
    expr: window_start
    comment: Window start
measures:
  - name: snapshots
    expr: SUM(snapshots)
    comment: Replica snapshots
  - name: good_snapshots
    expr: SUM(good_snapshots)
    comment: Replica snapshots with a known caught-up lag within the SLO
  - name: unknown_snapshots
    expr: SUM(unknown_snapshots)
    comment: Replica snapshots whose caught-up lag is unknown, neither good nor bad
  - name: sli
    expr: SUM(good_snapshots) / NULLIF(SUM(snapshots) - SUM(unknown_snapshots), 0)
    comment: good_snapshots / snapshots with a known lag over the rows of the query's grain (never an average of ratios)
  - name: max_caught_up_lag_ms
    expr: MAX(max_caught_up_lag_ms)
    comment: Largest known caught-up lag (ms)
""",
)

METRIC_VIEWS = (QUORUM_SLO_METRICS, REPLICA_SLO_METRICS)


def metric_view_statements(resolve: Callable[[str], str]) -> list[str]:
    """CREATE OR REPLACE VIEW ... WITH METRICS statements (Databricks SQL only), names resolved like the views'."""
    statements = []
    for view in METRIC_VIEWS:
        body = resolve_names(view.yaml, resolve)
        statements.append(f"CREATE OR REPLACE VIEW {resolve(view.name)} WITH METRICS LANGUAGE YAML AS $$\n{body}$$")
    return statements


def view_statements(resolve: Callable[[str], str], settings: dict[str, object]) -> list[str]:
    """CREATE OR REPLACE VIEW statements, with table names resolved by `resolve("gold.quorum_status")`."""
    statements = []
    for view in VIEWS:
        sql = resolve_names(view.sql, resolve)
        for key, value in settings.items():
            sql = sql.replace("{" + key + "}", str(value))
        columns = ", ".join(f"`{n}` COMMENT '{_escape(c)}'" for n, c in view.columns)
        statements.append(
            f"CREATE OR REPLACE VIEW {resolve(view.name)} ({columns}) COMMENT '{_escape(view.comment)}' AS {sql}"
        )
    return statements


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
