"""Rendering of the quorum surfaces (docs/kafka-surfaces.md §1.3, §3):

- the DescribeQuorum response as `DescribeQuorumResponseDataJsonConverter.write(data, version)` prints it (keys in
  schema order, fields outside the version's range left out), wrapped in the collector's envelope;
- `kafka-metadata-quorum describe --replication` / `--status` stdout, computed from that JSON the way the Admin
  client decodes it (absent or -1 timestamps are unknown), in the 3.3–3.8 or the 3.9+ layout.
"""

from __future__ import annotations

import json
from typing import Any

from quorumlake.contract.kafka import ZERO_UUID
from quorumlake.simulator.cluster import QuorumView, ReplicaView
from quorumlake.simulator.topology import CONTROLLER_PORT, ClusterTopology

METADATA_TOPIC = "__cluster_metadata"
ERROR_MESSAGES = {
    6: "For requests intended only for the leader, this error indicates that the broker is not the current leader. "
    "For requests intended for any replica, this error indicates that the broker is not a replica of the topic "
    "partition.",
}
LABEL_WIDTH = 24


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def describe_quorum_response(view: QuorumView, version: int, topo: ClusterTopology) -> dict[str, Any]:
    """The response object for `version` (0, 1 or 2)."""

    def replica(r: ReplicaView) -> dict[str, Any]:
        out: dict[str, Any] = {"replicaId": r.replica_id}
        if version >= 2:
            out["replicaDirectoryId"] = r.directory_id
        out["logEndOffset"] = r.log_end_offset
        if version >= 1:
            out["lastFetchTimestamp"] = r.last_fetch_ms
            out["lastCaughtUpTimestamp"] = r.last_caught_up_ms
        return out

    partition: dict[str, Any] = {"partitionIndex": 0, "errorCode": view.error_code}
    if version >= 2:
        partition["errorMessage"] = ERROR_MESSAGES.get(view.error_code, "")
    partition.update(
        {
            "leaderId": view.leader_id,
            "leaderEpoch": view.leader_epoch,
            "highWatermark": view.high_watermark,
            "currentVoters": [replica(v) for v in view.voters],
            "observers": [replica(o) for o in view.observers],
        }
    )
    response: dict[str, Any] = {"errorCode": 0}
    if version >= 2:
        response["errorMessage"] = ""
    response["topics"] = [{"topicName": METADATA_TOPIC, "partitions": [partition]}]
    if version >= 2:  # Nodes: the voters' endpoints only
        response["nodes"] = [
            {
                "nodeId": v.replica_id,
                "listeners": [
                    {"name": "CONTROLLER", "host": topo.controller_hosts[v.replica_id], "port": CONTROLLER_PORT}
                ],
            }
            for v in view.voters
        ]
    return response


def envelope_line(
    cluster_id: str,
    collected_at_ms: int,
    version: int,
    response: dict[str, Any],
    reported: dict[str, Any] | None = None,
) -> str:
    """A DescribeQuorum envelope as `quorumlake collect` writes it; `reported`: what the collector recorded of the
    node that answered (`kafka_version`, `finalized_features`)."""
    return compact(
        {
            "cluster_id": cluster_id,
            "collected_at_ms": collected_at_ms,
            "api_version": version,
            "response": response,
            **(reported or {}),
        }
    )


# --- what the Admin client sees -------------------------------------------------------------------------------------


def _decoded(response: dict[str, Any]) -> tuple[dict[str, Any], list[dict], list[dict], dict[int, list[str]]]:
    """(partition, voters, observers, endpoints by node) with the Admin client's defaults filled in."""
    partition = response["topics"][0]["partitions"][0]

    def state(r: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": r["replicaId"],
            "directory_id": r.get("replicaDirectoryId", ZERO_UUID),
            "leo": r["logEndOffset"],
            "last_fetch": r.get("lastFetchTimestamp", -1),
            "last_caught_up": r.get("lastCaughtUpTimestamp", -1),
        }

    endpoints = {
        n["nodeId"]: [f"{listener['name']}://{listener['host']}:{listener['port']}" for listener in n["listeners"]]
        for n in response.get("nodes", [])
    }
    voters = [state(v) for v in partition["currentVoters"]]
    return partition, voters, [state(o) for o in partition["observers"]], endpoints


