"""Silver: bronze -> typed, deduplicated, validated tables + quarantine, incrementally.

For each bronze table, the rows it gained since silver last ran are read as one batch: Delta versions after the one
recorded for silver in `bronze.pipeline_runs` (change data feed, inserts only). For that batch:
1. records with a bronze `parse_error` go to `silver.quarantine` (rule `record_readable`);
2. the batch's keys (a snapshot: cluster and capture time; a scrape: cluster, node and time) are looked up in bronze,
   so every record of a key is rebuilt together: a `--status` capture that arrives after its `--replication`
   capture completes the same snapshot, and duplicates keep the later-ingested record whatever the batching;
3. the rows are validated once per batch and table with Great Expectations (results to `silver.dq_validations`),
   and the same rules split them: valid rows replace their key groups in the silver tables (one atomic MERGE
   each), failing rows go to quarantine with the names of every rule they failed.
Every write is idempotent, and silver's progress is recorded only after its writes, so a batch redone after a crash
leaves the same tables.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.contract.tables import (
    BRONZE_METRICS_RAW,
    BRONZE_PARTITIONS_RAW,
    BRONZE_QUORUM_RAW,
    SILVER_DQ_VALIDATIONS,
    SILVER_NODE_METRICS,
    SILVER_PARTITION_STATES,
    SILVER_QUARANTINE,
    SILVER_QUORUM_SNAPSHOTS,
    SILVER_REPLICA_STATES,
    TableSpec,
)
from quorumlake.expectations.gx_runner import GxValidator
from quorumlake.expectations.rules import load_suite, rule_params, with_failed_rules
from quorumlake.pipelines.engine.session import cached, release
from quorumlake.pipelines.jobs.faults import describe, fail_if, reached
from quorumlake.pipelines.progress import Progress
from quorumlake.pipelines.storage import Bounds, Lakehouse
from quorumlake.silver.common import rejected, row_failures
from quorumlake.silver.metrics import parse_node_metrics, split_node_metrics
from quorumlake.silver.partitions import parse_partition_states, split_partition_states
from quorumlake.silver.quorum import parse_quorum, split_quorum


@dataclass(frozen=True)
class Flow:
    """One bronze table and the silver tables built from it."""

    bronze: TableSpec
    parse_target: TableSpec  # where a record that bronze could not read is quarantined
    bronze_keys: tuple[str, ...]  # the key group, in bronze column names
    outputs: tuple[TableSpec, ...]
    # candidates -> parsed frames (the expensive half, materialized so that every output reads them once);
    # parsed frames -> (*outputs, rejected)
    parse: Callable[[DataFrame, Lakehouse], tuple[DataFrame, ...]]
    split: Callable[..., tuple[DataFrame, ...]]
    silver_keys: tuple[str, ...] = field(default=())  # the key group in silver column names, if renamed


FLOWS = (
    Flow(
        BRONZE_QUORUM_RAW,
        SILVER_QUORUM_SNAPSHOTS,
        ("cluster_id", "collected_at"),
        (SILVER_QUORUM_SNAPSHOTS, SILVER_REPLICA_STATES),
        lambda df, lh: parse_quorum(df),
        split_quorum,
    ),
    Flow(
        BRONZE_PARTITIONS_RAW,
        SILVER_PARTITION_STATES,
        ("cluster_id", "collected_at"),
        (SILVER_PARTITION_STATES,),
        lambda df, lh: parse_partition_states(df, lh.config.default_min_isr),
        split_partition_states,
    ),
    Flow(
        BRONZE_METRICS_RAW,
        SILVER_NODE_METRICS,
        ("cluster_id", "node_id", "collected_at"),
        (SILVER_NODE_METRICS,),
        lambda df, lh: parse_node_metrics(df),
        split_node_metrics,
        ("cluster_id", "node_id", "scraped_at"),
    ),
)


@dataclass
class SilverStats:
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    dq_seconds: float = 0.0
    total_seconds: float = 0.0

    def add(self, table: str, rows: int = 0, quarantined: int = 0) -> None:
        self.rows[table] = self.rows.get(table, 0) + rows
        self.quarantined[table] = self.quarantined.get(table, 0) + quarantined

    def merge(self, other: SilverStats) -> None:
        for table in {*other.rows, *other.quarantined}:
            self.add(table, other.rows.get(table, 0), other.quarantined.get(table, 0))
        self.dq_seconds += other.dq_seconds


def run_silver(lakehouse: Lakehouse, progress: Progress) -> SilverStats:
    """Process the rows each bronze table gained since silver last ran (Delta versions recorded in
    `bronze.pipeline_runs`), one batch per bronze table (a backlog in batches of at most `batch_bytes`, progress
    recorded after each), then record how far silver got."""
    stats = SilverStats()
    started = time.monotonic()
    done = lakehouse.progress(CONSUMER)
    reached_versions = dict(done)
    validator: GxValidator | None = None
    pending = Pending()
    for flow in FLOWS:
        after, upto = done.get(flow.bronze.name, -1), lakehouse.version(flow.bronze)
        if upto == after:
            continue
        ranges = lakehouse.version_ranges(flow.bronze, after, upto)
        for lo, hi in ranges:
            # Not cached: the batch holds every new record's payload, and what is read from it (its keys, its few
            # unreadable records) is read column-pruned; the payloads are read once, by key.
            batch = lakehouse.changes(flow.bronze, lo, hi).where(F.col("_change_type") == "insert")
            if lakehouse.changes_hold_rows(flow.bronze, lo, hi, batch):  # bronze only appends: its log says
                progress(f"silver: {flow.bronze.name} v{lo + 1}..{hi} -> {', '.join(o.name for o in flow.outputs)}")
                if validator is None:  # the run's first batch; what a killed run materialized goes first
                    lakehouse.sources.drop_scratch()
                    validator = GxValidator()
                size = lakehouse.log.added_bytes(flow.bronze, lo, hi)
                _process_or_quarantine(
                    lakehouse, flow, batch, f"v{lo + 1}-{hi}", size, validator, stats, pending, progress
                )
            reached_versions[flow.bronze.name] = hi
            if len(ranges) > 1:  # a backlog: what each batch did is kept before the next one (or flow) starts
                pending.write(lakehouse)
                lakehouse.sources.drop_scratch()
                lakehouse.save_progress(CONSUMER, reached_versions)
                done = dict(reached_versions)
                reached(f"silver:batch:{flow.bronze.name}")
        reached(f"silver:flow:{flow.bronze.name}")
    pending.write(lakehouse)
    if validator is not None:
        lakehouse.sources.drop_scratch()
    if reached_versions != done:
        # written with gold's record: a crash before it makes the next run redo this batch, whose writes are idempotent
        lakehouse.save_progress(CONSUMER, reached_versions, hold=True)
    stats.total_seconds = time.monotonic() - started
    return stats


CONSUMER = "silver"


@dataclass
class Pending:
    """What every flow of a run sends to the two shared tables, written once at the end of silver (one MERGE into
    the quarantine, one append to the validation log, instead of one of each per flow and table). Silver's progress
    is saved after them, so a crash before they are written makes the next run redo the batches and write them."""

    rejects: list[DataFrame] = field(default_factory=list)  # persisted; each already materialized
    validations: list[tuple] = field(default_factory=list)

    def write(self, lakehouse: Lakehouse) -> None:
        if self.rejects:
            lakehouse.insert_new(SILVER_QUARANTINE, functools.reduce(DataFrame.unionByName, self.rejects))
        if self.validations:
            # a log: appended (a batch replayed after a crash is validated, and logged, again)
            lakehouse.append(
                SILVER_DQ_VALIDATIONS,
                lakehouse.spark.createDataFrame(self.validations, SILVER_DQ_VALIDATIONS.spark_schema),
            )
        self.discard()

    def discard(self) -> None:
        for df in self.rejects:
            release(df)
        self.rejects, self.validations = [], []


def _process_or_quarantine(
    lakehouse: Lakehouse,
    flow: Flow,
    batch: DataFrame,
    batch_id: str,
    size: int | None,
    validator: GxValidator,
    stats: SilverStats,
    pending: Pending,
    progress: Progress,
) -> None:
    """Process the batch; should that fail for a reason no rule foresaw, try once more, and then quarantine every
    record of the batch (rule `batch_processable`, the failure as the reason) so that the run, and every later one,
    goes on instead of replaying the same failure forever. A failed attempt's validations and rejects are dropped;
    rows it had already merged stay (they passed every rule), so such a record can be both in silver and in
    quarantine, never in neither."""
    error: Exception | None = None
    for _attempt in range(2):
        attempt_stats, attempt_pending = SilverStats(), Pending()
        try:
            fail_if(f"silver:{flow.bronze.name}")
            process_batch(lakehouse, flow, batch, batch_id, validator, attempt_stats, attempt_pending, size)
        except Exception as exc:  # whatever the failure, it must cost this batch, not every run
            attempt_pending.discard()
            error = exc
            progress(f"silver: {flow.bronze.name} batch {batch_id} failed: {describe(exc)}")
            continue
        stats.merge(attempt_stats)
        pending.rejects += attempt_pending.rejects
        pending.validations += attempt_pending.validations
        return
    reason = f"the batch could not be processed: {describe(error)}"
    failed = (
        rejected(batch, flow.parse_target.name, ["batch_processable"], F.lit(reason))
        .withColumn("quarantined_at", F.lit(lakehouse.config.run_at).cast("timestamp"))
        .transform(cached)
    )
    count = failed.count()
    pending.rejects.append(failed)
    stats.add(flow.parse_target.name, quarantined=count)
    progress(f"silver: {flow.bronze.name} batch {batch_id}: {count} records quarantined (rule batch_processable)")


def process_batch(
    lakehouse: Lakehouse,
    flow: Flow,
    batch: DataFrame,
    batch_id: str,
    validator: GxValidator,
    stats: SilverStats,
    pending: Pending,
    size: int | None = None,
) -> None:
    """One batch of a bronze table's new records (`size`: the bytes of bronze data its commits added, if known)
    into the flow's silver tables, data quality and quarantine."""
    config = lakehouse.config
    lakehouse.tune_up_for(size)
    parts = spread(size, config.spread_bytes)  # a big batch: more and smaller partitions, kept on disk only
    keep = StorageLevel.DISK_ONLY if parts else StorageLevel.MEMORY_AND_DISK
    unreadable = rejected(
        batch.where(F.col("parse_error").isNotNull()),
        flow.parse_target.name,
        ["record_readable"],
        F.col("parse_error"),
    )
    keys = batch.where(F.col("parse_error").isNull()).select(*flow.bronze_keys).distinct().transform(cached)
    bounds = Bounds.of(keys, "collected_at")
    candidates = _candidates(lakehouse, flow, keys, bounds)
    if parts:
        candidates = candidates.repartition(parts)
    # Parsed once per batch, on disk (they carry the records' payloads, for quarantine); every output and the
    # rejects are built from them.
    parsed = [lakehouse.sources.materialized(df, StorageLevel.DISK_ONLY) for df in flow.parse(candidates, lakehouse)]
    *outputs, rejects = flow.split(*parsed)
    rejects = lakehouse.sources.materialized(rejects, keep)
    params = rule_params(config.run_at, config.future_skew_ms)
    quarantine = [unreadable, rejects]
    failed_kept: list[DataFrame] = []  # the kept rows of tables with failing rows, released once the rejects are built
    silver_groups = keys
    silver_bounds = bounds
    if flow.silver_keys:
        silver_groups = keys.toDF(*flow.silver_keys)
        silver_bounds = bounds.on(flow.silver_keys[-1]) if bounds else None
    for spec, rows in zip(flow.outputs, outputs):
        suite = load_suite(spec.name)
        # The table's rows with the rules each fails, kept: read by data quality's counts, by GX, by the MERGE and by
        # quarantine. Built by their own action first, so what data quality is timed for is counting and validating,
        # not the parsing and typing (and the rules' row-level evaluation) that the first action runs.
        flagged = lakehouse.sources.materialized(with_failed_rules(rows, suite, params), keep)
        flagged.count()
        t0 = time.monotonic()
        counts = flagged.agg(
            F.count(F.lit(1)).alias("rows"), F.count_if(F.size("failed_rules") == 0).alias("valid")
        ).first()
        if counts["rows"]:  # GX validates the rows of this run, once per table; nothing to validate, no GX run
            outcomes = validator.validate(flagged.drop("failed_rules"), suite, params)
            label = f"{config.run_at.isoformat()}#{flow.bronze.table}#{batch_id}"
            pending.validations += [
                (
                    config.run_at,
                    spec.name,
                    label,
                    o.rule,
                    o.expectation,
                    o.success,
                    o.element_count,
                    o.unexpected_count,
                    counts["rows"],
                    o.error,
                )
                for o in outcomes
            ]
        stats.dq_seconds += time.monotonic() - t0
        failing = counts["rows"] - counts["valid"]
        valid = flagged.where(F.size("failed_rules") == 0) if failing else flagged
        lakehouse.replace_groups(spec, valid.drop("failed_rules"), silver_groups, silver_bounds)
        reached(f"silver:merged:{spec.name}")
        stats.add(spec.name, rows=counts["valid"])
        if failing:  # rows that fail a rule are quarantined with its names, read from the kept rows with the rejects
            quarantine.append(row_failures(flagged, spec.name))
            failed_kept.append(flagged)
        else:  # none: the rows are not read again
            release(flagged)
    all_rejects = quarantine[0]
    for q in quarantine[1:]:
        all_rejects = all_rejects.unionByName(q)
    all_rejects = all_rejects.withColumn("quarantined_at", F.lit(config.run_at).cast("timestamp")).transform(cached)
    per_table = all_rejects.groupBy("target_table").count().collect()  # also materializes all_rejects
    if per_table:
        pending.rejects.append(all_rejects)
    else:
        release(all_rejects)
    for row in per_table:
        stats.add(row["target_table"], quarantined=row["count"])
    for df in (rejects, *failed_kept, *parsed):
        release(df)
    release(keys)


def spread(size: int | None, spread_bytes: int) -> int:
    """How many partitions a silver batch of `size` bronze bytes is spread over: 0 (as read) unless it is big,
    more than two partitions of `spread_bytes`."""
    if size is None or size <= 2 * spread_bytes:
        return 0
    return -(-size // spread_bytes)


def _candidates(lakehouse: Lakehouse, flow: Flow, keys: DataFrame, bounds: Bounds | None) -> DataFrame:
    """Every readable bronze record of the given key groups, read with predicates that let Delta skip files."""
    bronze = lakehouse.read(flow.bronze)
    if bounds is None:
        return bronze.limit(0)
    pruned = bronze.where(F.col("parse_error").isNull()).where(bounds.sql())
    return pruned.join(keys, list(flow.bronze_keys), "left_semi")
