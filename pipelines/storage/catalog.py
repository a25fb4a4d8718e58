"""The lakehouse's names and places, and its tables' creation and registration: where each table lives, what SQL
calls it, and bringing every table to the definition the registry (`quorumlake.contract.tables`) declares. Tables
are created by Delta (`CREATE TABLE`), a few at a time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from deltalake import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from quorumlake.contract.tables import LAYERS, TableSpec, by_name, sql_string
from quorumlake.pipelines.config import Config, join_path


class Catalog:
    """Names, places, creation and registration of the tables (a part of `Lakehouse`)."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config

    # --- names and places ---------------------------------------------------------------------------------------------

    def table_name(self, spec: TableSpec) -> str:
        return f"{self.schema_name(spec.schema)}.{spec.table}"

    def schema_name(self, schema: str) -> str:
        name = f"{self.config.schema_prefix}{schema}"
        return f"{self.config.catalog}.{name}" if self.config.catalog else name

    def name_of(self, name: str) -> str:
        """This lakehouse's name for a contract object: a table (`gold.quorum_status`) or a view
        (`gold.v_fleet_overview`)."""
        try:
            return self.table_name(by_name(name))
        except KeyError:
            schema, obj = name.split(".")
            return f"{self.schema_name(schema)}.{obj}"

    def table_path(self, spec: TableSpec) -> str:
        return join_path(absolute(self.config.warehouse), spec.schema, spec.table)

    def checkpoint(self, *parts: str) -> str:
        return join_path(absolute(self.config.checkpoints), *parts)

    def ref(self, spec: TableSpec) -> str:
        """How SQL names the table in this lakehouse: its catalog name, or locally `delta.`<path>`` (no catalog
        lookup, no registration needed)."""
        return self.table_name(spec) if self.config.catalog else f"delta.`{self.table_path(spec)}`"

    def local_path(self, spec: TableSpec) -> str | None:
        """The table's folder on this machine's file system (a path without a scheme, or a `file:` URI), where the
        driver reads its Delta log with delta-rs; None for a table of a catalog or on remote storage."""
        if self.config.catalog:
            return None
        path = self.table_path(spec)
        if "://" in path and not path.startswith("file:"):
            return None
        return path.removeprefix("file://").removeprefix("file:")

    # --- creation and registration ------------------------------------------------------------------------------------

    def create_missing(self, specs: tuple[TableSpec, ...]) -> list[TableSpec]:
        """Create, as declared, the tables of `specs` that do not exist yet (locally; a catalog's are registered by
        name, which creates them); returns the ones created."""
        if self.config.catalog:
            self.register_names(specs)
            return []
        missing = [spec for spec in specs if not self.exists(spec)]
        for spec in missing:
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.ref(spec)} {_declared(spec)}")
        return missing

    def set_declared_properties(self, specs: list[TableSpec]) -> None:
        """Set the properties the tables declare (e.g. the change data feed that silver reads bronze by)."""
        for spec in specs:
            if spec.properties:
                self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")

    def evolve(self, spec: TableSpec, schema: StructType) -> None:
        """Bring the table (whose current `schema` is given) to its declared definition: add the declared columns it
        lacks, update changed column comments, table properties and clustering. Only what differs is committed."""
        actual = {f.name: f for f in schema.fields}
        missing = [(n, t, c) for n, t, c in spec.columns if n not in actual]
        if missing:
            columns = ", ".join(f"`{n}` {t} COMMENT '{sql_string(c)}'" for n, t, c in missing)
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} ADD COLUMNS ({columns})")
        for name, _, comment in spec.columns:
            if name in actual and actual[name].metadata.get("comment", "") != comment:
                self.spark.sql(f"ALTER TABLE {self.ref(spec)} ALTER COLUMN `{name}` COMMENT '{sql_string(comment)}'")
        clustered = bool(spec.clustering) and not spec.partitioned_by
        if not spec.properties and not clustered:
            return
        # each ALTER is a commit: properties and clustering are set only where they differ
        detail = self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").first()
        held = dict(detail["properties"] or {})
        if any(held.get(key) != value for key, value in spec.properties or ()):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")
        if clustered and list(detail["clusteringColumns"] or []) != list(spec.clustering):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} CLUSTER BY ({', '.join(spec.clustering)})")

    def exists(self, spec: TableSpec) -> bool:
        """Whether the table exists (locally: its folder holds a Delta log with a commit, asked of delta-rs)."""
        local = self.local_path(spec)
        if local is not None:
            return DeltaTable.is_deltatable(local)
        try:
            self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").select("format").first()
        except AnalysisException:  # no table there (or not a Delta table)
            return False
        return True

    def register_names(self, specs: tuple[TableSpec, ...]) -> None:
        """Create (or just register) every schema and table by name, so SQL users find `gold.quorum_status`."""
        for schema in LAYERS:
            if self.config.catalog:
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)}")
            else:
                location = join_path(absolute(self.config.warehouse), schema)
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)} LOCATION '{location}'")
        for spec in specs:
            if self.config.catalog:
                self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.table_name(spec)} {_declared(spec)}")
                continue
            path, marker = self.table_path(spec), f"quorumlake.registered.{self.table_name(spec)}"
            if self.spark.conf.get(marker, None) == path:
                continue  # registered at this location earlier in this session
            # Local names live in this process's in-memory catalog: (re)point them at this warehouse.
            # Dropping an external table leaves its Delta folder untouched.
            self.spark.sql(f"DROP TABLE IF EXISTS {self.table_name(spec)}")
            if self.exists(spec):
                # the name only: columns, comments, clustering and properties are the table's own, in its log
                # (declared again, Delta would compare each with the log)
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} USING DELTA LOCATION '{path}'")
            else:
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} {_declared(spec, path)}")
            self.spark.conf.set(marker, path)

    def define_views(self, statements: list[str]) -> None:
        """Run `CREATE OR REPLACE VIEW` statements (the gold views, their names already resolved by `name_of`)."""
        for statement in statements:
            self.spark.sql(statement)


def registry_fingerprint(specs: tuple[TableSpec, ...]) -> str:
    text = "\n".join(f"{s.name}|{s.ddl}|{s.comment}|{s.properties}|{s.partitioned_by}|{s.clustering}" for s in specs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _declared(spec: TableSpec, location: str | None = None) -> str:
    """What CREATE TABLE says after the table's name: its columns, layout, location (if given), comment and
    properties."""
    where = f" LOCATION '{location}'" if location else ""
    comment = sql_string(spec.comment)
    return f"({spec.ddl}) USING DELTA{_partitioning(spec)}{where} COMMENT '{comment}'{_properties(spec)}"


def _partitioning(spec: TableSpec) -> str:
    """PARTITIONED BY, or the liquid-clustering keys the table declares (`CLUSTER BY`: compaction and OPTIMIZE keep
    rows of one cluster and time range in the same files, which the bounded reads and MERGEs skip by)."""
    if spec.partitioned_by:
        return f" PARTITIONED BY ({', '.join(spec.partitioned_by)})"
    return f" CLUSTER BY ({', '.join(spec.clustering)})" if spec.clustering else ""


def _properties(spec: TableSpec) -> str:
    if not spec.properties:
        return ""
    return " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in spec.properties) + ")"


def absolute(path: str) -> str:
    if "://" in path or path.startswith(("dbfs:", "/Volumes/")):
        return path.rstrip("/")
    return str(Path(path).absolute())
