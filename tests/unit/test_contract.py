"""The contract in code: every layer's `build_*` function returns exactly the columns, in order, and the types its
table declares in the registry (`quorumlake.contract.tables`), and every quarantine row it rejects has silver.quarantine's.

Each builder is given empty inputs shaped like the tables it reads (their declared schemas), so only Spark's
analysis runs: no job, no data. Nullability is not compared (Delta keeps the declared one on write).
"""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import DataFrame

from quorumlake.bronze.raw import BINARY_FILE_SCHEMA, FORMATS, build_raw_records
from quorumlake.contract import tables as t
from quorumlake.gold.anomalies import build_episodes
from quorumlake.gold.brokers import build_broker_registrations
from quorumlake.gold.cohorts import build_cluster_cohorts
from quorumlake.gold.controller import build_controller_health
from quorumlake.gold.dims import build_dim_cluster, build_dim_date, build_dim_node
from quorumlake.gold.divergence import build_metadata_offset_divergence
from quorumlake.gold.incidents import build_incident_events, build_incidents, group_episodes
from quorumlake.gold.isr import build_at_min_isr_episodes, build_isr_health, build_isr_health_by_topic
from quorumlake.gold.membership import (
    build_leader_events,
    build_membership_events,
    build_quorum_membership,
    membership_rows,
)
from quorumlake.gold.quorum import build_quorum_health, build_quorum_status
from quorumlake.gold.replicas import build_replica_lag_sli
from quorumlake.gold.slo import build_slo_budget, build_slo_burn, daily_counts, quorum_lag_events, window_counts
from quorumlake.silver.common import QUARANTINE_COLUMNS
from quorumlake.silver.metrics import build_node_metrics
from quorumlake.silver.partitions import build_partition_states
from quorumlake.silver.quorum import build_quorum_snapshots

RUN_AT = datetime(2026, 11, 26, 12, 0)
OBJECTIVES = {"quorum_lag": 0.999, "write_availability": 0.999, "metadata_freshness": 0.99}


def _empty(spark, spec: t.TableSpec) -> DataFrame:
    return spark.createDataFrame([], spec.spark_schema)


