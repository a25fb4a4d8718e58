"""The bronze path that runs on Databricks (a streaming source + foreachBatch), run locally.

On Databricks, bronze reads each landing source with Auto Loader (`cloudFiles`) and hands every micro-batch to
`quorumlake.pipelines.jobs.bronze_job.StreamBatch`. Auto Loader exists only there; Spark's own file stream source
(`binaryFile`, what a landing root given as a URI is read with) drives the very same foreachBatch function here, on a
classic session in this process and on a Spark Connect session (the stand-in for serverless, where the function is
pickled and runs in a Python process of the server). Both must write exactly the bronze tables, `bronze.ingest_runs`
included, that the listing path writes from the same landing zone, and a second run must add nothing.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from quorumlake.contract.tables import BRONZE_INGEST_RUNS, BRONZE_SOURCES
from quorumlake.pipelines.app import cli
from tests import read_back
from tests.e2e.test_connect import _env, _run_client, connect_url  # noqa: F401 (the Connect server fixture)

BRONZE = (*BRONZE_SOURCES.values(), BRONZE_INGEST_RUNS)
RUN_TIME = {"ingested_at", "run_at"}


def bronze_tables(warehouse: Path) -> dict[str, list[str]]:
    """Every bronze table's rows without the run's own time, sorted."""
    out = {}
    for spec in BRONZE:
        rows = read_back.rows(read_back.table_path(warehouse, spec), drop=RUN_TIME & set(spec.column_names))
        out[spec.name] = sorted(repr(sorted(r.items())) for r in rows)
    return out


@pytest.fixture(scope="module")
def listed(landing_run) -> dict[str, list[str]]:
    """The reference: bronze as the listing path wrote it from the suite's landing zone."""
    return bronze_tables(landing_run[1])


@pytest.fixture
def zone(landing_run) -> Path:
    return landing_run[0]


def _stream_run(zone: Path, warehouse: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["run", "--layers", "bronze", "--landing", zone.as_uri(), "--warehouse", str(warehouse)]) == 0
    return out.getvalue()


def test_the_foreach_batch_function_under_the_file_stream_source_writes_the_listing_path_s_bronze(
    spark, zone, listed, tmp_path
):
    warehouse = tmp_path / "wh"
    _stream_run(zone, warehouse)
    assert (warehouse / "_checkpoints" / "bronze" / "quorum" / "commits").is_dir(), "not the streaming path"
    got = bronze_tables(warehouse)
    assert {n: len(r) for n, r in got.items()} == {n: len(r) for n, r in listed.items()}
    assert got == listed
    # the stream's checkpoint knows every file: a second run adds nothing
    _stream_run(zone, warehouse)
    assert bronze_tables(warehouse) == listed


def test_a_file_the_stream_cannot_ingest_costs_that_file_not_the_batch(spark, zone, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    code = cli.main(
        ["run", "--layers", "bronze", "--landing", zone.as_uri(), "--warehouse", str(warehouse)]
        + ["--set", "fail_on=file:kip427"]
    )
    assert code == 4, capsys.readouterr().err[-2000:]
    rows = read_back.rows(read_back.table_path(warehouse, BRONZE_SOURCES["partitions"]))
    failed = [r for r in rows if r["source_file"].endswith("kip427.jsonl")]
    assert [r["parse_error"] for r in failed] == [
        "could not be ingested: InjectedFailure: injected failure at file:kip427 (fail_on)"
    ]
    assert len(rows) > 1, "the other files of the batch were ingested"
    recorded = {r["path"] for r in read_back.rows(read_back.table_path(warehouse, BRONZE_INGEST_RUNS))}
    assert any(p.endswith("kip427.jsonl") for p in recorded)


def test_the_same_function_runs_pickled_in_a_spark_connect_server(spark, zone, listed, connect_url, tmp_path):  # noqa: F811
    warehouse = tmp_path / "wh"
    args = ["run", "--layers", "bronze", "--landing", zone.as_uri(), "--warehouse", str(warehouse)]
    _run_client([*args, "--set", f"spark_remote={connect_url}"], _env(), tmp_path)
    assert (warehouse / "_checkpoints" / "bronze" / "metrics" / "commits").is_dir(), "not the streaming path"
    assert bronze_tables(warehouse) == listed
    # run again through Connect: nothing new
    _run_client([*args, "--set", f"spark_remote={connect_url}"], _env(), tmp_path)
    assert bronze_tables(warehouse) == listed
    shutil.rmtree(warehouse)
