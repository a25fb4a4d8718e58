"""Constants of Kafka's surfaces that every reader and writer of them shares: the silver parsers, the collector
(`quorumlake collect`) and the simulator."""

from __future__ import annotations

import re

# Kafka's `Uuid.ZERO_UUID` in its base64 text form: "no directory id" in DescribeQuorum v2+ and the quorum CLI.
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

# A decimal integer as Kafka's tools and exporters print one (optional minus sign, no plus, no spaces).
INTEGER = re.compile(r"^-?\d+$")
