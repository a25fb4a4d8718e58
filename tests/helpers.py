"""Small helpers more than one test file uses: a landing file's text, times of the test scenarios, the command line
in a child process, local ports, and edits of a DescribeQuorum partition. (The shared sample captures are in
tests/captures.py, DataFrame comparison in tests/frames.py, reading Delta tables back in tests/read_back.py.)"""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def read_text(path: Path) -> str:
    """A landing file's text exactly as stored (UTF-8, no newline translation), gunzipped when its name ends in .gz."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8")


# The ingestion times (`ingested_at`) of two pipeline runs, for the bronze rows the silver tests build.
RUN_1 = datetime(2024, 10, 28, 1, 0, 0)
RUN_2 = datetime(2024, 10, 28, 2, 0, 0)


def ts(ms: int | None) -> datetime | None:
    """Epoch milliseconds as the naive UTC datetime Spark gives back for a TIMESTAMP (the suite runs with TZ=UTC);
    None stays None."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None)


def at(hms: str) -> datetime:
    """A UTC time on 2024-10-27, the day of the test scenarios (the test session runs with TZ=UTC)."""
    return datetime.fromisoformat(f"2024-10-27 {hms}")


def quorumlake(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`quorumlake ARGS` run by this interpreter in a child process (environment: this one's, unless `env`), its output
    captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "quorumlake.pipelines.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts_connections(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection on host:port now (waiting at most 2 s for an answer)."""
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0


def set_field(partition: dict, path: str, value: Any) -> None:
    """Set a field of a DescribeQuorum partition: `path` is a field name ('highWatermark') or array.index.field
    ('currentVoters.1.logEndOffset')."""
    if "." in path:
        array, index, field = path.split(".")
        partition[array][int(index)][field] = value
    else:
        partition[path] = value


def checkpointed_rdd(df):
    """The JVM RDD behind a frame kept as a local checkpoint (`quorumlake.pipelines.engine.session.cached` in a small
    local run), whose plan is that one node; fails for any other frame."""
    from quorumlake.pipelines.engine.local import checkpoint_rdd

    plan = df._jdf.queryExecution().logical()
    assert plan.getClass().getSimpleName() == "LogicalRDD", plan.toString()
    return checkpoint_rdd(df)


def age_table_files(table: Path, hours: float) -> None:
    """Every file and folder of a Delta table outside its `_delta_log` as if last written `hours` ago (what VACUUM's
    retention is measured against)."""
    then = time.time() - hours * 3600
    for path in table.rglob("*"):
        if "_delta_log" not in path.relative_to(table).parts:
            os.utime(path, (then, then))
