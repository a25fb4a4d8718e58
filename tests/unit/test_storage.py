"""The storage seam (pipelines/storage/): bounded MERGEs, what a local table's Delta log says (read with delta-rs), the
run's engine."""

from __future__ import annotations

import os
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from quorumlake.contract.tables import BRONZE_QUORUM_RAW
from quorumlake.pipelines.engine.session import LOCAL_CHECKPOINTS, release_all
from quorumlake.pipelines.storage import PARQUET_TO_LANDING, Bounds, Lakehouse
from quorumlake.pipelines.storage.bounds import outside
from tests.frames import assert_frames_equal
from tests.helpers import checkpointed_rdd

T0 = datetime(2024, 10, 27, 3, 33, 20, tzinfo=timezone.utc)


def _raw(spark, rows):
    """bronze.quorum_raw rows from (record_id, cluster_id) pairs; the other columns are filler."""
    full = [
        (rid, "describe_quorum_json", cluster, None, T0, 0, "{}", None, "file:/x.jsonl", 1, "sha", 2, T0, T0, None)
        for rid, cluster in rows
    ]
    return spark.createDataFrame(full, BRONZE_QUORUM_RAW.spark_schema)


def test_a_file_is_outside_bounds_only_by_a_timestamp_column_s_statistics():
    t0_us = int(T0.timestamp() * 1_000_000)
    later = Bounds("collected_at", t0_us + 1000, None)
    assert outside(later, 3, 0, T0, T0)  # kept to the millisecond: its maximum is T0 + 999 us
    assert not outside(Bounds("collected_at", t0_us + 999, None), 3, 0, T0, T0)
    assert outside(later, 0, None, None, None)  # no rows
    assert not outside(later, None, None, None, None)  # no statistics
    # a DATE column's statistics (gold.slo_budget's `day`) or a zone-less timestamp's say nothing here
    assert not outside(Bounds("day", t0_us + 86_400_000_000, None), 14, 0, date(2024, 10, 27), date(2024, 10, 27))
    naive = T0.replace(tzinfo=None)
    assert not outside(later, 3, 0, naive, naive)


def test_bounds_keep_rows_without_a_cluster(spark):
    df = _raw(spark, [("a", "c1"), ("b", None)])
    bounds = Bounds.of(df, "collected_at")
    assert bounds.clusters == ("c1",)
    assert df.where(bounds.sql()).count() == 2  # the row whose cluster is unknown is not left out


def test_insert_new_twice_adds_a_row_without_a_cluster_once(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    rows = _raw(spark, [("a", "c1"), ("b", None)])
    for _ in range(2):  # a file read again after a crash
        lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at", or_null=True))
    assert_frames_equal(
        lakehouse.read(BRONZE_QUORUM_RAW), rows, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )


def test_versions_and_commit_metrics_from_the_local_log_match_describe_history(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    rows = _raw(spark, [("a", "c1")])
    lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at", or_null=True))
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("b", "c2")]))
    history = spark.sql(f"DESCRIBE HISTORY {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)}").orderBy("version").collect()
    assert lakehouse.version(BRONZE_QUORUM_RAW) == history[-1]["version"] == 2
    assert lakehouse.log.last_commit_metrics(BRONZE_QUORUM_RAW, 0) == [dict(r["operationMetrics"]) for r in history[1:]]
    # the first write into the empty table is an append, the second a MERGE
    first, second = lakehouse.log.last_commit_metrics(BRONZE_QUORUM_RAW, 0)
    assert (int(first["numOutputRows"]), int(second["numTargetRowsInserted"])) == (1, 1)
    assert [r["operation"] for r in history[1:]] == ["WRITE", "MERGE"]


def test_vacuum_could_delete_only_where_something_outside_the_log_is_older_than_the_cutoff_or_a_folder_is_empty(
    spark, make_lakehouse, tmp_path
):
    lakehouse = make_lakehouse(tmp_path / "landing")
    table = Path(lakehouse.catalog.table_path(BRONZE_QUORUM_RAW).removeprefix("file:"))
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (table / "part-0.parquet").write_bytes(b"x")
    (table / "_change_data").mkdir()
    (table / "_change_data" / "cdc-0.parquet").write_bytes(b"x")
    now = time.time()

    def age(path: Path, seconds: float) -> None:
        os.utime(path, (now - seconds, now - seconds))

    def could(cutoff_s: float) -> bool | None:
        return lakehouse.log.vacuum_could_delete(BRONZE_QUORUM_RAW, cutoff_s)

    for path in table.rglob("*"):
        age(path, 10)
    for path in (table / "_delta_log", table / "_delta_log" / "00000000000000000000.json"):
        age(path, 10_000)  # the log is never VACUUM's
    assert could(now - 100) is False
    age(table / "_change_data" / "cdc-0.parquet", 1_000)  # an old file, in a folder or not
    assert could(now - 100) is True and could(now - 10_000) is False
    age(table / "_change_data" / "cdc-0.parquet", 10)
    age(table / "_change_data", 1_000)  # an old folder
    assert could(now - 100) is True
    (table / "_change_data" / "cdc-0.parquet").unlink()
    age(table / "_change_data", 10)
    assert could(now - 100) is True  # an empty folder, however young: VACUUM removes it
    (table / "_change_data").rmdir()
    assert could(now - 100) is False
    # a table of a catalog: nothing is known
    assert make_lakehouse(tmp_path / "landing", catalog="main").log.vacuum_could_delete(BRONZE_QUORUM_RAW, now) is None


