"""One run (or maintenance) per warehouse at a time.

A run, and `quorumlake maintenance`, take an exclusive lock on `<warehouse>/_locks/run.lock` (an OS file lock,
released by the kernel when the process ends, also when it is killed, so a crash never leaves a stale lock). A
second one on the same warehouse waits up to `wait_s` and then stops with one line and exit code 3. On Databricks,
where the warehouse is a catalog, the job's `max_concurrent_runs: 1` serializes runs instead.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Busy(Exception):
    """Another run holds the warehouse."""


@contextmanager
def warehouse_lock(warehouse: str, wait_s: float = 0.0) -> Iterator[None]:
    if "://" in warehouse or warehouse.startswith("dbfs:"):
        yield  # remote storage: serialized by the scheduler (see module doc)
        return
    folder = os.path.join(warehouse, "_locks")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "run.lock")
    handle = open(path, "a+")  # noqa: SIM115 - held for the duration of the run
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "another process"
                    raise Busy(
                        f"another run is using the warehouse {warehouse} ({holder}); try again when it finishes"
                    ) from None
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()
