"""A real Apache Kafka KRaft cluster on 127.0.0.1 for the live tests: 3 controllers and 3 brokers, each with the
Prometheus JMX exporter java agent.

- `fetch()` gets the Kafka broker and tools jars (with their runtime dependencies), log4j and the JMX exporter agent
  from Maven Central once, with Maven (`mvn dependency:copy-dependencies` / `dependency:copy`), into
  `~/.cache/quorumlake/kafka/<version>` (override the root with QUORUMLAKE_KAFKA_CACHE, the version with
  QUORUMLAKE_KAFKA_VERSION).
- `KafkaCluster` formats and starts the nodes (static quorum, loopback only, free ports picked at start), stops and
  restarts single nodes by process id, and runs the real command-line tools (`kafka-metadata-quorum`,
  `kafka-topics`, ...) through `ToolRunner.java`, which runs their main classes in one warm JVM.
- Every wait is bounded; `close()` stops every JVM it started by process id (SIGTERM, then SIGKILL), also after a
  failure. Use it as a context manager.

Run by hand: `.venv/bin/python tests/live/kafka_cluster.py` starts a cluster, prints its addresses and waits for
Enter before tearing it down.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_ports

KAFKA_VERSION = os.environ.get("QUORUMLAKE_KAFKA_VERSION", "4.3.1")
LOG4J_VERSION = "2.25.4"
SLF4J_VERSION = "1.7.36"
# The last jmx_prometheus_javaagent release published to Maven Central (later ones are on GitHub only).
JMX_EXPORTER_VERSION = "1.0.1"
HERE = Path(__file__).resolve().parent

CONTROLLER_IDS = (1, 2, 3)
BROKER_IDS = (4, 5, 6)

TOOL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
NODE_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.awt.headless=true"]
HEAP = {"controller": "-Xmx192m", "broker": "-Xmx320m"}

METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
STORAGE = "kafka.tools.StorageTool"


def cache_root() -> Path:
    return Path(os.environ.get("QUORUMLAKE_KAFKA_CACHE", Path.home() / ".cache" / "quorumlake" / "kafka"))


def _pom(version: str) -> str:
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>quorumlake.live</groupId><artifactId>kafka-runtime</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-bom</artifactId>
      <version>{LOG4J_VERSION}</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId>
      <version>{SLF4J_VERSION}</version></dependency>
  </dependencies>
  <build><pluginManagement><plugins><plugin><groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId><version>3.6.1</version></plugin></plugins></pluginManagement></build>
</project>
"""


@dataclass(frozen=True)
class Artifacts:
    version: str
    lib: Path  # Kafka and its runtime dependencies (the classpath)
    agent: Path  # the JMX exporter java agent (kept off the classpath)
    runner: Path  # folder holding the compiled ToolRunner class

    @property
    def classpath(self) -> str:
        return f"{self.lib}/*{os.pathsep}{self.runner}"


def _run(cmd: list[str], cwd: Path, timeout: float, what: str) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{tail}")


