"""gold.dim_cluster, gold.dim_node and gold.dim_date from tiny silver frames: what each row says, and that merging
a new batch with the rows a dimension holds gives what one batch of everything gives (the gold job's incremental
merge)."""

from __future__ import annotations

from datetime import date, datetime

from chispa import assert_df_equality

from quorumlake.contract.tables import (
    GOLD_CLUSTER_COHORTS,
    GOLD_DIM_CLUSTER,
    GOLD_DIM_NODE,
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
)
from quorumlake.gold.dims import build_dim_cluster, build_dim_date, build_dim_node


def _t(minute: int) -> datetime:
    return datetime(2024, 10, 27, 12, minute)


def _frame(spark, spec, rows: list[dict]):
    return spark.createDataFrame([tuple(r.get(c) for c in spec.column_names) for r in rows], spec.spark_schema)


def _snapshots(spark, *rows):
    return _frame(
        spark,
        SILVER_QUORUM_SNAPSHOTS,
        [
            dict(zip(("cluster_id", "collected_at", "kafka_cluster_id", "api_version", "voter_count"), r, strict=True))
            for r in rows
        ],
    )


def _metrics(spark, *rows):
    return _frame(
        spark,
        SILVER_NODE_METRICS,
        [dict(zip(("cluster_id", "node_id", "scraped_at", "node_role"), r, strict=True)) for r in rows],
    )


def _replicas(spark, *rows):
    return _frame(
        spark,
        SILVER_REPLICA_STATES,
        [dict(zip(("cluster_id", "collected_at", "replica_id", "is_voter"), r, strict=True)) for r in rows],
    )


def _partitions(spark, *rows):
    return _frame(
        spark, SILVER_PARTITION_STATES, [dict(zip(("cluster_id", "collected_at"), r, strict=True)) for r in rows]
    )


def test_a_cluster_row_holds_its_identity_latest_quorum_shape_and_time_span(spark):
    snapshots = _snapshots(spark, ("a", _t(1), None, 1, 3), ("a", _t(2), "kid-1", 2, 5), ("a", _t(3), None, 2, 4))
    rows = build_dim_cluster(snapshots, _partitions(spark, ("a", _t(0))), _metrics(spark, ("a", 1, _t(9), "broker")))
    assert [tuple(r) for r in rows.collect()] == [("a", "kid-1", 2, 4, None, None, None, None, _t(3), _t(0), _t(9))]


def test_a_cluster_row_takes_version_and_quorum_mode_from_its_latest_cohort_day(spark):
    cohorts = spark.createDataFrame(
        [
            ("a", date(2024, 10, 26), "3.9", "3.9-IV0", 7, 0, "static", _t(1)),
            ("a", date(2024, 10, 27), "4.1", "4.1-IV1", 27, 1, "dynamic", _t(2)),
        ],
        GOLD_CLUSTER_COHORTS.spark_schema,
    )
    held = build_dim_cluster(_snapshots(spark, ("a", _t(1), "kid", 2, 3)), cohorts=cohorts)
    row = held.first()
    assert (row["kafka_version"], row["metadata_version"], row["kraft_version"], row["quorum_mode"]) == (
        "4.1",
        "4.1-IV1",
        1,
        "dynamic",
    )
    # a later batch without cohort rows keeps what the held row says
    again = build_dim_cluster(metrics=_metrics(spark, ("a", 1, _t(9), "broker")), existing=held).first()
    assert (again["kafka_version"], again["quorum_mode"], again["last_seen_at"]) == ("4.1", "dynamic", _t(9))


def test_merging_a_batch_with_the_held_rows_equals_one_batch_of_everything(spark):
    first = _snapshots(spark, ("a", _t(1), "kid-1", 1, 3), ("b", _t(1), None, 1, 3))
    second = _snapshots(spark, ("a", _t(5), None, 2, 5), ("a", _t(0), None, 1, 3))
    held = build_dim_cluster(first)
    merged = build_dim_cluster(second, existing=held.where("cluster_id = 'a'"))
    whole = build_dim_cluster(first.unionByName(second)).where("cluster_id = 'a'")
    assert_df_equality(merged, whole, ignore_row_order=True)
    assert merged.first()["kafka_cluster_id"] == "kid-1" and merged.first()["voters"] == 5
    # replayed (a crash before gold recorded its progress): the same rows again
    assert_df_equality(build_dim_cluster(second, existing=merged), merged, ignore_row_order=True)


def test_a_node_row_holds_its_latest_role_and_quorum_membership(spark):
    replicas = _replicas(spark, ("a", _t(1), 1, True), ("a", _t(4), 1, False), ("a", _t(2), 2, True))
    metrics = _metrics(spark, ("a", 1, _t(3), "combined"), ("a", 1, _t(6), None), ("a", 3, _t(2), "broker"))
    rows = {(r["cluster_id"], r["node_id"]): r for r in build_dim_node(replicas, metrics).collect()}
    assert set(rows) == {("a", 1), ("a", 2), ("a", 3)}
    one = rows[("a", 1)]
    assert (one["node_role"], one["role_seen_at"], one["is_voter"], one["voter_seen_at"]) == (
        "combined",
        _t(3),
        False,
        _t(4),
    )
    assert (one["first_seen_at"], one["last_seen_at"]) == (_t(1), _t(6))
    assert rows[("a", 3)]["is_voter"] is None and rows[("a", 2)]["node_role"] is None
    merged = build_dim_node(
        metrics=_metrics(spark, ("a", 1, _t(8), "controller")), existing=build_dim_node(replicas, metrics)
    )
    again = {(r["cluster_id"], r["node_id"]): r for r in merged.collect()}[("a", 1)]
    assert (again["node_role"], again["is_voter"], again["last_seen_at"]) == ("controller", False, _t(8))
    assert set(GOLD_DIM_NODE.key) <= set(merged.columns) and set(GOLD_DIM_CLUSTER.key) <= set(merged.columns)


def test_the_date_dimension_is_a_calendar_without_gaps(spark):
    days = spark.createDataFrame([(date(2024, 12, 30),), (date(2025, 1, 5),), (date(2025, 1, 1),)], "date DATE")
    rows = build_dim_date(days).orderBy("date").collect()
    assert [r["date"] for r in rows] == [date(2024, 12, 30 + i) if i < 2 else date(2025, 1, i - 1) for i in range(7)]
    monday = rows[0]  # 2024-12-30 is the Monday of ISO week 1 of 2025
    assert (monday["day_of_week"], monday["day_name"], monday["iso_week"], monday["is_weekend"]) == (
        1,
        "Monday",
        1,
        False,
    )
    sunday = rows[-1]
    assert (sunday["day_of_week"], sunday["day_name"], sunday["is_weekend"], sunday["quarter"]) == (
        7,
        "Sunday",
        True,
        1,
    )
    assert rows[2]["month_name"] == "January" and rows[2]["year"] == 2025
    assert build_dim_date(spark.createDataFrame([], "date DATE")).count() == 0
