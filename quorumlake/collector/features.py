"""What the collector records of the node that answered DescribeQuorum: the Kafka release it runs and the cluster's
finalized feature levels (`metadata.version`, `kraft.version`, ...), written into the envelope as `kafka_version`
and `finalized_features` (docs/contract.md §1).

Both come from one more ApiVersions request on the same connection, at v3 or v4 (KIP-511/KIP-584; v4 also lists
features whose lowest supported level is 0, such as kraft.version): the response's finalized features, and the
node's supported metadata.version range, whose highest level names the release (each release supports up to its
own latest metadata.version; `contract.kafka.METADATA_VERSIONS`). Without features (a node before Kafka 3.3, or
ApiVersions below v3) a broker's release is inferred from its API versions as kafka-python does; a controller's
API set says too little, so its release stays unknown. Kafka lists a finalized feature only above level 0, so an
absent `kraft.version` means 0 (a static quorum).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from quorumlake.collector.wire import CLIENT_ID, CollectError, KafkaConnection
from quorumlake.contract.kafka import release_of_metadata_level

HIGHEST_VERSION = 4
PRODUCE = 0  # API key: only brokers handle it


@dataclass(frozen=True)
class NodeRelease:
    kafka_version: str | None  # e.g. "4.1"
    finalized_features: dict[str, int] | None  # None when the node did not say

    def envelope_fields(self) -> dict[str, Any]:
        """The envelope keys to add (none for what is unknown)."""
        out: dict[str, Any] = {}
        if self.kafka_version is not None:
            out["kafka_version"] = self.kafka_version
        if self.finalized_features is not None:
            out["finalized_features"] = dict(sorted(self.finalized_features.items()))
        return out


def release_from(response: Any, api_versions: dict[int, tuple[int, int]]) -> NodeRelease:
    """The release and finalized features in a decoded ApiVersions response (v3+; None for an earlier one), with the
    node's API versions as negotiated at connection time."""
    supported: dict[str, tuple[int, int]] = {}
    finalized = None
    if response is not None and response.error_code == 0:
        supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features or []}
        if (response.finalized_features_epoch or -1) >= 0 or response.finalized_features:
            finalized = {f.name: f.max_version_level for f in response.finalized_features or []}
    release = None
    if "metadata.version" in supported:
        release = release_of_metadata_level(supported["metadata.version"][1])
    if release is None and PRODUCE in api_versions:
        inferred = infer_broker_version_from_api_versions(api_versions)
        if inferred >= (3, 0):  # KRaft; below, what answered DescribeQuorum cannot be told apart
            release = ".".join(str(part) for part in inferred[:2])
    return NodeRelease(release, finalized)


def _own_version() -> str:
    """This package's version, as ApiVersions v3+ reports the client's software (Kafka accepts letters, digits, '.'
    and '-')."""
    try:
        return metadata.version("quorumlake")
    except metadata.PackageNotFoundError:
        return "0"


def describe_node(conn: KafkaConnection) -> NodeRelease:
    """The node's release and the cluster's finalized features; what cannot be learnt stays None (never an error:
    the quorum answer is what the poll is for)."""
    response = None
    _, high = conn.api_versions.get(ApiVersionsRequest.API_KEY, (0, 0))
    version = min(HIGHEST_VERSION, ApiVersionsRequest.max_version, high)
    if version >= 3:
        request = ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version=_own_version())
        try:
            response = conn.send(request, version, ApiVersionsResponse)
        except CollectError:
            response = None
    return release_from(response, conn.api_versions)
