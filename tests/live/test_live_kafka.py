"""End to end on a real Apache Kafka KRaft cluster (3 controllers, 3 brokers on 127.0.0.1) with injected faults.

Phases: healthy; broker 6 stopped; broker 5 stopped too; both restarted; a follower controller stopped and
restarted; the leader controller stopped (election) and restarted. In each phase, once the cluster has reached the
phase's state, `quorumlake collect` polls it and the real `kafka-metadata-quorum describe --status` /
`--replication` and `kafka-topics --describe` outputs are captured into the landing zone (contract layout); the
`kafka-topics` report listings (`--at-min-isr-partitions`, ...) are kept beside it as the expected counts. A second
"cluster" that nothing answers for is collected too: its error records must end in quarantine with their reasons.
Each fault (the brokers stopped, a follower controller stopped, the leader controller stopped) must come out as
exactly one gold.incidents row naming the node it stopped, with the peak partition counts the phase's `kafka-topics`
listings show, closed in the phase that repaired it, and no incident in the other phases; gold.quorum_events' voter
events must be the changes of the voter sets `describe --status` printed. A second, lean run does the same on a
dynamic quorum (KIP-853: controllers formatted with `--initial-controllers`): a spare controller added with
`add-controller`, a follower removed with `remove-controller` (then listed as an observer: a removed voter, not a
failing observer), the leader stopped and restarted.

The pipeline runs once through its command line (`quorumlake run`, in the test process: `make test` runs this file
first on one of its workers, whose Spark session the run starts and every later file there reuses warm, while the
Kafka phases, which leave the cores mostly idle, run beside the other worker's first file) and its tables are read
back by an independent Delta reader (delta-rs, as another engine or a BI tool's connector reads them): no internal
Python API. Gold must agree with what Kafka's tools printed. (A `quorumlake run` process and `quorumlake sql` reads
would add two cold JVMs to the suite; that command and its JSON are tested in tests/e2e/test_gold_e2e.py.)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest

from quorumlake.contract.kafka import release_of_metadata_level
from quorumlake.contract.tables import (
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_BROKER_REGISTRATIONS,
    GOLD_CONTROLLER_HEALTH,
    GOLD_INCIDENTS,
    GOLD_ISR_HEALTH,
    GOLD_ISR_HEALTH_BY_TOPIC,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_QUORUM_EVENTS,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_QUORUM_STATUS,
    GOLD_REPLICA_LAG_SLI,
    SILVER_QUARANTINE,
    SILVER_QUORUM_SNAPSHOTS,
)
from quorumlake.pipelines.app import cli
from tests import read_back
from tests.helpers import free_port
from tests.live.kafka_cluster import KAFKA_VERSION, METADATA_QUORUM, TOPICS, KafkaCluster, fetch

pytestmark = pytest.mark.live_kafka

BIN = Path(sys.executable).parent
TOPIC_SPECS = [  # name, partitions, replication factor, min.insync.replicas override (None: the cluster's 2)
    ("orders", 3, 3, "2"),
    ("payments", 3, 3, None),
    ("audit", 2, 2, "1"),
]
RF3_TOPICS = {"orders", "payments"}
SLO_MS = 2000
# The phases are seconds apart, so the run groups anomalies into incidents without a grace period (the default 2
# minutes would join consecutive phases): each fault phase is then its own incident.
RUN_SETTINGS = ["--set", "incident_grace_minutes=0"]
UNREACHABLE = "unreachable"
DENIED = "denied"
UNTRUSTED = "untrusted"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def log(message: str) -> None:
    print(f"[live-kafka {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- reading the tools' output (only to wait for states; the assertions compare with the pipeline) -------------


def partition_lines(text: str) -> dict[tuple[str, int], dict]:
    out = {}
    for line in text.splitlines():
        fields = dict(part.split(":", 1) for part in line.strip().split("\t") if ":" in part)
        if "Partition" in fields:
            isr = fields["Isr"].strip()
            out[(fields["Topic"].strip(), int(fields["Partition"]))] = {
                "leader": fields["Leader"].strip(),
                "replicas": [int(x) for x in fields["Replicas"].strip().split(",")],
                "isr": [int(x) for x in isr.split(",")] if isr else [],
            }
    return out


def status_values(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


@dataclass
class Phase:
    name: str
    started_ms: int
    ended_ms: int | None = None
    pairs: list[dict] = field(default_factory=list)  # status+replication captures at one time
    status_only: list[dict] = field(default_factory=list)
    topics: list[dict] = field(default_factory=list)


class Scenario:
    def __init__(self, cluster: KafkaCluster, root: Path):
        self.cluster = cluster
        self.landing = root / "landing"
        self.listings = root / "listings"
        self.listings.mkdir(parents=True)
        self.phases: list[Phase] = []
        self.cid = cluster.cluster_id

    # --- tools ---------------------------------------------------------------------------------------------

    def run_tool(self, target: Path, main: str, *args: str) -> str:
        """Run a tool into `target` atomically (temporary name starting with '.', then rename)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        code = self.cluster.tool(temporary, main, *args, timeout_s=60)
        text = temporary.read_text(encoding="utf-8")
        assert code == 0, f"{main} {' '.join(args)} exited {code}: {text[-300:]}"
        os.replace(temporary, target)
        return text

    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers()

    def create_topic(self, folder: Path, name: str, partitions: int, rf: int, min_isr: str | None) -> None:
        """kafka-topics --create (with min.insync.replicas when given), its output kept in `folder`."""
        self.run_tool(
            folder / f"create-{name}.txt",
            TOPICS,
            "--bootstrap-server",
            self.bootstrap(),
            "--create",
            "--topic",
            name,
            "--partitions",
            str(partitions),
            "--replication-factor",
            str(rf),
            *(["--config", f"min.insync.replicas={min_isr}"] if min_isr else []),
        )

    def describe_topics(self) -> str:
        return self.cluster.tool_text(TOPICS, "--bootstrap-server", self.bootstrap(), "--describe")[1]

    def status(self) -> dict[str, str]:
        code, text = self.cluster.tool_text(
            METADATA_QUORUM, "--bootstrap-server", self.bootstrap(), "describe", "--status"
        )
        return status_values(text) if code == 0 else {}

    def wait_for(self, what: str, predicate, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")

    def wait_isr(self, down: set[int]) -> None:
        """Until every partition's ISR is exactly its replicas on running brokers (as far as any can be)."""

        def settled() -> bool:
            parts = partition_lines(self.describe_topics())
            if len(parts) != sum(n for _, n, _, _ in TOPIC_SPECS):
                return False
            for p in parts.values():
                alive = sorted(r for r in p["replicas"] if r not in down)
                # with Eligible Leader Replicas the ISR shrinks to the live replicas, even below min ISR, and a
                # partition without a live replica has an empty ISR and no leader
                if sorted(p["isr"]) != alive or (p["leader"] == "none") != (not alive):
                    return False
            return True

        self.wait_for(f"ISRs without brokers {sorted(down)}", settled)

    # --- captures ------------------------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    def begin(self, name: str) -> None:
        if self.phases:
            self.phases[-1].ended_ms = now_ms()
        self.phases.append(Phase(name, now_ms()))
        log(f"phase {name}")

    def capture_quorum(self) -> None:
        folder = self.landing / "quorum" / f"cluster={self.cid}"
        bootstrap = self.bootstrap()
        at = now_ms()
        status = self.run_tool(
            folder / f"{at}.status.txt", METADATA_QUORUM, "--bootstrap-server", bootstrap, "describe", "--status"
        )
        started = now_ms()
        human = len(self.phases) % 2 == 0  # every other phase with --human-readable
        self.run_tool(
            folder / f"{at}.replication.txt",
            METADATA_QUORUM,
            "--bootstrap-server",
            bootstrap,
            "describe",
            "--replication",
            *(["--human-readable"] if human else []),
        )
        self.phase.pairs.append(
            {"at": at, "gap_ms": now_ms() - at, "status": status_values(status), "replication_started_ms": started}
        )
        alone = max(now_ms(), at + 1)
        status = self.run_tool(
            folder / f"{alone}.status.txt",
            METADATA_QUORUM,
            "--bootstrap-controller",
            self.cluster.bootstrap_controllers(),
            "describe",
            "--status",
        )
        self.phase.status_only.append({"at": alone, "status": status_values(status)})

    def capture_partitions(self) -> None:
        bootstrap = self.bootstrap()
        for _ in range(5):
            at = now_ms()
            folder = self.listings / str(at)
            before = self.run_tool(folder / "describe.txt", TOPICS, "--bootstrap-server", bootstrap, "--describe")
            listings = {}
            for flag in ("at-min-isr", "under-min-isr", "unavailable", "under-replicated"):
                text = self.run_tool(
                    folder / f"{flag}.txt",
                    TOPICS,
                    "--bootstrap-server",
                    bootstrap,
                    "--describe",
                    f"--{flag}-partitions",
                )
                listings[flag] = len(partition_lines(text))
            after = self.describe_topics()
            if partition_lines(before) == partition_lines(after):  # nothing moved while the listings were taken
                target = self.landing / "partitions" / f"cluster={self.cid}" / f"{at}.topics.txt"
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(folder / "describe.txt", target)
                self.phase.topics.append(
                    {"at": at, "partitions": len(partition_lines(before)), **listings, "lines": partition_lines(before)}
                )
                return
            time.sleep(0.5)
        raise AssertionError("the partition states kept changing while the listings were captured")

    def collect(self, count: int = 2, controller: bool = False) -> None:
        urls = [
            arg
            for n in self.cluster.nodes.values()
            if n.running
            for arg in ("--metrics-url", f"{n.node_id}={n.metrics_url}")
        ]
        target = (
            ["--bootstrap-controller", self.cluster.bootstrap_controllers(running_only=False)]
            if controller
            else ["--bootstrap-server", self.cluster.bootstrap_servers(running_only=False)]
        )
        result = subprocess.run(
            [
                str(BIN / "quorumlake"),
                "collect",
                *target,
                *urls,
                "--landing",
                str(self.landing),
                "--count",
                str(count),
                "--interval-s",
                "1",
                "--timeout-s",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stderr.splitlines() if "poll " in line]
        assert len(lines) == count, result.stderr
        assert all("failed" not in line for line in lines), result.stderr
        if not controller:
            assert all(f"scrapes {len(urls) // 2}/{len(urls) // 2}" in line for line in lines), result.stderr
        log(lines[-1].replace("[quorumlake] ", "collect "))

    def moment(self, controller_collect: bool = False, polls: int = 2) -> None:
        self.capture_quorum()
        self.capture_partitions()
        self.collect(count=polls)
        if controller_collect:
            self.collect(count=1, controller=True)

    def collect_over_sasl(self, root: Path) -> None:
        """Through the brokers' SASL_PLAINTEXT listener with a client properties file; with a wrong password,
        every capture becomes an error record (cluster id `denied`) and the collector keeps going."""
        good = self.cluster.sasl_client_config(root / "sasl.properties")
        bad = self.cluster.sasl_client_config(root / "sasl-wrong.properties", password="wrong")
        for config, extra, polls in [(good, [], 1), (bad, ["--cluster-id", DENIED], 2)]:
            result = subprocess.run(
                [
                    str(BIN / "quorumlake"),
                    "collect",
                    "--bootstrap-server",
                    self.cluster.sasl_bootstrap_servers(),
                    "--command-config",
                    str(config),
                    *extra,
                    "--landing",
                    str(self.landing),
                    "--count",
                    str(polls),
                    "--interval-s",
                    "0.5",
                    "--timeout-s",
                    "5",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
            if config == good:
                assert f"poll 1 ({self.cid}): quorum v2 leader" in result.stderr, result.stderr
                assert "partitions 8 written" in result.stderr, result.stderr
            else:
                assert result.stderr.count("SASL authentication failed") >= 2, result.stderr
        log("collect over SASL/PLAIN: ok; with a wrong password: recorded as errors")

    def collect_over_tls(self, root: Path) -> None:
        """Through the brokers' SSL listener trusting their certificate (PEM); without trusting it, every capture
        becomes an error record (cluster id `untrusted`)."""
        good = self.cluster.tls_client_config(root / "tls.properties")
        untrusted = root / "tls-untrusted.properties"
        untrusted.write_text("security.protocol=SSL\n", encoding="utf-8")
        for config, extra in [(good, []), (untrusted, ["--cluster-id", UNTRUSTED])]:
            result = subprocess.run(
                [
                    str(BIN / "quorumlake"),
                    "collect",
                    "--bootstrap-server",
                    self.cluster.tls_bootstrap_servers(),
                    "--command-config",
                    str(config),
                    *extra,
                    "--landing",
                    str(self.landing),
                    "--count",
                    "1",
                    "--timeout-s",
                    "5",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
            if config == good:
                assert f"poll 1 ({self.cid}): quorum v2 leader" in result.stderr, result.stderr
                assert "partitions 8 written" in result.stderr, result.stderr
            else:
                assert "TLS handshake failed" in result.stderr, result.stderr
        log("collect over TLS: ok; with an untrusted certificate: recorded as errors")

    def collect_unreachable(self) -> None:
        """A cluster nothing answers for: every capture becomes an error record; the collector keeps going."""
        port = free_port()  # nothing listens on it
        result = subprocess.run(
            [
                str(BIN / "quorumlake"),
                "collect",
                "--bootstrap-server",
                f"127.0.0.1:{port}",
                "--metrics-url",
                f"9=http://127.0.0.1:{port}/metrics",
                "--cluster-id",
                UNREACHABLE,
                "--landing",
                str(self.landing),
                "--count",
                "2",
                "--interval-s",
                "0.2",
                "--timeout-s",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr.count("quorum failed") == 2, result.stderr


# --- the pipeline, through its command line only --------------------------------------------------------------


TABLES = [
    GOLD_INCIDENTS,
    GOLD_QUORUM_EVENTS,
    GOLD_QUORUM_MEMBERSHIP,
    GOLD_QUORUM_STATUS,
    GOLD_ISR_HEALTH,
    GOLD_ISR_HEALTH_BY_TOPIC,
    GOLD_AT_MIN_ISR_EPISODES,
    GOLD_METADATA_OFFSET_DIVERGENCE,
    GOLD_REPLICA_LAG_SLI,
    GOLD_CONTROLLER_HEALTH,
    GOLD_BROKER_REGISTRATIONS,
    SILVER_QUARANTINE,
    SILVER_QUORUM_SNAPSHOTS,
]


def read_lakehouse(warehouse: Path) -> dict[str, list[dict]]:
    """Every table the test checks, as rows of {column: value}, read by delta-rs (timestamps naive UTC)."""
    return {spec.name: read_back.rows(read_back.table_path(warehouse, spec)) for spec in TABLES}


def ms(timestamp: datetime | None) -> int | None:
    """Epoch milliseconds of a timestamp as read back (naive UTC)."""
    if timestamp is None:
        return None
    return round(timestamp.replace(tzinfo=timezone.utc).timestamp() * 1000)


def run_pipeline(s: Scenario, tmp_path: Path, request) -> dict[str, list[dict]]:
    """`quorumlake run` over the scenario's landing zone (in the test process), and the tables read back."""
    warehouse = tmp_path / "warehouse"
    run_started = time.monotonic()
    request.getfixturevalue("spark")  # the suite's session, started only now that the cluster is gone
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        code = cli.main(["run", "--landing", str(s.landing), "--warehouse", str(warehouse), *RUN_SETTINGS])
    assert code == 0, f"quorumlake run exited {code}:\n{summary.getvalue()[-3000:]}"
    log(f"quorumlake run took {time.monotonic() - run_started:.0f}s:\n{summary.getvalue()}")
    return read_lakehouse(warehouse)


# --- the test --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    artifacts = fetch(log=log)
    kafka = KafkaCluster(tmp_path_factory.mktemp("kafka"), artifacts, log=log)
    try:
        # controller 1's port taken before the start, as any process can take one between the pick and the bind:
        # the cluster starts again on fresh ports (test_a_port_taken_before_the_start_is_replaced)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
            squatter.bind(("127.0.0.1", kafka.nodes[1].port))
            squatter.listen()
            kafka.start()
        yield kafka
    finally:
        kafka.close()


def kafka_version(cluster: KafkaCluster) -> str:
    text = cluster.nodes[4].server_log.read_text(errors="replace")
    found = re.search(r"Kafka version: (\S+)", text)
    return found.group(1) if found else "unknown"


@dataclass
class Live:
    scenario: Scenario
    tables: dict[str, list[dict]]
    follower_down: tuple[int, int]
    stopped: dict[str, int]  # fault phase -> the controller it stopped
    frozen: tuple[int, int, int]  # (follower, from, until): not fetching in that time
    survivor: int  # the controller left alone when the other two stopped


# --- Kafka 4.x signals (issue #49): a frozen follower controller, a topic whose min ISR exceeds its replicas ----


MISCONFIGURED = ("misconfigured", 2, 2, "3")  # 2 replicas, min.insync.replicas 3 (KIP-966: effective min ISR 2)


def drive_kafka_4x_faults(s: Scenario, cluster: KafkaCluster, tmp_path: Path) -> tuple[int, int, int]:
    """Two phases at the end: a follower controller frozen (SIGSTOP) past controller.quorum.fetch.timeout.ms (2 s,
    the default) and then let go (SIGCONT); a topic created with 2 replicas and min.insync.replicas 3. Returns the
    frozen follower and the span in which every capture saw it not fetching."""
    leader = int(s.status()["LeaderId"])
    follower = next(i for i in (1, 2, 3) if i != leader)
    s.begin("follower-controller-frozen")
    cluster.pause_node(follower)
    s.wait_for(
        "the frozen follower to stop fetching", lambda: int(s.status().get("MaxFollowerLagTimeMs", "0")) > SLO_MS + 1500
    )
    frozen_from = now_ms()
    s.moment()
    frozen_until = now_ms()
    cluster.resume_node(follower)
    s.wait_for("the follower to catch up again", lambda: s.status().get("MaxFollowerLag") in ("0", "1"))

    # a broker frozen past broker.session.timeout.ms (4 s here): the active controller fences it, and registers it
    # active again once it heartbeats after SIGCONT
    s.begin("broker-6-frozen")
    cluster.pause_node(6)
    s.wait_for("broker 6 fenced", lambda: FENCED_STATE in _registration(cluster, 6))
    s.wait_isr({6})
    s.moment()
    s.begin("broker-6-resumed")
    cluster.resume_node(6)
    s.wait_for("broker 6 active again", lambda: _registration(cluster, 6) == {ACTIVE_STATE})
    s.wait_isr(set())
    s.moment()

    s.begin("misconfigured-topic")
    name, partitions, rf, _ = MISCONFIGURED
    s.create_topic(tmp_path, *MISCONFIGURED)

    def settled() -> bool:
        lines = [p for (topic, _), p in partition_lines(s.describe_topics()).items() if topic == name]
        return len(lines) == partitions and all(len(p["isr"]) == rf for p in lines)

    s.wait_for(f"{name}'s ISRs to be full", settled)
    s.moment()
    return follower, frozen_from, frozen_until


FENCED_STATE, ACTIVE_STATE = 10, 30  # KafkaController BrokerRegistrationState (KIP-1131)
REGISTRATION_NAMES = {-1: "unregistered", 10: "fenced", 20: "controlled_shutdown", 30: "active"}


def _gauge(text: str, name: str, broker: int | None = None) -> float | None:
    """A KafkaController gauge in a scrape, in either exporter naming (Strimzi-style or the default), for `broker`."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        lowered = line.lower()
        if f"kafkacontroller_{name.lower()}" not in lowered and f'name="{name.lower()}"' not in lowered:
            continue
        if broker is not None and f'broker="{broker}"' not in line:
            continue
        return float(line.rsplit(" ", 1)[1])
    return None


def _registration(cluster: KafkaCluster, broker: int) -> set[int]:
    """The BrokerRegistrationState values the running controllers report for `broker` now (every controller
    replays the registrations; a controller that restarted reports none until they change)."""
    values = set()
    for node in cluster.controllers():
        if not node.running:
            continue
        with urllib.request.urlopen(node.metrics_url, timeout=5) as response:
            value = _gauge(response.read().decode("utf-8"), "BrokerRegistrationState", broker)
        if value is not None:
            values.add(int(value))
    return values


SURVIVOR = 2  # the controller whose exporter uses Strimzi-style rules, which keep raft-metrics' current-state
PRE_VOTE_STATES = ("prospective", "prospective-voted")


def _raft_state(text: str) -> str | None:
    found = re.search(r'^kafka_server_raftmetrics_current_state\{current_state="([^"]+)"\} 1\.0$', text, re.M)
    return found.group(1) if found else None


def stop_a_controller_majority(s: Scenario, cluster: KafkaCluster) -> int:
    """The last fault: controllers 1 and 3 stop, so the quorum has no majority; controller 2 is left alone and, on
    Kafka 4.x (KIP-996), keeps asking for pre-votes it cannot get. Nothing answers DescribeQuorum any more, so its
    scrapes are taken here and written as the collector writes them (the exporter's body, unchanged)."""
    log("controllers 1 and 3 stopping: no majority")
    for node in (1, 3):
        cluster.stop_node(node)
    url = cluster.nodes[SURVIVOR].metrics_url
    folder = s.landing / "metrics" / f"cluster={s.cid}" / f"node={SURVIVOR}"
    folder.mkdir(parents=True, exist_ok=True)
    states = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(state in PRE_VOTE_STATES for state in states) < 3:
        at = now_ms()
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read()
        temporary = folder / f".{at}.prom.tmp"
        temporary.write_bytes(body)
        os.replace(temporary, folder / f"{at}.prom")
        states.append(_raft_state(body.decode("utf-8")))
        time.sleep(1)
    log(f"controller {SURVIVOR} alone reports: {', '.join(str(x) for x in states)}")
    assert any(state in PRE_VOTE_STATES for state in states), states
    return SURVIVOR


@pytest.fixture(scope="module")
def live(cluster, tmp_path_factory, request) -> Live:
    """Drive the cluster through the phases, run the pipeline once, read gold once; the tests below check it."""
    tmp_path = tmp_path_factory.mktemp("live")
    started = time.monotonic()
    version = kafka_version(cluster)
    log(f"Apache Kafka {version} (Maven Central artifacts {cluster.artifacts.version}), cluster {cluster.cluster_id}")
    s = Scenario(cluster, tmp_path)
    for spec in TOPIC_SPECS:
        s.create_topic(tmp_path, *spec)

    s.begin("healthy")
    s.wait_isr(set())
    s.moment(controller_collect=True, polls=3)
    s.collect_over_sasl(tmp_path)
    s.collect_over_tls(tmp_path)

    s.begin("broker-6-stopped")
    cluster.stop_node(6)
    s.wait_isr({6})
    s.moment()

    s.begin("brokers-5-6-stopped")
    cluster.stop_node(5)
    s.wait_isr({5, 6})
    s.moment()

    s.begin("brokers-restarted")
    cluster.start_node(5, wait=False)
    cluster.start_node(6, wait=False)
    cluster.wait_started(5, time.monotonic() + 120)
    cluster.wait_started(6, time.monotonic() + 120)
    s.wait_isr(set())
    s.moment()

    leader = int(s.status()["LeaderId"])
    follower = next(i for i in (1, 2, 3) if i != leader)
    s.begin("follower-controller-stopped")
    stopped_at = now_ms()
    cluster.stop_node(follower)
    # past the SLO (2000 ms) by a margin: the stopped voter's lastCaughtUp freezes
    s.wait_for("the stopped follower to lag", lambda: int(s.status().get("MaxFollowerLagTimeMs", "0")) > SLO_MS + 1500)
    s.moment()
    follower_down = (stopped_at + SLO_MS + 1000, None)

    s.begin("follower-controller-restarted")
    cluster.start_node(follower)
    s.wait_for("the follower to catch up", lambda: s.status().get("MaxFollowerLag") in ("0", "1"))
    follower_down = (follower_down[0], s.phase.started_ms)
    s.moment()

    s.begin("leader-controller-stopped")
    cluster.stop_node(leader)
    s.wait_for("a new leader", lambda: s.status().get("LeaderId") not in (None, str(leader), "-1"))
    s.moment(controller_collect=True)

    s.begin("leader-controller-restarted")
    cluster.start_node(leader)

    def caught_up() -> bool:
        status = s.status()
        return status.get("MaxFollowerLag") in ("0", "1") and status.get("MaxFollowerLagTimeMs") != "-1"

    s.wait_for("the old leader to catch up", caught_up)
    s.moment()
    frozen = drive_kafka_4x_faults(s, cluster, tmp_path)
    s.phase.ended_ms = now_ms()
    survivor = stop_a_controller_majority(s, cluster)
    s.collect_unreachable()
    kafka_s = time.monotonic() - started
    # the pipeline needs the CPU, and nothing more is read from the cluster: killed at once, not shut down node by
    # node; the fixture's close() afterwards does nothing more
    cluster.close(graceful=False)
    log(f"captures done in {kafka_s:.0f}s; cluster stopped; running the pipeline")

    tables = run_pipeline(s, tmp_path, request)
    log(
        f"Apache Kafka {version}: phases, pipeline and queries took {time.monotonic() - started:.0f}s "
        f"(Kafka phases {kafka_s:.0f}s)"
    )
    return Live(
        s,
        tables,
        follower_down,
        {"follower-controller-stopped": follower, "leader-controller-stopped": leader},
        frozen,
        survivor,
    )


# --- checks ----------------------------------------------------------------------------------------------------


def test_a_port_taken_before_the_start_is_replaced(cluster):
    first = cluster.workdir / "attempt-1" / "node-1"
    taken = re.search(r"listeners=CONTROLLER://127\.0\.0\.1:(\d+)", (first / "server.properties").read_text())
    assert taken is not None
    assert "Address already in use" in (first / "logs" / "server.log").read_text(errors="replace")
    assert cluster.nodes[1].port != int(taken.group(1))
    assert not (cluster.workdir / "attempt-2").exists()


def test_nothing_quarantined_but_the_collectors_error_records(live):
    check_nothing_quarantined_but_the_unreachable_cluster(live.tables, live.scenario.cid)


def test_quorum_status_equals_what_kafka_metadata_quorum_printed(live):
    check_quorum_status(live.tables, live.scenario)


def test_isr_health_equals_the_kafka_topics_listings(live):
    check_isr_health(live.tables, live.scenario)


def test_at_min_isr_episodes_open_escalate_and_close(live):
    check_at_min_isr_episodes(live.tables, live.scenario)


def test_stopped_follower_controller_leaves_the_slo(live):
    check_follower_leaves_the_slo(live.tables, live.scenario, live.follower_down)


def test_every_node_has_small_divergence_while_healthy(live):
    check_divergence(live.tables, live.scenario)


def test_frozen_follower_controller_is_not_fetching(live):
    check_voters_not_fetching(live.tables, live.scenario, live.frozen)


def test_a_topic_with_min_isr_above_its_replicas_in_both_min_isr_views(live):
    check_both_min_isr_views(live.tables, live.scenario)


def test_broker_registrations_equal_the_active_controllers_scrapes(live):
    check_broker_registrations(live.tables, live.scenario)


def test_a_controller_without_a_majority_shows_in_a_pre_vote_state(live):
    check_pre_vote_scrapes(live.tables, live.scenario, live.survivor)


def check_nothing_quarantined_but_the_unreachable_cluster(tables, cid):
    quarantine = tables["silver.quarantine"]

    def cluster_of(q):
        return next((c for c in (UNREACHABLE, DENIED, UNTRUSTED) if f"cluster={c}/" in (q["source_file"] or "")), None)

    live = [q for q in quarantine if cluster_of(q) is None]
    assert live == [], f"quarantined from the live cluster: {live[:3]}"
    unreachable = [q for q in quarantine if cluster_of(q) == UNREACHABLE]
    reasons = {q["target_table"]: q["reason"] for q in unreachable}
    assert set(reasons) == {"silver.quorum_snapshots", "silver.partition_states", "silver.node_metrics"}, reasons
    assert "missing field 'response'" in reasons["silver.quorum_snapshots"]
    assert "no samples in the scrape" in reasons["silver.node_metrics"]
    assert "refused" in " ".join(q["record"] for q in unreachable).lower()  # the collector's reason is kept
    denied = [q for q in quarantine if cluster_of(q) == DENIED]
    assert {q["target_table"] for q in denied} == {"silver.quorum_snapshots", "silver.partition_states"}, denied
    assert all("SASL authentication failed" in q["record"] for q in denied), denied
    untrusted = [q for q in quarantine if cluster_of(q) == UNTRUSTED]
    assert {q["target_table"] for q in untrusted} == {"silver.quorum_snapshots", "silver.partition_states"}
    assert all("TLS handshake failed" in q["record"] for q in untrusted), untrusted
    snapshots = [r for r in tables["silver.quorum_snapshots"] if r["cluster_id"] == cid]
    assert {r["source"] for r in snapshots} == {"admin", "cli"}
    assert {r["api_version"] for r in snapshots if r["source"] == "admin"} == {2}
    # what the collector recorded of the answering node: its release, named by the highest metadata.version it
    # supports, the cluster's finalized metadata.version (the release's latest: the storage was formatted with its
    # default), and kraft.version 0, which Kafka does not list: the quorum is static (controller.quorum.voters)
    admin = [r for r in snapshots if r["source"] == "admin"]
    release = ".".join(KAFKA_VERSION.split(".")[:2])
    assert {(r["kafka_version"], r["kraft_version"]) for r in admin} == {(release, 0)}
    assert {release_of_metadata_level(r["metadata_version_level"]) for r in admin} == {release}


def _status_rows(tables, cid):
    return {ms(r["collected_at"]): r for r in tables["gold.quorum_status"] if r["cluster_id"] == cid}


def check_quorum_status(tables, s: Scenario):
    rows = _status_rows(tables, s.cid)
    checked = 0
    for phase in s.phases:
        for capture in phase.status_only:  # no --replication at that time: gold takes what --status printed
            row, printed = rows[capture["at"]], capture["status"]
            assert (
                row["leader_id"],
                row["leader_epoch"],
                row["high_watermark"],
                row["max_follower_lag"],
                row["max_follower_lag_time_ms"],
            ) == (
                int(printed["LeaderId"]),
                int(printed["LeaderEpoch"]),
                int(printed["HighWatermark"]),
                int(printed["MaxFollowerLag"]),
                int(printed["MaxFollowerLagTimeMs"]),
            ), (phase.name, row, printed)
            checked += 1
        for capture in phase.pairs:
            # gold computes the numbers from the --replication rows (taken gap_ms after --status printed its own
            # DescribeQuorum answer), with --status giving the voters' response order: they agree up to what
            # the quorum did in between (about 2 records per second, and the leader's clock moving on)
            row, printed = rows[capture["at"]], capture["status"]
            lag, lag_ms = int(printed["MaxFollowerLag"]), int(printed["MaxFollowerLagTimeMs"])
            gap_s = capture["gap_ms"] / 1000
            context = (phase.name, capture["gap_ms"], row, printed)
            assert (row["leader_id"], row["leader_epoch"]) == (int(printed["LeaderId"]), int(printed["LeaderEpoch"]))
            if lag_ms == -1:
                assert row["max_follower_lag_time_ms"] == -1, context
            else:
                assert abs(row["max_follower_lag_time_ms"] - lag_ms) <= capture["gap_ms"] + 600, context
            assert abs(row["max_follower_lag"] - lag) <= 4 * gap_s + 4, context
            assert row["voters"] == 3 and row["source"] == "cli", context
            checked += 1
    assert checked == 2 * len(s.phases)


def check_isr_health(tables, s: Scenario):
    isr = {ms(r["collected_at"]): r for r in tables["gold.isr_health"] if r["cluster_id"] == s.cid}
    for phase in s.phases:
        for capture in phase.topics:
            row = isr[capture["at"]]
            expected = {
                "partitions": capture["partitions"],
                "at_min_isr": capture["at-min-isr"],
                "under_min_isr": capture["under-min-isr"],
                "offline": capture["unavailable"],
                "under_replicated": capture["under-replicated"],
            }
            assert {k: row[k] for k in expected} == expected, (phase.name, row, expected)
            # the collector's own snapshots of the same phase (the state had settled) count the same
            collected = [
                r
                for at, r in isr.items()
                if phase.started_ms <= at <= (phase.ended_ms or at) and at not in {c["at"] for c in phase.topics}
            ]
            assert collected, phase.name
            for r in collected:
                assert {k: r[k] for k in expected} == expected, (phase.name, "collector", r, expected)
    by_phase = {p.name: p.topics[0] for p in s.phases}
    assert by_phase["healthy"]["at-min-isr"] == 0 and by_phase["healthy"]["under-replicated"] == 0
    assert by_phase["broker-6-stopped"]["at-min-isr"] > 0
    assert by_phase["brokers-5-6-stopped"]["under-min-isr"] > 0


def check_at_min_isr_episodes(tables, s: Scenario):
    phases = {p.name: p for p in s.phases}
    one_down, two_down, back = phases["broker-6-stopped"], phases["brokers-5-6-stopped"], phases["brokers-restarted"]
    episodes = [e for e in tables["gold.at_min_isr_episodes"] if e["cluster_id"] == s.cid]
    # the brokers' phases (the Kafka 4.x faults after them open episodes of their own: broker 6 frozen)
    later = phases["follower-controller-frozen"].started_ms
    rf3 = [e for e in episodes if e["topic"] in RF3_TOPICS and ms(e["started_at"]) < later]
    partitions = {(e["topic"], e["partition"]) for e in rf3}
    assert partitions == {(t, p) for t, n, rf, _ in TOPIC_SPECS if t in RF3_TOPICS for p in range(n)}, episodes
    for e in rf3:
        assert one_down.started_ms <= ms(e["started_at"]) < two_down.started_ms, e  # opened with one broker down
        assert e["escalated"] is True, e  # under min ISR once the second broker stopped
        assert e["ended_at"] is not None and back.started_ms <= ms(e["ended_at"]) <= back.ended_ms, e  # closed
    listed = {
        k
        for k in one_down.topics[0]["lines"]
        if len(one_down.topics[0]["lines"][k]["isr"]) == (2 if k[0] in RF3_TOPICS else 1)
    }
    opened = {(e["topic"], e["partition"]) for e in episodes if ms(e["started_at"]) < two_down.started_ms}
    assert listed <= opened, (listed, opened)
    # (the misconfigured topic, created last, is at its effective min ISR for good: its episodes stay open)
    assert all(e["ended_at"] is not None for e in episodes if e["topic"] != MISCONFIGURED[0]), (
        "an AtMinIsr episode is still open at the end"
    )


def check_follower_leaves_the_slo(tables, s: Scenario, window):
    rows = _status_rows(tables, s.cid)
    down = [r for at, r in rows.items() if window[0] <= at < window[1]]
    assert down, "no quorum snapshot while the follower controller was down"
    for r in down:
        assert r["voters_within_slo"] in (2, None), r  # None: a --status capture alone (no replica rows)
        assert r["is_good"] is False and r["max_follower_lag_time_ms"] > SLO_MS, r
    assert any(r["voters_within_slo"] == 2 for r in down)
    back = s.phases[[p.name for p in s.phases].index("follower-controller-restarted")]
    after = [r for at, r in rows.items() if back.started_ms <= at <= back.ended_ms and r["voters_within_slo"]]
    assert after and all(r["voters_within_slo"] == 3 for r in after), after


def check_divergence(tables, s: Scenario):
    rows = [r for r in tables["gold.metadata_offset_divergence"] if r["cluster_id"] == s.cid]
    assert {r["node_id"] for r in rows} == {1, 2, 3, 4, 5, 6}
    healthy = s.phases[0]
    for node in range(1, 7):
        mine = [
            r for r in rows if r["node_id"] == node and healthy.started_ms <= ms(r["scraped_at"]) <= healthy.ended_ms
        ]
        assert mine and all(r["divergence_records"] is not None for r in mine), (node, mine)
        # NoOpRecords every 500 ms; scrapes of one poll are milliseconds apart
        assert all(abs(r["divergence_records"]) <= 20 for r in mine), (node, mine)
    roles = {r["node_id"]: r["node_role"] for r in rows}
    assert roles == {1: "controller", 2: "controller", 3: "controller", 4: "broker", 5: "broker", 6: "broker"}


# --- incidents and the membership ledger (issue #50) -------------------------------------------------------------


def test_each_fault_phase_is_one_incident_naming_the_node_it_stopped(live):
    phases = {"broker-6-stopped", "brokers-5-6-stopped"}
    faults = [
        Fault(("broker-6-stopped", "brokers-5-6-stopped"), "brokers-restarted", "broker_down", 6, {5, 6}),
        *(
            Fault((name,), name.replace("stopped", "restarted"), "controller_down", node, {node})
            for name, node in live.stopped.items()
        ),
    ]
    assert phases | set(live.stopped) == {p.name for p in live.scenario.phases if "stopped" in p.name}
    # the Kafka 4.x faults that follow (issue #49's frozen nodes, misconfigured topic, stopped majority) are not these
    later = next(p for p in live.scenario.phases if p.name == "follower-controller-frozen")
    check_incidents(live.tables, live.scenario, faults, before_ms=later.started_ms)


def test_membership_events_equal_the_voter_sets_kafka_printed(live):
    assert check_voter_events(live.tables, live.scenario) == []  # a static quorum: the voters never change


@dataclass
class Fault:
    phases: tuple[str, ...]  # consecutive phases with the fault
    repair: str  # the phase that repairs it
    trigger: str
    node: int  # the node it stopped first
    nodes: set[int]  # every node it stopped


def check_incidents(tables, s: Scenario, faults: list[Fault], before_ms: int | None = None) -> None:
    """Each fault maps to exactly one incident: started in its phases, triggered by the node it stopped first, naming
    every node it stopped, with the peak partition counts of the phases' kafka-topics listings, closed in the phase
    that repaired it; no incident starts in any other phase (of those that start before `before_ms`, if given)."""
    by_name = {p.name: p for p in s.phases}
    incidents = sorted(
        (
            i
            for i in tables["gold.incidents"]
            if i["cluster_id"] == s.cid and (before_ms is None or ms(i["started_at"]) < before_ms)
        ),
        key=lambda i: i["started_at"],
    )
    matched = []
    for fault in faults:
        first, last, repair = by_name[fault.phases[0]], by_name[fault.phases[-1]], by_name[fault.repair]
        mine = [i for i in incidents if first.started_ms <= ms(i["started_at"]) <= last.ended_ms]
        assert len(mine) == 1, (fault, mine)
        (incident,) = mine
        matched.append(incident["incident_id"])
        context = (fault, incident)
        assert (incident["trigger"], incident["trigger_node_id"]) == (fault.trigger, fault.node), context
        assert fault.nodes <= set(incident["nodes"]), context
        listings = [c for name in fault.phases for c in by_name[name].topics]
        assert listings, fault
        assert (
            incident["max_partitions_at_min_isr"],
            incident["max_partitions_under_min_isr"],
            incident["max_partitions_offline"],
        ) == (
            max(c["at-min-isr"] for c in listings),
            max(c["under-min-isr"] for c in listings),
            max(c["unavailable"] for c in listings),
        ), context
        expected_severity = "critical" if any(c["under-min-isr"] or c["unavailable"] for c in listings) else "warn"
        assert incident["severity"] == expected_severity, context
        assert incident["ended_at"] is not None, context
        assert repair.started_ms <= ms(incident["ended_at"]) <= repair.ended_ms, context
        log(f"incident {incident['incident_id']}: {incident['summary']}")
    # none in a healthy phase: every incident is one of the faults'
    assert [i["incident_id"] for i in incidents] == matched, incidents


def voter_sets(s: Scenario) -> list[tuple[int, frozenset[int]]]:
    """(time, CurrentVoters ids) of every kafka-metadata-quorum describe --status capture, in time order."""
    captures = [c for p in s.phases for c in (*p.pairs, *p.status_only)]
    return sorted((c["at"], frozenset(v["id"] for v in json.loads(c["status"]["CurrentVoters"]))) for c in captures)


def check_voter_events(tables, s: Scenario) -> list[tuple[str, int]]:
    """gold.quorum_events' voter_added / voter_removed events are the changes between consecutive voter sets that
    --status printed, each at a time between the two captures; returns them."""
    sets = voter_sets(s)
    expected = []
    for (before_at, before), (at, voters) in zip(sets, sets[1:], strict=False):
        expected += [("voter_added", n, before_at, at) for n in sorted(voters - before)]
        expected += [("voter_removed", n, before_at, at) for n in sorted(before - voters)]
    events = sorted(
        (e for e in tables["gold.quorum_events"] if e["cluster_id"] == s.cid and e["event"].startswith("voter_")),
        key=lambda e: e["event_at"],
    )
    assert [(e["event"], e["node_id"]) for e in events] == [(kind, n) for kind, n, _, _ in expected], events
    for e, (_, _, before_at, at) in zip(events, expected, strict=True):
        assert before_at < ms(e["event_at"]) <= at, (e, before_at, at)
    return [(kind, n) for kind, n, _, _ in expected]


# --- a dynamic quorum (KIP-853): add-controller, remove-controller, the leader stopped ---------------------------

SPARE = 7  # the controller the dynamic run adds


def replication_rows(text: str) -> dict[int, dict[str, str]]:
    """`describe --replication` rows by node id (NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp
    LastCaughtUpTimestamp Status)."""
    rows = {}
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) >= 7 and cells[0].isdigit():
            rows[int(cells[0])] = {"last_fetch": cells[4], "status": cells[-1]}
    return rows


@pytest.fixture(scope="module")
def dynamic_cluster(tmp_path_factory):
    artifacts = fetch(log=log)
    kafka = KafkaCluster(
        tmp_path_factory.mktemp("kafka-dynamic"), artifacts, log=log, dynamic=True, spare_controllers=(SPARE,)
    )
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.close()


@dataclass
class DynamicLive:
    scenario: Scenario
    tables: dict[str, list[dict]]
    removed: int
    leader: int


@pytest.fixture(scope="module")
def dynamic_live(dynamic_cluster, tmp_path_factory, request) -> DynamicLive:
    """A dynamic quorum, lean: healthy; a spare controller started and added; a follower removed; the leader
    stopped and restarted. Short waits, one poll per capture."""
    cluster = dynamic_cluster
    tmp_path = tmp_path_factory.mktemp("live-dynamic")
    started = time.monotonic()
    s = Scenario(cluster, tmp_path)
    for spec in TOPIC_SPECS:
        s.create_topic(tmp_path, *spec)

    def replication() -> dict[int, dict[str, str]]:
        code, text = cluster.tool_text(
            METADATA_QUORUM, "--bootstrap-controller", cluster.bootstrap_controllers(), "describe", "--replication"
        )
        return replication_rows(text) if code == 0 else {}

    def voters() -> set[int]:
        status = s.status()
        return {v["id"] for v in json.loads(status["CurrentVoters"])} if "CurrentVoters" in status else set()

    def fetching(node: int, as_status: str) -> bool:
        row = replication().get(node)
        return row is not None and row["status"] == as_status and row["last_fetch"] not in ("-1", "")

    s.begin("healthy")
    s.wait_isr(set())
    s.moment(polls=1)

    s.begin("controller-added")
    cluster.start_node(SPARE)
    s.wait_for(f"controller {SPARE} to fetch as an observer", lambda: fetching(SPARE, "Observer"))
    log(cluster.add_controller(SPARE).strip())
    s.wait_for(f"controller {SPARE} among the voters", lambda: SPARE in voters())
    s.wait_for(f"controller {SPARE} to fetch as a voter", lambda: fetching(SPARE, "Follower"))
    s.moment(polls=1)

    leader = int(s.status()["LeaderId"])
    removed = next(i for i in (1, 2, 3) if i != leader)
    s.begin("controller-removed")
    log(cluster.remove_controller(removed).strip())
    s.wait_for(f"controller {removed} out of the voters", lambda: removed not in voters())
    s.moment(polls=1)

    s.begin("leader-controller-stopped")
    cluster.stop_node(leader)
    s.wait_for("a new leader", lambda: s.status().get("LeaderId") not in (None, str(leader), "-1"))
    s.moment(polls=1)

    s.begin("leader-controller-restarted")
    cluster.start_node(leader)
    s.wait_for("the old leader to fetch", lambda: fetching(leader, "Follower"))
    s.moment(polls=1)
    s.phase.ended_ms = now_ms()
    kafka_s = time.monotonic() - started
    cluster.close(graceful=False)
    log(f"dynamic quorum: captures done in {kafka_s:.0f}s; cluster stopped; running the pipeline")
    return DynamicLive(s, run_pipeline(s, tmp_path, request), removed, leader)


def test_dynamic_quorum_membership_events_equal_the_voter_sets_kafka_printed(dynamic_live):
    s = dynamic_live.scenario
    assert check_voter_events(dynamic_live.tables, s) == [
        ("voter_added", SPARE),
        ("voter_removed", dynamic_live.removed),
    ]
    membership = [m for m in dynamic_live.tables["gold.quorum_membership"] if m["cluster_id"] == s.cid]
    # the removed voter that Kafka still lists as an observer is marked as such, not a failing observer
    removed = sorted((m for m in membership if m["node_id"] == dynamic_live.removed), key=lambda m: m["valid_from"])
    # (a new leader lists an observer only once it fetched from it: a later observer stretch may follow)
    assert [(m["role"], m["is_removed_voter"]) for m in removed[:2]] == [("voter", False), ("observer", True)], removed
    assert all(m["role"] == "observer" for m in removed[1:]), removed
    voters = {m["node_id"]: m for m in membership if m["role"] == "voter" and m["valid_to"] is None}
    assert set(voters) == voter_sets(s)[-1][1]
    # a dynamic quorum's voters have directory ids; their endpoints are the controllers' listeners
    for node, m in voters.items():
        assert m["directory_id"] and m["endpoints"] == [f"CONTROLLER://{s.cluster.nodes[node].address}"], m


def test_dynamic_quorum_incidents_only_for_the_stopped_leader(dynamic_live):
    fault = Fault(
        ("leader-controller-stopped",),
        "leader-controller-restarted",
        "controller_down",
        dynamic_live.leader,
        {dynamic_live.leader},
    )
    check_incidents(dynamic_live.tables, dynamic_live.scenario, [fault])


def _not_fetching(text: str, timeout_ms: int = SLO_MS) -> int:
    """Followers whose last fetch is older than `timeout_ms` before the leader's own, as the CLI printed them."""
    header = [c.strip() for c in text.splitlines()[0].split("\t") if c.strip()]
    column = header.index("LastFetchTimestamp")
    ages = {}
    for line in text.splitlines()[1:]:
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if len(cells) != len(header):
            continue
        value = cells[column]
        ago = re.fullmatch(r"(\d+) ms ago", value)
        ages[cells[-1], int(cells[0])] = -int(ago.group(1)) if ago else int(value)
    (leader,) = [at for (status, _), at in ages.items() if status == "Leader"]
    return sum(1 for (status, _), at in ages.items() if status == "Follower" and leader - at > timeout_ms)


def check_voters_not_fetching(tables, s: Scenario, frozen):
    _, start, end = frozen
    rows = _status_rows(tables, s.cid)
    phase = next(p for p in s.phases if p.name == "follower-controller-frozen")
    (pair,) = phase.pairs
    printed = (s.landing / "quorum" / f"cluster={s.cid}" / f"{pair['at']}.replication.txt").read_text()
    assert _not_fetching(printed) == 1, printed
    assert rows[pair["at"]]["voters_not_fetching"] == 1, rows[pair["at"]]
    # the collector's DescribeQuorum answers of the same span: the same follower, not fetching
    admin = [r for at, r in rows.items() if start <= at <= end and r["source"] == "admin"]
    assert admin and all(r["voters_not_fetching"] == 1 and r["is_good"] is False for r in admin), admin
    # before the freeze, while healthy: every voter fetching
    healthy = [r for at, r in rows.items() if s.phases[0].started_ms <= at <= s.phases[0].ended_ms]
    assert healthy and all(r["voters_not_fetching"] in (0, None) for r in healthy), healthy


def _broker_gauges(s: Scenario, topic: str, name: str, since: int) -> dict[int, int]:
    """Sum over partitions of the brokers' kafka.cluster:type=Partition,name=<name> gauge for `topic`, from each
    broker's latest scrape since `since`, in whichever exporter naming the broker uses."""
    totals = {}
    for folder in sorted((s.landing / "metrics" / f"cluster={s.cid}").glob("node=*")):
        scrapes = sorted((p for p in folder.glob("*.prom") if int(p.stem) >= since), key=lambda p: int(p.stem))
        if not scrapes:
            continue
        value = 0
        for line in scrapes[-1].read_text().splitlines():
            lowered = line.lower()
            if line.startswith("#") or f'topic="{topic}"' not in line or "partition" not in lowered:
                continue
            if f'name="{name}"' in line or f"partition_{name.lower()}{{" in lowered:
                value += int(float(line.rsplit(" ", 1)[1]))
        totals[int(folder.name.split("=")[1])] = value
    return totals


def check_both_min_isr_views(tables, s: Scenario):
    topic, partitions, _, _ = MISCONFIGURED
    phase = next(p for p in s.phases if p.name == "misconfigured-topic")
    by_topic = {
        ms(r["collected_at"]): r
        for r in tables["gold.isr_health_by_topic"]
        if r["cluster_id"] == s.cid and r["topic"] == topic
    }
    (capture,) = phase.topics
    row = by_topic[capture["at"]]
    folder = s.listings / str(capture["at"])
    listed = {
        flag: sum(1 for (t, _) in partition_lines((folder / f"{flag}.txt").read_text()) if t == topic)
        for flag in ("at-min-isr", "under-min-isr")
    }
    # kafka-topics compares with the raw min.insync.replicas: both partitions "under min ISR" (KAFKA-21377)
    assert (row["at_min_isr"], row["under_min_isr"]) == (listed["at-min-isr"], listed["under-min-isr"]) == (0, 2)
    # the brokers compare with min(min.insync.replicas, replicas) = 2: at min ISR, not under
    at_min = _broker_gauges(s, topic, "AtMinIsr", phase.started_ms)
    under_min = _broker_gauges(s, topic, "UnderMinIsr", phase.started_ms)
    assert set(at_min) >= {4, 5, 6}, at_min
    assert (row["at_min_isr_effective"], row["under_min_isr_effective"]) == (
        sum(at_min.values()),
        sum(under_min.values()),
    ), (row, at_min, under_min)
    assert (row["at_min_isr_effective"], row["under_min_isr_effective"]) == (partitions, 0)
    assert row["min_isr_above_replicas"] == partitions
    # the collector's own snapshots of the phase count the same
    collected = [r for at, r in by_topic.items() if at >= phase.started_ms and at != capture["at"]]
    assert collected, by_topic
    for r in collected:
        assert (r["under_min_isr"], r["at_min_isr_effective"], r["under_min_isr_effective"]) == (2, 2, 0), r


def check_pre_vote_scrapes(tables, s: Scenario, survivor: int):
    """gold.controller_health's prospective_scrapes per window equals the survivor's scrapes in that window whose
    current-state is prospective or prospective-voted, as the exporter's text says."""
    window_ms = 5 * 60_000
    raw: dict[int, int] = {}
    for f in (s.landing / "metrics" / f"cluster={s.cid}" / f"node={survivor}").glob("*.prom"):
        start = int(f.stem) // window_ms * window_ms
        raw[start] = raw.get(start, 0) + (_raft_state(f.read_text()) in PRE_VOTE_STATES)
    rows = {
        ms(r["window_start"]): r
        for r in tables["gold.controller_health"]
        if r["cluster_id"] == s.cid and r["node_id"] == survivor
    }
    assert set(rows) == set(raw), (sorted(rows), sorted(raw))
    assert {start: r["prospective_scrapes"] for start, r in rows.items()} == raw
    assert sum(raw.values()) >= 1
    # the last scrape in the run is the survivor's, alone: the window's raft state is the pre-vote one
    last = max(rows)
    assert rows[last]["raft_state"] in PRE_VOTE_STATES, rows[last]


def check_broker_registrations(tables, s: Scenario):
    """Every gold.broker_registrations row of the run equals what the active controller's scrapes in the landing
    zone said in its window: the state at the last one that has it, the largest heartbeat age, the fenced stretch.
    The frozen broker was fenced in the controllers' scrapes of the frozen phase, and active again in the next."""
    window_ms = 5 * 60_000
    readings = []  # (scraped_at, broker, state or None, heartbeat age or None) of the active controller
    everyone = []  # (scraped_at, broker 6's state) in any controller's scrape
    for f in (s.landing / "metrics" / f"cluster={s.cid}").glob("node=[123]/*.prom"):
        text = f.read_text()
        state6 = _gauge(text, "BrokerRegistrationState", 6)
        if state6 is not None:
            everyone.append((int(f.stem), int(state6)))
        if _gauge(text, "ActiveControllerCount") != 1:
            continue
        for broker in (4, 5, 6):
            state = _gauge(text, "BrokerRegistrationState", broker)
            age = _gauge(text, "TimeSinceLastHeartbeatReceivedMs", broker)
            if state is not None or age is not None:
                readings.append((int(f.stem), broker, None if state is None else int(state), age))
    readings.sort()
    expected: dict[tuple[int, int], dict] = {}
    fenced_since: dict[int, int | None] = {}
    for at, broker, state, age in readings:
        row = expected.setdefault(
            (broker, at // window_ms * window_ms),
            {"max_heartbeat_age_ms": None, "registration_state": None, "fenced_at": None},
        )
        if age is not None:
            row["max_heartbeat_age_ms"] = max(row["max_heartbeat_age_ms"] or 0, int(age))
        if state is not None:
            fenced_since[broker] = (fenced_since.get(broker) or at) if state == FENCED_STATE else None
            row["registration_state"] = REGISTRATION_NAMES[state]
            row["fenced_at"] = fenced_since[broker]
    got = {
        (r["broker_id"], ms(r["window_start"])): {
            "max_heartbeat_age_ms": r["max_heartbeat_age_ms"],
            "registration_state": r["registration_state"],
            "fenced_at": ms(r["fenced_at"]),
        }
        for r in tables["gold.broker_registrations"]
        if r["cluster_id"] == s.cid
    }
    assert got == expected
    phases = {p.name: p for p in s.phases}
    frozen, resumed = phases["broker-6-frozen"], phases["broker-6-resumed"]
    assert FENCED_STATE in {v for at, v in everyone if frozen.started_ms <= at <= frozen.ended_ms}, everyone
    after = {v for at, v in everyone if resumed.started_ms <= at <= resumed.ended_ms}
    assert after == {ACTIVE_STATE}, everyone
    # the heartbeat age the active controller saw reached broker.session.timeout.ms (4 s) while it was frozen (Kafka
    # reports it capped there)
    ages = [age for at, broker, _, age in readings if broker == 6 and frozen.started_ms <= at <= frozen.ended_ms]
    assert ages and max(ages) == 4000, readings
