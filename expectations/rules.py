"""Data-quality rules, kept as data (one Great Expectations suite per silver table, `expectations/*.json`).

Each rule is written once and used twice:
- as a Great Expectations 1.x expectation, run once per batch to record what failed when (`silver.dq_validations`);
- as a row-level Spark SQL predicate that splits the batch into valid rows and quarantined rows, each quarantined
  row carrying the names of every rule it failed.
The predicate of a built-in expectation is derived from its type and arguments; a rule of the project's own
`expect_rows_to_satisfy_predicate` (`expectations/gx_predicates.py`) states its predicate, which GX counts as one
aggregate of the batch; a stated predicate that needs a window function (an aggregate cannot hold one) is an
`unexpected_rows_expectation`, whose GX query is built from that same predicate.
Predicates may use `{run_at}` (the run's time) and `{future_skew_ms}`; they are null-safe: NULL counts as failed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# the expectations whose rule states its own predicate
STATED = ("expect_rows_to_satisfy_predicate", "unexpected_rows_expectation")
_WINDOW = re.compile(r"\bOVER\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class Rule:
    name: str
    expectation: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    predicate: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.expectation in STATED and not self.predicate:
            raise ValueError(f"rule {self.name}: {self.expectation} needs a predicate")
        if self.expectation == "expect_rows_to_satisfy_predicate" and _WINDOW.search(self.predicate):
            raise ValueError(
                f"rule {self.name}: a predicate with a window function cannot be counted as an aggregate; "
                "declare it as unexpected_rows_expectation"
            )

    def row_predicate(self, params: dict[str, Any]) -> str:
        """A Spark SQL boolean that is true for the rows that pass this rule."""
        kw = self.kwargs
        if self.expectation == "expect_column_values_to_not_be_null":
            return f"`{kw['column']}` IS NOT NULL"
        if self.expectation == "expect_column_values_to_be_between":
            bounds = []
            if kw.get("min_value") is not None:
                bounds.append(f"`{kw['column']}` >= {_sql_literal(kw['min_value'])}")
            if kw.get("max_value") is not None:
                bounds.append(f"`{kw['column']}` <= {_sql_literal(kw['max_value'])}")
            return f"`{kw['column']}` IS NULL OR ({' AND '.join(bounds) or 'true'})"
        if self.expectation == "expect_column_values_to_be_in_set":
            values = ", ".join(_sql_literal(v) for v in kw["value_set"])
            return f"`{kw['column']}` IS NULL OR `{kw['column']}` IN ({values})"
        if self.expectation == "expect_compound_columns_to_be_unique":
            cols = ", ".join(f"`{c}`" for c in kw["column_list"])
            return f"count(1) OVER (PARTITION BY {cols}) = 1"
        if self.expectation in STATED:
            return _substitute(self.predicate, params)
        raise ValueError(f"rule {self.name}: unsupported expectation {self.expectation!r}")


@dataclass(frozen=True)
class Suite:
    table: str
    rules: tuple[Rule, ...]

    @property
    def name(self) -> str:
        return self.table.replace(".", "_")


def load_suite(table: str) -> Suite:
    """The suite of a silver table, from `expectations/<schema>_<table>.json`."""
    file_name = table.replace(".", "_") + ".json"
    data = json.loads(resources.files("quorumlake.expectations").joinpath(file_name).read_text(encoding="utf-8"))
    if data.get("table") != table:
        raise ValueError(f"{file_name} declares table {data.get('table')!r}, expected {table!r}")
    rules = tuple(
        Rule(r["name"], r["expectation"], r.get("kwargs", {}), r.get("predicate"), r.get("description", ""))
        for r in data["rules"]
    )
    names = [r.name for r in rules]
    if len(set(names)) != len(names):
        raise ValueError(f"{file_name}: rule names must be unique")
    return Suite(table, rules)


def rule_params(run_at: datetime, future_skew_ms: int) -> dict[str, Any]:
    return {"run_at": f"TIMESTAMP '{run_at.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'", "future_skew_ms": future_skew_ms}


def with_failed_rules(rows: DataFrame, suite: Suite, params: dict[str, Any]) -> DataFrame:
    """Add `failed_rules ARRAY<STRING>`: the names of every rule the row fails (empty when valid)."""
    flags = [F.expr(null_safe(rule.row_predicate(params))).alias(f"__ok_{i}") for i, rule in enumerate(suite.rules)]
    flagged = rows.select("*", *flags)
    names = [F.when(~F.col(f"__ok_{i}"), F.lit(rule.name)) for i, rule in enumerate(suite.rules)]
    failed: Column = F.filter(F.array(*names), lambda x: x.isNotNull()) if names else F.array().cast("array<string>")
    return flagged.withColumn("failed_rules", failed).drop(*[f"__ok_{i}" for i in range(len(suite.rules))])


def null_safe(predicate: str) -> str:
    """`predicate` (Spark SQL) as a boolean that is false where it comes out NULL: a NULL counts as failed, in the
    row-level split and in Great Expectations alike."""
    return f"coalesce(({predicate}), false)"


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _substitute(text: str, params: dict[str, Any]) -> str:
    for key, value in params.items():
        text = text.replace("{" + key + "}", str(value))
    return text
