"""The demo fleet looks live: `quorumlake demo` simulates the hour that ends now, its faults still going on at the end
(same seed and end: same files), and `generate --end` simulates any hour. Plain Python, no Spark; the pipeline over
the demo fleet is tests/e2e/test_demo_live.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from quorumlake.pipelines.app import cli
from quorumlake.pipelines.app.commands import demo_fleet
from quorumlake.simulator import FleetSpec, generate
from quorumlake.simulator.cluster import ClusterSim
from quorumlake.simulator.demo import DEMO_FLEET, DEMO_STATUS
from quorumlake.simulator.timeline import build_timeline
from quorumlake.simulator.topology import build_topology
from tests.helpers import quorumlake

END = 1_798_000_000_000  # 2026-12-23T04:26:40Z


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_spec_ending_at_a_time_has_its_last_snapshot_one_interval_before_it():
    spec = FleetSpec(hours=0.5, interval_s=60).ending_at(END)
    assert spec.start_ms == END - 30 * 60_000
    assert spec.start_ms + (spec.steps - 1) * 60_000 == END - 60_000


def test_same_seed_and_end_same_files_another_end_other_times(tmp_path):
    spec = FleetSpec(clusters=2, hours=0.1, scenarios=("broker-failure", "lagging-voter"), fault_at_end=True)
    generate(tmp_path / "a", spec.ending_at(END))
    generate(tmp_path / "b", spec.ending_at(END))
    generate(tmp_path / "c", spec.ending_at(END + 3_600_000))
    a, b, c = (_files(tmp_path / x) for x in "abc")
    assert a == b and a
    assert set(a) != set(c)  # file names carry capture times
    assert len(a) == len(c)


def test_the_demo_ends_now_to_the_minute_and_takes_a_seed():
    now = datetime(2026, 11, 29, 1, 2, 33, 250_000, tzinfo=timezone.utc)
    same_minute = datetime(2026, 11, 29, 1, 2, 59, tzinfo=timezone.utc)
    fleet = demo_fleet(42, None, now)
    assert fleet == demo_fleet(42, None, same_minute)
    end = datetime(2026, 11, 29, 1, 2, tzinfo=timezone.utc).timestamp() * 1000
    assert fleet.start_ms == end - 3_600_000 and fleet.fault_at_end
    assert demo_fleet(7, None, now).seed == 7 and demo_fleet(42, END, now).start_ms == END - 3_600_000


def test_the_demo_faults_are_still_going_on_at_its_end():
    spec = DEMO_FLEET
    for index, scenario in enumerate(spec.scenarios):
        topo = build_topology(spec.seed, index, scenario, 3, 3, 3, 3)
        tl = build_timeline(topo, spec.seed, spec.start_ms, spec.interval_s, spec.steps, (), True)
        sim = ClusterSim(topo, tl, spec.seed)
        last = tl.step_ms(spec.steps - 1)
        assert tl.fault_start_step == spec.steps - spec.steps // 3 and tl.fault_end_ms > last + 2_000
        view = sim.describe_quorum(last)
        states = sim.partitions(last)
        if scenario == "broker-failure":
            assert any(len(p.isr) < p.effective_min_isr for p in states)
        elif scenario == "lagging-voter":
            leader = next(v for v in view.voters if v.replica_id == view.leader_id)
            lags = [leader.last_caught_up_ms - v.last_caught_up_ms for v in view.voters]
            assert max(lags) > 600_000 and sorted(lags)[1] <= 2_000  # one voter out of the SLO, a majority within
        elif scenario == "metadata-divergence":
            assert tl.frozen_applier is not None and tl.frozen_applier.covers(last)
        else:
            assert scenario == "healthy" and not tl.outages and tl.lagging is None
            assert topo.api_version == 0  # DescribeQuorum v0: no timestamps, the lag time is unknown
        assert DEMO_STATUS[scenario] in ("ok", "warn", "critical")


def test_generate_end_takes_epoch_ms_or_iso_and_refuses_anything_else(tmp_path):
    args = ["generate", "--clusters", "1", "--hours", "0.05", "--interval-s", "60"]
    assert cli.main([*args, "--out", str(tmp_path / "ms"), "--end", str(END)]) == 0
    assert cli.main([*args, "--out", str(tmp_path / "iso"), "--end", "2026-12-23T04:26:40Z"]) == 0
    assert _files(tmp_path / "ms") == _files(tmp_path / "iso")
    result = quorumlake(*args, "--out", str(tmp_path / "bad"), "--end", "yesterday")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "not epoch milliseconds or an ISO-8601 time: 'yesterday'" in result.stderr
