"""A Great Expectations expectation for a rule stated as a row predicate: `expect_rows_to_satisfy_predicate`.

GX's own `UnexpectedRowsExpectation` runs two Spark jobs per rule whatever the result format: its query's rows (a
sample nobody reads here: the quarantine holds every failing row) and their count. This expectation asks GX for one
metric instead, the count of rows whose predicate is not true, declared as an aggregate over the whole batch; GX
computes every aggregate of a batch at the same step of its metric graph in one Spark job (with the built-in
expectations' row count and unexpected counts), so a suite's stated predicates cost no job of their own.

An aggregate cannot hold a window function: a predicate that needs one (`... OVER (PARTITION BY ...)`) stays an
`unexpected_rows_expectation` (`expectations/rules.py` refuses it here).

Imported only once Great Expectations is (by `gx_runner.gx_expectation`): defining the classes registers them with GX.
"""

from __future__ import annotations

from typing import Any, ClassVar

from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.core.metric_function_types import MetricPartialFunctionTypes
from great_expectations.execution_engine import SparkDFExecutionEngine
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.expectations.metrics.metric_provider import metric_partial
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from pyspark.sql import functions as F

from quorumlake.expectations.rules import null_safe

FAILING_ROWS = "quorumlake.rows_not_satisfying_predicate"


class RowsNotSatisfyingPredicate(TableMetricProvider):
    """How many rows of the batch the predicate is not true for (false or NULL), as one aggregate of the batch."""

    metric_name = FAILING_ROWS
    value_keys = ("predicate",)

    @metric_partial(
        engine=SparkDFExecutionEngine,
        partial_fn_type=MetricPartialFunctionTypes.AGGREGATE_FN,
        domain_type=MetricDomainTypes.TABLE,
    )
    def _spark(
        cls,
        execution_engine: SparkDFExecutionEngine,
        metric_domain_kwargs: dict,
        metric_value_kwargs: dict,
        metrics: dict[str, Any],
        runtime_configuration: dict,
    ):
        passes = F.expr(null_safe(metric_value_kwargs["predicate"]))
        return F.count_if(~passes), metric_domain_kwargs, {}


class ExpectRowsToSatisfyPredicate(BatchExpectation):
    """Every row of the batch satisfies `predicate` (Spark SQL; NULL fails). Reports the batch's rows as
    `element_count` and the rows that fail as `unexpected_count` (and `observed_value`)."""

    predicate: str

    metric_dependencies: ClassVar[tuple[str, ...]] = (FAILING_ROWS, "table.row_count")
    success_keys: ClassVar[tuple[str, ...]] = ("predicate",)

    def _validate(self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None) -> dict:
        failing, rows = metrics[FAILING_ROWS], metrics["table.row_count"]
        return {
            "success": failing == 0,
            "result": {"observed_value": failing, "element_count": rows, "unexpected_count": failing},
        }
