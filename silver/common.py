"""Column logic shared by the silver builders: deduplication by key and quarantine rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import SILVER_QUARANTINE

# silver.quarantine's columns but `quarantined_at`, the run's time, which the job stamps (time is not the layer's)
QUARANTINE_COLUMNS = [c for c in SILVER_QUARANTINE.column_names if c != "quarantined_at"]


def latest_per_key(rows: DataFrame, key: list[str], order: list[str]) -> DataFrame:
    """One row per key: the greatest by `order` (latest ingested first, then the tie-breakers given)."""
    w = Window.partitionBy(*key).orderBy(*[F.col(c).desc_nulls_last() for c in order])
    return rows.withColumn("_n", F.row_number().over(w)).where(F.col("_n") == 1).drop("_n")


def rejected(
    rows: DataFrame, target_table: str, rules: list[str], reason: Column, record: Column | None = None
) -> DataFrame:
    """Quarantine rows for records (or rows) that cannot become rows of `target_table`.

    `rows` needs record_id, source_file, ingested_at; `record` defaults to the bronze record as JSON text.
    """
    if record is None:
        present = [
            c
            for c in ("record_id", "format", "cluster_id", "source_file", "line_number", "payload")
            if c in rows.columns
        ]
        record = F.to_json(F.struct(*present))
    return quarantine_rows(
        rows.withColumn("_record", record).withColumn("_reason", reason),
        target_table,
        F.array(*[F.lit(r) for r in rules]),
        F.col("_reason"),
        F.col("_record"),
    )


def quarantine_rows(
    rows: DataFrame, target_table: str, failed_rules: Column, reason: Column, record: Column
) -> DataFrame:
    """Shape rows as silver.quarantine rows; the id is a hash of table, bronze record and row, so it is stable."""
    shaped = rows.select(
        F.lit(target_table).alias("target_table"),
        failed_rules.cast("array<string>").alias("failed_rules"),
        reason.cast("string").alias("reason"),
        record.cast("string").alias("record"),
        _optional(rows, "record_id").cast("string").alias("record_id"),
        _optional(rows, "source_file").cast("string").alias("source_file"),
        _optional(rows, "ingested_at").cast("timestamp").alias("ingested_at"),
    )
    quarantine_id = F.sha2(F.concat_ws("\u0001", "target_table", F.coalesce("record_id", F.lit("")), "record"), 256)
    return shaped.withColumn("quarantine_id", quarantine_id).select(*QUARANTINE_COLUMNS)


def row_failures(rows: DataFrame, target_table: str) -> DataFrame:
    """Quarantine rows for table rows that failed data-quality rules (`failed_rules` non-empty)."""
    failed = rows.where(F.size("failed_rules") > 0)
    data_columns = [c for c in rows.columns if c != "failed_rules"]
    if "record_id" not in rows.columns and "record_ids" in rows.columns:
        # a snapshot built from several bronze records (CLI --replication + --status) names them all
        failed = failed.withColumn("record_id", F.array_join("record_ids", "+"))
    return quarantine_rows(
        failed,
        target_table,
        F.col("failed_rules"),
        F.concat(F.lit("failed data-quality rules: "), F.array_join("failed_rules", ", ")),
        F.to_json(F.struct(*data_columns)),
    )


def _optional(rows: DataFrame, name: str) -> Column:
    return F.col(name) if name in rows.columns else F.lit(None)


def parsed_once(rows: DataFrame, **columns: Column) -> DataFrame:
    """`rows` with the given (expensive) columns added, each computed exactly once per row.

    Spark's optimizer copies a column's expression into every filter and projection that uses it (pushing a filter
    below the projection that computed the column), and a higher-order function re-evaluates its arguments per
    call: a `from_json` used by a dozen checks would be parsed a dozen times per record. A generator's output is a
    barrier to both, so the columns come out of a one-row `inline`."""
    return rows.select("*", F.inline(F.array(F.struct(*[c.alias(n) for n, c in columns.items()]))))