def fetch(version: str = KAFKA_VERSION, log: Callable[[str], None] = print) -> Artifacts:
    """Kafka's jars, log4j and the JMX exporter agent from Maven Central (cached), and the compiled ToolRunner."""
    root = cache_root() / version
    lib, agent_dir, runner = root / "lib", root / "agent", root / "runner"
    done = root / ".complete"
    if not done.exists():
        if shutil.which("mvn") is None:
            raise RuntimeError("the live Kafka tests need Maven (mvn) on PATH to fetch Kafka from Maven Central")
        log(
            f"fetching Apache Kafka {version} and the JMX exporter {JMX_EXPORTER_VERSION} from Maven Central "
            f"into {root}"
        )
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(lib, ignore_errors=True)
        shutil.rmtree(agent_dir, ignore_errors=True)
        (root / "pom.xml").write_text(_pom(version), encoding="utf-8")
        _run(
            ["mvn", "-B", "-q", "dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            root,
            900,
            "mvn dependency:copy-dependencies",
        )
        _run(
            [
                "mvn",
                "-B",
                "-q",
                "dependency:copy",
                f"-Dartifact=io.prometheus.jmx:jmx_prometheus_javaagent:{JMX_EXPORTER_VERSION}",
                f"-DoutputDirectory={agent_dir}",
            ],
            root,
            300,
            "mvn dependency:copy (JMX exporter agent)",
        )
        done.write_text("ok\n", encoding="utf-8")
    agents = sorted(agent_dir.glob("jmx_prometheus_javaagent-*.jar"))
    if not agents or not any(lib.glob("kafka_2.13-*.jar")):
        done.unlink(missing_ok=True)
        raise RuntimeError(f"incomplete Kafka cache in {root}; run again to re-fetch")
    source = HERE / "ToolRunner.java"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    runner_dir = runner / digest
    if not (runner_dir / "ToolRunner.class").exists():
        runner_dir.mkdir(parents=True, exist_ok=True)
        _run(["javac", "-d", str(runner_dir), "-cp", f"{lib}/*", str(source)], root, 180, "javac ToolRunner.java")
    return Artifacts(version, lib, agents[-1], runner_dir)


def random_uuid() -> str:
    """A Kafka Uuid as `kafka-storage random-uuid` prints it (URL-safe base64 of 16 bytes, no padding)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


LOG4J_SERVER = """appender.f.type = File
appender.f.name = F
appender.f.fileName = ${sys:kafka.logs.dir}/server.log
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
"""
LOG4J_TOOLS = """appender.e.type = Console
appender.e.name = E
appender.e.target = SYSTEM_ERR
appender.e.layout.type = PatternLayout
appender.e.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.e.ref = E
"""
# The exporter's default naming (`kafka_controller_KafkaController_Value{name="..."}`), limited to the MBeans the
# pipeline reads (plus the agent's own jvm_* series) to keep scrapes small.
EXPORTER_DEFAULT = """includeObjectNames:
  - "kafka.controller:type=KafkaController,*"
  - "kafka.server:type=raft-metrics"
  - "kafka.server:type=broker-metadata-metrics"
  - "kafka.server:type=ReplicaManager,*"
  - "kafka.server:type=MetadataLoader,*"
  - "kafka.cluster:type=Partition,*"
rules:
  - pattern: ".*"
"""
# Rules in the style of Strimzi's kafka-metrics ConfigMap (lower-case names, type and name folded into the metric
# name: `kafka_controller_kafkacontroller_lastcommittedrecordoffset`), written for this test.
EXPORTER_STRIMZI_STYLE = """lowercaseOutputName: true
includeObjectNames:
  - "kafka.controller:type=KafkaController,*"
  - "kafka.server:type=raft-metrics"
  - "kafka.server:type=broker-metadata-metrics"
  - "kafka.server:type=ReplicaManager,*"
  - "kafka.server:type=MetadataLoader,*"
  - "kafka.cluster:type=Partition,*"
rules:
  - pattern: "kafka.server<type=raft-metrics><>(current-state): (.+)"
    name: kafka_server_raftmetrics_$1
    value: 1
    type: UNTYPED
    labels:
      current_state: "$2"
  - pattern: "kafka.server<type=raft-metrics><>(.+-total|.+-max):"
    name: kafka_server_raftmetrics_$1
    type: COUNTER
  - pattern: "kafka.server<type=raft-metrics><>(.+):"
    name: kafka_server_raftmetrics_$1
    type: GAUGE
  - pattern: "kafka.server<type=broker-metadata-metrics><>(.+):"
    name: kafka_server_brokermetadatametrics_$1
    type: GAUGE
  - pattern: "kafka.(\\\\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value"
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
      "$6": "$7"
  - pattern: "kafka.(\\\\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value"
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
  - pattern: "kafka.(\\\\w+)<type=(.+), name=(.+)><>Value"
    name: kafka_$1_$2_$3
    type: GAUGE
"""

SASL_USER, SASL_PASSWORD = "quorumlake", "quorumlake-secret"
TLS_PASSWORD = "quorumlake-keystore"
COMMON = {
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
    "num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "num.network.threads": "1",
    "num.io.threads": "2",
}
CONTROLLER_ONLY = {
    "process.roles": "controller",
    "metadata.max.idle.interval.ms": "500",
}
BROKER_ONLY = {
    "process.roles": "broker",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "replica.lag.time.max.ms": "5000",
    "log.cleaner.dedupe.buffer.size": "16777216",
    "num.recovery.threads.per.data.dir": "1",
    "num.replica.fetchers": "1",
    "background.threads": "2",
    "leader.imbalance.check.interval.seconds": "5",
    # a second listener with SASL/PLAIN, for the collector's --command-config
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{SASL_USER}" password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";',
}


class NodeStartFailed(RuntimeError):
    """A node exited while starting; `port_taken`: because a port it was given was bound by then."""

    def __init__(self, message: str, port_taken: bool) -> None:
        super().__init__(message)
        self.port_taken = port_taken


@dataclass
class Node:
    node_id: int
    role: str  # controller | broker
    port: int  # its CONTROLLER or PLAINTEXT listener
    metrics_port: int
    home: Path
    exporter_style: str  # default | strimzi
    sasl_port: int = 0  # brokers: a SASL_PLAINTEXT (PLAIN) listener
    tls_port: int = 0  # brokers: an SSL listener (self-signed certificate for 127.0.0.1)
    process: subprocess.Popen | None = None
    log_offset: int = 0
    stdout_offset: int = 0
    paused: bool = False  # frozen by SIGSTOP: alive, but answers nothing

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_address(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def tls_address(self) -> str:
        return f"127.0.0.1:{self.tls_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def server_log(self) -> Path:
        return self.home / "logs" / "server.log"

    def output_since_start(self) -> str:
        """What the node wrote since it was last started: its console (the JVM, the metrics agent), then its log."""
        parts = []
        for path, offset in (
            (self.home / "logs" / "stdout.log", self.stdout_offset),
            (self.server_log, self.log_offset),
        ):
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    parts.append(f.read().decode("utf-8", errors="replace"))
        return "\n".join(parts)

    @property
    def running(self) -> bool:
        """Started and answering (a frozen node is not: nothing should be sent to it)."""
        return self.process is not None and self.process.poll() is None and not self.paused


@dataclass
class KafkaCluster:
    """Three controllers (ids 1-3) and three brokers (ids 4-6) on 127.0.0.1.

    `dynamic`: a dynamic quorum (KIP-853, kraft.version 1): nodes find the quorum through
    `controller.quorum.bootstrap.servers` and the controllers are formatted with `--initial-controllers` (each with a
    directory id), so `kafka-metadata-quorum add-controller` / `remove-controller` work. `spare_controllers`: more
    controller ids, formatted with `--no-initial-controllers` and not started by `start()`: a test starts one (it
    fetches as an observer) and adds it with `add_controller`."""

    workdir: Path
    artifacts: Artifacts
    log: Callable[[str], None] = print
    nodes: dict[int, Node] = field(default_factory=dict)
    cluster_id: str = field(default_factory=random_uuid)
    dynamic: bool = False
    spare_controllers: tuple[int, ...] = ()
    directory_ids: dict[int, str] = field(default_factory=dict)
    _runner: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for node_id in (*CONTROLLER_IDS, *self.spare_controllers):
            self.directory_ids[node_id] = random_uuid()
        self._assign_ports()
        (self.workdir / "log4j2-server.properties").write_text(LOG4J_SERVER, encoding="utf-8")
        (self.workdir / "log4j2-tools.properties").write_text(LOG4J_TOOLS, encoding="utf-8")
        (self.workdir / "exporter-default.yaml").write_text(EXPORTER_DEFAULT, encoding="utf-8")
        (self.workdir / "exporter-strimzi.yaml").write_text(EXPORTER_STRIMZI_STYLE, encoding="utf-8")
        # bounded admin timeouts for every tool call, so a tool facing a dead node fails instead of hanging
        self.tool_config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n", encoding="utf-8")

    def _assign_ports(self) -> None:
        """Fresh ports for every node (its listeners and its metrics endpoint)."""
        ports = free_ports(18 + 2 * len(self.spare_controllers))
        for i, node_id in enumerate(self.spare_controllers):
            home = self.workdir / f"node-{node_id}"
            self.nodes[node_id] = Node(node_id, "controller", ports[18 + 2 * i], ports[19 + 2 * i], home, "default")
        for i, node_id in enumerate(CONTROLLER_IDS + BROKER_IDS):
            role = "controller" if node_id in CONTROLLER_IDS else "broker"
            self.nodes[node_id] = Node(
                node_id,
                role,
                ports[i],
                ports[6 + i],
                self.workdir / f"node-{node_id}",
                "strimzi" if node_id % 2 == 0 else "default",
                ports[9 + i] if role == "broker" else 0,
                ports[12 + i] if role == "broker" else 0,
            )

    # --- addresses ---------------------------------------------------------------------------------------------

    @property
    def tool_config(self) -> Path:
        return self.workdir / "tools.properties"

    def controllers(self) -> list[Node]:
        return [self.nodes[i] for i in CONTROLLER_IDS]

    def brokers(self) -> list[Node]:
        return [self.nodes[i] for i in BROKER_IDS]

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.address}" for n in self.controllers())

    def bootstrap_servers(self, running_only: bool = True) -> str:
        return ",".join(n.address for n in self.brokers() if n.running or not running_only)

    def sasl_bootstrap_servers(self, running_only: bool = True) -> str:
        return ",".join(n.sasl_address for n in self.brokers() if n.running or not running_only)

    def sasl_client_config(self, path: Path, password: str = SASL_PASSWORD) -> Path:
        """A client properties file for the brokers' SASL_PLAINTEXT listener (as for Kafka's own tools)."""
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SASL_USER}" password="{password}";\n',
            encoding="utf-8",
        )
        return path

    def tls_bootstrap_servers(self, running_only: bool = True) -> str:
        return ",".join(n.tls_address for n in self.brokers() if n.running or not running_only)

    @property
    def keystore(self) -> Path:
        return self.workdir / "broker-keystore.p12"

    def _make_keystore(self) -> None:
        """A self-signed certificate for 127.0.0.1 (keytool, from the JDK) and its PEM for clients."""
        if self.keystore.exists():
            return
        _run(
            [
                "keytool",
                "-genkeypair",
                "-keystore",
                str(self.keystore),
                "-storetype",
                "PKCS12",
                "-alias",
                "kafka",
                "-keyalg",
                "RSA",
                "-keysize",
                "2048",
                "-dname",
                "CN=127.0.0.1",
                "-ext",
                "SAN=ip:127.0.0.1",
                "-storepass",
                TLS_PASSWORD,
                "-keypass",
                TLS_PASSWORD,
                "-validity",
                "2",
            ],
            self.workdir,
            60,
            "keytool -genkeypair",
        )
        _run(
            [
                "keytool",
                "-exportcert",
                "-rfc",
                "-alias",
                "kafka",
                "-keystore",
                str(self.keystore),
                "-storepass",
                TLS_PASSWORD,
                "-file",
                str(self.workdir / "broker-certificate.pem"),
            ],
            self.workdir,
            60,
            "keytool -exportcert",
        )

    def tls_client_config(self, path: Path) -> Path:
        """A client properties file for the brokers' SSL listener: trust the brokers' certificate (PEM)."""
        path.write_text(
            "security.protocol=SSL\nssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.workdir / 'broker-certificate.pem'}\n",
            encoding="utf-8",
        )
        return path

    def bootstrap_controllers(self, running_only: bool = True) -> str:
        spares = [self.nodes[i] for i in self.spare_controllers]
        return ",".join(n.address for n in [*self.controllers(), *spares] if n.running or not running_only)

    @property
    def initial_controllers(self) -> str:
        """`--initial-controllers` of a dynamic quorum: id@host:port:directory-id of controllers 1-3."""
        return ",".join(f"{n.node_id}@{n.address}:{self.directory_ids[n.node_id]}" for n in self.controllers())

    def add_controller(self, node_id: int) -> str:
        """`kafka-metadata-quorum add-controller` for a started spare controller (its own properties as the command
        config, as the tool requires); returns the tool's output."""
        node = self.nodes[node_id]
        out = node.home / "add-controller.out"
        code = self.tool(
            out,
            METADATA_QUORUM,
            "--bootstrap-controller",
            self.bootstrap_controllers(),
            "--command-config",
            str(node.home / "server.properties"),
            "add-controller",
            command_config=False,
        )
        text = out.read_text(encoding="utf-8", errors="replace")
        if code != 0:
            raise RuntimeError(f"add-controller {node_id} exited {code}: {text[-500:]}")
        return text

    def remove_controller(self, node_id: int) -> str:
        """`kafka-metadata-quorum remove-controller` of a voter (by its id and directory id)."""
        out = self.workdir / f"remove-controller-{node_id}.out"
        code = self.tool(
            out,
            METADATA_QUORUM,
            "--bootstrap-controller",
            self.bootstrap_controllers(),
            "remove-controller",
            "--controller-id",
            str(node_id),
            "--controller-directory-id",
            self.directory_ids[node_id],
        )
        text = out.read_text(encoding="utf-8", errors="replace")
        if code != 0:
            raise RuntimeError(f"remove-controller {node_id} exited {code}: {text[-500:]}")
        return text

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def _write_config(self, node: Node) -> Path:
        props = dict(COMMON)
        props.update(CONTROLLER_ONLY if node.role == "controller" else BROKER_ONLY)
        props["node.id"] = str(node.node_id)
        if self.dynamic:
            props["controller.quorum.bootstrap.servers"] = ",".join(n.address for n in self.controllers())
        else:
            props["controller.quorum.voters"] = self.voters
        if node.role == "controller":
            props["listeners"] = f"CONTROLLER://{node.address}"
        else:
            props["listeners"] = (
                f"PLAINTEXT://{node.address},SASL_PLAINTEXT://{node.sasl_address},SSL://{node.tls_address}"
            )
            props.update(
                {
                    "listener.name.ssl.ssl.keystore.type": "PKCS12",
                    "listener.name.ssl.ssl.keystore.location": str(self.keystore),
                    "listener.name.ssl.ssl.keystore.password": TLS_PASSWORD,
                    "listener.name.ssl.ssl.key.password": TLS_PASSWORD,
                }
            )
        props["log.dirs"] = str(node.home / "data")
        path = node.home / "server.properties"
        node.home.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        return path

    def start(self, timeout_s: float = 150, attempts: int = 3) -> None:
        """Format every node, start the controllers, then the brokers; wait until all six are started.

        A node that finds one of its ports taken (bound by another process between the pick and the node's start)
        exits with a BindException: then every node is stopped, their directories are set aside (`attempt-N/`, for
        reading) and the cluster is formatted and started again on fresh ports. Any other failure is raised."""
        for attempt in range(1, attempts + 1):
            try:
                self._start(timeout_s)
                return
            except NodeStartFailed as failed:
                if not failed.port_taken or attempt == attempts:
                    raise
                self.log(f"{failed}\nstarting the cluster again on fresh ports")
                self.close(graceful=False)
                aside = self.workdir / f"attempt-{attempt}"
                aside.mkdir()
                for node in self.nodes.values():
                    if node.home.exists():
                        node.home.rename(aside / node.home.name)
                self._assign_ports()

    def _start(self, timeout_s: float) -> None:
        started = time.monotonic()
        self._make_keystore()
        for node in self.nodes.values():
            config = self._write_config(node)
            quorum: tuple[str, ...] = ()
            if self.dynamic and node.node_id in CONTROLLER_IDS:
                quorum = ("--initial-controllers", self.initial_controllers)
            elif node.node_id in self.spare_controllers:
                quorum = ("--no-initial-controllers",)
            code = self.tool(
                node.home / "format.out",
                STORAGE,
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(config),
                *quorum,
                timeout_s=60,
                command_config=False,
            )
            if code != 0:
                raise RuntimeError(
                    f"formatting node {node.node_id} failed (exit {code}): "
                    f"{(node.home / 'format.out').read_text(errors='replace')[-500:]}"
                )
        for node in self.controllers():
            self.start_node(node.node_id, wait=False)
        for node in self.controllers():
            self.wait_started(node.node_id, deadline=started + timeout_s)
        for node in self.brokers():
            self.start_node(node.node_id, wait=False)
        for node in self.brokers():
            self.wait_started(node.node_id, deadline=started + timeout_s)
        self.log(
            f"Kafka {self.artifacts.version} KRaft cluster {self.cluster_id} up in "
            f"{time.monotonic() - started:.0f}s: controllers {self.bootstrap_controllers()}, "
            f"brokers {self.bootstrap_servers()}"
        )

    def start_node(self, node_id: int, wait: bool = True, timeout_s: float = 90) -> None:
        node = self.nodes[node_id]
        if node.running:
            raise RuntimeError(f"node {node_id} is already running")
        logs = node.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        node.log_offset = node.server_log.stat().st_size if node.server_log.exists() else 0
        stdout = logs / "stdout.log"
        node.stdout_offset = stdout.stat().st_size if stdout.exists() else 0
        exporter = self.workdir / f"exporter-{node.exporter_style}.yaml"
        cmd = [
            "java",
            HEAP[node.role],
            *NODE_JVM,
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2-server.properties'}",
            f"-javaagent:{self.artifacts.agent}=127.0.0.1:{node.metrics_port}:{exporter}",
            "-cp",
            f"{self.artifacts.lib}/*",
            "kafka.Kafka",
            str(node.home / "server.properties"),
        ]
        with open(stdout, "ab") as out:
            node.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        if wait:
            self.wait_started(node_id, deadline=time.monotonic() + timeout_s)

    def wait_started(self, node_id: int, deadline: float) -> None:
        node = self.nodes[node_id]
        while time.monotonic() < deadline:
            if not node.running:
                output = node.output_since_start()
                raise NodeStartFailed(
                    f"node {node_id} exited with {node.process.returncode if node.process else None}; "
                    f"see {node.server_log}; the end of its output:\n{output[-3000:]}",
                    port_taken="Address already in use" in output,
                )
            if node.server_log.exists():
                with open(node.server_log, "rb") as f:
                    f.seek(node.log_offset)
                    if b"Kafka Server started" in f.read():
                        return
            time.sleep(0.5)
        raise TimeoutError(f"node {node_id} did not start in time; see {node.server_log}")

    def stop_node(self, node_id: int, timeout_s: float = 30, sig: int = signal.SIGTERM) -> None:
        """Stop one node by its process id: `sig` (SIGTERM: controlled shutdown), SIGKILL after `timeout_s`."""
        node = self.nodes[node_id]
        if node.process is None:
            return
        if node.paused:
            self.resume_node(node_id)
        _terminate(node.process, timeout_s, sig)
        node.process = None

    def pause_node(self, node_id: int) -> None:
        """Freeze one node by its process id (SIGSTOP): its sockets stay open, it neither fetches nor heartbeats."""
        node = self.nodes[node_id]
        assert node.process is not None and node.process.poll() is None, f"node {node_id} is not running"
        os.kill(node.process.pid, signal.SIGSTOP)
        node.paused = True

    def resume_node(self, node_id: int) -> None:
        """Let a frozen node go on (SIGCONT)."""
        node = self.nodes[node_id]
        if node.process is not None and node.paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.process.pid, signal.SIGCONT)
        node.paused = False

    def close(self, graceful: bool = True) -> None:
        """Stop every process this cluster started, each by its own process id: brokers first, each by a controlled
        shutdown (graceful), or by SIGKILL once nothing more is read from the cluster (a controlled shutdown of a
        cluster that is thrown away is seconds of waiting for nothing)."""
        sig = signal.SIGTERM if graceful else signal.SIGKILL
        if self._runner is not None:
            _terminate(self._runner, 5, sig)
            self._runner = None
        for node_id in (*BROKER_IDS, *self.spare_controllers, *CONTROLLER_IDS):
            with contextlib.suppress(Exception):
                self.stop_node(node_id, timeout_s=15, sig=sig)

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- tools -------------------------------------------------------------------------------------------------

    def _tool_runner(self) -> subprocess.Popen:
        if self._runner is None or self._runner.poll() is not None:
            cmd = [
                "java",
                *TOOL_JVM,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2-tools.properties'}",
                "-cp",
                self.artifacts.classpath,
                "ToolRunner",
            ]
            errors = open(self.workdir / "tools.stderr.log", "ab")  # noqa: SIM115 - the child keeps it
            self._runner = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, start_new_session=True
            )
            errors.close()
        return self._runner

    def tool(self, out: Path, main_class: str, *args: str, timeout_s: float = 60, command_config: bool = True) -> int:
        """Run a Kafka tool's main class with `args`; its stdout goes to `out`. Returns the tool's exit code.

        `command_config` adds `--command-config` with short admin timeouts (for the admin tools)."""
        if command_config:
            args = ("--command-config", str(self.tool_config), *args)
        if any("\t" in a or "\n" in a for a in (str(out), main_class, *args)):
            raise ValueError("tool arguments must not contain TABs or newlines")
        runner = self._tool_runner()
        assert runner.stdin is not None and runner.stdout is not None
        runner.stdin.write(("\t".join((str(out), main_class, *args)) + "\n").encode())
        runner.stdin.flush()
        ready, _, _ = select.select([runner.stdout], [], [], timeout_s)
        if not ready:
            _terminate(runner, 5, signal.SIGTERM)
            self._runner = None
            raise TimeoutError(f"{main_class} {' '.join(args)} did not finish within {timeout_s:.0f}s")
        reply = runner.stdout.readline().decode().strip()
        if not reply.startswith("exit "):
            self._runner = None
            raise RuntimeError(f"tool runner died ({reply!r}); see {self.workdir / 'tools.stderr.log'}")
        return int(reply.split()[1])

    def tool_text(self, main_class: str, *args: str, timeout_s: float = 60) -> tuple[int, str]:
        out = self.workdir / "tool.out"
        code = self.tool(out, main_class, *args, timeout_s=timeout_s)
        return code, out.read_text(encoding="utf-8", errors="replace")


def _terminate(process: subprocess.Popen, timeout_s: float, sig: int) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, sig)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@contextlib.contextmanager
def running_cluster(workdir: Path, log: Callable[[str], None] = print) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(workdir, fetch(log=log), log=log)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


if __name__ == "__main__":  # pragma: no cover - manual use
    import tempfile

    with tempfile.TemporaryDirectory(prefix="quorumlake-kafka-") as tmp, running_cluster(Path(tmp)) as c:
        for n in c.nodes.values():
            print(f"node {n.node_id} {n.role:<10} {n.address}  metrics {n.metrics_url}  pid {n.process.pid}")
        if sys.stdin.isatty():
            input("Enter to stop ")
        else:
            time.sleep(float(os.environ.get("QUORUMLAKE_KAFKA_HOLD_S", "0")))