def _shape(df: DataFrame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _declared(spark, spec: t.TableSpec, drop: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    return [c for c in _shape(_empty(spark, spec)) if c[0] not in drop]


def _outputs(spark) -> list[tuple[str, t.TableSpec, DataFrame]]:
    """(builder, the table it builds, its output on empty inputs) for every builder of every layer."""
    e = lambda spec: _empty(spark, spec)
    files = spark.createDataFrame([], BINARY_FILE_SCHEMA)
    snapshots, replicas, _ = build_quorum_snapshots(e(t.BRONZE_QUORUM_RAW))
    partitions, _ = build_partition_states(e(t.BRONZE_PARTITIONS_RAW))
    metrics, _ = build_node_metrics(e(t.BRONZE_METRICS_RAW))
    status = build_quorum_status(
        e(t.SILVER_QUORUM_SNAPSHOTS),
        e(t.SILVER_REPLICA_STATES),
        e(t.GOLD_QUORUM_STATUS),
        slo_ms=5000,
        window_minutes=5,
        stall_ms=30000,
    )
    silver_partitions = e(t.SILVER_PARTITION_STATES)
    silver_metrics = e(t.SILVER_NODE_METRICS)
    burn, budget = e(t.GOLD_SLO_BURN), e(t.GOLD_SLO_BUDGET)
    members = membership_rows(e(t.SILVER_REPLICA_STATES))
    grouped = group_episodes(
        build_episodes(
            partitions=silver_partitions,
            replicas=e(t.SILVER_REPLICA_STATES),
            metrics=silver_metrics,
            status=e(t.GOLD_QUORUM_STATUS),
            events=e(t.GOLD_QUORUM_EVENTS),
            divergence=e(t.GOLD_METADATA_OFFSET_DIVERGENCE),
        ),
        2,
    )
    latest = spark.createDataFrame([], "cluster_id STRING, latest_at TIMESTAMP")
    return [
        *(
            (f"build_raw_records({source!r})", spec, build_raw_records(files, source, RUN_AT))
            for source, spec in t.BRONZE_SOURCES.items()
        ),
        ("build_quorum_snapshots[0]", t.SILVER_QUORUM_SNAPSHOTS, snapshots),
        ("build_quorum_snapshots[1]", t.SILVER_REPLICA_STATES, replicas),
        ("build_partition_states[0]", t.SILVER_PARTITION_STATES, partitions),
        ("build_node_metrics[0]", t.SILVER_NODE_METRICS, metrics),
        ("build_quorum_status", t.GOLD_QUORUM_STATUS, status),
        ("build_quorum_health", t.GOLD_QUORUM_HEALTH, build_quorum_health(e(t.GOLD_QUORUM_STATUS), 5)),
        (
            "build_replica_lag_sli",
            t.GOLD_REPLICA_LAG_SLI,
            build_replica_lag_sli(e(t.SILVER_REPLICA_STATES), slo_ms=5000, window_minutes=5),
        ),
        ("build_isr_health", t.GOLD_ISR_HEALTH, build_isr_health(silver_partitions)),
        ("build_isr_health_by_topic", t.GOLD_ISR_HEALTH_BY_TOPIC, build_isr_health_by_topic(silver_partitions)),
        ("build_at_min_isr_episodes", t.GOLD_AT_MIN_ISR_EPISODES, build_at_min_isr_episodes(silver_partitions)),
        (
            "build_metadata_offset_divergence",
            t.GOLD_METADATA_OFFSET_DIVERGENCE,
            build_metadata_offset_divergence(silver_metrics, 1000),
        ),
        ("build_controller_health", t.GOLD_CONTROLLER_HEALTH, build_controller_health(silver_metrics, 5)),
        (
            "build_broker_registrations",
            t.GOLD_BROKER_REGISTRATIONS,
            build_broker_registrations(silver_metrics, e(t.GOLD_BROKER_REGISTRATIONS), 5),
        ),
        (
            "build_slo_burn",
            t.GOLD_SLO_BURN,
            build_slo_burn(burn, window_counts(quorum_lag_events(status, 2000), "quorum_lag"), burn, OBJECTIVES),
        ),
        ("build_slo_budget", t.GOLD_SLO_BUDGET, build_slo_budget(budget, daily_counts(burn), budget, OBJECTIVES)),
        (
            "build_cluster_cohorts",
            t.GOLD_CLUSTER_COHORTS,
            build_cluster_cohorts(e(t.SILVER_QUORUM_SNAPSHOTS), e(t.SILVER_REPLICA_STATES)),
        ),
        (
            "build_dim_cluster",
            t.GOLD_DIM_CLUSTER,
            build_dim_cluster(
                e(t.SILVER_QUORUM_SNAPSHOTS),
                silver_partitions,
                silver_metrics,
                e(t.GOLD_DIM_CLUSTER),
                e(t.GOLD_CLUSTER_COHORTS),
            ),
        ),
        ("build_quorum_membership", t.GOLD_QUORUM_MEMBERSHIP, build_quorum_membership(members)),
        ("build_membership_events", t.GOLD_QUORUM_EVENTS, build_membership_events(members)),
        ("build_leader_events", t.GOLD_QUORUM_EVENTS, build_leader_events(e(t.SILVER_QUORUM_SNAPSHOTS))),
        ("build_incidents", t.GOLD_INCIDENTS, build_incidents(grouped, e(t.GOLD_ISR_HEALTH), latest)),
        ("build_incident_events", t.GOLD_INCIDENT_EVENTS, build_incident_events(grouped)),
        ("build_dim_node", t.GOLD_DIM_NODE, build_dim_node(e(t.SILVER_REPLICA_STATES), silver_metrics)),
        ("build_dim_date", t.GOLD_DIM_DATE, build_dim_date(spark.createDataFrame([], "date DATE"))),
    ]


@pytest.fixture(scope="module")
def outputs(spark):
    return {name: (spec, df) for name, spec, df in _outputs(spark)}


# Tables written by the jobs rather than by a layer builder: the run ledgers and the data-quality results.
NOT_BUILT = {t.BRONZE_INGEST_RUNS, t.PIPELINE_RUNS, t.SILVER_QUARANTINE, t.SILVER_DQ_VALIDATIONS}


def test_every_table_has_a_builder_or_is_written_by_a_job(outputs):
    built = {spec for spec, _ in outputs.values()}
    assert built | NOT_BUILT == set(t.ALL_TABLES)
    assert not built & NOT_BUILT


def test_every_builder_returns_its_tables_columns_and_types(spark, outputs):
    wrong = {
        name: {"built": _shape(df), "declared": _declared(spark, spec)}
        for name, (spec, df) in outputs.items()
        if _shape(df) != _declared(spark, spec)
    }
    assert not wrong, wrong


def test_every_rejecting_builder_returns_quarantine_rows(spark):
    """The rejects of the three silver builders, once the job stamps `quarantined_at`, are silver.quarantine rows."""
    declared = _declared(spark, t.SILVER_QUARANTINE, drop=("quarantined_at",))
    assert [name for name, _ in declared] == QUARANTINE_COLUMNS
    rejects = {
        "quorum": build_quorum_snapshots(_empty(spark, t.BRONZE_QUORUM_RAW))[2],
        "partitions": build_partition_states(_empty(spark, t.BRONZE_PARTITIONS_RAW))[1],
        "metrics": build_node_metrics(_empty(spark, t.BRONZE_METRICS_RAW))[1],
    }
    assert {source: _shape(df) for source, df in rejects.items()} == dict.fromkeys(rejects, declared)


def test_every_landing_source_has_a_bronze_table():
    assert set(t.BRONZE_SOURCES) == set(FORMATS)


def test_a_gold_table_is_built_by_the_builder_of_its_name(outputs):
    """`gold.<name>` is built by `build_<name>` (how the README tells a reader to find a table's builder)."""
    gold: dict[str, set[str]] = {}
    for name, (spec, _) in outputs.items():
        if spec.schema == "gold":
            gold.setdefault(spec.name, set()).add(name)
    expected = {spec.name: {f"build_{spec.table}"} for spec in (*t.GOLD_TABLES, *t.GOLD_DIMENSIONS)}
    # gold.quorum_events has two builders, written by separate steps: membership changes (from replica states) and
    # leader elections (from quorum snapshots)
    expected[t.GOLD_QUORUM_EVENTS.name] = {"build_membership_events", "build_leader_events"}
    assert gold == expected


def test_a_gold_round_keeps_columns_its_silver_tables_have_and_the_dimensions_need(spark):
    """A gold round keeps only `CHANGED_COLUMNS` of each silver table's changes: they are columns of that table, and
    the dimension builders (the steps that read changed rows beyond their keys and times) analyze over them alone."""
    from quorumlake.pipelines.jobs.gold_job import CHANGED_COLUMNS, SOURCES

    assert set(CHANGED_COLUMNS) == {spec.name for spec in SOURCES}
    for spec in SOURCES:
        assert set(CHANGED_COLUMNS[spec.name]) <= set(spec.column_names), spec.name

    def changed(spec):
        return _empty(spark, spec).select(*CHANGED_COLUMNS[spec.name])

    snapshots, replicas = changed(t.SILVER_QUORUM_SNAPSHOTS), changed(t.SILVER_REPLICA_STATES)
    partitions, metrics = changed(t.SILVER_PARTITION_STATES), changed(t.SILVER_NODE_METRICS)
    cluster = build_dim_cluster(
        snapshots, partitions, metrics, _empty(spark, t.GOLD_DIM_CLUSTER), _empty(spark, t.GOLD_CLUSTER_COHORTS)
    )
    node = build_dim_node(replicas, metrics, _empty(spark, t.GOLD_DIM_NODE))
    assert _shape(cluster) == _declared(spark, t.GOLD_DIM_CLUSTER)
    assert _shape(node) == _declared(spark, t.GOLD_DIM_NODE)
