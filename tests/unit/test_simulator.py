"""The fleet simulator (`quorumlake.simulator`): determinism, landing-format fidelity, scenario signatures.

Plain pytest, no Spark. One eight-scenario fleet (one cluster per scenario, one hour) is generated once per module
and read by most tests; format tests also render the constructed examples of docs/kafka-surfaces.md byte for byte.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from quorumlake.simulator import SCENARIOS, FleetSpec, generate
from quorumlake.simulator.cluster import QuorumView, ReplicaView
from quorumlake.simulator.metrics import java_double
from quorumlake.simulator.quorum import describe_quorum_response, replication_text, status_text
from quorumlake.simulator.topology import ClusterTopology, hashmap_order
from tests.captures import REPLICATION_39, REPLICATION_HUMAN, STATUS_39
from tests.helpers import read_text

ALL = FleetSpec(clusters=len(SCENARIOS), scenarios=tuple(SCENARIOS))
INTERVAL_MS = ALL.interval_s * 1000


# --- helpers --------------------------------------------------------------------------------------------------------


def files(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and re.search(pattern, p.name))


def jsonl(root: Path, folder: str) -> list[dict]:
    return [json.loads(line) for p in files(root / folder, r"\.jsonl(\.gz)?$") for line in read_text(p).splitlines()]


def step_of(ms: int) -> int:
    return (ms - ALL.start_ms) // INTERVAL_MS


def partition_of(response: dict) -> dict:
    return response["topics"][0]["partitions"][0]


def expected_max_follower_lag(response: dict) -> tuple[int, int]:
    """§3.4, written independently of the simulator: voters only, leader included, first minimum LEO wins."""
    p = partition_of(response)
    voters = p["currentVoters"]
    leader = [v for v in voters if v["replicaId"] == p["leaderId"]][0]
    slowest = min(voters, key=lambda v: v["logEndOffset"])  # min() keeps the first of equal elements
    lag = leader["logEndOffset"] - slowest["logEndOffset"]
    if slowest is leader:
        return lag, 0
    a, b = leader.get("lastCaughtUpTimestamp", -1), slowest.get("lastCaughtUpTimestamp", -1)
    return lag, (a - b) if a != -1 and b != -1 else -1


def caught_up_lags(response: dict) -> dict[int, int | None]:
    """caught_up_lag_ms per voter (docs/contract.md §2: ref = the leader's own lastCaughtUpTimestamp)."""
    p = partition_of(response)
    ref = [v for v in p["currentVoters"] if v["replicaId"] == p["leaderId"]][0]["lastCaughtUpTimestamp"]
    return {
        v["replicaId"]: None if v["lastCaughtUpTimestamp"] == -1 else ref - v["lastCaughtUpTimestamp"]
        for v in p["currentVoters"]
    }


# Canonical name -> (Strimzi series, jmx_exporter default series, (Jolokia mbean, attribute))
METRICS = {
    "active_controller_count": (
        "kafka_controller_kafkacontroller_activecontrollercount",
        'kafka_controller_KafkaController_Value{name="ActiveControllerCount"}',
        ("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value"),
    ),
    "last_committed": (
        "kafka_controller_kafkacontroller_lastcommittedrecordoffset",
        'kafka_controller_KafkaController_Value{name="LastCommittedRecordOffset"}',
        ("kafka.controller:type=KafkaController,name=LastCommittedRecordOffset", "Value"),
    ),
    "offline": (
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        'kafka_controller_KafkaController_Value{name="OfflinePartitionsCount"}',
        ("kafka.controller:type=KafkaController,name=OfflinePartitionsCount", "Value"),
    ),
    "broker_applied": (
        "kafka_server_brokermetadatametrics_last_applied_record_offset",
        "kafka_server_broker_metadata_metrics_last_applied_record_offset",
        ("kafka.server:type=broker-metadata-metrics", "last-applied-record-offset"),
    ),
    "broker_lag_ms": (
        "kafka_server_brokermetadatametrics_last_applied_record_lag_ms",
        "kafka_server_broker_metadata_metrics_last_applied_record_lag_ms",
        ("kafka.server:type=broker-metadata-metrics", "last-applied-record-lag-ms"),
    ),
    "at_min": (
        "kafka_server_replicamanager_atminisrpartitioncount",
        'kafka_server_ReplicaManager_Value{name="AtMinIsrPartitionCount"}',
        ("kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount", "Value"),
    ),
    "under_min": (
        "kafka_server_replicamanager_underminisrpartitioncount",
        'kafka_server_ReplicaManager_Value{name="UnderMinIsrPartitionCount"}',
        ("kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount", "Value"),
    ),
    "under_replicated": (
        "kafka_server_replicamanager_underreplicatedpartitions",
        'kafka_server_ReplicaManager_Value{name="UnderReplicatedPartitions"}',
        ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", "Value"),
    ),
}


class Fleet:
    """The generated landing zone, indexed for the tests."""

    def __init__(self, root: Path, summary) -> None:
        self.root, self.summary = root, summary
        self.info = {c.scenario: c for c in summary.clusters}
        self.quorum: dict[str, list[dict]] = defaultdict(list)
        for r in sorted(jsonl(root, "quorum"), key=lambda r: r["collected_at_ms"]):
            self.quorum[r["cluster_id"]].append(r)
        self.partitions: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for r in jsonl(root, "partitions"):
            self.partitions[r["cluster_id"]][r["collected_at_ms"]].append(r)
        # metrics[cluster][node] -> list of (scraped_at_ms, {series: value}) in time order
        self.metrics: dict[str, dict[int, list[tuple[int, dict[str, float]]]]] = defaultdict(lambda: defaultdict(list))
        for p in files(root / "metrics", r"\.prom(\.gz)?$"):
            cluster = re.search(r"cluster=([^/]+)", str(p)).group(1)
            node = int(re.search(r"node=(-?\d+)", str(p)).group(1))
            series = {}
            for line in read_text(p).splitlines():
                if not line.startswith("#"):
                    key, value = line.rsplit(" ", 1)
                    series[key] = float(value)
            self.metrics[cluster][node].append((int(p.name.split(".")[0]), series))
        jolokia: dict[tuple[str, int, int], dict[str, float]] = defaultdict(dict)
        for r in jsonl(root, "metrics"):
            jolokia[(r["cluster_id"], r["node_id"], r["scraped_at_ms"])][f"{r['mbean']}|{r['attribute']}"] = r["value"]
        for (cluster, node, at), series in jolokia.items():
            self.metrics[cluster][node].append((at, series))
        for nodes in self.metrics.values():
            for scrapes in nodes.values():
                scrapes.sort(key=lambda s: s[0])

    def cluster(self, scenario: str) -> str:
        return self.info[scenario].cluster_id

    def window(self, scenario: str) -> tuple[int, int]:
        return self.info[scenario].fault_start_ms, self.info[scenario].fault_end_ms

    def metric(self, cluster: str, series: dict[str, float], name: str) -> float | None:
        strimzi, default, (mbean, attribute) = METRICS[name]
        for key in (strimzi, default, f"{mbean}|{attribute}"):
            if key in series:
                return series[key]
        return None

    def ok_quorum(self, scenario: str) -> list[dict]:
        return [r for r in self.quorum[self.cluster(scenario)] if partition_of(r["response"])["errorCode"] == 0]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Fleet:
    root = tmp_path_factory.mktemp("landing")
    return Fleet(root, generate(root, ALL))


# --- determinism, summary, progress ---------------------------------------------------------------------------------


def test_same_spec_gives_byte_identical_files(tmp_path):
    spec = FleetSpec(clusters=len(SCENARIOS), scenarios=tuple(SCENARIOS), hours=0.4)
    first, second = tmp_path / "a", tmp_path / "b"
    generate(first, spec)
    generate(second, spec)
    names = sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(second)) for p in second.rglob("*") if p.is_file())
    assert len(names) > 100
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    other = tmp_path / "c"
    generate(other, FleetSpec(clusters=1, hours=0.1, seed=7))
    generate(tmp_path / "d", FleetSpec(clusters=1, hours=0.1, seed=8))
    q7 = read_text(files(other / "quorum", r"\.jsonl$")[0])
    q8 = read_text(files(tmp_path / "d" / "quorum", r"\.jsonl$")[0])
    assert q7 != q8


