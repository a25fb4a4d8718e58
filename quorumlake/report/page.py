"""`quorumlake report`: one self-contained HTML page (inline CSS and SVG, works offline) over the gold tables."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from html import escape
from typing import Any

from quorumlake.contract.tables import resolve_names
from quorumlake.report.budget import QUERIES as BUDGET_QUERIES
from quorumlake.report.budget import budget_section
from quorumlake.report.svg import incident_timeline, line_chart, timeline_chart

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{margin:0 0 4px}h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:13px}.charts{display:flex;flex-wrap:wrap;gap:12px}
svg{background:#fff;border:1px solid #e3e3e3;border-radius:4px}
svg .title{font-size:14px;font-weight:600}svg .label{font-size:12px;fill:#444}svg .tick{font-size:10px;fill:#555}
svg .axis{stroke:#333;stroke-width:1}svg .grid{stroke:#eee;stroke-width:1}
svg .threshold{stroke:#555;stroke-width:1.2;stroke-dasharray:6,4}
table{border-collapse:collapse;font-size:13px;background:#fff}th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f0f0f0}td.l{text-align:left}.ok{background:#dff3df}.warn{background:#fff1cc}.critical{background:#f8d0d0}
.stale{background:#e8e8e8}td.na,span.na{color:#888;background:#f2f2f2;font-style:italic}p.note{color:#555;font-size:13px}
"""


def _ms(ts: datetime | None) -> float | None:
    return None if ts is None else ts.timestamp() * 1000


# The report's queries, over contract names in braces (resolved to a lakehouse's own names by `queries`).
_QUERIES = {
    "overview": "SELECT * FROM {gold.v_fleet_overview} ORDER BY cluster_id",
    "lag": "SELECT cluster_id, replica_id, window_start, max_caught_up_lag_ms FROM {gold.replica_lag_sli} "
    "WHERE is_voter ORDER BY window_start",
    "sli": "SELECT cluster_id, window_start, sli, unknown_snapshots FROM {gold.quorum_health} ORDER BY window_start",
    "isr": "SELECT cluster_id, collected_at, at_min_isr, under_min_isr, offline FROM {gold.isr_health} "
    "ORDER BY collected_at",
    "episodes": "SELECT e.*, l.last_at FROM {gold.at_min_isr_episodes} e JOIN (SELECT cluster_id, "
    "max(collected_at) AS last_at FROM {gold.isr_health} GROUP BY cluster_id) l USING (cluster_id) ORDER BY started_at",
    "divergence": "SELECT cluster_id, node_id, scraped_at, divergence_records FROM {gold.metadata_offset_divergence} "
    "WHERE node_role <> 'controller' ORDER BY scraped_at",
    "incidents": "SELECT cluster_id, incident_id, started_at, ended_at, duration_ms, severity, `trigger`, "
    "trigger_node_id, summary FROM {gold.incidents} ORDER BY cluster_id, started_at",
    "incident_events": "SELECT cluster_id, incident_id, event_at, ended_at, kind, node_id, topic, `partition` "
    "FROM {gold.incident_events} ORDER BY cluster_id, event_at",
    **BUDGET_QUERIES,
}


def queries(resolve: Callable[[str], str]) -> dict[str, str]:
    """The SQL of each of the report's datasets, with contract names (`gold.quorum_health`) given by `resolve`."""
    return {key: resolve_names(sql, resolve) for key, sql in _QUERIES.items()}


