"""The state of one simulated cluster at any instant: quorum (what the KRaft leader would answer to DescribeQuorum),
partition replication, and the values behind each node's metrics. Every method is a function of time and the
timeline; the only history kept is the ISR shrink/expand counters, fed in snapshot order.

Kafka semantics followed (docs/kafka-surfaces.md §1.4, §4, §5): the leader's own entry has lastFetchTimestamp =
lastCaughtUpTimestamp = its clock; followers long-poll, so a healthy one fetched within the last 500 ms and is caught
up; a new leader knows nothing of a replica (LEO and timestamps -1, observer not listed) until that replica fetches
in the new epoch; observers vanish 5 minutes after their last fetch; the high watermark is the majority's LEO.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorumlake.simulator.metadata_log import MetadataLog
from quorumlake.simulator.timeline import OUTAGE_FENCE_MS, Election, Outage, Timeline
from quorumlake.simulator.topology import ClusterTopology, Noise, hashmap_order
from quorumlake.simulator.versions import release_of

NOT_LEADER_OR_FOLLOWER = 6
OBSERVER_SESSION_TIMEOUT_MS = 300_000
LAG_SLOW_RECORDS_PER_S = 1  # a lagging voter's replication speed (the leader appends >= 2/s)
LAG_CATCH_UP_RECORDS_PER_S = 40
NAN = float("nan")


@dataclass(frozen=True)
class ReplicaView:
    replica_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_ms: int  # -1 when unknown
    last_caught_up_ms: int  # -1 when unknown


@dataclass(frozen=True)
class QuorumView:
    """What the leader answers (or, with error_code != 0, the error a non-leader answers)."""

    collected_at_ms: int
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaView, ...]
    observers: tuple[ReplicaView, ...]


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int

    @property
    def effective_min_isr(self) -> int:  # the broker caps min.insync.replicas at the replica count
        return min(self.min_isr, len(self.replicas))


class ClusterSim:
    def __init__(self, topo: ClusterTopology, tl: Timeline, seed: int) -> None:
        self.topo, self.tl = topo, tl
        self.noise = Noise(seed, topo.cluster_id)
        self.log = MetadataLog(self.noise, tl.start_ms, tl.interval_ms, tl.steps, tl.stall)
        # Kafka 4.0+ elections go through the pre-vote states (KIP-996)
        self.prevote = int(release_of(topo).split(".")[0]) >= 4
        self.voter_order = hashmap_order(sorted(topo.controllers))
        self.observer_order = hashmap_order(sorted(topo.brokers))
        self.counters = {
            b: [self.noise.int(0, 40, "shrinks", b), self.noise.int(0, 40, "expands", b)] for b in topo.brokers
        }
        self._previous: dict[tuple[str, int], PartitionState] = {}

    # --- schedule -------------------------------------------------------------------------------------------------

    def quorum_times(self, step: int) -> list[int]:
        t = self.tl.step_ms(step)
        offsets = self.tl.quorum_offsets.get(step) or (self.noise.int(0, 400, "collect", step),)
        return [t + o for o in offsets]

    def partitions_time(self, step: int) -> int:
        return self.tl.step_ms(step) + self.noise.int(0, 500, "partitions", step)

    def scrape_time(self, node: int, step: int) -> int:
        fixed = self.tl.scrape_offsets.get(step, {}).get(node)
        if fixed is not None:
            return self.tl.step_ms(step) + fixed
        return (
            self.tl.step_ms(step)
            + self.noise.int(100, 1200, "scrape-offset", node)
            + self.noise.int(0, 150, "scrape", node, step)
        )

    # --- leadership and reachability ------------------------------------------------------------------------------

    def leadership(self, t: int) -> tuple[int, int, int, Election | None]:
        """(leader or -1, epoch, when this leader's epoch started, the election that started it)."""
        leader, epoch, current = self.tl.initial_leader, self.tl.initial_epoch, None
        since = self.tl.start_ms - 86_400_000
        for e in self.tl.elections:
            if t < e.resign_ms:
                break
            if t < e.elected_ms:
                return -1, e.epoch, e.resign_ms, e
            leader, epoch, since, current = e.leader, e.epoch, e.elected_ms, e
        return leader, epoch, since, current

    def away(self, node: int, t: int) -> tuple[int, int] | None:
        """The [start, end) during which `node` neither fetches nor answers scrapes, if t is in one."""
        for w in self.tl.unreachable:
            if w.node == node and w.covers(t):
                return w.start_ms, w.end_ms
        for o in self.tl.outages:
            if o.node == node and o.down(t):
                return o.death_ms, o.restart_ms + 3_000
        return None

    def reachable(self, node: int, t: int) -> bool:
        return self.away(node, t) is None

    # --- replica progress -----------------------------------------------------------------------------------------

    def _fetch_time(self, node: int, t: int, salt: str) -> int:
        """The replica's latest fetch at or before t: it long-polls, so it re-fetches right after each append."""
        f = t - self.noise.int(0, 499, "fetch", node, t, salt)
        appended = self.log.last_append(t)
        wake = self.noise.int(1, 8, "wake", node, t, salt)
        if appended > f and appended + wake <= t:
            f = appended + wake
        return f

    def _lagging_offset(self, t: int) -> int:
        lag = self.tl.lagging
        assert lag is not None
        r = self.log.leo(lag.start_ms) + LAG_SLOW_RECORDS_PER_S * (min(t, lag.end_ms) - lag.start_ms) // 1000
        if t > lag.end_ms:
            r += LAG_CATCH_UP_RECORDS_PER_S * (t - lag.end_ms) // 1000
        return min(r, self.log.leo(t))

    def progress(self, node: int, t: int, salt: str) -> tuple[int, int, int]:
        """(log end offset, last fetch, last caught-up) of a non-leader replica as the leader knows it at t."""
        gone = self.away(node, t)
        if gone is not None:
            f = gone[0] - self.noise.int(1, 400, "last-fetch", node, gone[0])
            return self.log.leo(f), f, f
        f = self._fetch_time(node, t, salt)
        lag = self.tl.lagging
        if lag is not None and lag.node == node and f >= lag.start_ms:
            offset = self._lagging_offset(f)
            if f < lag.end_ms or offset < self.log.leo(f):
                return offset, f, lag.start_ms - 137
        return self.log.leo(f), f, f

    def _first_fetch(self, node: int, since: int, election: Election | None) -> int:
        """A replica's first fetch in the epoch that started at `since`."""
        gone = self.away(node, since)
        start = gone[1] if gone is not None else since
        if node in self.topo.brokers:  # observers learn of the new leader when their fetch to the old one fails
            return start + self.noise.int(200, 1500, "first-fetch", node, since)
        if election is not None and node == election.previous_leader:
            return start + self.noise.int(150, 250, "first-fetch", node, since)
        return start + self.noise.int(5, 20, "first-fetch", node, since)

    def _known(self, node: int, now: int, since: int, election: Election | None) -> tuple[int, int, int] | None:
        first = self._first_fetch(node, since, election)
        if now < first:
            return None
        offset, fetched, caught_up = self.progress(node, now, "dq")
        if fetched < first:
            return None
        return offset, fetched, caught_up if caught_up >= first else -1

    def high_watermark(self, t: int) -> int:
        """The majority's log end offset at t (for metrics; DescribeQuorum computes it from what it reports)."""
        leader = self.leadership(t)[0]
        offsets = sorted(
            (self.log.leo(t) if v == leader else self.progress(v, t, "hw")[0] for v in self.voter_order), reverse=True
        )
        return offsets[len(offsets) // 2]

    # --- DescribeQuorum -------------------------------------------------------------------------------------------

    def describe_quorum(self, collected_at: int) -> QuorumView:
        now = collected_at - self.noise.int(1, 12, "rtt", collected_at)  # the leader's clock when it answers
        leader, epoch, since, election = self.leadership(now)
        if leader == -1:
            return QuorumView(collected_at, NOT_LEADER_OR_FOLLOWER, 0, 0, 0, (), ())
        dirs = self.topo.directory_ids
        voters = []
        for v in self.voter_order:
            state = (self.log.leo(now), now, now) if v == leader else self._known(v, now, since, election)
            voters.append(ReplicaView(v, dirs[v], *(state or (-1, -1, -1))))
        observers = []
        for b in self.observer_order:
            state = self._known(b, now, since, election)
            if state is not None and now - state[1] < OBSERVER_SESSION_TIMEOUT_MS:
                observers.append(ReplicaView(b, dirs[b], *state))
        offsets = sorted((v.log_end_offset for v in voters), reverse=True)
        hw = offsets[len(offsets) // 2] if now - since >= 100 else -1  # a new leader commits its epoch first
        return QuorumView(collected_at, 0, leader, epoch, hw, tuple(voters), tuple(observers))

    # --- partitions -----------------------------------------------------------------------------------------------

    def _outage_of(self, node: int, t: int) -> Outage | None:
        """The outage of `node` that matters at t: the latest one that has started (a node may have several)."""
        started = [o for o in self.tl.outages if o.node == node and o.death_ms <= t]
        return max(started, key=lambda o: o.death_ms) if started else None

    def partitions(self, t: int) -> list[PartitionState]:
        outages = {r: o for r in self.topo.brokers if (o := self._outage_of(r, t)) is not None}
        flap = self.tl.flap
        states = []
        for ti, topic in enumerate(self.topo.topics):
            for p, replicas in enumerate(topic.assignments):
                isr = [
                    r
                    for r in replicas
                    if not (r in outages and outages[r].out_of_isr(t))
                    and not (
                        flap is not None
                        and (flap.topic_index, flap.partition, flap.replica) == (ti, p, r)
                        and flap.out(t)
                    )
                ]
                if not isr:  # KRaft keeps the last ISR member when it is fenced, and the partition goes offline
                    isr = [max((outages[r] for r in replicas if r in outages), key=lambda o: o.death_ms).node]
                alive = [r for r in isr if not (r in outages and outages[r].fenced(t))]
                settled = [r for r in alive if not (r in outages and outages[r].displaced(t))]
                leader = settled[0] if settled else alive[0] if alive else -1
                states.append(PartitionState(topic.name, p, leader, replicas, tuple(isr), topic.min_isr))
        return states

    def observe_partitions(self, t: int, states: list[PartitionState]) -> None:
        """Count leader-made ISR changes (IsrShrinksPerSec / IsrExpandsPerSec) between consecutive snapshots."""
        fenced = {o.node for o in self.tl.outages if o.fenced(t)}
        for s in states:
            before = self._previous.get((s.topic, s.partition))
            if before is not None and s.leader in self.counters:
                if set(before.isr) - set(s.isr) - fenced:
                    self.counters[s.leader][0] += 1
                if set(s.isr) - set(before.isr):
                    self.counters[s.leader][1] += 1
            self._previous[(s.topic, s.partition)] = s

    # --- metric values --------------------------------------------------------------------------------------------

    def _own_offset(self, node: int, t: int) -> int:
        return self.log.leo(t) if node == self.leadership(t)[0] else self.progress(node, t, "raft")[0]

    def raft_values(self, node: int, s: int) -> tuple[str, dict[str, float]]:
        """`current-state` and the numeric attributes of kafka.server:type=raft-metrics."""
        leader, epoch, since, election = self.leadership(s)
        voter = node in self.topo.controllers
        offset = self._own_offset(node, s)
        hw = self.high_watermark(s)
        # Kafka 4.x (KIP-996): in an election a voter is prospective (pre-vote, no vote granted) first, then the
        # winner a candidate and the others unattached-voted; Kafka 3.x: candidate and voted throughout
        pre_vote = (
            self.prevote
            and voter
            and leader == -1
            and election is not None
            and s < election.resign_ms + (election.elected_ms - election.resign_ms) // 2
        )
        if node == leader:
            state = "leader"
        elif leader != -1:
            state = "follower" if voter else "observer"
        elif pre_vote:
            state = "prospective"
        elif election is not None and node == election.leader:
            state = "candidate"
        elif voter:
            state = "unattached-voted" if self.prevote else "voted"
        else:
            state = "unattached"
        if pre_vote:
            vote = -1
        else:
            vote = leader if voter and leader != -1 else (election.leader if voter and election is not None else -1)
        rate = (offset - self._own_offset(node, s - 30_000)) / 30.0
        stalled = self.tl.stall is not None and self.tl.stall.covers(s)
        committing = node == leader and not stalled
        commit_avg = round(self.noise.float(1.5, 9.0, "commit", node, s), 3) if committing else NAN
        commit_max = commit_avg + self.noise.int(2, 30, "commit-max", node, s) if committing else NAN
        elected = election is not None and node == leader and s - since < 60_000
        election_ms = float(election.elected_ms - election.resign_ms) if elected and election else NAN
        return state, {
            "current-leader": float(leader),
            "current-vote": float(vote),
            "current-epoch": float(epoch),
            "high-watermark": float(hw if node == leader else min(hw, offset)),
            "log-end-offset": float(offset),
            "log-end-epoch": float(epoch),
            "number-unknown-voter-connections": 0.0,
            "commit-latency-avg": commit_avg,
            "commit-latency-max": commit_max,
            "election-latency-avg": election_ms,
            "election-latency-max": election_ms,
            "append-records-rate": rate if node == leader else 0.0,
            "fetch-records-rate": 0.0 if node == leader else rate,
            "poll-idle-ratio-avg": self.noise.float(0.85, 0.995, "idle", node, s),
        }

    def controller_values(self, node: int, s: int) -> dict[str, int]:
        """kafka.controller:type=KafkaController gauges (QuorumControllerMetrics and ControllerMetadataMetrics)."""
        leader = self.leadership(s)[0]
        hw = self.high_watermark(s)
        if node == leader:  # the active controller applies on append, ahead of the commit
            applied, committed, applied_at = self.log.leo(s) - 1, hw - 1, self.log.last_append(s)
        else:
            applied = committed = min(self.progress(node, s, "ctrl")[0], hw) - 1
            applied_at = self.log.append_time_of(applied)
        states = self.partitions(s)
        fenced = sum(1 for o in self.tl.outages if o.fenced(s))
        # the active controller counts each broker session it timed out since it started (standbys time out none)
        timed_out = sum(1 for o in self.tl.outages if o.death_ms + OUTAGE_FENCE_MS <= s) if node == leader else 0
        return {
            "ActiveControllerCount": int(node == leader),
            "LastAppliedRecordOffset": applied,
            "LastCommittedRecordOffset": committed,
            "LastAppliedRecordTimestamp": applied_at,
            "LastAppliedRecordLagMs": s - applied_at,
            "OfflinePartitionsCount": sum(1 for p in states if p.leader == -1),
            "GlobalTopicCount": len(self.topo.topics),
            "GlobalPartitionCount": len(states),
            "FencedBrokerCount": fenced,
            "ActiveBrokerCount": len(self.topo.brokers) - fenced,
            "PreferredReplicaImbalanceCount": sum(1 for p in states if p.leader != p.replicas[0]),
            "MetadataErrorCount": 0,
            "TimedOutBrokerHeartbeatCount": timed_out,
        }

    def broker_metadata_values(self, node: int, s: int) -> dict[str, float]:
        """kafka.server:type=broker-metadata-metrics attributes."""
        frozen = next(
            (
                w
                for w in (self.tl.frozen_applier, *self.tl.frozen_appliers)
                if w is not None and w.node == node and w.covers(s)
            ),
            None,
        )
        if frozen is not None:
            applied = self.high_watermark(frozen.start_ms) - 1
        else:
            applied = self.high_watermark(s - self.noise.int(5, 60, "apply", node, s)) - 1
        applied_at = self.log.append_time_of(applied)
        return {
            "last-applied-record-offset": float(applied),
            "last-applied-record-timestamp": float(applied_at),
            "last-applied-record-lag-ms": float(s - applied_at),
            "metadata-load-error-count": 0.0,
            "metadata-apply-error-count": 0.0,
        }

    def replica_manager_values(self, node: int, s: int) -> tuple[dict[str, int], list[tuple[str, int, str, int]]]:
        """ReplicaManager gauges and per-partition gauges (topic, partition, name, value) of one broker."""
        led = under_replicated = under_min = at_min = hosted = 0
        gauges = []
        for p in self.partitions(s):
            if node not in p.replicas:
                continue
            hosted += 1
            leads = p.leader == node
            flags = {
                "UnderReplicated": int(leads and len(p.replicas) - len(p.isr) > 0),
                "UnderMinIsr": int(leads and len(p.isr) < p.effective_min_isr),
                "AtMinIsr": int(leads and len(p.isr) == p.effective_min_isr),
            }
            led += leads
            under_replicated += flags["UnderReplicated"]
            under_min += flags["UnderMinIsr"]
            at_min += flags["AtMinIsr"]
            gauges.extend((p.topic, p.partition, name, value) for name, value in flags.items())
        return {
            "UnderReplicatedPartitions": under_replicated,
            "UnderMinIsrPartitionCount": under_min,
            "AtMinIsrPartitionCount": at_min,
            "LeaderCount": led,
            "PartitionCount": hosted,
            "OfflineReplicaCount": 0,
        }, gauges