def test_summary_counts_what_is_on_disk(fleet):
    s = fleet.summary
    on_disk = [p for p in fleet.root.rglob("*") if p.is_file()]
    assert s.total_files == len(on_disk)
    assert s.files["prometheus_text"] == len(files(fleet.root / "metrics", r"\.prom(\.gz)?$"))
    assert s.records["describe_quorum_json"] == len(jsonl(fleet.root, "quorum"))
    assert s.records["partition_json"] == len(jsonl(fleet.root, "partitions")) == 8 * 120 * 9
    assert s.records["jmx_json"] == len(jsonl(fleet.root, "metrics"))
    assert [c.cluster_id for c in s.clusters] == [f"cluster-{i + 1:02d}-{name}" for i, name in enumerate(SCENARIOS)]
    assert {c.api_version for c in s.clusters} == {0, 1, 2}
    assert {c.metrics_format for c in s.clusters} == {"strimzi", "jmx", "jolokia"}
    gz = [p for p in on_disk if p.name.endswith(".gz")]
    assert gz and all(p.read_bytes()[:2] == b"\x1f\x8b" for p in gz)


def test_progress_is_reported_per_cluster_snapshot(tmp_path):
    calls = []
    summary = generate(tmp_path, FleetSpec(clusters=2, hours=0.05), progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i, 2 * summary.steps) for i in range(1, 2 * summary.steps + 1)]


