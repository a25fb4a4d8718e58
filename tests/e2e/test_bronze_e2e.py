"""Landing zone -> bronze through the CLI path: accounting, idempotence, incrementality, real Delta tables."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from quorumlake.contract.tables import BRONZE_SOURCES
from quorumlake.pipelines.app import cli
from tests import read_back
from tests.helpers import age_table_files

DATA = Path(__file__).parents[1] / "data"

WHOLE_FILE_SUFFIXES = (".replication.txt", ".status.txt", ".prom", ".topics.txt")


def expected_records(landing: Path) -> dict[str, int]:
    """Records per source, counted independently of the pipeline: a JSON Lines file has one per line (one if the
    file is empty or binary, i.e. not UTF-8 and holding a NUL byte), every other file is one record."""
    counts = {}
    for source in BRONZE_SOURCES:
        n = 0
        for f in (landing / source).rglob("*"):
            if not f.is_file():
                continue
            data = f.read_bytes()
            name = f.name[:-3] if f.name.endswith(".gz") else f.name
            if f.name.endswith(".gz"):
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError):
                    n += 1
                    continue
            if name.endswith(".jsonl"):
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    if b"\x00" in data:
                        n += 1
                        continue
                n += max(1, len(data.split(b"\n")) - (1 if data.endswith(b"\n") else 0))
            else:
                n += 1
        counts[source] = n
    return counts


def bronze_counts(warehouse: Path) -> dict[str, int]:
    return {s: read_back.arrow(read_back.table_path(warehouse, spec)).num_rows for s, spec in BRONZE_SOURCES.items()}


def run(landing: Path, warehouse: Path) -> dict[str, tuple[int, int]]:
    """Run the CLI; its summary as {table: (rows added, rows quarantined)}."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["run", "--landing", str(landing), "--warehouse", str(warehouse), "--layers", "bronze"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["table", "rows", "added", "quarantined"]
    return {t: (int(a), int(q)) for t, a, q in (line.split() for line in lines[1:])}


@pytest.fixture
def zone(landing):
    return landing("landing", "landing_bad")


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory) -> tuple[Path, Path, dict[str, tuple[int, int]]]:
    """One bronze run of the test landing zone into an empty warehouse, shared by the tests that only read it (or
    run again with nothing new, which writes nothing): the landing zone, the warehouse and the run's summary."""
    root = tmp_path_factory.mktemp("bronze-first-run")
    zone = root / "landing"
    for tree in ("landing", "landing_bad"):
        shutil.copytree(DATA / tree, zone, dirs_exist_ok=True)
    warehouse = root / "wh"
    return zone, warehouse, run(zone, warehouse)


def test_every_landing_record_lands_once_and_reruns_change_nothing(spark, first_run):
    zone, warehouse, out = first_run
    expected = expected_records(zone)
    assert expected == {"quorum": 23, "metrics": 14, "partitions": 17}

    assert bronze_counts(warehouse) == expected
    assert out == {"bronze.quorum_raw": (23, 14), "bronze.metrics_raw": (14, 4), "bronze.partitions_raw": (17, 4)}

    versions = {
        s: spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/bronze/{spec.table}`").count()
        for s, spec in BRONZE_SOURCES.items()
    }
    # into new tables, each source's records are one append after the table's creation (nothing to compare with)
    assert versions == dict.fromkeys(BRONZE_SOURCES, 2)
    out = run(zone, warehouse)
    assert bronze_counts(warehouse) == expected
    assert out == {"bronze.quorum_raw": (0, 0), "bronze.metrics_raw": (0, 0), "bronze.partitions_raw": (0, 0)}
    # A run with nothing new does not even write: the tables keep their versions.
    assert versions == {
        s: spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/bronze/{spec.table}`").count()
        for s, spec in BRONZE_SOURCES.items()
    }


