"""The static shape of one simulated cluster: node ids, directory ids, topics and replica placement, and the
per-cluster choices that exercise the landing formats (DescribeQuorum version, exporter naming, gzip, CLI version).

Everything here is a pure function of the fleet seed and the cluster's index, so a cluster looks the same whatever
else the fleet holds.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass

from quorumlake.contract.kafka import ZERO_UUID

# DescribeQuorum api_version by cluster index (mostly v2/v1, some v0).
API_VERSION_CYCLE = (2, 1, 2, 0, 1, 2)
# Scenarios whose signature lives in the v1+ timestamps: never rendered as v0.
NEEDS_TIMESTAMPS = frozenset({"lagging-voter", "network-partition"})
# Metric landing format by cluster index: Strimzi rule names, jmx_exporter default names, Jolokia JSON lines.
EXPORTER_CYCLE = ("strimzi", "jmx", "jolokia")
# kafka-metadata-quorum / kafka-topics release that a cluster's operators run, by api_version it answers with.
TOOL_VERSION = {2: (3, 9), 1: (3, 7), 0: (3, 4)}
TOPIC_NAMES = (
    "orders",
    "payments",
    "clickstream",
    "inventory",
    "audit-log",
    "user-events",
    "shipments",
    "notifications",
)
CONTROLLER_ID_BASE = 3000
CONTROLLER_PORT = 9093


class Noise:
    """Deterministic pseudo-random draws keyed by what they are for, so no draw depends on call order."""

    def __init__(self, *scope: object) -> None:
        self._scope = "|".join(str(s) for s in scope)

    def rng(self, *key: object) -> random.Random:
        return random.Random(self._scope + "|" + "|".join(str(k) for k in key))

    def int(self, lo: int, hi: int, *key: object) -> int:
        """An integer in [lo, hi], both included."""
        return self.rng(*key).randint(lo, hi)

    def float(self, lo: float, hi: float, *key: object) -> float:
        return self.rng(*key).uniform(lo, hi)


def kafka_uuid(rng: random.Random) -> str:
    """A random version-4 UUID as Kafka's `Uuid.toString()` prints it (URL-safe base64, no padding, 22 chars).

    Like `Uuid.randomUuid()`, it never returns the zero id or one whose text starts with '-'.
    """
    while True:
        raw = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")
        if text != ZERO_UUID and not text.startswith("-"):
            return text


def hashmap_order(ids: list[int] | tuple[int, ...]) -> list[int]:
    """The iteration order of a java.util.HashMap<Integer, _> holding these keys (inserted in the given order)."""
    capacity = 16
    while len(ids) > capacity * 3 // 4:
        capacity *= 2
    position = {node: i for i, node in enumerate(ids)}
    return sorted(ids, key=lambda h: (((h ^ (h >> 16)) & (capacity - 1)), position[h]))


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: str
    assignments: tuple[tuple[int, ...], ...]  # replicas per partition; the first is the preferred leader
    min_isr: int
    min_isr_configured: bool  # True when set on the topic (shown in `Configs:`), False when the cluster default (1)

    @property
    def replication_factor(self) -> int:
        return len(self.assignments[0]) if self.assignments else 0


@dataclass(frozen=True)
class ClusterTopology:
    index: int
    cluster_id: str
    scenario: str
    kafka_cluster_id: str
    api_version: int
    exporter: str
    gzip: bool
    brokers: tuple[int, ...]
    controllers: tuple[int, ...]
    directory_ids: dict[int, str]
    controller_hosts: dict[int, str]
    topics: tuple[Topic, ...]

    @property
    def tool_version(self) -> tuple[int, int]:
        return TOOL_VERSION[self.api_version]

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.controllers + self.brokers

    def role(self, node: int) -> str:
        return "controller" if node in self.controllers else "broker"


def cluster_name(index: int, scenario: str) -> str:
    return f"cluster-{index + 1:02d}-{scenario}"


def build_topology(
    seed: int, index: int, scenario: str, brokers: int, controllers: int, topics: int, partitions: int
) -> ClusterTopology:
    """The cluster at `index` of the fleet (0-based)."""
    cluster_id = cluster_name(index, scenario)
    rng = random.Random(f"{seed}|{cluster_id}|topology")
    api_version = API_VERSION_CYCLE[index % len(API_VERSION_CYCLE)]
    if api_version == 0 and scenario in NEEDS_TIMESTAMPS:
        api_version = 1
    broker_ids = tuple(range(brokers))
    controller_ids = tuple(CONTROLLER_ID_BASE + i for i in range(controllers))
    directory_ids = {node: kafka_uuid(rng) for node in controller_ids + broker_ids}
    hosts = {node: f"controller-{i}.{cluster_id}.svc" for i, node in enumerate(controller_ids)}
    return ClusterTopology(
        index=index,
        cluster_id=cluster_id,
        scenario=scenario,
        kafka_cluster_id=kafka_uuid(rng),
        api_version=api_version,
        exporter=EXPORTER_CYCLE[index % len(EXPORTER_CYCLE)],
        gzip=index % 4 == 1,
        brokers=broker_ids,
        controllers=controller_ids,
        directory_ids=directory_ids,
        controller_hosts=hosts,
        topics=_topics(rng, broker_ids, topics, partitions),
    )


def _topics(rng: random.Random, brokers: tuple[int, ...], count: int, partitions: int) -> tuple[Topic, ...]:
    """RF 3 topics with min.insync.replicas=2; when there are three or more topics, the last one is RF 2 with the
    cluster default min.insync.replicas (1), so that losing two brokers can take some of its partitions offline."""
    result = []
    for t in range(count):
        base = TOPIC_NAMES[t % len(TOPIC_NAMES)]
        name = base if t < len(TOPIC_NAMES) else f"{base}-{t // len(TOPIC_NAMES)}"
        rf = min(3, len(brokers))
        if count >= 3 and t == count - 1 and len(brokers) >= 2:
            rf = 2
        configured = rf >= 3
        assignments = tuple(tuple(brokers[(t + p + j) % len(brokers)] for j in range(rf)) for p in range(partitions))
        result.append(Topic(name, kafka_uuid(rng), assignments, 2 if configured else 1, configured))
    return tuple(result)
