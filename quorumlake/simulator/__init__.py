"""A deterministic Kafka fleet simulator that writes a quorumlake landing zone (`quorumlake generate`).

    from quorumlake.simulator import FleetSpec, generate
    summary = generate(Path("lakehouse/landing"), FleetSpec(clusters=8, scenarios=tuple(SCENARIOS)))

Modules: `topology` (ids, topics, per-cluster format choices), `timeline` (scenarios as timed events), `plan`
(outages at chosen times), `versions` (what the collector records of each cluster's release),
`metadata_log` and `cluster` (the cluster's state at any instant), `quorum`, `partitions` and `metrics` (the
landing formats), `writer` (streaming, gzip), `fleet` (the loop).
"""

from quorumlake.simulator.fleet import ClusterInfo, FleetSpec, GenerateSummary, generate
from quorumlake.simulator.plan import PlannedOutage, load_plan
from quorumlake.simulator.timeline import SCENARIOS

__all__ = ["SCENARIOS", "ClusterInfo", "FleetSpec", "GenerateSummary", "PlannedOutage", "generate", "load_plan"]
