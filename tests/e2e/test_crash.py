"""The crash harness: `quorumlake run` killed with SIGKILL at many points (inside each layer, between the MERGEs of one
batch, between layers), each restart killed again further on, then a run to completion, gives exactly the tables of
one uninterrupted run: no record lost, none twice.

Compared: every table's full contents, except the columns that say *when* a run happened (`ingested_at`,
`quarantined_at`, `run_at`), which differ between runs by design. `silver.dq_validations` is a log of validations:
a batch redone after a crash is validated, and logged, again. `bronze.pipeline_runs` holds Delta versions, which
count commits and so differ too.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

from pipelines import cli
from pipelines.tables import ALL_TABLES, PIPELINE_RUNS, SILVER_DQ_VALIDATIONS

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
WHEN = ("ingested_at", "quarantined_at", "run_at")
COMPARED = [spec for spec in ALL_TABLES if spec not in (SILVER_DQ_VALIDATIONS, PIPELINE_RUNS)]


def quorumlake_run(landing: Path, warehouse: Path, *extra: str) -> int:
    """`quorumlake run` in a process of its own (the harness kills it)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "run",
            "--landing",
            str(landing),
            "--warehouse",
            str(warehouse),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done.returncode


def uninterrupted_run(landing: Path, warehouse: Path) -> int:
    return cli.main(["run", "--landing", str(landing), "--warehouse", str(warehouse)])


def contents(spark, warehouse: Path, spec) -> list[str]:
    df = spark.read.format("delta").load(str(warehouse / spec.schema / spec.table))
    df = df.drop(*[c for c in WHEN if c in df.columns])
    return sorted(repr(tuple(r)) for r in df.collect())


def test_runs_killed_anywhere_end_with_the_tables_of_an_uninterrupted_run(spark, landing, tmp_path):
    zone = landing("landing", "landing_bad")
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    # the uninterrupted reference runs in this process (the suite's warm session): only the runs that are killed
    # need processes of their own
    assert uninterrupted_run(zone, clean) == 0

    for point in POINTS:
        code = quorumlake_run(zone, crashed, "--set", f"crash_at={point}")
        assert code == -signal.SIGKILL, f"the run was not killed at {point} (exit {code}): point not reached"
    assert quorumlake_run(zone, crashed) == 0

    for spec in COMPARED:
        assert contents(spark, crashed, spec) == contents(spark, clean, spec), spec.name
    # a late file after all that is still ingested, once
    late = zone / "partitions" / "late"
    late.mkdir()
    shutil.copy(next((zone / "partitions").rglob("*.jsonl")), late / "copy.jsonl")
    (late / "new.jsonl").write_text(
        '{"cluster_id":"c9","collected_at_ms":1730100000000,"topic":"t","partition":0,"leader":1,'
        '"replicas":[1,2,3],"isr":[1,2,3],"min_isr":2}\n'
    )
    assert uninterrupted_run(zone, clean) == 0
    assert quorumlake_run(zone, crashed) == 0
    for spec in COMPARED:
        assert contents(spark, crashed, spec) == contents(spark, clean, spec), spec.name