def test_bad_spec_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        generate(tmp_path, FleetSpec(scenarios=("nope",)))
    with pytest.raises(ValueError, match="brokers"):
        generate(tmp_path, FleetSpec(brokers=0))


def test_small_and_odd_fleets_generate(tmp_path):
    spec = FleetSpec(
        clusters=len(SCENARIOS),
        brokers=1,
        controllers=1,
        topics=1,
        partitions=1,
        hours=0.02,
        interval_s=5,
        scenarios=tuple(SCENARIOS),
    )
    summary = generate(tmp_path / "tiny", spec)
    assert summary.records["describe_quorum_json"] >= len(SCENARIOS) * summary.steps
    generate(
        tmp_path / "wide",
        FleetSpec(
            clusters=3,
            brokers=6,
            controllers=5,
            topics=10,
            partitions=2,
            hours=0.1,
            scenarios=("broker-failure", "leader-election", "lagging-voter"),
        ),
    )


# --- formats --------------------------------------------------------------------------------------------------------


def test_quorum_lines_follow_the_json_converter_for_their_version(fleet):
    replica_keys = {
        0: ["replicaId", "logEndOffset"],
        1: ["replicaId", "logEndOffset", "lastFetchTimestamp", "lastCaughtUpTimestamp"],
        2: ["replicaId", "replicaDirectoryId", "logEndOffset", "lastFetchTimestamp", "lastCaughtUpTimestamp"],
    }
    for p in files(fleet.root / "quorum", r"\.jsonl(\.gz)?$"):
        for line in read_text(p).splitlines():
            record = json.loads(line)
            assert list(record) == [
                "cluster_id",
                "collected_at_ms",
                "api_version",
                "response",
                "kafka_version",
                "finalized_features",
            ]
            # what the collector records of the answering node: a release that answers with this version
            assert record["kafka_version"] in {2: ("4.1", "3.9"), 1: ("3.7",), 0: ("3.2",)}[record["api_version"]]
            assert ("kraft.version" in record["finalized_features"]) == (record["api_version"] == 2)
            assert line == json.dumps(record, separators=(",", ":"))
            v, response = record["api_version"], record["response"]
            assert list(response) == (
                ["errorCode", "topics"] if v < 2 else ["errorCode", "errorMessage", "topics", "nodes"]
            )
            p0 = partition_of(response)
            assert list(p0) == ["partitionIndex", "errorCode"] + (["errorMessage"] if v == 2 else []) + [
                "leaderId",
                "leaderEpoch",
                "highWatermark",
                "currentVoters",
                "observers",
            ]
            for r in p0["currentVoters"] + p0["observers"]:
                assert list(r) == replica_keys[v]
            if v == 2:
                assert [n["nodeId"] for n in response["nodes"]] == [r["replicaId"] for r in p0["currentVoters"]]


def test_voters_in_hashmap_order_and_leader_not_always_first(fleet):
    assert hashmap_order([3000, 3001, 3002]) == [3000, 3001, 3002]
    assert hashmap_order(list(range(3000, 3012)))[:4] == [3008, 3009, 3010, 3011]
    leaders_first = set()
    for records in fleet.quorum.values():
        for r in records:
            voters = [v["replicaId"] for v in partition_of(r["response"])["currentVoters"]]
            if voters:
                assert voters == sorted(voters)
                leaders_first.add(voters[0] == partition_of(r["response"])["leaderId"])
    assert leaders_first == {True, False}