def test_a_table_is_known_empty_until_a_file_is_added_and_again_once_every_file_is_removed(
    spark, make_lakehouse, tmp_path
):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    assert lakehouse.log.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1"), ("a", "c1")]))  # appended, deduplicated
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1"), ("b", "c2")]))  # merged: only b is new
    assert lakehouse.read(BRONZE_QUORUM_RAW).count() == 2
    assert not lakehouse.log.known_empty(BRONZE_QUORUM_RAW)
    spark.sql(f"DELETE FROM {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)} WHERE record_id = 'a'")
    assert not lakehouse.log.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.truncate(BRONZE_QUORUM_RAW)  # what a full refresh does: every file removed
    assert lakehouse.log.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]))
    assert lakehouse.read(BRONZE_QUORUM_RAW).count() == 1
    operations = [
        r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)}").collect()
    ]
    assert operations[:4] == ["WRITE", "DELETE", "DELETE", "MERGE"]  # newest first
    # past a checkpoint (every 10 commits; every 2 for this table): the checkpoint's files, then the commits after it
    spark.sql(
        f"ALTER TABLE {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)} SET TBLPROPERTIES ('delta.checkpointInterval' = '2')"
    )
    lakehouse.truncate(BRONZE_QUORUM_RAW)
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]))
    assert any(
        ".checkpoint." in p.name for p in (tmp_path / "warehouse" / "bronze" / "quorum_raw" / "_delta_log").iterdir()
    )
    assert not lakehouse.log.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.truncate(BRONZE_QUORUM_RAW)
    assert lakehouse.log.known_empty(BRONZE_QUORUM_RAW)


def test_rows_added_are_counted_from_the_log_only_where_every_commit_just_added_rows(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    created = lakehouse.version(BRONZE_QUORUM_RAW)
    with_errors = _raw(spark, [("a", "c1"), ("b", "c1"), ("c", "c2")]).withColumn(
        "parse_error", F.when(F.col("record_id") != "a", F.lit("bad"))
    )
    lakehouse.insert_new(BRONZE_QUORUM_RAW, with_errors)  # an append
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("c", "c2"), ("d", "c2")]))  # an insert-only MERGE: d
    upto = lakehouse.version(BRONZE_QUORUM_RAW)
    feed = lakehouse.changes(BRONZE_QUORUM_RAW, created, upto).where("_change_type = 'insert'")
    assert (
        lakehouse.log.added_rows(BRONZE_QUORUM_RAW, created, upto, "parse_error")
        == (
            feed.count(),
            feed.where(F.col("parse_error").isNotNull()).count(),
        )
        == (4, 2)
    )
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, created + 1, upto) == (1, 1)  # the MERGE alone: d
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, -1, created) == (0, 0)  # CREATE TABLE adds no row
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, upto, upto) == (0, 0)
    assert lakehouse.log.local_version(BRONZE_QUORUM_RAW) == upto
    # a commit that removed rows: not certain from the log, Spark is asked
    spark.sql(f"DELETE FROM {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)} WHERE record_id = 'a'")
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, created, upto + 1) is None
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, created, upto + 1, "no_such_column") is None
    assert lakehouse.log.added_rows(BRONZE_QUORUM_RAW, created, upto, "no_such_column") is None  # no null count
    # whether a range of changes holds rows: the log's answer, and Spark's where the log cannot tell
    holds = {
        (lo, hi): lakehouse.changes_hold_rows(BRONZE_QUORUM_RAW, lo, hi, lakehouse.changes(BRONZE_QUORUM_RAW, lo, hi))
        for lo, hi in ((created, upto), (-1, created), (upto, upto + 1))
    }
    assert holds == {(created, upto): True, (-1, created): False, (upto, upto + 1): True}  # the DELETE: a delete row


