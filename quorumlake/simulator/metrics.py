"""Node metrics as JMX attributes, and their three landing renderings (docs/kafka-surfaces.md §4–§6):

- Prometheus text from jmx_exporter 1.x with the Strimzi `kafka-metrics` rules (lowercase names, `_total` on
  counters, `current_state` label series) or with no rules (the exporter's default names, all `untyped`);
- Jolokia-style JSON lines, one per numeric attribute.

jmx_exporter 1.x writes families sorted by name, labels sorted by name, values with Java's `Double.toString`.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from quorumlake.simulator.cluster import ClusterSim
from quorumlake.simulator.quorum import compact

RAFT_HELP = {
    "current-state": "The current state of this member; possible values are leader, candidate, voted, follower, "
    "unattached, observer",
    "current-leader": "The current quorum leader's id; -1 indicates unknown",
    "current-vote": "The current voted leader's id; -1 indicates not voted for anyone",
    "current-epoch": "The current quorum epoch.",
    "high-watermark": "The high watermark maintained on this member; -1 if it is unknown",
    "log-end-offset": "The current raft log end offset.",
    "log-end-epoch": "The current raft log end epoch.",
    "number-unknown-voter-connections": "Number of unknown voters whose connection information is not cached; "
    "would never be larger than quorum-size.",
    "commit-latency-avg": "The average time in milliseconds to commit an entry in the raft log.",
    "commit-latency-max": "The maximum time in milliseconds to commit an entry in the raft log.",
    "election-latency-avg": "The average time in milliseconds spent on electing a new leader.",
    "election-latency-max": "The maximum time in milliseconds spent on electing a new leader.",
    "append-records-rate": "The average number of records appended per sec by the leader of the raft quorum.",
    "fetch-records-rate": "The average number of records fetched from the leader of the raft quorum.",
    "poll-idle-ratio-avg": "The average fraction of time the client's poll() is idle as opposed to waiting for the "
    "user code to process records.",
}
BROKER_METADATA_HELP = {
    "last-applied-record-offset": "The offset of the last record from the cluster metadata partition that was "
    "applied by the broker",
    "last-applied-record-timestamp": "The timestamp of the last record from the cluster metadata partition that was "
    "applied by the broker",
    "last-applied-record-lag-ms": "The difference between now and the timestamp of the last record from the cluster "
    "metadata partition that was applied by the broker",
    "metadata-load-error-count": "The number of errors encountered by the BrokerMetadataListener while loading the "
    "metadata log and generating a new MetadataDelta based on it.",
    "metadata-apply-error-count": "The number of errors encountered by the BrokerMetadataPublisher while applying a "
    "new MetadataImage based on the latest MetadataDelta.",
}
YAMMER_HELP = "Attribute exposed for management"


@dataclass(frozen=True)
class Sample:
    """One JMX attribute reading."""

    domain: str  # kafka.server, kafka.controller, kafka.cluster
    type: str  # raft-metrics, KafkaController, ReplicaManager, Partition, ...
    name: str | None  # the yammer `name` key property; None for Kafka common metrics
    tags: tuple[tuple[str, str], ...]  # further key properties, in ObjectName order (topic, partition)
    attribute: str  # current-leader, Value, Count
    value: float | int | str  # str only for current-state

    @property
    def mbean(self) -> str:
        props = [("type", self.type)] + ([("name", self.name)] if self.name else []) + list(self.tags)
        return self.domain + ":" + ",".join(f"{k}={v}" for k, v in props)

    @property
    def help(self) -> str:
        description = (
            RAFT_HELP.get(self.attribute)
            if self.type == "raft-metrics"
            else BROKER_METADATA_HELP.get(self.attribute)
            if self.type == "broker-metadata-metrics"
            else YAMMER_HELP
        )
        return f"{description} {self.domain}:name={self.name or 'null'},type={self.type},attribute={self.attribute}"


def node_samples(sim: ClusterSim, node: int, s: int) -> list[Sample]:
    """Every attribute the exporter reads from `node` at time s."""
    state, raft = sim.raft_values(node, s)
    samples = [Sample("kafka.server", "raft-metrics", None, (), "current-state", state)]
    samples += [Sample("kafka.server", "raft-metrics", None, (), attr, v) for attr, v in raft.items()]
    if sim.topo.api_version >= 2:  # MetadataLoader CurrentControllerId exists from 3.7
        samples.append(
            Sample("kafka.server", "MetadataLoader", "CurrentControllerId", (), "Value", int(raft["current-leader"]))
        )
    if sim.topo.role(node) == "controller":
        samples += [
            Sample("kafka.controller", "KafkaController", name, (), "Value", v)
            for name, v in sim.controller_values(node, s).items()
        ]
        return samples
    samples += [
        Sample("kafka.server", "broker-metadata-metrics", None, (), attr, v)
        for attr, v in sim.broker_metadata_values(node, s).items()
    ]
    counts, gauges = sim.replica_manager_values(node, s)
    samples += [Sample("kafka.server", "ReplicaManager", name, (), "Value", v) for name, v in counts.items()]
    shrinks, expands = sim.counters[node]
    samples += [
        Sample("kafka.server", "ReplicaManager", "IsrShrinksPerSec", (), "Count", shrinks),
        Sample("kafka.server", "ReplicaManager", "IsrExpandsPerSec", (), "Count", expands),
    ]
    samples += [
        Sample("kafka.cluster", "Partition", name, (("topic", topic), ("partition", str(p))), "Value", v)
        for topic, p, name, v in gauges
    ]
    return samples


# --- value and name formatting -------------------------------------------------------------------------------------


def java_double(value: float) -> str:
    """Java's `Double.toString` (shortest round-trip digits; plain from 1e-3 to 1e7, else `d.dddE±n`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"  # jmx_exporter's writer spells infinities this way
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digits_tuple)).rstrip("0") or "0"
    exponent = int(exponent) + (len(digits_tuple) - len(digits))  # value = int(digits) * 10**exponent
    point = len(digits) - 1 + exponent  # value = d.ddd * 10**point
    if 1e-3 <= abs(value) < 1e7:
        if point >= 0:
            whole = digits[: point + 1].ljust(point + 1, "0")
            fraction = digits[point + 1 :] or "0"
            return f"{sign}{whole}.{fraction}"
        return f"{sign}0.{'0' * (-point - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point}"


