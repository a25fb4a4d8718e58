"""The wheel the Databricks jobs install: built from the repo, installed in a clean venv, it runs the same entry
points on the test landing zone."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from tests.conftest import build_wheel

ROOT = Path(__file__).parents[2]


def test_wheel_installs_in_a_clean_venv_and_runs_the_pipeline(spark, tmp_path):
    dist = tmp_path / "dist"
    built = build_wheel(dist)
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("quorumlake-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "expectations/silver_replica_states.json" in names and "pipelines/ivysettings.xml" in names
    assert "pipelines/simulator/fleet.py" in names and not any(n.startswith("tests/") for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # the `spark` extra brings what Databricks provides itself (pyspark, delta-spark); installed by the uv that
    # scripts/bootstrap.sh installed (from its cache: ~3 s instead of pip's ~28 s), else by pip
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        install = [str(uv), "pip", "install", "--quiet", "--python", str(python), f"{wheel}[spark]"]
    else:
        install = [str(python), "-m", "pip", "install", "--quiet", f"{wheel}[spark]"]
    subprocess.run(install, check=True, timeout=1200)
    landing = ROOT / "tests" / "data" / "landing"
    warehouse = tmp_path / "warehouse"
    # the Databricks job's three entry points are installed and reach the CLI (their usage, no Spark started) ...
    for layer in ("bronze", "silver", "gold"):
        usage = subprocess.run(
            [str(env_dir / "bin" / f"quorumlake-{layer}"), "--help"], capture_output=True, text=True, timeout=120
        )
        assert usage.returncode == 0 and "--landing" in usage.stdout, usage.stderr[-3000:]
    # ... and the installed package runs the pipeline (one process: each Spark start costs ~30 s, and the layer
    # entry points run the same code as `run --layers`)
    result = subprocess.run(
        [str(env_dir / "bin" / "quorumlake"), "run", "--landing", str(landing), "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    status = spark.read.format("delta").load(str(warehouse / "gold" / "quorum_status"))
    assert [
        tuple(r)
        for r in status.where("cluster_id = 'kraft-v2' AND error_code = 0")
        .select("cluster_id", "max_follower_lag", "max_follower_lag_time_ms")
        .collect()
    ] == [("kraft-v2", 12, 2400)]