def build_report(data: dict[str, list[dict[str, Any]]], slo_ms: int, generated_at: datetime) -> str:
    """The HTML page from the rows of each of `queries`' datasets."""
    overview = data["overview"]
    sections = [_overview_table(overview), budget_section(data)]

    lag = data["lag"]
    by_cluster: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in lag:
        by_cluster[r["cluster_id"]][f"voter {r['replica_id']}"].append(
            (_ms(r["window_start"]), r["max_caught_up_lag_ms"])
        )
    charts = [
        line_chart(
            f"{cluster}: voter caught-up lag (max per window)",
            "caught-up lag (ms)",
            series,
            hlines=[(slo_ms, f"SLO {slo_ms} ms")],
            empty="n/a: the caught-up lag is unknown (no timestamps, e.g. DescribeQuorum v0)",
        )
        for cluster, series in sorted(by_cluster.items())
    ]
    sections.append(_section("Voter caught-up lag over time, per cluster", charts))

    sli = data["sli"]
    series: dict[str, list] = defaultdict(list)
    for r in sli:
        series[r["cluster_id"]].append((_ms(r["window_start"]), None if r["sli"] is None else 100 * r["sli"]))
    # a window whose snapshots all had an unknown lag time has no SLI: a gap in its line, never 0 %
    unknown = sorted(c for c, points in series.items() if all(y is None for _, y in points))
    sections.append(
        _section(
            "Quorum SLI attainment",
            [
                line_chart(
                    "Quorum SLI per 5-minute window (share of good snapshots among those with a known lag)",
                    "SLI (%)",
                    {c: points for c, points in sorted(series.items()) if c not in unknown},
                    y_max=100,
                )
            ],
            _unknown_note(unknown),
        )
    )

    isr = data["isr"]
    per_cluster: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in isr:
        t = _ms(r["collected_at"])
        for col, label in (("at_min_isr", "AtMinIsr"), ("under_min_isr", "under min ISR"), ("offline", "offline")):
            per_cluster[r["cluster_id"]][label].append((t, r[col]))
    charts = [
        line_chart(f"{cluster}: partitions at/under min ISR and offline", "partitions", s, step=True)
        for cluster, s in sorted(per_cluster.items())
        if any(y for pts in s.values() for _, y in pts)
    ]
    sections.append(
        _section(
            "AtMinIsr, under-min-ISR and offline partitions over time (clusters with any)",
            charts or [line_chart("No cluster had AtMinIsr, under-min-ISR or offline partitions", "partitions", {})],
        )
    )

    episodes = data["episodes"]
    rows = [
        (
            f"{e['cluster_id'][:18]} {e['topic'][:14]}-{e['partition']}",
            _ms(e["started_at"]),
            _ms(e["ended_at"] or e["last_at"]),
            bool(e["escalated"]),
            e["ended_at"] is None,
        )
        for e in episodes
    ]
    sections.append(_section("AtMinIsr episodes", [timeline_chart("AtMinIsr episodes per partition", rows[:60])]))

    sections.extend(_incidents(data["incidents"], data["incident_events"]))

    div = data["divergence"]
    per_node: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in div:
        per_node[r["cluster_id"]][f"node {r['node_id']}"].append((_ms(r["scraped_at"]), r["divergence_records"]))
    charts = [
        line_chart(f"{cluster}: metadata offset divergence per node", "records behind the controller", s)
        for cluster, s in sorted(per_node.items())
    ]
    sections.append(_section("Metadata offset divergence (KIP-835), brokers vs the active controller", charts))

    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>quorumlake fleet report</title>'
        f"<style>{CSS}</style></head><body><h1>quorumlake fleet report</h1>"
        f'<p class="meta">Generated {escape(generated_at.isoformat(timespec="seconds"))} from the gold tables. '
        "Times are UTC.</p>" + "".join(sections) + "</body></html>"
    )


# The report shows at most this many incidents per cluster on its timeline, and this many in the table (the latest).
MAX_TIMELINE_INCIDENTS = 12
MAX_TABLE_INCIDENTS = 50


