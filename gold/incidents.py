"""gold.incidents and gold.incident_events: a cluster's anomaly episodes (`gold/anomalies.py`) joined into incidents.

An incident opens at a cluster's first anomaly; every anomaly that overlaps it, or starts within the grace period
(`incident_grace_minutes`) after the last of its anomalies cleared, joins it; it ends when all of them have
cleared (`ended_at`: the latest of their ends; NULL while one lasts). Its `trigger` is its first anomaly (at the
same time, the kind earlier in `KIND_ORDER`, then the lower node id); `severity` is `critical` when a partition
went offline or under min ISR or the quorum had no leader, else `warn`; the peak partition counts are the largest
counts of gold.isr_health among the incident's partition snapshots. `incident_id` is its start time, so the same
anomalies always make the same id.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_INCIDENT_EVENTS, GOLD_INCIDENTS
from quorumlake.gold.anomalies import KIND_ORDER


def _far() -> Column:
    """The end of an anomaly that has not ended."""
    return F.lit("9999-12-31 00:00:00").cast("timestamp")


def incident_id(started_at: Column) -> Column:
    """The id of an incident: its start time in UTC (the session's time zone), yyyyMMddTHHmmss.SSSZ."""
    return F.date_format(started_at, "yyyyMMdd'T'HHmmss.SSS'Z'")


def _rank() -> Column:
    rank = F.lit(len(KIND_ORDER))
    for i, kind in reversed(list(enumerate(KIND_ORDER))):
        rank = F.when(F.col("kind") == kind, F.lit(i)).otherwise(rank)
    return rank


def group_episodes(episodes: DataFrame, grace_minutes: int) -> DataFrame:
    """The episodes (EPISODE_COLUMNS) with `incident_id` and `_order`, the key that orders them within a cluster."""
    order_key = F.struct(
        F.col("event_at"),
        _rank().alias("rank"),
        F.coalesce(F.col("node_id"), F.lit(-1)).alias("node"),
        F.coalesce(F.col("topic"), F.lit("")).alias("topic"),
        F.coalesce(F.col("partition"), F.lit(-1)).alias("partition"),
        F.col("kind").alias("kind"),
    )
    ordered = Window.partitionBy("cluster_id").orderBy("_order")
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    grace = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(grace_minutes))
    with_prev = episodes.withColumn("_order", order_key).withColumn(
        "_prev_end", F.max(F.coalesce(F.col("ended_at"), _far())).over(before)
    )
    new = F.col("_prev_end").isNull() | (F.col("event_at") > F.col("_prev_end") + grace)
    numbered = with_prev.withColumn(
        "_n", F.sum(new.cast("int")).over(ordered.rowsBetween(Window.unboundedPreceding, 0))
    )
    starts = numbered.groupBy("cluster_id", "_n").agg(incident_id(F.min("event_at")).alias("incident_id"))
    return numbered.join(starts, ["cluster_id", "_n"]).drop("_n", "_prev_end")


def build_incident_events(grouped: DataFrame) -> DataFrame:
    return grouped.select(*GOLD_INCIDENT_EVENTS.column_names)


