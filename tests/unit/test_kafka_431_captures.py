"""The parsers on small captures from a real Apache Kafka 4.3.1 KRaft cluster (tests/data/kafka-4.3.1: static quorum
of controllers 1-3, brokers 4-6, topics orders/payments RF 3 min ISR 2 and audit RF 2 min ISR 1), covering what a
real 4.3 cluster prints that the docs did not say:

- `--status` leaves `directoryId` out for voters whose id is zero (static quorum); observers have one;
- after an election the old leader shows LogEndOffset -1 (Lag = leader LEO + 1) and `-1` timestamps, also with
  `--human-readable`; `--status` then prints MaxFollowerLagTimeMs -1;
- with Eligible Leader Replicas a leaderless partition has an empty `Isr:` and `Elr:` names the eligible replica;
  `Configs:` always lists `min.insync.replicas`;
- exporter default names are `untyped` (`kafka_controller_KafkaController_Value{name="LastCommittedRecordOffset"}`),
  Strimzi-style rules give `kafka_controller_kafkacontroller_lastcommittedrecordoffset`; an idle raft
  `commit_latency_max` is `NaN` (`..._max_total` under Strimzi-style rules, typed counter).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from quorumlake.silver.cli_text import parse_replication, parse_status, parse_topics
from quorumlake.silver.prometheus_text import canonical_metric, node_role, parse_exposition

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka-4.3.1"
CAPTURED_AT = 1795418321020  # shortly after the after-election captures


def text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_status_of_a_static_quorum_has_no_directory_id_for_voters():
    status = parse_status(text("status-healthy.txt"))
    assert status["layout"] == "3.9+"
    assert [v["id"] for v in status["voters"]] == [1, 2, 3]
    assert all(v["directory_id"] is None and len(v["endpoints"]) == 1 for v in status["voters"])
    assert status["voters"][0]["endpoints"][0].startswith("CONTROLLER://127.0.0.1:")
    assert [o["id"] for o in status["observers"]] == [5, 6, 4]
    assert all(o["directory_id"] and o["endpoints"] == [] for o in status["observers"])
    # all caught up, but the leader (3) is not first in voter order: the tie picks voter 1
    # (docs/kafka-surfaces.md §3.4)
    assert status["leader_id"] == 3
    assert (status["max_follower_lag"], status["max_follower_lag_time_ms"]) == (0, 463)


def test_status_after_an_election_prints_unknown_lag_time():
    status = parse_status(text("status-after-election.txt"))
    assert (status["leader_id"], status["leader_epoch"], status["high_watermark"]) == (1, 2, 239)
    assert (status["max_follower_lag"], status["max_follower_lag_time_ms"]) == (240, -1)


@pytest.mark.parametrize("name", ["replication-after-election.txt", "replication-after-election-human.txt"])
def test_old_leader_after_an_election_is_unknown(name):
    rows = parse_replication(text(name), CAPTURED_AT)
    old_leader = rows[2]
    assert (old_leader["replica_id"], old_leader["status"], old_leader["lag"]) == (3, "Follower", 240)
    assert old_leader["log_end_offset"] is None
    assert old_leader["last_fetch_ms"] is None and old_leader["last_caught_up_ms"] is None
    assert [r["replica_directory_id"] for r in rows[:3]] == [None, None, None]  # AAAAAAAAAAAAAAAAAAAAAA
    assert rows[3]["replica_directory_id"] == "NpOvV_zrhfK7m5bNlhFz_Q"
    human = name.endswith("human.txt")
    assert all(r["human_readable"] is human for r in rows)
    leader = rows[0]
    if human:
        assert (leader["last_fetch_ms"], leader["last_caught_up_ms"]) == (CAPTURED_AT - 1, CAPTURED_AT - 2)
        assert rows[1]["last_caught_up_ms"] == CAPTURED_AT - 303
    else:
        assert leader["last_caught_up_ms"] == 1795418321017


def test_follower_controller_down():
    status = parse_status(text("status-follower-down.txt"))
    rows = parse_replication(text("replication-follower-down.txt"), CAPTURED_AT)
    assert status["max_follower_lag_time_ms"] > 2000
    lagging = [r for r in rows if r["status"] == "Follower" and r["lag"] > 0]
    assert len(lagging) == 1 and lagging[0]["last_caught_up_ms"] < rows[0]["last_caught_up_ms"] - 2000


def _flags(p: dict) -> dict[str, bool]:
    """The contract's partition flags (docs/contract.md §2), written out independently of silver."""
    offline = p["leader_id"] is None
    return {
        "at-min": len(p["isr"]) == p["min_isr"],
        "under-min": offline or len(p["isr"]) < p["min_isr"],
        "unavailable": offline,
    }


