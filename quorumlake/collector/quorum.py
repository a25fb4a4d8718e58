"""DescribeQuorum (API key 55) for the collector, and its rendering in the shape of Kafka's generated JSON converter
(`DescribeQuorumResponseDataJsonConverter.write(data, version)`, docs/kafka-surfaces.md §1.3): lowerCamelCase
keys in schema order, only the fields of the negotiated version, uuids as URL-safe base64 without padding.

Through a broker (`--bootstrap-server`) the request is forwarded to the active controller; through controllers
(`--bootstrap-controller`) DescribeCluster (endpoint type controller, KIP-919) names the active controller first.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)

from quorumlake.collector.features import NodeRelease, describe_node
from quorumlake.collector.settings import ClientSettings
from quorumlake.collector.wire import CollectError, KafkaConnection, error_name, first_reachable
from quorumlake.contract.kafka import ZERO_UUID

METADATA_TOPIC = "__cluster_metadata"
HIGHEST_VERSION = 2  # the versions this renderer knows (0-2, all Kafka releases so far)
ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2
NOT_LEADER_OR_FOLLOWER = 6


@dataclass(frozen=True)
class QuorumResult:
    api_version: int
    response: dict  # the JSON-converter rendering
    kafka_cluster_id: str | None
    answered_by: str
    node: NodeRelease | None = None  # the answering node's release and the cluster's finalized features


def kafka_uuid(value: Any) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding. A uuid field is never null on the
    wire; kafka-python decodes the all-zero uuid (Uuid.ZERO_UUID, "no directory id") to None."""
    if value is None:
        return ZERO_UUID
    if isinstance(value, uuid.UUID):
        raw = value.bytes
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, str) and len(value) == 22:
        return value
    else:
        raw = uuid.UUID(str(value)).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _replica(r: Any, version: int) -> dict:
    out: dict[str, Any] = {"replicaId": r.replica_id}
    if version >= 2:
        out["replicaDirectoryId"] = kafka_uuid(r.replica_directory_id)
    out["logEndOffset"] = r.log_end_offset
    if version >= 1:
        out["lastFetchTimestamp"] = r.last_fetch_timestamp
        out["lastCaughtUpTimestamp"] = r.last_caught_up_timestamp
    return out


def _partition(p: Any, version: int) -> dict:
    out: dict[str, Any] = {"partitionIndex": p.partition_index, "errorCode": p.error_code}
    if version >= 2:
        out["errorMessage"] = p.error_message
    out.update(
        {
            "leaderId": p.leader_id,
            "leaderEpoch": p.leader_epoch,
            "highWatermark": p.high_watermark,
            "currentVoters": [_replica(r, version) for r in p.current_voters or []],
            "observers": [_replica(r, version) for r in p.observers or []],
        }
    )
    return out


def render_response(response: Any, version: int) -> dict:
    """A decoded DescribeQuorumResponse as Kafka's JSON converter writes it for `version` (0-2)."""
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"DescribeQuorum v{version} is not rendered by this collector")
    out: dict[str, Any] = {"errorCode": response.error_code}
    if version >= 2:
        out["errorMessage"] = response.error_message
    out["topics"] = [
        {"topicName": t.topic_name, "partitions": [_partition(p, version) for p in t.partitions or []]}
        for t in response.topics or []
    ]
    if version >= 2:
        out["nodes"] = [
            {
                "nodeId": n.node_id,
                "listeners": [{"name": li.name, "host": li.host, "port": li.port} for li in n.listeners or []],
            }
            for n in response.nodes or []
        ]
    return out


def describe_quorum(conn: KafkaConnection) -> tuple[int, Any]:
    """(negotiated version, decoded response) of one DescribeQuorum for __cluster_metadata-0."""
    version = conn.version_for(DescribeQuorumRequest, HIGHEST_VERSION)
    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        topics=[topic(topic_name=METADATA_TOPIC, partitions=[topic.PartitionData(partition_index=0)])]
    )
    return version, conn.send(request, version, DescribeQuorumResponse)


def describe_cluster(conn: KafkaConnection, endpoint_type: int) -> Any:
    if endpoint_type == ENDPOINT_CONTROLLERS:
        version = conn.version_for(DescribeClusterRequest, 1)
        if version < 1:
            raise CollectError(f"{conn.address}: DescribeCluster for controllers needs Kafka 3.7+ (KIP-919)")
        request = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=endpoint_type)
    else:
        version = conn.version_for(DescribeClusterRequest, 1)
        request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    response = conn.send(request, version, DescribeClusterResponse)
    if response.error_code != 0:
        raise CollectError(
            f"{conn.address}: DescribeCluster failed: {error_name(response.error_code)}"
            f"{': ' + response.error_message if response.error_message else ''}"
        )
    return response


def _partition_error(response: Any) -> int:
    try:
        return response.topics[0].partitions[0].error_code
    except (IndexError, TypeError, AttributeError):
        return 0


def quorum_via_brokers(brokers: Sequence[str], settings: ClientSettings, timeout_s: float) -> QuorumResult:
    def call(conn: KafkaConnection) -> QuorumResult:
        cluster_id = None
        if conn.supports(DescribeClusterRequest):
            try:
                cluster_id = describe_cluster(conn, ENDPOINT_BROKERS).cluster_id
            except CollectError:
                cluster_id = None  # the quorum answer is what matters; the id can come from --cluster-id
        version, response = describe_quorum(conn)
        return QuorumResult(version, render_response(response, version), cluster_id, conn.address, describe_node(conn))

    return first_reachable(brokers, settings, timeout_s, call)


def quorum_via_controllers(controllers: Sequence[str], settings: ClientSettings, timeout_s: float) -> QuorumResult:
    """Ask a bootstrap controller which controller is active, then ask that one (the only one that answers)."""
    cluster = first_reachable(
        controllers, settings, timeout_s, lambda conn: describe_cluster(conn, ENDPOINT_CONTROLLERS)
    )
    known = {b.broker_id: f"{b.host}:{b.port}" for b in cluster.brokers or []}
    order = [known[cluster.controller_id]] if cluster.controller_id in known else []
    order += [a for a in list(known.values()) + list(controllers) if a not in order]
    last: QuorumResult | None = None

    def call(conn: KafkaConnection) -> QuorumResult:
        version, response = describe_quorum(conn)
        node = describe_node(conn)
        return QuorumResult(version, render_response(response, version), cluster.cluster_id, conn.address, node)

    for address in order:
        try:
            result = first_reachable([address], settings, timeout_s, call)
        except CollectError:
            continue
        if result.response["errorCode"] == 0 and _partition_error_json(result.response) == NOT_LEADER_OR_FOLLOWER:
            last = result
            continue
        return result
    if last is not None:
        return last  # every controller said it is not the leader: record that answer as it is
    return first_reachable(order, settings, timeout_s, call)


def _partition_error_json(response: dict) -> int:
    try:
        return response["topics"][0]["partitions"][0]["errorCode"]
    except (IndexError, KeyError, TypeError):
        return 0
