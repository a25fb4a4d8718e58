"""The user-facing commands end to end, on one simulated fleet: fleet -> pipeline -> scenario signatures in gold, the
HTML report in a real headless browser, dashboard and alert queries, maintenance, and `quorumlake serve` with a real
JDBC client (beeline): a BI tool's query of the fleet view answers; the server is loopback by default, read-only (no
DDL/DML, no reading arbitrary files, no settings changes, no Java reflection), and a non-loopback address only with
authentication, which then refuses a client it cannot authenticate. (The served warehouse is the fleet's: one
pipeline run fewer than a warehouse of its own.)"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timezone
from html import escape
from pathlib import Path

import pytest

from quorumlake.contract.tables import ALL_TABLES
from quorumlake.pipelines.app import cli
from quorumlake.pipelines.app.commands import _fleet_spec, open_lakehouse
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.serving.server import serve
from quorumlake.pipelines.serving.sql_guard import thrift_auth_settings
from quorumlake.simulator.timeline import build_timeline
from quorumlake.simulator.topology import build_topology
from tests.helpers import accepts_connections, age_table_files, free_port, quorumlake

SCENARIOS = (
    "healthy",
    "lagging-voter",
    "network-partition",
    "leader-election",
    "broker-failure",
    "flapping-isr",
    "metadata-divergence",
    "quorum-stall",
)


FLEET_ARGS = ["--clusters", str(len(SCENARIOS)), "--hours", "0.5", "--interval-s", "60", "--seed", "7"]
for _scenario in SCENARIOS:
    FLEET_ARGS += ["--scenario", _scenario]


@pytest.fixture(scope="module")
def fleet(spark, tmp_path_factory):
    """A small simulated fleet (one cluster per scenario, 30 minutes at 60 s) through every layer."""
    root = tmp_path_factory.mktemp("fleet")
    assert cli.main(["generate", "--out", str(root / "landing"), *FLEET_ARGS]) == 0
    assert cli.main(["run", "--landing", str(root / "landing"), "--warehouse", str(root / "warehouse")]) == 0
    return root


def _cluster(spark, scenario: str) -> str:
    return spark.sql(f"SELECT cluster_id FROM gold.quorum_status WHERE cluster_id LIKE '%-{scenario}' LIMIT 1").first()[
        0
    ]


def test_same_seed_same_files(tmp_path):
    for out in ("a", "b"):
        assert (
            cli.main(
                [
                    "generate",
                    "--out",
                    str(tmp_path / out),
                    "--clusters",
                    "2",
                    "--hours",
                    "0.2",
                    "--scenario",
                    "broker-failure",
                    "--scenario",
                    "flapping-isr",
                ]
            )
            == 0
        )
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files_a)


def test_scenario_signatures_in_gold(spark, fleet):
    healthy = _cluster(spark, "healthy")
    lagging = _cluster(spark, "lagging-voter")
    failing = _cluster(spark, "broker-failure")
    diverging = _cluster(spark, "metadata-divergence")

    # a healthy cluster meets its SLIs; the lagging voter breaks the replica SLO in the middle of the hour
    assert spark.sql(f"SELECT min(sli) FROM gold.quorum_health WHERE cluster_id = '{healthy}'").first()[0] == 1.0
    worst = spark.sql(
        f"SELECT replica_id, max(max_caught_up_lag_ms) AS lag, min(sli) AS sli FROM gold.replica_lag_sli "
        f"WHERE cluster_id = '{lagging}' AND is_voter GROUP BY replica_id ORDER BY lag DESC"
    ).collect()
    assert worst[0]["lag"] > 60_000 and worst[0]["sli"] == 0.0
    assert all(r["lag"] <= 2000 for r in worst[1:])

    # broker failure: AtMinIsr counts during the fault, then an escalated episode, then recovery
    isr = spark.sql(
        f"SELECT max(at_min_isr) AS at_min, max(under_min_isr) AS under_min, "
        f"max_by(at_min_isr + under_min_isr + offline, collected_at) AS last "
        f"FROM gold.isr_health WHERE cluster_id = '{failing}'"
    ).first()
    assert isr["at_min"] > 0 and isr["under_min"] > 0 and isr["last"] == 0
    episodes = spark.sql(f"SELECT * FROM gold.at_min_isr_episodes WHERE cluster_id = '{failing}'").collect()
    assert any(e["escalated"] for e in episodes)
    assert all(e["ended_at"] is not None for e in episodes)
    assert spark.sql(f"SELECT count(*) FROM gold.at_min_isr_episodes WHERE cluster_id = '{healthy}'").first()[0] == 0

    # metadata divergence: one broker falls far behind the active controller, the others do not
    div = spark.sql(
        f"SELECT node_id, max(divergence_records) AS d FROM gold.metadata_offset_divergence "
        f"WHERE cluster_id = '{diverging}' AND node_role <> 'controller' GROUP BY node_id "
        f"ORDER BY d DESC"
    ).collect()
    assert div[0]["d"] > 500 and all(r["d"] < 100 for r in div[1:])

    overview = {r["cluster_id"]: r for r in spark.sql("SELECT * FROM gold.v_fleet_overview").collect()}
    # the demo fleet's data is from 2024, far older than stale_after_minutes: nothing else is wrong with it
    assert overview[healthy]["status"] == "stale" and overview[healthy]["is_stale"]
    assert all(r["active_controllers"] == 1 for r in overview.values())


def test_more_scenario_signatures_in_gold(spark, fleet):
    partitioned = _cluster(spark, "network-partition")
    election = _cluster(spark, "leader-election")
    flapping = _cluster(spark, "flapping-isr")
    stalled = _cluster(spark, "quorum-stall")
    healthy = _cluster(spark, "healthy")

    # network partition: one voter stops fetching, so its caught-up lag and fetch age grow past the SLO
    cut = spark.sql(
        f"SELECT replica_id, max(max_fetch_age_ms) AS age FROM gold.replica_lag_sli "
        f"WHERE cluster_id = '{partitioned}' AND is_voter GROUP BY replica_id ORDER BY age DESC"
    ).collect()
    assert cut[0]["age"] > 60_000 and all(r["age"] <= 2000 for r in cut[1:])

    # leader election: epoch increases are counted, and right after one a voter with an unknown LEO makes the
    # CLI's MaxFollowerLagTimeMs -1 (unknown), which is neither good nor bad
    changes = spark.sql(f"SELECT sum(leader_changes) FROM gold.quorum_health WHERE cluster_id = '{election}'").first()[
        0
    ]
    assert changes >= 1
    assert (
        spark.sql(
            f"SELECT count(*) FROM gold.quorum_status WHERE cluster_id = '{election}' "
            "AND max_follower_lag_time_ms = -1 AND is_good IS NULL"
        ).first()[0]
        >= 1
    )
    # the controllers scraped mid-election: the winner a candidate (a Kafka 3.x cluster) in exactly one window
    electing = spark.sql(
        f"SELECT window_start, node_id FROM gold.controller_health WHERE cluster_id = '{election}' "
        "AND candidate_scrapes > 0"
    ).collect()
    assert len(electing) == 1
    assert (
        spark.sql(f"SELECT sum(leader_changes) FROM gold.quorum_health WHERE cluster_id = '{healthy}'").first()[0] == 0
    )

    # flapping ISR: the same partition enters AtMinIsr again and again; later episodes count earlier bounces
    flaps = spark.sql(
        f"SELECT topic, `partition`, count(*) AS episodes, max(bounces) AS bounces "
        f"FROM gold.at_min_isr_episodes WHERE cluster_id = '{flapping}' "
        "GROUP BY topic, `partition` ORDER BY episodes DESC"
    ).collect()
    assert flaps[0]["episodes"] >= 3 and flaps[0]["bounces"] >= 2

    # quorum stall: no high-watermark progress for minutes, flagged in the windows; the healthy cluster never stalls
    assert (
        spark.sql(
            f"SELECT count_if(high_watermark_stalled) FROM gold.quorum_health WHERE cluster_id = '{stalled}'"
        ).first()[0]
        >= 1
    )
    assert (
        spark.sql(
            f"SELECT count_if(high_watermark_stalled) FROM gold.quorum_health WHERE cluster_id = '{healthy}'"
        ).first()[0]
        == 0
    )


def _timelines() -> dict[str, tuple[str, object]]:
    """The simulator's own account of the fleet's faults: cluster id -> (scenario, timeline)."""
    spec = _fleet_spec(cli.build_parser().parse_args(["generate", "--out", "unused", *FLEET_ARGS]))
    out = {}
    for index in range(spec.clusters):
        scenario = spec.scenarios[index % len(spec.scenarios)]
        topo = build_topology(spec.seed, index, scenario, spec.brokers, spec.controllers, spec.topics, spec.partitions)
        out[topo.cluster_id] = (scenario, build_timeline(topo, spec.seed, spec.start_ms, spec.interval_s, spec.steps))
    return out


def test_each_fault_scenario_is_one_incident_in_gold_the_overview_and_the_report(spark, fleet, tmp_path):
    """Every fault the simulator injects comes out as one incident over its middle third, triggered by the node it
    broke, with the scenario's nodes, severity and peak partition counts (each leader election of the leader-election
    scenario, 5 minutes apart, its own: the cluster answers DescribeQuorum v0, without fetch times, so the restarting
    leader is not seen as down in between); the healthy cluster has none. The fleet overview names each cluster's
    latest incident, and the report draws and lists every one."""
    incidents: dict[str, list[dict]] = {}
    for r in spark.sql("SELECT * FROM gold.incidents ORDER BY started_at").collect():
        incidents.setdefault(r["cluster_id"], []).append(r.asDict())
    kinds = {
        (r["cluster_id"], r["incident_id"]): set(r["kinds"])
        for r in spark.sql(
            "SELECT cluster_id, incident_id, collect_set(kind) AS kinds FROM gold.incident_events "
            "GROUP BY cluster_id, incident_id"
        ).collect()
    }
    isr_peaks = {
        r["cluster_id"]: (r["at_min"], r["under_min"], r["offline"])
        for r in spark.sql(
            "SELECT cluster_id, max(at_min_isr) AS at_min, max(under_min_isr) AS under_min, max(offline) AS offline "
            "FROM gold.isr_health GROUP BY cluster_id"
        ).collect()
    }
    timelines = _timelines()
    assert set(timelines) == {r["cluster_id"] for r in spark.sql("SELECT cluster_id FROM gold.quorum_status").collect()}
    for cid, (scenario, tl) in timelines.items():
        mine = incidents.get(cid, [])
        got = [(i["trigger"], i["trigger_node_id"], i["severity"]) for i in mine]
        if scenario == "healthy":
            assert mine == []
            continue
        if scenario == "leader-election":  # each election, at the first snapshot after it, names the new leader
            assert got == [("leader_election", e.leader, "warn") for e in tl.elections], mine
            for incident, election in zip(mine, tl.elections, strict=True):
                assert 0 < _ms(incident["started_at"]) - election.elected_ms <= tl.interval_ms, incident
                assert incident["ended_at"] == incident["started_at"], incident
            continue
        expected = {
            "lagging-voter": ("voter_lagging", tl.lagging and tl.lagging.node, "warn"),
            "network-partition": ("controller_down", tl.unreachable and tl.unreachable[0].node, "warn"),
            "broker-failure": ("broker_down", tl.outages and tl.outages[0].node, "critical"),
            "flapping-isr": ("partitions_at_min_isr", None, "warn"),
            "metadata-divergence": ("metadata_divergence", tl.frozen_applier and tl.frozen_applier.node, "warn"),
            # the stall shows in the nodes' last-applied lag as soon as in the high watermark: either comes first
            "quorum-stall": (
                mine[0]["trigger"] if mine else None,
                mine[0]["trigger_node_id"] if mine else None,
                "warn",
            ),
        }[scenario]
        assert got == [expected], (scenario, mine)
        (incident,) = mine
        assert tl.fault_start_ms < _ms(incident["started_at"]) <= tl.fault_start_ms + tl.interval_ms, incident
        # cleared at the first snapshot after the fault (a flapping ISR: at its last flap)
        assert tl.fault_end_ms - 2 * tl.interval_ms <= _ms(incident["ended_at"]) <= tl.fault_end_ms + tl.interval_ms
        peaks = (
            incident["max_partitions_at_min_isr"],
            incident["max_partitions_under_min_isr"],
            incident["max_partitions_offline"],
        )
        assert peaks == isr_peaks[cid], (scenario, peaks, isr_peaks[cid])  # the cluster's only ISR trouble
        if scenario == "broker-failure":
            assert set(incident["nodes"]) == {o.node for o in tl.outages}
            assert peaks[0] > 0 and peaks[1] > 0 and peaks[2] > 0  # at min ISR, escalated, and RF-2 offline
            assert "broker_fenced" in kinds[(cid, incident["incident_id"])]
        if scenario == "flapping-isr":
            assert peaks == (1, 0, 0) and incident["summary"].startswith("partition orders-0 at min ISR")
        if scenario == "quorum-stall":
            assert {"hw_stalled", "metadata_divergence"} <= kinds[(cid, incident["incident_id"])]
            assert "high watermark stalled up to 9 min" in incident["summary"], incident

    overview = {r["cluster_id"]: r for r in spark.sql("SELECT * FROM gold.v_fleet_overview").collect()}
    for cid in timelines:
        mine = incidents.get(cid, [])
        latest = mine[-1] if mine else None
        assert (
            overview[cid]["open_incidents"],
            overview[cid]["latest_incident_at"],
            overview[cid]["latest_incident"],
        ) == (
            0,
            latest and latest["started_at"],
            latest and f"{latest['severity']}: {latest['summary']}",
        ), cid

    report = tmp_path / "report.html"
    assert cli.main(["report", "--out", str(report), "--warehouse", str(fleet / "warehouse")]) == 0
    html = report.read_text()
    assert "Incidents: what happened, to whom, per cluster" in html
    for cid, mine in incidents.items():
        assert f"{cid}: incidents (a lane per node)" in html
        for incident in mine:
            assert escape(incident["summary"]) in html, incident
    (healthy,) = (cid for cid, (scenario, _) in timelines.items() if scenario == "healthy")
    assert f"{healthy}: incidents" not in html


def _ms(at) -> int:
    return round(at.replace(tzinfo=timezone.utc).timestamp() * 1000)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_report_renders_in_a_headless_browser(spark, fleet, tmp_path):
    report = fleet / "report.html"
    assert cli.main(["report", "--out", str(report), "--warehouse", str(fleet / "warehouse")]) == 0
    html = report.read_text()
    assert "<script" not in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")
    for title in (
        "voter caught-up lag",
        "Quorum SLI",
        "partitions at/under min ISR",
        "AtMinIsr episodes",
        "metadata offset divergence",
        "Error budgets (28 days)",
        "Error budget left over 28 days: write availability",
        "Burn episodes",
    ):
        assert title in html
    assert html.count("<svg") >= 8 and html.count(">legend<") >= 8 and "time (UTC)" in html
    # the v0 cluster (leader-election) has no fetch timestamps: voters not fetching is unknown, a grey n/a in the
    # overview, never a failing value; a v2 cluster's is a number
    v0 = re.search(rf'<tr><td class="l">{_cluster(spark, "leader-election")}</td>.*?</tr>', html).group(0)
    assert '<td class="na">n/a</td>' in v0
    v2 = re.search(rf'<tr><td class="l">{_cluster(spark, "healthy")}</td>.*?</tr>', html).group(0)
    assert '<td class="na">' not in v2
    browser = _chromium()
    if browser is None:
        pytest.skip("Debian's chromium is not installed (scripts/bootstrap.sh installs it when run as root)")
    shot = tmp_path / "report.png"
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1600,3200",
            f"--screenshot={shot}",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file() and shot.stat().st_size > 50_000, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []


def test_dashboard_queries_run_on_the_demo_warehouse(spark, fleet):
    import json

    dashboard = json.loads(
        (Path(__file__).parents[2] / "resources" / "dashboards" / "quorumlake.lvdash.json").read_text()
    )
    assert cli.main(["sql", "SELECT 1", "--warehouse", str(fleet / "warehouse")]) == 0  # registers tables and views
    # the deployed dashboard names gold objects without a schema (dataset_schema sets the target's gold)
    current = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase("gold")
    try:
        results = {}
        for dataset in dashboard["datasets"]:
            query = "".join(dataset.get("queryLines") or [dataset.get("query", "")])
            results[dataset["name"]] = (query, spark.sql(query).collect())
    finally:
        spark.catalog.setCurrentDatabase(current)
    for name, (query, rows) in results.items():
        # every fault of the demo fleet has recovered by its end, so no partition is at min ISR *now*
        if "v_partitions_at_min_isr" not in query:
            assert rows, f"dashboard dataset {name} returned no rows on the demo fleet"


def test_maintenance_optimizes_every_table_and_vacuums_those_with_files_past_the_retention(spark, fleet, capsys):
    warehouse = fleet / "warehouse"
    # gold.quorum_health as if written 200 hours ago, with a file no version refers to (what a crashed write leaves):
    # VACUUM runs there and deletes that file. Every other table is younger than the retention (168 hours), so VACUUM
    # could delete nothing in it and is not run: a stray file written just now stays.
    aged = warehouse / "gold" / "quorum_health"
    stray_old = aged / "part-00000-left-by-a-crashed-write.snappy.parquet"
    stray_new = warehouse / "gold" / "isr_health" / stray_old.name
    for stray in (stray_old, stray_new):
        stray.write_bytes(b"PAR1 not a table's file PAR1")
    age_table_files(aged, 200)
    try:
        assert cli.main(["maintenance", "--warehouse", str(warehouse)]) == 0
        out = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
        # the demo run left nothing unread, so no table keeps files for a change feed
        young = "optimized; nothing to vacuum (no file older than 168 hours)"
        assert out == {
            spec.name: "optimized, vacuumed" if spec.name == "gold.quorum_health" else young for spec in ALL_TABLES
        }
        assert not stray_old.exists() and stray_new.exists()
    finally:
        stray_new.unlink(missing_ok=True)

    def operations(table: Path) -> set[str]:
        return {r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()}

    assert "VACUUM END" in operations(aged)
    assert "VACUUM START" not in operations(warehouse / "gold" / "isr_health")


def _fresh_views(fleet, tmp_path, **settings) -> None:
    """(Re)create the tables' registrations and the gold views over the demo warehouse with these settings."""
    config = tmp_path / "settings.toml"
    config.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    assert cli.main(["sql", "SELECT 1", "--warehouse", str(fleet / "warehouse"), "--config", str(config)]) == 0


