"""`quorumlake serve` against a real served warehouse, with a real JDBC client (beeline): a BI tool's query of the
fleet view answers; the server is loopback by default, read-only (no DDL/DML, no reading arbitrary files, no settings
changes, no Java reflection), and a non-loopback address only with authentication, which then refuses a client it
cannot authenticate."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pipelines import cli

DATA = Path(__file__).parents[1] / "data" / "landing"
FORBIDDEN = [  # (statement, what the guard says about it)
    ("DROP TABLE bronze.quorum_raw", "DropTable statements are not allowed"),
    ("DELETE FROM bronze.quorum_raw", "DeleteFromTable statements are not allowed"),
    ("INSERT INTO bronze.quorum_raw SELECT * FROM bronze.quorum_raw", "InsertIntoStatement statements are not allowed"),
    ("CREATE TABLE stolen USING text LOCATION '/etc'", "CreateTable statements are not allowed"),
    ("CREATE TEMPORARY VIEW stolen USING text OPTIONS (path '/etc/hostname')", "CreateTempViewUsing statements"),
    ("SET spark.sql.runSQLOnFiles=true", "changing settings (SET key=value) is not allowed"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "calling Java methods"),
    ("ALTER TABLE bronze.quorum_raw SET TBLPROPERTIES ('x' = 'y')", "SetTableProperties statements are not allowed"),
]


def _beeline() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "beeline"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _own_address() -> str | None:
    """A non-loopback address of this machine, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def _reachable(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0


def _beeline_run(url: str, sql: list[str], *extra: str) -> subprocess.CompletedProcess:
    """Run the statements in one beeline session; a script file with --force goes on after a failed statement."""
    beeline = _beeline()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("".join(f"{statement};\n" for statement in sql))
    try:
        return subprocess.run(
            [str(beeline), "-u", url, "--outputformat=csv2", "--force=true", *extra, "-f", script.name],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SPARK_HOME": str(beeline.parent.parent)},
        )
    finally:
        os.unlink(script.name)


class Server:
    def __init__(self, warehouse: Path, port: int, *args: str):
        self.port = port
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "serve", "--port", str(port), "--warehouse", str(warehouse), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait(self, host: str) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if _reachable(host, self.port):
                return
            assert self.process.poll() is None, self.process.stdout.read()
            time.sleep(1)
        raise AssertionError("the server did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("served")
    # every layer: the served warehouse also answers the BI query on gold's fleet view
    assert cli.main(["run", "--landing", str(DATA), "--warehouse", str(root / "warehouse")]) == 0
    return root / "warehouse"


def _bronze_count(spark, warehouse: Path) -> int:
    return spark.read.format("delta").load(str(warehouse / "bronze" / "quorum_raw")).count()


def test_default_serve_is_loopback_only_and_read_only(spark, warehouse):
    before = _bronze_count(spark, warehouse)
    assert before > 0
    port = _free_port()
    server = Server(warehouse, port)
    try:
        server.wait("127.0.0.1")
        own = _own_address()
        if own is not None:
            assert not _reachable(own, port), f"the default server answers on {own}"
        url = f"jdbc:hive2://127.0.0.1:{port}/"
        # Reading arbitrary files through SQL fails, even when the client asks for runSQLOnFiles at connect time.
        # Each beeline session is a JVM of its own (~10 s), so the plain URL's session goes on with reads that work.
        table_path = warehouse / "bronze" / "quorum_raw"
        file_reads = [
            "SELECT * FROM text.`/etc/hostname`",
            "SELECT * FROM csv.`/etc/passwd`",
            f"SELECT count(*) FROM delta.`{table_path}`",
            "SHOW TABLES",
        ]
        reads = [
            "SELECT count(*) AS n FROM bronze.quorum_raw",
            "SHOW TABLES IN gold",
            "DESCRIBE TABLE gold.quorum_health",
            # last: the rows that follow its header are its own
            "SELECT cluster_id, status FROM gold.v_fleet_overview ORDER BY cluster_id",
        ]
        ok = _beeline_run(url, file_reads + reads)
        asked = _beeline_run(url + "?spark.sql.runSQLOnFiles=true", file_reads)
        for files in (ok, asked):
            output = files.stdout + files.stderr
            for identifier in ("`text`.`/etc/hostname`", "`csv`.`/etc/passwd`", f"`delta`.`{table_path}`"):
                assert f"{identifier} cannot be found" in output, (identifier, output[-3000:])
            assert "root:" not in files.stdout and "stolen" not in files.stdout
        # reads work, and a BI tool's query of the fleet view answers one row per cluster
        assert f"n\n{before}\n" in ok.stdout.replace("\r", ""), ok.stdout + ok.stderr
        assert "v_fleet_overview" in ok.stdout and "max_follower_lag_time_ms" in ok.stdout
        assert "read-only" not in ok.stderr
        fleet = ok.stdout.replace("\r", "")[ok.stdout.replace("\r", "").find("cluster_id,status") :]
        rows = [line.split(",") for line in fleet.splitlines() if "," in line]
        assert rows[0] == ["cluster_id", "status"], ok.stdout + ok.stderr
        assert cli.main(["sql", "SELECT 1", "--warehouse", str(warehouse)]) == 0  # names the view in this session too
        clusters = spark.sql("SELECT cluster_id FROM gold.v_fleet_overview").collect()
        assert [r[0] for r in rows[1:]] == sorted(r["cluster_id"] for r in clusters) and len(rows) > 2
        assert all(r[1] in ("ok", "warn", "critical", "stale") for r in rows[1:])
        # writes, file reads, settings changes and reflection are refused, each with the guard's message
        bad = _beeline_run(url, [sql for sql, _ in FORBIDDEN])
        output = bad.stdout + bad.stderr
        for sql, message in FORBIDDEN:
            assert f"quorumlake serve is read-only: {message}" in output, (sql, output[-3000:])
    finally:
        server.stop()
    assert _bronze_count(spark, warehouse) == before
    assert (warehouse / "bronze" / "quorum_raw" / "_delta_log").is_dir()


def test_non_loopback_serve_needs_authentication_and_refuses_unauthenticated_clients(spark, warehouse, tmp_path):
    own = _own_address()
    if own is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    refused = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "serve", "--host", own, "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "without authentication" in refused.stderr
    # LDAP against a directory that is not there: nobody can log in, so nobody gets data
    closed = _free_port()
    auth = tmp_path / "auth.toml"
    auth.write_text(
        f'[auth]\nmode = "LDAP"\nldap_url = "ldap://127.0.0.1:{closed}"\nldap_base_dn = "ou=people,dc=example,dc=com"\n'
    )
    port = _free_port()
    server = Server(warehouse, port, "--host", own, "--auth-config", str(auth))
    try:
        server.wait(own)
        assert not _reachable("127.0.0.1", port)
        url = f"jdbc:hive2://{own}:{port}/"
        for credentials in ([], ["-n", "mallory", "-p", "guess"]):
            result = _beeline_run(url, ["SELECT count(*) AS n FROM bronze.quorum_raw"], *credentials)
            assert "n\n" not in result.stdout.replace("\r", ""), result.stdout
            assert "Error" in result.stderr or "error" in result.stderr.lower(), result.stdout + result.stderr
    finally:
        server.stop()
