"""The storage seam (pipelines/io.py): bounded MERGEs, the driver-side reads of a local Delta log, the run's engine."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from chispa import assert_df_equality

from pipelines.io import Bounds, Lakehouse
from pipelines.tables import BRONZE_QUORUM_RAW

T0 = datetime(2024, 10, 27, 3, 33, 20, tzinfo=timezone.utc)


def _raw(spark, rows):
    """bronze.quorum_raw rows from (record_id, cluster_id) pairs; the other columns are filler."""
    full = [
        (rid, "describe_quorum_json", cluster, None, T0, 0, "{}", None, "file:/x.jsonl", 1, "sha", 2, T0, T0, None)
        for rid, cluster in rows
    ]
    return spark.createDataFrame(full, BRONZE_QUORUM_RAW.spark_schema)


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
    assert_df_equality(
        lakehouse.read(BRONZE_QUORUM_RAW), rows, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )


def test_versions_and_commit_metrics_from_the_local_log_match_describe_history(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    rows = _raw(spark, [("a", "c1")])
    lakehouse.insert_new(BRONZE_QUORUM_RAW, rows, Bounds.of(rows, "collected_at", or_null=True))
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("b", "c2")]))
    history = spark.sql(f"DESCRIBE HISTORY {lakehouse.ref(BRONZE_QUORUM_RAW)}").orderBy("version").collect()
    assert lakehouse.version(BRONZE_QUORUM_RAW) == history[-1]["version"] == 2
    assert lakehouse.last_commit_metrics(BRONZE_QUORUM_RAW, 0) == [dict(r["operationMetrics"]) for r in history[1:]]
    # the first write into the empty table is an append, the second a MERGE
    first, second = lakehouse.last_commit_metrics(BRONZE_QUORUM_RAW, 0)
    assert (int(first["numOutputRows"]), int(second["numTargetRowsInserted"])) == (1, 1)
    assert [r["operation"] for r in history[1:]] == ["WRITE", "MERGE"]


def test_a_table_is_known_empty_until_a_file_is_added_and_again_once_every_file_is_removed(
    spark, make_lakehouse, tmp_path
):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    assert lakehouse.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1"), ("a", "c1")]))  # appended, deduplicated
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1"), ("b", "c2")]))  # merged: only b is new
    assert lakehouse.read(BRONZE_QUORUM_RAW).count() == 2
    assert not lakehouse.known_empty(BRONZE_QUORUM_RAW)
    spark.sql(f"DELETE FROM {lakehouse.ref(BRONZE_QUORUM_RAW)} WHERE record_id = 'a'")
    assert not lakehouse.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.truncate(BRONZE_QUORUM_RAW)  # what a full refresh does: every file removed
    assert lakehouse.known_empty(BRONZE_QUORUM_RAW)
    lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]))
    assert lakehouse.read(BRONZE_QUORUM_RAW).count() == 1
    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {lakehouse.ref(BRONZE_QUORUM_RAW)}").collect()]
    assert operations[:4] == ["WRITE", "DELETE", "DELETE", "MERGE"]  # newest first
    for _ in range(4):  # once the log has a checkpoint (every 10 commits), only a MERGE decides
        lakehouse.truncate(BRONZE_QUORUM_RAW)
        lakehouse.insert_new(BRONZE_QUORUM_RAW, _raw(spark, [("a", "c1")]))
    lakehouse.truncate(BRONZE_QUORUM_RAW)
    assert any(
        ".checkpoint." in p.name for p in (tmp_path / "warehouse" / "bronze" / "quorum_raw" / "_delta_log").iterdir()
    )
    assert not lakehouse.known_empty(BRONZE_QUORUM_RAW)


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
    history = spark.sql(f"DESCRIBE HISTORY {lakehouse.ref(BRONZE_QUORUM_RAW)}").orderBy("version").collect()
    assert [r["operation"] for r in history[1:]] == ["WRITE", "MERGE"]
    assert int(history[-1]["operationMetrics"]["numTargetRowsDeleted"]) == 1  # b left c1's scope; c2 untouched
    assert_df_equality(
        lakehouse.read(BRONZE_QUORUM_RAW),
        _raw(spark, [("a", "c1"), ("c", "c2")]),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_replace_scope_with_no_rows_leaves_an_empty_table_without_a_commit(spark, make_lakehouse, tmp_path):
    lakehouse = make_lakehouse(tmp_path / "landing")
    lakehouse.ensure_tables((BRONZE_QUORUM_RAW,))
    before = lakehouse.version(BRONZE_QUORUM_RAW)
    lakehouse.replace_groups(BRONZE_QUORUM_RAW, _raw(spark, []), spark.createDataFrame([("c1",)], "cluster_id string"))
    assert lakehouse.version(BRONZE_QUORUM_RAW) == before
    assert lakehouse.known_empty(BRONZE_QUORUM_RAW)


def test_a_small_run_gets_the_interpreted_engine_and_a_big_one_or_a_rebuild_spark_defaults(
    spark, make_lakehouse, tmp_path
):
    lakehouse: Lakehouse = make_lakehouse(tmp_path / "landing", small_run_bytes=1000)
    try:
        assert lakehouse.tune_for(1000)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
        assert not lakehouse.tune_for(1001)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        assert not lakehouse.tune_for(None)  # size unknown
        lakehouse.rebuild_bytes = None  # a full refresh whose size is unknown
        assert not lakehouse.tune_for(0)
        lakehouse.rebuild_bytes = 1001  # one that re-reads more than a small run
        assert not lakehouse.tune_for(0)
        lakehouse.rebuild_bytes = 1000
        assert lakehouse.tune_for(0)
    finally:
        lakehouse.rebuild_bytes = 0
        lakehouse.tune_for(0)  # the test session's engine


def test_a_full_refresh_is_sized_by_the_tables_it_rereads(spark, make_lakehouse, tmp_path):
    from pipelines.run import PARQUET_TO_LANDING, rebuild_size
    from pipelines.tables import ALL_TABLES

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
    staged = lakehouse.staged(files, schema, "t", group_bytes=60)
    expected = spark.createDataFrame(
        [(f"/l/{i}.jsonl", b"x" * n if n else None, T0) for i, n in enumerate(sizes)], schema
    )
    assert_df_equality(staged, expected, ignore_row_order=True, ignore_nullable=True)
    # row weights (path + content bytes) 15 50 10 17 100 13 13: files of at most 60 bytes, a larger row alone
    parts = sorted(Path(lakehouse.staging("t")).glob("*.parquet"))
    assert [pq.read_table(p).num_rows for p in parts] == [1, 2, 1, 1, 2]
    lakehouse.unstage("t")
    assert not Path(lakehouse.staging("t")).exists()
