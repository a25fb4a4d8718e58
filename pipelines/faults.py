"""Named points of a run where the crash harness (tests/e2e/test_crash.py) kills the process with SIGKILL, to prove
that a run killed anywhere leaves tables that the next run completes to exactly what an uninterrupted run makes."""

from __future__ import annotations

import os
import signal

from pipelines.config import Config


def reached(config: Config, point: str) -> None:
    """Die here, at once and without cleanup, when the configuration names this point."""
    if config.crash_at == point:
        os.kill(os.getpid(), signal.SIGKILL)
