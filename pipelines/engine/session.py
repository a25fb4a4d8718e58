"""The Spark session: local Spark with Delta on disk, or the session Databricks hands us.

One session per process. Locally it must be the first SparkSession the process creates, because
`spark.jars.packages` is only read when the JVM starts: PySpark launches its Py4J gateway JVM once per process and
applies the packages only then, so a Delta-configured session built after a plain one (even a stopped one) gets
no Delta jars.

A session is either classic (a JVM behind Py4J: local Spark, Databricks classic compute) or a Spark Connect client
(Databricks serverless, or any Connect server named by the `spark_remote` setting). A Connect session has no
`sparkContext`, no JVM in this process and, on serverless, no DataFrame cache: the code that runs on Databricks or
through `spark_remote` uses none of them (`is_connect`, `cached`, `release`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.jvm_lookups import remember_lookups
from quorumlake.pipelines.errors import RuntimeFailure, one_line

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"


def on_databricks() -> bool:
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def ivy_home() -> Path:
    """Where Delta's jars are cached after the first download (override with QUORUMLAKE_IVY_HOME)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quorumlake" / "ivy"
    return Path(os.environ.get("QUORUMLAKE_IVY_HOME", default))


def templates_home() -> Path:
    """Where the first commits of the tables, as Delta writes them, are kept to create new warehouses' tables
    (`io.TableTemplates`), beside the jar cache."""
    return ivy_home().parent / "tables"


@functools.cache
def engine_versions() -> str:
    """The PySpark and Delta versions of this process, which write a table's commits."""
    import pyspark

    return f"pyspark {pyspark.__version__} delta {_delta_version()}"


def runs_remotely(config: Config) -> bool:
    """Whether this process's session is handed to it (Databricks) or reached through Spark Connect: no local JVM is
    started, so nothing may touch a SparkContext or this process's file descriptors."""
    return on_databricks() or bool(config.spark_remote)


def get_spark(config: Config, app_name: str = "quorumlake") -> SparkSession:
    """The process's Spark session, created on first call."""
    if on_databricks():
        # serverless: a Spark Connect session; classic compute: the cluster's session (both with Delta built in)
        return SparkSession.builder.getOrCreate()
    if config.spark_remote:
        # a Spark Connect server that has Delta (e.g. the one tests/e2e/test_connect.py starts, or a stand-in for
        # serverless); the server's own settings apply, this process only sends plans
        return SparkSession.builder.remote(config.spark_remote).getOrCreate()
    # a local session's Py4J keeps the answers of its name lookups: two round trips fewer per PySpark function call
    remember_lookups()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Python workers must run the interpreter that has our dependencies (pyarrow, ...), not whatever `python3` is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = _local_builder(config, app_name).getOrCreate()
    _remember_resolution(spark)
    return spark


