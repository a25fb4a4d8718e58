"""Operating the lakehouse for months: one run at a time, full refresh, and upgrading a warehouse built by older
table definitions."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quorumlake.contract.tables import GOLD_QUORUM_HEALTH, GOLD_TABLES, SILVER_QUARANTINE, SILVER_QUORUM_SNAPSHOTS
from quorumlake.pipelines.app import cli
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage import Lakehouse
from tests import read_back
from tests.e2e.test_crash import killed_in_process

DATA = Path(__file__).parents[1] / "data"
SILVER_AND_GOLD = (
    "silver.quorum_snapshots",
    "silver.replica_states",
    "silver.partition_states",
    "silver.node_metrics",
    *(spec.name for spec in GOLD_TABLES),
)


def contents(warehouse: Path, name: str, drop: tuple[str, ...] = ()) -> list[tuple]:
    schema, table = name.split(".")
    return read_back.tuples(warehouse / schema / table, drop)


def moved(row: tuple, old: Path, new: Path) -> tuple:
    """The row as a run over the same files in folder `new` instead of `old` writes it: the folder in its text."""
    return tuple(value.replace(str(old), str(new)) if isinstance(value, str) else value for value in row)


def run(zone: Path, warehouse: Path, capsys, *extra: str) -> None:
    assert cli.main(["run", "--landing", str(zone), "--warehouse", str(warehouse), *extra]) == 0
    capsys.readouterr()


def test_a_second_run_on_a_busy_warehouse_stops_with_one_line_and_exit_3(tmp_path, capsys):
    warehouse = tmp_path / "wh"
    (tmp_path / "landing").mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from quorumlake.pipelines.app.lock import warehouse_lock\n"
            f"with warehouse_lock({str(warehouse)!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        code = cli.main(["run", "--landing", str(tmp_path / "landing"), "--warehouse", str(warehouse), "--wait", "1"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3
        assert len(err) == 1 and err[0].startswith("quorumlake: busy: another run is using the warehouse")
        assert f"pid {holder.pid}" in err[0]
        assert time.monotonic() - started >= 1  # it waited as asked before giving up
        # maintenance commits to every table: it does not start beside a run either
        code = cli.main(["maintenance", "--warehouse", str(warehouse)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3
        assert len(err) == 1 and err[0].startswith("quorumlake: busy: another run is using the warehouse")
    finally:
        holder.kill()
        holder.wait()
    # the lock dies with its holder: the warehouse is free again (the run itself is not needed here)
    from quorumlake.pipelines.app.lock import warehouse_lock

    with warehouse_lock(str(warehouse)):
        pass


@pytest.fixture(scope="module")
def upgraded(spark, tmp_path_factory) -> tuple[Path, Path]:
    """A warehouse whose gold.quorum_health an older release created (without its last column, another table
    comment, a column comment since reworded), then run over the test landing zone, bad files included: the
    upgrade's test reads it, the full refresh's works on a copy. (landing zone, warehouse)"""
    root = tmp_path_factory.mktemp("upgraded")
    zone, warehouse = root / "landing", root / "wh"
    for tree in ("landing", "landing_bad"):
        shutil.copytree(DATA / tree, zone, dirs_exist_ok=True)
    older = dataclasses.replace(
        GOLD_QUORUM_HEALTH,
        columns=tuple((n, t, "old words" if n == "snapshots" else c) for n, t, c in GOLD_QUORUM_HEALTH.columns[:-1]),
    )
    Lakehouse(spark, Config(landing=str(zone), warehouse=str(warehouse))).ensure_tables((older,))
    path = warehouse / "gold" / "quorum_health"
    assert GOLD_QUORUM_HEALTH.columns[-1][0] not in spark.read.format("delta").load(str(path)).columns
    assert cli.main(["run", "--landing", str(zone), "--warehouse", str(warehouse)]) == 0
    return zone, warehouse


def test_a_warehouse_built_by_older_table_definitions_is_upgraded(spark, upgraded):
    _zone, warehouse = upgraded
    path = warehouse / "gold" / "quorum_health"
    fields = {f.name: f for f in spark.read.format("delta").load(str(path)).schema.fields}
    assert [f for f in fields] == GOLD_QUORUM_HEALTH.column_names
    assert {n: fields[n].metadata.get("comment") for n, _, _ in GOLD_QUORUM_HEALTH.columns} == {
        n: c for n, _, c in GOLD_QUORUM_HEALTH.columns
    }
    # and the upgraded table was filled like any other
    last = GOLD_QUORUM_HEALTH.columns[-1][0]
    assert spark.read.format("delta").load(str(path)).where(f"`{last}` IS NOT NULL").count() > 0
    assert spark.read.format("delta").load(str(warehouse / "silver" / SILVER_QUORUM_SNAPSHOTS.table)).count() > 0


def test_full_refresh_rebuilds_silver_and_gold_to_the_same_contents(spark, upgraded, tmp_path, capsys):
    zone, warehouse = upgraded[0], tmp_path / "wh"
    shutil.copytree(upgraded[1], warehouse, symlinks=True)
    quarantine_cols = ("quarantined_at",)
    before = {name: contents(warehouse, name) for name in SILVER_AND_GOLD}
    quarantine = contents(warehouse, SILVER_QUARANTINE.name, quarantine_cols)
    bronze = contents(warehouse, "bronze.quorum_raw")
    assert quarantine  # the bad files' records are there to be rebuilt

    run(zone, warehouse, capsys, "--full-refresh", "--layers", "silver,gold")
    assert {name: contents(warehouse, name) for name in SILVER_AND_GOLD} == before
    assert contents(warehouse, SILVER_QUARANTINE.name, quarantine_cols) == quarantine
    assert contents(warehouse, "bronze.quorum_raw") == bronze  # bronze untouched
    history = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse / 'silver' / 'quorum_snapshots'}`").collect()
    assert "DELETE" in {r["operation"] for r in history}  # emptied, then rebuilt, with the history kept


def test_a_backlog_taken_in_many_small_batches_ends_in_the_tables_of_one_batch(
    spark, landing, landing_run, tmp_path, capsys
):
    # Bronze ingests the landing zone in two runs (two commits per bronze table); silver then takes that backlog
    # with batch_bytes=1, one batch per commit, and gold one round per silver commit. A CLI replication capture and
    # its status capture land in different batches; gold recomputes windows and episodes round after round. The
    # tables are those of one run over everything, also when the backlog's run is killed after a silver batch and
    # the next one after a gold round.
    full = landing("landing")
    zone, small = tmp_path / "arriving", tmp_path / "small"
    # one run over everything: the suite's shared run over the same files (tests/data/landing) in another folder
    whole_zone, whole = landing_run
    first = ("describe-quorum.jsonl", "1730000000600.replication.txt", "kip427.jsonl", "1730000000450.prom.gz")
    for step in (first, ("",)):  # then the rest: kraft-cli39's status capture, kraft-cli38, more metrics
        for path in sorted(full.rglob("*")):
            arrived = zone / path.relative_to(full)
            if path.is_file() and not arrived.exists() and any(part in str(path) for part in step):
                arrived.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, arrived)
        run(zone, small, capsys, "--layers", "bronze")
    # spread_bytes=2048: every silver batch is a "big" one, spread over several partitions and kept on disk only
    backlog = ("--layers", "silver,gold", "--set", "batch_bytes=1", "--set", "spread_bytes=2048")
    for point in ("silver:batch:bronze.quorum_raw", "gold:round"):
        killed = tmp_path / f"killed-at-{point.split(':')[1]}"
        killed_in_process(zone, small, point, killed, *backlog)
        small = killed
    run(zone, small, capsys, *backlog)

    when = ("ingested_at", "quarantined_at", "run_at")  # when each run happened: the two runs differ in that alone
    for name in (*SILVER_AND_GOLD, SILVER_QUARANTINE.name):
        # and in the landing zone's folder, which the rows' source files name
        one_batch = [moved(row, whole_zone, zone) for row in contents(whole, name, when)]
        assert contents(small, name, when) == sorted(one_batch, key=repr), name

    def writes(warehouse: Path, name: str) -> int:
        schema, table = name.split(".")
        history = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse / schema / table}`").collect()
        return sum(1 for r in history if r["operation"] not in ("CREATE TABLE", "SET TBLPROPERTIES"))

    # taken as a backlog: silver and gold wrote (and recorded their progress) batch after batch
    assert writes(whole, "silver.quorum_snapshots") == 1 and writes(small, "silver.quorum_snapshots") == 2
    assert writes(small, "gold.quorum_status") == 2
    assert writes(small, "bronze.pipeline_runs") >= writes(whole, "bronze.pipeline_runs") + 2