def _incidents(incidents: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[str]:
    """Per cluster, a timeline of its latest incidents (a lane per node, the anomalies on them), and a table of the
    fleet's latest incidents."""
    by_cluster: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i in incidents:
        by_cluster[i["cluster_id"]].append(i)
    charts = []
    for cluster, rows in sorted(by_cluster.items()):
        shown = rows[-MAX_TIMELINE_INCIDENTS:]
        ends = {i["incident_id"]: _ms(i["started_at"]) + (i["duration_ms"] or 0) for i in shown}
        bands = [
            (_ms(i["started_at"]), ends[i["incident_id"]], i["severity"], f"{i['severity']} {i['incident_id']}")
            for i in shown
        ]
        bars = [
            (
                _lane(e),
                e["kind"],
                _ms(e["event_at"]),
                _ms(e["ended_at"]) if e["ended_at"] is not None else ends[e["incident_id"]],
                e["ended_at"] is None,
            )
            for e in events
            if e["cluster_id"] == cluster and e["incident_id"] in ends
        ]
        charts.append(incident_timeline(f"{cluster}: incidents (a lane per node)", bands, bars))
    if not charts:
        charts = [incident_timeline("No incidents", [], [])]
    latest = sorted(incidents, key=lambda i: i["started_at"], reverse=True)[:MAX_TABLE_INCIDENTS]
    return [_section("Incidents: what happened, to whom, per cluster", charts), _incident_table(latest)]


def _lane(event: dict[str, Any]) -> str:
    if event["node_id"] is not None:
        return f"node {event['node_id']}"
    return "partitions" if event["topic"] is not None else "cluster"


def _incident_table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in ("cluster", "started (UTC)", "ended", "severity", "trigger", "summary"))
    body = []
    for r in rows:
        ended = r["ended_at"].strftime("%Y-%m-%d %H:%M:%S") if r["ended_at"] is not None else "open"
        trigger = r["trigger"] + ("" if r["trigger_node_id"] is None else f" (node {r['trigger_node_id']})")
        cells = [
            ("l", r["cluster_id"]),
            ("l", r["started_at"].strftime("%Y-%m-%d %H:%M:%S")),
            ("l", ended),
            (r["severity"], r["severity"]),
            ("l", trigger),
            ("l", r["summary"]),
        ]
        body.append("<tr>" + "".join(f'<td class="{c}">{escape(str(v))}</td>' for c, v in cells) + "</tr>")
    if not body:
        body = ['<tr><td class="l" colspan="6">no incidents</td></tr>']
    return f"<h3>Latest incidents</h3><table><tr>{head}</tr>{''.join(body)}</table>"


def _section(title: str, charts: list[str], note: str = "") -> str:
    return f'<h2>{escape(title)}</h2>{note}<div class="charts">{"".join(charts)}</div>'


def _unknown_note(clusters: list[str]) -> str:
    """The clusters whose quorum SLI is unknown in every window (no snapshot with a known lag time)."""
    if not clusters:
        return ""
    return (
        '<p class="note">SLI <span class="na">n/a</span> (lag time unknown, e.g. DescribeQuorum v0: neither good nor '
        f"bad) for: {escape(', '.join(clusters))}</p>"
    )


# Fleet-overview cells that show "n/a" (grey) where the value is unknown: a lag time of -1, a NULL count.
_UNKNOWN_WHEN_NEGATIVE = {"max_follower_lag_time_ms"}
_UNKNOWN_WHEN_NULL = {"voters_not_fetching"}


def _cell(column: str, row: dict[str, Any]) -> tuple[str, str]:
    """(text, css class) of one fleet-overview cell."""
    v = row.get(column)
    if (column in _UNKNOWN_WHEN_NEGATIVE and v is not None and v < 0) or (column in _UNKNOWN_WHEN_NULL and v is None):
        return "n/a", "na"
    if column == "voters_within_slo" and v is not None and row.get("voters_lag_unknown"):
        # voters whose lag is unknown are neither within nor outside the SLO
        if row["voters_lag_unknown"] >= (row.get("voters") or 0):
            return "n/a", "na"
        return f"{v} ({row['voters_lag_unknown']} n/a)", ""
    if column == "quorum_lag":
        good = row.get("is_good")
        if good is None:
            return ("n/a", "na") if row.get("leader_id") is not None else ("", "")
        return ("within SLO", "") if good else ("over SLO", "")
    text = "" if v is None else (v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else str(v))
    cls = (
        "l"
        if column in ("cluster_id", "as_of", "latest_incident")
        else (row.get("status") if column == "status" else "")
    )
    return text, cls or ""


def _overview_table(rows: list[dict[str, Any]]) -> str:
    columns = [
        "cluster_id",
        "status",
        "as_of",
        "leader_id",
        "max_follower_lag",
        "max_follower_lag_time_ms",
        "quorum_lag",
        "voters",
        "voters_within_slo",
        "voters_not_fetching",
        "at_min_isr",
        "under_min_isr",
        "offline",
        "worst_divergence_records",
        "open_incidents",
        "latest_incident",
    ]
    head = "".join(f"<th>{c}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            text, cls = _cell(c, r)
            cells.append(f'<td class="{cls}">{escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<h2>Fleet overview (latest)</h2><table><tr>{head}</tr>{''.join(body)}</table>"