def test_describe_quorum_examples_render_exactly():
    """The constructed examples of docs/kafka-surfaces.md §1.5, §3.2 and §3.3."""
    dirs = {
        3000: "ILZ5MPTeRWakmJu99uBJCA",
        3001: "b-DwmhtOheTqZzPoh52kfA",
        3002: "g42deArWBTRM5A1yuVpMCg",
        0: "3Db5QLSqSZieL3rJBUUegA",
    }
    topo = ClusterTopology(
        0,
        "c",
        "healthy",
        "MkU3OEVBNTcwNTJENDM2Qk",
        2,
        "strimzi",
        False,
        (0,),
        (3000, 3001, 3002),
        dirs,
        {3000: "controller-0", 3001: "controller-1", 3002: "controller-2"},
        (),
    )
    view = QuorumView(
        1730000000600,
        0,
        3002,
        7,
        18542,
        (
            ReplicaView(3000, dirs[3000], 18542, 1730000000480, 1730000000480),
            ReplicaView(3001, dirs[3001], 18530, 1730000000200, 1729999998100),
            ReplicaView(3002, dirs[3002], 18542, 1730000000500, 1730000000500),
        ),
        (ReplicaView(0, dirs[0], 18542, 1730000000450, 1730000000450),),
    )

    def compact(version: int) -> str:
        return json.dumps(describe_quorum_response(view, version, topo), separators=(",", ":"))

    assert compact(0) == (
        '{"errorCode":0,"topics":[{"topicName":"__cluster_metadata","partitions":[{"partitionIndex":0,"errorCode":0,'
        '"leaderId":3002,"leaderEpoch":7,"highWatermark":18542,"currentVoters":[{"replicaId":3000,'
        '"logEndOffset":18542},{"replicaId":3001,"logEndOffset":18530},{"replicaId":3002,"logEndOffset":18542}],'
        '"observers":[{"replicaId":0,"logEndOffset":18542}]}]}]}'
    )
    assert (
        '{"replicaId":3001,"logEndOffset":18530,"lastFetchTimestamp":1730000000200,'
        '"lastCaughtUpTimestamp":1729999998100}' in compact(1)
    )
    assert compact(2).startswith(
        '{"errorCode":0,"errorMessage":"","topics":[{"topicName":"__cluster_metadata",'
        '"partitions":[{"partitionIndex":0,"errorCode":0,"errorMessage":"","leaderId":3002,'
    )
    assert compact(2).endswith(
        '"nodes":[{"nodeId":3000,"listeners":[{"name":"CONTROLLER","host":"controller-0",'
        '"port":9093}]},{"nodeId":3001,"listeners":[{"name":"CONTROLLER","host":"controller-1",'
        '"port":9093}]},{"nodeId":3002,"listeners":[{"name":"CONTROLLER","host":"controller-2",'
        '"port":9093}]}]}'
    )
    v2 = describe_quorum_response(view, 2, topo)
    # §3.2 and §3.3 byte for byte (tests/captures.py: the test landing zone's copies)
    assert replication_text(v2, (3, 9), False, 1730000000600) == REPLICATION_39
    assert replication_text(describe_quorum_response(view, 1, topo), (3, 7), True, 1730000000500) == REPLICATION_HUMAN
    assert status_text(v2, (3, 9), topo.kafka_cluster_id) == STATUS_39
    assert status_text(describe_quorum_response(view, 1, topo), (3, 7), topo.kafka_cluster_id).endswith(
        "CurrentVoters:          [3000,3001,3002]\nCurrentObservers:       [0]\n"
    )
    assert status_text(describe_quorum_response(view, 0, topo), (3, 4), topo.kafka_cluster_id).endswith(
        "MaxFollowerLag:         12\nMaxFollowerLagTimeMs:   -1\n"
        "CurrentVoters:          [3000,3001,3002]\nCurrentObservers:       [0]\n\n"
    )


def test_cli_captures_are_well_formed_and_match_the_json_of_the_same_instant(fleet):
    by_instant = {(r["cluster_id"], r["collected_at_ms"]): r for rs in fleet.quorum.values() for r in rs}
    labels = [
        "ClusterId:",
        "LeaderId:",
        "LeaderEpoch:",
        "HighWatermark:",
        "MaxFollowerLag:",
        "MaxFollowerLagTimeMs:",
        "CurrentVoters:",
        "CurrentObservers:",
    ]
    statuses = files(fleet.root / "quorum", r"\.status\.txt(\.gz)?$")
    assert len(statuses) > 100
    seen_unknown_time = seen_human = False
    for path in statuses:
        cluster = re.search(r"cluster=([^/]+)", str(path)).group(1)
        at = int(path.name.split(".")[0])
        record = by_instant[(cluster, at)]
        lines = read_text(path).split("\n")
        fields = {}
        for line in [x for x in lines if x]:
            assert line[:24].rstrip() in labels and line[23] == " " and line[24] != " ", line
            fields[line[:24].rstrip()] = line[24:]
        assert list(fields) == labels
        p = partition_of(record["response"])
        lag, lag_ms = expected_max_follower_lag(record["response"])
        assert (int(fields["MaxFollowerLag:"]), int(fields["MaxFollowerLagTimeMs:"])) == (lag, lag_ms), path
        assert int(fields["LeaderId:"]) == p["leaderId"] and int(fields["HighWatermark:"]) == p["highWatermark"]
        seen_unknown_time |= lag_ms == -1

        replication = read_text(path.with_name(path.name.replace(".status.", ".replication.")))
        rows = [line.split("\t") for line in replication.split("\n")[:-1]]
        assert rows[0][0] == "NodeId" and rows[0][-1] == "" and "Status  " in rows[0]
        assert all(r[-1] == "" and len(r) == len(rows[0]) for r in rows)
        for column in range(len(rows[0]) - 1):
            assert len({len(r[column]) for r in rows}) == 1  # every cell padded to the column width
        header = [c.strip() for c in rows[0]]
        table = [dict(zip(header, (c.strip() for c in r))) for r in rows[1:]]
        assert table[0]["Status"] == "Leader" and int(table[0]["NodeId"]) == p["leaderId"]
        leader_leo = int(table[0]["LogEndOffset"])
        replicas = {r["replicaId"]: r for r in p["currentVoters"] + p["observers"]}
        assert sorted(int(t["NodeId"]) for t in table) == sorted(replicas)
        for t in table:
            r = replicas[int(t["NodeId"])]
            assert int(t["Lag"]) == leader_leo - r["logEndOffset"]
            for column, key in (
                ("LastFetchTimestamp", "lastFetchTimestamp"),
                ("LastCaughtUpTimestamp", "lastCaughtUpTimestamp"),
            ):
                ts = r.get(key, -1)
                if t[column].endswith(" ms ago"):
                    seen_human = True
                    assert int(t[column].split()[0]) == at - ts
                else:
                    assert int(t[column]) == ts
    assert seen_unknown_time and seen_human