def test_controller_health_from_the_demo_fleet(spark, fleet, tmp_path):
    _fresh_views(fleet, tmp_path)
    health = spark.sql("SELECT * FROM gold.controller_health")
    clusters = {r["cluster_id"] for r in spark.sql("SELECT DISTINCT cluster_id FROM gold.quorum_status").collect()}
    assert {r["cluster_id"] for r in health.select("cluster_id").distinct().collect()} == clusters
    per_cluster = {
        r["cluster_id"]: r
        for r in spark.sql(
            "SELECT cluster_id, max(max_election_latency_ms) AS election_ms, max(fenced_brokers) AS fenced, "
            "max(timed_out_broker_heartbeats) AS timed_out, max(avg_commit_latency_ms) AS commit_ms, "
            "count_if(raft_state = 'leader') AS leader_windows, count_if(isnan(max_commit_latency_ms)) AS nan_rows "
            "FROM gold.controller_health GROUP BY cluster_id"
        ).collect()
    }
    assert per_cluster[_cluster(spark, "leader-election")]["election_ms"] > 0
    assert per_cluster[_cluster(spark, "broker-failure")]["fenced"] >= 1
    assert per_cluster[_cluster(spark, "broker-failure")]["timed_out"] >= 1
    healthy = per_cluster[_cluster(spark, "healthy")]
    assert healthy["fenced"] == 0 and healthy["election_ms"] is None and 0 < healthy["commit_ms"] < 100
    assert all(r["nan_rows"] == 0 for r in per_cluster.values()), "idle NaN readings must become NULL"


