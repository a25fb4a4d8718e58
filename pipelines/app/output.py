"""What the commands print: progress lines and bars on stderr, query results and run summaries on stdout."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any


def progress_bar(label: str) -> Callable[[int, int], None]:
    """A progress bar on stderr (one line, redrawn), quiet when stderr is not a terminal except at the end."""
    state = {"last": -1.0}

    def update(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if sys.stderr.isatty() and (fraction - state["last"] >= 0.01 or done == total):
            bar = "#" * int(30 * fraction)
            sys.stderr.write(f"\r[quorumlake] {label} [{bar:<30}] {100 * fraction:5.1f}%")
            state["last"] = fraction
        if done == total:
            sys.stderr.write(("\n" if sys.stderr.isatty() else "") + f"[quorumlake] {label}: done ({total} steps)\n")
        sys.stderr.flush()

    return update


def run_summary(summaries: Sequence[Any]) -> str:
    """The table a run prints: rows added and quarantined per table (`quorumlake.pipelines.jobs.run.TableSummary`)."""
    width = max(len(s.table) for s in summaries)
    lines = [f"{'table':<{width}}  {'rows added':>10}  {'quarantined':>11}"]
    lines += [f"{s.table:<{width}}  {s.rows_added:>10}  {s.rows_quarantined:>11}" for s in summaries]
    return "\n".join(lines) + "\n"


def format_rows(columns: list[str], rows: list[list[Any]], fmt: str) -> str:
    """Render query results as an aligned text table, CSV, or JSON Lines."""
    if fmt == "json":
        return "".join(json.dumps(dict(zip(columns, r)), default=_json_default) + "\n" for r in rows)
    cells = [[_cell(v) for v in r] for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(cells)
        return out.getvalue()
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"
    head = "|" + "|".join(f" {c:<{w}} " for c, w in zip(columns, widths)) + "|\n"
    body = "".join("|" + "|".join(f" {v:<{w}} " for v, w in zip(r, widths)) + "|\n" for r in cells)
    return line + head + line + body + line + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=_json_default)
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return str(value).replace("\n", "\\n").replace("\t", "\\t")


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)