def _raw_at(spark, rows):
    """bronze.quorum_raw rows from (record_id, collected_at) pairs in cluster c1."""
    return (
        _raw(spark, [(rid, "c1") for rid, _ in rows])
        .drop("collected_at")
        .join(spark.createDataFrame(rows, "record_id string, collected_at timestamp"), "record_id")
        .select(*BRONZE_QUORUM_RAW.column_names)
    )


def test_the_log_read_through_a_checkpoint_says_what_delta_reads(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    ref = lakehouse.catalog.ref(BRONZE_QUORUM_RAW)
    # a checkpoint every 4 commits (10 by default), so that a few commits reach past one
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.checkpointInterval' = '4')")
    for hour in range(7):  # appends, MERGEs and a delete past the checkpoints at versions 4 and 8
        rows = _raw_at(spark, [(f"r{hour}", T0 + timedelta(hours=hour))])
        lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at"))
        if hour == 2:
            spark.sql(f"DELETE FROM {ref} WHERE record_id = 'r2'")
    log = tmp_path / "warehouse" / "bronze" / "quorum_raw" / "_delta_log"
    checkpoint = max(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet"))
    history = spark.sql(f"DESCRIBE HISTORY {ref}").collect()
    # the table's state is a checkpoint and commits after it
    assert lakehouse.version(BRONZE_QUORUM_RAW) == max(r["version"] for r in history) > checkpoint > 0
    # the rows read by the driver are the table's rows
    rows = lakehouse.log.local_rows(BRONZE_QUORUM_RAW, ["record_id"])
    assert sorted(rows["record_id"].to_pylist()) == sorted(f"r{h}" for h in range(7) if h != 2)
    # every row within the last hour's bounds, none after them: the current files' statistics say so
    last_us = int((T0 + timedelta(hours=6)).timestamp()) * 1_000_000
    assert not lakehouse.log.holds_nothing_within(BRONZE_QUORUM_RAW, Bounds("collected_at", last_us, None))
    assert lakehouse.log.holds_nothing_within(BRONZE_QUORUM_RAW, Bounds("collected_at", last_us + 1000, None))
    # the commits' operations and metrics, as DESCRIBE HISTORY gives them
    commits = lakehouse.log.commits(BRONZE_QUORUM_RAW, -1)
    assert [(c.version, c.operation, c.metrics) for c in commits] == [
        (r["version"], r["operation"], dict(r["operationMetrics"] or {}))
        for r in sorted(history, key=lambda r: r["version"])
    ]


def test_rows_are_read_by_the_driver_as_delta_reads_them_deletion_vectors_too(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    assert lakehouse.log.local_rows(BRONZE_QUORUM_RAW, ["record_id"]).num_rows == 0  # no file: no row
    lakehouse.append(BRONZE_QUORUM_RAW, _raw_at(spark, [("a", T0), ("b", T0)]).coalesce(1))
    assert lakehouse.log.local_rows(BRONZE_QUORUM_RAW, ["record_id"])["record_id"].to_pylist() == ["a", "b"]
    assert lakehouse.log.local_rows(BRONZE_QUORUM_RAW, ["no_such_column"]) is None  # Spark is asked, and says
    ref = lakehouse.catalog.ref(BRONZE_QUORUM_RAW)
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM {ref} WHERE record_id = 'a'")
    assert [
        r["numDeletionVectorsAdded"]
        for r in spark.sql(f"DESCRIBE HISTORY {ref} LIMIT 1")
        .select("operationMetrics.numDeletionVectorsAdded")
        .collect()
    ] == ["1"]
    rows = lakehouse.log.local_rows(BRONZE_QUORUM_RAW, ["record_id"])
    assert rows is None, rows
    assert not lakehouse.log.known_empty(BRONZE_QUORUM_RAW)


def test_a_table_holds_nothing_within_bounds_its_files_statistics_exclude(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    us = 1_000_000
    t0 = int(T0.timestamp()) * us
    assert lakehouse.log.holds_nothing_within(BRONZE_QUORUM_RAW, Bounds("collected_at", t0, None))  # empty
    later = T0 + timedelta(hours=1, microseconds=1500)
    lakehouse.append(BRONZE_QUORUM_RAW, _raw_at(spark, [("a", T0), ("b", later)]).coalesce(1))  # one file
    t1 = t0 + 3600 * us + 1500

    def within(lo, hi=None, or_null=False):
        return not lakehouse.log.holds_nothing_within(BRONZE_QUORUM_RAW, Bounds("collected_at", lo, hi, None, or_null))

    assert not within(t1 + 500)  # after the millisecond of the newest row
    assert within(t1 + 499)  # within it: statistics keep milliseconds and cannot tell apart
    assert within(t1)  # the newest row itself
    assert not within(None, t0 - 1)  # before the oldest
    assert within(t0 - us, t0)
    assert within(t0 + us, t0 + 2 * us)  # between two rows of one file: its statistics cannot tell
    lakehouse.append(BRONZE_QUORUM_RAW, _raw_at(spark, [("c", None)]))
    assert not within(t1 + 500)  # a row without a time holds no time
    assert within(t1 + 500, or_null=True)  # ... unless rows without a time are within


def test_new_keys_after_a_history_are_appended_and_a_repeat_adds_nothing(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    history = _raw_at(spark, [("a", T0), ("b", T0 + timedelta(hours=1))])
    batch = _raw_at(spark, [("c", T0 + timedelta(hours=2)), ("d", T0 + timedelta(hours=3))])
    for rows in (history, batch):  # a batch of later times after the history: both appended
        lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at"))
    operations = [
        r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)}").collect()
    ]
    assert operations[::-1][1:] == ["WRITE", "WRITE"]
    version = lakehouse.version(BRONZE_QUORUM_RAW)
    for rows in (batch, history):  # a file read twice, an old file again: MERGEs that find every key there
        lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at"))
    assert lakehouse.version(BRONZE_QUORUM_RAW) == version
    assert_frames_equal(
        lakehouse.read(BRONZE_QUORUM_RAW),
        history.union(batch),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_replace_scope_fills_an_empty_table_by_one_append_then_merges_only_what_differs(
    spark, make_lakehouse, tmp_path
):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    rows = _raw(spark, [("a", "c1"), ("b", "c1"), ("c", "c2")])
    scope = spark.createDataFrame([("c1",), ("c2",)], "cluster_id string")
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, rows, scope)
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, rows, scope)  # the same rows again: nothing differs, no commit
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]), scope.where("cluster_id = 'c1'"))
    history = spark.sql(f"DESCRIBE HISTORY {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)}").orderBy("version").collect()
    assert [r["operation"] for r in history[1:]] == ["WRITE", "MERGE"]
    assert int(history[-1]["operationMetrics"]["numTargetRowsDeleted"]) == 1  # b left c1's scope; c2 untouched
    assert_frames_equal(
        lakehouse.read(BRONZE_QUORUM_RAW),
        _raw(spark, [("a", "c1"), ("c", "c2")]),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_replace_scope_appends_rows_of_new_keys_and_merges_once_a_row_held_changes_or_goes(
    spark, make_lakehouse, tmp_path
):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    c1 = spark.createDataFrame([("c1",)], "cluster_id string")
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]), c1)  # the first write: an append
    # a held unchanged and b new, nothing in scope goes: only b is written, by an append
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1"), ("b", "c1")]), c1)
    changed = _raw(spark, [("a", "c1"), ("b", "c1")]).withColumn("line_number", F.lit(7).cast("int"))
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, changed, c1)  # both held rows change: a MERGE updates them
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, changed.where("record_id = 'a'").union(_raw(spark, [("d", "c1")])), c1)
    history = spark.sql(f"DESCRIBE HISTORY {lakehouse.catalog.ref(BRONZE_QUORUM_RAW)}").orderBy("version").collect()
    assert [r["operation"] for r in history[1:]] == ["WRITE", "WRITE", "MERGE", "MERGE"]
    assert int(history[2]["operationMetrics"]["numOutputRows"]) == 1
    assert int(history[3]["operationMetrics"]["numTargetRowsUpdated"]) == 2
    last = history[4]["operationMetrics"]  # b goes and d is new: not an append, or b would stay
    assert (int(last["numTargetRowsDeleted"]), int(last["numTargetRowsInserted"])) == (1, 1)
    expected = changed.where("record_id = 'a'").union(_raw(spark, [("d", "c1")]))
    assert_frames_equal(
        lakehouse.read(BRONZE_QUORUM_RAW), expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )


