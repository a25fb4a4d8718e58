"""What a job reports its progress to: `progress` (one line on stderr, the command line's), or a caller's own (a
test's list, a notebook's print)."""

from __future__ import annotations

import sys
from collections.abc import Callable

Progress = Callable[[str], None]


def progress(message: str) -> None:
    """One progress line on stderr (stdout carries results only)."""
    print(f"[quorumlake] {message}", file=sys.stderr, flush=True)
