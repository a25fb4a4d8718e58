"""The demo fleet: what `quorumlake demo` simulates, and what `quorumlake bench` times a newcomer's run over."""

from __future__ import annotations

from quorumlake.simulator.fleet import FleetSpec

DEMO_SCENARIOS = ("healthy", "lagging-voter", "broker-failure", "metadata-divergence")

# 4 clusters for an hour at one snapshot a minute: 1,302 files, 13 MB.
DEMO_FLEET = FleetSpec(
    clusters=len(DEMO_SCENARIOS),
    brokers=3,
    controllers=3,
    topics=3,
    partitions=3,
    hours=1.0,
    interval_s=60,
    scenarios=DEMO_SCENARIOS,
    seed=42,
)