def _local_builder(config: Config, app_name: str, dump_classes_to: Path | None = None) -> SparkSession.Builder:
    from delta import configure_spark_with_delta_pip

    settings = resources.files("quorumlake.pipelines.engine").joinpath("ivysettings.xml")
    maven_root = os.environ.get("QUORUMLAKE_MAVEN_REPO", MAVEN_CENTRAL)
    warehouse = Path(config.warehouse).absolute()
    java_opts = f"-Dquorumlake.maven.root={maven_root} -Dderby.system.home={warehouse / '_derby'}"
    resolved = _resolved_jars()
    archive = class_archive(resolved)
    if dump_classes_to is not None:
        java_opts += f" -XX:ArchiveClassesAtExit={dump_classes_to} {_QUIET_CDS}"
    elif os.environ.get("QUORUMLAKE_CLASS_ARCHIVE", "on") != "off" and archive.is_file():
        # the classes an earlier JVM loaded, mapped instead of loaded and verified again (a third of a start)
        java_opts += f" -XX:SharedArchiveFile={archive} {_QUIET_CDS}"
    if config.java_options.strip():
        java_opts += f" {config.java_options.strip()}"
    builder = (
        SparkSession.builder.master(config.spark_master)
        .appName(app_name)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.jars.ivy", str(ivy_home()))
        .config("spark.jars.ivySettings", str(settings))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.sql.warehouse.dir", str(warehouse / "_managed"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.default.parallelism", str(max(2, config.shuffle_partitions)))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # Delta keeps the log (and the computed state) of this many tables per session: a long-lived session that
        # reads every table in turn (`quorumlake serve` answering a BI tool, a notebook) rebuilt each one's state, a
        # Spark job, whenever it had read ten others since. All 19 tables read twice in one session: 10.0 s per
        # round with 10, 2.9-3.2 s with 40 (a run's own time did not change: it reads what it just wrote).
        .config("spark.databricks.delta.delta.log.cacheSize", "40")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        # PySpark's DataFrame debugging records the Python call site of every DataFrame and Column function call for
        # error messages: a stack inspection and ~6 Py4J round trips per call (F.col 2.0 ms instead of 0.5 ms), and a
        # run builds its plans from thousands of such calls. Errors keep their message; only the Python line that built
        # the failing expression is no longer named.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # The driver's heap (1 GB by default) holds the run's work, not its history: a cached batch is built whole in
        # the heap before it goes to disk (10,000 rows by default; a silver batch's parsed rows carry their records'
        # payloads, and the large fleet's backfill died building one), and the status store keeps every task, stage
        # and query of the process for a UI that is off.
        .config("spark.sql.inMemoryColumnarStorage.batchSize", "1000")
        # Parquet is read 1,024 rows at a time (4,096 by default): a column's batch is one array, and 4,096 metric
        # scrapes of bronze.metrics_raw's payload asked for 28 MB at once (doubling as it grew), which killed the
        # large fleet's silver in a 1 GB heap
        .config("spark.sql.parquet.columnarReaderBatchSize", "1024")
        .config("spark.ui.retainedTasks", "1000")
        .config("spark.ui.retainedJobs", "100")
        .config("spark.ui.retainedStages", "100")
        .config("spark.sql.ui.retainedExecutions", "50")
    )
    delta_jars = sorted(str(p) for p in (ivy_home() / "jars").glob("io.delta_delta-*.jar"))
    if delta_jars:
        # Delta's own jars (not their dependencies, which would shadow Spark's) also go on the driver's system
        # class path: threads that do not inherit Spark's class loader (the Thrift JDBC server's sessions) must
        # find Delta's catalog classes too.
        builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(delta_jars))
    builder = configure_spark_with_delta_pip(builder)
    if resolved:
        # Delta's packages were resolved by an earlier start: their jars are given directly, which spares every
        # start Ivy's resolution (a second or two of each run, for an answer that has not changed)
        builder = builder.config("spark.jars.packages", "").config("spark.jars", ",".join(resolved))
    return builder


# JVM options (the `java_options` setting) for runs known to be small: the demo fleet, the test suite. On a run of a few
# MB a local JVM spent most of its CPU on itself, not on data: in a test worker, just-in-time compilation took 37-63 %
# of the JVM's CPU and G1's concurrent marking 14 %. The parallel collector has no concurrent threads, and scaling the
# compile thresholds by 4 compiles only code that a small run really repeats. Measured 2026-11-25 (2 cores): the demo
# fleet's run A/B 0.95 (61.5 s vs 65.3 s, 3 alternating pairs); three end-to-end test files on two workers 220 s vs
# 258-270 s. Not the default: G1 is what the large fleet's backfill was measured with in a 1 GB heap.
SMALL_RUN_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:CompileThresholdScaling=4"

