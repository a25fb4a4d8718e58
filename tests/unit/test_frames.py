"""The unit tests' DataFrame comparison (tests/frames.py) fails where chispa's would and passes where it would."""

from __future__ import annotations

import pytest
from chispa import DataFramesNotEqualError, SchemasNotEqualError

from tests.frames import assert_frames_equal

UNEQUAL = (DataFramesNotEqualError, SchemasNotEqualError)  # chispa's own errors

SCHEMA = "id INT, tags ARRAY<STRING>, attrs MAP<STRING, INT>, ratio DOUBLE, note STRING"
ROWS = [
    (1, ["a", "b"], {"x": 1, "y": 2}, 0.5, None),
    (2, None, {}, 1.5, "n"),
    (None, [], None, None, "z"),
]


def test_the_same_rows_in_another_order_are_equal_only_when_row_order_is_ignored(spark):
    df = spark.createDataFrame(ROWS, SCHEMA)
    shuffled = spark.createDataFrame(
        [ROWS[2], ROWS[0][:2] + ({"y": 2, "x": 1},) + ROWS[0][3:], ROWS[1]], SCHEMA
    )  # a map's entries in another order are the same map
    assert_frames_equal(df, shuffled, ignore_row_order=True)
    with pytest.raises(UNEQUAL):
        assert_frames_equal(df, shuffled)


def test_a_different_value_row_count_or_schema_fails(spark):
    df = spark.createDataFrame(ROWS, SCHEMA)
    changed = spark.createDataFrame([ROWS[0][:3] + (0.25, None), *ROWS[1:]], SCHEMA)
    for other in (changed, spark.createDataFrame(ROWS[:2], SCHEMA), df.withColumnRenamed("note", "notes")):
        with pytest.raises(UNEQUAL):
            assert_frames_equal(df, other, ignore_row_order=True)


def test_nullability_counts_unless_ignored(spark):
    df = spark.createDataFrame([(1,)], "id INT NOT NULL")
    nullable = spark.createDataFrame([(1,)], "id INT")
    assert_frames_equal(df, nullable, ignore_nullable=True)
    with pytest.raises(UNEQUAL):
        assert_frames_equal(df, nullable)


def test_nan_equals_nan_only_when_allowed(spark):
    df = spark.createDataFrame([(1, float("nan")), (2, 0.5)], "id INT, v DOUBLE")
    again = spark.createDataFrame([(2, 0.5), (1, float("nan"))], "id INT, v DOUBLE")
    assert_frames_equal(df, again, ignore_row_order=True, allow_nan_equality=True)
    with pytest.raises(UNEQUAL):
        assert_frames_equal(df, again, ignore_row_order=True)
