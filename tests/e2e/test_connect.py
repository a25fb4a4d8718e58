"""The whole pipeline through Spark Connect, a local stand-in for Databricks serverless, run by the wheel the
Databricks jobs install: the wheel is built from the checkout and installed in a clean venv; a Spark Connect server with
Delta (Spark's own Connect service, started in this process's JVM on the suite's SparkContext) runs `quorumlake run`
sent from a client process of that venv, and the tables it writes hold exactly what the classic in-process session
writes from the same landing zone. The client takes the Databricks code path (DATABRICKS_RUNTIME_VERSION set, the
session handed over by SparkSession.builder), with every access to `sparkContext` and every file-descriptor
redirection counted by the process itself, and imports every module of the wheel from its venv. The server runs in
the suite's warm JVM rather than a `spark-submit` JVM of its own, and the wheel is proven through it rather than by a
pipeline run on a local session of its own: the same proof, without two cold JVMs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from quorumlake import pipelines
from quorumlake.contract.tables import ALL_TABLES, LAYERS, PIPELINE_RUNS
from quorumlake.pipelines.engine.local import SMALL_RUN_ENGINE
from tests import read_back
from tests.helpers import accepts_connections, free_port

ROOT = Path(pipelines.__file__).resolve().parent.parent  # the checkout under test
RUN_TIMEOUT_S = 1800


def _env(python: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a process of the checkout (the default: this interpreter, the checkout on its path) or of
    the wheel's venv (`python`: that venv's interpreter, which imports the installed wheel and nothing of the
    checkout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "DATABRICKS_RUNTIME_VERSION", "PYTHONPATH")}
    if python is None:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYSPARK_PYTHON"] = str(python or sys.executable)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel_python(checkout_wheel, tmp_path_factory) -> Path:
    """The interpreter of a clean venv with the wheel built from the checkout, its `spark` extra (what Databricks
    provides itself: pyspark, delta-spark) and PySpark's Connect client installed; pinned as `make test` pins."""
    root = tmp_path_factory.mktemp("wheel")
    wheel = checkout_wheel
    env_dir = root / "venv"
    # installed by the uv that scripts/bootstrap.sh installed (into a venv without pip, which uv does not need), else
    # pip
    uv = Path(sys.executable).parent / "uv"
    venv.create(env_dir, with_pip=not uv.is_file())
    python = env_dir / "bin" / "python"
    packages = [f"{wheel}[spark]", "pyspark[connect]", "-c", str(ROOT / "constraints.txt")]
    if uv.is_file():
        # uv keys the PySpark wheel it built from PyPI's source archive by the build's settings: the install's own
        setting = re.search(r'^\s*PYSPARK_WHEEL="([^"]+)"', (ROOT / "scripts" / "bootstrap.sh").read_text(), re.M)
        assert setting, "scripts/bootstrap.sh no longer names PYSPARK_WHEEL"
        install = [str(uv), "pip", "install", "--quiet", "--python", str(python), "--config-settings-package"]
        install += [setting.group(1), *packages]
        # From uv's cache alone first: the install of the checkout has just put every one of these packages there
        # (PyPI has PySpark as a 400 MB source archive only, kept with the wheel built from it). Online, uv
        # revalidates that archive, and where the index answers "modified" it downloads and builds PySpark again, and
        # the cache grows by a PySpark build at every run of this test. Online only if the cache lacks something.
        if subprocess.run([*install, "--offline"], check=False, timeout=1200).returncode == 0:
            return python
    else:
        install = [str(python), "-m", "pip", "install", "--quiet", *packages]
    subprocess.run(install, check=True, timeout=1200)
    return python


def test_the_wheel_holds_one_import_package_with_its_data_and_no_tests_or_benchmarks(checkout_wheel):
    names = zipfile.ZipFile(checkout_wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"quorumlake"}
    assert "quorumlake/expectations/silver_replica_states.json" in names
    assert "quorumlake/pipelines/engine/ivysettings.xml" in names
    assert {"quorumlake/simulator/fleet.py", "quorumlake/bronze/raw.py", "quorumlake/pipelines/app/cli.py"} <= set(
        names
    )
    assert not any(
        n.startswith(("quorumlake/tests/", "quorumlake/benchmarks/", "tests/", "benchmarks/")) for n in names
    )