# CDS reports what it cannot archive or map as warnings on the console; it falls back to loading classes itself.
_QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def class_archive(resolved: list[str] | None = None) -> Path:
    """Where the JVM class archive (CDS) for this Java, PySpark, Delta and set of jars (`resolved`, else the
    remembered ones) is kept (it exists once `prepare` built it). An archive built for anything else is never used:
    the name changes with them."""
    import pyspark

    resolved = _resolved_jars() if resolved is None else resolved
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")
    try:
        java = os.path.realpath(java)
        stamp = os.stat(java).st_mtime_ns
    except OSError:
        stamp = 0
    spark_jars = os.path.dirname(pyspark.__file__)  # where this PySpark's jars are: the archive's class path
    key = f"{java} {stamp} {spark_jars} {pyspark.__version__} {_delta_version()} {' '.join(resolved)}"
    return ivy_home().parent / "cds" / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def prepare(config: Config) -> Path | None:
    """Make later local starts fast, once per machine and version: resolve (download) Delta's jars, then run a
    small Delta workload in a JVM that archives the classes it loaded when it exits. Returns the archive (None when
    it could not be built; starts then simply load classes as usual)."""
    if not _resolved_jars() and not fetch_locked_jars():
        subprocess.run([sys.executable, "-c", _START_ONCE, config.warehouse], check=True, timeout=1800)
    target = class_archive()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
    done = subprocess.run([sys.executable, "-c", _WORKLOAD, config.warehouse, str(partial)], timeout=1800)
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        return None
    os.replace(partial, target)
    return target


LOCKED_JARS = Path(str(resources.files("quorumlake.pipelines.engine").joinpath("delta-jars.lock")))


def fetch_locked_jars(lock: Path | None = None) -> list[str]:
    """Delta's jars as pinned in `delta-jars.lock`, downloaded from Maven Central (or QUORUMLAKE_MAVEN_REPO) in
    parallel into the Ivy cache, checked against their pinned SHA-1, and remembered as resolved: what Spark's Ivy
    resolution gives, without its ~20 s of one-by-one requests. Only for the PySpark and Delta versions the lock was
    made for; returns [] when it does not apply or a download fails (Spark's resolution then runs as before)."""
    import hashlib
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    import pyspark

    text = (lock or LOCKED_JARS).read_text(encoding="utf-8")
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    versions = dict(lines[:2])
    if versions != {"pyspark": pyspark.__version__, "delta-spark": _delta_version()}:
        return []
    root = os.environ.get("QUORUMLAKE_MAVEN_REPO", MAVEN_CENTRAL).rstrip("/") + "/"
    folder = ivy_home() / "jars"
    folder.mkdir(parents=True, exist_ok=True)

    def fetch(entry: list[str]) -> str:
        coordinate, sha1 = entry
        group, artifact, version = coordinate.split(":")
        target = folder / f"{group}_{artifact}-{version}.jar"
        if target.is_file() and hashlib.sha1(target.read_bytes()).hexdigest() == sha1:
            return str(target)
        url = f"{root}{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
        if hashlib.sha1(data).hexdigest() != sha1:
            raise ValueError(f"{url}: SHA-1 does not match delta-jars.lock")
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
        return str(target)

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            jars = list(pool.map(fetch, lines[2:]))
    except Exception as exc:  # a mirror without them, no network: Spark's own resolution says what is wrong
        print(f"[quorumlake] pinned jars not fetched ({exc}); resolving with Spark instead", file=sys.stderr)
        return []
    _write_resolution(jars)
    return jars


_START_ONCE = """
import sys
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.errors import RuntimeFailure, one_line
from quorumlake.pipelines.engine.session import get_spark
get_spark(Config(warehouse=sys.argv[1]), "quorumlake-prepare").stop()
"""