def test_a_new_file_adds_exactly_its_records_and_a_copy_adds_none(spark, zone, tmp_path):
    warehouse = tmp_path / "wh"
    run(zone, warehouse)
    before = bronze_counts(warehouse)

    new = zone / "partitions" / "date=2024-10-28" / "more.jsonl"
    new.parent.mkdir()
    new.write_text(
        '{"cluster_id":"c9","collected_at_ms":1730100000000,"topic":"t","partition":0,"leader":1,'
        '"replicas":[1,2,3],"isr":[1,2,3],"min_isr":2}\n'
        '{"cluster_id":"c9","collected_at_ms":1730100000000,"topic":"t","partition":1,"leader":2,'
        '"replicas":[1,2,3],"isr":[2],"min_isr":2}\n'
    )
    shutil.copy(zone / "quorum" / "date=2024-10-27" / "describe-quorum.jsonl", zone / "quorum" / "resent.jsonl")
    gz = zone / "quorum" / "cluster=kraft-cli39" / "again" / "1730000000600.status.txt.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress((zone / "quorum" / "cluster=kraft-cli39" / "1730000000600.status.txt").read_bytes()))

    # bronze itself, to see what it says of the new files and, run again, that nothing changed
    from quorumlake.pipelines.config import Config
    from quorumlake.pipelines.jobs.bronze_job import run_bronze
    from quorumlake.pipelines.storage import Lakehouse

    said: list[str] = []
    lakehouse = Lakehouse(spark, Config(landing=str(zone), warehouse=str(warehouse)))
    counts = run_bronze(lakehouse, said.append)
    after = bronze_counts(warehouse)
    assert after == {**before, "partitions": before["partitions"] + 2}
    assert {c.table: (c.rows, c.errors) for c in counts} == {
        "bronze.quorum_raw": (0, 0),
        "bronze.metrics_raw": (0, 0),
        "bronze.partitions_raw": (2, 0),
    }
    assert any(re.fullmatch(r"bronze: \d+ landing files.*, 3 new", line) for line in said), said  # 3 paths, 2 copies
    said.clear()
    run_bronze(lakehouse, said.append)
    assert any(line.endswith("none changed since the last run") for line in said), said


def test_bronze_rows_keep_payload_and_lineage(spark, first_run):
    zone, warehouse, _ = first_run
    table = f"delta.`{warehouse / 'bronze' / 'quorum_raw'}`"
    source = zone / "quorum" / "cluster=kraft-cli39" / "1730000000600.replication.txt"
    row = spark.sql(
        f"SELECT * FROM {table} WHERE format = 'quorum_cli_replication' AND cluster_id = 'kraft-cli39'"
    ).collect()
    assert len(row) == 1
    assert row[0]["payload"] == source.read_text()  # the exact bytes, trailing TABs included
    assert row[0]["source_file"].endswith("quorum/cluster=kraft-cli39/1730000000600.replication.txt")
    assert str(row[0]["collected_at"]) == "2024-10-27 03:33:20.600000"
    assert row[0]["parse_error"] is None

    lines = (zone / "quorum" / "date=2024-10-27" / "describe-quorum.jsonl").read_text().splitlines()
    got = spark.sql(
        f"SELECT line_number, payload, api_version, parse_error FROM {table} "
        "WHERE format = 'describe_quorum_json' AND source_file LIKE '%describe-quorum.jsonl' ORDER BY line_number"
    ).collect()
    assert [r["payload"] for r in got] == lines
    assert [r["api_version"] for r in got] == [0, 1, 2, 2, 3]
    assert all(r["parse_error"] is None for r in got)


def test_bronze_tables_are_real_delta_tables_readable_by_another_reader(spark, first_run):
    deltalake = pytest.importorskip("deltalake")
    _, warehouse, _ = first_run
    for spec in BRONZE_SOURCES.values():
        path = warehouse / "bronze" / spec.table
        assert (path / "_delta_log" / "00000000000000000000.json").is_file()
        table = deltalake.DeltaTable(str(path))
        assert table.version() >= 1
        assert sorted(f.name for f in table.schema().fields) == sorted(spec.column_names)
    arrow = deltalake.DeltaTable(str(warehouse / "bronze" / "quorum_raw")).to_pyarrow_table()
    assert arrow.num_rows == 23
    assert sum(1 for e in arrow.column("parse_error").to_pylist() if e is None) == 9