def test_replace_scope_with_no_rows_leaves_an_empty_table_without_a_commit(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    before = lakehouse.version(BRONZE_QUORUM_RAW)
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, _raw(spark, []), spark.createDataFrame([("c1",)], "cluster_id string"))
    assert lakehouse.version(BRONZE_QUORUM_RAW) == before
    assert lakehouse.log.known_empty(BRONZE_QUORUM_RAW)


def test_a_small_run_gets_the_interpreted_engine_and_a_big_one_or_a_rebuild_spark_defaults(
    spark, make_lakehouse, tmp_path
):
    lakehouse: Lakehouse = make_lakehouse(tmp_path / "landing", small_run_bytes=1000)
    try:
        assert lakehouse.tune_for(1000)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
        assert spark.conf.get("spark.sql.shuffle.partitions") == "1"  # one task per shuffle and small scan
        assert spark.conf.get("spark.sql.files.minPartitionNum") == "1"
        assert spark.conf.get(LOCAL_CHECKPOINTS) == "true"  # a local master: frames kept as local checkpoints
        assert not lakehouse.tune_for(1001)
        assert spark.conf.get(LOCAL_CHECKPOINTS) == "false"
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # the configured count
        assert spark.conf.get("spark.sql.files.minPartitionNum", None) is None  # Spark's own: the parallelism
        assert not lakehouse.tune_for(None)  # size unknown
        lakehouse.rebuild_bytes = None  # a full refresh whose size is unknown
        assert not lakehouse.tune_for(0)
        lakehouse.rebuild_bytes = 1001  # one that re-reads more than a small run
        assert not lakehouse.tune_for(0)
        lakehouse.rebuild_bytes = 1000
        assert lakehouse.tune_for(0)
        # a silver batch of Parquet: a small one leaves the engine, a big one (in landing bytes) switches it up
        lakehouse.tune_up_for(1000 // PARQUET_TO_LANDING)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        lakehouse.tune_up_for(None)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        lakehouse.tune_up_for(1000 // PARQUET_TO_LANDING + 1)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get(LOCAL_CHECKPOINTS) == "false"
        # a small run on a cluster's master (whose lost executors lose blocks) still persists what it keeps
        clustered = make_lakehouse(tmp_path / "landing", small_run_bytes=1000, spark_master="spark://cluster:7077")
        assert clustered.tune_for(1000)
        assert spark.conf.get(LOCAL_CHECKPOINTS) == "false"
    finally:
        lakehouse.rebuild_bytes = 0
        lakehouse.tune_for(0)  # the test session's engine


def test_a_full_refresh_is_sized_by_the_tables_it_rereads(spark, make_lakehouse, tmp_path):
    from quorumlake.contract.tables import ALL_TABLES
    from quorumlake.pipelines.jobs.run import rebuild_size

    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables(ALL_TABLES)
    assert rebuild_size(lakehouse, ("silver", "gold")) == 0
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]))
    files = (tmp_path / "warehouse" / "bronze" / "quorum_raw").glob("*.parquet")
    size = sum(p.stat().st_size for p in files)
    assert size > 0
    assert (
        rebuild_size(lakehouse, ("silver",)) == rebuild_size(lakehouse, ("silver", "gold")) == PARQUET_TO_LANDING * size
    )
    assert rebuild_size(lakehouse, ("gold",)) == 0  # gold re-reads silver, still empty
    assert rebuild_size(lakehouse, ("bronze", "silver")) is None  # the landing zone's size is not known


