"""Every Unity Catalog metric view's definition against the table it reads, without Databricks: its YAML parses as
specification 1.1, every column a dimension or measure names exists in its source (the registry), measures aggregate
and dimensions do not, and the BI metadata (display names, formats, synonyms) is within Databricks' limits. The gold
task on Unity Catalog creates exactly these statements; open-source Spark cannot (tests/e2e/test_demo_report_serve.py
evaluates the same measures as plain SQL on the demo warehouse)."""

from __future__ import annotations

import re

import pytest
import sqlglot
import yaml
from sqlglot import exp

from quorumlake.contract.tables import by_name
from quorumlake.gold.metric_views import METRIC_VIEWS, metric_view_statements
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.jobs.gold_job import gold_view_statements

NUMBER_FORMATS = {"number", "percentage", "currency", "byte"}


def _definition(view) -> dict:
    return yaml.safe_load(re.sub(r"\{((?:bronze|silver|gold)\.[a-z_]+)\}", r"\1", view.yaml))


def _columns(expression: str) -> set[str]:
    return {c.name for c in sqlglot.parse_one(expression, read="databricks").find_all(exp.Column)}


def _aggregates(expression: str) -> bool:
    return any(sqlglot.parse_one(expression, read="databricks").find_all(exp.AggFunc))


@pytest.mark.parametrize("view", METRIC_VIEWS, ids=lambda v: v.name)
def test_the_definition_parses_as_a_version_1_1_metric_view_over_a_registry_table(view):
    definition = _definition(view)
    assert definition["version"] == "1.1"
    assert set(definition) <= {"version", "comment", "source", "filter", "joins", "dimensions", "measures"}
    assert definition["source"] == view.source
    assert by_name(view.source).schema == "gold"
    assert view.name.startswith("gold.m_")
    names = [f["name"] for f in definition["dimensions"] + definition["measures"]]
    assert len(names) == len(set(names)), "a dimension and a measure share a name"


@pytest.mark.parametrize("view", METRIC_VIEWS, ids=lambda v: v.name)
def test_every_column_it_names_is_in_its_source(view):
    columns = set(by_name(view.source).column_names)
    definition = _definition(view)
    for field in definition["dimensions"] + definition["measures"]:
        unknown = _columns(field["expr"]) - columns
        assert not unknown, f"{view.name}.{field['name']} names {sorted(unknown)}, not in {view.source}"


@pytest.mark.parametrize("view", METRIC_VIEWS, ids=lambda v: v.name)
def test_measures_aggregate_and_dimensions_do_not(view):
    definition = _definition(view)
    for measure in definition["measures"]:
        assert _aggregates(measure["expr"]), f"{view.name}.{measure['name']} is not an aggregate"
    for dimension in definition["dimensions"]:
        assert not _aggregates(dimension["expr"]), f"{view.name}.{dimension['name']} aggregates"


@pytest.mark.parametrize("view", METRIC_VIEWS, ids=lambda v: v.name)
def test_every_field_has_bi_metadata_within_the_limits(view):
    definition = _definition(view)
    for field in definition["dimensions"] + definition["measures"]:
        assert 0 < len(field["display_name"]) <= 255 and field["comment"]
        assert len(field.get("synonyms", [])) <= 10 and all(0 < len(s) <= 255 for s in field.get("synonyms", []))
    for measure in definition["measures"]:
        assert measure["synonyms"], f"{view.name}.{measure['name']}: no synonyms for natural-language tools"
        fmt = measure["format"]
        assert fmt["type"] in NUMBER_FORMATS and fmt["decimal_places"]["type"] in {"exact", "max", "all"}
    ratios = [m for m in definition["measures"] if m["format"]["type"] == "percentage"]
    assert ratios, f"{view.name} has no ratio measure"
    # a ratio is re-aggregated from its parts at the query's grain (a quotient of sums or counts), never averaged
    for m in definition["measures"]:
        tree = sqlglot.parse_one(m["expr"], read="databricks")
        assert not list(tree.find_all(exp.Avg)), f"{view.name}.{m['name']} averages"
        if m in ratios:
            assert list(tree.find_all(exp.Div)), f"{view.name}.{m['name']} is shown as a ratio but divides nothing"


def test_the_gold_task_creates_the_metric_views_on_unity_catalog_only():
    def name_of(name: str, catalog: str = "main") -> str:
        schema, obj = name.split(".")
        return f"{catalog}.dev_me_{schema}.{obj}"

    on_databricks = gold_view_statements(Config(catalog="main", schema_prefix="dev_me_"), name_of)
    metric = [s for s in on_databricks if "WITH METRICS" in s]
    assert metric == metric_view_statements(name_of)
    assert [s.split()[4] for s in metric] == [name_of(v.name) for v in METRIC_VIEWS]
    for statement, view in zip(metric, METRIC_VIEWS, strict=True):
        body = statement.split("$$")[1]
        assert yaml.safe_load(body)["source"] == name_of(view.source)
    assert not [s for s in gold_view_statements(Config(), lambda n: n) if "WITH METRICS" in s]
