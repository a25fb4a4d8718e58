"""Constants of Kafka's surfaces that every reader and writer of them shares: the silver parsers, the collector
(`quorumlake collect`) and the simulator."""

from __future__ import annotations

import re

# Kafka's `Uuid.ZERO_UUID` in its base64 text form: "no directory id" in DescribeQuorum v2+ and the quorum CLI.
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

# A decimal integer as Kafka's tools and exporters print one (optional minus sign, no plus, no spaces).
INTEGER = re.compile(r"^-?\d+$")

# metadata.version feature levels and their names, as Kafka's `MetadataVersion` enum (server-common) defines them up
# to Kafka 4.3 (4.4-IV0 is unstable there: offered only with `unstable.feature.versions.enable`). The collector
# records a cluster's finalized level; a node's highest supported level names the release it runs.
METADATA_VERSIONS: dict[int, str] = {
    1: "3.0-IV1",
    2: "3.1-IV0",
    3: "3.2-IV0",
    4: "3.3-IV0",
    5: "3.3-IV1",
    6: "3.3-IV2",
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
    22: "4.0-IV0",
    23: "4.0-IV1",
    24: "4.0-IV2",
    25: "4.0-IV3",
    26: "4.1-IV0",
    27: "4.1-IV1",
    28: "4.2-IV0",
    29: "4.2-IV1",
    30: "4.3-IV0",
    31: "4.4-IV0",
}


def metadata_version_name(level: int) -> str:
    """`4.1-IV1` for level 27; `level N` for a level this table does not know (a newer Kafka)."""
    return METADATA_VERSIONS.get(level, f"level {level}")


def release_of_metadata_level(level: int) -> str | None:
    """The Kafka release (`4.1`) whose metadata.version this level is; None for an unknown level."""
    name = METADATA_VERSIONS.get(level)
    return None if name is None else name.split("-")[0]