def test_slo_budgets_burns_and_cohorts_from_the_demo_fleet(spark, fleet, tmp_path):
    """Each fault spends the budget of the SLO it breaks, on its own cluster only; the healthy cluster spends none."""
    _fresh_views(fleet, tmp_path)
    budgets = {
        (r["cluster_id"], r["slo"]): r
        for r in spark.sql(
            "SELECT cluster_id, slo, sum(good) AS good, sum(total) AS total FROM gold.slo_budget GROUP BY 1, 2"
        ).collect()
    }
    spent = {key for key, r in budgets.items() if r["good"] < r["total"]}
    assert spent >= {
        (_cluster(spark, "lagging-voter"), "quorum_lag"),
        (_cluster(spark, "network-partition"), "quorum_lag"),
        (_cluster(spark, "broker-failure"), "write_availability"),
        (_cluster(spark, "metadata-divergence"), "metadata_freshness"),
    }
    healthy = _cluster(spark, "healthy")
    assert not {key for key in spent if key[0] == healthy}
    assert {slo for cluster, slo in budgets if cluster == healthy} == {
        "quorum_lag",
        "write_availability",
        "metadata_freshness",
    }
    # quorum_lag counts the snapshots whose MaxFollowerLagTimeMs is known (an error response is no event)
    known = spark.sql(
        "SELECT cluster_id, count_if(max_follower_lag_time_ms >= 0) AS n FROM gold.quorum_status GROUP BY cluster_id"
    ).collect()
    assert {r["cluster_id"]: r["n"] for r in known if r["n"]} == {
        cluster: r["total"] for (cluster, slo), r in budgets.items() if slo == "quorum_lag"
    }
    # the fault clusters burned fast; an episode is ongoing exactly when the SLO's latest window still burns
    episodes = spark.sql("SELECT * FROM gold.v_slo_burn_episodes").collect()
    assert {(e["cluster_id"], e["slo"]) for e in episodes if e["kind"] == "fast"} >= {
        (_cluster(spark, "lagging-voter"), "quorum_lag"),
        (_cluster(spark, "broker-failure"), "write_availability"),
    }
    latest = spark.sql(
        "SELECT cluster_id, slo, max_by(fast_burn, window_start) AS fast, max_by(slow_burn, window_start) AS slow "
        "FROM gold.slo_burn GROUP BY cluster_id, slo"
    ).collect()
    for kind in ("fast", "slow"):
        ongoing = {(e["cluster_id"], e["slo"]) for e in episodes if e["kind"] == kind and e["ended_at"] is None}
        assert ongoing == {(r["cluster_id"], r["slo"]) for r in latest if r[kind]}
    # the simulated collector recorded each cluster's release: every cluster is in a Kafka-version cohort
    cohorts = spark.sql(
        "SELECT cohort, clusters FROM gold.v_slo_attainment_by_cohort WHERE dimension = 'kafka_version' "
        "AND slo = 'quorum_lag'"
    ).collect()
    assert "unknown" not in {r["cohort"] for r in cohorts}
    assert sum(r["clusters"] for r in cohorts) == len(SCENARIOS)


