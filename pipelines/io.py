"""Every read, write, MERGE and checkpoint of the lakehouse, in one place.

Locally each table is an external Delta table at `<warehouse>/<schema>/<table>`, registered by name at session start
(cheap and idempotent), so `bronze.quorum_raw` resolves in every process without a metastore. On Databricks the
tables are Unity Catalog managed tables `<catalog>.<schema>.<table>`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze.raw import BINARY_FILE_SCHEMA
from pipelines.config import Config, join_path
from pipelines.tables import SCHEMAS, TableSpec


class Lakehouse:
    """The tables and checkpoints of one warehouse, seen through one Spark session."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config

    # --- names and places ---------------------------------------------------------------------------------------

    def table_name(self, spec: TableSpec) -> str:
        return f"{self.schema_name(spec.schema)}.{spec.table}"

    def schema_name(self, schema: str) -> str:
        name = f"{self.config.schema_prefix}{schema}"
        return f"{self.config.catalog}.{name}" if self.config.catalog else name

    def table_path(self, spec: TableSpec) -> str:
        return join_path(_absolute(self.config.warehouse), spec.schema, spec.table)

    def checkpoint(self, *parts: str) -> str:
        return join_path(_absolute(self.config.checkpoints), *parts)

    # --- registration -------------------------------------------------------------------------------------------

    def ensure_tables(self, specs: tuple[TableSpec, ...]) -> None:
        """Create (or just register) every schema and table; safe to call at every start."""
        for schema in SCHEMAS:
            if self.config.catalog:
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)}")
            else:
                location = join_path(_absolute(self.config.warehouse), schema)
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)} LOCATION '{location}'")
        for spec in specs:
            partitioning = f" PARTITIONED BY ({', '.join(spec.partitioned_by)})" if spec.partitioned_by else ""
            location = "" if self.config.catalog else f" LOCATION '{self.table_path(spec)}'"
            comment = spec.comment.replace("'", "\\'")
            marker = f"quorumlake.registered.{self.table_name(spec)}"
            if not self.config.catalog:
                if self.spark.conf.get(marker, None) == self.table_path(spec):
                    continue  # registered at this location earlier in this session
                # Local names live in this process's in-memory catalog: (re)point them at this warehouse.
                # Dropping an external table leaves its Delta folder untouched.
                self.spark.sql(f"DROP TABLE IF EXISTS {self.table_name(spec)}")
            props = ""
            if spec.properties:
                props = " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in spec.properties) + ")"
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {self.table_name(spec)} ({spec.ddl}) USING DELTA"
                f"{partitioning}{location} COMMENT '{comment}'{props}"
            )
            if not self.config.catalog:
                self.spark.conf.set(marker, self.table_path(spec))

    def read(self, spec: TableSpec) -> DataFrame:
        return self.spark.table(self.table_name(spec))

    def stream_table(self, spec: TableSpec, consumer: str, on_batch: Callable[[DataFrame, int], None],
                     change_feed: bool = False) -> None:
        """Hand the rows a table gained since `consumer` last ran to `on_batch` (availableNow, one checkpoint per
        consumer). With `change_feed`, the rows are Delta change-data-feed rows (`_change_type`, ...)."""
        reader = self.spark.readStream.format("delta")
        if change_feed:
            reader = reader.option("readChangeFeed", "true")
        query = (
            reader.table(self.table_name(spec))
            .writeStream.queryName(f"{consumer}_from_{spec.schema}_{spec.table}")
            .foreachBatch(on_batch)
            .option("checkpointLocation", self.checkpoint(consumer, f"{spec.schema}.{spec.table}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    # --- writes -------------------------------------------------------------------------------------------------

    def insert_new(self, spec: TableSpec, rows: DataFrame) -> None:
        """Insert the rows whose key the table does not hold yet; rows already there are left as they are."""
        key = list(spec.key)
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key)
        source = rows.select(*spec.column_names).dropDuplicates(key)
        (
            DeltaTable.forName(self.spark, self.table_name(spec)).alias("t")
            .merge(source.alias("s"), condition)
            .whenNotMatchedInsertAll()
            .execute()
        )

    def replace_groups(self, spec: TableSpec, rows: DataFrame, groups: DataFrame) -> None:
        """Make the table hold exactly `rows` for every group in `groups` (a DataFrame of group-key columns)."""
        cols = groups.columns
        self.replace_scope(spec, rows, groups.select(*cols).distinct(), lambda t, g: _null_safe(t, g, cols))

    def replace_scope(self, spec: TableSpec, rows: DataFrame, scope: DataFrame,
                      match: Callable[[DataFrame, DataFrame], object]) -> None:
        """Make the table hold exactly `rows` within `scope`, in one atomic MERGE.

        A target row is in scope when `match(target, scope)` holds for some scope row. Changed rows are updated,
        new ones inserted, rows in scope that `rows` no longer has are deleted; unchanged rows are not touched, so a
        re-run writes nothing new."""
        key = list(spec.key)
        target = self.read(spec)
        data = [c for c in spec.column_names if c not in key]
        wanted = rows.select(*spec.column_names)
        new_keys = wanted.select(*key)
        # Rows the table already holds exactly are left out, so their files are not rewritten.
        changed_rows = wanted.join(target, _null_safe(wanted, target, spec.column_names), "left_anti")
        source = changed_rows.withColumn("_delete", F.lit(False))
        in_scope = target.join(scope, match(target, scope), "left_semi")
        stale = (
            in_scope.join(new_keys, _null_safe(in_scope, new_keys, key), "left_anti")
            .select(*spec.column_names)
            .withColumn("_delete", F.lit(True))
        )
        changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in data) or "false"
        merge_source = source.unionByName(stale).persist()
        try:
            if merge_source.count() == 0:  # a full pass: the MERGE then reads the cached rows
                return
            self._merge_replace(spec, merge_source, key, data, changed)
        finally:
            merge_source.unpersist()

    def _merge_replace(self, spec: TableSpec, source: DataFrame, key: list[str], data: list[str], changed: str) -> None:
        (
            DeltaTable.forName(self.spark, self.table_name(spec)).alias("t")
            .merge(source.alias("s"), " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in key))
            .whenMatchedDelete(condition="s._delete")
            .whenMatchedUpdate(condition=changed, set={c: f"s.`{c}`" for c in data})
            .whenNotMatchedInsert(condition="NOT s._delete", values={c: f"s.`{c}`" for c in spec.column_names})
            .execute()
        )

    def append(self, spec: TableSpec, rows: DataFrame) -> None:
        rows.select(*spec.column_names).write.format("delta").mode("append").saveAsTable(self.table_name(spec))

    # --- landing --------------------------------------------------------------------------------------------------

    def landing_path(self, source: str) -> str:
        return join_path(self.config.landing, source)

    def stream_landing_files(self, source: str, on_batch: Callable[[DataFrame], None]) -> None:
        """Hand every landing file of `source` not seen by an earlier run to `on_batch`, in bounded batches.

        The streaming checkpoint records which files were handed over; `on_batch` must be idempotent, because a
        batch whose run crashed before the checkpoint commit is handed over again.
        """
        path = self.landing_path(source)
        if self.config.ingest_mode == "autoloader":
            reader = (
                self.spark.readStream.format("cloudFiles")
                .option("cloudFiles.format", "binaryFile")
                .option("cloudFiles.schemaLocation", self.checkpoint("bronze", source, "_schema"))
                .option("cloudFiles.maxFilesPerTrigger", str(self.config.max_files_per_trigger))
                .option("cloudFiles.includeExistingFiles", "true")
            )
        else:
            reader = (
                self.spark.readStream.format("binaryFile")
                .schema(BINARY_FILE_SCHEMA)
                .option("recursiveFileLookup", "true")
                .option("maxFilesPerTrigger", str(self.config.max_files_per_trigger))
            )
        query = (
            reader.load(path)
            .writeStream.queryName(f"bronze_{source}")
            .foreachBatch(lambda batch, _batch_id: on_batch(batch))
            .option("checkpointLocation", self.checkpoint("bronze", source))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    def empty_landing_files(self, source: str) -> DataFrame:
        """The zero-byte files of `source`, shaped like binaryFile rows.

        Spark's file sources skip zero-byte files, so they never reach a stream; this listing catches them, and
        the MERGE key (which uses the path for empty files) keeps a re-run from adding them twice.
        """
        root = Path(self.landing_path(source))
        rows = []
        if root.is_dir():
            for directory, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
                for name in files:
                    if name.startswith((".", "_")):
                        continue
                    p = Path(directory) / name
                    stat = p.stat()
                    if stat.st_size == 0:
                        rows.append((_spark_file_uri(p), datetime.fromtimestamp(stat.st_mtime), 0, bytearray()))
        return self.spark.createDataFrame(rows, BINARY_FILE_SCHEMA)

    # --- reporting -------------------------------------------------------------------------------------------------

    def count_ingested(self, spec: TableSpec, run_at: datetime) -> tuple[int, int]:
        """Rows this run added to a bronze table, and how many of them carry a parse error."""
        row = (
            self.read(spec)
            .where(F.col("ingested_at") == F.lit(run_at))
            .agg(F.count(F.lit(1)).alias("rows"), F.count("parse_error").alias("errors"))
            .first()
        )
        return int(row["rows"]), int(row["errors"])


def _null_safe(left: DataFrame, right: DataFrame, cols: list[str]):
    """A join condition on `cols` that treats NULL = NULL (keys with optional parts such as topic/partition)."""
    condition = None
    for c in cols:
        term = left[c].eqNullSafe(right[c])
        condition = term if condition is None else condition & term
    return condition


def _absolute(path: str) -> str:
    if "://" in path or path.startswith(("dbfs:", "/Volumes/")):
        return path.rstrip("/")
    return str(Path(path).absolute())


def _spark_file_uri(p: Path) -> str:
    """The path as Spark's file sources spell it (`file:/abs/path`)."""
    absolute = str(p.absolute())
    if absolute.startswith("/Volumes/"):
        return "dbfs:" + absolute
    return "file:" + absolute
