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
        ("status_rank", "Sort key of status, worst first: 1 critical, 2 warn, 3 stale, 4 ok"),
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
            "Brokers fenced in their latest gold.broker_registrations row (KIP-1131, Kafka 4.1+); without a "
            "registration state, the most fenced brokers a controller reported in its latest window "
            "(FencedBrokerCount)",
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
        ("open_incidents", "Incidents of the cluster still open (gold.incidents without ended_at)"),
        ("latest_incident_at", "Start of the cluster's latest incident"),
        ("latest_incident", "Severity and one-line summary of the cluster's latest incident"),
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
    inc AS (
      SELECT cluster_id, CAST(count_if(ended_at IS NULL) AS INT) AS open_incidents,
             max(started_at) AS latest_incident_at,
             max_by(concat(severity, ': ', summary), started_at) AS latest_incident
      FROM {gold.incidents} GROUP BY cluster_id),
    br AS (
      -- each broker's latest registration row, counted only when it is within one window of the cluster's latest
      -- registration scrape (a broker the controller no longer reports does not stay fenced forever); NULL when no
      -- such row has a state (a restarted active controller reports heartbeat ages alone): FencedBrokerCount then
      SELECT cluster_id, max(last_scraped_at) AS scraped_at,
             CASE WHEN count(registration_state) > 0
                  THEN CAST(count_if(registration_state = 'fenced') AS INT) END AS fenced_brokers
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
        coalesce(br.fenced_brokers, ch.fenced_brokers) AS fenced_brokers,
        coalesce(inc.open_incidents, 0) AS open_incidents, inc.latest_incident_at, inc.latest_incident
      FROM c
      LEFT JOIN q ON q.cluster_id = c.cluster_id
      LEFT JOIN h ON h.cluster_id = c.cluster_id
      LEFT JOIN i ON i.cluster_id = c.cluster_id
      LEFT JOIN d ON d.cluster_id = c.cluster_id
      LEFT JOIN ch ON ch.cluster_id = c.cluster_id
      LEFT JOIN br ON br.cluster_id = c.cluster_id
      LEFT JOIN inc ON inc.cluster_id = c.cluster_id),
    f AS (
      SELECT *,
             {stale_after_minutes} > 0 AND coalesce(last_snapshot_at, as_of)
               < current_timestamp() - make_dt_interval(0, 0, {stale_after_minutes}, 0) AS is_stale
      FROM o)
    SELECT
      cluster_id, as_of, status,
      CASE status WHEN 'critical' THEN 1 WHEN 'warn' THEN 2 WHEN 'stale' THEN 3 ELSE 4 END AS status_rank,
      leader_id, leader_epoch, max_follower_lag, max_follower_lag_time_ms, voters, voters_within_slo,
      high_watermark_stalled, at_min_isr, under_min_isr, offline, worst_divergence_records, worst_last_applied_lag_ms,
      last_snapshot_at, is_stale, active_controllers, unknown_voter_connections, metadata_errors, fenced_brokers,
      is_good, voters_lag_unknown, voters_not_fetching, '{min_isr_rule}' AS min_isr_rule,
      open_incidents, latest_incident_at, latest_incident
    FROM (
    SELECT
      f.*,
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
      END AS status
    FROM f)
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

OPEN_INCIDENTS = ViewSpec(
    "gold.v_open_incidents",
    "Incidents still open across the fleet (no ended_at yet): what is happening now, to whom, since when",
    (
        ("cluster_id", "Cluster"),
        ("incident_id", "Incident id (its start time)"),
        ("started_at", "Time of the incident's first anomaly"),
        ("open_for_ms", "From the start to the cluster's latest observation (ms)"),
        ("severity", "critical or warn"),
        ("trigger", "Kind of the first anomaly"),
        ("trigger_node_id", "Node of the first anomaly"),
        ("nodes", "Nodes involved"),
        ("max_partitions_at_min_isr", "Most partitions at min ISR in one partition snapshot"),
        ("max_partitions_under_min_isr", "Most partitions under min ISR in one partition snapshot"),
        ("max_partitions_offline", "Most offline partitions in one partition snapshot"),
        ("ongoing", "Anomalies of the incident still going on, as kind:node or kind:topic-partition"),
        ("summary", "One-line summary"),
    ),
    """
    WITH o AS (
      SELECT cluster_id, incident_id,
             sort_array(collect_list(concat(kind, ':', coalesce(CAST(node_id AS STRING),
                                                                concat(topic, '-', CAST(`partition` AS STRING)),
                                                                'cluster')))) AS ongoing
      FROM {gold.incident_events} WHERE ended_at IS NULL GROUP BY cluster_id, incident_id)
    SELECT i.cluster_id, i.incident_id, i.started_at, i.duration_ms AS open_for_ms, i.severity, i.`trigger`,
           i.trigger_node_id, i.nodes, i.max_partitions_at_min_isr, i.max_partitions_under_min_isr,
           i.max_partitions_offline, coalesce(o.ongoing, array()) AS ongoing, i.summary
    FROM {gold.incidents} i
    LEFT JOIN o ON o.cluster_id = i.cluster_id AND o.incident_id = i.incident_id
    WHERE i.ended_at IS NULL
    """,
)

