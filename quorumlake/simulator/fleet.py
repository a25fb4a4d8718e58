"""Generate a deterministic landing zone for a simulated Kafka fleet (docs/contract.md §1): DescribeQuorum JSON lines
and CLI captures, Prometheus scrapes or Jolokia lines, partition JSON lines and `kafka-topics --describe` captures.

Clusters are simulated one after the other and written as they go, so memory does not grow with the fleet or the
time range. The same FleetSpec always produces byte-identical files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from quorumlake.simulator.cluster import ClusterSim
from quorumlake.simulator.metrics import jolokia_lines, node_samples, prometheus_text
from quorumlake.simulator.partitions import partition_line, topics_text
from quorumlake.simulator.plan import PlannedOutage
from quorumlake.simulator.quorum import describe_quorum_response, envelope_line, replication_text, status_text
from quorumlake.simulator.timeline import SCENARIOS, Timeline, build_timeline
from quorumlake.simulator.topology import EXPORTER_CYCLE, ClusterTopology, build_topology
from quorumlake.simulator.versions import reported
from quorumlake.simulator.writer import LandingWriter

CAPTURE_EVERY = 4  # CLI and kafka-topics captures: every 4th snapshot, plus the snapshots around each fault edge


@dataclass(frozen=True)
class FleetSpec:
    clusters: int = 2
    brokers: int = 3
    controllers: int = 3
    topics: int = 3
    partitions: int = 3
    hours: float = 1.0
    interval_s: int = 30
    scenarios: tuple[str, ...] = ("healthy",)
    seed: int = 42
    start_ms: int = 1_730_000_000_000  # fixed default start so output is deterministic
    # Partition states and metric scrapes every Nth snapshot (a real fleet polls the quorum more often than it
    # scrapes); fault edges are always captured.
    partitions_every: int = 1
    scrape_every: int = 1
    # kafka-metadata-quorum and kafka-topics captures every Nth snapshot and around fault edges; 0: none at all.
    cli_every: int = CAPTURE_EVERY
    # One metrics format for every cluster (strimzi, jmx or jolokia) instead of one per cluster in turn.
    exporter: str | None = None
    # Outages at chosen times on top of the scenarios (`plan.PlannedOutage`, by cluster index).
    plan: tuple[PlannedOutage, ...] = ()
    # The scenarios' faults occupy the last third of the run and are still going on at its end (else the middle
    # third, followed by the recovery).
    fault_at_end: bool = False

    @property
    def steps(self) -> int:
        """Snapshots per cluster."""
        return max(1, int(self.hours * 3600 // self.interval_s))

    def ending_at(self, end_ms: int) -> FleetSpec:
        """The same fleet, simulated over the time that ends at `end_ms` (epoch ms): its last snapshot is one
        interval before it. The same spec and end always give the same files."""
        return dataclasses.replace(self, start_ms=end_ms - self.steps * self.interval_s * 1000)

    def validate(self) -> None:
        """Raise ValueError naming the first unusable setting."""
        for name in (
            "clusters",
            "brokers",
            "controllers",
            "partitions",
            "interval_s",
            "partitions_every",
            "scrape_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.topics < 0:
            raise ValueError(f"topics must not be negative, got {self.topics}")
        if self.cli_every < 0:
            raise ValueError(f"cli_every must not be negative, got {self.cli_every}")
        if self.exporter is not None and self.exporter not in EXPORTER_CYCLE:
            raise ValueError(f"unknown exporter {self.exporter!r}; choose from {', '.join(EXPORTER_CYCLE)}")
        for outage in self.plan:
            outage.validate(self.clusters)
        if not self.hours > 0:
            raise ValueError(f"hours must be positive, got {self.hours}")
        if not self.scenarios:
            raise ValueError("at least one scenario is needed")
        unknown = [s for s in self.scenarios if s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}")


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    scenario: str
    api_version: int
    metrics_format: str  # strimzi / jmx (Prometheus text) or jolokia (JSON lines)
    gzip: bool
    fault_start_ms: int  # the fault occupies [fault_start_ms, fault_end_ms)
    fault_end_ms: int
    events: tuple[str, ...]


@dataclass(frozen=True)
class GenerateSummary:
    out: Path
    steps: int
    clusters: tuple[ClusterInfo, ...]
    files: dict[str, int]  # landing format -> files written
    records: dict[str, int]  # landing format -> records written

    @property
    def total_files(self) -> int:
        return sum(self.files.values())

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


def generate(out: Path, spec: FleetSpec, progress: Callable[[int, int], None] | None = None) -> GenerateSummary:
    """Write the fleet's landing zone under `out`; `progress(done, total)` is called after each cluster snapshot."""
    spec.validate()
    out = Path(out)
    writer = LandingWriter(out)
    total, done = spec.clusters * spec.steps, 0
    infos = []
    for index in range(spec.clusters):
        scenario = spec.scenarios[index % len(spec.scenarios)]
        topo = build_topology(spec.seed, index, scenario, spec.brokers, spec.controllers, spec.topics, spec.partitions)
        if spec.exporter is not None:
            topo = dataclasses.replace(topo, exporter=spec.exporter)
        plan = [o for o in spec.plan if o.cluster == index]
        tl = build_timeline(topo, spec.seed, spec.start_ms, spec.interval_s, spec.steps, plan, spec.fault_at_end)
        sim = ClusterSim(topo, tl, spec.seed)
        try:
            for step in range(spec.steps):
                _write_step(writer, topo, tl, sim, step, spec)
                done += 1
                if progress is not None:
                    progress(done, total)
        finally:
            writer.close_all()
        infos.append(
            ClusterInfo(
                topo.cluster_id,
                scenario,
                topo.api_version,
                topo.exporter,
                topo.gzip,
                tl.fault_start_ms,
                tl.fault_end_ms,
                tuple(tl.events),
            )
        )
    return GenerateSummary(out, spec.steps, tuple(infos), dict(writer.files), dict(writer.records))


