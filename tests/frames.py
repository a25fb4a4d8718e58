"""DataFrame equality for the unit tests: chispa's schema and row comparers, with each side collected once.

`chispa.assert_df_equality(..., ignore_row_order=True)` sorts both sides with Spark before it collects them: a sort
is a range-partitioning job (a sample of the rows, then a shuffle) for each side of each check, about a second even
for a dozen rows. Here each side is collected once, as is (the expected side is local rows: collecting it runs no
job), and the rows are put in one canonical order in Python; chispa then compares schemas and rows and prints its
usual diff.
"""

from __future__ import annotations

import math
from typing import Any

from chispa.row_comparer import are_rows_equal_enhanced
from chispa.rows_comparer import assert_basic_rows_equality, assert_generic_rows_equality
from chispa.schema_comparer import assert_schema_equality
from pyspark.sql import DataFrame


def assert_frames_equal(
    actual: DataFrame,
    expected: DataFrame,
    *,
    ignore_row_order: bool = False,
    ignore_nullable: bool = False,
    ignore_metadata: bool = False,
    allow_nan_equality: bool = False,
) -> None:
    """The same columns (names, types and, unless ignored, nullability and metadata, in order) and the same rows (in
    order, unless `ignore_row_order`; NaN equal to NaN only with `allow_nan_equality`), as
    `chispa.assert_df_equality` with the same options checks them."""
    assert_schema_equality(actual.schema, expected.schema, ignore_nullable, ignore_metadata)
    got, want = actual.collect(), expected.collect()
    if ignore_row_order:
        got, want = sorted(got, key=_order), sorted(want, key=_order)
    if allow_nan_equality:
        assert_generic_rows_equality(got, want, are_rows_equal_enhanced, {"allow_nan_equality": True})
    else:
        assert_basic_rows_equality(got, want)


def check_rows(
    actual: DataFrame, columns: list[str], schema: str, rows: list[tuple], *, allow_nan_equality: bool = False
) -> None:
    """`actual`'s `columns` hold exactly `rows`, in any order: `rows` made a DataFrame of the DDL `schema` and compared
    with `assert_frames_equal` (nullability not compared; NaN equal to NaN only with `allow_nan_equality`)."""
    expected = actual.sparkSession.createDataFrame(rows, schema)
    assert_frames_equal(
        actual.select(*columns),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
        allow_nan_equality=allow_nan_equality,
    )


def _order(value: Any) -> tuple:
    """A sort key that orders any collected value (None, NaN, nested rows, arrays and maps among them) and gives
    equal values equal keys, whatever the order a map's entries came in."""
    if value is None:
        return (0,)
    if isinstance(value, tuple | list):  # a Row is a tuple
        return (1, tuple(_order(v) for v in value))
    if isinstance(value, dict):
        return (2, tuple(sorted((_order(k), _order(v)) for k, v in value.items())))
    if isinstance(value, float) and math.isnan(value):
        return (3,)
    return (4, type(value).__name__, value)
