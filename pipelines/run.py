"""`quorumlake run`: every layer in order, each incremental and idempotent."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame

from bronze.raw import build_raw_records
from pipelines.io import Lakehouse
from pipelines.tables import ALL_TABLES, BRONZE_SOURCES


@dataclass(frozen=True)
class TableSummary:
    table: str
    rows_added: int
    rows_quarantined: int
    note: str = ""


Progress = Callable[[str], None]


LAYER_ORDER = ("bronze", "silver", "gold")


def run_pipeline(
    lakehouse: Lakehouse, layers: tuple[str, ...] = LAYER_ORDER, progress: Progress = lambda _msg: None
) -> list[TableSummary]:
    """Run the given layers in medallion order; each processes only what is new since its last run."""
    register_all(lakehouse)
    summaries: list[TableSummary] = []
    for layer in LAYER_ORDER:
        if layer in layers and layer in LAYER_RUNNERS:
            started = time.monotonic()
            summaries += LAYER_RUNNERS[layer](lakehouse, progress)
            progress(f"{layer}: done in {time.monotonic() - started:.1f}s")
    return summaries


def register_all(lakehouse: Lakehouse) -> None:
    """Every table and view of the lakehouse, registered by name in this session."""
    from pipelines.gold_job import create_views

    lakehouse.ensure_tables(ALL_TABLES)
    create_views(lakehouse)


def ingest_bronze(lakehouse: Lakehouse, progress: Progress) -> list[TableSummary]:
    config = lakehouse.config
    summaries = []
    for source, spec in BRONZE_SOURCES.items():
        progress(f"bronze: ingesting {lakehouse.landing_path(source)}/ -> {spec.name}")

        def merge(files: DataFrame, source: str = source, spec=spec) -> None:
            lakehouse.insert_new(spec, build_raw_records(files, source, config.run_at))

        if Path(lakehouse.landing_path(source)).is_dir() or config.ingest_mode == "autoloader":
            lakehouse.stream_landing_files(source, merge)
            merge(lakehouse.empty_landing_files(source))
            added, errors = lakehouse.count_ingested(spec, config.run_at)
            summaries.append(TableSummary(spec.name, added, errors, "rows quarantined = records with a parse_error"))
        else:
            summaries.append(TableSummary(spec.name, 0, 0, f"no {source}/ folder in the landing zone"))
    return summaries


def build_silver(lakehouse: Lakehouse, progress: Progress) -> list[TableSummary]:
    from pipelines.silver_job import run_silver

    stats = run_silver(lakehouse, progress)
    share = stats.dq_seconds / stats.total_seconds if stats.total_seconds else 0.0
    progress(f"silver: data quality took {stats.dq_seconds:.1f}s of {stats.total_seconds:.1f}s ({share:.0%})")
    tables = ["silver.quorum_snapshots", "silver.replica_states", "silver.partition_states", "silver.node_metrics"]
    return [TableSummary(t, stats.rows.get(t, 0), stats.quarantined.get(t, 0)) for t in tables]


def build_gold(lakehouse: Lakehouse, progress: Progress) -> list[TableSummary]:
    from pipelines.gold_job import run_gold

    written = run_gold(lakehouse, progress)
    return [TableSummary(t, n, 0) for t, n in written.items()]


LAYER_RUNNERS: dict[str, Callable[[Lakehouse, Progress], list[TableSummary]]] = {
    "bronze": ingest_bronze,
    "silver": build_silver,
    "gold": build_gold,
}
