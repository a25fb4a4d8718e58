"""SQL views in `gold` for the questions operators ask first; each column carries a comment for BI tools.

`view_statements(names, settings)` returns CREATE OR REPLACE VIEW statements; `names` maps `schema.table` to the
name to use (so the same SQL serves `gold.x` locally and `<catalog>.<prefix>gold.x` on Databricks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ViewSpec:
    name: str
    comment: str
    columns: tuple[tuple[str, str], ...]  # (name, comment)
    sql: str  # uses {gold.table} / {silver.table} placeholders and {setting} values


FLEET_OVERVIEW = ViewSpec(
    "gold.v_fleet_overview",
    "Latest health of every cluster: quorum leader and lag, ISR health, worst metadata divergence, overall status",
    (
        ("cluster_id", "Cluster"),
        ("as_of", "Time of the latest data for the cluster"),
        ("status", "ok, warn or critical (critical: no leader, quorum error, known voter lag leaving less than a "
                   "majority within the SLO, "
                   "under-min-ISR or offline partitions; warn: AtMinIsr partitions, lag over the SLO or unknown, a "
                   "stalled high watermark, or a node diverging from the controller)"),
        ("leader_id", "Quorum leader in the latest snapshot"),
        ("leader_epoch", "Leader epoch in the latest snapshot"),
        ("max_follower_lag", "MaxFollowerLag in the latest snapshot (records)"),
        ("max_follower_lag_time_ms", "MaxFollowerLagTimeMs in the latest snapshot (-1: unknown)"),
        ("voters", "Voters in the latest snapshot"),
        ("voters_within_slo", "Voters whose caught-up lag is within the SLO"),
        ("high_watermark_stalled", "The high watermark stalled in the latest window"),
        ("at_min_isr", "Partitions at min ISR in the latest partition snapshot"),
        ("under_min_isr", "Partitions under min ISR in the latest partition snapshot"),
        ("offline", "Offline partitions in the latest partition snapshot"),
        ("worst_divergence_records", "Largest metadata offset divergence among the nodes' latest scrapes (records)"),
        ("worst_last_applied_lag_ms", "Largest last-applied-record lag among the nodes' latest scrapes (ms)"),
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
    c AS (SELECT cluster_id FROM q UNION SELECT cluster_id FROM i UNION SELECT cluster_id FROM d)
    SELECT
      c.cluster_id,
      greatest(q.collected_at, i.collected_at, d.scraped_at) AS as_of,
      CASE
        WHEN (q.cluster_id IS NOT NULL AND (q.error_code <> 0 OR q.leader_id IS NULL
                                            OR (q.max_follower_lag_time_ms >= 0
                                                AND q.voters_within_slo < floor(q.voters / 2) + 1)))
             OR coalesce(i.under_min_isr, 0) > 0 OR coalesce(i.offline, 0) > 0 THEN 'critical'
        WHEN coalesce(i.at_min_isr, 0) > 0 OR NOT coalesce(q.is_good, true)
             OR coalesce(q.voters_within_slo < q.voters, false) OR coalesce(h.high_watermark_stalled, false)
             OR coalesce(d.worst_divergence_records, 0) > {divergence_warn_records}
             OR coalesce(d.worst_last_applied_lag_ms, 0) > {metadata_lag_warn_ms} THEN 'warn'
        ELSE 'ok'
      END AS status,
      q.leader_id, q.leader_epoch, q.max_follower_lag, q.max_follower_lag_time_ms, q.voters, q.voters_within_slo,
      h.high_watermark_stalled, i.at_min_isr, i.under_min_isr, i.offline,
      d.worst_divergence_records, d.worst_last_applied_lag_ms
    FROM c
    LEFT JOIN q ON q.cluster_id = c.cluster_id
    LEFT JOIN h ON h.cluster_id = c.cluster_id
    LEFT JOIN i ON i.cluster_id = c.cluster_id
    LEFT JOIN d ON d.cluster_id = c.cluster_id
    """,
)

SLO_ATTAINMENT_DAILY = ViewSpec(
    "gold.v_slo_attainment_daily",
    "Quorum SLO attainment per cluster per UTC day",
    (
        ("cluster_id", "Cluster"),
        ("day", "UTC day"),
        ("snapshots", "Quorum snapshots that day, error responses included"),
        ("good_snapshots", "Snapshots with a leader and MaxFollowerLagTimeMs within the SLO"),
        ("sli", "good_snapshots / snapshots"),
    ),
    """
    SELECT cluster_id, to_date(collected_at) AS day, count(*) AS snapshots, count_if(is_good) AS good_snapshots,
           count_if(is_good) / count(*) AS sli
    FROM {gold.quorum_status}
    GROUP BY cluster_id, to_date(collected_at)
    """,
)

PARTITIONS_AT_MIN_ISR = ViewSpec(
    "gold.v_partitions_at_min_isr",
    "Partitions at min ISR in their cluster's latest partition snapshot, with the episode they are in",
    (
        ("cluster_id", "Cluster"),
        ("topic", "Topic"),
        ("partition", "Partition"),
        ("as_of", "Time of the cluster's latest partition snapshot"),
        ("leader_id", "Leader broker"),
        ("isr", "In-sync replicas"),
        ("min_isr", "min.insync.replicas"),
        ("status", "Partition status"),
        ("started_at", "Start of the ongoing AtMinIsr episode"),
        ("duration_ms", "How long the partition has been at min ISR or worse (ms)"),
        ("snapshots", "Snapshots in the episode"),
        ("escalated", "Reached under-min-ISR or offline in the episode"),
        ("bounces", "Earlier episodes within the flap window"),
    ),
    """
    WITH latest AS (SELECT cluster_id, max(collected_at) AS collected_at FROM {gold.isr_health} GROUP BY cluster_id)
    SELECT p.cluster_id, p.topic, p.`partition`, p.collected_at AS as_of, p.leader_id, p.isr, p.min_isr, p.status,
           e.started_at, e.duration_ms, e.snapshots, e.escalated, e.bounces
    FROM {silver.partition_states} p
    JOIN latest l ON l.cluster_id = p.cluster_id AND l.collected_at = p.collected_at
    LEFT JOIN {gold.at_min_isr_episodes} e
      ON e.cluster_id = p.cluster_id AND e.topic = p.topic AND e.`partition` = p.`partition` AND e.ended_at IS NULL
    WHERE p.is_at_min_isr
    """,
)

VIEWS = (FLEET_OVERVIEW, SLO_ATTAINMENT_DAILY, PARTITIONS_AT_MIN_ISR)


def view_statements(resolve: Callable[[str], str], settings: dict[str, object]) -> list[str]:
    """CREATE OR REPLACE VIEW statements, with table names resolved by `resolve("gold.quorum_status")`."""
    import re

    statements = []
    for view in VIEWS:
        sql = re.sub(r"\{((?:gold|silver|bronze)\.[a-z_]+)\}", lambda m: resolve(m.group(1)), view.sql)
        for key, value in settings.items():
            sql = sql.replace("{" + key + "}", str(value))
        columns = ", ".join(f"`{n}` COMMENT '{_escape(c)}'" for n, c in view.columns)
        statements.append(
            f"CREATE OR REPLACE VIEW {resolve(view.name)} ({columns}) COMMENT '{_escape(view.comment)}' AS {sql}"
        )
    return statements


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