def test_alert_queries_run_on_the_demo_warehouse(spark, fleet, tmp_path):
    from tests.unit.test_bundle import alert_queries

    _fresh_views(fleet, tmp_path)
    queries = alert_queries("spark_catalog")
    overview = spark.sql("SELECT * FROM gold.v_fleet_overview").collect()

    (critical,) = spark.sql(queries["quorumlake_cluster_critical"]).collect()
    assert critical["critical_clusters"] == sum(r["status"] == "critical" for r in overview)
    # an unknown lag is named as n/a, never the reason a cluster is critical
    lag_na = sorted(
        r["cluster_id"] for r in overview if r["status"] == "critical" and (r["max_follower_lag_time_ms"] or 0) < 0
    )
    assert critical["lag_na"] == (", ".join(lag_na) or "none")

    # the demo's faults ended in 2024: nothing escalated within the lookback, but every escalation is found with a
    # lookback reaching back to it
    (recent,) = spark.sql(queries["quorumlake_at_min_isr_escalated"]).collect()
    assert recent["escalated_episodes"] == 0
    long_ago = queries["quorumlake_at_min_isr_escalated"].replace(
        "make_dt_interval(0, 0, 30, 0)", "make_dt_interval(36500, 0, 0, 0)"
    )
    (ever,) = spark.sql(long_ago).collect()
    escalated = spark.sql("SELECT count_if(escalated) FROM gold.at_min_isr_episodes").first()[0]
    assert ever["escalated_episodes"] == escalated >= 1
    assert _cluster(spark, "broker-failure") in ever["partitions"]

    # every demo cluster's last snapshot is from 2024: all stale; with staleness off, none
    (stale,) = spark.sql(queries["quorumlake_stale_data"]).collect()
    assert stale["stale_clusters"] == len(SCENARIOS) and stale["oldest_data_at"] is not None
    _fresh_views(fleet, tmp_path, stale_after_minutes=0)
    (stale,) = spark.sql(queries["quorumlake_stale_data"]).collect()
    assert stale["stale_clusters"] == 0
    statuses = {r["cluster_id"]: r["status"] for r in spark.sql("SELECT * FROM gold.v_fleet_overview").collect()}
    assert statuses[_cluster(spark, "healthy")] == "ok" and "stale" not in statuses.values()

    # the burn alerts count the ongoing episodes, and name them
    for key, kind in (("quorumlake_slo_fast_burn", "fast"), ("quorumlake_slo_slow_burn", "slow")):
        (row,) = spark.sql(queries[key]).collect()
        ongoing = spark.sql(
            f"SELECT cluster_id, slo FROM gold.v_slo_burn_episodes WHERE kind = '{kind}' AND ended_at IS NULL"
        ).collect()
        assert row[f"{kind}_burns"] == len(ongoing)
        assert all(f"{r['cluster_id']} {r['slo']}" in row["burning"] for r in ongoing)


