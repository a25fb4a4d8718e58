"""The crash harness: `quorumlake run` killed at many points (inside each layer, between the MERGEs of one
batch, between layers), each restart killed again further on, then a run to completion, gives exactly the tables of
one uninterrupted run: no record lost, none twice.

One kill is real (SIGKILL to a `quorumlake run` of its own, between two inserts of one bronze chunk: early in its
run, so that the process costs little besides its start); at the other points the run copies its warehouse as it is
at that instant, which is what a kill leaves on disk, and is abandoned, in this process (a cold process per point
would pay a JVM's start and warm-up each).

Compared: every table's full contents, except the columns that say *when* a run happened (`ingested_at`,
`quarantined_at`, `run_at`), which differ between runs by design. `silver.dq_validations` is a log of validations:
a batch redone after a crash is validated, and logged, again. `bronze.pipeline_runs` holds Delta versions, which
count commits and so differ too.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from quorumlake.contract.tables import ALL_TABLES, BRONZE_SOURCES, PIPELINE_RUNS, SILVER_DQ_VALIDATIONS
from quorumlake.pipelines.app import cli
from quorumlake.pipelines.engine.session import SMALL_RUN_JAVA_OPTIONS
from quorumlake.pipelines.errors import EXIT_DEGRADED
from quorumlake.pipelines.jobs import faults
from tests import read_back

# In the order a run reaches them (bronze inserts its sources in name order; silver reads quorum, partitions, metrics).
POINTS = (
    "bronze:inserted:metrics",
    "bronze:inserted:partitions",
    "bronze:inserted:quorum",
    "bronze:recorded",
    "silver:merged:silver.quorum_snapshots",
    "silver:merged:silver.replica_states",
    "silver:flow:bronze.quorum_raw",
    "silver:merged:silver.partition_states",
    "silver:flow:bronze.metrics_raw",
    "gold:quorum status and health",
    "gold:replica lag SLI",
    "gold:ISR health and AtMinIsr episodes",
)
REAL_KILL = "bronze:inserted:partitions"
WHEN = ("ingested_at", "quarantined_at", "run_at")
COMPARED = [spec for spec in ALL_TABLES if spec not in (SILVER_DQ_VALIDATIONS, PIPELINE_RUNS)]


def quorumlake_run(landing: Path, warehouse: Path, *extra: str) -> int:
    """`quorumlake run` in a process of its own (the harness kills it), with the JVM options of a small run."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "quorumlake.pipelines.app.cli",
            "run",
            "--landing",
            str(landing),
            "--warehouse",
            str(warehouse),
            "--set",
            f"java_options={SMALL_RUN_JAVA_OPTIONS}",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done.returncode


def uninterrupted_run(landing: Path, warehouse: Path, *extra: str) -> int:
    """`quorumlake run` in this process (the suite's warm session)."""
    return cli.main(["run", "--landing", str(landing), "--warehouse", str(warehouse), *extra])


def contents(warehouse: Path, spec) -> list[str]:
    return [repr(row) for row in read_back.tuples(read_back.table_path(warehouse, spec), drop=WHEN)]


class Abandoned(BaseException):
    """Ends a run at its crash point once its warehouse was copied: a BaseException, so that no handler of the pipeline
    (silver's `except Exception` for a failing batch) takes it for a failure to recover from."""


def killed_in_process(monkeypatch, zone: Path, warehouse: Path, point: str, left: Path, *extra: str) -> None:
    """A run "killed" at `point` without a process of its own: there, the warehouse is copied to `left` as it is at
    that instant (what SIGKILL leaves on disk: every Delta commit and checkpoint file is complete or absent), and the
    run is abandoned; whatever it does while unwinding touches only `warehouse`, which is then thrown away."""

    def crash() -> None:
        shutil.copytree(warehouse, left, symlinks=True)
        raise Abandoned(point)

    monkeypatch.setattr(faults, "crash", crash)
    with contextlib.suppress(Abandoned):
        uninterrupted_run(zone, warehouse, "--set", f"crash_at={point}", *extra)
    monkeypatch.setattr(faults, "crash", faults.kill)
    assert left.exists(), f"the run was not killed at {point}: point not reached"
    shutil.rmtree(warehouse)


