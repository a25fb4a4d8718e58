"""The two ways a command fails on purpose; `quorumlake.pipelines.app.cli` prints either as one line (no stack
trace)."""

from __future__ import annotations


class UsageError(Exception):
    """A problem with what the user asked for: printed as one line, exit 2."""


class RuntimeFailure(Exception):
    """Something outside the user's input failed (Spark would not start, ...): one line, exit 1."""


def one_line(exc: BaseException) -> str:
    """An exception's first line, for a one-line error message."""
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


# `quorumlake run`'s exit code when it completed every layer but could not ingest some landing file or quarantined a
# whole silver batch (quorumlake.pipelines.jobs.outcome); distinct from 1 (failure), 2 (usage) and 3 (busy).
EXIT_DEGRADED = 4
