"""quorumlake.silver.common: helpers shared by the silver builders."""

from __future__ import annotations

from pyspark.sql import functions as F

from quorumlake.silver.common import parsed_once
from tests.frames import assert_frames_equal


def _copies(df, text: str) -> int:
    return df._jdf.queryExecution().optimizedPlan().toString().count(text)


def test_an_expensive_column_used_by_several_filters_is_computed_once(spark):
    rows = spark.createDataFrame(
        [("r1", '{"a": 1, "b": [1, 2]}'), ("r2", '{"a": -1, "b": []}'), ("r3", "nope")],
        "record_id STRING, payload STRING",
    )
    parse = F.from_json("payload", "a INT, b ARRAY<INT>")

    def split(parsed):
        ok = F.coalesce((F.col("_j.a") > 0) & F.exists("_j.b", lambda x: x > 1), F.lit(False))
        good = parsed.where(ok).select("record_id", F.col("_j.a").alias("a"))
        bad = parsed.where(~ok).select("record_id", F.col("_j.a").alias("a"))
        return good.unionByName(bad.withColumn("a", -F.col("a")))

    inlined = split(rows.withColumn("_j", parse))
    once = split(parsed_once(rows, _j=parse))
    # what Spark's optimizer does without the barrier: the parse is copied into each filter and projection
    assert _copies(inlined, "from_json(") > 2
    assert _copies(once, "from_json(") == 2  # once per branch of the union: each branch reads its input once
    assert_frames_equal(once, inlined, ignore_row_order=True)
    assert sorted(once.collect()) == [("r1", 1), ("r2", 1), ("r3", None)]


def test_parsed_once_keeps_every_row_and_column(spark):
    rows = spark.createDataFrame([(1, None), (2, "x")], "n INT, s STRING")
    out = parsed_once(rows, upper=F.upper("s"), n2=F.col("n") * 2)
    assert out.columns == ["n", "s", "upper", "n2"]
    assert sorted(out.collect()) == [(1, None, None, 2), (2, "x", "X", 4)]
