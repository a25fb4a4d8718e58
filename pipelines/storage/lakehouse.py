"""`Lakehouse`: the tables and checkpoints of one warehouse, seen through one Spark session."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import SparkSession

from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage.catalog import Catalog
from quorumlake.pipelines.storage.reads import Reads
from quorumlake.pipelines.storage.sources import Sources
from quorumlake.pipelines.storage.writes import Writes


class Lakehouse(Catalog, Reads, Writes, Sources):
    """The tables and checkpoints of one warehouse, seen through one Spark session."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config
        # the progress ledger (`bronze.pipeline_runs`) as this run knows it: consumer -> source table -> (version,
        # fingerprint), and the run that recorded each consumer; None until read
        self._progress_rows: dict[str, dict[str, tuple[int, str | None]]] | None = None
        self._progress_at: dict[str, datetime] = {}
        # consumers whose record is not written yet: it goes with the ledger's next commit (see `save_progress`)
        self._unsaved: set[str] = set()
        # a full refresh reads whole tables, whatever the landing zone's new data: about this many landing bytes' worth
        # (None: unknown, so Spark's defaults); 0 outside a full refresh
        self.rebuild_bytes: int | None = 0

    # --- engine -------------------------------------------------------------------------------------------------------

    def tune_for(self, new_bytes: int | None) -> bool:
        """Pick Spark's engine for this run from the size of its new data: at most `small_run_bytes`, the interpreted
        engine (compiling generated code for each of a run's few hundred small queries cost a quarter of its CPU), one
        task per stage, and frames kept as local checkpoints (`quorumlake.pipelines.engine.session.cached`) when the
        master is local; more, or unknown (None), Spark's defaults and the configured shuffle partitions. Local sessions
        only. Returns True when interpreted."""
        from quorumlake.pipelines.engine.session import KEEP_AS_CHECKPOINT, on_databricks

        sizes = (new_bytes, self.rebuild_bytes)
        small = None not in sizes and max(sizes) <= self.config.small_run_bytes
        if on_databricks():
            return False
        for key, interpreted, default in _ENGINE_SETTINGS:
            value = interpreted if small else default(self.config) if callable(default) else default
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)
        checkpoint = small and self.config.spark_master.startswith("local")
        self.spark.conf.set(KEEP_AS_CHECKPOINT, "true" if checkpoint else "false")
        return small

    def tune_up_for(self, parquet_bytes: int | None) -> None:
        """A batch of this many bytes of a table's Parquet, more than a small run's worth (a resumed backfill whose
        bronze had nothing new), gets Spark's defaults for the rest of the run; a small one changes nothing."""
        if parquet_bytes is not None and PARQUET_TO_LANDING * parquet_bytes > self.config.small_run_bytes:
            self.tune_for(None)


# Delta's Parquet holds the landing zone's text in about a quarter of its bytes (the demo fleet: 10.6 MB of landing
# files, 3.0 MB of bronze files); sizes in Parquet are compared with small_run_bytes in landing bytes.
PARQUET_TO_LANDING = 4


# (setting, value for a small run, value otherwise: Spark's default, a function of the run's Config, or None to
# leave it to Spark)
_ENGINE_SETTINGS = (
    ("spark.sql.codegen.wholeStage", "false", "true"),
    ("spark.sql.codegen.factoryMode", "NO_CODEGEN", "FALLBACK"),
    ("spark.sql.adaptive.enabled", "false", "true"),
    # one task per shuffle and per scan of a small table: on two cores a second task cost every small query its
    # scheduling and plan deserialization, and gained nothing
    ("spark.sql.shuffle.partitions", "1", lambda config: str(config.shuffle_partitions)),
    ("spark.sql.files.minPartitionNum", "1", None),
)


# The settings of a small run's engine, for a session known to serve small runs only (`tune_for` sets them per run
# on a local session; a server for tiny data, such as the test suite's Spark Connect server, starts its sessions with
# them).
INTERPRETED_ENGINE = {key: interpreted for key, interpreted, _ in _ENGINE_SETTINGS}
