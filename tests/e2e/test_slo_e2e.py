"""SLO budgets and burn rates end to end, over 35 simulated days with planned outages: every row of gold.slo_burn
and gold.slo_budget is checked against values computed here from the plan (which snapshots, partitions and scrapes
each outage spoils, and which it removes), never from the pipeline's own tables. A day of one cluster's files
arrives late (first run without it, then with it: exactly the plan again), a run with nothing new changes no table,
and the cohorts and the burn episodes follow the plan too.

The fleet is small so the run takes a couple of minutes on two cores: two clusters (DescribeQuorum v2 and v1), three
brokers and three controllers each, three topics of one partition, a snapshot every 10 minutes, scrapes (Jolokia
lines, one file a day) every 6 hours and around each outage, no CLI captures.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from quorumlake.contract.tables import GOLD_SLO_BUDGET, GOLD_SLO_BURN, GOLD_TABLES
from quorumlake.pipelines.app import cli
from quorumlake.simulator import FleetSpec, PlannedOutage, generate
from quorumlake.simulator.topology import build_topology
from tests import read_back

START = 1_767_225_600_000  # 2026-01-01 00:00 UTC
INTERVAL_MS = 600_000
DAYS = 35
STEPS_PER_DAY = 86_400_000 // INTERVAL_MS
SCRAPE_EVERY = 36
WARN_RECORDS = 200  # healthy nodes are a few records behind at most; a frozen one ~600 after 5 minutes
OBJECTIVES = {"quorum_lag": 0.999, "write_availability": 0.999, "metadata_freshness": 0.99}
LATE_CLUSTER, LATE_DAY = 0, 19  # cluster 0's files of 2026-01-20 arrive late


def step(day: int, hour: int = 0, minute: int = 0) -> int:
    return day * STEPS_PER_DAY + hour * 6 + minute // 10


def outage(cluster: int, kind: str, first: int, end: int, nodes: tuple[int, ...] = ()) -> PlannedOutage:
    """Snapshots `first` to `end - 1` inside: the edges half an interval before snapshots, clear of Kafka's delays."""
    return PlannedOutage(
        cluster,
        kind,
        START + first * INTERVAL_MS - INTERVAL_MS // 2,
        START + end * INTERVAL_MS - INTERVAL_MS // 2,
        nodes,
    )


PLAN = (
    outage(0, "brokers-down", step(1, 10), step(1, 12), (1, 2)),  # leaves the 28 days on day 30
    outage(0, "voter-cut-off", step(5, 23, 30), step(6, 0, 30)),  # across midnight
    outage(0, "applier-frozen", step(10, 8), step(10, 8, 40), (2,)),
    outage(0, "voter-cut-off", step(LATE_DAY, 3), step(LATE_DAY, 9)),  # in the late day's files
    outage(0, "brokers-down", step(33, 14), step(33, 14, 20), (1,)),  # one broker: at min ISR, still writable
    outage(1, "applier-frozen", step(3, 12), step(3, 13), (0,)),
    outage(1, "brokers-down", step(15, 6), step(15, 6, 30), (1, 2)),
    outage(1, "voter-cut-off", step(30, 18), step(30, 18, 50)),
)
SPEC = FleetSpec(
    clusters=2,
    brokers=3,
    controllers=3,
    topics=3,
    partitions=1,
    hours=DAYS * 24,
    interval_s=INTERVAL_MS // 1000,
    scenarios=("healthy",),
    start_ms=START,
    partitions_every=1,
    scrape_every=SCRAPE_EVERY,
    cli_every=0,
    exporter="jolokia",
    plan=PLAN,
)


# --- the values the plan implies -------------------------------------------------------------------------------------


class Pair:
    """Good and total events, added to with `+= (good, total)`."""

    def __init__(self) -> None:
        self.good = self.total = 0

    def __iadd__(self, other: tuple[int, int]) -> Pair:
        self.good += other[0]
        self.total += other[1]
        return self


