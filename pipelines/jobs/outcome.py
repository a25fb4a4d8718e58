"""What a completed run could not do, for the exit code a scheduler sees (docs/operations.md, "Exit codes").

A run never stops for one bad input: a landing file whose ingestion fails even alone becomes one bronze row whose
`parse_error` says so, and a silver batch that fails twice is quarantined whole (rule `batch_processable`). Both are
committed, so the next run does not replay them, and every later layer runs. But both mean data that no table holds
in its parsed form until someone looks, so the run ends with its own exit code, 4
(`quorumlake.pipelines.errors.EXIT_DEGRADED`), instead of 0.

The count is read back from the tables (rows written at or after `since`), not kept in memory: a Databricks job runs
each layer as a task of its own, and its last task reports what every task of the same job run did
(`--outcome-since={{job.start_time.iso_datetime}}`), whichever attempt of a retried task wrote it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import BRONZE_SOURCES, SILVER_QUARANTINE
from quorumlake.pipelines.storage import Lakehouse

# How bronze words the parse_error of a file it could not ingest (quorumlake.pipelines.jobs.bronze_job).
NOT_INGESTED = "could not be ingested: "
GIVEN_UP = "not read: "
WHOLE_BATCH_RULE = "batch_processable"


@dataclass(frozen=True)
class Outcome:
    files_not_ingested: int  # landing files bronze recorded without reading their records
    batch_records_quarantined: int  # silver records quarantined because their whole batch failed

    @property
    def degraded(self) -> bool:
        return bool(self.files_not_ingested or self.batch_records_quarantined)

    def describe(self) -> str:
        parts = []
        if self.files_not_ingested:
            parts.append(f"{self.files_not_ingested} landing file(s) could not be ingested (bronze parse_error)")
        if self.batch_records_quarantined:
            parts.append(
                f"{self.batch_records_quarantined} record(s) of whole silver batches quarantined "
                f"(silver.quarantine, rule {WHOLE_BATCH_RULE})"
            )
        return "; ".join(parts) or "every input was processed"


def run_outcome(lakehouse: Lakehouse, since: datetime) -> Outcome:
    """What the runs since `since` could not process (one query per table; each reads only files whose time
    statistics reach `since`)."""
    failed_files: list[DataFrame] = [
        lakehouse.read(spec)
        .where(
            (F.col("ingested_at") >= F.lit(since))
            & (F.col("parse_error").startswith(NOT_INGESTED) | F.col("parse_error").startswith(GIVEN_UP))
        )
        .select("source_file")
        for spec in BRONZE_SOURCES.values()
    ]
    files = functools.reduce(DataFrame.unionByName, failed_files).distinct().count()
    records = (
        lakehouse.read(SILVER_QUARANTINE)
        .where((F.col("quarantined_at") >= F.lit(since)) & F.array_contains("failed_rules", WHOLE_BATCH_RULE))
        .count()
    )
    return Outcome(files, records)
