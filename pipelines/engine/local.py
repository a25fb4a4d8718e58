"""The embedded default engine: local Spark with Delta tables on disk, started in this process.

Nothing here runs on Databricks or through `spark_remote` (`quorumlake.pipelines.engine.session.get_spark` imports
this module only when it starts a local session). It holds the local session's settings and what makes local runs
faster where that pays on a laptop or a CI machine:
- the jars Ivy resolved for Delta (at install, `prepare`, run by scripts/bootstrap.sh), remembered and given to later
  starts directly (no resolution per start);
- the parallel garbage collector for every local JVM unless `java_options` picks one (`JAVA_OPTIONS`), and options
  for runs known to be small (`SMALL_RUN_JAVA_OPTIONS`: the demo, the test suite);
- for a run whose new data is small, Spark's interpreted engine with one task per stage (`tune_for`), and frames kept
  as local checkpoints instead of persisted (`checkpointed`).

One session per process: it must be the first SparkSession the process creates, because `spark.jars.packages` is
only read when the JVM starts (PySpark launches its Py4J gateway JVM once per process), so a Delta-configured session
built after a plain one (even a stopped one) gets no Delta jars.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from quorumlake.pipelines.config import Config
from quorumlake.pipelines.errors import RuntimeFailure, one_line

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"


def ivy_home() -> Path:
    """Where Delta's jars are cached after the first download (override with QUORUMLAKE_IVY_HOME)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quorumlake" / "ivy"
    return Path(os.environ.get("QUORUMLAKE_IVY_HOME", default))


