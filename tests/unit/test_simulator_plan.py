"""Planned outages in the fleet simulator (`quorumlake.simulator.plan`): each kind shows in the landing formats
exactly between its times, several outages of one node, the capture edges, the fleet knobs the long end-to-end
runs use (no CLI captures, one exporter), and the errors a bad plan gets. Plain pytest, no Spark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from quorumlake.simulator import FleetSpec, PlannedOutage, generate, load_plan
from quorumlake.simulator.topology import CONTROLLER_ID_BASE
from tests.helpers import read_text

INTERVAL_S = 60
START = 1_730_000_000_000  # FleetSpec's default start


def boundary(step: int) -> int:
    """Half an interval before snapshot `step`: where a plan's edges fall clear of every snapshot."""
    return START + step * INTERVAL_S * 1000 - INTERVAL_S * 500


def lines(root: Path, folder: str) -> list[dict]:
    paths = sorted(p for p in (root / folder).rglob("*.jsonl*") if p.is_file())
    return [json.loads(line) for p in paths for line in read_text(p).splitlines()]


def step_of(ms: int) -> int:
    return (ms - START) // (INTERVAL_S * 1000)


PLAN = (
    PlannedOutage(0, "brokers-down", boundary(10), boundary(15)),
    PlannedOutage(0, "brokers-down", boundary(30), boundary(33), (1,)),  # broker 1 again, alone
    PlannedOutage(0, "voter-cut-off", boundary(20), boundary(25)),
    PlannedOutage(0, "applier-frozen", boundary(40), boundary(45)),
)
SPEC = FleetSpec(
    clusters=1,
    hours=1.0,
    interval_s=INTERVAL_S,
    topics=3,
    partitions=1,
    scrape_every=10,
    partitions_every=5,
    cli_every=0,
    exporter="jolokia",
    plan=PLAN,
)


@pytest.fixture(scope="module")
def zone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planned")
    generate(root, SPEC)
    return root


def test_brokers_down_shrink_the_isrs_exactly_within_the_plan(zone):
    by_step: dict[int, dict[str, list[int]]] = {}
    for p in lines(zone, "partitions"):
        by_step.setdefault(step_of(p["collected_at_ms"]), {})[p["topic"]] = p["isr"]
    down = {s for s in range(10, 15)} | {s for s in range(30, 33)}
    for step, isrs in by_step.items():
        gone = {1, 2} if 10 <= step < 15 else {1} if 30 <= step < 33 else set()
        for isr in isrs.values():
            assert not gone & set(isr), step
            assert gone or len(isr) >= 2, step
    # partition states every 5th snapshot, and at both edges of every outage (the snapshots after them too)
    assert {10, 11, 15, 16, 30, 31, 33, 34} <= set(by_step)
    assert set(by_step) & down


def test_a_cut_off_voter_freezes_and_a_down_broker_or_cut_off_voter_is_not_scraped(zone):
    follower = None
    for record in lines(zone, "quorum"):
        step = step_of(record["collected_at_ms"])
        part = record["response"]["topics"][0]["partitions"][0]
        voters = {v["replicaId"]: v for v in part["currentVoters"]}
        leader = voters[part["leaderId"]]
        lags = {r: leader["lastCaughtUpTimestamp"] - v["lastCaughtUpTimestamp"] for r, v in voters.items()}
        if 20 <= step < 25:
            frozen = [r for r, lag in lags.items() if lag > 2000]
            assert len(frozen) == 1 and frozen[0] != part["leaderId"], step
            follower = frozen[0]
        else:
            assert max(lags.values()) < 2000, step
    assert follower is not None and follower >= CONTROLLER_ID_BASE
    scraped: dict[int, set[int]] = {}
    for m in lines(zone, "metrics"):
        scraped.setdefault(step_of(m["scraped_at_ms"]), set()).add(m["node_id"])
    everyone = {0, 1, 2, CONTROLLER_ID_BASE, CONTROLLER_ID_BASE + 1, CONTROLLER_ID_BASE + 2}
    assert scraped[10] == everyone - {1, 2} and scraped[11] == everyone - {1, 2}
    assert scraped[20] == everyone - {follower} and scraped[25] == everyone
    assert scraped[30] == everyone - {1} and scraped[33] == everyone


def test_a_frozen_applier_stops_its_last_applied_offset(zone):
    applied: dict[int, float] = {}
    for m in lines(zone, "metrics"):
        if m["node_id"] == 2 and m["attribute"] == "last-applied-record-offset":
            applied[step_of(m["scraped_at_ms"])] = m["value"]
    assert applied[40] == applied[41]  # scraped at both edges: frozen from the start ...
    assert applied[45] > applied[41] and applied[30] < applied[40]  # ... and applying before and after


