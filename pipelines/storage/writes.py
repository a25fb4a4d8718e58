"""Writes to the lakehouse: appends, insert-if-new and replace-in-scope MERGEs (each one atomic commit, none when
nothing differs), truncation, and maintenance (OPTIMIZE, VACUUM).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quorumlake.contract.tables import TableSpec
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.session import cached, release
from quorumlake.pipelines.storage.bounds import Bounds
from quorumlake.pipelines.storage.catalog import Catalog
from quorumlake.pipelines.storage.log import TableLog
from quorumlake.pipelines.storage.reads import Reads


class Writes:
    """Appends, MERGEs, truncation and maintenance of the tables (a part of `Lakehouse`)."""

    def __init__(self, spark: SparkSession, config: Config, catalog: Catalog, reads: Reads, log: TableLog):
        self.spark = spark
        self.config = config
        self.catalog = catalog
        self.reads = reads
        self.log = log

    # --- writes -------------------------------------------------------------------------------------------------------

    def insert_new(self, spec: TableSpec, rows: DataFrame, bounds: Bounds | None = None) -> None:
        """Insert the rows whose key the table does not hold yet; rows already there are left as they are.

        `bounds` limits which of the table's files are read to find existing keys (the rows' time range and
        clusters), so the cost follows the new rows, not the table's history."""
        key = list(spec.key)
        source = rows.select(*spec.column_names).dropDuplicates(key)
        if self.log.holds_none(spec, bounds):  # no key is there yet: an append, not a MERGE (see replace_scope)
            self.append(spec, source)
            return
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key)
        if bounds is not None:
            condition += f" AND ({bounds.sql('t')})"
        with self._view(source) as view:
            self.spark.sql(
                f"MERGE INTO {self.catalog.ref(spec)} AS t USING {view} AS s ON {condition} "
                "WHEN NOT MATCHED THEN INSERT *"
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
        if self.log.holds_none(spec, bounds):
            # A table that holds nothing within the bounds holds nothing in scope and none of the rows' keys, so the
            # rows are what it must gain: one append instead of comparing, caching and merging (a MERGE costs several
            # Spark jobs however few its rows). A warehouse's first run (a backfill, the demo), a full refresh, and a
            # batch of new times after a history write this way. A crash after the append leaves a table that the
            # re-run MERGEs into, to the same rows.
            self.append(spec, rows)
            return
        key = list(spec.key)
        target = self.reads.read(spec)
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
                f"MERGE INTO {self.catalog.ref(spec)} AS t USING {view} AS s ON {condition} "
                f"WHEN MATCHED AND s._delete THEN DELETE{update} "
                f"WHEN NOT MATCHED AND NOT s._delete THEN INSERT ({columns}) VALUES ({values})"
            )

    def append(self, spec: TableSpec, rows: DataFrame) -> None:
        self.save(spec, rows.select(*spec.column_names).write.format("delta").mode("append"))

    def truncate(self, spec: TableSpec) -> None:
        """Delete every row (one commit; the history stays for time travel, and readers of the change feed see the
        deletes)."""
        self.spark.sql(f"DELETE FROM {self.catalog.ref(spec)}")

    def save(self, spec: TableSpec, writer) -> None:
        """Run a DataFrameWriter of the table's rows into the table."""
        if self.config.catalog:
            writer.saveAsTable(self.catalog.table_name(spec))
        else:
            writer.save(self.catalog.table_path(spec))

    @contextmanager
    def _view(self, df: DataFrame):
        """`df` as a temporary view of this session, by a name of its own, for the length of one statement."""
        name = f"_quorumlake_source_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(name)
        try:
            yield name
        finally:
            self.spark.catalog.dropTempView(name)

    # --- maintenance --------------------------------------------------------------------------------------------------

    def optimize(self, spec: TableSpec) -> None:
        """Compact the table's small files (and cluster them by its keys)."""
        self.spark.sql(f"OPTIMIZE {self.catalog.table_name(spec)}")

    def vacuum(self, spec: TableSpec, retain_hours: int) -> None:
        """Delete the files the table's versions older than `retain_hours` no longer need."""
        self.spark.sql(f"VACUUM {self.catalog.table_name(spec)} RETAIN {retain_hours} HOURS")


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
