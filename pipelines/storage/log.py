"""What a table's Delta log says: its version, its commits' operations and metrics, its current files' statistics.

A local table (a folder on this machine: `Catalog.local_path`) is read on the driver with delta-rs (the `deltalake`
package), which needs no Spark job: the bookkeeping of a run that has little or nothing to do costs next to nothing.
A table of a catalog or on remote storage is asked of Delta through Spark (`DESCRIBE HISTORY`), or not at all where
the answer only saves work (`None`: the caller asks Spark for the rows themselves). The log's files are never read
here by hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quorumlake.contract.tables import TableSpec
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage.bounds import Bounds, outside
from quorumlake.pipelines.storage.catalog import Catalog


@dataclass(frozen=True)
class Commit:
    """One commit of a table, as its history tells it."""

    version: int
    operation: str
    parameters: dict[str, str]
    metrics: dict[str, str]

    def metric(self, name: str) -> int:
        return int(self.metrics.get(name) or 0)

    @property
    def added_bytes(self) -> int:
        """The bytes of data files the commit added as new data (a write's or a MERGE's; 0 for one that only
        removed, reorganized or defined)."""
        return self.metric("numOutputBytes") or self.metric("numTargetBytesAdded")

    @property
    def only_adds(self) -> bool:
        """Whether the commit added rows and did nothing else (or defined the table): an append, or a MERGE that
        inserted without touching a file the table held."""
        if self.operation in ("CREATE TABLE", "CREATE OR REPLACE TABLE"):
            return True
        if self.operation == "WRITE":
            return self.parameters.get("mode") == "Append"
        if self.operation == "MERGE":
            touched = ("numTargetFilesRemoved", "numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsCopied")
            return not any(self.metric(name) for name in touched)
        return False

    @property
    def added_rows(self) -> int:
        return self.metric("numOutputRows") or self.metric("numTargetRowsInserted")


class TableLog:
    """The facts of each table's Delta log (a part of `Lakehouse`)."""

    def __init__(self, spark: SparkSession, config: Config, catalog: Catalog):
        self.spark = spark
        self.config = config
        self.catalog = catalog

    def _table(self, spec: TableSpec, version: int | None = None) -> DeltaTable | None:
        """The local table as delta-rs reads it (at `version`, else its current one); None where the table is not
        local or delta-rs cannot read it (then Spark is asked)."""
        path = self.catalog.local_path(spec)
        if path is None:
            return None
        try:
            return DeltaTable(path, version=version)
        except (DeltaError, OSError, ValueError):  # not a table (yet), or one delta-rs cannot read
            return None

    # --- versions and commits -----------------------------------------------------------------------------------------

    def version(self, spec: TableSpec) -> int:
        """The table's current Delta version."""
        table = self._table(spec)
        if table is not None:
            return table.version()
        return int(self.spark.sql(f"DESCRIBE HISTORY {self.catalog.ref(spec)} LIMIT 1").first()["version"])

    def local_version(self, spec: TableSpec) -> int | None:
        """The table's current version where it is local, else None (no Spark query)."""
        table = self._table(spec)
        return None if table is None else table.version()

    def commits(self, spec: TableSpec, after_version: int, upto_version: int | None = None) -> list[Commit]:
        """The table's commits in (after_version, upto_version] (to the current one when None), oldest first, as far
        as its history keeps them."""
        table = self._table(spec)
        if table is not None:
            upto = table.version() if upto_version is None else upto_version
            entries = table.history(limit=max(1, table.version() - after_version))
            found = [
                Commit(
                    int(e["version"]),
                    e.get("operation", ""),
                    _texts(e.get("operationParameters")),
                    _texts(e.get("operationMetrics")),
                )
                for e in entries
                if after_version < int(e["version"]) <= upto
            ]
        else:
            history = self.spark.sql(f"DESCRIBE HISTORY {self.catalog.ref(spec)}").where(
                F.col("version") > after_version
            )
            if upto_version is not None:
                history = history.where(F.col("version") <= upto_version)
            found = [
                Commit(
                    int(r["version"]), r["operation"], _texts(r["operationParameters"]), _texts(r["operationMetrics"])
                )
                for r in history.select("version", "operation", "operationParameters", "operationMetrics").collect()
            ]
        return sorted(found, key=lambda c: c.version)

    def last_commit_metrics(self, spec: TableSpec, after_version: int) -> list[dict[str, str]]:
        """`operationMetrics` of every commit after `after_version`, oldest first."""
        return [c.metrics for c in self.commits(spec, after_version)]

    def commit_sizes(self, spec: TableSpec, after_version: int, upto_version: int) -> tuple[dict[int, int], set[int]]:
        """(bytes of data each commit in (after_version, upto_version] added, 0 for one that added none such as
        CREATE TABLE; the commits that removed rows and added none)."""
        sizes, removed = {}, set()
        for commit in self.commits(spec, after_version, upto_version):
            sizes[commit.version] = commit.added_bytes
            if commit.operation in ("DELETE", "TRUNCATE") and not commit.added_bytes:
                removed.add(commit.version)
        return sizes, removed

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

    def added_bytes(self, spec: TableSpec, after_version: int, upto_version: int) -> int | None:
        """The bytes of data the commits (after_version, upto_version] added, where the table is local; None elsewhere
        (not worth a DESCRIBE HISTORY per batch: on a cluster, adaptive execution sizes the partitions)."""
        if self.catalog.local_path(spec) is None:
            return None
        return sum(self.commit_sizes(spec, after_version, upto_version)[0].values())

    def added_rows(
        self, spec: TableSpec, after_version: int, upto_version: int, counting: str | None = None
    ) -> tuple[int, int] | None:
        """(rows, rows whose `counting` column is not null: all of them without one) that the commits
        (after_version, upto_version] added, told by the log of a local table, no Spark job. Only where that is
        certain: every commit in the range kept and adding rows alone (appends, insert-only MERGEs), and, with
        `counting`, null counts in the statistics of every file they added. None otherwise: the caller asks Spark."""
        if upto_version <= after_version:
            return (0, 0)
        if self.catalog.local_path(spec) is None:
            return None
        commits = self.commits(spec, after_version, upto_version)
        if len(commits) != upto_version - after_version or not all(c.only_adds for c in commits):
            return None
        rows = sum(c.added_rows for c in commits)
        if counting is None:
            return rows, rows
        before = set() if after_version < 0 else set(self._files(spec, after_version)["path"].to_pylist())
        after = self._files(spec, upto_version)
        column = f"null_count.{counting}"
        if column not in after.column_names:
            return None
        added = [
            (n, nulls)
            for path, n, nulls in zip(
                after["path"].to_pylist(), after["num_records"].to_pylist(), after[column].to_pylist(), strict=True
            )
            if path not in before
        ]
        if any(n is None or nulls is None for n, nulls in added) or sum(n for n, _ in added) != rows:
            return None
        return rows, rows - sum(nulls for _, nulls in added)

    def changes_hold_rows(self, spec: TableSpec, after_version: int, upto_version: int) -> bool | None:
        """Whether the table's changes in (after_version, upto_version] hold any row, where its log tells for sure
        (commits that only added rows); None where it does not."""
        added = self.added_rows(spec, after_version, upto_version)
        return None if added is None else added[0] > 0

    # --- the current files --------------------------------------------------------------------------------------------

    def _files(self, spec: TableSpec, version: int | None = None) -> pa.Table:
        """The data files of the table's version (current by default) with their statistics, one row each (`path`,
        `num_records`, `null_count.<column>`, `min.<column>`, `max.<column>`); raises if the table is not local."""
        table = self._table(spec, version)
        if table is None:
            raise LookupError(f"{spec.name} is not a local table delta-rs reads")
        return pa.table(table.get_add_actions(flatten=True))

    def known_empty(self, spec: TableSpec) -> bool:
        """Whether the table certainly holds no row: a local table without a data file (what CREATE TABLE and a full
        refresh's DELETE leave). No Spark job. A table that is not local answers False: a MERGE decides."""
        table = self._table(spec)
        return table is not None and not table.file_uris()

    def holds_nothing_within(self, spec: TableSpec, bounds: Bounds) -> bool:
        """Whether the table certainly holds no row within `bounds`: its files' statistics put every one of them
        outside (a batch of new times after a history, the common case). No Spark job; False when unsure (no
        statistics for the column, a table that is not local)."""
        table = self._table(spec)
        if table is None:
            return False
        files = pa.table(table.get_add_actions(flatten=True))
        names = (f"null_count.{bounds.column}", f"min.{bounds.column}", f"max.{bounds.column}")
        if files.num_rows and not all(n in files.column_names for n in names):
            return False
        columns = [files["num_records"].to_pylist(), *(files[n].to_pylist() for n in names if files.num_rows)]
        return all(outside(bounds, *stats) for stats in zip(*columns, strict=True))

    def holds_none(self, spec: TableSpec, bounds: Bounds | None) -> bool:
        """Whether the rows a write compares with are certainly absent: the table is empty, or holds nothing within
        the bounds that every row the write could match or remove satisfies."""
        return self.known_empty(spec) if bounds is None else self.holds_nothing_within(spec, bounds)

    def local_rows(self, spec: TableSpec, columns: list[str]) -> pa.Table | None:
        """Some columns of every row of a local table, read by the driver with delta-rs (no Spark job, nothing in the
        JVM heap), as Parquet stores them. None where that is not possible (a table that is not local, a column it
        lacks, a table delta-rs cannot read): the caller asks Spark."""
        table = self._table(spec)
        if table is None:
            return None
        try:
            return table.to_pyarrow_table(columns=columns)
        except (DeltaError, OSError, ValueError, pa.ArrowException):
            return None

    def vacuum_could_delete(self, spec: TableSpec, cutoff_s: float) -> bool | None:
        """Whether VACUUM with a retention ending at `cutoff_s` (epoch seconds) could delete anything in a local table;
        None where the table is not local (then nothing is known). VACUUM lists everything outside the log and deletes
        the untracked files last modified before the cutoff and the empty folders; so it could delete something
        exactly when such a file or folder is there. Every old entry counts, tracked or not, hidden or not: a yes is
        only a reason to let VACUUM decide."""
        root = self.catalog.local_path(spec)
        if root is None or not DeltaTable.is_deltatable(root):
            return None
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


def _texts(values: dict | None) -> dict[str, str]:
    """A history entry's parameters or metrics as text, as DESCRIBE HISTORY shows them."""
    return {str(k): str(v) for k, v in (values or {}).items()}


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
