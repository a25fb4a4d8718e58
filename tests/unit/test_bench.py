"""The benchmark's sizing and its scratch-folder safety (the timings themselves are never asserted)."""

from __future__ import annotations

import pytest

from benchmarks.bench import (
    MARKER,
    REPLICAS_PER_SNAPSHOT,
    SIZES,
    _tables,
    alternating_pairs,
    fleet_for,
    prepare_root,
    table,
)
from quorumlake.pipelines.app import cli


@pytest.mark.parametrize("size", sorted(SIZES))
def test_each_size_has_about_its_replica_rows(size):
    spec = fleet_for(size)
    rows = spec.clusters * spec.steps * (spec.brokers + spec.controllers)
    assert spec.brokers + spec.controllers == REPLICAS_PER_SNAPSHOT
    assert abs(rows - SIZES[size][1]) / SIZES[size][1] < 0.01


def test_the_batch_follows_the_history_in_time():
    history = fleet_for("small", 0.2)
    batch = fleet_for("small", 0.01, start_ms=history.start_ms + history.steps * history.interval_s * 1000)
    assert batch.steps * 20 == pytest.approx(history.steps, rel=0.05)
    assert batch.start_ms > history.start_ms


def test_a_folder_the_bench_did_not_make_is_refused_and_kept(tmp_path):
    mine = tmp_path / "precious"
    mine.mkdir()
    (mine / "data.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not made by 'quorumlake bench'"):
        prepare_root(mine)
    assert (mine / "data.txt").read_text() == "keep me"


def test_a_folder_the_bench_made_is_replaced(tmp_path):
    root = tmp_path / "bench"
    prepare_root(root)
    (root / "old.txt").write_text("x")
    prepare_root(root)
    assert sorted(p.name for p in root.iterdir()) == [MARKER]


def test_cli_bench_refuses_a_foreign_root_in_one_line(tmp_path, capsys):
    (tmp_path / "x").write_text("mine")
    assert cli.main(["bench", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not made by 'quorumlake bench'" in err[0]
    assert (tmp_path / "x").read_text() == "mine"


def test_the_tables_floor_creates_appends_to_and_reads_each_table_once(spark, tmp_path):
    out = tmp_path / "tables"
    _tables(str(out), "2")
    for name in ("table_00", "table_01"):
        table = spark.read.format("delta").load(str(out / name))
        assert sorted(r["key"] for r in table.collect()) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
        versions = [r["version"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{out / name}`").collect()]
        assert sorted(versions) == [0, 1]  # created with its rows, then one append: two commits
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("table_")) == ["table_00", "table_01"]


def test_the_printed_table_has_the_newcomer_s_figures_after_the_size_s_own():
    results = {
        "size": "small",
        "incremental_after_history_over_empty": 1.1,
        "demo_run_s": 60.0,
        "demo_pipeline_s": 58.9,
        "tables_floor_s": 35.0,
        "demo_run_over_tables_floor": 1.71,
    }
    lines = table(results).splitlines()
    names = [line.split()[0] for line in lines]
    assert names.index("demo_run_s") > names.index("incremental_after_history_over_empty")
    assert [line.split()[-1] for line in lines if line.startswith(("tables_floor_s", "demo_run_over"))] == [
        "35.0",
        "1.71",
    ]


def test_the_printed_table_shows_the_samples_behind_the_noop_ratio():
    results = {
        "noop_s": 12.0,
        "startup_s": 10.0,
        "noop_over_startup": 1.2,
        "noop_samples_s": {"noop": [12.0, 11.5, 12.7], "startup": [10.0, 9.8, 10.1]},
    }
    lines = table(results).splitlines()
    names = [line.split()[0] for line in lines]
    assert names.index("noop_samples_s") == names.index("noop_over_startup") + 1
    assert lines[names.index("noop_samples_s")].endswith("noop [12.0, 11.5, 12.7], startup [10.0, 9.8, 10.1]")


def test_incremental_arms_alternate_pair_by_pair_and_keep_their_own_samples():
    ran = []

    def arm(name: str):
        def measure(pair: int) -> float:
            ran.append(f"{name}{pair}")
            return float(len(ran))

        return measure

    after, empty = alternating_pairs((arm("after-"), arm("empty-")), 3)
    assert ran == ["after-0", "empty-0", "empty-1", "after-1", "after-2", "empty-2"]
    assert (after, empty) == ([1.0, 4.0, 5.0], [2.0, 3.0, 6.0])
