"""Runs of consecutive observations (gaps and islands), shared by anomaly episodes and quorum membership."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def consecutive_runs(
    rows: DataFrame, times: DataFrame, within: list[str], state: list[str], at: str
) -> tuple[DataFrame, DataFrame]:
    """(runs, numbered times): the distinct times of each `within` group in `times`, numbered in order (`_i`) with the
    group's next time (`_next_at`, NULL for its last), and `rows` with the `_i` and `_next_at` of their time `at` and
    `_run`, the same for the rows of a `state` group (a subgroup of `within`) at consecutive numbers: a time of the
    group where the state group has no row ends its run."""
    in_order = Window.partitionBy(*within).orderBy(at)
    numbered = times.select(*within, at).distinct()
    numbered = numbered.select(
        "*", F.row_number().over(in_order).alias("_i"), F.lead(at).over(in_order).alias("_next_at")
    )
    run = F.col("_i") - F.row_number().over(Window.partitionBy(*state).orderBy("_i"))
    return rows.join(numbered, [*within, at]).withColumn("_run", run), numbered