def test_the_installed_wheel_brings_only_quorumlake_and_every_console_script_works(wheel_python, checkout_wheel):
    # what the wheel put into its venv's site-packages: one import package (and its metadata)
    site = Path(
        subprocess.run(
            [str(wheel_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    record = next(site.glob("quorumlake-*.dist-info")) / "RECORD"
    installed = {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines() if line}
    assert {name for name in installed if not name.endswith(".dist-info") and name != ".."} == {"quorumlake"}
    # every console script the wheel declares reaches the CLI (its usage, no Spark started); the pipeline itself
    # runs from the wheel in `databricks_run` below
    entry_points = (
        zipfile.ZipFile(checkout_wheel)
        .read(next(n for n in zipfile.ZipFile(checkout_wheel).namelist() if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    scripts = re.findall(r"^(quorumlake[\w-]*) = ", entry_points, re.M)
    assert sorted(scripts) == ["quorumlake", *(f"quorumlake-{layer}" for layer in sorted(LAYERS))]
    for script in scripts:
        usage = subprocess.run(
            [str(wheel_python.parent / script), "--help"], capture_output=True, text=True, timeout=120
        )
        assert usage.returncode == 0, usage.stderr[-3000:]
        assert ("--landing" if script != "quorumlake" else "COMMAND") in usage.stdout
    # `quorumlake bench` needs the source checkout, which an installed wheel is not: one line, exit 2
    bench = subprocess.run(
        [str(wheel_python.parent / "quorumlake"), "bench", "--size", "small"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bench.returncode == 2 and "source checkout" in bench.stderr and "Traceback" not in bench.stderr


@pytest.fixture(scope="module")
def connect_url(spark):
    """A Spark Connect server with Delta for this module, started in this process's JVM (Spark's own
    `SparkConnectService` on the suite's SparkContext): each client session is a new session of that context, with
    its jars, Delta's extension and catalog, and the engine a local run picks for tiny data (a server of its own, a
    `spark-submit` JVM, would add a cold JVM's start and warm-up to the suite). The server's Python
    workers (the parsers' UDFs, pickled by reference to their modules) run this process's interpreter, and the
    client checks that every module of the wheel imports from the wheel's venv. Stopped with the module, which
    leaves the SparkContext running."""
    jvm = spark.sparkContext._jvm
    context = spark.sparkContext._jsc.sc()
    conf = context.conf()  # the running context's own settings, which every new session (each client's) starts from
    port = free_port()
    # The Databricks path never tunes the engine (a Databricks session is not ours to tune), so the server's sessions
    # start with the engine a local run picks for tiny data (Spark's whole-stage code generation and adaptive execution
    # add a cost to every one of a run's small queries)
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        **SMALL_RUN_ENGINE,
    }
    before = {key: conf.get(key) if conf.contains(key) else None for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    service = jvm.org.apache.spark.sql.connect.service.SparkConnectService
    try:
        service.start(context)
        assert accepts_connections("127.0.0.1", port)
        yield f"sc://127.0.0.1:{port}"
    finally:
        service.stop(jvm.scala.Option.empty(), jvm.scala.Option.empty())
        for key, value in before.items():
            if value is None:
                conf.remove(key)
            else:
                conf.set(key, value)


@pytest.fixture(scope="module")
def zone(landing_run) -> Path:
    return landing_run[0]


@pytest.fixture(scope="module")
def classic(landing_run) -> dict[str, list[tuple]]:
    """The reference: every table after a run on the suite's classic session from the same landing zone (the run the
    suite shares)."""
    return tables(landing_run[1])


def tables(warehouse: Path) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, with the run's own time (`run_at`, `ingested_at`, `quarantined_at`, the
    validation labels) replaced by a marker: two runs differ in nothing else."""
    run_at = read_back.rows(read_back.table_path(warehouse, PIPELINE_RUNS))[0]["run_at"]
    stamp = run_at.replace(tzinfo=timezone.utc).isoformat()

    def normal(value):
        if isinstance(value, datetime) and value == run_at:
            return "<run_at>"
        if isinstance(value, str):
            return value.replace(stamp, "<run_at>")
        if isinstance(value, float):
            return round(value, 9)
        if isinstance(value, (list, tuple)):
            return tuple(normal(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((normal(k), normal(v)) for k, v in value.items()))
        return value

    out = {}
    for spec in ALL_TABLES:
        rows = read_back.rows(read_back.table_path(warehouse, spec))
        out[spec.name] = sorted((tuple(normal(v) for v in r.values()) for r in rows), key=repr)
    assert out[PIPELINE_RUNS.name], "the run recorded no progress"
    return out


def _run_client(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [env["PYSPARK_PYTHON"], "-c", _CLIENT, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, f"client failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done


# The client process: `quorumlake run` as the CLI runs it, in a process that counts, while it runs, every request of a
# Connect session for its `sparkContext` or a JVM handle (which raises, but a caller could swallow that), every
# file-descriptor redirection and every cache or checkpoint request of a DataFrame (serverless refuses persist()), and
# reports whether a JVM was started in it.
_CLIENT = """
import json, os, sys
counts = {"sparkContext": 0, "dup2": 0, "cache": 0, "parquet_writes": 0}
real_dup2 = os.dup2
def dup2(*args, **kwargs):
    counts["dup2"] += 1
    return real_dup2(*args, **kwargs)
os.dup2 = dup2
from pyspark.sql.connect.session import SparkSession as ConnectSession
real_getattr = ConnectSession.__getattr__  # where a Connect session refuses sparkContext and the JVM handles
def getattr_(self, name):
    if name in ("sparkContext", "_jsc", "_jvm", "_jsparkSession", "_jconf"):
        counts["sparkContext"] += 1
    return real_getattr(self, name)
ConnectSession.__getattr__ = getattr_
from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
def counting(name):
    real = getattr(ConnectFrame, name)
    def method(self, *args, **kwargs):
        counts["cache"] += 1
        return real(self, *args, **kwargs)
    return method
for name in ("persist", "cache", "unpersist", "checkpoint", "localCheckpoint"):
    setattr(ConnectFrame, name, counting(name))
from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
real_parquet = ConnectWriter.parquet
def parquet(self, *args, **kwargs):  # what silver materializes instead of caching
    counts["parquet_writes"] += 1
    return real_parquet(self, *args, **kwargs)
ConnectWriter.parquet = parquet
from quorumlake import pipelines
from quorumlake.pipelines.app.cli import main
counts["pipelines"] = os.path.dirname(os.path.abspath(pipelines.__file__))
code = main(sys.argv[1:])
from pyspark import SparkContext
counts["jvm_started"] = SparkContext._gateway is not None
from pyspark.sql import SparkSession
session = SparkSession.getActiveSession()
counts["session"] = type(session).__module__ + "." + type(session).__name__
if os.environ.get("QUORUMLAKE_TEST_IMPORT_ALL"):
    # every module of the installed distribution, and where it was imported from (the server's Python workers import
    # the UDFs' modules of the suite's interpreter: this is where the wheel's own are proven whole)
    import importlib, importlib.metadata
    names = sorted(
        str(f)[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for f in importlib.metadata.files("quorumlake")
        if str(f).endswith(".py") and not str(f).endswith("__main__.py")
    )
    counts["imported"] = {name: os.path.abspath(importlib.import_module(name).__file__) for name in names}
print("CLIENT " + json.dumps(counts), flush=True)
sys.exit(code)
"""


def _report(done: subprocess.CompletedProcess) -> dict:
    line = next(line for line in done.stdout.splitlines() if line.startswith("CLIENT "))
    return json.loads(line[len("CLIENT ") :])


@pytest.fixture(scope="module")
def databricks_run(zone, connect_url, wheel_python, tmp_path_factory) -> tuple[Path, dict]:
    """`quorumlake run` of the installed wheel on the Databricks code path: DATABRICKS_RUNTIME_VERSION set, the
    session whatever SparkSession.builder hands over, here a Spark Connect session (SPARK_REMOTE), as on serverless,
    where sparkContext and caching are absent. Returns its warehouse and what the client counted."""
    root = tmp_path_factory.mktemp("connect-databricks")
    warehouse = root / "wh"
    env = _env(
        wheel_python, DATABRICKS_RUNTIME_VERSION="client.5.0", SPARK_REMOTE=connect_url, QUORUMLAKE_TEST_IMPORT_ALL="1"
    )
    done = _run_client(["run", "--landing", str(zone), "--warehouse", str(warehouse)], env, root)
    assert "silver.quorum_snapshots" in done.stdout  # the run's summary
    return warehouse, _report(done)


def test_the_databricks_path_writes_the_classic_tables_and_never_touches_spark_context_or_file_descriptors(
    spark, classic, databricks_run, wheel_python
):
    warehouse, report = databricks_run
    # the client ran the installed wheel, not the checkout, and every module of the wheel imports from it
    assert Path(report["pipelines"]).is_relative_to(wheel_python.parent.parent), report["pipelines"]
    imported = report["imported"]
    assert {
        "quorumlake.silver.quorum",
        "quorumlake.silver.metrics",
        "quorumlake.bronze.raw",
        "quorumlake.simulator.fleet",
    } <= set(imported)
    assert all(Path(where).is_relative_to(wheel_python.parent.parent) for where in imported.values()), imported
    assert report["session"] == "pyspark.sql.connect.session.SparkSession"
    assert report["sparkContext"] == 0, "the Databricks path asked a session for its sparkContext"
    assert report["dup2"] == 0, "the Databricks path redirected file descriptors"
    assert report["cache"] == 0, "the Databricks path cached or checkpointed a DataFrame"
    # instead, silver's parsed and built frames were written once as Parquet (not recomputed by every action), and
    # that scratch is gone when the run ends
    assert report["parquet_writes"] >= 2 * 3, "silver recomputed its frames instead of materializing them"
    assert not (warehouse / "_checkpoints" / "_scratch").exists()
    assert not report["jvm_started"]
    assert not (warehouse / "_logs").exists()  # where the local path sends the JVM's output
    got = tables(warehouse)
    assert {name: len(rows) for name, rows in got.items()} == {name: len(rows) for name, rows in classic.items()}
    for name in classic:
        assert got[name] == classic[name], name
    status = spark.read.format("delta").load(str(warehouse / "gold" / "quorum_status"))
    assert [
        tuple(r)
        for r in status.where("cluster_id = 'kraft-v2' AND error_code = 0")
        .select("cluster_id", "max_follower_lag", "max_follower_lag_time_ms")
        .collect()
    ] == [("kraft-v2", 12, 2400)]


def test_the_spark_remote_setting_runs_through_spark_connect_and_a_repeated_run_changes_nothing(
    spark, zone, classic, databricks_run, connect_url, tmp_path
):
    # `--set spark_remote=...` (no Databricks runtime): the session is a Spark Connect client of that server. Run on a
    # copy of the warehouse the Databricks path filled from the same landing zone: nothing is new, so nothing changes.
    warehouse = tmp_path / "wh"
    shutil.copytree(databricks_run[0], warehouse, symlinks=True)
    done = _run_client(
        ["run", "--landing", str(zone), "--warehouse", str(warehouse), "--set", f"spark_remote={connect_url}"],
        _env(),
        tmp_path,
    )
    report = _report(done)
    assert report.pop("pipelines") == str(ROOT / "pipelines")  # this client runs the checkout
    assert report == {
        "sparkContext": 0,
        "dup2": 0,
        "cache": 0,
        "parquet_writes": 0,  # nothing new: silver materializes nothing
        "jvm_started": False,
        "session": "pyspark.sql.connect.session.SparkSession",
    }
    assert "none changed since the last run" in done.stdout + done.stderr
    got = tables(warehouse)
    for name in classic:
        assert got[name] == classic[name], name
