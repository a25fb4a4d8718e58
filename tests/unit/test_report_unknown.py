"""The HTML report shows an unknown lag as unknown: "n/a" in grey, never a failing value (issue: unknown is not bad).
Plain Python on the rows the report's queries return; the demo end-to-end test renders the page from a warehouse."""

from __future__ import annotations

import re
from datetime import datetime

from quorumlake.report.page import build_report

T0, T1 = datetime(2026, 1, 1, 12, 0), datetime(2026, 1, 1, 12, 5)


def _overview(cluster: str, **values) -> dict:
    row = {
        "cluster_id": cluster,
        "status": "ok",
        "as_of": T1,
        "leader_id": 3000,
        "max_follower_lag": 0,
        "max_follower_lag_time_ms": 10,
        "is_good": True,
        "voters": 3,
        "voters_within_slo": 3,
        "voters_lag_unknown": 0,
        "voters_not_fetching": 0,
        "at_min_isr": 0,
        "under_min_isr": 0,
        "offline": 0,
        "worst_divergence_records": 0,
    }
    return row | values


def _page(overview: list[dict], sli: list[dict], lag: list[dict]) -> str:
    data = {
        "overview": overview,
        "lag": lag,
        "sli": sli,
        "isr": [],
        "episodes": [],
        "divergence": [],
        "budget_latest": [],
        "budget_days": [],
        "burn_episodes": [],
        "incidents": [],
        "incident_events": [],
    }
    return build_report(data, 2000, T1)


def _row(html: str, cluster: str) -> list[tuple[str, str]]:
    """(class, text) of each cell of the cluster's fleet-overview row."""
    row = re.search(rf'<tr><td class="l">{cluster}</td>.*?</tr>', html).group(0)
    return re.findall(r'<td class="([^"]*)">([^<]*)</td>', row)


def test_the_overview_shows_an_unknown_lag_as_grey_n_a():
    v0 = _overview(
        "v0",
        max_follower_lag=12,
        max_follower_lag_time_ms=-1,
        is_good=None,
        voters_within_slo=1,
        voters_lag_unknown=2,
        voters_not_fetching=None,
    )
    v0_all = _overview("v0-all", max_follower_lag_time_ms=-1, is_good=None, voters_within_slo=0, voters_lag_unknown=3)
    lagging = _overview("lagging", status="warn", max_follower_lag_time_ms=90_000, is_good=False, voters_within_slo=2)
    html = _page([v0, v0_all, lagging, _overview("healthy")], [], [])
    header = re.findall(r"<th>([^<]*)</th>", html)
    cells = dict(zip(header, _row(html, "v0"), strict=False))
    assert cells["max_follower_lag_time_ms"] == ("na", "n/a")
    assert cells["quorum_lag"] == ("na", "n/a")
    assert cells["voters_within_slo"] == ("", "1 (2 n/a)")
    assert cells["voters_not_fetching"] == ("na", "n/a")
    assert cells["max_follower_lag"] == ("", "12")  # the offset lag is known
    assert cells["status"] == ("ok", "ok")
    assert dict(zip(header, _row(html, "v0-all"), strict=False))["voters_within_slo"] == ("na", "n/a")
    failing = dict(zip(header, _row(html, "lagging"), strict=False))
    assert failing["max_follower_lag_time_ms"] == ("", "90000") and failing["quorum_lag"] == ("", "over SLO")
    healthy = dict(zip(header, _row(html, "healthy"), strict=False))
    assert healthy["quorum_lag"] == ("", "within SLO") and healthy["voters_not_fetching"] == ("", "0")
    assert "td.na,span.na{color:#888" in html  # grey


def test_a_cluster_without_a_known_lag_has_an_n_a_sli_and_lag_chart_not_zero():
    sli = [
        {"cluster_id": "v0", "window_start": T0, "sli": None, "unknown_snapshots": 10},
        {"cluster_id": "v0", "window_start": T1, "sli": None, "unknown_snapshots": 10},
        {"cluster_id": "v2", "window_start": T0, "sli": 1.0, "unknown_snapshots": 0},
        {"cluster_id": "v2", "window_start": T1, "sli": 0.5, "unknown_snapshots": 0},
    ]
    lag = [
        {"cluster_id": "v0", "replica_id": 3001, "window_start": T0, "max_caught_up_lag_ms": None},
        {"cluster_id": "v2", "replica_id": 3001, "window_start": T0, "max_caught_up_lag_ms": 12},
    ]
    html = _page([_overview("v0"), _overview("v2")], sli, lag)
    note = re.search(r'<p class="note">SLI <span class="na">n/a</span> \(lag time unknown[^<]*for: ([^<]*)</p>', html)
    assert note.group(1) == "v0"
    sli_chart = html[html.index("Quorum SLI per 5-minute window") :]
    sli_chart = sli_chart[: sli_chart.index("</svg>")]
    assert ">v2<" in sli_chart and ">v0<" not in sli_chart  # no 0 % line for the unknown cluster
    v0_lag = html[html.index("v0: voter caught-up lag") :]
    assert "n/a: the caught-up lag is unknown" in v0_lag[: v0_lag.index("</svg>")]
    v2_lag = html[html.index("v2: voter caught-up lag") :]
    assert "n/a" not in v2_lag[: v2_lag.index("</svg>")]
