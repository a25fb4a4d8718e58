"""Landing zone -> gold through the CLI path: the figures kafka-metadata-quorum prints, KIP-427 end to end, the
fleet view, and a late file that re-opens exactly the gold rows it touches (then a run with nothing new)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

from quorumlake.contract.tables import ALL_TABLES, GOLD_TABLES
from quorumlake.pipelines.app import cli
from tests import read_back
from tests.helpers import at

GOLD = {spec.table: spec for spec in GOLD_TABLES}


def ms(ts: datetime) -> int:
    return int((ts - datetime(1970, 1, 1)) / timedelta(milliseconds=1))


def run(zone: Path, warehouse: Path, capsys) -> None:
    assert cli.main(["run", "--landing", str(zone), "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()


def printed_status(zone: Path) -> dict[str, tuple[int, int]]:
    """MaxFollowerLag / MaxFollowerLagTimeMs as the --status captures of the landing zone print them."""
    figures = {}
    for f in zone.glob("quorum/**/*.status.txt"):
        cluster = re.search(r"cluster=([^/]+)", str(f)).group(1)
        text = f.read_text()
        figures[cluster] = (
            int(re.search(r"^MaxFollowerLag:\s+(-?\d+)$", text, re.M).group(1)),
            int(re.search(r"^MaxFollowerLagTimeMs:\s+(-?\d+)$", text, re.M).group(1)),
        )
    return figures


def test_gold_from_the_test_landing_zone(spark, landing_run, capsys):
    zone, warehouse = landing_run  # one run the suite shares: read here, never written
    # its tables named in this session (the run may have been another worker's)
    assert cli.main(["sql", "SELECT 1", "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()

    # gold.quorum_status: the same figures kafka-metadata-quorum --status prints for the §1.5 state
    printed = printed_status(zone)
    assert printed == {"kraft-cli38": (12, 2400), "kraft-cli39": (12, 2400)}
    rows = spark.sql(
        "SELECT cluster_id, collected_at, error_code, leader_id, leader_epoch, high_watermark, max_follower_lag, "
        "max_follower_lag_time_ms, voters, voters_within_slo, observers, is_good FROM gold.quorum_status"
    ).collect()
    got = {(r["cluster_id"], r["collected_at"]): tuple(r)[2:] for r in rows}
    state = (0, 3002, 7, 18542)
    assert got == {
        # v0: no timestamps, so the lag time is unknown: neither good nor bad
        ("kraft-v0", at("03:33:20.600")): (*state, 12, -1, 3, 1, 1, None),
        ("kraft-v1", at("03:33:20.600")): (*state, *printed["kraft-cli39"], 3, 2, 1, False),
        ("kraft-v2", at("03:33:20.600")): (*state, *printed["kraft-cli39"], 3, 2, 1, False),
        ("kraft-v2", at("03:33:50.600")): (6, None, None, None, None, None, 0, 0, 0, False),  # NOT_LEADER_OR_FOLLOWER
        ("kraft-v3", at("03:33:20.600")): (*state, *printed["kraft-cli39"], 3, 2, 1, False),
        ("kraft-cli39", at("03:33:20.600")): (*state, *printed["kraft-cli39"], 3, 2, 1, False),
        ("kraft-cli38", at("03:33:20.500")): (*state, *printed["kraft-cli38"], 3, 2, 1, False),
    }
    health = spark.sql(
        "SELECT window_start, window_end, snapshots, leaders, max_follower_lag, max_follower_lag_time_ms, "
        "good_snapshots, sli FROM gold.quorum_health WHERE cluster_id = 'kraft-v2'"
    ).collect()
    assert [tuple(r) for r in health] == [(at("03:30:00"), at("03:35:00"), 2, 1, 12, 2400, 0, 0.0)]

    # KIP-427's three examples, one snapshot a minute from 03:33:20 (tests/data/landing/partitions)
    isr = spark.sql(
        "SELECT collected_at, partitions, offline, under_min_isr, at_min_isr, under_replicated FROM gold.isr_health "
        "WHERE cluster_id = 'kip427' ORDER BY collected_at"
    ).collect()
    assert [tuple(r) for r in isr] == [
        (at("03:33:20"), 4, 0, 0, 0, 0),  # all in sync; `moving` is mid-reassignment with a full ISR
        (at("03:34:20"), 3, 0, 0, 1, 3),  # broker 0 fails: example1 at min ISR, all three under-replicated
        (at("03:35:20"), 3, 0, 1, 2, 3),  # broker 1 fails: example1 under min ISR, examples 2 and 3 at min ISR
        (at("03:36:20"), 2, 1, 2, 0, 2),  # broker 2 fails: example2 offline, example3 under min ISR
    ]
    episodes = spark.sql(
        "SELECT topic, `partition`, started_at, ended_at, duration_ms, snapshots, escalated, max_status, bounces "
        "FROM gold.at_min_isr_episodes WHERE cluster_id = 'kip427' ORDER BY topic"
    ).collect()
    assert [tuple(r) for r in episodes] == [
        ("example1", 0, at("03:34:20"), None, 60_000, 2, True, "under_min_isr", 0),
        ("example2", 0, at("03:35:20"), None, 60_000, 2, True, "offline", 0),
        ("example3", 0, at("03:35:20"), None, 60_000, 2, True, "under_min_isr", 0),
    ]

    # the fleet view answers through the CLI, one row per cluster
    assert (
        cli.main(
            [
                "sql",
                "SELECT cluster_id, status FROM gold.v_fleet_overview",
                "--format",
                "json",
                "--warehouse",
                str(warehouse),
            ]
        )
        == 0
    )
    fleet = {r["cluster_id"]: r["status"] for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert fleet == {
        "kraft-v0": "stale",  # its unknown lag is not a warning; its data is from 2024
        "kraft-v1": "warn",
        "kraft-v3": "warn",
        "kraft-cli38": "warn",
        "kraft-cli39": "warn",
        "kraft-v2": "critical",  # its latest quorum snapshot is an error; an offline partition
        "kip427": "critical",  # under min ISR and offline partitions
    }

    # the end-to-end tests read whole tables back with delta-rs (tests/read_back.py): it reads what Spark reads, in
    # every table of a run through all layers
    read = read_back.contents(warehouse, ALL_TABLES)
    for spec in ALL_TABLES:
        by_spark = spark.read.format("delta").load(str(read_back.table_path(warehouse, spec))).collect()
        assert read[spec.name] == sorted(json.dumps(r.asDict(True), default=str) for r in by_spark), spec.name
    # every gold table has rows, but gold.quorum_events: no cluster of this landing zone changes its quorum (the late
    # data test below makes an election; tests/e2e/test_incidents_e2e.py a membership change)
    assert all(read[spec.name] for spec in GOLD_TABLES if spec.table != "quorum_events")


# --- late data -----------------------------------------------------------------------------------------------------


def describe_quorum_v1(cluster: str, collected: datetime, epoch: int, hw: int) -> str:
    """A DescribeQuorum v1 line (as the JSON converter renders it): every voter caught up, leader 3002 listed last,
    its clock 100 ms before the capture; 3000 caught up 10 ms before it, 3001 20 ms, observer 0 30 ms."""
    now = ms(collected) - 100

    def replica(replica_id, behind_ms):
        return {
            "replicaId": replica_id,
            "logEndOffset": hw,
            "lastFetchTimestamp": now - behind_ms,
            "lastCaughtUpTimestamp": now - behind_ms,
        }

    partition = {
        "partitionIndex": 0,
        "errorCode": 0,
        "leaderId": 3002,
        "leaderEpoch": epoch,
        "highWatermark": hw,
        "currentVoters": [replica(3000, 10), replica(3001, 20), replica(3002, 0)],
        "observers": [replica(0, 30)],
    }
    response = {"errorCode": 0, "topics": [{"topicName": "__cluster_metadata", "partitions": [partition]}]}
    return (
        json.dumps({"cluster_id": cluster, "collected_at_ms": ms(collected), "api_version": 1, "response": response})
        + "\n"
    )


def gold_contents(warehouse: Path) -> dict[str, dict[tuple, dict]]:
    """Every gold table as {key: row}."""
    out = {}
    for name, spec in GOLD.items():
        rows = read_back.rows(read_back.table_path(warehouse, spec))
        out[name] = {tuple(r[k] for k in spec.key): r for r in rows}
    return out


def gold_versions(warehouse: Path) -> dict[str, int]:
    return {name: read_back.version(read_back.table_path(warehouse, spec)) for name, spec in GOLD.items()}


def rows_written_since(spark, name: str, version: int) -> tuple[int, int, int]:
    """(inserted, updated, deleted) rows over the table's commits after `version`, from Delta's operationMetrics: a
    MERGE's, or an append's rows as inserted (rows of new keys only, after a table's rows, are appended)."""
    totals = [0, 0, 0]
    for r in spark.sql(f"DESCRIBE HISTORY gold.{name}").where(f"version > {version}").collect():
        metrics = r["operationMetrics"] or {}
        if r["operation"] == "WRITE":
            totals[0] += int(metrics["numOutputRows"])
            continue
        for i, key in enumerate(("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")):
            totals[i] += int(metrics.get(key, 0))
    return tuple(totals)


def data_files(warehouse: Path) -> dict[str, set[str]]:
    return {
        name: {str(p.relative_to(warehouse)) for p in (warehouse / "gold" / name).rglob("*.parquet")} for name in GOLD
    }


def diff(before: dict[tuple, dict], after: dict[tuple, dict]):
    """(keys added, keys removed, {key: {column: (before, after)}} for rows whose values changed)."""
    changed = {}
    for key in before.keys() & after.keys():
        columns = {c: (before[key][c], after[key][c]) for c in before[key] if before[key][c] != after[key][c]}
        if columns:
            changed[key] = columns
    return after.keys() - before.keys(), before.keys() - after.keys(), changed


MEMBERS = [(3000, "voter"), (3001, "voter"), (3002, "voter"), (0, "observer")]


def test_a_late_file_updates_only_the_gold_rows_it_touches_and_a_rerun_changes_nothing(
    spark, landing, tmp_path, capsys
):
    zone = landing("landing")
    warehouse = tmp_path / "wh"
    # kraft-v1 goes on: a new leader epoch at 03:45 (window 03:45), the high watermark moved to 20000
    (zone / "quorum" / "later").mkdir()
    (zone / "quorum" / "later" / "kraft-v1.jsonl").write_text(describe_quorum_v1("kraft-v1", at("03:45:00"), 8, 20000))
    run(zone, warehouse, capsys)
    before, versions = gold_contents(warehouse), gold_versions(warehouse)
    status_0345 = before["quorum_status"][("kraft-v1", at("03:45:00"))]
    assert (status_0345["leader_change"], status_0345["hw_last_increase_at"], status_0345["hw_stalled"]) == (
        1,
        at("03:45:00"),
        False,
    )

    # Late files: a kraft-v1 snapshot at 03:38 (a new window between 03:30 and 03:45) that already has epoch 8 and
    # HW 20000, and a KIP-427 example1 snapshot at 03:34:50 with the ISR back to full.
    (zone / "quorum" / "late").mkdir()
    (zone / "quorum" / "late" / "kraft-v1.jsonl").write_text(describe_quorum_v1("kraft-v1", at("03:38:00"), 8, 20000))
    (zone / "partitions" / "late").mkdir()
    (zone / "partitions" / "late" / "kip427.jsonl").write_text(
        json.dumps(
            {
                "cluster_id": "kip427",
                "collected_at_ms": ms(at("03:34:50")),
                "topic": "example1",
                "partition": 0,
                "leader": 0,
                "replicas": [0, 1, 2],
                "isr": [0, 1, 2],
                "min_isr": 2,
            }
        )
        + "\n"
    )
    run(zone, warehouse, capsys)
    after = gold_contents(warehouse)

    changes = {name: diff(before[name], after[name]) for name in GOLD}
    v1 = "kraft-v1"
    assert changes["quorum_status"] == (
        {(v1, at("03:38:00"))},
        set(),
        # the epoch change and the HW increase now happen at 03:38; 03:45 is 7 minutes after it
        {
            (v1, at("03:45:00")): {
                "leader_change": (1, 0),
                "hw_last_increase_at": (at("03:45:00"), at("03:38:00")),
                "hw_stalled": (False, True),
            }
        },
    )
    assert after["quorum_status"][(v1, at("03:38:00"))] == {
        "cluster_id": v1,
        "collected_at": at("03:38:00"),
        "window_start": at("03:35:00"),
        "source": "admin",
        "error_code": 0,
        "leader_id": 3002,
        "leader_epoch": 8,
        "high_watermark": 20000,
        "max_follower_lag": 0,
        "max_follower_lag_time_ms": 10,
        "voters": 3,
        "voters_within_slo": 3,
        "observers": 1,
        "is_good": True,
        "leader_change": 1,
        "hw_last_increase_at": at("03:38:00"),
        "hw_stalled": False,
        "voters_lag_unknown": 0,
        "voters_not_fetching": 0,
    }
    assert changes["quorum_health"] == (
        {(v1, at("03:35:00"))},
        set(),
        {(v1, at("03:45:00")): {"leader_changes": (1, 0), "high_watermark_stalled": (False, True)}},
    )
    new_window = after["quorum_health"][(v1, at("03:35:00"))]
    assert (new_window["snapshots"], new_window["leader_changes"], new_window["good_snapshots"], new_window["sli"]) == (
        1,
        1,
        1,
        1.0,
    )
    assert changes["replica_lag_sli"] == (
        {(v1, replica, replica != 0, at("03:35:00")) for replica in (3000, 3001, 3002, 0)},
        set(),
        {},
    )
    assert changes["isr_health"] == ({("kip427", at("03:34:50"))}, set(), {})
    assert after["isr_health"][("kip427", at("03:34:50"))]["partitions"] == 1
    assert changes["isr_health_by_topic"] == ({("kip427", at("03:34:50"), "example1")}, set(), {})
    # example1's episode now ends at 03:34:50; its fall to under min ISR at 03:35:20 starts none
    assert changes["at_min_isr_episodes"] == (
        set(),
        set(),
        {
            ("kip427", "example1", 0, at("03:34:20")): {
                "ended_at": (None, at("03:34:50")),
                "duration_ms": (60_000, 30_000),
                "snapshots": (2, 1),
                "escalated": (True, False),
                "max_status": ("under_min_isr", "at_min_isr"),
            }
        },
    )
    # the 03:38 snapshot is one more of kraft-v1's stretches (no membership change); the election it shows moves the
    # leader_elected event from 03:45 to 03:38
    assert changes["quorum_membership"] == (
        set(),
        set(),
        {(v1, node, role, at("03:33:20.6")): {"snapshots": (2, 3)} for node, role in MEMBERS},
    )
    assert changes["quorum_events"] == (
        {(v1, at("03:38:00"), "leader_elected", 3002)},
        {(v1, at("03:45:00"), "leader_elected", 3002)},
        {},
    )
    # kraft-v1's incident (voter 3001 lagging, then the election) now ends at 03:38; the high watermark, unchanged
    # from 03:38 to 03:45, stalls there: 5 minutes after, beyond the grace period, an incident of its own. kip427's
    # incident gains the late snapshot (example1 back in sync at 03:34:50: broker 0 and its AtMinIsr clear there);
    # the other clusters' incidents are not touched.
    new, gone, updated = changes["incidents"]
    assert (new, gone, set(updated)) == (
        {(v1, "20241027T034500.000Z")},
        set(),
        {(v1, "20241027T033320.600Z"), ("kip427", "20241027T033320.000Z")},
    )
    assert updated[(v1, "20241027T033320.600Z")]["ended_at"] == (at("03:45:00"), at("03:38:00"))
    assert after["incidents"][(v1, "20241027T034500.000Z")]["trigger"] == "hw_stalled"
    new, gone, updated = changes["incident_events"]
    assert (new, gone) == (
        {
            ("kip427", "20241027T033320.000Z", at("03:35:20"), "broker_down", 0, None, None),
            (v1, "20241027T034500.000Z", at("03:45:00"), "hw_stalled", None, None, None),
            (v1, "20241027T033320.600Z", at("03:38:00"), "leader_election", 3002, None, None),
        },
        {(v1, "20241027T033320.600Z", at("03:45:00"), "leader_election", 3002, None, None)},
    )
    assert {key: values["ended_at"] for key, values in updated.items()} == {
        ("kip427", "20241027T033320.000Z", at("03:34:20"), "broker_down", 0, None, None): (None, at("03:34:50")),
        ("kip427", "20241027T033320.000Z", at("03:34:20"), "partitions_at_min_isr", None, "example1", 0): (
            at("03:35:20"),
            at("03:34:50"),
        ),
        (v1, "20241027T033320.600Z", at("03:33:20.6"), "voter_lagging", 3001, None, None): (
            at("03:45:00"),
            at("03:38:00"),
        ),
    }
    assert changes["metadata_offset_divergence"] == (set(), set(), {})
    assert changes["controller_health"] == (set(), set(), {})
    assert changes["broker_registrations"] == (set(), set(), {})
    # the SLOs: kraft-v1's new quorum_lag window, and the windows whose lookbacks now hold a changed one (kraft-v1's
    # 03:45, kip427's 03:30, where the partition snapshot falls, and 03:35 after it); their days' budgets
    inserted, deleted, updated = changes["slo_burn"]
    assert (inserted, deleted) == ({(v1, "quorum_lag", at("03:35:00"))}, set())
    assert set(updated) == {
        (v1, "quorum_lag", at("03:45:00")),
        ("kip427", "write_availability", at("03:30:00")),
        ("kip427", "write_availability", at("03:35:00")),
    }
    assert updated[("kip427", "write_availability", at("03:30:00"))]["total"] == (7, 8)
    day = at("00:00:00").date()
    inserted, deleted, updated = changes["slo_budget"]
    assert (inserted, deleted, set(updated)) == (
        set(),
        set(),
        {(v1, "quorum_lag", day), ("kip427", "write_availability", day)},
    )
    assert updated[(v1, "quorum_lag", day)]["total"] == (2, 3)
    assert changes["cluster_cohorts"] == (set(), set(), {})

    # Delta's own account of the run agrees: exactly those rows were inserted or updated, none deleted, and a
    # table whose inputs did not change got no commit at all
    assert {name: rows_written_since(spark, name, versions[name]) for name in GOLD} == {
        "quorum_status": (1, 1, 0),
        "quorum_health": (1, 1, 0),
        "replica_lag_sli": (4, 0, 0),
        "isr_health": (1, 0, 0),
        "isr_health_by_topic": (1, 0, 0),
        "at_min_isr_episodes": (0, 1, 0),
        "metadata_offset_divergence": (0, 0, 0),
        "controller_health": (0, 0, 0),
        "quorum_membership": (0, 4, 0),
        "quorum_events": (1, 0, 1),
        "incidents": (1, 2, 0),
        "incident_events": (3, 3, 1),
        "broker_registrations": (0, 0, 0),
        "slo_burn": (1, 3, 0),
        "slo_budget": (0, 2, 0),
        "cluster_cohorts": (0, 0, 0),
    }
    assert gold_versions(warehouse)["metadata_offset_divergence"] == versions["metadata_offset_divergence"]
    assert gold_versions(warehouse)["controller_health"] == versions["controller_health"]
    assert gold_versions(warehouse)["broker_registrations"] == versions["broker_registrations"]

    # A run with nothing new: same contents, no new commit, no new data file
    versions, files = gold_versions(warehouse), data_files(warehouse)
    run(zone, warehouse, capsys)
    assert gold_contents(warehouse) == after
    assert gold_versions(warehouse) == versions
    assert data_files(warehouse) == files
