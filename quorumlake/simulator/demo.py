"""The demo fleet: what `quorumlake demo` simulates, and what `quorumlake bench` times a newcomer's run over.

`quorumlake demo` simulates the hour that ends now (`FleetSpec.ending_at`), its faults still going on at the end, so
the fleet overview reads as the scenarios say: `healthy` ok, `lagging-voter` warn (a known lag over the SLO),
`broker-failure` critical (partitions under min ISR, some offline), `metadata-divergence` warn. The fourth cluster
answers DescribeQuorum v0 (Kafka 3.2: no timestamps), so its lag time reads n/a, neither good nor bad, and it is ok.
"""

from __future__ import annotations

from quorumlake.simulator.fleet import FleetSpec

# by cluster index: 0 and 2 answer DescribeQuorum v2, 1 v1, 3 v0 (topology.API_VERSION_CYCLE)
DEMO_SCENARIOS = ("metadata-divergence", "lagging-voter", "broker-failure", "healthy")

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
    fault_at_end=True,
)

# what the demo's fleet overview reads right after `quorumlake demo`, by scenario
DEMO_STATUS = {"metadata-divergence": "warn", "lagging-voter": "warn", "broker-failure": "critical", "healthy": "ok"}