def max_follower_lag(response: dict[str, Any]) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as `describe --status` computes them (§3.4): voters only, the leader
    included, the first minimum LEO in response order; -1 when the time is unknown."""
    partition, voters, _, _ = _decoded(response)
    leader = next(v for v in voters if v["id"] == partition["leaderId"])
    slowest = voters[0]
    for v in voters[1:]:
        if v["leo"] < slowest["leo"]:
            slowest = v
    lag = leader["leo"] - slowest["leo"]
    if slowest is leader:
        return lag, 0
    if leader["last_caught_up"] != -1 and slowest["last_caught_up"] != -1:
        return lag, leader["last_caught_up"] - slowest["last_caught_up"]
    return lag, -1


def replication_text(response: dict[str, Any], tool: tuple[int, int], human_readable: bool, now_ms: int) -> str:
    """stdout of `kafka-metadata-quorum describe --replication [--human-readable]`."""
    partition, voters, observers, _ = _decoded(response)
    with_directory = tool >= (3, 9)
    leader = next(v for v in voters if v["id"] == partition["leaderId"])
    rows = (
        [(leader, "Leader")]
        + [(v, "Follower") for v in voters if v is not leader]
        + [(o, "Observer") for o in observers]
    )

    def timestamp(ts: int) -> str:
        if ts == -1:
            return "-1"
        return f"{now_ms - ts} ms ago" if human_readable else str(ts)

    header = (
        ["NodeId"]
        + (["DirectoryId"] if with_directory else [])
        + ["LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    )
    table = [header]
    for r, status in rows:
        table.append(
            [str(r["id"])]
            + ([r["directory_id"]] if with_directory else [])
            + [
                str(r["leo"]),
                str(leader["leo"] - r["leo"]),
                timestamp(r["last_fetch"]),
                timestamp(r["last_caught_up"]),
                status,
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths)) + "\n" for row in table)


def status_text(response: dict[str, Any], tool: tuple[int, int], kafka_cluster_id: str) -> str:
    """stdout of `kafka-metadata-quorum describe --status`."""
    partition, voters, observers, endpoints = _decoded(response)
    lag, lag_ms = max_follower_lag(response)
    if tool >= (3, 9):

        def entry(r: dict[str, Any]) -> str:
            directory = "null" if r["directory_id"] == ZERO_UUID else f'"{r["directory_id"]}"'
            text = f'{{"id": {r["id"]}, "directoryId": {directory}'
            if endpoints.get(r["id"]):
                text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints[r["id"]]) + "]"
            return text + "}"

        voter_list = "[" + ", ".join(entry(v) for v in voters) + "]"
        observer_list = "[" + ", ".join(entry(o) for o in observers) + "]"
    else:
        voter_list = "[" + ",".join(str(v["id"]) for v in voters) + "]"
        observer_list = "[" + ",".join(str(o["id"]) for o in observers) + "]"
    lines = [
        ("ClusterId:", kafka_cluster_id),
        ("LeaderId:", partition["leaderId"]),
        ("LeaderEpoch:", partition["leaderEpoch"]),
        ("HighWatermark:", partition["highWatermark"]),
        ("MaxFollowerLag:", lag),
        ("MaxFollowerLagTimeMs:", lag_ms),
        ("CurrentVoters:", voter_list),
        ("CurrentObservers:", observer_list),
    ]
    text = "\n".join(f"{label.ljust(LABEL_WIDTH)}{value}" for label, value in lines) + "\n"
    if tool < (3, 5):  # the Scala tool's template ends in a newline and is then printed with println
        text += "\n"
    return text
