"""The local engine (`quorumlake.pipelines.engine.local`): the jars Ivy resolved are remembered and used only while every
one is still cached, the JVM options of a small run; a classic session caches
what `cached` is given, a small local run as local checkpoints."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from quorumlake.pipelines.engine import local, session
from tests.helpers import checkpointed_rdd


def test_remembered_jars_are_used_only_when_all_are_still_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("QUORUMLAKE_IVY_HOME", str(tmp_path))
    assert local._resolved_jars() == []  # nothing remembered: Ivy resolves
    jars = [tmp_path / "jars" / "a.jar", tmp_path / "jars" / "b.jar"]
    jars[0].parent.mkdir()
    for jar in jars:
        jar.write_bytes(b"PK")
    local._resolution_file().write_text("\n".join(map(str, jars)) + "\n")
    assert local._resolved_jars() == [str(j) for j in jars]
    jars[1].unlink()  # a cache cleaned by hand: resolve again rather than start without a jar
    assert local._resolved_jars() == []


def test_the_remembered_resolution_is_per_pyspark_and_delta_version(tmp_path, monkeypatch):
    monkeypatch.setenv("QUORUMLAKE_IVY_HOME", str(tmp_path))
    first = local._resolution_file()
    monkeypatch.setattr(local, "_delta_version", lambda: "0.0.0-other")
    assert local._resolution_file() != first and local._resolution_file().parent == tmp_path


def test_the_suite_session_runs_the_jvm_options_of_a_small_run(spark):
    arguments = list(
        spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert set(local.SMALL_RUN_JAVA_OPTIONS.split()) <= set(arguments)
    collectors = {
        b.getName() for b in spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    }
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # the local engine's parallel collector, not the JVM's G1


def test_java_options_come_after_quorumlake_s_own(tmp_path):
    from quorumlake.pipelines.config import Config

    config = Config(warehouse=str(tmp_path), java_options="-Xss4m -XX:+UseParallelGC")
    options = dict(local.builder(config, "t")._options)["spark.driver.extraJavaOptions"]
    assert options.startswith("-Dquorumlake.maven.root=") and options.endswith(" -Xss4m -XX:+UseParallelGC")
    plain = dict(local.builder(Config(warehouse=str(tmp_path)), "t")._options)["spark.driver.extraJavaOptions"]
    assert plain.endswith(" -XX:+UseParallelGC")  # the parallel collector when the setting names none


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("", "-XX:+UseParallelGC"),
        ("  -Xss4m ", "-XX:+UseParallelGC -Xss4m"),
        ("-XX:+UseG1GC", "-XX:+UseG1GC"),  # the JVM refuses two collectors: the setting's wins
        ("-Xss4m -XX:+UseZGC -Dx=1", "-Xss4m -XX:+UseZGC -Dx=1"),
        ("-XX:+UseParallelGC -XX:CompileThresholdScaling=4", "-XX:+UseParallelGC -XX:CompileThresholdScaling=4"),
    ],
)
def test_a_collector_in_the_java_options_setting_replaces_the_parallel_one(configured, expected):
    assert local.java_options(configured) == expected


def test_a_query_plan_is_rendered_as_text_only_up_to_a_bound(spark):
    # a backfill's gold plans rendered in full once took more than the driver's 1 GB heap
    assert spark.conf.get("spark.sql.maxPlanStringLength") == str(local.MAX_PLAN_STRING_LENGTH)
    columns = [f"id + {i} AS a_column_with_a_rather_long_name_{i}" for i in range(3_000)]
    spark.conf.set("spark.sql.debug.maxToStringFields", "10000")  # every column named, as a plan of many nodes would
    try:
        plan = spark.range(1).selectExpr(*columns)._jdf.queryExecution().toString()
    finally:
        spark.conf.unset("spark.sql.debug.maxToStringFields")
    assert len(plan) <= local.MAX_PLAN_STRING_LENGTH + 1_000 < len("".join(columns))


def test_the_demo_runs_the_jvm_of_a_small_run(tmp_path):
    from quorumlake.pipelines.app.commands import demo_config

    assert demo_config(tmp_path).java_options == local.SMALL_RUN_JAVA_OPTIONS


@pytest.fixture
def persisting(spark):
    """The session of a run that persists what it keeps (a big run, or any run on a cluster), for one test."""
    before = spark.conf.get(session.LOCAL_CHECKPOINTS)
    spark.conf.set(session.LOCAL_CHECKPOINTS, "false")
    yield
    spark.conf.set(session.LOCAL_CHECKPOINTS, before)


def test_a_classic_session_persists_through_cached_and_release(spark, persisting):
    from pyspark import StorageLevel

    assert not session.is_connect(spark)  # Spark Connect sessions (serverless) keep nothing: tests/e2e/test_connect.py
    kept = session.cached(spark.range(3), StorageLevel.DISK_ONLY)
    assert kept.storageLevel == StorageLevel.DISK_ONLY
    session.release(kept)
    assert kept.storageLevel == StorageLevel.NONE


def test_a_small_local_run_keeps_a_local_checkpoint_until_the_run_ends(spark):
    from pyspark import StorageLevel

    assert spark.conf.get(session.LOCAL_CHECKPOINTS) == "true"  # the test session's small runs on a local master
    spark.catalog.clearCache()  # what other tests of this worker's session cached
    cache = spark._jsparkSession.sharedState().cacheManager()
    df = spark.range(3).selectExpr("id * 2 AS x")
    kept = session.cached(df, StorageLevel.DISK_ONLY)
    rdd = checkpointed_rdd(kept)  # a plan of one node, whatever `df`'s plan was
    assert cache.isEmpty()  # nothing in Spark's cache, which every later query's plan would be compared with
    assert rdd.getStorageLevel().useDisk() and not rdd.getStorageLevel().useMemory()
    assert [r.x for r in kept.collect()] == [0, 2, 4] and rdd.isCheckpointed()
    # release leaves it: a frame derived from it may still read its blocks until the run ends
    later = kept.selectExpr("x + 1 AS y")
    session.release(kept)
    assert rdd.getStorageLevel().useDisk()
    assert sorted(r.y for r in later.collect()) == [1, 3, 5]
    session.release_all()
    assert not rdd.getStorageLevel().isValid()  # StorageLevel.NONE: its blocks are gone


@pytest.mark.parametrize("keep", ["persist", "checkpoint"])
def test_what_a_run_cached_and_did_not_release_is_dropped_when_it_ends(
    spark, make_lakehouse, tmp_path, monkeypatch, request, keep
):
    from quorumlake.pipelines.jobs import run
    from quorumlake.pipelines.storage import Lakehouse

    if keep == "persist":
        request.getfixturevalue("persisting")
    spark.catalog.clearCache()  # what other tests of this worker's session cached
    cache = spark._jsparkSession.sharedState().cacheManager()
    kept = session.cached(spark.range(3).selectExpr("id * 2 AS x"))
    assert kept.count() == 3
    dropped = _dropped(kept, keep)
    assert not dropped()
    session.release_all()
    assert dropped() and cache.isEmpty()

    # a run that ends by an exception between a `cached` and its `release` (the crash harness abandons runs so)
    class Abandoned(BaseException):
        pass

    left = []

    def bronze_that_dies(lakehouse, progress, timings):
        left.append(session.cached(spark.range(5)))
        left[0].count()
        raise Abandoned

    monkeypatch.setitem(run.LAYER_RUNNERS, "bronze", bronze_that_dies)
    lakehouse: Lakehouse = make_lakehouse(tmp_path / "landing")
    with pytest.raises(Abandoned):
        run.run_pipeline(lakehouse, ("bronze",))
    assert _dropped(left[0], keep)() and cache.isEmpty()


def _dropped(kept, keep: str):
    """A check of whether what `cached` kept is dropped: the persisted frame uncached, or the checkpoint's blocks."""
    if keep == "persist":
        return lambda: not kept.is_cached
    rdd = checkpointed_rdd(kept)
    return lambda: not rdd.getStorageLevel().isValid()


def test_a_local_session_bounds_what_one_batch_of_rows_holds_in_the_driver_heap(spark):
    # what the large fleet's backfill died of in a 1 GB heap: a cached batch of 10,000 rows with their payloads, a
    # Parquet column batch of 4,096 metric scrapes
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.batchSize") == "1000"
    assert spark.conf.get("spark.sql.parquet.columnarReaderBatchSize") == "1024"


def test_a_literal_frame_holds_the_rows_not_the_lineage(spark):
    derived = spark.range(5).selectExpr("id % 2 AS k", "id AS v").groupBy("k").agg(F.max("v").alias("v"))
    rows = session.literal(derived)
    assert sorted(map(tuple, rows.collect())) == [(0, 4), (1, 3)]
    assert rows.schema == derived.schema
    plan = rows._jdf.queryExecution().analyzed()
    assert plan.children().isEmpty(), plan.toString()  # a leaf: the rows themselves
    assert not derived._jdf.queryExecution().analyzed().children().isEmpty()
