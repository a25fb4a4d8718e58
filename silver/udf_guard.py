"""Python UDFs that never raise: one bad record must cost that record, never the batch.

`guarded(fn, return_type, on_error)` wraps a pure-Python parser for use as a Spark UDF: any exception becomes
`on_error(reason)`, and so does a result that the return type cannot hold (an integer beyond INT or BIGINT, which
Arrow would otherwise refuse while converting the batch, failing the task and every retry of it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as T

_LIMITS = {
    T.ByteType: 2**7,
    T.ShortType: 2**15,
    T.IntegerType: 2**31,
    T.LongType: 2**63,
}


def out_of_range(value: Any, data_type: T.DataType, path: str = "") -> str | None:
    """The path of the first integer in `value` that `data_type` cannot hold, else None."""
    if value is None:
        return None
    limit = _LIMITS.get(type(data_type))
    if limit is not None:
        if isinstance(value, int) and not isinstance(value, bool) and not -limit <= value < limit:
            return path or "value"
        return None
    if isinstance(data_type, T.ArrayType) and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = out_of_range(item, data_type.elementType, f"{path}[{i}]")
            if found:
                return found
    if isinstance(data_type, T.StructType) and isinstance(value, dict):
        for f in data_type.fields:
            found = out_of_range(value.get(f.name), f.dataType, f"{path}.{f.name}" if path else f.name)
            if found:
                return found
    return None


def guarded(fn: Callable[..., Any], return_type: T.DataType, on_error: Callable[[str], Any]) -> Callable[..., Any]:
    """`fn`, except that it returns `on_error(reason)` instead of raising or returning what Spark cannot hold."""

    @functools.wraps(fn)
    def safe(*args: Any) -> Any:
        try:
            result = fn(*args)
        except Exception as exc:
            return on_error(f"cannot be parsed ({type(exc).__name__}: {_short(exc)})")
        bad = out_of_range(result, return_type)
        if bad is not None:
            return on_error(f"value out of range for its column: {bad}")
        return result

    return safe


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."