def test_a_new_warehouse_records_its_table_definitions_with_the_first_progress_commit(spark, make_lakehouse, tmp_path):
    from quorumlake.contract.tables import ALL_TABLES, PIPELINE_RUNS
    from quorumlake.pipelines.storage import registry_fingerprint

    def records(lakehouse):
        return {
            (r["consumer"], r["source_table"]): (r["source_version"], r["fingerprint"])
            for r in lakehouse.read(PIPELINE_RUNS).collect()
        }

    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables(ALL_TABLES)
    assert lakehouse.version(PIPELINE_RUNS) == 0 and records(lakehouse) == {}  # created; no commit of its own
    lakehouse.save_progress("bronze", {"landing": 3}, {"landing": "f"})
    fingerprint = registry_fingerprint(ALL_TABLES)
    expected = {("bronze", "landing"): (3, "f"), ("registry", "tables"): (len(ALL_TABLES), fingerprint)}
    assert lakehouse.version(PIPELINE_RUNS) == 1 and records(lakehouse) == expected  # one commit for both
    lakehouse.save_progress("bronze", {"landing": 4}, {"landing": "g"})
    assert records(lakehouse)[("registry", "tables")] == (len(ALL_TABLES), fingerprint)  # written once, kept
    # the next process finds the definitions recorded: no table is looked at again, nothing is committed
    later = make_lakehouse(tmp_path / "landing")
    versions = {spec.name: later.version(spec) for spec in ALL_TABLES}
    later.ensure_tables(ALL_TABLES)
    assert {spec.name: later.version(spec) for spec in ALL_TABLES} == versions

    # a run that saves no progress of its own writes the record when it ends (flush_progress)
    other = make_lakehouse(tmp_path / "landing", warehouse=str(tmp_path / "other"))
    other.ensure_tables(ALL_TABLES)
    other.flush_progress()
    assert records(other) == {("registry", "tables"): (len(ALL_TABLES), fingerprint)}
    other.flush_progress()
    assert other.version(PIPELINE_RUNS) == 1


