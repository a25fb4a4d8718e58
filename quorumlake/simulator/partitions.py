"""Rendering of partition replication state: the collector's JSON lines (docs/contract.md §1) and
`kafka-topics --describe` stdout (docs/kafka-surfaces.md §5.2: a header per topic, TAB-led partition lines,
`Leader: none`, Elr/LastKnownElr from 3.8 on)."""

from __future__ import annotations

from quorumlake.simulator.cluster import PartitionState
from quorumlake.simulator.quorum import compact
from quorumlake.simulator.topology import ClusterTopology


def partition_line(cluster_id: str, collected_at_ms: int, p: PartitionState) -> str:
    return compact(
        {
            "cluster_id": cluster_id,
            "collected_at_ms": collected_at_ms,
            "topic": p.topic,
            "partition": p.partition,
            "leader": p.leader,
            "replicas": list(p.replicas),
            "isr": list(p.isr),
            "min_isr": p.min_isr,
        }
    )


def topics_text(topo: ClusterTopology, states: list[PartitionState]) -> str:
    """stdout of `kafka-topics --describe --exclude-internal` (topics sorted by name)."""
    with_elr = topo.tool_version >= (3, 8)
    by_topic: dict[str, list[PartitionState]] = {}
    for p in states:
        by_topic.setdefault(p.topic, []).append(p)
    lines = []
    for topic in sorted(topo.topics, key=lambda t: t.name):
        partitions = sorted(by_topic.get(topic.name, []), key=lambda p: p.partition)
        configs = f"min.insync.replicas={topic.min_isr}" if topic.min_isr_configured else ""
        lines.append(
            f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(partitions)}"
            f"\tReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
        )
        for p in partitions:
            leader = "none" if p.leader == -1 else str(p.leader)
            line = (
                f"\tTopic: {p.topic}\tPartition: {p.partition}\tLeader: {leader}"
                f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
            if with_elr:  # a KRaft broker always fills both lists; empty while ELR is not in use
                line += "\tElr: \tLastKnownElr: "
            lines.append(line)
    return "".join(line + "\n" for line in lines)