def test_maintenance_keeps_the_files_of_changes_silver_has_not_read_yet(spark, first_run, tmp_path, capsys):
    from quorumlake.contract.tables import ALL_TABLES

    _, built, _ = first_run
    warehouse = tmp_path / "wh"
    shutil.copytree(built, warehouse, symlinks=True)
    before = bronze_counts(warehouse)
    # the raw tables' files as if written 200 hours ago: past the retention, so only the unread changes keep VACUUM
    # away from them
    for spec in BRONZE_SOURCES.values():
        age_table_files(warehouse / "bronze" / spec.table, 200)
    assert cli.main(["maintenance", "--warehouse", str(warehouse)]) == 0
    out = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    # a line per table, in the registry's order, though tables are maintained a few at a time
    assert list(out) == [spec.name for spec in ALL_TABLES]
    unread = "optimized; not vacuumed (silver has not read versions after -1 yet)"
    assert {name: out[name] for name in out if name.startswith("bronze.") and name.endswith("_raw")} == {
        spec.name: unread for spec in BRONZE_SOURCES.values()
    }
    # the others hold no file older than the retention, which is all VACUUM deletes: it is not run there either
    young = "optimized; nothing to vacuum (no file older than 168 hours)"
    assert all(what == young for name, what in out.items() if not name.endswith("_raw"))
    assert bronze_counts(warehouse) == before
    for spec in BRONZE_SOURCES.values():
        ops = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/bronze/{spec.table}`").collect()]
        assert "VACUUM START" not in ops, spec.name


def test_settled_folders_are_checked_by_their_time_alone_and_a_late_file_in_one_still_lands(
    spark, zone, tmp_path, capsys
):
    warehouse = tmp_path / "wh"
    then = time.time() - 2 * 3600  # the whole landing zone written two hours ago: its folders are settled
    for path in [zone, *zone.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (then, then))
    run(zone, warehouse)
    capsys.readouterr()
    before = bronze_counts(warehouse)

    def bronze_says() -> str:
        args = ["run", "--landing", str(zone), "--warehouse", str(warehouse), "--layers", "bronze"]
        assert cli.main(args) == 0
        return next(line for line in capsys.readouterr().err.splitlines() if "landing files" in line)

    said = bronze_says()
    assert "settled folders not listed again" in said and "none changed since the last run" in said, said
    # a file that arrives late in a settled folder (written aside, then renamed in, as collectors do)
    folder = next((zone / "partitions").rglob("*.jsonl")).parent
    (folder / ".late.jsonl").write_text(
        '{"cluster_id":"c9","collected_at_ms":1730100000000,"topic":"t","partition":0,"leader":1,'
        '"replicas":[1,2,3],"isr":[1,2,3],"min_isr":2}\n'
    )
    (folder / ".late.jsonl").rename(folder / "late.jsonl")
    said = bronze_says()
    assert said.endswith(", 1 new"), said
    assert bronze_counts(warehouse) == {**before, "partitions": before["partitions"] + 1}
    assert bronze_counts(warehouse) == expected_records(zone)


def test_json_lines_files_handed_over_in_pieces_give_the_same_bronze_rows(spark, first_run, tmp_path):
    """A large JSON Lines file reaches Spark as pieces of whole lines (here every file over 300 bytes): the
    records, their ids, line numbers and errors are those of the file handed over whole."""
    from quorumlake.bronze.raw import gunzip, line_pieces

    zone, warehouse, _ = first_run
    cut = [
        f
        for source in BRONZE_SOURCES
        for f in (zone / source).rglob("*")
        if f.is_file()
        and (data := f.read_bytes())
        and (text := gunzip(data)[0] if f.name.endswith(".gz") else data)
        and line_pieces(source, f.name, data, text, 300)
    ]
    assert len(cut) >= 3
    pieces_wh = tmp_path / "wh"
    args = ["run", "--landing", str(zone), "--warehouse", str(pieces_wh), "--layers", "bronze"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main([*args, "--set", "bronze_piece_bytes=300"]) == 0
    for spec in BRONZE_SOURCES.values():
        whole, pieces = (
            spark.read.format("delta").load(str(wh / "bronze" / spec.table)).drop("ingested_at")
            for wh in (warehouse, pieces_wh)
        )
        assert whole.count() > 0
        assert sorted(pieces.collect()) == sorted(whole.collect())