def _ledger(lakehouse) -> dict[tuple[str, str], tuple]:
    from quorumlake.contract.tables import PIPELINE_RUNS

    return {
        (r["consumer"], r["source_table"]): (r["run_at"], r["source_version"], r["fingerprint"])
        for r in lakehouse.read(PIPELINE_RUNS).collect()
    }


def test_held_progress_records_go_with_the_ledger_s_next_commit_which_keeps_every_other_record(
    spark, make_lakehouse, tmp_path
):
    from quorumlake.contract.tables import PIPELINE_RUNS

    first_run, second_run = (datetime(2024, 10, 27, hour, tzinfo=timezone.utc) for hour in (3, 4))
    read_back = second_run.replace(tzinfo=None)  # as Spark returns it (the tests' zone is UTC)
    lakehouse = make_lakehouse(tmp_path / "landing", run_at=first_run)
    lakehouse.ensure_tables((PIPELINE_RUNS,))
    lakehouse.save_progress("bronze", {"landing": 3}, {"landing": "f"})
    lakehouse.save_progress("silver", {"bronze.quorum_raw": 2, "bronze.metrics_raw": 1})
    assert lakehouse.version(PIPELINE_RUNS) == 2

    # the next run: bronze and silver hold their records, gold's commit writes all three
    later = make_lakehouse(tmp_path / "landing", run_at=second_run)
    later.save_progress("bronze", {"landing": 5}, {"landing": "g"}, hold=True)
    later.save_progress("silver", {"bronze.quorum_raw": 4, "bronze.metrics_raw": 1}, hold=True)
    assert later.version(PIPELINE_RUNS) == 2 and later.progress("silver") == {
        "bronze.quorum_raw": 4,
        "bronze.metrics_raw": 1,
    }
    later.save_progress("gold", {"silver.replica_states": 7})
    assert later.version(PIPELINE_RUNS) == 3
    ledger = _ledger(later)
    # the first run's record of the table definitions is kept as that run wrote it
    assert ledger.pop(("registry", "tables"))[:2] == (first_run.replace(tzinfo=None), 1)
    assert ledger == {
        ("bronze", "landing"): (read_back, 5, "g"),
        ("silver", "bronze.quorum_raw"): (read_back, 4, None),
        ("silver", "bronze.metrics_raw"): (read_back, 1, None),
        ("gold", "silver.replica_states"): (read_back, 7, None),
    }
    later.flush_progress()  # nothing held: no commit
    assert later.version(PIPELINE_RUNS) == 3
    # written whole, the ledger keeps its declared layout
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{later.catalog.table_path(PIPELINE_RUNS)}`").first()
    assert tuple(detail["clusteringColumns"]) == PIPELINE_RUNS.clustering == ("consumer", "source_table")

    # a run that records only gold keeps the others' records as their runs wrote them, each consumer's rows whole
    third = make_lakehouse(tmp_path / "landing", run_at=datetime(2024, 10, 27, 5, tzinfo=timezone.utc))
    third.save_progress("gold", {"silver.node_metrics": 2}, hold=True)
    third.flush_progress()
    ledger = _ledger(third)
    assert ledger[("bronze", "landing")] == (read_back, 5, "g")
    assert ("gold", "silver.replica_states") not in ledger and ledger[("gold", "silver.node_metrics")][1:] == (2, None)
    # a consumer reset (full refresh) is gone from the next commit too
    third.ledger.reset_progress("silver")
    third.save_progress("gold", {"silver.node_metrics": 3})
    assert {consumer for consumer, _ in _ledger(third)} == {"bronze", "gold", "registry"}
    # a record without its run's time (written by hand) is kept as it is, and does not stop the run
    spark.sql(f"INSERT INTO {third.catalog.ref(PIPELINE_RUNS)} VALUES (NULL, 'by-hand', 't', 1, NULL)")
    fourth = make_lakehouse(tmp_path / "landing")
    fourth.save_progress("gold", {"silver.node_metrics": 4})
    assert _ledger(fourth)[("by-hand", "t")] == (None, 1, None)


def test_a_run_whose_layer_fails_keeps_the_progress_of_the_layers_before_it(
    spark, make_lakehouse, tmp_path, monkeypatch
):
    from quorumlake.contract.tables import PIPELINE_RUNS
    from quorumlake.pipelines.jobs import run

    def silver(lakehouse, progress, timings):
        lakehouse.save_progress("silver", {"bronze.quorum_raw": 1}, hold=True)
        return []

    def gold_that_fails(lakehouse, progress, timings):
        raise RuntimeError("gold failed")

    # bronze is the real one, over an empty landing zone: it records a listing of no files
    (tmp_path / "landing").mkdir()
    monkeypatch.setitem(run.LAYER_RUNNERS, "silver", silver)
    monkeypatch.setitem(run.LAYER_RUNNERS, "gold", gold_that_fails)
    lakehouse = make_lakehouse(tmp_path / "landing")
    with pytest.raises(RuntimeError, match="gold failed"):
        run.run_pipeline(lakehouse)
    ledger = _ledger(make_lakehouse(tmp_path / "landing"))
    assert ledger[("bronze", "landing")][1] == 0 and ledger[("silver", "bronze.quorum_raw")][1] == 1
    assert {consumer for consumer, _ in ledger} == {"bronze", "silver", "registry"}
    # a run through every layer writes the ledger once: one commit after the one that created it
    monkeypatch.setitem(run.LAYER_RUNNERS, "gold", lambda lakehouse, progress, timings: [])
    other = make_lakehouse(tmp_path / "landing", warehouse=str(tmp_path / "other"))
    run.run_pipeline(other)
    assert other.version(PIPELINE_RUNS) == 1 and {c for c, _ in _ledger(other)} == {"bronze", "silver", "registry"}


def test_bringing_tables_to_their_definitions_commits_only_what_differs(spark, make_lakehouse, tmp_path):
    import dataclasses

    from quorumlake.contract.tables import ALL_TABLES, BRONZE_METRICS_RAW

    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables(ALL_TABLES)
    versions = {spec.name: lakehouse.version(spec) for spec in ALL_TABLES}
    for spec in ALL_TABLES:  # every table as declared: nothing to commit
        lakehouse.catalog.evolve(spec, lakehouse.read(spec).schema)
    assert {spec.name: lakehouse.version(spec) for spec in ALL_TABLES} == versions
    # a property the table does not hold yet: one commit, and the table holds it
    changed = dataclasses.replace(
        BRONZE_METRICS_RAW, properties=(*(BRONZE_METRICS_RAW.properties or ()), ("quorumlake.test", "yes"))
    )
    lakehouse.catalog.evolve(changed, lakehouse.read(changed).schema)
    assert lakehouse.version(BRONZE_METRICS_RAW) == versions[BRONZE_METRICS_RAW.name] + 1
    detail = spark.sql(f"DESCRIBE DETAIL {lakehouse.catalog.ref(BRONZE_METRICS_RAW)}").first()
    assert detail["properties"]["quorumlake.test"] == "yes"


def test_staged_rows_come_back_whole_in_parquet_files_of_bounded_size_and_are_removed(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    sizes = [5, 40, 0, 7, 90, 3, 3]
    files = pa.table(
        {
            "path": [f"/l/{i}.jsonl" for i in range(len(sizes))],
            "content": pa.array([b"x" * n if n else None for n in sizes], pa.binary()),
            "at": pa.array([T0] * len(sizes), pa.timestamp("us", tz="UTC")),
        }
    )
    schema = "path STRING, content BINARY, at TIMESTAMP"
    staged = lakehouse.sources.staged(files, schema, "t", group_bytes=60)
    expected = spark.createDataFrame(
        [(f"/l/{i}.jsonl", b"x" * n if n else None, T0) for i, n in enumerate(sizes)], schema
    )
    assert_frames_equal(staged, expected, ignore_row_order=True, ignore_nullable=True)
    # row weights (path + content bytes) 15 50 10 17 100 13 13: files of at most 60 bytes, a larger row alone
    parts = sorted(Path(lakehouse.sources.staging("t")).glob("*.parquet"))
    assert [pq.read_table(p).num_rows for p in parts] == [1, 2, 1, 1, 2]
    lakehouse.sources.unstage("t")
    assert not Path(lakehouse.sources.staging("t")).exists()


def test_a_classic_session_materializes_by_caching_and_leaves_no_scratch(spark, make_lakehouse, tmp_path):
    # (under Spark Connect the frame is written once as Parquet instead: tests/e2e/test_connect.py)
    lakehouse = make_lakehouse(tmp_path / "landing")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id INT, name STRING")
    kept = lakehouse.sources.materialized(
        df
    )  # the test session's small runs: a local checkpoint (tests/unit/test_session.py)
    try:
        assert checkpointed_rdd(kept).getStorageLevel().useMemory()
        assert_frames_equal(kept, df)
        lakehouse.sources.drop_scratch()
        assert not Path(lakehouse.sources.scratch()).exists()
    finally:
        release_all()


def test_a_backlog_of_versions_is_cut_into_ranges_of_bounded_bytes_each_holding_a_commit():
    from quorumlake.pipelines.storage import batches

    assert batches(-1, 3, {0: 0, 1: 100, 2: 100, 3: 100}, 150) == [(-1, 1), (1, 2), (2, 3)]
    assert batches(-1, 3, {0: 0, 1: 100, 2: 100, 3: 100}, 10**9) == [(-1, 3)]
    assert batches(4, 5, {}, 1) == [(4, 5)]  # a single commit, sizes unknown
    assert batches(4, 7, {5: 500, 6: 10, 7: 10}, 100) == [(4, 5), (5, 7)]  # a commit over the budget stands alone
    assert batches(4, 7, {5: 10, 6: 500, 7: 10}, 100) == [(4, 5), (5, 6), (6, 7)]
    assert batches(2, 5, {}, 1) == [(2, 5)]  # nothing known added: one range
    assert batches(-1, 2, {0: 0, 1: 5, 2: 5}, 1) == [(-1, 1), (1, 2)]  # the table's creation joins the first range
    # from the start, after a DELETE at version 3: the first range is read as of version 3 at least
    assert batches(-1, 5, {1: 9, 2: 9, 3: 0, 4: 9, 5: 9}, 10, floor=3) == [(-1, 4), (4, 5)]


def test_the_bytes_each_commit_added_match_delta_s_own_history(spark, make_lakehouse, tmp_path):
    from quorumlake.contract.tables import PIPELINE_RUNS

    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((PIPELINE_RUNS,))
    lakehouse.save_progress("silver", {"bronze.quorum_raw": 3})
    lakehouse.save_progress("gold", {"silver.replica_states": 4, "silver.node_metrics": 1})
    upto = lakehouse.version(PIPELINE_RUNS)
    local = lakehouse.log.commit_sizes(PIPELINE_RUNS, -1, upto)[0]
    history = {
        r["version"]: int((r["operationMetrics"] or {}).get("numOutputBytes") or 0)
        for r in spark.sql(f"DESCRIBE HISTORY delta.`{lakehouse.catalog.table_path(PIPELINE_RUNS)}`").collect()
    }
    assert sorted(local) == list(range(upto + 1)) and upto >= 2
    assert local == history and local[upto] > 0
    assert lakehouse.log.commit_sizes(PIPELINE_RUNS, 0, upto)[0] == {v: history[v] for v in range(1, upto + 1)}
    assert lakehouse.log.added_bytes(PIPELINE_RUNS, 0, upto) == sum(history[v] for v in range(1, upto + 1))
    # a DELETE of every row: read from the start, the first range reaches it
    lakehouse.truncate(PIPELINE_RUNS)
    lakehouse.save_progress("silver", {"bronze.quorum_raw": 5})
    deleted, last = upto + 1, lakehouse.version(PIPELINE_RUNS)
    assert lakehouse.log.commit_sizes(PIPELINE_RUNS, -1, last)[1] == {deleted}
    assert lakehouse.version_ranges(PIPELINE_RUNS, -1, last)[0][1] >= deleted


def test_a_silver_batch_is_spread_over_partitions_of_bounded_bytes_only_when_it_is_big():
    from quorumlake.pipelines.jobs.silver_job import spread

    assert spread(None, 100) == 0  # size unknown: as read
    assert spread(200, 100) == 0  # two partitions' worth: as read
    assert spread(201, 100) == 3
    assert spread(60 * 2**20, 4 * 2**20) == 15


def test_names_registered_over_existing_tables_carry_their_declared_columns_comments_and_layout(
    spark, make_lakehouse, tmp_path
):
    from quorumlake.contract.tables import GOLD_QUORUM_STATUS

    lakehouse = make_lakehouse(tmp_path / "landing")
    specs = (BRONZE_QUORUM_RAW, GOLD_QUORUM_STATUS)
    lakehouse.catalog.register_names(specs)  # no tables yet: the names create them, as declared
    lakehouse.ensure_tables(specs)
    lakehouse.spark.conf.unset(f"quorumlake.registered.{lakehouse.catalog.table_name(GOLD_QUORUM_STATUS)}")
    lakehouse.catalog.register_names(specs)  # a table that exists: registered by its name and location only
    for spec in specs:
        table = lakehouse.catalog.table_name(spec)
        columns = [(c.name, c.description) for c in spark.catalog.listColumns(table)]
        assert columns == [(name, comment) for name, _, comment in spec.columns], spec.name
        detail = spark.sql(f"DESCRIBE DETAIL {table}").first()
        assert (detail["location"].removeprefix("file:"), detail["description"]) == (
            lakehouse.catalog.table_path(spec),
            spec.comment,
        )
        assert list(detail["clusteringColumns"] or []) == list(spec.clustering if not spec.partitioned_by else [])
        assert dict(detail["properties"]).items() >= dict(spec.properties or {}).items()