def test_no_cli_captures_and_one_exporter(zone):
    names = [p.name for p in zone.rglob("*") if p.is_file()]
    assert not [n for n in names if re.search(r"\.(replication|status|topics)\.txt", n)]
    assert not [n for n in names if n.endswith(".prom")]


def test_the_default_fleet_is_unchanged_by_an_empty_plan(tmp_path):
    base = FleetSpec(clusters=1, hours=0.1)
    generate(tmp_path / "a", base)
    generate(tmp_path / "b", FleetSpec(clusters=1, hours=0.1, plan=()))
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b and any(str(k).endswith(".status.txt") for k in a)


@pytest.mark.parametrize(
    ("outage", "message"),
    [
        (PlannedOutage(0, "meteor", 1, 2), "unknown planned outage kind 'meteor'"),
        (PlannedOutage(3, "brokers-down", 1, 2), "the fleet has clusters 0-0"),
        (PlannedOutage(0, "brokers-down", 2, 2), "must end after it starts"),
        (PlannedOutage(0, "brokers-down", 1, 2, (3000,)), "takes nodes among [0, 1, 2]"),
        (PlannedOutage(0, "voter-cut-off", 1, 2, (1,)), "takes nodes among [3000, 3001, 3002]"),
    ],
)
def test_bad_plans_are_refused(tmp_path, outage, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        generate(tmp_path, FleetSpec(clusters=1, hours=0.05, plan=(outage,)))


def test_the_leader_cannot_be_cut_off(tmp_path, zone):
    leader = lines(zone, "quorum")[0]["response"]["topics"][0]["partitions"][0]["leaderId"]
    plan = (PlannedOutage(0, "voter-cut-off", 1, 2, (leader,)),)
    with pytest.raises(ValueError, match="cannot cut off the leader"):
        generate(tmp_path, FleetSpec(clusters=1, hours=0.05, plan=plan))


def test_plans_from_json(tmp_path):
    good = tmp_path / "plan.json"
    good.write_text(json.dumps([{"cluster": 0, "kind": "brokers-down", "start_ms": 5, "end_ms": 9, "nodes": [1]}]))
    assert load_plan(good) == (PlannedOutage(0, "brokers-down", 5, 9, (1,)),)
    for text, message in [
        ("{", "is not JSON"),
        ("{}", "must be a JSON list"),
        ('[{"cluster": 0, "kind": "brokers-down", "start_ms": 5}]', "end_ms must be an integer"),
        ('[{"cluster": 0, "kind": "brokers-down", "start_ms": 5, "end_ms": 6, "when": 1}]', "unknown field(s) when"),
        ('[{"cluster": 0, "kind": "brokers-down", "start_ms": 5, "end_ms": 6, "nodes": ["a"]}]', "nodes must be"),
    ]:
        good.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            load_plan(good)
    with pytest.raises(ValueError, match="cannot read plan"):
        load_plan(tmp_path / "missing.json")


def test_generate_takes_a_plan_file(tmp_path, capsys):
    from quorumlake.pipelines.app import cli

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            [{"cluster": 0, "kind": "brokers-down", "start_ms": boundary(2), "end_ms": boundary(4), "nodes": [1, 2]}]
        )
    )
    out = tmp_path / "zone"
    args = ["--clusters", "1", "--hours", "0.1", "--interval-s", str(INTERVAL_S), "--plan", str(plan)]
    assert cli.main(["generate", "--out", str(out), *args]) == 0
    states = lines(out, "partitions")
    # brokers 1 and 2 are out of every ISR (a partition with no other replica is offline) exactly in steps 2 and 3
    down = [p for p in states if step_of(p["collected_at_ms"]) in (2, 3)]
    assert down and all(p["leader"] == -1 or not {1, 2} & set(p["isr"]) for p in down)
    assert all(p["isr"] == p["replicas"] for p in states if step_of(p["collected_at_ms"]) not in (2, 3))
    capsys.readouterr()
    plan.write_text('[{"cluster": 5, "kind": "brokers-down", "start_ms": 1, "end_ms": 2}]')
    assert cli.main(["generate", "--out", str(out), "--clusters", "1", "--plan", str(plan)]) == 2
    assert "planned outage for cluster 5: the fleet has clusters 0-0" in capsys.readouterr().err
