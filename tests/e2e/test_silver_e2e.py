"""Landing zone -> bronze -> silver through the CLI path: every bronze record is accounted for (in a silver table,
or in silver.quarantine with its rules and reason), hand-checked silver values, idempotent re-runs, and a late
`--status` capture that completes the snapshot of an earlier `--replication` capture."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from quorumlake.contract.tables import BRONZE_SOURCES, by_name
from quorumlake.pipelines.app import cli
from tests import read_back

SILVER = ("quorum_snapshots", "replica_states", "partition_states", "node_metrics", "quarantine")
DATA = Path(__file__).parents[1] / "data" / "landing"

# Records bronze can read but silver cannot use, or whose rows fail a data-quality rule.
V1 = json.loads((DATA / "quorum" / "date=2024-10-27" / "describe-quorum.jsonl").read_text().splitlines()[1])
EXTRA_QUORUM = [
    # response_shape: no topics and no error
    {
        "cluster_id": "x-shape",
        "collected_at_ms": 1730000000600,
        "api_version": 1,
        "response": {"errorCode": 0, "topics": []},
    },
    # leader_among_voters (snapshot) and one_leader_per_snapshot (each replica row): the leader is not a voter
    {
        **V1,
        "cluster_id": "x-rule",
        "response": {
            **V1["response"],
            "topics": [
                {
                    **V1["response"]["topics"][0],
                    "partitions": [{**V1["response"]["topics"][0]["partitions"][0], "leaderId": 4000}],
                }
            ],
        },
    },
    # a top-level error response: kept, with its code and message
    {
        "cluster_id": "x-error",
        "collected_at_ms": 1730000000600,
        "api_version": 2,
        "response": {"errorCode": 31, "errorMessage": "Cluster authorization failed.", "topics": [], "nodes": []},
    },
]
BROKEN_REPLICATION = (
    "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t\n"
    "3002\t18542\t0\t\n"  # a row with 3 of the 6 cells
)
SCRAPE_WITH_A_BAD_LINE = (
    "# TYPE kafka_server_raftmetrics_current_epoch gauge\n"
    "kafka_server_raftmetrics_current_epoch 7.0\n"
    "kafka_server_raftmetrics_high_watermark{broken 1.0\n"
    "kafka_server_raftmetrics_current_leader NaN\n"
)
EXTRA_PARTITIONS = [
    {
        "cluster_id": "x-part",
        "collected_at_ms": 1730000000000,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "min_isr": 2,
    },
    # isr_subset_of_replicas
    {
        "cluster_id": "x-part",
        "collected_at_ms": 1730000000000,
        "topic": "t",
        "partition": 1,
        "leader": 1,
        "replicas": [1, 2, 3],
        "isr": [1, 4],
        "min_isr": 2,
    },
]
BROKEN_TOPICS = "Topic: t\tPartitionCount: 1\n\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,x\tIsr: 1\n"


def run(zone: Path, warehouse: Path, capsys) -> None:
    assert cli.main(["run", "--landing", str(zone), "--warehouse", str(warehouse), "--layers", "bronze,silver"]) == 0
    capsys.readouterr()


def table(spark, warehouse: Path, schema: str, name: str):
    return spark.read.format("delta").load(str(warehouse / schema / name))


def contents(warehouse: Path) -> dict[str, list]:
    """Every row of every silver table (and bronze), in a stable order."""
    return read_back.contents(warehouse, [*(by_name(f"silver.{name}") for name in SILVER), *BRONZE_SOURCES.values()])


@pytest.fixture
def zone(landing):
    """tests/data/landing + tests/data/landing_bad, plus records that only silver rejects and a duplicate."""
    root = landing("landing", "landing_bad")
    extra = root / "quorum" / "extra" / "silver-rejects.jsonl"
    extra.parent.mkdir()
    lines = [json.dumps(record) for record in EXTRA_QUORUM]
    # an exact copy of the kraft-v0 record in another file: a duplicate of a snapshot key
    lines.append((DATA / "quorum" / "date=2024-10-27" / "describe-quorum.jsonl").read_text().splitlines()[0])
    extra.write_text("\n".join(lines) + "\n")
    (root / "quorum" / "cluster=x-cli").mkdir()
    (root / "quorum" / "cluster=x-cli" / "1730000000600.replication.txt").write_text(BROKEN_REPLICATION)
    (root / "metrics" / "cluster=x-prom" / "node=7").mkdir(parents=True)
    (root / "metrics" / "cluster=x-prom" / "node=7" / "1730000000000.prom").write_text(SCRAPE_WITH_A_BAD_LINE)
    (root / "partitions" / "extra").mkdir()
    (root / "partitions" / "extra" / "rules.jsonl").write_text("\n".join(json.dumps(p) for p in EXTRA_PARTITIONS))
    (root / "partitions" / "cluster=x-topics").mkdir()
    (root / "partitions" / "cluster=x-topics" / "1730000000000.topics.txt").write_text(BROKEN_TOPICS)
    return root


def test_every_bronze_record_is_in_silver_or_quarantined_and_reruns_change_nothing(spark, zone, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    run(zone, warehouse, capsys)

    def silver(name):
        return table(spark, warehouse, "silver", name)

    bronze = {}
    for name in ("quorum_raw", "metrics_raw", "partitions_raw"):
        for r in table(spark, warehouse, "bronze", name).collect():
            bronze[r["record_id"]] = (name, r)
    assert len(bronze) == 23 + 14 + 17 + 4 + 1 + 1 + 2 + 1

    # Referenced by a silver row.
    in_silver = {rid for r in silver("quorum_snapshots").select("record_ids").collect() for rid in r["record_ids"]}
    for name in ("replica_states", "partition_states", "node_metrics"):
        in_silver |= {r["record_id"] for r in silver(name).select("record_id").collect()}
    # In quarantine, with the rules and a reason (a snapshot of several captures names them all, joined by '+').
    quarantine = silver("quarantine").collect()
    assert all(q["failed_rules"] and q["reason"] and q["record"] for q in quarantine)
    quarantined: dict[str, list] = {}
    for q in quarantine:
        for rid in q["record_id"].split("+"):
            quarantined.setdefault(rid, []).append(q)
    assert set(quarantined) <= set(bronze)
    assert in_silver <= set(bronze)

    # The rest are duplicates of a snapshot key that silver holds (the later-ingested or greater record won).
    keys = {(r["cluster_id"], r["collected_at"]) for r in silver("quorum_snapshots").collect()}
    left = {rid: r for rid, (_, r) in bronze.items() if rid not in in_silver and rid not in quarantined}
    assert [(r["cluster_id"], str(r["collected_at"]), r["format"]) for r in left.values()] == [
        ("kraft-v0", "2024-10-27 03:33:20.600000", "describe_quorum_json")
    ]
    assert all((r["cluster_id"], r["collected_at"]) in keys for r in left.values())

    # Every record bronze could not read is quarantined once, with its parse error as the reason.
    unreadable = {rid: r for rid, (_, r) in bronze.items() if r["parse_error"] is not None}
    assert len(unreadable) == 14 + 4 + 4
    assert {
        rid: [(q["failed_rules"], q["reason"], q["source_file"]) for q in quarantined[rid]] for rid in unreadable
    } == {rid: [(["record_readable"], r["parse_error"], r["source_file"])] for rid, r in unreadable.items()}

    # What silver itself rejected, by the cluster of the bronze record.
    def cluster_of(q):
        return bronze[q["record_id"].split("+")[0]][1]["cluster_id"]

    rejected = sorted(
        (q["target_table"], q["failed_rules"], cluster_of(q))
        for q in quarantine
        if q["failed_rules"] != ["record_readable"]
    )
    assert (
        rejected
        == [
            ("silver.node_metrics", ["sample_line_parses"], "x-prom"),
            ("silver.partition_states", ["isr_subset_of_replicas"], "x-part"),
            ("silver.partition_states", ["topics_capture_parses"], "x-topics"),
            ("silver.quorum_snapshots", ["cli_capture_parses"], "x-cli"),
            ("silver.quorum_snapshots", ["leader_among_voters"], "x-rule"),
            ("silver.quorum_snapshots", ["response_shape"], "x-shape"),
        ]
        + [("silver.replica_states", ["one_leader_per_snapshot"], "x-rule")] * 4
    )

    # Hand-checked values.
    rows = silver("replica_states").where("cluster_id = 'kraft-v1' AND replica_id = 3001").collect()
    assert [
        (
            r["is_voter"],
            r["position"],
            r["role"],
            r["log_end_offset"],
            r["offset_lag"],
            r["caught_up_lag_ms"],
            r["fetch_age_ms"],
        )
        for r in rows
    ] == [(True, 1, "follower", 18530, 12, 2400, 300)]
    snapshots = {r["cluster_id"]: r for r in silver("quorum_snapshots").collect()}
    assert {
        c: (r["source"], r["leader_id"], r["leader_epoch"], r["high_watermark"], r["error_code"], len(r["record_ids"]))
        for c, r in snapshots.items()
        if c.startswith(("kraft-cli", "x-"))
    } == {
        "kraft-cli38": ("cli", 3002, 7, 18542, 0, 2),
        "kraft-cli39": ("cli", 3002, 7, 18542, 0, 2),
        "x-error": ("admin", None, None, None, 31, 1),
    }
    assert snapshots["x-error"]["error_message"] == "Cluster authorization failed."
    assert snapshots["kraft-cli39"]["ref_at"] == datetime(2024, 10, 27, 3, 33, 20, 500000)
    partitions = silver("partition_states").where("cluster_id IN ('kraft-v2', 'x-part')").collect()
    assert sorted((r["cluster_id"], r["topic"], r["partition"], r["status"]) for r in partitions) == [
        ("kraft-v2", "orders", 0, "healthy"),
        ("kraft-v2", "orders", 1, "at_min_isr"),
        ("kraft-v2", "orders", 2, "offline"),
        ("kraft-v2", "payments", 0, "at_min_isr"),
        ("x-part", "t", 0, "at_min_isr"),
    ]
    metrics = silver("node_metrics").where("cluster_id = 'x-prom'").orderBy("metric").collect()
    assert [(r["metric"], r["node_id"], str(r["value"]), r["node_role"]) for r in metrics] == [
        ("raft_current_epoch", 7, "7.0", None),
        ("raft_current_leader", 7, "nan", None),
    ]
    assert silver("node_metrics").where(
        "cluster_id = 'kraft-v2' AND node_id = 3002 AND metric = 'controller_last_committed_record_offset'"
    ).select("value", "node_role").collect() == [(18542.0, "combined")]
    assert silver("quorum_snapshots").where("cluster_id = 'x-rule'").collect() == []
    assert silver("replica_states").where("cluster_id = 'x-rule'").collect() == []

    # A second run over the same landing zone changes nothing.
    before = contents(warehouse)
    run(zone, warehouse, capsys)
    assert contents(warehouse) == before


def test_a_late_status_capture_completes_an_earlier_replication_capture(spark, landing, tmp_path, capsys):
    zone = landing()
    cli39 = DATA / "quorum" / "cluster=kraft-cli39"
    (zone / "quorum" / "cluster=late").mkdir(parents=True)
    shutil.copy(cli39 / "1730000000600.replication.txt", zone / "quorum" / "cluster=late")
    warehouse = tmp_path / "wh"

    def snapshot():
        return [
            (r["leader_id"], r["leader_epoch"], r["high_watermark"], r["kafka_cluster_id"], len(r["record_ids"]))
            for r in table(spark, warehouse, "silver", "quorum_snapshots").collect()
        ]

    def replicas():
        return sorted(
            (
                r["replica_id"],
                r["is_voter"],
                r["position"],
                r["role"],
                r["offset_lag"],
                r["caught_up_lag_ms"],
                r["fetch_age_ms"],
            )
            for r in table(spark, warehouse, "silver", "replica_states").collect()
        )

    run(zone, warehouse, capsys)
    assert snapshot() == [(3002, None, None, None, 1)]
    # Without --status the response order is unknown: the leader, printed first, takes position 0.
    assert replicas() == [
        (0, False, 0, "observer", 0, 50, 50),
        (3000, True, 1, "follower", 0, 20, 20),
        (3001, True, 2, "follower", 12, 2400, 300),
        (3002, True, 0, "leader", 0, 0, 0),
    ]

    later = zone / "quorum" / "cluster=late" / "2024-10-28"
    later.mkdir()
    shutil.copy(cli39 / "1730000000600.status.txt", later / "1730000000600.status.txt")
    run(zone, warehouse, capsys)
    assert snapshot() == [(3002, 7, 18542, "MkU3OEVBNTcwNTJENDM2Qk", 2)]
    # --status gives the response order: the leader is last.
    assert replicas() == [
        (0, False, 0, "observer", 0, 50, 50),
        (3000, True, 0, "follower", 0, 20, 20),
        (3001, True, 1, "follower", 12, 2400, 300),
        (3002, True, 2, "leader", 0, 0, 0),
    ]
    assert table(spark, warehouse, "silver", "quarantine").collect() == []
    assert [r["cluster_id"] for r in table(spark, warehouse, "silver", "quorum_snapshots").collect()] == ["late"]
