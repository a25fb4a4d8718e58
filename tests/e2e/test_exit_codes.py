"""The exit code a scheduler sees when a run completed but could not process everything (docs/operations.md, "Exit
codes"): 4 when a landing file could not be ingested or a silver batch was quarantined whole, after every layer ran;
0 again on the next run, which does not replay them. Through the CLI the Databricks job tasks call, in this process's
Spark session (the failures come from the `fail_on` testing hook, as an unforeseen poison input would cause them)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from quorumlake.pipelines.app import cli
from quorumlake.pipelines.errors import EXIT_DEGRADED
from tests import read_back

pytestmark = pytest.mark.usefixtures("spark")


@pytest.fixture
def paths(landing, tmp_path) -> dict[str, str]:
    return {"landing": str(landing("landing")), "warehouse": str(tmp_path / "warehouse")}


def _flags(paths: dict[str, str], *settings: str) -> list[str]:
    flags = ["--landing", paths["landing"], "--warehouse", paths["warehouse"]]
    return flags + [f"--set={s}" for s in settings]


def _rows(paths: dict[str, str], table: str) -> list[dict]:
    schema, name = table.split(".")
    return read_back.rows(f"{paths['warehouse']}/{schema}/{name}")


def _consumers(paths: dict[str, str]) -> set[str]:
    return {r["consumer"] for r in _rows(paths, "bronze.pipeline_runs")}


def test_a_whole_batch_quarantined_ends_the_completed_run_with_exit_4_and_is_not_replayed(paths, capsys):
    code = cli.main(["run", *_flags(paths, "fail_on=silver:bronze.quorum_raw")])
    assert code == EXIT_DEGRADED == 4
    assert "whole silver batches quarantined" in capsys.readouterr().err
    # every layer ran: the other sources reached silver and gold, and gold recorded its progress
    quarantined = [r for r in _rows(paths, "silver.quarantine") if "batch_processable" in r["failed_rules"]]
    assert quarantined and {r["target_table"] for r in quarantined} == {"silver.quorum_snapshots"}
    assert _rows(paths, "silver.partition_states") and _rows(paths, "gold.isr_health")
    assert {"silver", "gold"} <= _consumers(paths)

    # the next run has nothing new and does not replay the batch: exit 0, the quarantine unchanged
    assert cli.main(["run", *_flags(paths)]) == 0
    assert len([r for r in _rows(paths, "silver.quarantine") if "batch_processable" in r["failed_rules"]]) == len(
        quarantined
    )


def test_a_file_that_could_not_be_ingested_ends_the_run_with_exit_4(paths, capsys):
    assert cli.main(["run", *_flags(paths, "fail_on=file:kip427")]) == EXIT_DEGRADED
    assert "1 landing file(s) could not be ingested" in capsys.readouterr().err
    assert _rows(paths, "gold.quorum_status"), "the other files went on to gold"
    assert cli.main(["run", *_flags(paths)]) == 0


def test_a_clean_run_exits_0(paths):
    assert cli.main(["run", *_flags(paths)]) == 0


def test_the_job_s_last_task_reports_what_the_earlier_tasks_of_the_job_run_did(paths):
    """The pipeline job: each layer a task of its own; bronze and silver pass --degraded-exit-code=0 so that the next
    task runs, gold passes the job's start time and fails the job run with exit 4."""
    job_start = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat()
    job = ["--layers=bronze,silver,gold", "--full-refresh=false"]
    bronze, silver, gold = (cli.layer_main(layer) for layer in ("bronze", "silver", "gold"))
    assert bronze([*job, *_flags(paths), "--degraded-exit-code=0"]) == 0
    assert silver([*job, *_flags(paths, "fail_on=silver:bronze.quorum_raw"), "--degraded-exit-code=0"]) == 0
    assert gold([*job, *_flags(paths), f"--outcome-since={job_start}"]) == EXIT_DEGRADED
    assert _rows(paths, "gold.isr_health")
    # a later job run (its own start time) is clean again
    later = datetime.now(timezone.utc).isoformat()
    assert gold([*job, *_flags(paths), f"--outcome-since={later}"]) == 0


def test_a_layer_task_not_named_by_the_job_s_layers_does_nothing(paths, capsys):
    assert cli.layer_main("bronze")(["--layers=silver,gold", *_flags(paths)]) == 0
    assert "bronze: not in --layers silver,gold: nothing to do" in capsys.readouterr().err
    assert not Path(paths["warehouse"]).exists(), "no Spark work, no tables"
