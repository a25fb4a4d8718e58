"""Small helpers more than one test file uses: a landing file's text, times of the test scenarios, the command line
in a child process, local ports, and edits of a DescribeQuorum partition. (The shared sample captures are in
tests/captures.py, DataFrame comparison in tests/frames.py, reading Delta tables back in tests/read_back.py.)"""

from __future__ import annotations

import gzip
import os
import random
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


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (what binding port 0 or connecting out draws from)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_ports(count: int) -> list[int]:
    """Distinct ports free on 127.0.0.1 right now, taken below the kernel's ephemeral range.

    A test's server binds them later (a Kafka node seconds later, after formatting). A port of the ephemeral range
    could be handed in between to any other process that binds port 0 or connects out (Spark's driver and block
    manager, Py4J, in another test worker); ports below it go only to those that ask for them by number."""
    low = _ephemeral_low()
    pool = range(max(1024, low - 12_000), low)
    if len(pool) < 4 * count:
        pool = range(20_000, 32_768)
    chosen: list[int] = []
    for port in random.sample(pool, len(pool)):
        if _is_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"fewer than {count} free ports in {pool.start}-{pool.stop - 1}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (below the ephemeral range: see `free_ports`)."""
    return free_ports(1)[0]


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
