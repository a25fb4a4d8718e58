"""What a run wrote, read back by an independent Delta reader (delta-rs, the `deltalake` package) for the end-to-end
tests' whole-table assertions.

A Spark query's first read of a table path plans for a good fraction of a second (the table's log is loaded and its
state computed by a Spark job), whatever the table's size, which adds up over the 19 tables of every comparison;
delta-rs reads them in a fraction of that, and every such read also proves that a reader other than Spark (what a
BI tool or another engine uses) reads the tables a run wrote. The pipeline under test still runs on Spark and Delta
only.

Values come back as Spark's session (time zone UTC) gives them: timestamps as naive UTC datetimes, arrays as lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from quorumlake.contract.tables import TableSpec


def _naive(dtype: pa.DataType) -> pa.DataType:
    """The type with every time-zoned timestamp (delta-rs reads Delta's TIMESTAMP as UTC) made naive, nested ones too."""
    if pa.types.is_timestamp(dtype) and dtype.tz is not None:
        return pa.timestamp(dtype.unit)
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(_naive(dtype.value_type)))
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_naive(dtype.value_type)))
    if pa.types.is_struct(dtype):
        return pa.struct([dtype.field(i).with_type(_naive(dtype.field(i).type)) for i in range(dtype.num_fields)])
    return dtype


def arrow(path: Path | str, drop: Iterable[str] = ()) -> pa.Table:
    """The table's current version, without the columns in `drop`, timestamps naive UTC."""
    table = DeltaTable(str(path))
    dropped = set(drop)
    columns = [f.name for f in table.schema().fields if f.name not in dropped]
    data = table.to_pyarrow_table(columns=columns)
    return data.cast(pa.schema([f.with_type(_naive(f.type)) for f in data.schema]))


def rows(path: Path | str, drop: Iterable[str] = ()) -> list[dict]:
    """Every row of the table as {column: value}, in the table's column order."""
    return arrow(path, drop).to_pylist()


def tuples(path: Path | str, drop: Iterable[str] = ()) -> list[tuple]:
    """Every row of the table as a tuple of its values in column order, sorted by their repr (a stable order)."""
    return sorted((tuple(r.values()) for r in rows(path, drop)), key=repr)


def version(path: Path | str) -> int:
    """The table's current Delta version."""
    return DeltaTable(str(path)).version()


def table_path(warehouse: Path, spec: TableSpec) -> Path:
    return warehouse / spec.schema / spec.table


def contents(warehouse: Path, specs: Iterable[TableSpec], drop: Iterable[str] = ()) -> dict[str, list[str]]:
    """Every row of each table, as sorted JSON text per table name (NaN equals NaN there, unlike in tuples)."""
    drop = tuple(drop)
    return {
        spec.name: sorted(json.dumps(r, default=str) for r in rows(table_path(warehouse, spec), drop)) for spec in specs
    }
