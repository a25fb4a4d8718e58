"""The star schema's informational keys (Unity Catalog): every foreign key names columns its table has and matches
the referenced dimension's primary key column for column and type; the statements add primary keys (their columns NOT
NULL first) before the foreign keys that need them, and only the constraints a table lacks."""

from __future__ import annotations

from quorumlake.contract.tables import GOLD_DIMENSIONS, GOLD_TABLES
from quorumlake.gold.keys import FOREIGN_KEYS, PRIMARY_KEYS, constraint_statements, primary_key_name


def _types(spec) -> dict[str, str]:
    return {name: sql_type for name, sql_type, _ in spec.columns}


def test_every_foreign_key_matches_the_primary_key_it_references():
    assert set(PRIMARY_KEYS) == set(GOLD_DIMENSIONS)
    for fk in FOREIGN_KEYS:
        assert fk.references in PRIMARY_KEYS
        assert len(fk.columns) == len(fk.references.key), fk.name
        for column, referenced in zip(fk.columns, fk.references.key, strict=True):
            assert _types(fk.table)[column] == _types(fk.references)[referenced], (fk.name, column)


def test_every_fact_table_with_a_cluster_refers_to_the_cluster_dimension():
    referring = {fk.table for fk in FOREIGN_KEYS if fk.references.table == "dim_cluster"}
    assert {spec for spec in GOLD_TABLES if "cluster_id" in _types(spec)} <= referring
    names = [fk.name for fk in FOREIGN_KEYS]
    assert len(names) == len(set(names)), "constraint names must be unique within the schema"


def test_the_statements_add_what_is_missing_primary_keys_first():
    def name_of(name: str) -> str:
        return f"main.gold.{name.split('.')[1]}"

    statements = constraint_statements(name_of, set())
    first_fk = next(i for i, s in enumerate(statements) if "FOREIGN KEY" in s)
    assert all("FOREIGN KEY" not in s for s in statements[:first_fk])
    assert all("FOREIGN KEY" in s for s in statements[first_fk:])
    assert "ALTER TABLE main.gold.dim_cluster ALTER COLUMN `cluster_id` SET NOT NULL" in statements
    assert "ALTER TABLE main.gold.dim_cluster ADD CONSTRAINT pk_dim_cluster PRIMARY KEY (`cluster_id`)" in statements
    assert (
        "ALTER TABLE main.gold.replica_lag_sli ADD CONSTRAINT fk_replica_lag_sli_dim_node FOREIGN KEY "
        "(`cluster_id`, `replica_id`) REFERENCES main.gold.dim_node (`cluster_id`, `node_id`)"
    ) in statements
    every = {primary_key_name(spec) for spec in PRIMARY_KEYS} | {fk.name for fk in FOREIGN_KEYS}
    assert constraint_statements(name_of, every) == []
    only_one = every - {"fk_quorum_status_dim_cluster"}
    assert constraint_statements(name_of, only_one) == [
        "ALTER TABLE main.gold.quorum_status ADD CONSTRAINT fk_quorum_status_dim_cluster FOREIGN KEY (`cluster_id`) "
        "REFERENCES main.gold.dim_cluster (`cluster_id`)"
    ]
