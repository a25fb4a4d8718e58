"""The report's budget page: each cluster's SLO error budgets over the 28 days ending with its latest day, the
budgets over time, and the burn episodes (gold.slo_budget, gold.v_slo_burn_episodes)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, time, timezone
from html import escape
from typing import Any

from quorumlake.report.svg import line_chart, timeline_chart

QUERIES = {
    "budget_latest": "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY cluster_id, slo ORDER BY day DESC) AS n "
    "FROM {gold.slo_budget}) WHERE n = 1 ORDER BY cluster_id, slo",
    "budget_days": "SELECT cluster_id, slo, day, budget_remaining_28d FROM {gold.slo_budget} ORDER BY day",
    "burn_episodes": "SELECT e.*, l.last_at FROM {gold.v_slo_burn_episodes} e JOIN (SELECT cluster_id, slo, "
    "max(window_end) AS last_at FROM {gold.slo_burn} GROUP BY cluster_id, slo) l USING (cluster_id, slo) "
    "ORDER BY started_at",
}
SLO_TITLES = {
    "quorum_lag": "quorum lag (MaxFollowerLagTimeMs within the SLO)",
    "write_availability": "write availability (not offline, ISR at least the effective min ISR)",
    "metadata_freshness": "metadata freshness (divergence within the warning threshold)",
}


def _day_ms(d: date) -> float:
    return datetime.combine(d, time(), tzinfo=timezone.utc).timestamp() * 1000


def _ms(ts: datetime) -> float:
    return ts.replace(tzinfo=timezone.utc).timestamp() * 1000 if ts.tzinfo is None else ts.timestamp() * 1000


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.3f} %"


def _status(remaining: float | None) -> str:
    """Colour of a remaining budget: spent (critical), under a quarter left (warn), else ok."""
    if remaining is None:
        return ""
    return "critical" if remaining < 0 else "warn" if remaining < 0.25 else "ok"


def budget_section(data: dict[str, list[dict[str, Any]]]) -> str:
    """The HTML of the budget page from the rows of `QUERIES`' datasets."""
    latest = data["budget_latest"]
    head = "".join(
        f"<th>{c}</th>"
        for c in ("cluster_id", "slo", "day", "objective", "attainment (28 d)", "budget left (28 d)", "days")
    )
    body = []
    for r in latest:
        cells = [
            ("l", r["cluster_id"]),
            ("l", r["slo"]),
            ("l", r["day"].isoformat()),
            ("", _percent(r["objective"])),
            ("", _percent(r["attainment_28d"])),
            (_status(r["budget_remaining_28d"]), _percent(r["budget_remaining_28d"])),
            ("", str(r["days_28d"])),
        ]
        body.append("<tr>" + "".join(f'<td class="{c}">{escape(v)}</td>' for c, v in cells) + "</tr>")
    table = f"<table><tr>{head}</tr>{''.join(body)}</table>"

    per_slo: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in data["budget_days"]:
        value = r["budget_remaining_28d"]
        per_slo[r["slo"]][r["cluster_id"]].append((_day_ms(r["day"]), None if value is None else 100 * value))
    charts = [
        line_chart(
            f"Error budget left over 28 days: {SLO_TITLES.get(slo, slo)}",
            "budget left (%)",
            dict(sorted(series.items())),
            hlines=[(0.0, "spent")],
        )
        for slo, series in sorted(per_slo.items())
    ]
    rows = [
        (
            f"{e['cluster_id'][:18]} {e['slo']}",
            _ms(e["started_at"]),
            _ms(e["ended_at"] or e["last_at"]),
            e["kind"] == "fast",
            e["ended_at"] is None,
        )
        for e in data["burn_episodes"]
    ]
    episodes = timeline_chart(
        "Burn episodes (fast: page; slow: ticket)",
        rows[-60:],
        legend=("slow burn (6 h and 30 min above 6x)", "fast burn (1 h and 5 min above 14.4x)"),
        axis_label="cluster SLO",
    )
    return (
        "<h2>Error budgets (28 days)</h2>"
        '<p class="meta">Per cluster and SLO at its latest day: the share of good events over the 28 days ending with '
        "it, and the share of the error budget (1 - objective) left; negative when overspent.</p>"
        f'{table}<div class="charts">{"".join(charts)}{episodes}</div>'
    )