def planned_counts(missing: tuple[int, int] | None = None) -> dict[tuple[str, str, datetime], tuple[int, int]]:
    """(cluster_id, slo, window_start) -> (good, total), from the plan and the fleet's shape and schedule alone.

    Every event of a snapshot falls in the 5-minute window of the snapshot's time (its offsets are below 1.4 s);
    `missing` (cluster index, day) leaves out a day of one cluster."""
    counts: dict[tuple[str, str, datetime], Pair] = defaultdict(Pair)
    steps = SPEC.steps
    for index in range(SPEC.clusters):
        topo = build_topology(SPEC.seed, index, "healthy", SPEC.brokers, SPEC.controllers, SPEC.topics, SPEC.partitions)
        mine = [o for o in PLAN if o.cluster == index]
        edges = {steps // 3, 2 * steps // 3}  # the scenarios' fault edges, captured even for a healthy cluster
        edges |= {(o.start_ms - START + INTERVAL_MS // 2) // INTERVAL_MS for o in mine}
        edges |= {(o.end_ms - START + INTERVAL_MS // 2) // INTERVAL_MS for o in mine}
        for k in range(steps):
            if missing == (index, k // STEPS_PER_DAY):
                continue
            t = START + k * INTERVAL_MS
            window = datetime.fromtimestamp(t / 1000, tz=timezone.utc).replace(tzinfo=None)
            active = [o for o in mine if o.start_ms <= t < o.end_ms]
            cut_off = sum(1 for o in active if o.kind == "voter-cut-off")
            down = {n for o in active if o.kind == "brokers-down" for n in o.nodes}
            frozen = {n for o in active if o.kind == "applier-frozen" for n in o.nodes}

            counts[(topo.cluster_id, "quorum_lag", window)] += (0 if cut_off else 1, 1)
            good = 0
            for topic in topo.topics:
                for replicas in topic.assignments:
                    alive = [r for r in replicas if r not in down]
                    good += bool(alive) and len(alive) >= min(topic.min_isr, len(replicas))
            counts[(topo.cluster_id, "write_availability", window)] += (
                good,
                sum(len(topic.assignments) for topic in topo.topics),
            )
            if k % SCRAPE_EVERY == 0 or k in edges or k - 1 in edges:
                scraped = len(topo.nodes) - cut_off - len(down)
                counts[(topo.cluster_id, "metadata_freshness", window)] += (scraped - len(frozen - down), scraped)
    return {key: (pair.good, pair.total) for key, pair in counts.items()}


def planned_burn(counts) -> dict[tuple[str, str, datetime], tuple]:
    series: dict[tuple[str, str], dict[datetime, tuple[int, int]]] = defaultdict(dict)
    for (cluster, slo, window), value in counts.items():
        series[(cluster, slo)][window] = value
    out = {}
    for (cluster, slo), windows in series.items():
        objective = OBJECTIVES[slo]
        for w, (good, total) in windows.items():
            rates = []
            for minutes in (5, 30, 60, 360):
                inside = [windows[s] for s in _grid(w, minutes) if s in windows]
                g, n = sum(x for x, _ in inside), sum(x for _, x in inside)
                rates.append((1.0 - g / n) / (1.0 - objective))
            out[(cluster, slo, w)] = (
                good,
                total,
                *rates,
                rates[2] > 14.4 and rates[0] > 14.4,
                rates[3] > 6 and rates[1] > 6,
            )
    return out


def _grid(w: datetime, minutes: int) -> list[datetime]:
    return [w - timedelta(minutes=5 * i) for i in range(minutes // 5)]


def planned_budget(counts) -> dict[tuple[str, str, date], tuple]:
    daily: dict[tuple[str, str], dict[date, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for (cluster, slo, window), (good, total) in counts.items():
        daily[(cluster, slo)][window.date()][0] += good
        daily[(cluster, slo)][window.date()][1] += total
    out = {}
    for (cluster, slo), days in daily.items():
        objective = OBJECTIVES[slo]
        for d, (good, total) in days.items():
            inside = [days[d - timedelta(days=i)] for i in range(28) if d - timedelta(days=i) in days]
            g, n = sum(x for x, _ in inside), sum(x for _, x in inside)
            out[(cluster, slo, d)] = (good, total, g, n, len(inside), g / n, 1 - (1 - g / n) / (1 - objective))
    return out


# --- the runs --------------------------------------------------------------------------------------------------------

BURN = ["good", "total", "burn_rate_5m", "burn_rate_30m", "burn_rate_1h", "burn_rate_6h", "fast_burn", "slow_burn"]
BUDGET = ["good", "total", "good_28d", "total_28d", "days_28d", "attainment_28d", "budget_remaining_28d"]


def table(warehouse: Path, spec, columns: list[str]) -> dict[tuple, tuple]:
    return {
        tuple(r[k] for k in spec.key): tuple(r[c] for c in columns)
        for r in read_back.rows(read_back.table_path(warehouse, spec))
    }


def assert_matches(got: dict, want: dict) -> None:
    assert got.keys() == want.keys(), (sorted(got.keys() - want.keys())[:5], sorted(want.keys() - got.keys())[:5])
    wrong = [k for k in want if got[k] != pytest.approx(want[k], rel=1e-9)]
    assert not wrong, [(k, got[k], want[k]) for k in sorted(wrong)[:5]]


def run(landing: Path, warehouse: Path, capsys) -> None:
    code = cli.main(
        [
            "run",
            "--landing",
            str(landing),
            "--warehouse",
            str(warehouse),
            "--set",
            f"divergence_warn_records={WARN_RECORDS}",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("slo-fleet")
    generate(root / "all", SPEC)
    return root / "all", root


def test_35_days_of_planned_outages_make_exactly_the_planned_budgets_and_burns(spark, fleet, capsys):
    complete, root = fleet
    landing, warehouse = root / "landing", root / "warehouse"
    shutil.copytree(complete, landing)
    late_day = (datetime(2026, 1, 1) + timedelta(days=LATE_DAY)).strftime("%Y-%m-%d")
    cluster = build_topology(SPEC.seed, LATE_CLUSTER, "healthy", 3, 3, 3, 1).cluster_id
    held_back = root / "held-back"
    late = sorted(landing.glob(f"*/date={late_day}/{cluster}.jsonl"))
    assert len(late) == 3  # quorum, partitions, metrics
    for path in late:
        target = held_back / path.relative_to(landing)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)

    # 1. everything but that day
    run(landing, warehouse, capsys)
    partial = planned_counts(missing=(LATE_CLUSTER, LATE_DAY))
    assert_matches(table(warehouse, GOLD_SLO_BURN, BURN), planned_burn(partial))
    assert_matches(table(warehouse, GOLD_SLO_BUDGET, BUDGET), planned_budget(partial))

    # 2. the late day arrives: the same tables as if it had never been late
    for path in sorted(held_back.rglob("*.jsonl")):
        shutil.move(path, landing / path.relative_to(held_back))
    run(landing, warehouse, capsys)
    counts = planned_counts()
    burn, budget = planned_burn(counts), planned_budget(counts)
    assert_matches(table(warehouse, GOLD_SLO_BURN, BURN), burn)
    assert_matches(table(warehouse, GOLD_SLO_BUDGET, BUDGET), budget)

    # what the plan means, spelled out: the v2 cluster's long cut-off burns fast, then slow after it ends
    c0 = build_topology(SPEC.seed, 0, "healthy", 3, 3, 3, 1).cluster_id
    fast = sorted(w for (c, slo, w), row in burn.items() if c == c0 and slo == "quorum_lag" and row[-2])
    assert [w for w in fast if w.date() == date(2026, 1, 20)] == [
        datetime(2026, 1, 20, 3, 0) + timedelta(minutes=10 * i) for i in range(36)
    ]
    slow = sorted(w for (c, slo, w), row in burn.items() if c == c0 and slo == "quorum_lag" and row[-1])
    assert [w for w in slow if w.date() == date(2026, 1, 20)][-1] == datetime(2026, 1, 20, 9, 10)
    # 28-day sums at a day boundary: the day-2 outage is in the span of day 29 (2026-01-29), out of day 30's
    day29, day30 = (
        budget[(c0, "write_availability", date(2026, 1, 29))],
        budget[(c0, "write_availability", date(2026, 1, 30))],
    )
    assert day29[4] == day30[4] == 28 and day29[2] == day29[3] - 2 * 12 and day30[2] == day30[3]
    # fewer than 28 days: the first day's sums are its own
    first = budget[(c0, "quorum_lag", date(2026, 1, 1))]
    assert first[2:5] == (144, 144, 1)
    # the one-broker outage of day 34 spoiled nothing: at min ISR is writable
    assert budget[(c0, "write_availability", date(2026, 2, 3))][:2] == (3 * 144, 3 * 144)

    # 3. nothing new: no table changes
    versions = {spec.name: read_back.version(read_back.table_path(warehouse, spec)) for spec in GOLD_TABLES}
    run(landing, warehouse, capsys)
    assert {spec.name: read_back.version(read_back.table_path(warehouse, spec)) for spec in GOLD_TABLES} == versions

    # cohorts: the collector's records of each cluster, every day
    assert cli.main(["sql", "SELECT 1", "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()
    cohorts = {
        (r["cluster_id"], r["kafka_version"], r["metadata_version"], r["kraft_version"], r["quorum_mode"])
        for r in spark.sql("SELECT * FROM gold.cluster_cohorts").collect()
    }
    c1 = build_topology(SPEC.seed, 1, "healthy", 3, 3, 3, 1).cluster_id
    assert cohorts == {(c0, "4.1", "4.1-IV1", 1, "dynamic"), (c1, "3.7", "3.7-IV4", 0, "static")}
    assert spark.sql("SELECT count(*) FROM gold.cluster_cohorts").first()[0] == 2 * DAYS
    # attainment by cohort over the last 28 days: sums of the plan's events (days 8 to 35)
    by_cohort = {
        (r["slo"], r["cohort"]): (r["clusters"], r["days"], r["good"], r["total"], r["attainment"])
        for r in spark.sql("SELECT * FROM gold.v_slo_attainment_by_cohort WHERE dimension = 'kafka_version'").collect()
    }
    for slo in OBJECTIVES:
        for cluster_id, version in ((c0, "4.1"), (c1, "3.7")):
            days = [v for (c, s, d), v in budget.items() if c == cluster_id and s == slo and d >= date(2026, 1, 8)]
            good, total = sum(v[0] for v in days), sum(v[1] for v in days)
            assert by_cohort[(slo, version)] == (1, 28, good, total, pytest.approx(good / total))

    # burn episodes: runs of flagged windows
    episodes = spark.sql(
        "SELECT cluster_id, slo, kind, started_at, ended_at, windows FROM gold.v_slo_burn_episodes "
        f"WHERE cluster_id = '{c0}' AND slo = 'quorum_lag' ORDER BY kind, started_at"
    ).collect()
    fast_runs = [(e["started_at"], e["ended_at"], e["windows"]) for e in episodes if e["kind"] == "fast"]
    assert fast_runs[-1] == (datetime(2026, 1, 20, 3, 0), datetime(2026, 1, 20, 8, 55), 36)
