"""Unity Catalog metric views over gold: the SLO measures BI tools re-aggregate correctly at any grain.

A metric view (`CREATE VIEW ... WITH METRICS LANGUAGE YAML`, Databricks SQL) declares dimensions and measures over
a source table; a measure is an aggregate expression evaluated at whatever grain a query groups by, so `sli` is
sum(good) / sum(judged snapshots) for a day, a week or the whole fleet, never an average of ratios. Each dimension and
measure carries a display name, and each measure a display format, and synonyms for natural-language tools (Genie).

The definitions are data (`MetricViewSpec`), rendered as YAML specification 1.1. On Databricks the gold task creates
them (`quorumlake.pipelines.jobs.gold_job.create_views`, Unity Catalog only: open-source Spark has no metric views);
locally tests/unit/test_metric_views.py proves every one parses and names only columns its source has, and
tests/e2e/test_demo_report_serve.py evaluates every measure on the demo warehouse.

To add measures, append a `MetricViewSpec` to `METRIC_VIEWS` (or measures to an existing spec over the same
source): both tests pick it up. `gold.m_slo_budget` is the SLO error budgets' (gold.slo_budget); a metric view over
gold.slo_burn's per-window counts would be another.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from quorumlake.contract.tables import resolve_names

# Display formats of measures (`format`): whole counts, milliseconds, and ratios shown as percentages. Dimensions keep
# their columns' own display (dates and times as the BI tool shows them).
COUNT = {"type": "number", "decimal_places": {"type": "exact", "places": 0}}
MILLISECONDS = {"type": "number", "decimal_places": {"type": "exact", "places": 0}}
RATIO = {"type": "percentage", "decimal_places": {"type": "exact", "places": 2}}


@dataclass(frozen=True)
class Field:
    """A dimension (`expr` over the source's columns) or a measure (`expr` an aggregate of them)."""

    name: str
    expr: str
    display_name: str
    comment: str
    synonyms: tuple[str, ...] = ()
    format: dict | None = None


@dataclass(frozen=True)
class MetricViewSpec:
    name: str  # gold.m_...
    source: str  # the registry's table it reads (gold.quorum_status)
    comment: str
    dimensions: tuple[Field, ...]
    measures: tuple[Field, ...] = field(default=())

    @property
    def yaml(self) -> str:
        """The definition, YAML specification 1.1, with `{gold.table}` for the source (resolved per lakehouse).
        Every scalar is written as JSON, which YAML reads as the same value."""
        lines = ["version: " + json.dumps("1.1"), "comment: " + json.dumps(self.comment)]
        lines.append("source: {" + self.source + "}")
        for section, fields in (("dimensions", self.dimensions), ("measures", self.measures)):
            lines.append(f"{section}:")
            for f in fields:
                lines.append("  - name: " + json.dumps(f.name))
                lines.append("    expr: " + json.dumps(f.expr))
                lines.append("    display_name: " + json.dumps(f.display_name))
                lines.append("    comment: " + json.dumps(f.comment))
                if f.format is not None:
                    lines.append("    format: " + json.dumps(f.format))
                if f.synonyms:
                    lines.append("    synonyms: " + json.dumps(list(f.synonyms)))
        return "\n".join(lines) + "\n"


_CLUSTER = Field(
    "cluster_id", "cluster_id", "Cluster", "Kafka cluster (the fleet's name for it)", ("kafka cluster", "cluster name")
)

QUORUM_SLO_METRICS = MetricViewSpec(
    "gold.m_quorum_slo",
    "gold.quorum_status",
    "Quorum SLO attainment over any slice of clusters and time: a quorum snapshot is good when it has a leader and "
    "MaxFollowerLagTimeMs is between 0 and the SLO, unknown when its lag time is unknown. sli is sum(good) / "
    "sum(judged snapshots) at the query's grain.",
    (
        _CLUSTER,
        Field("day", "DATE_TRUNC('DAY', collected_at)", "Day", "UTC day of the snapshot", ("date",)),
        Field("hour", "DATE_TRUNC('HOUR', collected_at)", "Hour", "UTC hour of the snapshot"),
        Field("window_start", "window_start", "Window start", "Start of the tumbling window holding the snapshot"),
    ),
    (
        Field(
            "snapshots",
            "COUNT(1)",
            "Quorum snapshots",
            "Quorum snapshots, error responses included",
            ("samples", "DescribeQuorum responses"),
            COUNT,
        ),
        Field(
            "good_snapshots",
            "COUNT_IF(is_good)",
            "Good quorum snapshots",
            "Snapshots with a leader and MaxFollowerLagTimeMs within the SLO",
            ("good samples", "snapshots within SLO"),
            COUNT,
        ),
        Field(
            "unknown_snapshots",
            "COUNT_IF(is_good IS NULL)",
            "Unknown quorum snapshots",
            "Snapshots whose lag time is unknown (n/a): neither good nor bad",
            ("n/a snapshots", "snapshots without lag time"),
            COUNT,
        ),
        Field(
            "sli",
            "COUNT_IF(is_good) / NULLIF(COUNT_IF(is_good IS NOT NULL), 0)",
            "Quorum SLI",
            "good_snapshots / judged snapshots (snapshots - unknown_snapshots) over the rows of the query's grain "
            "(never an average of ratios); NULL when none was judged",
            ("quorum SLO attainment", "quorum availability", "quorum health ratio"),
            RATIO,
        ),
        Field(
            "leader_changes",
            "SUM(leader_change)",
            "Leader changes",
            "Leader epoch increases",
            ("elections", "leader elections", "failovers"),
            COUNT,
        ),
    ),
)

REPLICA_SLO_METRICS = MetricViewSpec(
    "gold.m_replica_slo",
    "gold.replica_lag_sli",
    "Replica caught-up-lag SLO attainment over any slice of clusters, replicas and time, from the per-window counts "
    "of gold.replica_lag_sli: sli is sum(good_snapshots) / (sum(snapshots) - sum(unknown_snapshots)) at the query's "
    "grain.",
    (
        _CLUSTER,
        Field("replica_id", "replica_id", "Replica", "Replica (node) id", ("node", "controller", "voter id")),
        Field("is_voter", "is_voter", "Is voter", "Voter (true) or observer (false)", ("voter", "observer")),
        Field(
            "is_removed_voter",
            "is_removed_voter",
            "Is removed voter",
            "Observer rows of a voter removed from the quorum that Kafka still lists (not a failing observer)",
            ("decommissioned voter", "removed controller"),
        ),
        Field("day", "DATE_TRUNC('DAY', window_start)", "Day", "UTC day of the window", ("date",)),
        Field("window_start", "window_start", "Window start", "Window start"),
    ),
    (
        Field(
            "snapshots", "SUM(snapshots)", "Replica snapshots", "Replica snapshots", ("samples", "observations"), COUNT
        ),
        Field(
            "good_snapshots",
            "SUM(good_snapshots)",
            "Good replica snapshots",
            "Replica snapshots with a known caught-up lag within the SLO",
            ("good samples", "snapshots within SLO"),
            COUNT,
        ),
        Field(
            "unknown_snapshots",
            "SUM(unknown_snapshots)",
            "Unknown replica snapshots",
            "Replica snapshots whose caught-up lag is unknown (n/a): neither good nor bad",
            ("n/a samples", "snapshots without lag time"),
            COUNT,
        ),
        Field(
            "sli",
            "SUM(good_snapshots) / NULLIF(SUM(snapshots) - SUM(unknown_snapshots), 0)",
            "Replica lag SLI",
            "good_snapshots / snapshots with a known lag over the rows of the query's grain (never an average of "
            "ratios); NULL when none was judged",
            ("replica SLO attainment", "voter lag SLI", "caught-up ratio"),
            RATIO,
        ),
        Field(
            "max_caught_up_lag_ms",
            "MAX(max_caught_up_lag_ms)",
            "Max caught-up lag (ms)",
            "Largest known caught-up lag (ms)",
            ("worst replica lag", "max follower lag time"),
            MILLISECONDS,
        ),
    ),
)

SLO_BUDGET_METRICS = MetricViewSpec(
    "gold.m_slo_budget",
    "gold.slo_budget",
    "Error budgets of the three SLOs (quorum_lag, write_availability, metadata_freshness) over any slice of "
    "clusters, SLOs and days, from the daily event counts of gold.slo_budget: attainment is sum(good) / sum(total), "
    "and the budget left is 1 - bad events / allowed bad events, both summed at the query's grain.",
    (
        _CLUSTER,
        Field("slo", "slo", "SLO", "quorum_lag, write_availability or metadata_freshness", ("objective name",)),
        Field("day", "day", "Day", "UTC day", ("date",)),
    ),
    (
        Field("good", "SUM(good)", "Good events", "Good events", ("good samples",), COUNT),
        Field("total", "SUM(total)", "Events", "Events counted against the SLO", ("samples", "observations"), COUNT),
        Field(
            "attainment",
            "SUM(good) / SUM(total)",
            "SLO attainment",
            "good / total over the rows of the query's grain (never an average of daily ratios)",
            ("SLI", "availability", "success ratio"),
            RATIO,
        ),
        Field(
            "budget_remaining",
            "1 - (SUM(total) - SUM(good)) / SUM(total * (1 - objective))",
            "Error budget remaining",
            "Share of the error budget left over the query's days: 1 - bad events / bad events the objectives allow; "
            "negative when overspent",
            ("budget left", "error budget"),
            RATIO,
        ),
    ),
)

METRIC_VIEWS: tuple[MetricViewSpec, ...] = (QUORUM_SLO_METRICS, REPLICA_SLO_METRICS, SLO_BUDGET_METRICS)


def metric_view_statements(resolve: Callable[[str], str]) -> list[str]:
    """CREATE OR REPLACE VIEW ... WITH METRICS statements (Databricks SQL only), names resolved like the views'."""
    statements = []
    for view in METRIC_VIEWS:
        body = resolve_names(view.yaml, resolve)
        statements.append(f"CREATE OR REPLACE VIEW {resolve(view.name)} WITH METRICS LANGUAGE YAML AS $$\n{body}$$")
    return statements
