"""The wheel the Databricks jobs install: built from the repo, installed in a clean venv, it runs the same entry
points on the test landing zone."""

from __future__ import annotations

import subprocess
import venv
import zipfile
from pathlib import Path

from tests.conftest import build_wheel

ROOT = Path(__file__).parents[2]


def test_wheel_installs_in_a_clean_venv_and_runs_the_pipeline(tmp_path):
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
    # the `spark` extra brings what Databricks provides itself (pyspark, delta-spark)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[spark]"], check=True, timeout=1200)
    landing = ROOT / "tests" / "data" / "landing"
    warehouse = tmp_path / "warehouse"
    for layer in ("bronze", "silver", "gold"):
        result = subprocess.run(
            [str(env_dir / "bin" / f"quorumlake-{layer}"), "--landing", str(landing), "--warehouse", str(warehouse)],
            capture_output=True,
            text=True,
            timeout=1200,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    result = subprocess.run(
        [
            str(env_dir / "bin" / "quorumlake"),
            "sql",
            "--format",
            "csv",
            "--warehouse",
            str(warehouse),
            "SELECT cluster_id, max_follower_lag, max_follower_lag_time_ms FROM "
            "gold.quorum_status WHERE cluster_id = 'kraft-v2' AND error_code = 0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.stdout.splitlines() == ["cluster_id,max_follower_lag,max_follower_lag_time_ms", "kraft-v2,12,2400"]