# Creates, merges into and reads the tables of a throw-away warehouse, so the classes of a run are loaded; the JVM
# is then ended and awaited, because it writes the archive as it exits.
_WORKLOAD = """
import sys, tempfile
from pathlib import Path
from pyspark import SparkContext
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.errors import RuntimeFailure, one_line
from quorumlake.pipelines.storage import Lakehouse
from quorumlake.pipelines.engine.session import _local_builder
from quorumlake.contract.tables import ALL_TABLES, PIPELINE_RUNS, SILVER_QUORUM_SNAPSHOTS
with tempfile.TemporaryDirectory(dir=sys.argv[1] if Path(sys.argv[1]).is_dir() else None) as root:
    config = Config(warehouse=root)
    spark = _local_builder(config, "quorumlake-prepare", Path(sys.argv[2])).getOrCreate()
    lakehouse = Lakehouse(spark, config)
    lakehouse.ensure_tables(ALL_TABLES)
    lakehouse.tune_for(0)
    lakehouse.save_progress("prepare", {"t": 1})
    runs = lakehouse.read(PIPELINE_RUNS)
    lakehouse.replace_groups(PIPELINE_RUNS, runs.withColumn("source_version", runs.source_version + 1),
                             runs.select("consumer"))
    lakehouse.insert_new(PIPELINE_RUNS, runs)
    print(lakehouse.progress("prepare"), lakehouse.changes(SILVER_QUORUM_SNAPSHOTS, -1, 0).count())
    gateway = SparkContext._gateway
    spark.stop()
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=600)
"""


def _resolution_file() -> Path:
    """Where the jars that Ivy resolved for this Delta and PySpark (and our Ivy settings) are remembered."""
    import pyspark

    key = f"pyspark {pyspark.__version__} delta {_delta_version()}"
    return ivy_home() / f"resolved-{hashlib.sha256(key.encode()).hexdigest()[:16]}.txt"


def _delta_version() -> str:
    from importlib.metadata import version

    return version("delta_spark")


def _resolved_jars() -> list[str]:
    """The jars an earlier start resolved, when every one is still in the cache (else Ivy resolves again)."""
    try:
        jars = _resolution_file().read_text(encoding="utf-8").split()
    except OSError:
        return []
    return jars if jars and all(os.path.isfile(j) for j in jars) else []


def _remember_resolution(spark: SparkSession) -> None:
    resolved = [j.removeprefix("file://") for j in spark.sparkContext.getConf().get("spark.jars", "").split(",") if j]
    if not resolved or not all(os.path.isfile(j) for j in resolved) or resolved == _resolved_jars():
        return
    _write_resolution(resolved)


