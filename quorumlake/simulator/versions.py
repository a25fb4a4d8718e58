"""What `quorumlake collect` records with each DescribeQuorum envelope about the node that answered (docs/contract.md
§1: `kafka_version`, `finalized_features`), for a simulated cluster: a release that answers DescribeQuorum with the
cluster's version (v2 is Kafka 3.9+, v1 3.3-3.8, v0 3.0-3.2), at that release's highest metadata.version, and
kraft.version 1 for the v2 clusters, whose voters carry directory ids (a dynamic quorum, KIP-853)."""

from __future__ import annotations

from typing import Any

from quorumlake.contract.kafka import METADATA_VERSIONS
from quorumlake.simulator.topology import ClusterTopology

# releases by DescribeQuorum version, taken in turn by the clusters that answer with it
RELEASES = {2: ("4.1", "3.9"), 1: ("3.7",), 0: ("3.2",)}
FIRST_FEATURE_LEVEL = 4  # 3.3-IV0: the first metadata.version that is a feature (KIP-778)


def release_of(topo: ClusterTopology) -> str:
    choices = RELEASES[topo.api_version]
    return choices[(topo.index // 2) % len(choices)]


def reported(topo: ClusterTopology) -> dict[str, Any]:
    """The envelope's `kafka_version` and `finalized_features` for this cluster."""
    release = release_of(topo)
    level = max(lv for lv, name in METADATA_VERSIONS.items() if name.split("-")[0] == release)
    features: dict[str, int] = {}
    if level >= FIRST_FEATURE_LEVEL:
        features["metadata.version"] = level
    if topo.api_version >= 2:
        features["kraft.version"] = 1  # Kafka lists a finalized feature only above level 0
    return {"kafka_version": release, "finalized_features": features}
