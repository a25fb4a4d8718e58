"""What happens to a cluster and when: each scenario becomes a handful of timed events that the cluster model
(`cluster.py`) reads. The fault occupies the middle third of the run: it starts half an interval before snapshot
`fault_start_step` = steps // 3 and ends half an interval before snapshot `fault_end_step` = 2 * steps // 3, so every
snapshot in between sees it and the ones after see the recovery. With `fault_at_end` it occupies the last third
instead (from snapshot steps - steps // 3 on) and is still going on at the last snapshot: a fleet that looks live.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quorumlake.simulator.topology import ClusterTopology, Noise

SCENARIOS: dict[str, str] = {
    "healthy": "no fault: leader stable, followers and observers caught up, full ISRs",
    "lagging-voter": "a follower voter replicates slower than the leader appends in the middle third: its LEO falls "
    "behind and its lastCaughtUpTimestamp freezes, then it catches up",
    "network-partition": "a follower voter is cut off in the middle third: its lastFetchTimestamp, "
    "lastCaughtUpTimestamp and LEO freeze and it cannot be scraped, then it rejoins",
    "leader-election": "the leader restarts at the start of the middle third (epoch +1; it reports LEO -1 until it "
    "fetches again); mid-fault a second election (epoch +2) right before a snapshot shows -1 "
    "entries, high watermark -1 and one NOT_LEADER_OR_FOLLOWER error response",
    "broker-failure": "a broker dies at the start of the middle third (its partitions shrink to min ISR), a second "
    "one mid-fault (RF-3 partitions under min ISR, RF-2 partitions offline), both recover at the "
    "end and leaders move back to their preferred replicas",
    "flapping-isr": "in the middle third one partition's ISR alternates between 3 and 2 replicas every snapshot",
    "metadata-divergence": "in the middle third one broker stops applying metadata: its last-applied-record-offset "
    "freezes and last-applied-record-lag-ms grows while the quorum keeps committing",
    "quorum-stall": "in the middle third the active controller appends nothing: LEO and high watermark stay "
    "constant, last-applied lag grows on every node, then appends resume",
}

OUTAGE_FENCE_MS = 9_000  # broker.session.timeout.ms: a dead broker is fenced (and leaves ISRs) after this
OUTAGE_UNFENCE_MS = 5_000  # a restarted broker registers and is unfenced after this
OUTAGE_REJOIN_ISR_MS = 25_000  # ... and is back in the ISRs after catching up


@dataclass(frozen=True)
class Window:
    """A fault affecting `node` (or the whole cluster when node is -1) during [start_ms, end_ms)."""

    node: int
    start_ms: int
    end_ms: int

    def covers(self, t: int) -> bool:
        return self.start_ms <= t < self.end_ms


@dataclass(frozen=True)
class Election:
    resign_ms: int  # the old leader stops leading: no leader until elected_ms
    elected_ms: int  # the new leader's LeaderState starts; every other replica is unknown until it fetches
    leader: int
    epoch: int
    previous_leader: int


@dataclass(frozen=True)
class Outage:
    """A broker process that dies at death_ms and starts again at restart_ms."""

    node: int
    death_ms: int
    restart_ms: int
    preferred_leader_ms: int  # when the controller moves leadership back to it (auto leader rebalance)

    def down(self, t: int) -> bool:
        return self.death_ms <= t < self.restart_ms + 3_000

    def fenced(self, t: int) -> bool:
        return self.death_ms + OUTAGE_FENCE_MS <= t < self.restart_ms + OUTAGE_UNFENCE_MS

    def out_of_isr(self, t: int) -> bool:
        return self.death_ms + OUTAGE_FENCE_MS <= t < self.restart_ms + OUTAGE_REJOIN_ISR_MS

    def displaced(self, t: int) -> bool:
        return self.death_ms + OUTAGE_FENCE_MS <= t < self.preferred_leader_ms


@dataclass(frozen=True)
class Flap:
    topic_index: int
    partition: int
    replica: int
    window: Window
    period_ms: int

    def out(self, t: int) -> bool:
        return self.window.covers(t) and ((t - self.window.start_ms) // self.period_ms) % 2 == 0


@dataclass
class Timeline:
    start_ms: int
    interval_ms: int
    steps: int
    fault_start_step: int
    fault_mid_step: int
    fault_end_step: int
    initial_leader: int
    initial_epoch: int
    elections: list[Election] = field(default_factory=list)
    unreachable: list[Window] = field(default_factory=list)  # controllers that neither fetch nor can be scraped
    outages: list[Outage] = field(default_factory=list)
    lagging: Window | None = None
    stall: Window | None = None
    frozen_applier: Window | None = None
    frozen_appliers: list[Window] = field(default_factory=list)  # planned ones (plan.py), beside the scenario's
    flap: Flap | None = None
    quorum_offsets: dict[int, tuple[int, ...]] = field(default_factory=dict)  # step -> fixed collection offsets
    # step -> controller -> fixed scrape offset (ms after the step): the exporter's scrape that lands mid-election
    scrape_offsets: dict[int, dict[int, int]] = field(default_factory=dict)
    key_steps: set[int] = field(default_factory=set)
    events: list[str] = field(default_factory=list)  # human-readable, for the summary

    def step_ms(self, step: int) -> int:
        return self.start_ms + step * self.interval_ms

    def boundary_ms(self, step: int) -> int:
        """Half an interval before snapshot `step`: when faults start and end."""
        return self.step_ms(step) - self.interval_ms // 2

    @property
    def fault_start_ms(self) -> int:
        return self.boundary_ms(self.fault_start_step)

    @property
    def fault_mid_ms(self) -> int:
        return self.boundary_ms(self.fault_mid_step)

    @property
    def fault_end_ms(self) -> int:
        return self.boundary_ms(self.fault_end_step)


def build_timeline(
    topo: ClusterTopology,
    seed: int,
    start_ms: int,
    interval_s: int,
    steps: int,
    plan: Sequence[Any] = (),
    fault_at_end: bool = False,
) -> Timeline:
    """The cluster's scenario as timed events, and the planned outages of `plan` (`plan.PlannedOutage`s of this
    cluster) on top of it; `fault_at_end`: the fault occupies the last third and does not end within the run."""
    noise = Noise(seed, topo.cluster_id, "timeline")
    voters = sorted(topo.controllers)
    fs, fe = (steps - steps // 3, steps) if fault_at_end else (steps // 3, (2 * steps) // 3)
    tl = Timeline(
        start_ms=start_ms,
        interval_ms=interval_s * 1000,
        steps=steps,
        fault_start_step=fs,
        fault_mid_step=(fs + fe) // 2,
        fault_end_step=fe,
        initial_leader=voters[noise.int(0, len(voters) - 1, "leader")],
        initial_epoch=noise.int(3, 60, "epoch"),
    )
    tl.key_steps.update({fs, fe})
    followers = [v for v in voters if v != tl.initial_leader]
    builder = _BUILDERS.get(topo.scenario)
    if builder is not None:
        builder(tl, topo, followers)
    for outage in plan:
        _planned(tl, topo, followers, outage)
    return tl


def _planned(tl: Timeline, topo: ClusterTopology, followers: list[int], outage: Any) -> None:
    """One planned outage (`plan.PlannedOutage`) into the timeline; ValueError for nodes its kind cannot take."""
    start, end = outage.start_ms, outage.end_ms
    if outage.kind == "voter-cut-off":
        nodes = outage.nodes or tuple(followers[:1])
        if tl.initial_leader in nodes:
            raise ValueError(
                f"{topo.cluster_id}: a planned voter-cut-off cannot cut off the leader {tl.initial_leader}"
            )
        _check_nodes(topo, outage.kind, nodes, topo.controllers)
        tl.unreachable.extend(Window(n, start, end) for n in nodes)
        tl.events.append(f"planned: voters {list(nodes)} cut off during [{start}, {end})")
    elif outage.kind == "brokers-down":
        nodes = outage.nodes or topo.brokers[1:3]
        _check_nodes(topo, outage.kind, nodes, topo.brokers)
        tl.outages.extend(Outage(n, start, end, end + 3 * tl.interval_ms) for n in nodes)
        tl.events.append(f"planned: brokers {list(nodes)} down during [{start}, {end})")
    else:  # applier-frozen
        nodes = outage.nodes or topo.brokers[-1:]
        _check_nodes(topo, outage.kind, nodes, topo.brokers)
        tl.frozen_appliers.extend(Window(n, start, end) for n in nodes)
        tl.events.append(f"planned: brokers {list(nodes)} stop applying metadata during [{start}, {end})")
    # the snapshots right after both edges are captured whatever the capture schedule
    for edge in (start, end):
        step = max(0, -(-(edge - tl.start_ms) // tl.interval_ms))
        if step < tl.steps:
            tl.key_steps.add(step)


def _check_nodes(topo: ClusterTopology, kind: str, nodes: Sequence[int], allowed: Sequence[int]) -> None:
    wrong = [n for n in nodes if n not in allowed]
    if wrong or not nodes:
        raise ValueError(f"{topo.cluster_id}: a planned {kind} takes nodes among {list(allowed)}, not {list(nodes)}")


def _lagging_voter(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    if followers:
        tl.lagging = Window(followers[0], tl.fault_start_ms, tl.fault_end_ms)
        tl.events.append(f"voter {followers[0]} lags from {tl.fault_start_ms} and catches up after {tl.fault_end_ms}")


def _network_partition(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    if followers:
        node = followers[-1]
        tl.unreachable.append(Window(node, tl.fault_start_ms, tl.fault_end_ms))
        tl.events.append(f"voter {node} cut off during [{tl.fault_start_ms}, {tl.fault_end_ms})")


def _leader_election(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    voters = sorted(topo.controllers)
    a = tl.initial_leader
    b = voters[(voters.index(a) + 1) % len(voters)]
    c = voters[(voters.index(b) + 1) % len(voters)]
    # 1. The leader restarts; the next voter wins the election at te1, just before snapshot fault_start_step.
    te1 = tl.step_ms(tl.fault_start_step) - min(2_000, tl.interval_ms // 4)
    resign1 = te1 - min(300, tl.interval_ms // 8)
    tl.elections.append(Election(resign1, te1, b, tl.initial_epoch + 1, a))
    if len(voters) >= 3:  # with fewer voters the others could not elect a leader while it is away
        restart_ms = max(tl.interval_ms * 5 // 2, 20_000)
        tl.unreachable.append(Window(a, resign1, te1 + restart_ms))
        tl.events.append(f"leader {a} restarts at {resign1} (back at {te1 + restart_ms}); {b} leads from {te1}")
    else:
        tl.events.append(f"leader {a} resigns at {resign1}; {b} leads from {te1}")
    tl.key_steps.update({tl.fault_start_step, tl.fault_start_step + 1})
    # 2. Mid-fault, a second election (one failed round: epoch +2) completes just before the snapshot is taken.
    km = tl.fault_mid_step
    if km > tl.fault_start_step:
        t = tl.step_ms(km)
        tl.elections.append(Election(t + 150, t + 290, c, tl.initial_epoch + 3, b))
        tl.quorum_offsets[km] = (200, 320)  # the first request lands between the two: NOT_LEADER_OR_FOLLOWER
        # the controllers' scrapes land in the election too: the winner's early in it (4.x: prospective, 3.x:
        # candidate), the other voters' late (4.x: unattached-voted, 3.x: voted)
        tl.scrape_offsets[km] = {v: (185 if v == c else 255) for v in voters}
        tl.key_steps.add(km)
        tl.events.append(f"leader {b} resigns at {t + 150}; {c} leads from {t + 290} (epoch {tl.initial_epoch + 3})")


def _broker_failure(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    brokers = topo.brokers
    first = brokers[1] if len(brokers) >= 2 else brokers[0]
    restart = tl.fault_end_ms
    preferred = restart + 3 * tl.interval_ms
    tl.outages.append(Outage(first, tl.fault_start_ms, restart, preferred))
    tl.events.append(f"broker {first} dies at {tl.fault_start_ms}, restarts at {restart}")
    if len(brokers) >= 3:
        tl.outages.append(Outage(brokers[2], tl.fault_mid_ms, restart, preferred))
        tl.events.append(f"broker {brokers[2]} dies at {tl.fault_mid_ms}, restarts at {restart}")
    tl.key_steps.update({tl.fault_mid_step, tl.fault_end_step + 1})


def _flapping_isr(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    if topo.topics and topo.topics[0].replication_factor >= 2:
        replica = topo.topics[0].assignments[0][-1]
        window = Window(replica, tl.fault_start_ms, tl.fault_end_ms)
        tl.flap = Flap(0, 0, replica, window, tl.interval_ms)
        tl.events.append(
            f"{topo.topics[0].name}-0 drops replica {replica} from its ISR every other snapshot in "
            f"[{tl.fault_start_ms}, {tl.fault_end_ms})"
        )


def _metadata_divergence(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    node = topo.brokers[-1]
    tl.frozen_applier = Window(node, tl.fault_start_ms, tl.fault_end_ms)
    tl.events.append(f"broker {node} stops applying metadata during [{tl.fault_start_ms}, {tl.fault_end_ms})")


def _quorum_stall(tl: Timeline, topo: ClusterTopology, followers: list[int]) -> None:
    tl.stall = Window(-1, tl.fault_start_ms, tl.fault_end_ms)
    tl.events.append(f"no appends (high watermark constant) during [{tl.fault_start_ms}, {tl.fault_end_ms})")


_BUILDERS = {
    "lagging-voter": _lagging_voter,
    "network-partition": _network_partition,
    "leader-election": _leader_election,
    "broker-failure": _broker_failure,
    "flapping-isr": _flapping_isr,
    "metadata-divergence": _metadata_divergence,
    "quorum-stall": _quorum_stall,
}