def test_topics_captures_match_the_partition_lines(fleet):
    captures = files(fleet.root / "partitions", r"\.topics\.txt(\.gz)?$")
    assert captures
    versions = {c.cluster_id: c.api_version for c in fleet.summary.clusters}
    for path in captures:
        cluster = re.search(r"cluster=([^/]+)", str(path)).group(1)
        lines = fleet.partitions[cluster][int(path.name.split(".")[0])]
        expected = {(r["topic"], r["partition"]): r for r in lines}
        text = read_text(path)
        assert text.startswith("Topic: ") and text.endswith("\n")
        topic_min_isr = {}
        for line in text.splitlines():
            f = line.split("\t")
            if line.startswith("Topic: "):
                assert [x.split(":")[0] for x in f] == [
                    "Topic",
                    "TopicId",
                    "PartitionCount",
                    "ReplicationFactor",
                    "Configs",
                ]
                configs = f[4][len("Configs: ") :]
                topic_min_isr[f[0][7:]] = int(configs.split("=")[1]) if configs else 1
                continue
            assert f[0] == ""
            row = dict(x.split(": ", 1) for x in f[1:])
            r = expected.pop((row["Topic"], int(row["Partition"])))
            assert row["Leader"] == ("none" if r["leader"] == -1 else str(r["leader"]))
            assert row["Replicas"] == ",".join(map(str, r["replicas"])) and row["Isr"] == ",".join(map(str, r["isr"]))
            assert topic_min_isr[row["Topic"]] == r["min_isr"]
            assert ("Elr" in row) == ("LastKnownElr" in row) == (versions[cluster] == 2)  # Elr from 3.8
        assert not expected


PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROM_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
PROM_VALUE = r"(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|NaN|[+-]Inf)"
PROM_SAMPLE = re.compile(rf"^({PROM_NAME})(\{{{PROM_LABEL}(?:,{PROM_LABEL})*\}})? ({PROM_VALUE})$")
PROM_TYPE = re.compile(rf"^# TYPE ({PROM_NAME}) (counter|gauge|untyped)$")
PROM_HELP = re.compile(rf"^# HELP ({PROM_NAME}) \S.*$")


def test_prometheus_scrapes_follow_the_exposition_format(fleet):
    scrapes = files(fleet.root / "metrics", r"\.prom(\.gz)?$")
    assert scrapes
    for path in scrapes:
        family, families = None, []
        for line in read_text(path).splitlines():
            if m := PROM_HELP.match(line):
                family = m.group(1)
                families.append(family)
            elif m := PROM_TYPE.match(line):
                assert m.group(1) == family
            else:
                m = PROM_SAMPLE.match(line)
                assert m, f"{path.name}: {line!r}"
                assert m.group(1) == family
                if m.group(2):
                    names = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2))
                    assert names == sorted(names)
                value = m.group(3)
                assert value in ("NaN", "+Inf", "-Inf") or "." in value  # Double.toString always has a point
        assert families == sorted(families) and len(families) == len(set(families))


def test_java_double_to_string():
    assert java_double(3002.0) == "3002.0"
    assert java_double(1730000000500.0) == "1.7300000005E12"
    assert java_double(-1.0) == "-1.0"
    assert java_double(0.0) == "0.0"
    assert java_double(2.5) == "2.5"
    assert java_double(0.001) == "0.001"
    assert java_double(0.0001) == "1.0E-4"
    assert java_double(1e7) == "1.0E7"
    assert java_double(9999999.0) == "9999999.0"
    assert java_double(12345678.9) == "1.23456789E7"
    assert java_double(math.nan) == "NaN"


# --- Kafka semantics ------------------------------------------------------------------------------------------------


