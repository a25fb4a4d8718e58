"""`quorumlake demo` right after it ran: the simulated hour ends now, so no cluster is stale and each reads what its
scenario says (ok / warn / critical), and the DescribeQuorum v0 cluster reads its lag time as unknown (n/a), neither
good nor bad, in the fleet view, the printed overview and the report."""

from __future__ import annotations

import re

from quorumlake.pipelines.app import cli
from quorumlake.simulator.demo import DEMO_STATUS


def test_the_demo_fleet_looks_live(spark, tmp_path, capsys):
    root = tmp_path / "demo"
    assert cli.main(["demo", "--root", str(root)]) == 0
    printed = capsys.readouterr().out
    assert cli.main(["sql", "SELECT 1", "--warehouse", str(root / "warehouse")]) == 0
    capsys.readouterr()

    rows = {r["cluster_id"]: r for r in spark.sql("SELECT * FROM gold.v_fleet_overview").collect()}
    assert len(rows) == len(DEMO_STATUS)
    status = {cluster.split("-", 2)[2]: r["status"] for cluster, r in rows.items()}
    assert status == DEMO_STATUS
    assert not any(r["is_stale"] for r in rows.values())

    # the v0 cluster (healthy): the lag time is unknown, so the snapshot is neither good nor bad, and the cluster ok
    (v0,) = [c for c, r in rows.items() if r["max_follower_lag_time_ms"] == -1]
    assert v0.endswith("-healthy")
    assert rows[v0]["is_good"] is None and rows[v0]["voters_lag_unknown"] >= 1
    assert rows[v0]["voters_not_fetching"] is None
    sli = spark.sql(
        f"SELECT count(*) AS windows, count(sli) AS judged, min(unknown_snapshots) AS unknown, min(snapshots) AS n "
        f"FROM gold.quorum_health WHERE cluster_id = '{v0}'"
    ).first()
    assert sli["windows"] >= 12 and sli["judged"] == 0 and sli["unknown"] == sli["n"]
    # the lagging voter is a known lag over the SLO: warn, not critical (a majority is within it)
    lagging = next(r for c, r in rows.items() if c.endswith("-lagging-voter"))
    assert lagging["is_good"] is False and lagging["voters_within_slo"] == lagging["voters"] - 1

    line = next(line for line in printed.splitlines() if v0 in line)
    assert "n/a" in line and "-1" not in line.split("|")[5]
    html = (root / "report.html").read_text()
    row = re.search(rf'<tr><td class="l">{v0}</td>.*?</tr>', html).group(0)
    assert '<td class="ok">ok</td>' in row and '<td class="na">n/a</td>' in row
