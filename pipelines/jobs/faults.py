"""Named points of a run where a test makes it fail on purpose:

- `crash_at`: the crash harness (tests/e2e/test_crash.py) kills the process with SIGKILL there, to prove that a run
  killed anywhere leaves tables that the next run completes to exactly what an uninterrupted run makes;
- `fail_on`: the run raises an error there, as a poison input that no parser anticipated would, to prove that such
  a failure costs the input it came from (quarantined with the error as its reason) and never the run.

`describe` is how such a failure (injected or real) is written into that reason.
"""

from __future__ import annotations

import os
import signal

from quorumlake.pipelines.config import Config


class InjectedFailure(RuntimeError):
    """The error `fail_on` raises."""


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# What reaching `crash_at` does: SIGKILL. The crash harness swaps it, for most of its points, for a copy of the
# warehouse as it is at that instant (what a kill would leave on disk) and then abandons the run, so that a run is
# "killed" there without a JVM started per point.
crash = kill


def reached(config: Config, point: str, *names: str) -> None:
    """Die here, at once and without cleanup, when the configuration names this point; `file:<text>` dies in
    every bronze chunk holding a file whose path contains the text (a file that kills the JVM, out of memory)."""
    wanted = config.crash_at
    if wanted == point or (
        wanted and wanted.startswith("file:") and point == "bronze" and any(wanted[5:] in n for n in names)
    ):
        crash()


def fail_if(config: Config, point: str, *names: str) -> None:
    """Raise here when `fail_on` names this point: `silver:<bronze table>` fails silver's batch of that table, and
    `file:<text>` fails every bronze chunk holding a file whose path contains the text."""
    wanted = config.fail_on
    if not wanted:
        return
    if wanted == point or (wanted.startswith("file:") and point == "bronze" and any(wanted[5:] in n for n in names)):
        raise InjectedFailure(f"injected failure at {wanted} (fail_on)")


def describe(exc: BaseException | None) -> str:
    """The error in one line, with its type; for an error from the JVM, the Java exception's own message (Py4J's
    first line only names the call)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = text.strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