SLO_BURN_EPISODES = ViewSpec(
    "gold.v_slo_burn_episodes",
    "SLO burn episodes: runs of 5-minute windows with fast_burn (page) or slow_burn (ticket) in gold.slo_burn, per "
    "cluster and SLO. An episode ends at a window with events that is not burning, or when no window with events "
    "follows within its long lookback (1 hour for fast, 6 hours for slow); ended_at is NULL while it goes on",
    (
        ("cluster_id", "Cluster"),
        ("slo", "SLO: quorum_lag, write_availability or metadata_freshness"),
        ("kind", "fast (1h and 5m burn rates above 14.4: page) or slow (6h and 30m above 6: ticket)"),
        ("started_at", "Start of the episode's first burning window"),
        ("ended_at", "End of its last burning window; NULL while the episode goes on"),
        ("windows", "Burning windows in the episode"),
        ("peak_burn_rate", "Highest burn rate over the long lookback (1h for fast, 6h for slow) in the episode"),
        ("objective", "The SLO's objective"),
    ),
    """
    WITH k AS (
      SELECT cluster_id, slo, window_start, window_end, objective, 'fast' AS kind, fast_burn AS burning,
             burn_rate_1h AS rate, 60 AS long_minutes
      FROM {gold.slo_burn}
      UNION ALL
      SELECT cluster_id, slo, window_start, window_end, objective, 'slow', slow_burn, burn_rate_6h, 360
      FROM {gold.slo_burn}),
    m AS (
      SELECT *, lag(burning) OVER s AS prev_burning, lag(window_start) OVER s AS prev_start,
             lead(window_start) OVER s AS next_start
      FROM k WINDOW s AS (PARTITION BY cluster_id, slo, kind ORDER BY window_start)),
    e AS (
      SELECT *, sum(CASE WHEN burning AND (prev_burning IS NULL OR NOT prev_burning
                                           OR window_start > prev_start + make_dt_interval(0, 0, long_minutes, 0))
                         THEN 1 ELSE 0 END)
                  OVER (PARTITION BY cluster_id, slo, kind ORDER BY window_start
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS episode
      FROM m)
    SELECT cluster_id, slo, kind, min(window_start) AS started_at,
           CASE WHEN max_by(next_start, window_start) IS NULL THEN NULL ELSE max(window_end) END AS ended_at,
           count(*) AS windows, max(rate) AS peak_burn_rate, max(objective) AS objective
    FROM e
    WHERE burning
    GROUP BY cluster_id, slo, kind, episode
    """,
)

SLO_ATTAINMENT_BY_COHORT = ViewSpec(
    "gold.v_slo_attainment_by_cohort",
    "SLO attainment by cohort over the 28 UTC days ending with the latest day in gold.slo_budget: each cluster-day of "
    "gold.slo_budget in the cohort its gold.cluster_cohorts row names (a cluster upgraded within the span counts in "
    "both cohorts, by day), one row per SLO, dimension (kafka_version, metadata_version, quorum_mode) and cohort. "
    "attainment is sum(good) / sum(total) over the cohort's events, never an average of the clusters' ratios",
    (
        ("slo", "SLO: quorum_lag, write_availability or metadata_freshness"),
        ("dimension", "What the cohorts are cut by: kafka_version, metadata_version or quorum_mode"),
        ("cohort", "The cohort's value (e.g. 4.1, 4.1-IV1, dynamic); unknown where the landing zone does not show it"),
        ("clusters", "Clusters with days in the cohort"),
        ("days", "UTC days of the span with events in the cohort"),
        ("good", "Good events of the cohort in the span (additive: sum it)"),
        ("total", "Events of the cohort in the span (additive: sum it)"),
        ("attainment", "good / total: the cohort's share of good events"),
        ("objective", "The SLO's objective"),
        ("budget_remaining", "1 - (1 - attainment) / (1 - objective): the cohort's error budget left; negative: spent"),
        ("from_day", "First day of the span"),
        ("to_day", "Last day of the span (the latest day in gold.slo_budget)"),
    ),
    """
    WITH span AS (SELECT max(day) AS to_day, date_sub(max(day), 27) AS from_day FROM {gold.slo_budget}),
    b AS (
      SELECT b.slo, b.cluster_id, b.day, b.good, b.total, b.objective, c.kafka_version, c.metadata_version,
             c.quorum_mode, span.from_day, span.to_day
      FROM {gold.slo_budget} b
      CROSS JOIN span
      LEFT JOIN {gold.cluster_cohorts} c ON c.cluster_id = b.cluster_id AND c.day = b.day
      WHERE b.day >= span.from_day),
    d AS (
      SELECT *, 'kafka_version' AS dimension, coalesce(kafka_version, 'unknown') AS cohort FROM b
      UNION ALL
      SELECT *, 'metadata_version', coalesce(metadata_version, 'unknown') FROM b
      UNION ALL
      SELECT *, 'quorum_mode', coalesce(quorum_mode, 'unknown') FROM b)
    SELECT slo, dimension, cohort, count(DISTINCT cluster_id) AS clusters, count(DISTINCT day) AS days,
           sum(good) AS good, sum(total) AS total, sum(good) / sum(total) AS attainment, max(objective) AS objective,
           1 - (1 - sum(good) / sum(total)) / (1 - max(objective)) AS budget_remaining, min(from_day) AS from_day,
           min(to_day) AS to_day
    FROM d
    GROUP BY slo, dimension, cohort
    """,
)

VIEWS = (
    FLEET_OVERVIEW,
    SLO_ATTAINMENT_DAILY,
    PARTITIONS_AT_MIN_ISR,
    SLO_BURN_EPISODES,
    SLO_ATTAINMENT_BY_COHORT,
    OPEN_INCIDENTS,
)


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
