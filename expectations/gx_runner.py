"""Runs a suite with Great Expectations 1.x on a Spark DataFrame, once per batch, and reports each rule's outcome."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from quorumlake.expectations.rules import Rule, Suite, null_safe


@dataclass(frozen=True)
class RuleOutcome:
    rule: str
    expectation: str
    success: bool
    element_count: int | None
    unexpected_count: int | None
    error: str | None = None


class GxValidator:
    """One ephemeral GX context per process; one datasource and one validation definition per suite."""

    def __init__(self) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        self._gx = gx
        self._context = gx.get_context(mode="ephemeral")
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self._spark_source: Any = None
        self._definitions: dict[str, Any] = {}

    @property
    def _source(self) -> Any:
        """GX's Spark datasource, added at the first validation: adding it asks Spark for a session (GX tests its
        connection), which a validator made before any DataFrame exists would start."""
        if self._spark_source is None:
            # persist=False: GX would otherwise cache every batch (and caching is restricted on serverless).
            self._spark_source = self._context.data_sources.add_or_update_spark(name="quorumlake", persist=False)
        return self._spark_source

    def validate(self, df: DataFrame, suite: Suite, params: dict[str, Any]) -> list[RuleOutcome]:
        definition = self._definition(suite, params)
        # BASIC gives the counts silver.dq_validations records; no sample of unexpected values (a Spark job per
        # expectation that nobody reads: the quarantine holds every failing row with its rule names)
        result = definition.run(
            batch_parameters={"dataframe": df}, result_format={"result_format": "BASIC", "partial_unexpected_count": 0}
        )
        outcomes = []
        for r in result.results:
            config = r.expectation_config
            rule = (config.meta or {}).get("rule", config.type)
            res = r.result or {}
            if config.type == "unexpected_rows_expectation":
                unexpected = res.get("observed_value")
                element = None
            else:
                unexpected = res.get("unexpected_count")
                element = res.get("element_count")
            error = None
            if r.exception_info and r.exception_info.get("raised_exception"):
                error = str(r.exception_info.get("exception_message"))[:500]
            outcomes.append(RuleOutcome(rule, config.type, bool(r.success), element, unexpected, error))
        return outcomes

    def _definition(self, suite: Suite, params: dict[str, Any]):
        # Parameters (the run's time) are part of the expectations, so a definition is rebuilt per parameter set, and
        # per set of rules (two suites of one name, as a test may build, are two definitions, not the first one twice)
        key = f"{suite.name}:{sorted(params.items())}:{suite.rules!r}"
        if key not in self._definitions:
            gx = self._gx
            asset_name = suite.name
            try:
                asset = self._source.get_asset(asset_name)
            except LookupError:
                asset = self._source.add_dataframe_asset(name=asset_name)
            try:
                batch_definition = asset.get_batch_definition("batch")
            except (KeyError, LookupError):
                batch_definition = asset.add_batch_definition_whole_dataframe("batch")
            gx_suite = self._context.suites.add_or_update(
                gx.ExpectationSuite(name=suite.name, expectations=[gx_expectation(r, params) for r in suite.rules])
            )
            self._definitions = {k: v for k, v in self._definitions.items() if not k.startswith(suite.name + ":")}
            self._definitions[key] = self._context.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=gx_suite)
            )
        return self._definitions[key]


def gx_expectation(rule: Rule, params: dict[str, Any]):
    """`rule` as a Great Expectations expectation object."""
    import great_expectations.expectations as gxe

    meta = {"rule": rule.name}
    if rule.expectation == "expect_rows_to_satisfy_predicate":
        from quorumlake.expectations.gx_predicates import ExpectRowsToSatisfyPredicate

        return ExpectRowsToSatisfyPredicate(
            predicate=rule.row_predicate(params), description=rule.description or rule.name, meta=meta
        )
    if rule.expectation == "unexpected_rows_expectation":
        query = (
            f"SELECT * FROM (SELECT *, {null_safe(rule.row_predicate(params))} AS __passes "
            "FROM {batch}) WHERE NOT __passes"
        )
        return gxe.UnexpectedRowsExpectation(
            unexpected_rows_query=query, description=rule.description or rule.name, meta=meta
        )
    classes = {
        "expect_column_values_to_not_be_null": gxe.ExpectColumnValuesToNotBeNull,
        "expect_column_values_to_be_between": gxe.ExpectColumnValuesToBeBetween,
        "expect_column_values_to_be_in_set": gxe.ExpectColumnValuesToBeInSet,
        "expect_compound_columns_to_be_unique": gxe.ExpectCompoundColumnsToBeUnique,
    }
    return classes[rule.expectation](**rule.kwargs, meta=meta)
