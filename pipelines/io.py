"""Every read, write, MERGE and checkpoint of the lakehouse, in one place.

Locally each table is an external Delta table at `<warehouse>/<schema>/<table>`, registered by name at session start
(cheap and idempotent), so `bronze.quorum_raw` resolves in every process without a metastore. On Databricks the
tables are Unity Catalog managed tables `<catalog>.<schema>.<table>`.

Everything here is plain Spark (DataFrames and SQL), so it runs the same on a classic session and through Spark
Connect (Databricks serverless): MERGEs are SQL `MERGE INTO` statements whose source is a temporary view of the
DataFrame, and a table's history is `DESCRIBE HISTORY`. Delta's Python `DeltaTable` API is not used, because over
Spark Connect it needs Delta's Connect plugin on the server, which Maven Central does not publish for Delta 4.4 on
Spark 4.2.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze.raw import BINARY_FILE_SCHEMA
from pipelines.autoloader import AUTOLOADER_OPTIONS
from pipelines.config import Config, join_path
from pipelines.landing import Folder, is_local
from pipelines.session import cached, is_connect, release
from pipelines.tables import PIPELINE_RUNS, SCHEMAS, TableSpec


class Lakehouse:
    """The tables and checkpoints of one warehouse, seen through one Spark session."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config
        self._progress_rows: dict[str, dict[str, tuple[int, str | None]]] | None = None
        # progress records not written yet: they go with the next `save_progress` commit (see `_migrate`)
        self._unsaved: dict[str, tuple[dict[str, int], dict[str, str]]] = {}
        # a full refresh reads whole tables, whatever the landing zone's new data: about this many landing bytes' worth
        # (None: unknown, so Spark's defaults); 0 outside a full refresh
        self.rebuild_bytes: int | None = 0

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

    def ref(self, spec: TableSpec) -> str:
        """How SQL names the table in this lakehouse: its catalog name, or locally `delta.`<path>`` (no catalog
        lookup, no registration needed)."""
        return self.table_name(spec) if self.config.catalog else f"delta.`{self.table_path(spec)}`"

    # --- creation and registration ------------------------------------------------------------------------------

    def ensure_tables(self, specs: tuple[TableSpec, ...]) -> None:
        """Create the tables that do not exist yet; cheap when they all do (locally a look at each `_delta_log`)."""
        if self.config.catalog:
            self.register_names(specs)
            return
        missing = [spec for spec in specs if not self._exists(spec)]
        migrating = PIPELINE_RUNS in missing and len(missing) < len(specs)

        templates = self._templates()

        def create(spec: TableSpec) -> None:
            if templates is not None and templates.create(spec, self.table_path(spec)):
                return
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.ref(spec)} {_declared(spec)}")
            if templates is not None:
                templates.keep(spec, self.table_path(spec))

        # Each CREATE is one small commit, mostly waiting: a new warehouse's tables are created four at a time.
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(create, missing))
        if PIPELINE_RUNS in missing:
            self._progress_rows = {}  # just created: no consumer has progress yet (nothing to read)
        if migrating:
            # A warehouse built before run bookkeeping existed: turn on what the tables now declare (e.g. the change
            # data feed that silver reads bronze by).
            for spec in specs:
                if spec.properties and spec not in missing:
                    self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")
        if PIPELINE_RUNS in specs:
            self._migrate(specs, missing)

    def _migrate(self, specs: tuple[TableSpec, ...], created: list[TableSpec]) -> None:
        """Bring existing tables to their declared definition (new columns, comments, properties) when the
        registry changed since the last run; a hash of the registry is kept in `bronze.pipeline_runs`, so this
        costs nothing while the definitions stay the same."""
        fingerprint = registry_fingerprint(specs)
        if self.fingerprint("registry", "tables") == fingerprint:
            return
        for spec in specs:
            if spec not in created:
                self.evolve(spec)
        record = ({"tables": len(specs)}, {"tables": fingerprint})
        if len(created) == len(specs):
            # A new warehouse: its tables are as declared whether this is recorded or not, so the record waits for
            # the run's first progress commit instead of being a commit of its own (in a new process, the JVM's
            # first write: ~5 s of a demo's run). Lost with a run killed before that commit, it costs the next run
            # the look at each table above, nothing else.
            self._unsaved["registry"] = record
            self._remember("registry", *record)
        else:
            self.save_progress("registry", *record)

    def evolve(self, spec: TableSpec) -> None:
        """Add declared columns the table lacks and update changed column comments and table properties."""
        actual = {f.name: f for f in self.read(spec).schema.fields}
        missing = [(n, t, c) for n, t, c in spec.columns if n not in actual]
        if missing:
            columns = ", ".join(f"`{n}` {t} COMMENT '{_sql_str(c)}'" for n, t, c in missing)
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} ADD COLUMNS ({columns})")
        for name, _, comment in spec.columns:
            if name in actual and actual[name].metadata.get("comment", "") != comment:
                self.spark.sql(f"ALTER TABLE {self.ref(spec)} ALTER COLUMN `{name}` COMMENT '{_sql_str(comment)}'")
        clustered = bool(spec.clustering) and not spec.partitioned_by
        if not spec.properties and not clustered:
            return
        # properties and clustering are set only where they differ: each ALTER is a commit, and a warehouse whose
        # record of its definitions was lost (a first run killed before its first progress commit) is as declared
        detail = self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").first()
        held = dict(detail["properties"] or {})
        if any(held.get(key) != value for key, value in spec.properties or ()):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")
        if clustered and list(detail["clusteringColumns"] or []) != list(spec.clustering):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} CLUSTER BY ({', '.join(spec.clustering)})")

    def _templates(self) -> TableTemplates | None:
        """The machine's table templates, for a local session this process started itself (not Databricks, not Spark
        Connect: there the files may be on another machine, and the session's defaults are not ours)."""
        from pipelines.session import on_databricks, templates_home

        if on_databricks() or is_connect(self.spark) or "://" in self.table_path(PIPELINE_RUNS):
            return None
        # settings that Delta writes into a new table's definition (default table properties) are part of its template
        defaults = sorted((k, v) for k, v in self.spark.conf.getAll.items() if k.startswith(_DELTA_DEFAULTS))
        return TableTemplates(templates_home(), repr(defaults))

    def _exists(self, spec: TableSpec) -> bool:
        path = self.table_path(spec)
        if "://" not in path:
            return os.path.isdir(os.path.join(path, "_delta_log"))
        try:
            self.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("format").first()
        except AnalysisException:  # no table there (or not a Delta table)
            return False
        return True

    def register_names(self, specs: tuple[TableSpec, ...]) -> None:
        """Create (or just register) every schema and table by name, so SQL users find `gold.quorum_status`."""
        for schema in SCHEMAS:
            if self.config.catalog:
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)}")
            else:
                location = join_path(_absolute(self.config.warehouse), schema)
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
            if self._exists(spec):
                # the name only: columns, comments, clustering and properties are the table's own, in its log
                # (declaring them again made Delta compare each with the log: ~0.25 s a table, 5 s a registration)
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} USING DELTA LOCATION '{path}'")
            else:
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} {_declared(spec, path)}")
            self.spark.conf.set(marker, path)

    # --- engine -------------------------------------------------------------------------------------------------

    def tune_for(self, new_bytes: int | None) -> bool:
        """Pick Spark's engine for this run from the size of its new data: at most `small_run_bytes`, the
        interpreted engine (compiling generated code for each of a run's few hundred small queries cost a quarter of
        its CPU); more, or unknown (None), Spark's defaults. Local sessions only. Returns True when interpreted."""
        from pipelines.session import on_databricks

        sizes = (new_bytes, self.rebuild_bytes)
        small = None not in sizes and max(sizes) <= self.config.small_run_bytes
        if on_databricks():
            return False
        for key, interpreted, default in _ENGINE_SETTINGS:
            self.spark.conf.set(key, interpreted if small else default)
        return small

    def tune_up_for(self, parquet_bytes: int | None) -> None:
        """A batch of this many bytes of a table's Parquet, more than a small run's worth (a resumed backfill whose
        bronze had nothing new), gets Spark's defaults for the rest of the run; a small one changes nothing."""
        if parquet_bytes is not None and PARQUET_TO_LANDING * parquet_bytes > self.config.small_run_bytes:
            self.tune_for(None)

    # --- reads --------------------------------------------------------------------------------------------------

    def read(self, spec: TableSpec) -> DataFrame:
        if self.config.catalog:
            return self.spark.table(self.table_name(spec))
        return self.spark.read.format("delta").load(self.table_path(spec))

    def size_bytes(self, spec: TableSpec) -> int:
        """The bytes of the table's current files (DESCRIBE DETAIL)."""
        return int(self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").first()["sizeInBytes"] or 0)

    def version(self, spec: TableSpec) -> int:
        """The table's current Delta version (read from its log on the driver)."""
        log = self._local_log(spec)
        if log is not None:
            versions = [int(name[:-5]) for name in os.listdir(log) if _COMMIT_FILE.fullmatch(name)]
            if versions:
                return max(versions)
        return int(self.spark.sql(f"DESCRIBE HISTORY {self.ref(spec)} LIMIT 1").first()["version"])

    def last_commit_metrics(self, spec: TableSpec, after_version: int) -> list[dict[str, str]]:
        """`operationMetrics` of every commit after `after_version`."""
        log = self._local_log(spec)
        if log is not None:
            return [
                _commit_metrics(os.path.join(log, name))
                for name in sorted(os.listdir(log))
                if _COMMIT_FILE.fullmatch(name) and int(name[:-5]) > after_version
            ]
        rows = self.spark.sql(f"DESCRIBE HISTORY {self.ref(spec)}").where(F.col("version") > after_version)
        return [dict(r["operationMetrics"] or {}) for r in rows.select("operationMetrics").collect()]

    def version_ranges(self, spec: TableSpec, after_version: int, upto_version: int) -> list[tuple[int, int]]:
        """The versions (after_version, upto_version] in consecutive ranges (lo, hi] of at most `batch_bytes` added
        (see `batches`); a single new commit needs no sizes. Read from the start (after_version < 0), the first range
        reaches at least the last commit that only removed rows (a full refresh's DELETE): its snapshot, not the
        rows that DELETE removed, is where reading from the start begins."""
        if upto_version - after_version <= 1:
            return [(after_version, upto_version)]
        added, removed = self.commit_sizes(spec, after_version, upto_version)
        floor = max(removed, default=after_version) if after_version < 0 else after_version
        return batches(after_version, upto_version, added, self.config.batch_bytes, floor)

    def commit_sizes(self, spec: TableSpec, after_version: int, upto_version: int) -> tuple[dict[int, int], set[int]]:
        """(bytes of data each commit in (after_version, upto_version] added, 0 for one that added none such as
        CREATE TABLE; the commits that removed rows and added none). Read from a local log on the driver, else from
        DESCRIBE HISTORY."""
        log = self._local_log(spec)
        if log is not None:
            sizes, removed = {}, set()
            for name in os.listdir(log):
                if _COMMIT_FILE.fullmatch(name) and after_version < int(name[:-5]) <= upto_version:
                    added, removes = _commit_sizes(os.path.join(log, name))
                    sizes[int(name[:-5])] = added
                    if removes and not added:
                        removed.add(int(name[:-5]))
            if len(sizes) == upto_version - after_version:
                return sizes, removed
        rows = (
            self.spark.sql(f"DESCRIBE HISTORY {self.ref(spec)}")
            .where((F.col("version") > after_version) & (F.col("version") <= upto_version))
            .select("version", "operation", "operationMetrics")
            .collect()
        )
        sizes, removed = {}, set()
        for r in rows:
            metrics = r["operationMetrics"] or {}
            sizes[int(r["version"])] = int(metrics.get("numOutputBytes") or metrics.get("numTargetBytesAdded") or 0)
            if r["operation"] in ("DELETE", "TRUNCATE") and not sizes[int(r["version"])]:
                removed.add(int(r["version"]))
        return sizes, removed

    def added_bytes(self, spec: TableSpec, after_version: int, upto_version: int) -> int | None:
        """The bytes of data the commits (after_version, upto_version] added, from a local log on the driver; None
        elsewhere (not worth a DESCRIBE HISTORY per batch: on a cluster, AQE sizes the partitions)."""
        log = self._local_log(spec)
        if log is None:
            return None
        return sum(self.commit_sizes(spec, after_version, upto_version)[0].values())

    def known_empty(self, spec: TableSpec) -> bool:
        """Whether the table certainly holds no row: a local table whose log removed every file it added, or never
        added one (what CREATE TABLE and a full refresh's DELETE leave). Read on the driver, no Spark job. A table
        that is not local, or a log this cannot read, answers False: a MERGE decides."""
        files = self._live_files(spec)
        return files is not None and not files

    def holds_nothing_within(self, spec: TableSpec, bounds: Bounds) -> bool:
        """Whether the table certainly holds no row within `bounds`: its local log's statistics put every live file's
        time column outside them (a batch of new times after a history, the common case). Read on the driver, no
        Spark job; False when unsure (no statistics for the column, a table that is not local)."""
        files = self._live_files(spec)
        return files is not None and all(_outside(f.stats, bounds) for f in files.values())

    def _holds_none(self, spec: TableSpec, bounds: Bounds | None) -> bool:
        """Whether the rows a write compares with are certainly absent: the table is empty, or holds nothing within
        the bounds that every row the write could match or remove satisfies."""
        if bounds is None:
            return self.known_empty(spec)
        return self.holds_nothing_within(spec, bounds)

    def local_rows(self, spec: TableSpec, columns: list[str]) -> pa.Table | None:
        """Some columns of every row of a local table, read by the driver from the data files its log lists (no
        Spark job, nothing in the JVM heap), as Parquet stores them. None when that is not a plain read: a table
        that is not local, a log this cannot replay, a file with a deletion vector, columns not stored by name."""
        files = self._live_files(spec)
        if files is None or any(f.deletion_vector for f in files.values()):
            return None
        root = self.table_path(spec).removeprefix("file:")
        try:
            parts = [pq.read_table(os.path.join(root, unquote(name)), columns=columns) for name in files]
            return pa.concat_tables(parts, promote_options="permissive") if parts else None
        except (OSError, KeyError, pa.ArrowException):
            return None

    def _live_files(self, spec: TableSpec) -> dict[str, LiveFile] | None:
        """The data files of a local table's current version and their statistics (JSON text), from its
        `_delta_log` on the driver: the last classic checkpoint's files (single or multi-part Parquet), then every
        commit after it (a file removed and added by one commit, a new deletion vector, stays). None when the log
        is not local or not in that shape (a v2 checkpoint, staged commits, a gap), so the caller asks Spark."""
        log = self._local_log(spec)
        if log is None:
            return None
        names = set(os.listdir(log))
        staged = os.path.join(log, "_staged_commits")
        if os.path.isdir(staged) and os.listdir(staged):
            return None
        live: dict[str, LiveFile] = {}
        first = 0
        if "_last_checkpoint" in names:
            try:
                with open(os.path.join(log, "_last_checkpoint"), encoding="utf-8") as f:
                    last = json.load(f)
                if "v2Checkpoint" in last:
                    return None
                version, parts = int(last["version"]), last.get("parts")
                parquet = (
                    [f"{version:020d}.checkpoint.parquet"]
                    if not parts
                    else [f"{version:020d}.checkpoint.{i:010d}.{int(parts):010d}.parquet" for i in range(1, parts + 1)]
                )
                for name in parquet:
                    adds = pq.read_table(os.path.join(log, name), columns=["add"]).flatten()
                    dvs = (
                        pc.is_valid(adds["add.deletionVector"]).to_pylist()
                        if "add.deletionVector" in adds.column_names
                        else [False] * adds.num_rows
                    )
                    for path, stats, dv in zip(
                        adds["add.path"].to_pylist(), adds["add.stats"].to_pylist(), dvs, strict=True
                    ):
                        if path is not None:
                            live[path] = LiveFile(stats, bool(dv))
            except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
                return None
            first = version + 1
        commits = sorted(int(name[:-5]) for name in names if _COMMIT_FILE.fullmatch(name) and int(name[:-5]) >= first)
        if commits != list(range(first, first + len(commits))):
            return None  # a gap: not a log this can replay
        for version in commits:
            added, removed = {}, set()
            with open(os.path.join(log, f"{version:020d}.json"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith('{"add"'):
                        action = json.loads(line)["add"]
                        added[action["path"]] = LiveFile(action.get("stats"), bool(action.get("deletionVector")))
                    elif line.startswith('{"remove"'):
                        removed.add(json.loads(line)["remove"]["path"])
            for path in removed:
                live.pop(path, None)
            live.update(added)
        return live

    def _local_log(self, spec: TableSpec) -> str | None:
        """A local table's `_delta_log` folder, whose commit files the driver reads directly (a directory listing
        instead of a Spark query: the bookkeeping of a run that has nothing to do costs nothing); else None."""
        if self.config.catalog:
            return None
        path = self.table_path(spec)
        if "://" in path and not path.startswith("file:"):
            return None
        log = os.path.join(path.removeprefix("file:"), "_delta_log")
        return log if os.path.isdir(log) else None

    def changes(self, spec: TableSpec, after_version: int, upto_version: int) -> DataFrame:
        """The rows the table gained or changed in versions (after_version, upto_version], as change-data-feed rows
        (`_change_type`); from the start (after_version < 0), the whole table as of upto_version, as inserts."""
        reader = self.spark.read.format("delta")
        if after_version < 0:
            reader = reader.option("versionAsOf", upto_version)
        else:
            reader = (
                reader.option("readChangeFeed", "true")
                .option("startingVersion", after_version + 1)
                .option("endingVersion", upto_version)
            )
        df = reader.table(self.table_name(spec)) if self.config.catalog else reader.load(self.table_path(spec))
        if after_version < 0:
            df = df.withColumn("_change_type", F.lit("insert")).withColumn("_commit_version", F.lit(upto_version))
        return df

    # --- progress -----------------------------------------------------------------------------------------------

    def progress(self, consumer: str) -> dict[str, int]:
        """How far `consumer` has processed each source table (Delta version; absent = nothing yet)."""
        return {table: version for table, (version, _) in self._progress().get(consumer, {}).items()}

    def fingerprint(self, consumer: str, source: str) -> str | None:
        return self._progress().get(consumer, {}).get(source, (None, None))[1]

    def _progress(self) -> dict[str, dict[str, tuple[int, str | None]]]:
        # read once per Lakehouse (one small job), then kept up to date by save_progress
        if self._progress_rows is None:
            self._progress_rows = {}
            for r in self.read(PIPELINE_RUNS).collect():
                self._progress_rows.setdefault(r["consumer"], {})[r["source_table"]] = (
                    int(r["source_version"]),
                    r["fingerprint"],
                )
        return self._progress_rows

    def save_progress(
        self, consumer: str, versions: dict[str, int], fingerprints: dict[str, str] | None = None
    ) -> None:
        """Record how far `consumer` got, replacing its earlier record in one commit (the table's history is the
        log of runs). Written after the consumer's outputs, so a crash before it only makes the next run redo
        work whose writes are idempotent. Records held back (`flush_progress`) are written in the same commit."""
        records = {**self._unsaved, consumer: (versions, fingerprints or {})}
        rows = [
            (self.config.run_at, name, table, version, prints.get(table))
            for name, (counts, prints) in sorted(records.items())
            for table, version in sorted(counts.items())
        ]
        consumers = ", ".join(f"'{name}'" for name in sorted(records))
        writer = (
            self.spark.createDataFrame(rows, PIPELINE_RUNS.spark_schema)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", f"consumer IN ({consumers})")
        )
        self._save(PIPELINE_RUNS, writer)
        self._unsaved = {}
        for name, (counts, prints) in records.items():
            self._remember(name, counts, prints)

    def flush_progress(self) -> None:
        """Write the progress records still held back (a run whose layers saved no progress of their own)."""
        if self._unsaved:
            consumer, (versions, fingerprints) = next(iter(self._unsaved.items()))
            self.save_progress(consumer, versions, fingerprints)

    def _remember(self, consumer: str, versions: dict[str, int], fingerprints: dict[str, str]) -> None:
        self._progress()[consumer] = {t: (v, fingerprints.get(t)) for t, v in versions.items()}

    def reset_progress(self, consumer: str) -> None:
        """Forget how far `consumer` got: its next run starts from the beginning of what it reads."""
        self.spark.sql(f"DELETE FROM {self.ref(PIPELINE_RUNS)} WHERE consumer = '{consumer}'")
        self._progress().pop(consumer, None)

    def truncate(self, spec: TableSpec) -> None:
        """Delete every row (one commit; the history stays for time travel, and readers of the change feed see the
        deletes)."""
        self.spark.sql(f"DELETE FROM {self.ref(spec)}")

    # --- writes -------------------------------------------------------------------------------------------------

    def insert_new(self, spec: TableSpec, rows: DataFrame, bounds: Bounds | None = None) -> None:
        """Insert the rows whose key the table does not hold yet; rows already there are left as they are.

        `bounds` limits which of the table's files are read to find existing keys (the rows' time range and
        clusters), so the cost follows the new rows, not the table's history."""
        key = list(spec.key)
        source = rows.select(*spec.column_names).dropDuplicates(key)
        if self._holds_none(spec, bounds):  # no key is there yet: an append, not a MERGE (see replace_scope)
            self.append(spec, source)
            return
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key)
        if bounds is not None:
            condition += f" AND ({bounds.sql('t')})"
        with self._view(source) as view:
            self.spark.sql(
                f"MERGE INTO {self.ref(spec)} AS t USING {view} AS s ON {condition} WHEN NOT MATCHED THEN INSERT *"
            )

    def replace_groups(self, spec: TableSpec, rows: DataFrame, groups: DataFrame, bounds: Bounds | None = None) -> None:
        """Make the table hold exactly `rows` for every group in `groups` (a DataFrame of group-key columns)."""
        cols = groups.columns
        self.replace_scope(spec, rows, groups.select(*cols).distinct(), lambda t, g: _null_safe(t, g, cols), bounds)

    def replace_scope(
        self,
        spec: TableSpec,
        rows: DataFrame,
        scope: DataFrame,
        match: Callable[[DataFrame, DataFrame], object],
        bounds: Bounds | None = None,
    ) -> None:
        """Make the table hold exactly `rows` within `scope`, in one atomic commit (a MERGE, or an append when all the
        rows that differ are new keys and no row in scope goes).

        A target row is in scope when `match(target, scope)` holds for some scope row. Changed rows are updated,
        new ones inserted, rows in scope that `rows` no longer has are deleted; unchanged rows are not touched, so a
        re-run writes nothing new. `bounds` (a predicate every in-scope row satisfies) limits the files read."""
        if self._holds_none(spec, bounds):
            # A table that holds nothing within the bounds holds nothing in scope and none of the rows' keys, so the
            # rows are what it must gain: one append instead of comparing, caching and merging (a MERGE costs several
            # Spark jobs however few its rows). A warehouse's first run (a backfill, the demo), a full refresh, and a
            # batch of new times after a history write this way. A crash after the append leaves a table that the
            # re-run MERGEs into, to the same rows.
            self.append(spec, rows)
            return
        key = list(spec.key)
        target = self.read(spec)
        if bounds is not None:
            target = target.where(bounds.sql())
        data = [c for c in spec.column_names if c not in key]
        wanted = rows.select(*spec.column_names)
        new_keys = wanted.select(*key)
        # Each wanted row beside the table's row of the same key, if any: rows the table already holds exactly are
        # left out (their files are not rewritten), and the others say whether their key is there (`_present`).
        held = target.select(*(F.col(c).alias(f"_held_{c}") for c in spec.column_names), F.lit(True).alias("_present"))
        beside = wanted.join(held, _all(F.col(k).eqNullSafe(F.col(f"_held_{k}")) for k in key), "left")
        present = F.coalesce(F.col("_present"), F.lit(False))
        unchanged = present & _all(F.col(c).eqNullSafe(F.col(f"_held_{c}")) for c in data)
        source = beside.where(~unchanged).select(
            *spec.column_names, F.lit(False).alias("_delete"), present.alias("_present")
        )
        in_scope = target.join(scope, match(target, scope), "left_semi")
        stale = (
            in_scope.join(new_keys, _null_safe(in_scope, new_keys, key), "left_anti")
            .select(*spec.column_names)
            .withColumn("_delete", F.lit(True))
            .withColumn("_present", F.lit(True))
        )
        changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in data) or "false"
        merge_source = cached(source.unionByName(stale))
        try:
            # one small job says whether there is anything to write, and whether any of it touches a row the table
            # holds (a changed row, a stale one); when none does, the rows are new keys only: what the MERGE would
            # do is an append, which costs one write instead of the MERGE's scans and joins of the target
            seen = merge_source.agg(F.count(F.lit(1)).alias("n"), F.max("_present").alias("touches")).first()
            if not seen["n"]:  # nothing differs: no commit at all
                return
            if not seen["touches"]:
                self.append(spec, merge_source)
                return
            self._merge_replace(spec, merge_source.drop("_present"), key, data, changed, bounds)
        finally:
            release(merge_source)

    def _merge_replace(
        self, spec: TableSpec, source: DataFrame, key: list[str], data: list[str], changed: str, bounds: Bounds | None
    ) -> None:
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in key)
        if bounds is not None:
            condition += f" AND ({bounds.sql('t')})"
        updates = ", ".join(f"`{c}` = s.`{c}`" for c in data)
        update = f" WHEN MATCHED AND ({changed}) THEN UPDATE SET {updates}" if data else ""
        columns = ", ".join(f"`{c}`" for c in spec.column_names)
        values = ", ".join(f"s.`{c}`" for c in spec.column_names)
        with self._view(source) as view:
            self.spark.sql(
                f"MERGE INTO {self.ref(spec)} AS t USING {view} AS s ON {condition} "
                f"WHEN MATCHED AND s._delete THEN DELETE{update} "
                f"WHEN NOT MATCHED AND NOT s._delete THEN INSERT ({columns}) VALUES ({values})"
            )

    def append(self, spec: TableSpec, rows: DataFrame) -> None:
        self._save(spec, rows.select(*spec.column_names).write.format("delta").mode("append"))

    def _save(self, spec: TableSpec, writer) -> None:
        if self.config.catalog:
            writer.saveAsTable(self.table_name(spec))
        else:
            writer.save(self.table_path(spec))

    @contextmanager
    def _view(self, df: DataFrame):
        """`df` as a temporary view of this session, by a name of its own, for the length of one statement."""
        name = f"_quorumlake_source_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(name)
        try:
            yield name
        finally:
            self.spark.catalog.dropTempView(name)

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
                .options(**AUTOLOADER_OPTIONS)
                .option("cloudFiles.schemaLocation", self.checkpoint("bronze", source, "_schema"))
                .option("cloudFiles.maxFilesPerTrigger", str(self.config.max_files_per_trigger))
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

    def staged(self, table: pa.Table, schema: str, name: str, group_bytes: int = 8 * 1024 * 1024) -> DataFrame:
        """`table` (rows the driver read, e.g. landing files) as a DataFrame that Spark reads from scratch Parquet
        files of about `group_bytes` each: tasks stream them a few MB at a time. Handed over in memory instead, the
        rows are one local relation in the driver's JVM heap, shipped inside every task of every query over them
        (a 40 MB task per stage), which caps how much a run can hand over at once. Local sessions only (the files
        are on the driver's disk); `unstage(name)` deletes them once the queries over them are done."""
        folder = Path(self.staging(name))
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        weights = [0] * table.num_rows
        for column in table.columns:
            if pa.types.is_binary(column.type) or pa.types.is_string(column.type):
                lengths = pc.fill_null(pc.binary_length(column), 0).to_pylist()
                weights = [w + n for w, n in zip(weights, lengths)]
        start, size, part = 0, 0, 0
        for row, weight in enumerate([*weights, None]):
            if weight is None or (row > start and size + weight > group_bytes):
                if row > start:
                    pq.write_table(
                        table.slice(start, row - start), folder / f"part-{part:05d}.parquet", compression="none"
                    )
                    part += 1
                start, size = row, 0
            size += weight or 0
        return self.spark.read.schema(schema).parquet(str(folder))

    def staging(self, name: str | None = None) -> str:
        """The scratch folder of one staged table, or (no name) of them all."""
        root = Path(_absolute(self.config.checkpoints)) / "_staging"
        return str(root / name if name else root)

    def unstage(self, name: str | None = None) -> None:
        """Delete one staged table's files, or (no name) every staged file left by a run that was killed."""
        if not is_local(self.config.checkpoints):
            return  # never staged there (bronze stages only under a local checkpoint folder)
        shutil.rmtree(self.staging(name), ignore_errors=True)

    def materialized(self, df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
        """`df` computed once for the several actions that read it. A classic session persists it (`cached`). A Spark
        Connect session cannot (serverless refuses persist()), and every action would recompute `df` from bronze:
        a silver batch's parse, Python UDFs over every record's payload, ran once per action, ~20 times per batch.
        There `df` is written once as Parquet to the run's scratch folder and read back, so each action reads files.
        Free with `release` (classic) and `drop_scratch` (Connect, once the run's last reader is done)."""
        if not is_connect(self.spark):
            return cached(df, level)
        path = join_path(self.scratch(), uuid.uuid4().hex)
        df.write.mode("overwrite").parquet(path)
        return self.spark.read.schema(df.schema).parquet(path)

    def scratch(self) -> str:
        """Where `materialized` writes under Spark Connect (a folder of the checkpoints, beside bronze's staging)."""
        return join_path(_absolute(self.config.checkpoints), "_scratch")

    def drop_scratch(self) -> None:
        """Delete what `materialized` wrote (and what a killed run left): the folder itself where this process can
        reach it, otherwise through Spark (an empty Parquet dataset written over it)."""
        if not is_connect(self.spark):
            return  # nothing is written there on a classic session
        if is_local(self.config.checkpoints):
            shutil.rmtree(self.scratch(), ignore_errors=True)
        else:
            self.spark.range(0).write.mode("overwrite").parquet(self.scratch())

    def landing_folders(self, fingerprint: str | None) -> dict[str, Folder]:
        """The folders bronze's last completed listing saw, if that listing is the one whose fingerprint bronze
        recorded (after a crash, a reset or a full refresh they are not trusted: the next listing walks everything)."""
        path = self._landing_folders_path()
        if fingerprint is None or path is None or not path.is_file():
            return {}
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if saved.get("fingerprint") != fingerprint:
            return {}
        return {d: Folder(m, tuple(subs), settled) for d, (m, subs, settled) in saved["folders"].items()}

    def save_landing_folders(self, fingerprint: str, folders: dict[str, Folder]) -> None:
        """Keep what a completed listing saw of each folder (written after bronze recorded its progress)."""
        path = self._landing_folders_path()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "fingerprint": fingerprint,
            "folders": {d: [f.mtime_ns, list(f.subfolders), f.settled] for d, f in folders.items()},
        }
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(json.dumps(body), encoding="utf-8")
        scratch.replace(path)  # atomic: a reader sees the old state or the new one

    def bronze_attempt(self) -> Attempt | None:
        """The chunk of landing files a bronze run was ingesting when it died (it records each chunk before
        reading it and forgets it once the files are recorded as ingested), or None."""
        path = self._attempt_path()
        if path is None or not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return Attempt(frozenset(tuple(key) for key in saved["files"]), int(saved["alone_deaths"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_bronze_attempt(self, attempt: Attempt | None) -> None:
        """Record the chunk about to be ingested (None: forget it, the chunk is done)."""
        path = self._attempt_path()
        if path is None:
            return
        if attempt is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(path.name + ".tmp")
        body = {"files": sorted(list(key) for key in attempt.files), "alone_deaths": attempt.alone_deaths}
        scratch.write_text(json.dumps(body), encoding="utf-8")
        scratch.replace(path)

    def _attempt_path(self) -> Path | None:
        root = self.checkpoint("bronze")
        return Path(root) / "attempt.json" if is_local(root) else None

    def _landing_folders_path(self) -> Path | None:
        root = self.checkpoint("bronze")
        return Path(root) / "landing_folders.json" if is_local(root) else None

    def reset_landing_checkpoints(self) -> None:
        """Auto Loader's record of ingested files, removed so that bronze reads the landing zone again."""
        path = self.checkpoint("bronze")
        if not is_local(path):
            raise RuntimeError(f"remove {path} by hand (or with dbutils) before a bronze full refresh")
        shutil.rmtree(path, ignore_errors=True)

    def count_ingested(self, specs: list[TableSpec], run_at: datetime) -> dict[str, tuple[int, int]]:
        """Rows this run added to each of the bronze tables, and how many of them carry a parse error, in one query
        (files of earlier runs are skipped by their `ingested_at` statistics)."""
        if not specs:
            return {}
        per_table = [
            self.read(spec)
            .where(F.col("ingested_at") == F.lit(run_at))
            .agg(F.count(F.lit(1)).alias("rows"), F.count("parse_error").alias("errors"))
            .withColumn("table", F.lit(spec.name))
            for spec in specs
        ]
        rows = functools.reduce(DataFrame.unionByName, per_table).collect()
        return {r["table"]: (int(r["rows"]), int(r["errors"])) for r in rows}


@dataclass(frozen=True)
class Attempt:
    """A chunk of landing files bronze set out to ingest: each file's (path, size, modification time as ISO text),
    and, for a file tried alone, how many runs before already died with it alone."""

    files: frozenset[tuple[str, int, str]]
    alone_deaths: int = 0


@dataclass(frozen=True)
class LiveFile:
    """A data file of a table's current version: its statistics (JSON text) and whether a deletion vector hides
    some of its rows."""

    stats: str | None
    deletion_vector: bool


@dataclass(frozen=True)
class Bounds:
    """A predicate that all rows of interest satisfy: a time column within [lo, hi] (epoch microseconds, either
    open) and, optionally, cluster_id in a set. Written into reads and MERGE conditions so Delta skips the files
    outside it by their min/max statistics."""

    column: str
    lo_us: int | None = None
    hi_us: int | None = None
    clusters: tuple[str, ...] | None = None
    or_null: bool = False  # also rows whose time column is NULL

    def sql(self, alias: str = "") -> str:
        col = f"{alias}.`{self.column}`" if alias else f"`{self.column}`"
        terms = []
        if self.lo_us is not None:
            terms.append(f"{col} >= timestamp_micros({self.lo_us})")
        if self.hi_us is not None:
            terms.append(f"{col} <= timestamp_micros({self.hi_us})")
        if self.clusters is not None:
            cid = f"{alias}.`cluster_id`" if alias else "`cluster_id`"
            # rows without a cluster (a record whose cluster could not be told) are always in: collect_set drops
            # NULLs, and a MERGE that left them out of its target would insert them again
            listed = f"{cid} IN ({', '.join(_sql_literal(c) for c in self.clusters)}) OR " if self.clusters else ""
            terms.append(f"({listed}{cid} IS NULL)")
        clause = " AND ".join(terms) or "true"
        return f"(({clause}) OR {col} IS NULL)" if self.or_null else clause

    @staticmethod
    def of(
        df: DataFrame,
        column: str,
        *,
        by_cluster: bool = True,
        lo_column: str | None = None,
        or_null: bool = False,
        max_clusters: int = 1000,
    ) -> Bounds | None:
        """The bounds of `df`'s rows (one small aggregation); None when df is empty."""
        lo_col = lo_column or column
        aggs = [
            F.unix_micros(F.min(lo_col)).alias("lo"),
            F.unix_micros(F.max(column)).alias("hi"),
            F.count(F.lit(1)).alias("n"),
        ]
        if by_cluster:
            aggs.append(F.slice(F.collect_set("cluster_id"), 1, max_clusters + 1).alias("clusters"))
        row = df.agg(*aggs).first()
        if not row["n"]:
            return None
        clusters = None
        if by_cluster and len(row["clusters"]) <= max_clusters:
            clusters = tuple(sorted(row["clusters"]))
        return Bounds(column, row["lo"], row["hi"], clusters, or_null)

    def widened(self, before_us: int = 0, after_us: int = 0) -> Bounds:
        return Bounds(
            self.column,
            None if self.lo_us is None else self.lo_us - before_us,
            None if self.hi_us is None else self.hi_us + after_us,
            self.clusters,
            self.or_null,
        )

    def since(self, column: str) -> Bounds:
        """From the lower bound on, on another column, without an upper bound."""
        return Bounds(column, self.lo_us, None, self.clusters, self.or_null)

    def on(self, column: str) -> Bounds:
        return Bounds(column, self.lo_us, self.hi_us, self.clusters, self.or_null)


# Delta's Parquet holds the landing zone's text in about a quarter of its bytes (the demo fleet: 10.6 MB of landing
# files, 3.0 MB of bronze files); sizes in Parquet are compared with small_run_bytes in landing bytes.
PARQUET_TO_LANDING = 4

# (setting, value for a small run, Spark's default)
_ENGINE_SETTINGS = (
    ("spark.sql.codegen.wholeStage", "false", "true"),
    ("spark.sql.codegen.factoryMode", "NO_CODEGEN", "FALLBACK"),
    ("spark.sql.adaptive.enabled", "false", "true"),
)
# The settings of Spark's interpreted engine, for a session known to serve small runs only (`tune_for` sets them per
# run on a local session; a server started for tiny data, such as the test suite's Spark Connect server, is started
# with them).
INTERPRETED_ENGINE = {key: interpreted for key, interpreted, _ in _ENGINE_SETTINGS}


_COMMIT_FILE = re.compile(r"\d{20}\.json")
# the session settings whose values Delta writes into a new table's definition
_DELTA_DEFAULTS = "spark.databricks.delta.properties.defaults."


def _commit_metrics(path: str) -> dict[str, str]:
    """The `operationMetrics` of one Delta commit file (its `commitInfo` action), as DESCRIBE HISTORY shows them."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            action = json.loads(line)
            if "commitInfo" in action:
                return {k: str(v) for k, v in (action["commitInfo"].get("operationMetrics") or {}).items()}
    return {}


def batches(
    after: int, upto: int, added: dict[int, int], budget: int, floor: int | None = None
) -> list[tuple[int, int]]:
    """The versions of a table (after, upto] cut into consecutive ranges (lo, hi] whose commits added at most `budget`
    bytes in all (`added`: bytes per version), each range holding at least one commit that added something. The
    first range reaches at least `floor` (what the commits up to it added counts as nothing)."""
    floor = after if floor is None else floor
    ranges, start, size = [], after, 0
    for version in range(after + 1, upto + 1):
        grow = added.get(version, 0) if version > floor else 0
        if size and size + grow > budget:  # commits that added nothing (CREATE TABLE) join the next range
            ranges.append((start, version - 1))
            start, size = version - 1, 0
        size += grow
    ranges.append((start, upto))
    return ranges


def _commit_sizes(path: str) -> tuple[int, bool]:
    """(bytes of the data files one Delta commit file adds as new data, whether it removes any as a data change)."""
    added, removes = 0, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            action = json.loads(line)
            add, remove = action.get("add"), action.get("remove")
            if add and add.get("dataChange", True):
                added += int(add.get("size") or 0)
            if remove and remove.get("dataChange", True):
                removes = True
    return added, removes


class TableTemplates:
    """The first commit of each table, as Delta wrote it for `CREATE TABLE` on this machine, kept to create the
    same table in a new warehouse without a Spark statement.

    Creating a table is a commit of Delta's: ~0.35 s of a warm session's time per table, 19 tables per new warehouse
    (a cold process's first ~6 s; the test suite makes dozens of warehouses). Its commit holds no path, only the
    table's definition and a few identities, so a table created once is created again by writing the same commit
    (and its checksum) with a new table id, transaction id and time: the file Delta would have written, put in
    place by an atomic link that fails if the commit exists (`IF NOT EXISTS`). A template is kept per definition
    (its DDL) and per Spark and Delta version, the first time a table is created by SQL; `prepare` (the install)
    creates them all once."""

    _COMMIT = "00000000000000000000.json"
    _CHECKSUM = "00000000000000000000.crc"

    def __init__(self, home: Path, settings: str = ""):
        self.home = home
        self.settings = settings

    def _folder(self, spec: TableSpec) -> Path:
        from pipelines.session import engine_versions

        key = f"{engine_versions()}|{self.settings}|{_declared(spec)}"
        return self.home / f"{spec.schema}.{spec.table}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}"

    def create(self, spec: TableSpec, path: str) -> bool:
        """Create the table at `path` from its template; False when there is no template (create it by SQL)."""
        folder = self._folder(spec)
        now, table_id, txn_id = _now_ms(), str(uuid.uuid4()), str(uuid.uuid4())
        try:
            commit = _renewed((folder / self._COMMIT).read_text(encoding="utf-8"), now, table_id, txn_id)
            checksum = _renewed((folder / self._CHECKSUM).read_text(encoding="utf-8"), now, table_id, txn_id)
        except OSError:  # no template yet: created by SQL, then kept
            return False
        except (ValueError, KeyError, TypeError):  # damaged: created by SQL, then kept again
            (folder / self._CHECKSUM).unlink(missing_ok=True)
            return False
        log = Path(path) / "_delta_log"
        log.mkdir(parents=True, exist_ok=True)
        if _link_new(log / self._COMMIT, commit):
            # the checksum of our commit only (another process's commit has its own, or none: both valid)
            _link_new(log / self._CHECKSUM, checksum)
        return True

    def keep(self, spec: TableSpec, path: str) -> None:
        """Keep the first commit of the table just created at `path` as its template (best effort)."""
        folder, log = self._folder(spec), Path(path) / "_delta_log"
        if (folder / self._CHECKSUM).is_file() or (log / "00000000000000000001.json").exists():
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in (self._COMMIT, self._CHECKSUM):  # the checksum last: a template is whole once it is there
                partial = folder / f"{name}.{os.getpid()}.{uuid.uuid4().hex}.partial"
                shutil.copyfile(log / name, partial)
                os.replace(partial, folder / name)
        except OSError:
            return


def _renewed(text: str, now_ms: int, table_id: str, txn_id: str) -> str:
    """A template's commit or checksum (JSON lines) with a new table id, transaction id and creation time."""
    if '"metaData"' not in text and '"metadata"' not in text:
        raise ValueError("not the first commit of a table")
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = now_ms
            action["commitInfo"]["txnId"] = txn_id
        for key in ("metaData", "metadata"):  # the commit's action, the checksum's field
            if key in action:
                action[key]["id"] = table_id
                action[key]["createdTime"] = now_ms
        if "txnId" in action:
            action["txnId"] = txn_id
        lines.append(json.dumps(action, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def _link_new(target: Path, text: str) -> bool:
    """Write `text` to `target` only if it does not exist, atomically (a complete file or none); False if it did."""
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    partial.write_text(text, encoding="utf-8")
    try:
        os.link(partial, target)
    except FileExistsError:
        return False
    finally:
        partial.unlink()
    return True


def _now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


def registry_fingerprint(specs: tuple[TableSpec, ...]) -> str:
    text = "\n".join(f"{s.name}|{s.ddl}|{s.comment}|{s.properties}|{s.partitioned_by}|{s.clustering}" for s in specs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _declared(spec: TableSpec, location: str | None = None) -> str:
    """What CREATE TABLE says after the table's name: its columns, layout, location (if given), comment and
    properties."""
    where = f" LOCATION '{location}'" if location else ""
    return f"({spec.ddl}) USING DELTA{_partitioning(spec)}{where} COMMENT '{_sql_str(spec.comment)}'{_properties(spec)}"


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


def _sql_str(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _sql_literal(value: str) -> str:
    return "'" + _sql_str(str(value)) + "'"


def _outside(stats: str | None, bounds: Bounds) -> bool:
    """Whether a data file whose Delta statistics are `stats` certainly holds no row within `bounds`, by its time
    column's minimum and maximum (Delta keeps timestamps to the millisecond in statistics: the maximum is widened by
    one). Unknown statistics: not outside."""
    if not stats:
        return False
    values = json.loads(stats)
    if values.get("numRecords") == 0:
        return True
    column, nulls = bounds.column, values.get("nullCount", {}).get(bounds.column)
    if bounds.or_null and nulls != 0:
        return False  # a row without a time would be within
    low, high = values.get("minValues", {}).get(column), values.get("maxValues", {}).get(column)
    if low is None or high is None:  # no statistics, or (when every value is NULL) no time within any bounds
        return nulls is not None and nulls == values.get("numRecords")
    try:
        low_us = _micros(low)
        high_us = _micros(high) + 999
    except (TypeError, ValueError):
        return False
    return (bounds.lo_us is not None and high_us < bounds.lo_us) or (bounds.hi_us is not None and low_us > bounds.hi_us)


def _micros(text: str) -> int:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a zone in Delta statistics: {text}")
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _all(conditions):
    """The conjunction of some Column conditions (true when there are none)."""
    return functools.reduce(lambda a, b: a & b, conditions, F.lit(True))


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