def _date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def _write_step(
    writer: LandingWriter, topo: ClusterTopology, tl: Timeline, sim: ClusterSim, step: int, spec: FleetSpec
) -> None:
    cid, gz = topo.cluster_id, topo.gzip
    edge = step in tl.key_steps or step - 1 in tl.key_steps
    capture = spec.cli_every > 0 and (step % spec.cli_every == 0 or edge)

    answered = None
    for collected_at in sim.quorum_times(step):
        view = sim.describe_quorum(collected_at)
        response = describe_quorum_response(view, topo.api_version, topo)
        writer.append_line(
            "quorum",
            f"quorum/date={_date(collected_at)}/{cid}.jsonl",
            envelope_line(cid, collected_at, topo.api_version, response, reported(topo)),
            "describe_quorum_json",
            gz,
        )
        if view.error_code == 0:
            answered = (collected_at, response)
    if capture and answered is not None:  # the CLI exits with an error instead when the request fails
        collected_at, response = answered
        human = topo.tool_version >= (3, 6) and sim.noise.int(0, 1, "human-readable", step) == 1
        writer.write_file(
            f"quorum/cluster={cid}/{collected_at}.replication.txt",
            replication_text(response, topo.tool_version, human, collected_at),
            "quorum_cli_replication",
            gz,
        )
        writer.write_file(
            f"quorum/cluster={cid}/{collected_at}.status.txt",
            status_text(response, topo.tool_version, topo.kafka_cluster_id),
            "quorum_cli_status",
            gz,
        )

    if step % spec.partitions_every == 0 or edge:
        _write_partitions(writer, topo, sim, step, capture)
    if step % spec.scrape_every == 0 or edge:
        _write_scrapes(writer, topo, sim, step)


def _write_partitions(writer: LandingWriter, topo: ClusterTopology, sim: ClusterSim, step: int, capture: bool) -> None:
    cid, gz = topo.cluster_id, topo.gzip
    collected_at = sim.partitions_time(step)
    states = sim.partitions(collected_at)
    sim.observe_partitions(collected_at, states)
    for p in states:
        writer.append_line(
            "partitions",
            f"partitions/date={_date(collected_at)}/{cid}.jsonl",
            partition_line(cid, collected_at, p),
            "partition_json",
            gz,
        )
    if capture:
        writer.write_file(
            f"partitions/cluster={cid}/{collected_at}.topics.txt", topics_text(topo, states), "kafka_topics_cli", gz
        )


def _write_scrapes(writer: LandingWriter, topo: ClusterTopology, sim: ClusterSim, step: int) -> None:
    cid, gz = topo.cluster_id, topo.gzip
    for node in topo.nodes:
        scraped_at = sim.scrape_time(node, step)
        if not sim.reachable(node, scraped_at):
            continue
        samples = node_samples(sim, node, scraped_at)
        if topo.exporter == "jolokia":
            for line in jolokia_lines(cid, node, scraped_at, samples):
                writer.append_line("jolokia", f"metrics/date={_date(scraped_at)}/{cid}.jsonl", line, "jmx_json", gz)
        else:
            writer.write_file(
                f"metrics/cluster={cid}/node={node}/{scraped_at}.prom",
                prometheus_text(samples, strimzi=topo.exporter == "strimzi"),
                "prometheus_text",
                gz,
            )
