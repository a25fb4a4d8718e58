"""Planned outages: faults at times the user chooses, on top of a cluster's scenario, so that a long simulated history
holds known bad stretches (what an SLO's budget and burn rates are checked against).

A `PlannedOutage` names a cluster of the fleet (its 0-based index), a kind, the time range [start_ms, end_ms) and
optionally the nodes:
- `voter-cut-off`: follower voters (default: the first follower of the initial leader) neither fetch from the leader
  nor answer scrapes; the leader's view of them freezes, so MaxFollowerLagTimeMs grows past any SLO (quorum_lag);
- `brokers-down`: brokers (default: the second and third) die; after `broker.session.timeout.ms` they are fenced and
  leave every ISR, so partitions fall to or under their min ISR or go offline (write_availability), and they answer
  no scrape; they restart at end_ms;
- `applier-frozen`: brokers (default: the last) stop applying metadata records while the quorum keeps committing, so
  their offset diverges from the active controller's (metadata_freshness).

Each fault starts and ends exactly at its times, as the scenarios' faults do; Kafka's own delays follow (a dead
broker leaves the ISRs 9 s later and rejoins 25 s after its restart, see `timeline.Outage`), so a plan whose edges lie
at least that far from every snapshot (e.g. half an interval before one) sees exactly the snapshots within it
affected. The snapshots around both edges are always captured (partition states, scrapes, CLI captures).

`quorumlake generate --plan FILE` reads a plan from a JSON list of objects with these fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = ("voter-cut-off", "brokers-down", "applier-frozen")


@dataclass(frozen=True)
class PlannedOutage:
    cluster: int  # 0-based index in the fleet
    kind: str
    start_ms: int
    end_ms: int
    nodes: tuple[int, ...] = ()  # empty: the kind's default nodes

    def validate(self, clusters: int) -> None:
        """Raise ValueError naming what is wrong."""
        if self.kind not in KINDS:
            raise ValueError(f"unknown planned outage kind {self.kind!r}; choose from {', '.join(KINDS)}")
        if not 0 <= self.cluster < clusters:
            raise ValueError(f"planned outage for cluster {self.cluster}: the fleet has clusters 0-{clusters - 1}")
        if not self.end_ms > self.start_ms:
            raise ValueError(f"planned {self.kind} must end after it starts ({self.start_ms} >= {self.end_ms})")


def load_plan(path: str | Path) -> tuple[PlannedOutage, ...]:
    """A plan from a JSON file: a list of {"cluster", "kind", "start_ms", "end_ms", "nodes"?}; ValueError when it is
    not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"plan {path} is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ValueError(f"plan {path} must be a JSON list of outages")
    return tuple(_outage(item, f"plan {path}, outage {i + 1}") for i, item in enumerate(data))


def _outage(item: Any, where: str) -> PlannedOutage:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: not an object")
    unknown = sorted(set(item) - {"cluster", "kind", "start_ms", "end_ms", "nodes"})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name in ("cluster", "start_ms", "end_ms"):
        if not isinstance(item.get(name), int) or isinstance(item.get(name), bool):
            raise ValueError(f"{where}: {name} must be an integer")
    if not isinstance(item.get("kind"), str):
        raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}")
    nodes = item.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in nodes):
        raise ValueError(f"{where}: nodes must be a list of node ids")
    return PlannedOutage(item["cluster"], item["kind"], item["start_ms"], item["end_ms"], tuple(nodes))