def build_incidents(grouped: DataFrame, isr_health: DataFrame, latest: DataFrame) -> DataFrame:
    """gold.incidents from `group_episodes` output, gold.isr_health rows of the same time range (for the peak
    partition counts) and each cluster's latest observation (`latest`: cluster_id, latest_at; the duration of an
    open incident runs to it)."""

    def of(kind: str, column: str = "node_id") -> Column:
        return F.when(F.col("kind") == kind, F.col(column))

    elected = (F.col("kind") == "leader_election") & F.col("node_id").isNotNull()
    first = F.min(
        F.struct(F.col("_order"), F.col("kind").alias("k"), F.col("node_id").alias("n"), "topic", "partition")
    )
    incidents = grouped.groupBy("cluster_id", "incident_id").agg(
        F.min("event_at").alias("started_at"),
        F.when(F.count_if(F.col("ended_at").isNull()) == 0, F.max("ended_at")).alias("ended_at"),
        F.when(F.bool_or("critical"), "critical").otherwise("warn").alias("severity"),
        F.min(F.when(F.col("critical"), F.col("event_at"))).alias("critical_at"),
        first.alias("_first"),
        F.array_sort(F.collect_set("node_id")).alias("nodes"),
        F.count(F.lit(1)).cast("bigint").alias("anomalies"),
        F.max("event_at").alias("last_anomaly_at"),
        F.array_sort(F.collect_set(of("broker_down"))).alias("_brokers_down"),
        F.array_sort(F.collect_set(of("controller_down"))).alias("_controllers_down"),
        F.array_sort(F.collect_set(of("voter_lagging"))).alias("_lagging"),
        F.max(of("voter_lagging", "peak")).alias("_max_lag"),
        F.count_if(elected).alias("_elections"),
        F.max_by(F.when(elected, F.col("node_id")), F.when(elected, F.col("event_at"))).alias("_new_leader"),
        F.bool_or((F.col("kind") == "leader_election") & F.col("node_id").isNull()).alias("_leaderless"),
        F.max(of("hw_stalled", "peak")).alias("_max_stall"),
        F.max(of("broker_fenced", "peak")).alias("_max_fenced"),
        F.array_sort(F.collect_set(of("metadata_divergence"))).alias("_diverging"),
        F.max(of("metadata_divergence", "peak")).alias("_max_divergence"),
    )
    span = incidents.select("cluster_id", "incident_id", "started_at", "ended_at")
    inside = (
        (isr_health["cluster_id"] == span["cluster_id"])
        & (isr_health["collected_at"] >= span["started_at"])
        & (span["ended_at"].isNull() | (isr_health["collected_at"] < span["ended_at"]))
    )
    peaks = (
        span.join(isr_health.select("cluster_id", "collected_at", "at_min_isr", "under_min_isr", "offline"), inside)
        .groupBy(span["cluster_id"], span["incident_id"])
        .agg(
            F.max("at_min_isr").cast("int").alias("max_partitions_at_min_isr"),
            F.max("under_min_isr").cast("int").alias("max_partitions_under_min_isr"),
            F.max("offline").cast("int").alias("max_partitions_offline"),
        )
    )
    end = F.coalesce(F.col("ended_at"), F.greatest(F.col("latest_at"), F.col("last_anomaly_at")))
    return (
        incidents.join(peaks, ["cluster_id", "incident_id"], "left")
        .join(latest, "cluster_id", "left")
        .withColumn("max_partitions_at_min_isr", F.coalesce("max_partitions_at_min_isr", F.lit(0)))
        .withColumn("max_partitions_under_min_isr", F.coalesce("max_partitions_under_min_isr", F.lit(0)))
        .withColumn("max_partitions_offline", F.coalesce("max_partitions_offline", F.lit(0)))
        .withColumn("duration_ms", F.unix_millis(end) - F.unix_millis("started_at"))
        .withColumn("trigger", F.col("_first.k"))
        .withColumn("trigger_node_id", F.col("_first.n"))
        .withColumn("summary", _summary())
        .select(*GOLD_INCIDENTS.column_names)
    )


# --- the one-line summary ------------------------------------------------------------------------------------------


def _ids(column: str) -> Column:
    return F.array_join(F.col(column), ", ")


def _nodes(noun: str, column: str, verb: str) -> Column:
    """ "broker 5 down" / "brokers 5, 6 down"; NULL for none."""
    many = F.size(column) > 1
    return F.when(
        F.size(column) > 0,
        F.concat(F.when(many, F.lit(noun + "s ")).otherwise(F.lit(noun + " ")), _ids(column), F.lit(" " + verb)),
    )


def duration_text(ms: Column) -> Column:
    """ "45 s", "4 min", "2.5 h"."""
    return (
        F.when(ms < 120_000, F.concat(F.round(ms / 1000).cast("bigint").cast("string"), F.lit(" s")))
        .when(ms < 7_200_000, F.concat(F.round(ms / 60_000).cast("bigint").cast("string"), F.lit(" min")))
        .otherwise(F.concat(F.round(ms / 3_600_000, 1).cast("string"), F.lit(" h")))
    )


