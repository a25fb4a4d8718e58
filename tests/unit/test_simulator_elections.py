"""The simulator's elections speak the raft-state vocabulary of the Kafka release it simulates (docs/kafka-surfaces.md
§4.3): on 4.x (KIP-996) a voter is `prospective` before the winner becomes `candidate` and the others
`unattached-voted`; on 3.x the winner is `candidate` and the others `voted`. The controllers' scrapes of the mid-fault
election land inside it, so the states reach the landing zone (Strimzi-style names carry `current-state`)."""

from __future__ import annotations

import re
from pathlib import Path

from quorumlake.simulator import FleetSpec, generate
from quorumlake.simulator.cluster import ClusterSim
from quorumlake.simulator.timeline import build_timeline
from quorumlake.simulator.topology import CONTROLLER_ID_BASE, build_topology
from quorumlake.simulator.versions import release_of
from tests.helpers import read_text

STATE = re.compile(r'^kafka_server_raftmetrics_current_state\{current_state="([^"]+)"\} 1\.0$', re.M)


def _sim(index: int) -> ClusterSim:
    topo = build_topology(42, index, "leader-election", 3, 3, 3, 3)
    return ClusterSim(topo, build_timeline(topo, 42, 1_730_000_000_000, 30, 120), 42)


def _states(sim: ClusterSim, node: int, times: range) -> list[str]:
    seen: list[str] = []
    for t in times:
        state = sim.raft_values(node, t)[0]
        if not seen or seen[-1] != state:
            seen.append(state)
    return seen


def test_a_4x_election_goes_through_prospective_before_candidate():
    sim = _sim(0)
    assert release_of(sim.topo) == "4.1" and sim.prevote
    election = sim.tl.elections[-1]
    span = range(election.resign_ms - 50, election.elected_ms + 50, 5)
    assert _states(sim, election.leader, span) == ["follower", "prospective", "candidate", "leader"]
    other = next(v for v in sim.topo.controllers if v not in (election.leader, election.previous_leader))
    assert _states(sim, other, span) == ["follower", "prospective", "unattached-voted", "follower"]
    assert _states(sim, election.previous_leader, span) == ["leader", "prospective", "unattached-voted", "follower"]
    assert _states(sim, sim.topo.brokers[0], span) == ["observer", "unattached", "observer"]
    # a prospective voter has granted no vote; a candidate votes for itself
    mid = election.resign_ms + 10
    assert sim.raft_values(election.leader, mid)[1]["current-vote"] == -1.0
    assert sim.raft_values(election.leader, election.elected_ms - 1)[1]["current-vote"] == float(election.leader)


def test_a_3x_election_keeps_the_3x_names():
    sim = _sim(1)
    assert release_of(sim.topo) == "3.7" and not sim.prevote
    election = sim.tl.elections[-1]
    span = range(election.resign_ms - 50, election.elected_ms + 50, 5)
    assert _states(sim, election.leader, span) == ["follower", "candidate", "leader"]
    assert _states(sim, election.previous_leader, span) == ["leader", "voted", "follower"]
    for node in sim.topo.controllers:
        assert not {"prospective", "prospective-voted", "unattached-voted"} & set(_states(sim, node, span))


def _scraped_states(root: Path, cluster: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for f in sorted((root / "metrics" / f"cluster={cluster}").rglob("*.prom*")):
        node = int(re.search(r"node=(\d+)", str(f)).group(1))
        out.setdefault(node, []).extend(STATE.findall(read_text(f)))
    return out


def test_the_mid_fault_election_is_scraped_in_both_vocabularies(tmp_path):
    spec = FleetSpec(clusters=2, scenarios=("leader-election",), hours=0.5, interval_s=60, exporter="strimzi")
    summary = generate(tmp_path, spec)
    new, old = (c.cluster_id for c in summary.clusters)
    states_4x, states_3x = _scraped_states(tmp_path, new), _scraped_states(tmp_path, old)
    seen_4x = {s for states in states_4x.values() for s in states}
    seen_3x = {s for states in states_3x.values() for s in states}
    assert {"prospective", "unattached-voted", "leader", "follower"} <= seen_4x
    assert not {"candidate", "voted"} & seen_4x  # the winner is scraped early in the election: still prospective
    assert {"candidate", "voted", "leader", "follower"} <= seen_3x
    assert not {"prospective", "prospective-voted", "unattached-voted"} & seen_3x
    # exactly one scrape of each controller during the election: the winner prospective, the other two voted
    controllers = [states for node, states in states_4x.items() if node >= CONTROLLER_ID_BASE]
    assert sorted(s for states in controllers for s in states if s not in ("leader", "follower")) == [
        "prospective",
        "unattached-voted",
        "unattached-voted",
    ]