def test_slo_metric_views_re_aggregate_as_sums_on_the_demo_warehouse(spark, fleet, tmp_path):
    """The metric views' measures, expanded into plain Spark SQL over their source at two grains: per cluster and
    day they equal gold.v_slo_attainment_daily; rolled up over the fleet, sli is sum(good) / sum(judged snapshots)."""
    import yaml

    from quorumlake.gold.metric_views import METRIC_VIEWS

    _fresh_views(fleet, tmp_path)

    def query(view, dimensions):
        spec = yaml.safe_load(re.sub(r"\{(gold\.[a-z_]+)\}", r"\1", view.yaml))
        dims = {d["name"]: d["expr"] for d in spec["dimensions"]}
        select = [f"{dims[d]} AS {d}" for d in dimensions] + [f"{m['expr']} AS {m['name']}" for m in spec["measures"]]
        group = f" GROUP BY {', '.join(dims[d] for d in dimensions)}" if dimensions else ""
        return spark.sql(f"SELECT {', '.join(select)} FROM {spec['source']}{group}").collect()

    quorum = {view.name: view for view in METRIC_VIEWS}["gold.m_quorum_slo"]
    daily = {(r["cluster_id"], r["day"]): r for r in spark.sql("SELECT * FROM gold.v_slo_attainment_daily").collect()}
    by_day = query(quorum, ["cluster_id", "day"])
    assert len(by_day) == len(daily)
    for r in by_day:
        expected = daily[(r["cluster_id"], r["day"].date())]
        assert (r["snapshots"], r["good_snapshots"], r["unknown_snapshots"], r["sli"]) == (
            expected["snapshots"],
            expected["good_snapshots"],
            expected["unknown_snapshots"],
            expected["sli"],
        )
    (fleet_wide,) = query(quorum, [])
    unknown = sum(r["unknown_snapshots"] for r in daily.values())
    assert unknown > 0  # the v0 cluster's
    assert fleet_wide["sli"] == sum(r["good_snapshots"] for r in daily.values()) / (
        sum(r["snapshots"] for r in daily.values()) - unknown
    )
    for view in METRIC_VIEWS:
        assert query(view, ["cluster_id"]) and query(view, [])


