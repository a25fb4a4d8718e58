"""`Bounds`: the predicate every row of interest satisfies (a time range, some clusters), written into reads and
MERGE conditions, and checked against a data file's statistics on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import sql_string


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


def outside(bounds: Bounds, records: int | None, nulls: int | None, low: object | None, high: object | None) -> bool:
    """Whether a data file certainly holds no row within `bounds`, by the statistics Delta keeps of it: its row count,
    and its time column's null count, minimum and maximum (kept to the millisecond: the maximum is widened by one).
    Unknown statistics, or those of a column that is not a TIMESTAMP (a DATE, say): not outside."""
    if records is None:
        return False
    if records == 0:
        return True
    if bounds.or_null and nulls != 0:
        return False  # a row without a time would be within
    if low is None or high is None:  # no statistics, or (when every value is NULL) no time within any bounds
        return nulls is not None and nulls == records
    if not _instant(low) or not _instant(high):
        return False
    low_us, high_us = _micros(low), _micros(high) + 999
    return (bounds.lo_us is not None and high_us < bounds.lo_us) or (bounds.hi_us is not None and low_us > bounds.hi_us)


def _instant(value: object) -> bool:
    """A TIMESTAMP column's statistic: a datetime with its zone (a DATE's is a `date`, a TIMESTAMP_NTZ's is naive)."""
    return isinstance(value, datetime) and value.tzinfo is not None


def _micros(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _sql_literal(value: str) -> str:
    return "'" + sql_string(str(value)) + "'"
