"""`quorumlake run`: every layer in order, each incremental and idempotent."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from quorumlake.contract.tables import (
    ALL_TABLES,
    BRONZE_SOURCES,
    LAYERS,
    PIPELINE_RUNS,
    SILVER_DQ_VALIDATIONS,
)
from quorumlake.pipelines.engine.session import release_all
from quorumlake.pipelines.progress import Progress
from quorumlake.pipelines.storage import PARQUET_TO_LANDING, Lakehouse


@dataclass(frozen=True)
class TableSummary:
    table: str
    rows_added: int
    rows_quarantined: int
    note: str = ""


def run_pipeline(
    lakehouse: Lakehouse,
    layers: tuple[str, ...] = LAYERS,
    progress: Progress = lambda _msg: None,
    timings: dict[str, float] | None = None,
) -> list[TableSummary]:
    """Run the given layers in medallion order; each processes only what is new since its last run.

    `timings`, when given, receives the seconds of each layer (and `silver_dq`: data quality within silver)."""
    timings = {} if timings is None else timings
    lakehouse.ensure_tables(ALL_TABLES)
    summaries: list[TableSummary] = []
    try:
        for layer in LAYERS:
            if layer in layers and layer in LAYER_RUNNERS:
                started = time.monotonic()
                summaries += LAYER_RUNNERS[layer](lakehouse, progress, timings)
                timings[layer] = round(time.monotonic() - started, 3)
                progress(f"{layer}: done in {timings[layer]:.1f}s")
    except Exception:
        # what the layers before the failing one finished is kept (a failing layer holds no record)
        with contextlib.suppress(Exception):
            lakehouse.flush_progress()
        raise
    else:
        lakehouse.flush_progress()  # the progress of every layer, in one commit of the ledger
    finally:
        release_all()  # however the run ended, the session keeps nothing of it cached
    return summaries


# What `--full-refresh` empties per layer: every table of the layer but the logs that keep their history
# (bronze.pipeline_runs, reset per layer instead, and silver.dq_validations).
REFRESHED = {
    layer: tuple(
        spec for spec in ALL_TABLES if spec.schema == layer and spec not in (PIPELINE_RUNS, SILVER_DQ_VALIDATIONS)
    )
    for layer in LAYERS
}


def full_refresh(lakehouse: Lakehouse, layers: tuple[str, ...], progress: Progress) -> None:
    """Empty the given layers' tables and forget their progress, so the run that follows rebuilds them: silver from
    all of bronze, gold from all of silver, bronze from every landing file. Layers not listed keep their tables and
    pick up the rebuilt rows through the change feed like any other change."""
    lakehouse.ensure_tables(ALL_TABLES)
    # what follows reads whole tables, whatever is new: the engine follows their size (see rebuild_size)
    lakehouse.rebuild_bytes = rebuild_size(lakehouse, layers)
    lakehouse.tune_for(0)
    for layer in LAYERS:
        if layer not in layers:
            continue
        progress(f"{layer}: full refresh: emptying {', '.join(s.name for s in REFRESHED[layer])}")
        for spec in REFRESHED[layer]:
            lakehouse.truncate(spec)
        lakehouse.ledger.reset_progress(layer)
        if layer == "bronze" and lakehouse.config.ingest_mode == "autoloader":
            lakehouse.sources.reset_landing_checkpoints()


def rebuild_size(lakehouse: Lakehouse, layers: tuple[str, ...]) -> int | None:
    """About how many landing bytes' worth a full refresh of `layers` re-reads: silver reads all of bronze, gold all of
    silver. A bronze rebuild re-reads the landing zone, whose size is not known here (None)."""
    from quorumlake.pipelines.jobs import gold_job

    if "bronze" in layers:
        return None
    sources = {"silver": tuple(BRONZE_SOURCES.values()), "gold": gold_job.SOURCES}
    read = [spec for layer in LAYERS if layer in layers for spec in sources.get(layer, ())]
    return PARQUET_TO_LANDING * sum(lakehouse.reads.size_bytes(spec) for spec in read)


def register_all(lakehouse: Lakehouse) -> None:
    """Every table and view of the lakehouse, registered by name in this session (for SQL users)."""
    from quorumlake.pipelines.jobs.gold_job import create_views

    lakehouse.catalog.register_names(ALL_TABLES)
    create_views(lakehouse)


def ingest_bronze(
    lakehouse: Lakehouse,
    progress: Progress,
    _timings: dict[str, float],
) -> list[TableSummary]:
    from quorumlake.pipelines.jobs.bronze_job import run_bronze

    return [
        TableSummary(c.table, c.rows, c.errors, "rows quarantined = records with a parse_error")
        for c in run_bronze(lakehouse, progress)
    ]


def build_silver(lakehouse: Lakehouse, progress: Progress, timings: dict[str, float]) -> list[TableSummary]:
    from quorumlake.pipelines.jobs.silver_job import FLOWS, run_silver

    stats = run_silver(lakehouse, progress)
    timings["silver_dq"] = round(stats.dq_seconds, 3)
    share = stats.dq_seconds / stats.total_seconds if stats.total_seconds else 0.0
    progress(f"silver: data quality took {stats.dq_seconds:.1f}s of {stats.total_seconds:.1f}s ({share:.0%})")
    tables = [spec.name for flow in FLOWS for spec in flow.outputs]
    return [TableSummary(t, stats.rows.get(t, 0), stats.quarantined.get(t, 0)) for t in tables]


def build_gold(lakehouse: Lakehouse, progress: Progress, _timings: dict[str, float]) -> list[TableSummary]:
    from quorumlake.pipelines.jobs.gold_job import run_gold

    written = run_gold(lakehouse, progress)
    return [TableSummary(t, n, 0) for t, n in written.items()]


LAYER_RUNNERS: dict[str, Callable[[Lakehouse, Progress, dict[str, float]], list[TableSummary]]] = {
    "bronze": ingest_bronze,
    "silver": build_silver,
    "gold": build_gold,
}
