"""`Lakehouse`: the tables and checkpoints of one warehouse, seen through one Spark session, made of its parts."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from quorumlake.contract.tables import PIPELINE_RUNS, TableSpec
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.session import LOCAL_CHECKPOINTS, is_connect, on_databricks
from quorumlake.pipelines.storage.bounds import Bounds
from quorumlake.pipelines.storage.catalog import Catalog, registry_fingerprint
from quorumlake.pipelines.storage.ledger import Ledger
from quorumlake.pipelines.storage.log import TableLog
from quorumlake.pipelines.storage.reads import Reads
from quorumlake.pipelines.storage.sources import Sources
from quorumlake.pipelines.storage.writes import Writes


class Lakehouse:
    """The tables and checkpoints of one warehouse, seen through one Spark session.

    Its parts, each reachable by name: `catalog` (names, places, creating and registering tables), `log` (what a
    table's Delta log says), `reads` (tables, queries, change feeds), `writes` (appends, MERGEs, maintenance),
    `ledger` (the run progress ledger) and `sources` (the landing zone, bronze's checkpoints, staging and scratch).
    The verbs the jobs use most are also methods of the lakehouse itself; so are the two operations that span parts
    (`ensure_tables`, `truncate`) and the sizing of a run's engine (`tune_for`)."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config
        self.catalog = Catalog(spark, config)
        self.log = TableLog(spark, config, self.catalog)
        self.reads = Reads(spark, config, self.catalog)
        self.writes = Writes(spark, config, self.catalog, self.reads, self.log)
        self.ledger = Ledger(spark, config, self.catalog, self.reads, self.writes)
        self.sources = Sources(spark, config, self.catalog, self.reads, self.log)
        # a full refresh reads whole tables, whatever the landing zone's new data: about this many landing bytes' worth
        # (None: unknown, so Spark's defaults); 0 outside a full refresh
        self.rebuild_bytes: int | None = 0

    # --- operations that span parts -----------------------------------------------------------------------------------

    def ensure_tables(self, specs: tuple[TableSpec, ...]) -> None:
        """Create the tables that do not exist yet, and bring the others to their declared definition when the
        registry changed since the last run (a hash of the registry is kept in the ledger, so this costs nothing
        while the definitions stay the same)."""
        created = self.catalog.create_missing(specs)
        if PIPELINE_RUNS in created:
            self.ledger.start_empty()  # just created: no consumer has progress yet
            if len(created) < len(specs):
                # a warehouse built before the run ledger existed: turn on what the tables now declare (e.g. the change
                # data feed that silver reads bronze by)
                self.catalog.set_declared_properties([spec for spec in specs if spec not in created])
        if PIPELINE_RUNS not in specs or self.config.catalog:
            return
        fingerprint = registry_fingerprint(specs)
        if self.ledger.fingerprint("registry", "tables") == fingerprint:
            return
        for spec in specs:
            if spec not in created:
                self.catalog.evolve(spec, self.reads.read(spec).schema)
        # A new warehouse's tables are as declared whether this is recorded or not: the record then waits for the
        # run's first commit of the ledger instead of being a commit of its own (lost with a run killed before that
        # commit, it costs the next run the look at each table above, nothing else).
        new_warehouse = len(created) == len(specs)
        self.ledger.save_progress("registry", {"tables": len(specs)}, {"tables": fingerprint}, hold=new_warehouse)

    def truncate(self, spec: TableSpec) -> None:
        """Delete every row of the table (one commit; the history stays for time travel, and readers of the change
        feed see the deletes)."""
        self.writes.truncate(spec)
        if spec == PIPELINE_RUNS:  # the ledger is written whole from what this run keeps of it: keep nothing
            self.ledger.start_empty()

    # --- the engine of a run ------------------------------------------------------------------------------------------

    def tune_for(self, new_bytes: int | None) -> bool:
        """Size the engine for this run from its new data (landing bytes; None: unknown) and `rebuild_bytes`: on a
        session this process started locally, a small run gets the local engine's small-run settings
        (`quorumlake.pipelines.engine.local.tune_for`); a session handed over (Databricks) or reached through Spark
        Connect is never changed. Returns True when sized as small."""
        if on_databricks() or is_connect(self.spark):
            return False
        from quorumlake.pipelines.engine.local import keeps_checkpoints, tune_for

        small = tune_for(self.spark, self.config, (new_bytes, self.rebuild_bytes))
        self.spark.conf.set(LOCAL_CHECKPOINTS, "true" if keeps_checkpoints(self.config, small) else "false")
        return small

    def tune_up_for(self, parquet_bytes: int | None) -> None:
        """A batch of this many bytes of a table's Parquet, more than a small run's worth (a resumed backfill whose
        bronze had nothing new), gets Spark's defaults for the rest of the run; a small one changes nothing."""
        if parquet_bytes is not None and PARQUET_TO_LANDING * parquet_bytes > self.config.small_run_bytes:
            self.tune_for(None)

    # --- the verbs the jobs use most ----------------------------------------------------------------------------------

    def name_of(self, name: str) -> str:
        return self.catalog.name_of(name)

    def read(self, spec: TableSpec) -> DataFrame:
        return self.reads.read(spec)

    def changes(self, spec: TableSpec, after_version: int, upto_version: int) -> DataFrame:
        return self.reads.changes(spec, after_version, upto_version)

    def version(self, spec: TableSpec) -> int:
        return self.log.version(spec)

    def version_ranges(self, spec: TableSpec, after_version: int, upto_version: int) -> list[tuple[int, int]]:
        return self.log.version_ranges(spec, after_version, upto_version)

    def changes_hold_rows(self, spec: TableSpec, after_version: int, upto_version: int, changes: DataFrame) -> bool:
        """Whether `changes` (the table's changes in (after_version, upto_version], as `changes` reads them) holds any
        row: said by the log where it can, else by a Spark query."""
        known = self.log.changes_hold_rows(spec, after_version, upto_version)
        return known if known is not None else not changes.isEmpty()

    def insert_new(self, spec: TableSpec, rows: DataFrame, bounds: Bounds | None = None) -> None:
        self.writes.insert_new(spec, rows, bounds)

    def replace_groups(self, spec: TableSpec, rows: DataFrame, groups: DataFrame, bounds: Bounds | None = None) -> None:
        self.writes.replace_groups(spec, rows, groups, bounds)

    def replace_scope(self, spec: TableSpec, rows: DataFrame, scope: DataFrame, match, bounds: Bounds | None = None):
        self.writes.replace_scope(spec, rows, scope, match, bounds)

    def append(self, spec: TableSpec, rows: DataFrame) -> None:
        self.writes.append(spec, rows)

    def progress(self, consumer: str) -> dict[str, int]:
        return self.ledger.progress(consumer)

    def save_progress(
        self, consumer: str, versions: dict[str, int], fingerprints: dict[str, str] | None = None, hold: bool = False
    ) -> None:
        self.ledger.save_progress(consumer, versions, fingerprints, hold)

    def flush_progress(self) -> None:
        self.ledger.flush_progress()


# Delta's Parquet holds the landing zone's text in about a quarter of its bytes; sizes in Parquet are compared with
# small_run_bytes in landing bytes.
PARQUET_TO_LANDING = 4