def test_leader_entry_and_high_watermark_semantics(fleet):
    for cluster, records in fleet.quorum.items():
        previous_hw = None
        for r in records:
            p = partition_of(r["response"])
            if p["errorCode"]:
                assert (p["leaderId"], p["leaderEpoch"], p["highWatermark"], p["currentVoters"]) == (0, 0, 0, [])
                continue
            leader = [v for v in p["currentVoters"] if v["replicaId"] == p["leaderId"]][0]
            if r["api_version"] >= 1:
                assert leader["lastFetchTimestamp"] == leader["lastCaughtUpTimestamp"] <= r["collected_at_ms"]
                assert r["collected_at_ms"] - leader["lastFetchTimestamp"] < 50
            known = sorted((v["logEndOffset"] for v in p["currentVoters"]), reverse=True)
            if p["highWatermark"] != -1:
                assert p["highWatermark"] == known[len(known) // 2]
                assert previous_hw is None or p["highWatermark"] >= previous_hw
                previous_hw = p["highWatermark"]


def test_metrics_agree_with_quorum_and_partitions(fleet):
    checked = 0
    for info in fleet.summary.clusters:
        cluster = info.cluster_id
        quorum_by_step = defaultdict(list)
        for r in fleet.quorum[cluster]:
            quorum_by_step[step_of(r["collected_at_ms"])].append(r)
        partitions_by_step = {step_of(at): rows for at, rows in fleet.partitions[cluster].items()}
        for node, scrapes in fleet.metrics[cluster].items():
            for at, series in scrapes:
                step = step_of(at)
                if node >= 3000:  # controller: the active one is the JSON's leader, committed offset ~ HW
                    records = quorum_by_step[step]
                    previous = quorum_by_step.get(step - 1, [])
                    leaders = {partition_of(r["response"])["leaderId"] for r in records + previous}
                    if len(records) != 1 or len(leaders) != 1:
                        continue  # an election around this snapshot
                    p = partition_of(records[0]["response"])
                    active = fleet.metric(cluster, series, "active_controller_count")
                    assert active == (1.0 if node == p["leaderId"] else 0.0), (cluster, node, at)
                    if active and p["highWatermark"] != -1:
                        assert abs(fleet.metric(cluster, series, "last_committed") + 1 - p["highWatermark"]) <= 10
                    offline = sum(1 for row in partitions_by_step[step] if row["leader"] == -1)
                    assert fleet.metric(cluster, series, "offline") == offline
                else:  # broker: ReplicaManager counts over the partitions it leads
                    led = [row for row in partitions_by_step[step] if row["leader"] == node]
                    minimum = [min(row["min_isr"], len(row["replicas"])) for row in led]
                    expected = {
                        "at_min": sum(len(row["isr"]) == m for row, m in zip(led, minimum)),
                        "under_min": sum(len(row["isr"]) < m for row, m in zip(led, minimum)),
                        "under_replicated": sum(len(row["isr"]) < len(row["replicas"]) for row in led),
                    }
                    assert {k: fleet.metric(cluster, series, k) for k in expected} == expected, (cluster, node, at)
                checked += 1
    assert checked > 3000


# --- scenario signatures --------------------------------------------------------------------------------------------


def test_healthy_cluster_stays_healthy(fleet):
    for r in fleet.ok_quorum("healthy"):
        assert all(lag is not None and lag <= 2000 for lag in caught_up_lags(r["response"]).values())
        assert len(partition_of(r["response"])["observers"]) == ALL.brokers
    for rows in fleet.partitions[fleet.cluster("healthy")].values():
        assert all(row["isr"] == row["replicas"] and row["leader"] == row["replicas"][0] for row in rows)


def test_lagging_voter_signature(fleet):
    start, end = fleet.window("lagging-voter")
    lagging_voters = set()
    for r in fleet.ok_quorum("lagging-voter"):
        lags = caught_up_lags(r["response"])
        at = r["collected_at_ms"]
        if start <= at < end:
            slow = {node for node, lag in lags.items() if lag is not None and lag > 2000}
            assert len(slow) == 1
            lagging_voters |= slow
            lag, lag_ms = expected_max_follower_lag(r["response"])
            assert lag > 0 and lag_ms > 2000
        elif at < start or at > end + 4 * INTERVAL_MS:
            assert all(lag <= 2000 for lag in lags.values())
    assert len(lagging_voters) == 1
    node = lagging_voters.pop()
    in_window = [r for r in fleet.ok_quorum("lagging-voter") if start <= r["collected_at_ms"] < end]
    states = [[v for v in partition_of(r["response"])["currentVoters"] if v["replicaId"] == node][0] for r in in_window]
    assert len({s["lastCaughtUpTimestamp"] for s in states}) == 1  # frozen
    assert len({s["lastFetchTimestamp"] for s in states}) == len(states)  # still fetching
    offsets = [partition_of(r["response"])["highWatermark"] - s["logEndOffset"] for r, s in zip(in_window, states)]
    assert offsets[-1] > offsets[0] > 0  # falling further behind


def test_network_partition_signature(fleet):
    start, end = fleet.window("network-partition")
    cluster = fleet.cluster("network-partition")
    frozen = defaultdict(set)
    for r in fleet.ok_quorum("network-partition"):
        if start < r["collected_at_ms"] < end:
            for v in partition_of(r["response"])["currentVoters"]:
                frozen[v["replicaId"]].add((v["lastFetchTimestamp"], v["lastCaughtUpTimestamp"], v["logEndOffset"]))
    cut_off = [node for node, values in frozen.items() if len(values) == 1]
    assert len(cut_off) == 1
    node = cut_off[0]
    assert list(frozen[node])[0][0] < start
    scraped = [at for at, _ in fleet.metrics[cluster][node]]
    assert not [at for at in scraped if start <= at < end]
    assert [at for at in scraped if at < start] and [at for at in scraped if at >= end]
    last = fleet.ok_quorum("network-partition")[-1]
    assert all(lag <= 2000 for lag in caught_up_lags(last["response"]).values())


def test_leader_election_signature(fleet):
    records = fleet.quorum[fleet.cluster("leader-election")]
    errors = [r for r in records if partition_of(r["response"])["errorCode"] == 6]
    assert len(errors) == 1
    ok = fleet.ok_quorum("leader-election")
    epochs = [partition_of(r["response"])["leaderEpoch"] for r in ok]
    assert epochs == sorted(epochs)
    changes = [i for i in range(1, len(ok)) if epochs[i] > epochs[i - 1]]
    assert len(changes) == 2 and epochs[changes[1]] - epochs[changes[1] - 1] == 2
    leaders = [partition_of(ok[i]["response"])["leaderId"] for i in [0] + changes]
    assert len(set(leaders)) == 3
    for i in changes:  # right after an election, some voter has not fetched yet
        voters = partition_of(ok[i]["response"])["currentVoters"]
        unknown = [v for v in voters if v["logEndOffset"] == -1]
        assert unknown
        assert all(v.get("lastFetchTimestamp", -1) == -1 for v in unknown)
        assert expected_max_follower_lag(ok[i]["response"])[0] == max(v["logEndOffset"] for v in voters) + 1
    assert partition_of(ok[changes[1]]["response"])["highWatermark"] == -1
    assert partition_of(ok[changes[1]]["response"])["observers"] == []
    assert all(v["logEndOffset"] != -1 for v in partition_of(ok[-1]["response"])["currentVoters"])


def test_broker_failure_signature(fleet):
    start, end = fleet.window("broker-failure")
    cluster = fleet.cluster("broker-failure")
    mid = start + (end - start) // 2
    snapshots = sorted(fleet.partitions[cluster].items())
    rf3 = lambda rows: [r for r in rows if len(r["replicas"]) == 3]  # noqa: E731
    first = [rows for at, rows in snapshots if start < at < mid - INTERVAL_MS]
    second = [rows for at, rows in snapshots if mid + INTERVAL_MS < at < end]
    assert first and second
    for rows in first:
        assert any(len(r["isr"]) == r["min_isr"] for r in rf3(rows))
        assert all(len(r["isr"]) >= r["min_isr"] and r["leader"] != -1 for r in rows)
    for rows in second:
        assert any(len(r["isr"]) < r["min_isr"] for r in rf3(rows))
        assert any(r["leader"] == -1 for r in rows)  # an RF-2 partition whose replicas both died
    final = snapshots[-1][1]
    assert all(r["isr"] == r["replicas"] and r["leader"] == r["replicas"][0] for r in final)
    # the dead brokers leave the observer list five minutes after their last fetch, and come back
    observers = [
        (r["collected_at_ms"], {o["replicaId"] for o in partition_of(r["response"])["observers"]})
        for r in fleet.ok_quorum("broker-failure")
    ]
    assert all(ids == {0, 1, 2} for at, ids in observers if at < start or at > end + INTERVAL_MS)
    assert all(ids == {0, 2} for at, ids in observers if start + 301_000 < at < mid)
    assert all(ids == {0} for at, ids in observers if mid + 301_000 < at < end)
    assert all(1 in ids for at, ids in observers if start < at < start + 299_000)


def test_flapping_isr_signature(fleet):
    start, end = fleet.window("flapping-isr")
    sizes = [
        len(r["isr"])
        for at, rows in sorted(fleet.partitions[fleet.cluster("flapping-isr")].items())
        for r in rows
        if (r["topic"], r["partition"]) == ("orders", 0) and start <= at < end
    ]
    assert sizes[:6] == [2, 3, 2, 3, 2, 3]
    assert sum(a != b for a, b in zip(sizes, sizes[1:])) == len(sizes) - 1


def test_metadata_divergence_signature(fleet):
    start, end = fleet.window("metadata-divergence")
    cluster = fleet.cluster("metadata-divergence")
    frozen = []
    for node, scrapes in fleet.metrics[cluster].items():
        if node >= 3000:
            continue
        during = [
            (fleet.metric(cluster, s, "broker_applied"), fleet.metric(cluster, s, "broker_lag_ms"))
            for at, s in scrapes
            if start < at < end
        ]
        offsets = [o for o, _ in during]
        if len(set(offsets)) == 1:
            frozen.append(node)
            lags = [lag for _, lag in during]
            assert lags == sorted(lags) and lags[-1] > 15 * 60_000
            after = [fleet.metric(cluster, s, "broker_applied") for at, s in scrapes if at > end]
            assert after[0] > offsets[0] + 1000
        else:
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert len(frozen) == 1
    committed = [
        fleet.metric(cluster, s, "last_committed")
        for node, scrapes in fleet.metrics[cluster].items()
        for at, s in scrapes
        if start < at < end and fleet.metric(cluster, s, "active_controller_count")
    ]
    assert committed == sorted(committed) and committed[-1] - committed[0] > 1000


def test_quorum_stall_signature(fleet):
    start, end = fleet.window("quorum-stall")
    records = fleet.ok_quorum("quorum-stall")
    stalled = [partition_of(r["response"])["highWatermark"] for r in records if start < r["collected_at_ms"] < end]
    assert len(set(stalled)) == 1 and len(stalled) * INTERVAL_MS > 5_000
    outside = [partition_of(r["response"])["highWatermark"] for r in records if r["collected_at_ms"] < start]
    assert all(b > a for a, b in zip(outside, outside[1:]))
    after = [partition_of(r["response"])["highWatermark"] for r in records if r["collected_at_ms"] > end]
    assert after[0] > stalled[0]
    for r in records:  # followers keep fetching and stay caught up: the log, not replication, is stuck
        if start < r["collected_at_ms"] < end:
            lag, lag_ms = expected_max_follower_lag(r["response"])
            assert lag == 0 and 0 <= lag_ms <= 500


CONTROLLER_HEALTH_METRICS = {
    "raft_current_vote",
    "raft_number_unknown_voter_connections",
    "raft_commit_latency_avg",
    "raft_commit_latency_max",
    "raft_election_latency_avg",
    "raft_election_latency_max",
    "raft_append_records_rate",
    "raft_fetch_records_rate",
    "controller_fenced_broker_count",
    "controller_active_broker_count",
    "controller_metadata_error_count",
    "controller_timed_out_broker_heartbeat_count",
    "controller_active_controller_count",
}


def test_controller_scrapes_carry_the_controller_health_metrics_in_both_namings(fleet):
    """What gold.controller_health reads: every controller scrape of the demo fleet, Strimzi or default names."""
    from quorumlake.silver.prometheus_text import canonical_metric, parse_exposition

    namings = set()
    for path in files(fleet.root / "metrics", r"\.prom(\.gz)?$"):
        samples, errors = parse_exposition(read_text(path))
        assert errors == []
        metrics = {canonical_metric(s["name"], s["labels"])["metric"] for s in samples}
        if "controller_active_controller_count" not in metrics:
            assert {"raft_current_vote", "raft_fetch_records_rate"} <= metrics  # every node runs a raft client
            continue
        assert CONTROLLER_HEALTH_METRICS <= metrics, f"{path.name}: {sorted(CONTROLLER_HEALTH_METRICS - metrics)}"
        namings.add("strimzi" if "raft_current_state" in metrics else "default")
    assert namings == {"strimzi", "default"}


def test_files_are_written_under_a_hidden_name_then_renamed(tmp_path):
    from quorumlake.simulator.writer import LandingWriter

    writer = LandingWriter(tmp_path)
    writer.append_line("q", "quorum/a.jsonl", "one", "describe_quorum_json", compress=False)
    # while a JSON Lines file is still being written, only its hidden temporary name exists
    assert sorted(p.name for p in (tmp_path / "quorum").iterdir()) == [".a.jsonl.tmp"]
    writer.append_line("q", "quorum/b.jsonl", "two", "describe_quorum_json", compress=False)
    writer.append_line("q", "quorum/a.jsonl", "three", "describe_quorum_json", compress=False)
    writer.write_file("quorum/c.status.txt", "LeaderId: 1\n", "quorum_cli_status", compress=True)
    writer.close_all()
    names = sorted(p.name for p in (tmp_path / "quorum").iterdir())
    assert names == ["a.jsonl", "b.jsonl", "c.status.txt.gz"]
    assert (tmp_path / "quorum" / "a.jsonl").read_text() == "one\nthree\n"