def _write_resolution(jars: list[str]) -> None:
    target = _resolution_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text("\n".join(jars) + "\n", encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        pass  # only a missed shortcut: the next start resolves again


def quiet(spark: SparkSession) -> None:
    """Keep Spark's console to errors, so CLI output stays readable (a Connect server logs on its own side)."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel("ERROR")


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect client session (Databricks serverless, `spark_remote`), told by its class alone: nothing is
    imported or asked of the server, and `spark.sparkContext`, which raises there, is never touched."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


# A session conf that `Lakehouse.tune_for` sets to "true" for a small run on a local session: `cached` then keeps a
# frame as a local checkpoint instead of persisting it (see `cached`).
KEEP_AS_CHECKPOINT = "spark.quorumlake.keepAsLocalCheckpoint"


def cached(df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
    """`df`, kept for the several actions that read it where the session can keep it; under Spark Connect, `df` as it
    is (it is recomputed by each action that reads it).

    Serverless compute refuses `persist()` (NOT_SUPPORTED_WITH_SERVERLESS) up to environment version 4; version 5
    caches only as a workspace preview that an admin may turn off and that compliance-profile workspaces lack. The
    pipeline's results never depend on a cache (every input it re-reads is a fixed Delta version or a literal), so a
    Connect session simply does not cache.

    A classic session persists `df`, except in a small run on a local session (`KEEP_AS_CHECKPOINT`), where `df` is
    kept as a local checkpoint instead: computed once by its first action into the same blocks a persist fills, and
    then a plan of one node. `persist()` plans the whole frame for Spark's cache when it is called, and every later
    query carries that plan through analysis and the cache lookup (its subplans compared with each cached plan): in
    a warm tiny run the 34 calls took 5.8 s under a profiler before any row was computed, and runs were ~15 % faster
    with checkpoints (docs/performance-log.md). A checkpoint cannot be recomputed should its blocks be lost, which
    only an executor lost on a cluster does, so a cluster's session persists. A checkpoint is dropped when the run
    ends (`release_all`), not by `release`: what a run derived from it may still read its blocks until then.

    Every `persist()` and `localCheckpoint()` of a run goes through here, and what they keep is dropped through
    `release` and `release_all`."""
    spark = df.sparkSession
    if is_connect(spark):
        return df
    if spark.conf.get(KEEP_AS_CHECKPOINT, "false") == "true":
        kept = df.localCheckpoint(eager=False) if level is None else df.localCheckpoint(eager=False, storageLevel=level)
        _checkpoints[id(kept)] = kept
        return kept
    kept = df.persist() if level is None else df.persist(level)
    _kept[id(kept)] = kept
    return kept


def release(df: DataFrame) -> None:
    """Drop what `cached` persisted (nothing under Spark Connect; a local checkpoint waits for `release_all`)."""
    if not is_connect(df.sparkSession) and id(df) not in _checkpoints:
        df.unpersist()
        _kept.pop(id(df), None)


def release_all() -> None:
    """Drop whatever `cached` kept that was not released: every local checkpoint of the run, and what a run ended by
    an exception between a `cached` and its `release` left persisted. Every later query of the session would otherwise
    be compared with each of those plans (Spark's cache lookup), a cost that grows with every such run in a
    long-lived process (a notebook, a test worker: after the crash harness's abandoned runs, a later run's queries
    took minutes to plan), and the blocks of the checkpoints would wait for the JVM's garbage collector."""
    for df in list(_kept.values()):
        df.unpersist()
    _kept.clear()
    for df in list(_checkpoints.values()):
        checkpoint_rdd(df).unpersist(False)
    _checkpoints.clear()


def checkpoint_rdd(df: DataFrame):
    """The JVM RDD whose blocks hold a frame `cached` kept as a local checkpoint (the one node of its plan)."""
    return df._jdf.queryExecution().logical().rdd()


# the DataFrames `cached` persisted and `release` has not dropped yet, by identity (persist() returns the same object)
_kept: dict[int, DataFrame] = {}
# the local checkpoints `cached` made since the last `release_all`, by identity
_checkpoints: dict[int, DataFrame] = {}


if (
    __name__ == "__main__"
):  # `python -m quorumlake.pipelines.engine.session [WAREHOUSE]`: what scripts/bootstrap.sh runs after install
    import tempfile

    built = prepare(Config(warehouse=sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()))
    print(f"Spark prepared (class archive: {built or 'not built'})")


def start_with_output_to_log(config: Config, start: Callable[[], SparkSession]) -> SparkSession:
    """Run `start` (which starts the JVM) with the process's stdout and stderr sent to <warehouse>/_logs/spark.log:
    Ivy prints to stdout and log4j to stderr, and the JVM keeps the descriptors it inherits for its lifetime, so its
    chatter stays out of the user's terminal or pipe. QUORUMLAKE_JVM_STDERR=inherit keeps the terminal."""
    if os.environ.get("QUORUMLAKE_JVM_STDERR") == "inherit":
        return start()
    log_dir = Path(config.warehouse) / "_logs"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_dir / "spark.log", "ab")  # noqa: SIM115 - the JVM keeps the descriptor for its lifetime
    except OSError:
        return start()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    for fd in saved:
        os.dup2(log.fileno(), fd)
    try:
        return start()
    except Exception as exc:
        raise RuntimeFailure(f"could not start Spark: {one_line(exc)} (details in {log_dir / 'spark.log'})") from None
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        log.close()