def local_session(config: Config, app_name: str = "quorumlake") -> SparkSession:
    """This process's local session (the active one, or a new one with Delta)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Python workers must run the interpreter that has our dependencies (pyarrow, ...), not whatever `python3` is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = builder(config, app_name).getOrCreate()
    _remember_resolution(spark)
    return spark


def builder(config: Config, app_name: str) -> SparkSession.Builder:
    """The builder of a local session with Delta."""
    from delta import configure_spark_with_delta_pip

    settings = resources.files("quorumlake.pipelines.engine").joinpath("ivysettings.xml")
    maven_root = os.environ.get("QUORUMLAKE_MAVEN_REPO", MAVEN_CENTRAL)
    warehouse = Path(config.warehouse).absolute()
    java_opts = f"-Dquorumlake.maven.root={maven_root} -Dderby.system.home={warehouse / '_derby'}"
    resolved = _resolved_jars()
    java_opts += f" {java_options(config.java_options)}"
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
        # a table's state is computed in this many partitions (50 by default: 50 tasks per table read on a laptop)
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # Delta keeps the log and state of this many tables per session (10 by default): a long-lived session that
        # reads every table in turn (`quorumlake serve` answering a BI tool, a notebook) keeps all 19
        .config("spark.databricks.delta.delta.log.cacheSize", "40")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        # Each query's plan is also rendered as text for the SQL listener (the UI's and the event log's description).
        # A backfill's gold plans are large (many sources joined, persisted frames nested in them), and a text of
        # several such plans can take more than the 1 GB default heap; the text is cut at this many characters.
        .config("spark.sql.maxPlanStringLength", str(MAX_PLAN_STRING_LENGTH))
        # The driver's heap (1 GB by default) holds the run's work, not its history. A cached batch is built whole in
        # the heap before it goes to disk, and a silver batch's rows carry their records' payloads: batches of 1,000
        # rows instead of 10,000.
        .config("spark.sql.inMemoryColumnarStorage.batchSize", "1000")
        # Parquet is read 1,024 rows at a time instead of 4,096: a column's batch is one array, and 4,096 metric
        # scrapes of bronze.metrics_raw's payload are tens of MB at once
        .config("spark.sql.parquet.columnarReaderBatchSize", "1024")
        # the status store keeps this many tasks, jobs, stages and queries for a UI that is off
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
        # the jars an earlier start resolved for Delta's package, given directly: no Ivy resolution at start
        builder = builder.config("spark.jars.packages", "").config("spark.jars", ",".join(resolved))
    return builder


MAX_PLAN_STRING_LENGTH = 100_000

# The local JVM's own options. A run is a batch on one machine: throughput is what counts, and the parallel collector
# does the same work as the JVM's default (G1) without G1's concurrent marking threads, which on a laptop's few cores
# take CPU from Spark's tasks (docs/decisions/0016).
JAVA_OPTIONS = "-XX:+UseParallelGC"
# A `java_options` setting that names a collector replaces ours (the JVM refuses two collectors).
_COLLECTOR = re.compile(r"(^|\s)-XX:\+Use\w*GC(\s|$)")

# JVM options (the `java_options` setting) for runs known to be small: the demo fleet, the test suite. On a run of a few
# MB a local JVM spends most of its CPU compiling code: scaling the compile thresholds by 4 compiles only what a small
# run repeats.
SMALL_RUN_JAVA_OPTIONS = "-XX:CompileThresholdScaling=4"


def java_options(configured: str) -> str:
    """The JVM options of a local driver: ours, then the `java_options` setting (which may replace our collector)."""
    configured = configured.strip()
    ours = "" if _COLLECTOR.search(configured) else JAVA_OPTIONS
    return " ".join(o for o in (ours, configured) if o)


def prepare(config: Config) -> None:
    """Have Spark resolve (download) Delta's jars once, at install, so that the first run does not wait for it and
    every later start is given the remembered jars."""
    if not _resolved_jars():
        subprocess.run([sys.executable, "-c", _START_ONCE, config.warehouse], check=True, timeout=1800)


_START_ONCE = """
import sys
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.local import local_session
local_session(Config(warehouse=sys.argv[1]), "quorumlake-prepare").stop()
"""


def _delta_version() -> str:
    from importlib.metadata import version

    return version("delta_spark")


def _resolution_file() -> Path:
    """Where the jars that Ivy resolved for this Delta and PySpark (and our Ivy settings) are remembered."""
    import pyspark

    key = f"pyspark {pyspark.__version__} delta {_delta_version()}"
    return ivy_home() / f"resolved-{hashlib.sha256(key.encode()).hexdigest()[:16]}.txt"


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
    target = _resolution_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text("\n".join(resolved) + "\n", encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        pass  # only a missed shortcut: the next start resolves again


# --- the engine of a small run ----------------------------------------------------------------------------------------

# (setting, value for a small run, value otherwise: Spark's default, a function of the run's Config, or None to
# leave it to Spark)
_ENGINE_SETTINGS = (
    # compiling generated code for each of a small run's few hundred queries costs more than it saves
    ("spark.sql.codegen.wholeStage", "false", "true"),
    ("spark.sql.codegen.factoryMode", "NO_CODEGEN", "FALLBACK"),
    ("spark.sql.adaptive.enabled", "false", "true"),
    # one task per shuffle and per scan of a small table
    ("spark.sql.shuffle.partitions", "1", lambda config: str(config.shuffle_partitions)),
    ("spark.sql.files.minPartitionNum", "1", None),
)

# The settings of a small run's engine, for a session known to serve small runs only (`tune_for` sets them per run;
# a server for tiny data, such as the test suite's Spark Connect server, starts its sessions with them).
SMALL_RUN_ENGINE = {key: small for key, small, _ in _ENGINE_SETTINGS}


def tune_for(spark: SparkSession, config: Config, sizes: tuple[int | None, ...]) -> bool:
    """Set this local session's engine for a run whose data is `sizes` bytes (of landing data; None: unknown): at
    most `small_run_bytes` in all of them, the interpreted engine with one task per stage; else Spark's defaults and
    the configured shuffle partitions. True when small."""
    small = None not in sizes and max(sizes) <= config.small_run_bytes
    for key, interpreted, default in _ENGINE_SETTINGS:
        value = interpreted if small else default(config) if callable(default) else default
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    return small


def keeps_checkpoints(config: Config, small: bool) -> bool:
    """Whether a run keeps its frames as local checkpoints (`checkpointed`): a small one on a local master."""
    return small and config.spark_master.startswith("local")


def checkpointed(df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
    """`df` kept as a local checkpoint: computed once by its first action into the blocks a persist would fill, and
    then a plan of one node. A persisted frame's whole plan is carried by every later query through analysis and
    Spark's cache lookup (its subplans compared with each cached plan), which costs a small run more than computing
    its rows. A checkpoint cannot be recomputed should its blocks be lost, which only an executor lost on a cluster
    does, so only a local master keeps them (`keeps_checkpoints`). Dropped by `drop_checkpoints` when the run ends."""
    kept = df.localCheckpoint(eager=False) if level is None else df.localCheckpoint(eager=False, storageLevel=level)
    _checkpoints[id(kept)] = kept
    return kept


def drop_checkpoints() -> None:
    """Drop the blocks of every local checkpoint made since the last call."""
    for df in list(_checkpoints.values()):
        checkpoint_rdd(df).unpersist(False)
    _checkpoints.clear()


def checkpoint_rdd(df: DataFrame):
    """The JVM RDD whose blocks hold a frame kept as a local checkpoint (the one node of its plan)."""
    return df._jdf.queryExecution().logical().rdd()


# the local checkpoints `checkpointed` made since the last `drop_checkpoints`, by identity
_checkpoints: dict[int, DataFrame] = {}


# --- the JVM's output -------------------------------------------------------------------------------------------------


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


if __name__ == "__main__":  # `python -m quorumlake.pipelines.engine.local [WAREHOUSE]`: run by scripts/bootstrap.sh
    import tempfile

    prepare(Config(warehouse=sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()))
    print("Spark prepared (Delta's jars resolved)")