def test_runs_killed_anywhere_end_with_the_tables_of_an_uninterrupted_run(spark, landing, tmp_path, monkeypatch):
    zone = landing("landing", "landing_bad")
    clean = tmp_path / "clean"
    assert uninterrupted_run(zone, clean) == 0

    # a chain: each run starts from what the previous kill left and is killed further on. One kill is real, SIGKILL to
    # a `quorumlake run` of its own, between two inserts of one bronze chunk; the others are copies taken in this
    # process, which cost no JVM start each.
    left: Path | None = None  # no warehouse yet
    for step, point in enumerate(POINTS):
        warehouse, killed = tmp_path / f"run-{step}", tmp_path / f"killed-{step}"
        if left is not None:
            shutil.copytree(left, warehouse, symlinks=True)
        if point == REAL_KILL:
            code = quorumlake_run(zone, warehouse, "--set", f"crash_at={point}")
            assert code == -signal.SIGKILL, f"the run was not killed at {point} (exit {code}): point not reached"
            warehouse.rename(killed)
        else:
            killed_in_process(monkeypatch, zone, warehouse, point, killed)
        left = killed
    crashed = left
    # the abandoned runs left nothing cached in this session (each would slow every later query's planning)
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
    assert uninterrupted_run(zone, crashed) == 0

    for spec in COMPARED:
        assert contents(crashed, spec) == contents(clean, spec), spec.name
    # a late file after all that is still ingested, once
    late = zone / "partitions" / "late"
    late.mkdir()
    shutil.copy(next((zone / "partitions").rglob("*.jsonl")), late / "copy.jsonl")
    (late / "new.jsonl").write_text(
        '{"cluster_id":"c9","collected_at_ms":1730100000000,"topic":"t","partition":0,"leader":1,'
        '"replicas":[1,2,3],"isr":[1,2,3],"min_isr":2}\n'
    )
    assert uninterrupted_run(zone, clean) == 0
    assert uninterrupted_run(zone, crashed) == 0
    for spec in COMPARED:
        assert contents(crashed, spec) == contents(clean, spec), spec.name


def test_a_file_that_kills_every_run_that_reads_it_costs_that_file_not_every_later_run(
    spark, landing, tmp_path, monkeypatch
):
    """A file that kills the process (say, the JVM out of memory) cannot be caught as an error: each run records the
    chunk it is about to ingest, the next one ingests the other files first and that chunk last, in halves, until the
    file is alone; a file that killed two runs alone becomes one bronze row whose parse_error says so. Everything
    else lands as in a run without it."""
    zone = landing("landing")
    poison = next((zone / "metrics").rglob("*.jsonl"))
    files = sum(1 for f in zone.rglob("*") if f.is_file())
    clean = tmp_path / "clean"
    assert uninterrupted_run(zone, clean, "--layers", "bronze") == 0

    kill = ("--set", f"crash_at=file:{poison.name}")
    left, deaths = tmp_path / "run-0", 0
    while True:  # each run starts from what the previous one left
        killed = tmp_path / f"killed-{deaths}"

        def crash(left=left, killed=killed) -> None:
            shutil.copytree(left, killed, symlinks=True)
            raise Abandoned(killed)

        monkeypatch.setattr(faults, "crash", crash)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                # the run that gives the file up completes, and says so with the degraded exit code
                assert uninterrupted_run(zone, left, "--layers", "bronze", *kill) == EXIT_DEGRADED
            break
        except Abandoned:
            left, deaths = killed, deaths + 1
        assert deaths <= files.bit_length() + 2, "the file was not cornered"
    monkeypatch.setattr(faults, "crash", faults.kill)
    assert deaths >= 3  # in its chunk, then alone twice at least

    def rows(warehouse, table, poisoned) -> list[dict]:
        every = read_back.rows(warehouse / "bronze" / table, drop=("ingested_at",))
        return sorted((r for r in every if r["source_file"].endswith(poison.name) == poisoned), key=repr)

    for spec in BRONZE_SOURCES.values():
        assert rows(left, spec.table, False) == rows(clean, spec.table, False), spec.name
    lost = rows(left, "metrics_raw", True)
    assert [(r["parse_error"], r["payload"]) for r in lost] == [
        ("not read: 2 runs died ingesting this file alone (out of memory?); a new version is read again", None)
    ]
    # the next run reads nothing again, and is not killed
    assert uninterrupted_run(zone, left, "--layers", "bronze", *kill) == 0