def test_topics_with_eligible_leader_replicas_and_the_report_listings():
    partitions = {(p["topic"], p["partition"]): p for p in parse_topics(text("topics-two-brokers-down.txt"))}
    assert len(partitions) == 8
    leaderless = partitions[("audit", 0)]
    assert (leaderless["leader_id"], leaderless["isr"], leaderless["elr"], leaderless["last_known_elr"]) == (
        None,
        [],
        [5],
        [5],
    )
    assert partitions[("orders", 0)]["isr"] == [4] and partitions[("orders", 0)]["elr"] == [5]
    assert partitions[("audit", 1)]["elr"] == []
    # min.insync.replicas always in Configs: the default passed in must not matter
    with_other_default = parse_topics(text("topics-two-brokers-down.txt"), default_min_isr=7)
    assert [p["min_isr"] for p in with_other_default] == [p["min_isr"] for p in partitions.values()]
    assert {p["topic"]: p["min_isr"] for p in partitions.values()} == {"orders": 2, "payments": 2, "audit": 1}
    # the flags of the contract select exactly the partitions kafka-topics' report options listed
    for listing, flag in [
        ("at-min-isr-two-brokers-down.txt", "at-min"),
        ("under-min-isr-two-brokers-down.txt", "under-min"),
        ("unavailable-two-brokers-down.txt", "unavailable"),
    ]:
        listed = {(p["topic"], p["partition"]) for p in parse_topics(text(listing))}
        assert listed == {k for k, p in partitions.items() if _flags(p)[flag]}, listing


def _canonical(name: str) -> dict[str, dict]:
    samples, errors = parse_exposition(text(name))
    assert errors == []
    out = {}
    for s in samples:
        mapped = canonical_metric(s["name"], s["labels"])
        key = mapped["metric"] + (f"/{mapped['topic']}-{mapped['partition']}" if mapped["topic"] else "")
        key += f"/broker={mapped['broker_id']}" if mapped["broker_id"] is not None else ""
        assert key not in out, key  # one sample per silver key
        out[key] = {**mapped, "value": s["value"], "type": s["type"]}
    return out


def test_controller_scrape_with_the_exporters_default_names():
    metrics = _canonical("controller-1-default-names.prom")
    committed = metrics["controller_last_committed_record_offset"]
    assert committed["source_name"] == 'kafka_controller_KafkaController_Value{name="LastCommittedRecordOffset"}'
    assert committed["type"] == "untyped" and committed["value"] == 69.0
    assert metrics["controller_active_controller_count"]["value"] == 0.0
    assert metrics["raft_current_leader"]["value"] == 3.0
    idle = metrics["raft_commit_latency_max"]  # controller health's canonical name for the default exporter name
    assert idle["source_name"] == "kafka_server_raft_metrics_commit_latency_max"
    assert idle["type"] == "untyped" and math.isnan(idle["value"])
    # KIP-1131's per-broker gauges: one canonical metric, the broker label in broker_id (30: active)
    for broker in (4, 5, 6):
        state = metrics[f"controller_broker_registration_state/broker={broker}"]
        assert state["broker_id"] == broker and state["value"] == 30.0
        assert (
            state["source_name"]
            == f'kafka_controller_KafkaController_Value{{broker="{broker}",name="BrokerRegistrationState"}}'
        )
    # KIP-853: voters on every node, IgnoredStaticVoters on every controller; a follower has no observer count
    assert metrics["raft_number_of_voters"]["value"] == 3.0
    assert metrics["controller_ignored_static_voters"]["value"] == 0.0
    assert metrics["controller_controlled_shutdown_broker_count"]["value"] == 0.0
    assert "raft_number_of_observers" not in metrics and "raft_uncommitted_voter_change" not in metrics
    # MetadataLoader's AvgIdleRatio is not the controller event thread's (KIP-1190): it keeps its own name
    assert "controller_avg_idle_ratio" not in metrics
    assert metrics["kafka_server_metadataloader_value_avgidleratio"]["value"] == 0.9713704895815687
    assert node_role(metrics) == "controller"


def test_broker_scrape_with_strimzi_style_rules():
    metrics = _canonical("broker-4-strimzi-style.prom")
    assert metrics["broker_last_applied_record_offset"]["source_name"] == (
        "kafka_server_brokermetadatametrics_last_applied_record_offset"
    )
    assert metrics["raft_current_state"]["state"] == "observer"
    idle = metrics["raft_commit_latency_max"]  # the Strimzi-style rules' counter, under the same canonical name
    assert idle["source_name"] == "kafka_server_raftmetrics_commit_latency_max_total"
    assert idle["type"] == "counter" and math.isnan(idle["value"])
    assert metrics["partition_at_min_isr/orders-0"]["value"] == 0.0
    assert metrics["replica_manager_at_min_isr_partition_count"]["value"] == 0.0
    assert metrics["broker_ignored_static_voters"]["value"] == 0.0
    assert metrics["raft_number_of_voters"]["value"] == 3.0
    assert node_role(metrics) == "broker"
