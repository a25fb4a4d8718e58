"""Gold's star schema as constraints: the dimensions' primary keys and the fact tables' foreign keys to them.

Unity Catalog keeps PRIMARY KEY and FOREIGN KEY constraints as information (it does not enforce them); BI tools read
them to join facts to dimensions without being told, and Databricks SQL can use them in planning. Open-source Delta
has no such constraints, so locally they exist only here and in docs/bi.md; on Databricks the gold task adds the ones
a table does not have yet (`quorumlake.pipelines.jobs.gold_job`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from quorumlake.contract.tables import (
    GOLD_CLUSTER_COHORTS,
    GOLD_CONTROLLER_HEALTH,
    GOLD_DIM_CLUSTER,
    GOLD_DIM_DATE,
    GOLD_DIM_NODE,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_REPLICA_LAG_SLI,
    GOLD_SLO_BUDGET,
    GOLD_TABLES,
    TableSpec,
)


@dataclass(frozen=True)
class ForeignKey:
    table: TableSpec
    columns: tuple[str, ...]
    references: TableSpec  # its primary key, column for column

    @property
    def name(self) -> str:
        return f"fk_{self.table.table}_{self.references.table}"


PRIMARY_KEYS: tuple[TableSpec, ...] = (GOLD_DIM_CLUSTER, GOLD_DIM_NODE, GOLD_DIM_DATE)

FOREIGN_KEYS: tuple[ForeignKey, ...] = (
    *(
        ForeignKey(fact, ("cluster_id",), GOLD_DIM_CLUSTER)
        # every fact table, and the node dimension: each gold table is a cluster's
        for fact in (*GOLD_TABLES, GOLD_DIM_NODE)
    ),
    *(ForeignKey(fact, ("day",), GOLD_DIM_DATE) for fact in (GOLD_SLO_BUDGET, GOLD_CLUSTER_COHORTS)),
    ForeignKey(GOLD_METADATA_OFFSET_DIVERGENCE, ("cluster_id", "node_id"), GOLD_DIM_NODE),
    ForeignKey(GOLD_CONTROLLER_HEALTH, ("cluster_id", "node_id"), GOLD_DIM_NODE),
    ForeignKey(GOLD_REPLICA_LAG_SLI, ("cluster_id", "replica_id"), GOLD_DIM_NODE),
    ForeignKey(GOLD_QUORUM_MEMBERSHIP, ("cluster_id", "node_id"), GOLD_DIM_NODE),
)


def primary_key_name(spec: TableSpec) -> str:
    return f"pk_{spec.table}"


def constraint_statements(name_of: Callable[[str], str], existing: set[str]) -> list[str]:
    """Databricks SQL that adds every constraint whose name is not in `existing` (primary keys first: a foreign
    key needs the key it references; a primary key's columns must be NOT NULL first)."""
    statements = []
    for spec in PRIMARY_KEYS:
        if primary_key_name(spec) in existing:
            continue
        table = name_of(spec.name)
        statements += [f"ALTER TABLE {table} ALTER COLUMN `{column}` SET NOT NULL" for column in spec.key]
        columns = ", ".join(f"`{c}`" for c in spec.key)
        statements.append(f"ALTER TABLE {table} ADD CONSTRAINT {primary_key_name(spec)} PRIMARY KEY ({columns})")
    for fk in FOREIGN_KEYS:
        if fk.name in existing:
            continue
        columns = ", ".join(f"`{c}`" for c in fk.columns)
        referenced = ", ".join(f"`{c}`" for c in fk.references.key)
        statements.append(
            f"ALTER TABLE {name_of(fk.table.name)} ADD CONSTRAINT {fk.name} FOREIGN KEY ({columns}) "
            f"REFERENCES {name_of(fk.references.name)} ({referenced})"
        )
    return statements
