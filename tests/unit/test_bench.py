"""The benchmark's sizing and its scratch-folder safety (the timings themselves are never asserted)."""

from __future__ import annotations

import pytest

from pipelines import cli
from pipelines.bench import MARKER, REPLICAS_PER_SNAPSHOT, SIZES, fleet_for, prepare_root


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
