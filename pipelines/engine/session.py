"""The Spark session of a process, and what a run keeps in it.

A session is either classic (a JVM behind Py4J: local Spark, Databricks classic compute) or a Spark Connect client
(Databricks serverless, or any Connect server named by the `spark_remote` setting). A Connect session has no
`sparkContext`, no JVM in this process and, on serverless, no DataFrame cache: the code that runs on Databricks or
through `spark_remote` uses none of them (`is_connect`, `cached`, `release`).

On Databricks and through `spark_remote` the session is handed over; otherwise this process starts local Spark with
Delta on disk (`quorumlake.pipelines.engine.local`, imported only then).
"""

from __future__ import annotations

import os

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from quorumlake.pipelines.config import Config


def on_databricks() -> bool:
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


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
    from quorumlake.pipelines.engine.local import local_session

    return local_session(config, app_name)


def quiet(spark: SparkSession) -> None:
    """Keep Spark's console to errors, so CLI output stays readable (a Connect server logs on its own side)."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel("ERROR")


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect client session (Databricks serverless, `spark_remote`), told by its class alone: nothing is
    imported or asked of the server, and `spark.sparkContext`, which raises there, is never touched."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


# A session setting that is "true" for a small run on a local session (`Lakehouse.tune_for`, by
# `quorumlake.pipelines.engine.local.keeps_checkpoints`): then `cached` keeps a frame as a local checkpoint instead of
# persisting it. Never set on a session this process did not start.
LOCAL_CHECKPOINTS = "spark.quorumlake.keepAsLocalCheckpoint"


def cached(df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
    """`df`, kept for the several actions that read it where the session can keep it; under Spark Connect, `df` as it
    is (it is recomputed by each action that reads it).

    Serverless compute refuses `persist()` (NOT_SUPPORTED_WITH_SERVERLESS) up to environment version 4; version 5
    caches only as a workspace preview that an admin may turn off and that compliance-profile workspaces lack. The
    pipeline's results never depend on a cache (every input it re-reads is a fixed Delta version or a literal), so a
    Connect session simply does not cache.

    A classic session persists `df`; a small run on a local session keeps it as a local checkpoint instead
    (`LOCAL_CHECKPOINTS`, `quorumlake.pipelines.engine.local.checkpointed`), dropped when the run ends.

    Every `persist()` of a run goes through here, and what it keeps is dropped through `release` and `release_all`."""
    spark = df.sparkSession
    if is_connect(spark):
        return df
    if spark.conf.get(LOCAL_CHECKPOINTS, "false") == "true":
        from quorumlake.pipelines.engine.local import checkpointed

        global _checkpoints_made
        _checkpoints_made = True
        return checkpointed(df, level)
    kept = df.persist() if level is None else df.persist(level)
    _kept[id(kept)] = kept
    return kept


def literal(df: DataFrame) -> DataFrame:
    """A small frame's rows, collected, as a frame of those rows: a query that reads it carries the rows, not the
    lineage they were computed by (a scope of a few rows per cluster derived from a round's changes, say), so its
    plan, and the plan's text, stay small."""
    return df.sparkSession.createDataFrame(df.collect(), df.schema)


def release(df: DataFrame) -> None:
    """Drop what `cached` persisted (nothing under Spark Connect; a local checkpoint waits for `release_all`, as what
    the run derived from it may still read its blocks)."""
    if _kept.pop(id(df), None) is not None:
        df.unpersist()


def release_all() -> None:
    """Drop whatever `cached` kept that was not released: every local checkpoint of the run, and what a run ended by
    an exception between a `cached` and its `release` left persisted. Every later query of the session would otherwise
    be compared with each of those plans (Spark's cache lookup), a cost that grows with every such run in a
    long-lived process (a notebook, a test worker)."""
    global _checkpoints_made
    for df in list(_kept.values()):
        df.unpersist()
    _kept.clear()
    if _checkpoints_made:
        from quorumlake.pipelines.engine.local import drop_checkpoints

        drop_checkpoints()
        _checkpoints_made = False


# the DataFrames `cached` persisted and `release` has not dropped yet, by identity (persist() returns the same object)
_kept: dict[int, DataFrame] = {}
# whether `cached` made local checkpoints since the last `release_all`
_checkpoints_made = False
