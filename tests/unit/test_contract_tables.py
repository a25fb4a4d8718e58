"""quorumlake.contract.tables: the registry's clustering keys are usable liquid-clustering keys for every table."""

from __future__ import annotations

import pytest

from quorumlake.contract.tables import ALL_TABLES, GOLD_CONTROLLER_HEALTH, GOLD_TABLES

CLUSTERABLE_TYPES = ("STRING", "INT", "BIGINT", "TIMESTAMP", "DATE", "BOOLEAN", "DOUBLE")


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda spec: spec.name)
def test_every_table_declares_clustering_on_its_own_columns(spec):
    types = {name: sql_type for name, sql_type, _ in spec.columns}
    assert spec.clustering, f"{spec.name} declares no clustering keys"
    assert 1 <= len(spec.clustering) <= 4, "Delta liquid clustering takes at most 4 columns"
    assert len(set(spec.clustering)) == len(spec.clustering)
    assert not spec.partitioned_by, "a table is either partitioned or clustered"
    for column in spec.clustering:
        assert column in types, f"{spec.name}: clustering column {column} is not a column"
        assert types[column] in CLUSTERABLE_TYPES, f"{spec.name}: {column} {types[column]} has no min/max statistics"


@pytest.mark.parametrize("spec", GOLD_TABLES, ids=lambda spec: spec.name)
def test_gold_tables_cluster_by_cluster_then_time(spec):
    assert spec.clustering[0] == "cluster_id"
    # a time: a TIMESTAMP, or the DATE of the tables kept per UTC day
    assert any(types in ("TIMESTAMP", "DATE") for name, types, _ in spec.columns if name in spec.clustering)


def test_controller_health_is_registered_with_commented_columns():
    assert GOLD_CONTROLLER_HEALTH in GOLD_TABLES
    assert GOLD_CONTROLLER_HEALTH.key == ("cluster_id", "node_id", "window_start")
    assert all(comment for _, _, comment in GOLD_CONTROLLER_HEALTH.columns)