def _trigger_text() -> Column:
    kind, node = F.col("_first.k"), F.col("_first.n").cast("string")
    partition = F.concat(F.col("_first.topic"), F.lit("-"), F.col("_first.partition").cast("string"))
    return (
        F.when(kind == "broker_down", F.concat(F.lit("broker "), node, F.lit(" down")))
        .when(kind == "controller_down", F.concat(F.lit("controller "), node, F.lit(" not fetching")))
        .when(kind == "voter_lagging", F.concat(F.lit("voter "), node, F.lit(" lagging")))
        .when((kind == "leader_election") & node.isNull(), F.lit("quorum without a leader"))
        .when(kind == "leader_election", F.concat(F.lit("leader election (leader "), node, F.lit(")")))
        .when(kind == "hw_stalled", F.lit("metadata high watermark stalled"))
        .when(kind == "broker_fenced", F.lit("broker fenced"))
        .when(kind == "metadata_divergence", F.concat(F.lit("node "), node, F.lit(" diverging")))
        .when(kind == "partitions_offline", F.concat(F.lit("partition "), partition, F.lit(" offline")))
        .when(kind == "partitions_under_min_isr", F.concat(F.lit("partition "), partition, F.lit(" under min ISR")))
        .otherwise(F.concat(F.lit("partition "), partition, F.lit(" at min ISR")))
    )


def _count(column: str, text: str) -> Column:
    return F.when(F.col(column) > 0, F.concat(F.col(column).cast("string"), F.lit(" " + text)))


def _summary() -> Column:
    partitions = F.concat_ws(
        ", ",
        _count("max_partitions_at_min_isr", "partitions at min ISR"),
        _count("max_partitions_under_min_isr", "under min ISR"),
        _count("max_partitions_offline", "offline"),
    )
    elections = (
        F.when(F.col("_elections") == 1, F.concat(F.lit("leader elected (now "), F.col("_new_leader").cast("string")))
        .when(
            F.col("_elections") > 1,
            F.concat(
                F.lit("leader elected "),
                F.col("_elections").cast("string"),
                F.lit(" times (now "),
                F.col("_new_leader").cast("string"),
            ),
        )
        .otherwise(F.lit(None))
    )
    parts = F.concat_ws(
        "; ",
        _nodes("broker", "_brokers_down", "down"),
        _nodes("controller", "_controllers_down", "not fetching"),
        F.when(
            F.size("_lagging") > 0,
            F.concat(_nodes("voter", "_lagging", "lagging"), F.lit(" up to "), duration_text(F.col("_max_lag"))),
        ),
        F.when(F.col("_leaderless"), F.lit("no quorum leader")),
        F.when(elections.isNotNull(), F.concat(elections, F.lit(")"))),
        F.when(
            F.col("_max_stall").isNotNull(),
            F.concat(F.lit("high watermark stalled up to "), duration_text(F.col("_max_stall"))),
        ),
        F.when(
            F.col("_max_fenced").isNotNull(),
            F.concat(F.lit("up to "), F.col("_max_fenced").cast("bigint").cast("string"), F.lit(" brokers fenced")),
        ),
        F.when(
            F.size("_diverging") > 0,
            F.concat(
                _nodes("node", "_diverging", "diverging"),
                # diverging in time only (the last applied record too old, no records behind): no "up to 0 records"
                F.when(
                    F.col("_max_divergence") > 0,
                    F.concat(
                        F.lit(" up to "), F.col("_max_divergence").cast("bigint").cast("string"), F.lit(" records")
                    ),
                ).otherwise(F.lit(" (last applied record too old)")),
            ),
        ),
        F.when(partitions != "", partitions),
    )
    how_long = F.when(
        F.col("ended_at").isNull(), F.concat(F.lit("ongoing for "), duration_text(F.col("duration_ms")))
    ).otherwise(F.concat(F.lit("for "), duration_text(F.col("duration_ms"))))
    trigger = _trigger_text()
    # details that begin with the trigger say it once: "node 2 diverging up to 2403 records", not "node 2 diverging:
    # node 2 diverging up to 2403 records"
    said = F.when(parts == "", trigger).when(parts.startswith(trigger), parts)
    return F.concat(F.coalesce(said, F.concat(trigger, F.lit(": "), parts)), F.lit(" ("), how_long, F.lit(")"))