# --- quorumlake serve: a BI tool's JDBC endpoint ---------------------------------------------------------------

FORBIDDEN = [  # (statement, what the guard says about it)
    ("DROP TABLE bronze.quorum_raw", "DropTable statements are not allowed"),
    ("DELETE FROM bronze.quorum_raw", "DeleteFromTable statements are not allowed"),
    ("INSERT INTO bronze.quorum_raw SELECT * FROM bronze.quorum_raw", "InsertIntoStatement statements are not allowed"),
    ("CREATE TABLE stolen USING text LOCATION '/etc'", "CreateTable statements are not allowed"),
    ("CREATE TEMPORARY VIEW stolen USING text OPTIONS (path '/etc/hostname')", "CreateTempViewUsing statements"),
    ("SET spark.sql.runSQLOnFiles=true", "changing settings (SET key=value) is not allowed"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "calling Java methods"),
    ("ALTER TABLE bronze.quorum_raw SET TBLPROPERTIES ('x' = 'y')", "SetTableProperties statements are not allowed"),
]


def _beeline() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "beeline"


def _own_address() -> str | None:
    """A non-loopback address of this machine, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def _beeline_run(url: str, sql: list[str], *extra: str) -> subprocess.CompletedProcess:
    """Run the statements in one beeline session; a script file with --force goes on after a failed statement."""
    beeline = _beeline()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("".join(f"{statement};\n" for statement in sql))
    try:
        return subprocess.run(
            [str(beeline), "-u", url, "--outputformat=csv2", "--force=true", *extra, "-f", script.name],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SPARK_HOME": str(beeline.parent.parent)},
        )
    finally:
        os.unlink(script.name)


class Server:
    def __init__(self, warehouse: Path, port: int, *args: str):
        self.port = port
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quorumlake.pipelines.app.cli",
                "serve",
                "--port",
                str(port),
                "--warehouse",
                str(warehouse),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait(self, host: str) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if accepts_connections(host, self.port):
                return
            assert self.process.poll() is None, self.process.stdout.read()
            time.sleep(1)
        raise AssertionError("the server did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _bronze_count(spark, warehouse: Path) -> int:
    return spark.read.format("delta").load(str(warehouse / "bronze" / "quorum_raw")).count()


def test_default_serve_is_loopback_only_and_read_only(spark, fleet):
    warehouse = fleet / "warehouse"
    before = _bronze_count(spark, warehouse)
    assert before > 0
    port = free_port()
    server = Server(warehouse, port)
    try:
        server.wait("127.0.0.1")
        own = _own_address()
        if own is not None:
            assert not accepts_connections(own, port), f"the default server answers on {own}"
        url = f"jdbc:hive2://127.0.0.1:{port}/"
        # Reading arbitrary files through SQL fails, even when the client asks for runSQLOnFiles at connect time.
        # Each beeline session is a JVM of its own, so the plain URL's session goes on with reads that work.
        table_path = warehouse / "bronze" / "quorum_raw"
        file_reads = [
            "SELECT * FROM text.`/etc/hostname`",
            "SELECT * FROM csv.`/etc/passwd`",
            f"SELECT count(*) FROM delta.`{table_path}`",
            "SHOW TABLES",
        ]
        reads = [
            "SELECT count(*) AS n FROM bronze.quorum_raw",
            "SHOW TABLES IN gold",
            "DESCRIBE TABLE gold.quorum_health",
            # last: the rows that follow its header are its own
            "SELECT cluster_id, status FROM gold.v_fleet_overview ORDER BY cluster_id",
        ]
        # the three sessions at once (each beeline is a JVM of its own, mostly starting up; a session closes at once
        # because the server does not retry the Hive metastore it does not have: quorumlake.pipelines.serving.sql_guard)
        with ThreadPoolExecutor(max_workers=3) as pool:
            sessions = [
                pool.submit(_beeline_run, url, file_reads + reads),
                pool.submit(_beeline_run, url + "?spark.sql.runSQLOnFiles=true", file_reads),
                pool.submit(_beeline_run, url, [sql for sql, _ in FORBIDDEN]),
            ]
            ok, asked, bad = (session.result() for session in sessions)
        for files in (ok, asked):
            output = files.stdout + files.stderr
            for identifier in ("`text`.`/etc/hostname`", "`csv`.`/etc/passwd`", f"`delta`.`{table_path}`"):
                assert f"{identifier} cannot be found" in output, (identifier, output[-3000:])
            assert "root:" not in files.stdout and "stolen" not in files.stdout
        # reads work, and a BI tool's query of the fleet view answers one row per cluster
        assert f"n\n{before}\n" in ok.stdout.replace("\r", ""), ok.stdout + ok.stderr
        assert "v_fleet_overview" in ok.stdout and "max_follower_lag_time_ms" in ok.stdout
        assert "read-only" not in ok.stderr
        fleet = ok.stdout.replace("\r", "")[ok.stdout.replace("\r", "").find("cluster_id,status") :]
        rows = [line.split(",") for line in fleet.splitlines() if "," in line]
        assert rows[0] == ["cluster_id", "status"], ok.stdout + ok.stderr
        assert cli.main(["sql", "SELECT 1", "--warehouse", str(warehouse)]) == 0  # names the view in this session too
        clusters = spark.sql("SELECT cluster_id FROM gold.v_fleet_overview").collect()
        assert [r[0] for r in rows[1:]] == sorted(r["cluster_id"] for r in clusters) and len(rows) > 2
        assert all(r[1] in ("ok", "warn", "critical", "stale") for r in rows[1:])
        # writes, file reads, settings changes and reflection are refused, each with the guard's message
        output = bad.stdout + bad.stderr
        for sql, message in FORBIDDEN:
            assert f"quorumlake serve is read-only: {message}" in output, (sql, output[-3000:])
    finally:
        server.stop()
    assert _bronze_count(spark, warehouse) == before
    assert (warehouse / "bronze" / "quorum_raw" / "_delta_log").is_dir()


def test_non_loopback_serve_needs_authentication_and_refuses_unauthenticated_clients(spark, fleet, tmp_path):
    warehouse = fleet / "warehouse"
    own = _own_address()
    if own is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    refused = quorumlake("serve", "--host", own, "--warehouse", str(warehouse))
    assert refused.returncode == 2 and "without authentication" in refused.stderr
    # LDAP against a directory that is not there: nobody can log in, so nobody gets data. Served from this process (a
    # `quorumlake serve` of its own is the test above): what `serve` runs with that --auth-config, on the suite's
    # context, read-only.
    closed = free_port()
    auth = tmp_path / "auth.toml"
    auth.write_text(
        f'[auth]\nmode = "LDAP"\nldap_url = "ldap://127.0.0.1:{closed}"\nldap_base_dn = "ou=people,dc=example,dc=com"\n'
    )
    port = free_port()
    said: list[str] = []
    ready, until = threading.Event(), threading.Event()
    lakehouse = open_lakehouse(Config(warehouse=str(warehouse)))
    server = threading.Thread(
        target=serve,
        args=(lakehouse, own, port, said.append),
        kwargs={"ready": ready.set, "until": until, "auth": thrift_auth_settings(auth)},
        daemon=True,
    )
    server.start()
    try:
        assert ready.wait(120), "the server did not start"
        assert f"jdbc:hive2://{own}:{port}/" in said[0] and "read-only, authentication LDAP" in said[0], said
        assert not accepts_connections("127.0.0.1", port)
        url = f"jdbc:hive2://{own}:{port}/"
        for credentials in ([], ["-n", "mallory", "-p", "guess"]):
            result = _beeline_run(url, ["SELECT count(*) AS n FROM bronze.quorum_raw"], *credentials)
            assert "n\n" not in result.stdout.replace("\r", ""), result.stdout
            assert "Error" in result.stderr or "error" in result.stderr.lower(), result.stdout + result.stderr
    finally:
        until.set()
        server.join(60)
    assert not server.is_alive() and not accepts_connections(own, port)
    # and the suite's JVM keeps none of its settings, nor its guard: a session opened after it still writes
    assert spark.sparkContext._jvm.java.lang.System.getProperty("hive.server2.authentication") is None
    spark.newSession().sql("CREATE TEMPORARY VIEW after_serve AS SELECT 1 AS one")
