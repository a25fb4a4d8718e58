"""The run progress ledger (`bronze.pipeline_runs`): how far each consumer (bronze, silver, gold, the registry's
record) has processed each of its sources."""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import SparkSession

from quorumlake.contract.tables import PIPELINE_RUNS
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage.catalog import Catalog
from quorumlake.pipelines.storage.reads import Reads
from quorumlake.pipelines.storage.writes import Writes


class Ledger:
    """The progress ledger as this run knows it, read once and written whole (a part of `Lakehouse`)."""

    def __init__(self, spark: SparkSession, config: Config, catalog: Catalog, reads: Reads, writes: Writes):
        self.spark = spark
        self.config = config
        self.catalog = catalog
        self.reads = reads
        self.writes = writes
        # consumer -> source table -> (version, fingerprint); None until read
        self._rows: dict[str, dict[str, tuple[int, str | None]]] | None = None
        # the time of the run that recorded each consumer
        self._at: dict[str, datetime] = {}
        # consumers whose record is not written yet: it goes with the ledger's next commit (see `save_progress`)
        self._unsaved: set[str] = set()

    def progress(self, consumer: str) -> dict[str, int]:
        """How far `consumer` has processed each source table (Delta version; absent = nothing yet)."""
        return {table: version for table, (version, _) in self._records().get(consumer, {}).items()}

    def fingerprint(self, consumer: str, source: str) -> str | None:
        return self._records().get(consumer, {}).get(source, (None, None))[1]

    def _records(self) -> dict[str, dict[str, tuple[int, str | None]]]:
        # read once (one small job), then kept up to date by save_progress: the ledger is written whole from this
        if self._rows is None:
            self._rows, self._at = {}, {}
            for r in self.reads.read(PIPELINE_RUNS).collect():
                self._rows.setdefault(r["consumer"], {})[r["source_table"]] = (
                    int(r["source_version"]),
                    r["fingerprint"],
                )
                # Spark gives a naive local time; as UTC, it is written back as the same instant
                if r["run_at"] is not None:
                    at = r["run_at"].astimezone(timezone.utc)
                    self._at[r["consumer"]] = max(at, self._at.get(r["consumer"], at))
        return self._rows

    def start_empty(self) -> None:
        """The ledger holds no record (just created, or emptied): nothing to read."""
        self._rows, self._at, self._unsaved = {}, {}, set()

    def save_progress(
        self,
        consumer: str,
        versions: dict[str, int],
        fingerprints: dict[str, str] | None = None,
        hold: bool = False,
    ) -> None:
        """Record how far `consumer` got, replacing its earlier record (the table's history is the log of runs).
        Called after the consumer's outputs are written, so a crash before the record is written only makes the next
        run redo work whose writes are idempotent.

        The ledger is small and this run is its only writer (`quorumlake.pipelines.app.lock`), so it is written whole,
        in one commit that replaces every row. With `hold`, the record waits for the next commit of the ledger (a
        later layer's record, or `flush_progress` when the run ends): a run through every layer writes the ledger once
        instead of once per layer."""
        self._records()[consumer] = {t: (v, (fingerprints or {}).get(t)) for t, v in versions.items()}
        self._at[consumer] = self.config.run_at
        self._unsaved.add(consumer)
        if not hold:
            self._write()

    def flush_progress(self) -> None:
        """Write the progress records still held back (a run whose last layer saved no progress of its own)."""
        if self._unsaved:
            self._write()

    def _write(self) -> None:
        rows = [
            (self._at.get(name), name, table, version, fingerprint)
            for name, record in sorted(self._records().items())
            for table, (version, fingerprint) in sorted(record.items())
        ]
        # every row replaced; by `replaceWhere`, because a plain overwrite (`INSERT OVERWRITE`, `writeTo().overwrite`
        # alike) also clears the table's liquid clustering
        writer = (
            self.spark.createDataFrame(rows, PIPELINE_RUNS.spark_schema)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", "true")
        )
        self.writes.save(PIPELINE_RUNS, writer)
        self._unsaved = set()

    def reset_progress(self, consumer: str) -> None:
        """Forget how far `consumer` got: its next run starts from the beginning of what it reads."""
        self.spark.sql(f"DELETE FROM {self.catalog.ref(PIPELINE_RUNS)} WHERE consumer = '{consumer}'")
        self._records().pop(consumer, None)
        self._at.pop(consumer, None)
        self._unsaved.discard(consumer)