@functools.lru_cache(maxsize=4096)
def safe_name(text: str) -> str:
    """jmx_exporter's toSafeName: anything outside [a-zA-Z0-9:_] becomes '_', runs of '_' collapse."""
    name = re.sub(r"_+", "_", re.sub(r"[^a-zA-Z0-9:_]", "_", text))
    return "_" + name if name[:1].isdigit() else name


def _strip_reserved(name: str) -> str:
    """client_java 1.x `sanitizeMetricName` drops a reserved suffix; COUNTER output then appends `_total`."""
    for suffix in ("_total", "_created", "_bucket", "_info"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _strimzi_series(s: Sample) -> tuple[str, str, dict[str, str], float] | None:
    """(family, type, labels, value) under the Strimzi kafka-metrics rules."""
    if s.type == "raft-metrics":
        base = safe_name("kafka_server_raftmetrics_" + s.attribute).lower()
        if s.attribute == "current-state":
            return base, "untyped", {"current_state": str(s.value)}, 1.0
        if s.attribute.endswith(("-total", "-max")):
            return _strip_reserved(base) + "_total", "counter", {}, float(s.value)
        return base, "gauge", {}, float(s.value)
    if s.type == "broker-metadata-metrics":
        return safe_name("kafka_server_brokermetadatametrics_" + s.attribute).lower(), "gauge", {}, float(s.value)
    domain = s.domain.split(".", 1)[1]
    if s.attribute == "Count" and s.name and s.name.endswith("PerSec"):
        name = safe_name(f"kafka_{domain}_{s.type}_{s.name[: -len('PerSec')]}").lower()
        return name + "_total", "counter", dict(s.tags), float(s.value)
    return safe_name(f"kafka_{domain}_{s.type}_{s.name}").lower(), "gauge", dict(s.tags), float(s.value)


def _default_series(s: Sample) -> tuple[str, str, dict[str, str], float] | None:
    """(family, type, labels, value) with no rules: domain_<type value>_<attribute>{other key properties}."""
    if isinstance(s.value, str):
        return None  # String attributes are not exported
    labels = ({"name": s.name} if s.name else {}) | dict(s.tags)
    name = _strip_reserved(safe_name(f"{s.domain.replace('.', '_')}_{s.type}_{s.attribute}"))
    return name, "untyped", labels, float(s.value)


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(samples: list[Sample], strimzi: bool) -> str:
    """One scrape as jmx_exporter 1.x writes it (Prometheus text format 0.0.4)."""
    series = _strimzi_series if strimzi else _default_series
    families: dict[str, tuple[str, str, list[tuple[dict[str, str], float]]]] = {}
    for sample in samples:
        mapped = series(sample)
        if mapped is None:
            continue
        name, kind, labels, value = mapped
        families.setdefault(name, (kind, sample.help, []))[2].append((labels, value))
    out = []
    for name in sorted(families):
        kind, help_text, points = families[name]
        out.append(f"# HELP {name} {_escape_help(help_text)}\n")
        out.append(f"# TYPE {name} {kind}\n")
        for labels, value in sorted(points, key=lambda p: sorted(p[0].items())):
            label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
            out.append(f"{name}{{{label_text}}} {java_double(value)}\n" if labels else f"{name} {java_double(value)}\n")
    return "".join(out)


def jolokia_lines(cluster_id: str, node: int, scraped_at_ms: int, samples: list[Sample]) -> list[str]:
    """One JSON line per numeric attribute (String attributes and NaN readings are left out)."""
    lines = []
    for s in samples:
        if isinstance(s.value, str) or (isinstance(s.value, float) and math.isnan(s.value)):
            continue
        lines.append(
            compact(
                {
                    "cluster_id": cluster_id,
                    "node_id": node,
                    "scraped_at_ms": scraped_at_ms,
                    "mbean": s.mbean,
                    "attribute": s.attribute,
                    "value": s.value,
                }
            )
        )
    return lines
