"""Reads of the lakehouse: tables, queries by name, what a table's Delta log says (versions, commit sizes, live
files and their statistics, read on the driver where the log is local), change feeds, and the run progress ledger
(`bronze.pipeline_runs`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import timezone
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quorumlake.contract.tables import PIPELINE_RUNS, TableSpec
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage.bounds import Bounds, outside


class Reads:
    """Reads of tables, their logs and history, and the progress ledger (a part of `Lakehouse`)."""

    spark: SparkSession
    config: Config

    # --- reads --------------------------------------------------------------------------------------------------------

    def read(self, spec: TableSpec) -> DataFrame:
        if self.config.catalog:
            return self.spark.table(self.table_name(spec))
        return self.spark.read.format("delta").load(self.table_path(spec))

    def query(self, sql: str) -> DataFrame:
        """A SQL query over the registered tables and views (`quorumlake sql`, the report, notebooks)."""
        return self.spark.sql(sql)

    def rows(self, sql: str) -> list[dict]:
        """A small query's rows, as dicts."""
        return [row.asDict() for row in self.query(sql).collect()]

    def size_bytes(self, spec: TableSpec) -> int:
        """The bytes of the table's current files (DESCRIBE DETAIL)."""
        return int(self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").first()["sizeInBytes"] or 0)

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

    # --- a table's log ------------------------------------------------------------------------------------------------

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

    def local_version(self, spec: TableSpec) -> int | None:
        """The table's current version where its log is local (a directory listing), else None (no query)."""
        return self.version(spec) if self._local_log(spec) is not None else None

    def added_rows(
        self, spec: TableSpec, after_version: int, upto_version: int, counting: str | None = None
    ) -> tuple[int, int] | None:
        """(rows, rows whose `counting` column is not null: all of them without one) that the commits
        (after_version, upto_version] added, from a local log's file statistics on the driver, no Spark job. Only
        where that is certain: every commit in the range present and adding rows alone (appends, insert-only
        MERGEs), every added file with statistics (and a null count for `counting`). None otherwise (a commit that
        removed or changed rows, a log that is not local): the caller asks Spark."""
        log = self._local_log(spec)
        if log is None:
            return None
        rows = counted = 0
        for version in range(after_version + 1, upto_version + 1):
            try:
                actions = _commit_actions(os.path.join(log, f"{version:020d}.json"))
            except (OSError, ValueError):
                return None
            for action in actions:
                if "remove" in action or "cdc" in action:
                    return None
                add = action.get("add")
                if add is None or not add.get("dataChange", True):
                    continue
                if add.get("deletionVector"):
                    return None
                try:
                    stats = json.loads(add["stats"])
                    n = int(stats["numRecords"])
                    nulls = int(stats["nullCount"][counting]) if counting else 0
                except (KeyError, TypeError, ValueError):
                    return None
                rows, counted = rows + n, counted + n - nulls
        return rows, counted

    def changes_hold_rows(self, spec: TableSpec, after_version: int, upto_version: int, changes: DataFrame) -> bool:
        """Whether `changes` (the table's changes in (after_version, upto_version], as `changes` reads them) holds any
        row: said by the log where it can (`added_rows`), else by a Spark query."""
        added = self.added_rows(spec, after_version, upto_version)
        return added[0] > 0 if added is not None else not changes.isEmpty()

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
        return files is not None and all(outside(f.stats, bounds) for f in files.values())

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

    def vacuum_could_delete(self, spec: TableSpec, cutoff_s: float) -> bool | None:
        """Whether VACUUM with a retention ending at `cutoff_s` (epoch seconds) could delete anything in the table, read
        on the driver where the table is local; None where it is not (then nothing is known). VACUUM lists everything
        outside `_delta_log` and deletes the untracked files last modified before the cutoff and the empty folders
        (Delta's `VacuumCommand.gc`); so it could delete something exactly when such a file or folder is there. Every
        old entry counts, tracked or not, hidden or not: a yes is only a reason to let VACUUM decide."""
        log = self._local_log(spec)
        if log is None:
            return None
        root = os.path.dirname(log)
        for folder, dirs, files in os.walk(root):
            if folder == root:
                dirs[:] = [d for d in dirs if d != "_delta_log"]
            elif not dirs and not files:
                return True
            for name in (*dirs, *files):
                try:
                    if os.lstat(os.path.join(folder, name)).st_mtime < cutoff_s:
                        return True
                except FileNotFoundError:  # gone while listed: nothing VACUUM could delete either
                    continue
        return False

    # --- progress -----------------------------------------------------------------------------------------------------

    def progress(self, consumer: str) -> dict[str, int]:
        """How far `consumer` has processed each source table (Delta version; absent = nothing yet)."""
        return {table: version for table, (version, _) in self._progress().get(consumer, {}).items()}

    def fingerprint(self, consumer: str, source: str) -> str | None:
        return self._progress().get(consumer, {}).get(source, (None, None))[1]

    def _progress(self) -> dict[str, dict[str, tuple[int, str | None]]]:
        # read once per Lakehouse (one small job), then kept up to date by save_progress: the ledger is written whole
        # from what is kept here
        if self._progress_rows is None:
            self._progress_rows, self._progress_at = {}, {}
            for r in self.read(PIPELINE_RUNS).collect():
                self._progress_rows.setdefault(r["consumer"], {})[r["source_table"]] = (
                    int(r["source_version"]),
                    r["fingerprint"],
                )
                # Spark gives a naive local time; as UTC, it is written back as the same instant
                if r["run_at"] is not None:
                    at = r["run_at"].astimezone(timezone.utc)
                    self._progress_at[r["consumer"]] = max(at, self._progress_at.get(r["consumer"], at))
        return self._progress_rows

    def save_progress(
        self,
        consumer: str,
        versions: dict[str, int],
        fingerprints: dict[str, str] | None = None,
        hold: bool = False,
    ) -> None:
        """Record how far `consumer` got, replacing its earlier record (the table's history is the log of runs).
        Called after the consumer's outputs are written, so a crash before the record is written only makes the next
        run redo work whose writes are idempotent.

        The ledger is small and this run is its only writer (`quorumlake.pipelines.app.lock`), so it is written whole,
        in one commit that replaces every row (no other consumer's rows to keep from the files it holds). With `hold`,
        the record waits for the next commit of the ledger (a later layer's record, or `flush_progress` when the run
        ends): a run through every layer writes the ledger once instead of once per layer."""
        self._remember(consumer, versions, fingerprints or {})
        self._unsaved.add(consumer)
        if not hold:
            self._write_progress()

    def flush_progress(self) -> None:
        """Write the progress records still held back (a run whose last layer saved no progress of its own)."""
        if self._unsaved:
            self._write_progress()

    def _write_progress(self) -> None:
        rows = [
            (self._progress_at.get(name), name, table, version, fingerprint)
            for name, record in sorted(self._progress().items())
            for table, (version, fingerprint) in sorted(record.items())
        ]
        # every row replaced; by `replaceWhere`, because a plain overwrite (`INSERT OVERWRITE`, `writeTo().overwrite`
        # alike) also clears the table's liquid clustering
        writer = (
            self.spark.createDataFrame(rows, PIPELINE_RUNS.spark_schema)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", "true")
        )
        self._save(PIPELINE_RUNS, writer)
        self._unsaved = set()

    def _remember(self, consumer: str, versions: dict[str, int], fingerprints: dict[str, str]) -> None:
        self._progress()[consumer] = {t: (v, fingerprints.get(t)) for t, v in versions.items()}
        self._progress_at[consumer] = self.config.run_at

    def reset_progress(self, consumer: str) -> None:
        """Forget how far `consumer` got: its next run starts from the beginning of what it reads."""
        self.spark.sql(f"DELETE FROM {self.ref(PIPELINE_RUNS)} WHERE consumer = '{consumer}'")
        self._progress().pop(consumer, None)
        self._progress_at.pop(consumer, None)
        self._unsaved.discard(consumer)


@dataclass(frozen=True)
class LiveFile:
    """A data file of a table's current version: its statistics (JSON text) and whether a deletion vector hides
    some of its rows."""

    stats: str | None
    deletion_vector: bool


_COMMIT_FILE = re.compile(r"\d{20}\.json")


def _commit_actions(path: str) -> list[dict]:
    """The actions of one Delta commit file (one JSON object per line)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _commit_metrics(path: str) -> dict[str, str]:
    """The `operationMetrics` of one Delta commit file (its `commitInfo` action), as DESCRIBE HISTORY shows them."""
    for action in _commit_actions(path):
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
    for action in _commit_actions(path):
        add, remove = action.get("add"), action.get("remove")
        if add and add.get("dataChange", True):
            added += int(add.get("size") or 0)
        if remove and remove.get("dataChange", True):
            removes = True
    return added, removes
