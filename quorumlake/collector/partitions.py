"""Partition states for the collector: one contract record per partition (`partitions/*.jsonl`,
docs/contract.md §1).

Leader, replicas, ISR and Eligible Leader Replicas come from DescribeTopicPartitions (KIP-966, Kafka 3.8+) when the
broker supports it, else from Metadata. `min_isr` is the topic's effective `min.insync.replicas` from
DescribeConfigs on the topic (the topic override, else the broker/cluster value Kafka resolves for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from quorumlake.collector.settings import ClientSettings
from quorumlake.collector.wire import CollectError, KafkaConnection, error_name, first_reachable

TOPIC_RESOURCE = 2
MIN_ISR = "min.insync.replicas"


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None


@dataclass(frozen=True)
class PartitionsResult:
    partitions: list[PartitionState]
    min_isr: dict[str, int]
    errors: list[str]  # topics that could not be described (recorded, not fatal)


def _topic_names(conn: KafkaConnection) -> list[str]:
    version = conn.version_for(MetadataRequest, 12)
    response = conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), version, MetadataResponse)
    return sorted(t.name for t in response.topics if t.error_code == 0 and t.name)


def _via_metadata(conn: KafkaConnection) -> tuple[list[PartitionState], list[str]]:
    version = conn.version_for(MetadataRequest, 12)
    response = conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), version, MetadataResponse)
    states, errors = [], []
    for t in response.topics:
        if t.error_code != 0:
            errors.append(f"topic {t.name}: {error_name(t.error_code)}")
            continue
        for p in t.partitions:
            states.append(
                PartitionState(t.name, p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes), None)
            )
    return states, errors


def _via_describe_topic_partitions(conn: KafkaConnection) -> tuple[list[PartitionState], list[str]]:
    names = _topic_names(conn)
    states: list[PartitionState] = []
    errors: list[str] = []
    if not names:
        return states, errors
    version = conn.version_for(DescribeTopicPartitionsRequest)
    topic_request = DescribeTopicPartitionsRequest.TopicRequest
    cursor = None
    for _ in range(10_000):  # pages of up to 2000 partitions; bounded
        request = DescribeTopicPartitionsRequest(
            topics=[topic_request(name=n) for n in names], response_partition_limit=2000, cursor=cursor
        )
        response = conn.send(request, version, DescribeTopicPartitionsResponse)
        for t in response.topics:
            if t.error_code != 0:
                errors.append(f"topic {t.name}: {error_name(t.error_code)}")
                continue
            for p in t.partitions:
                elr = p.eligible_leader_replicas
                states.append(
                    PartitionState(
                        t.name,
                        p.partition_index,
                        p.leader_id,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                        None if elr is None else list(elr),
                    )
                )
        if response.next_cursor is None:
            break
        cursor = DescribeTopicPartitionsRequest.Cursor(
            topic_name=response.next_cursor.topic_name, partition_index=response.next_cursor.partition_index
        )
    return states, errors


def _min_isr(conn: KafkaConnection, topics: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    if not topics:
        return {}, []
    version = conn.version_for(DescribeConfigsRequest, 4)
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            resource(resource_type=TOPIC_RESOURCE, resource_name=t, configuration_keys=[MIN_ISR]) for t in topics
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    response = conn.send(request, version, DescribeConfigsResponse)
    values, errors = {}, []
    for r in response.results:
        if r.error_code != 0:
            errors.append(f"topic {r.resource_name}: DescribeConfigs {error_name(r.error_code)}")
            continue
        for c in r.configs:
            if c.name == MIN_ISR and c.value is not None:
                try:
                    values[r.resource_name] = int(c.value)
                except ValueError:
                    errors.append(f"topic {r.resource_name}: {MIN_ISR} {c.value!r} is not an integer")
    return values, errors


def partition_states(brokers: Sequence[str], settings: ClientSettings, timeout_s: float) -> PartitionsResult:
    """Every partition of every topic (internal ones too, as `kafka-topics --describe` lists them)."""

    def call(conn: KafkaConnection) -> PartitionsResult:
        if conn.supports(DescribeTopicPartitionsRequest):
            states, errors = _via_describe_topic_partitions(conn)
        else:
            states, errors = _via_metadata(conn)
        min_isr, config_errors = _min_isr(conn, sorted({s.topic for s in states}))
        return PartitionsResult(states, min_isr, errors + config_errors)

    return first_reachable(brokers, settings, timeout_s, call)


def partition_record(cluster_id: str, collected_at_ms: int, state: PartitionState, min_isr: int) -> dict[str, Any]:
    """One `partitions/*.jsonl` line (docs/contract.md §1)."""
    record: dict[str, Any] = {
        "cluster_id": cluster_id,
        "collected_at_ms": collected_at_ms,
        "topic": state.topic,
        "partition": state.partition,
        "leader": state.leader,
        "replicas": state.replicas,
        "isr": state.isr,
        "min_isr": min_isr,
    }
    if state.elr is not None:
        record["elr"] = state.elr
    return record


__all__ = ["CollectError", "PartitionState", "PartitionsResult", "partition_record", "partition_states"]
