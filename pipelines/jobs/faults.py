"""How a run's failures are written down (`describe`), and the points of a run where a test makes it fail on purpose.

Tests inject failures with `inject` (never set by a user, a config file or the environment):
- `crash_at`: the crash harness (tests/e2e/test_crash.py) has the run die there at once, as SIGKILL would, to prove
  that a run killed anywhere leaves tables that the next run completes to exactly what an uninterrupted run makes;
- `fail_on`: the run raises an error there, as a poison input that no parser anticipated would, to prove that such a
  failure costs the input it came from (quarantined with the error as its reason) and never the run.

A point is a name (`bronze:recorded`, `silver:merged:silver.quorum_snapshots`, ...); `file:<text>` names every bronze
chunk holding a file whose path contains the text, and `silver:<bronze table>` (for `fail_on`) silver's batch of that
table.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class InjectedFailure(RuntimeError):
    """The error `fail_on` raises."""


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Injected:
    crash_at: str | None = None
    fail_on: str | None = None
    # what reaching `crash_at` does: SIGKILL, unless the test gives something else (the crash harness copies the
    # warehouse as it is at that instant, what a kill would leave on disk, and abandons the run)
    crash: Callable[[], None] = kill


_injected = Injected()


@contextlib.contextmanager
def inject(crash_at: str | None = None, fail_on: str | None = None, crash: Callable[[], None] = kill) -> Iterator[None]:
    """For the length of the block, runs in this process die at `crash_at` (by `crash`) and fail at `fail_on`."""
    global _injected
    before = _injected
    _injected = Injected(crash_at, fail_on, crash)
    try:
        yield
    finally:
        _injected = before


def reached(point: str, *names: str) -> None:
    """Die here, at once and without cleanup, when a test injected a crash at this point (`names`: the paths of the
    files a bronze chunk holds)."""
    if _names(_injected.crash_at, point, names):
        _injected.crash()


def fail_if(point: str, *names: str) -> None:
    """Raise `InjectedFailure` here when a test injected a failure at this point."""
    if _names(_injected.fail_on, point, names):
        raise InjectedFailure(f"injected failure at {_injected.fail_on} (fail_on)")


def _names(wanted: str | None, point: str, names: tuple[str, ...]) -> bool:
    if not wanted:
        return False
    return wanted == point or (wanted.startswith("file:") and point == "bronze" and any(wanted[5:] in n for n in names))


def describe(exc: BaseException | None) -> str:
    """The error in one line, with its type; for an error from the JVM, the Java exception's own message (Py4J's
    first line only names the call)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = text.strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
