"""Bronze: the landing files not ingested yet -> one row per record in bronze.*_raw.

Locally (and on a Databricks volume's FUSE path) the landing zone is listed (`quorumlake.pipelines.storage.landing`): a
file is new when its (path, size, modification time) is not in `bronze.ingest_runs`. New files are read in bounded
chunks, each chunk's records are inserted into their bronze table by `record_id` (an insert-only MERGE restricted to the
chunk's time range and clusters, so its cost follows the chunk, not the table's history), and then the chunk's files are
recorded in `bronze.ingest_runs`. A crash between the two only makes the next run read those files again; the MERGE adds
nothing twice. With `ingest_mode = "autoloader"` (or a landing root that is not a local folder), files are discovered by
Auto Loader / Spark's file source instead and handed to the same record builder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quorumlake.bronze.raw import PIECE_SCHEMA, build_raw_records, line_pieces
from quorumlake.contract.tables import BRONZE_INGEST_RUNS, BRONZE_SOURCES
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.session import cached, release, runs_remotely
from quorumlake.pipelines.jobs.faults import describe, fail_if, reached
from quorumlake.pipelines.jobs.outcome import GIVEN_UP, NOT_INGESTED
from quorumlake.pipelines.progress import Progress
from quorumlake.pipelines.storage import Attempt, Bounds, Lakehouse
from quorumlake.pipelines.storage.landing import (
    FileContent,
    LandingFile,
    Listing,
    chunks,
    is_local,
    read_file,
    scan_landing,
)

_FILES_SCHEMA = (
    "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY, data BINARY, read_error STRING, "
    + PIECE_SCHEMA
)
_LISTING_SCHEMA = "source STRING, path STRING, file_size BIGINT, file_modified_at TIMESTAMP"


@dataclass(frozen=True)
class BronzeCounts:
    table: str
    rows: int
    errors: int


def run_bronze(lakehouse: Lakehouse, progress: Progress) -> list[BronzeCounts]:
    """Ingest the landing files not ingested yet."""
    config = lakehouse.config
    if config.ingest_mode == "autoloader" or not is_local(config.landing):
        return _run_streams(lakehouse, progress)
    lakehouse.sources.unstage()  # what a killed run left
    since = {spec.name: lakehouse.log.local_version(spec) for spec in BRONZE_SOURCES.values()}  # counted from here
    recorded = lakehouse.ledger.fingerprint(CONSUMER, LANDING)
    scan = scan_landing(
        config.landing, BRONZE_SOURCES, lakehouse.sources.landing_folders(recorded), _settled_before(config)
    )
    listing = scan.files
    fingerprint = _fingerprint(scan)
    touched: set[str] = set()
    skipped = f" (and {scan.skipped} settled folders not listed again)" if scan.skipped else ""
    if fingerprint == recorded:
        progress(f"bronze: {len(listing)} landing files{skipped}, none changed since the last run")
        lakehouse.tune_for(0)
    else:
        new = _new_files(lakehouse, listing)
        progress(f"bronze: {len(listing)} landing files{skipped}, {len(new)} new")
        lakehouse.tune_for(sum(f.size for f in new))
        chunk_bytes = (
            config.bronze_chunk_bytes if _stages(config) else min(config.bronze_chunk_bytes, IN_MEMORY_CHUNK_BYTES)
        )
        for chunk, alone_deaths in _plan(new, chunk_bytes, lakehouse.sources.bronze_attempt()):
            # recorded first: should this chunk kill the run (the JVM out of memory), the next run knows which
            # files to corner, and gives up on a file that killed runs alone
            lakehouse.sources.save_bronze_attempt(Attempt(frozenset(map(_key, chunk)), alone_deaths))
            touched |= _ingest(lakehouse, chunk, given_up=alone_deaths >= GIVE_UP_AFTER)
        lakehouse.sources.save_bronze_attempt(None)
        reached("bronze:recorded")
        # written with the run's next record of the ledger: a crash before it costs the next run a listing
        lakehouse.save_progress(CONSUMER, {LANDING: len(listing)}, {LANDING: fingerprint}, hold=True)
        lakehouse.sources.save_landing_folders(fingerprint, scan.folders)
    ingested = lakehouse.sources.count_ingested([BRONZE_SOURCES[s] for s in sorted(touched)], config.run_at, since)
    return [BronzeCounts(spec.name, *ingested.get(spec.name, (0, 0))) for spec in BRONZE_SOURCES.values()]


CONSUMER = "bronze"
LANDING = "landing"


def _fingerprint(scan: Listing) -> str:
    """A hash of what the listing saw: equal fingerprints mean no file was added, changed or removed. A settled
    folder counts by its name and modification time alone, whether it was listed again or not: the run after the
    one that listed it last is a run with nothing new."""
    digest = hashlib.sha256()
    for f in scan.unsettled:
        digest.update(f"{f.path}\0{f.size}\0{f.modified_at.isoformat()}\0{f.problem or ''}\n".encode())
    for path, folder in sorted(scan.folders.items()):
        digest.update(f"{path}\0{folder.mtime_ns}\0{folder.settled}\n".encode())
    return digest.hexdigest()


def _settled_before(config: Config) -> datetime | None:
    """Folders untouched since this time are not listed again (0 minutes: every run lists every file)."""
    minutes = config.landing_settle_minutes
    return config.run_at - timedelta(minutes=minutes) if minutes > 0 else None


def _new_files(lakehouse: Lakehouse, listing: list[LandingFile]) -> list[LandingFile]:
    """The listed files whose (path, size, modification time) has not been ingested. Compared on the driver, in
    Arrow, when `bronze.ingest_runs` is a local table it can read (a fleet's listing of 10^6 files, handed to Spark,
    was 150 MB of the JVM's heap and its join another 200 MB, held for the whole run); else by Spark."""
    if not listing:
        return []
    listed = pa.table(
        {
            "source": pa.array([f.source for f in listing], pa.string()),
            "path": pa.array([f.path for f in listing], pa.string()),
            "file_size": pa.array([f.size for f in listing], pa.int64()),
            "file_modified_at": pa.array([f.modified_at for f in listing], pa.timestamp("us", tz="UTC")),
        }
    )
    keys = ["path", "file_size", "file_modified_at"]
    known = lakehouse.log.local_rows(BRONZE_INGEST_RUNS, keys)
    if known is not None or lakehouse.log.known_empty(BRONZE_INGEST_RUNS):
        if known is None:
            return list(listing)
        new_keys = _micros(listed.select(keys)).join(_micros(known.select(keys)), keys, join_type="left anti")
        new = set(zip(new_keys["path"].to_pylist(), new_keys["file_size"].to_pylist(), strict=True))
    else:
        spark = lakehouse.spark
        known_df = lakehouse.read(BRONZE_INGEST_RUNS).select(*keys)
        # a sort-merge join: a broadcast of a long history of ingested files would be held by the driver
        rows = (
            spark.createDataFrame(listed, _LISTING_SCHEMA)
            .join(known_df.hint("merge"), keys, "left_anti")
            .select("path", "file_size")
            .collect()
        )
        new = {(r["path"], r["file_size"]) for r in rows}
    return [f for f in listing if (f.path, f.size) in new]


def _micros(table: pa.Table) -> pa.Table:
    """`file_modified_at` as UTC microseconds (Spark writes Parquet timestamps as INT96 or microseconds)."""
    column = table["file_modified_at"]
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
    return table.set_column(table.schema.get_field_index("file_modified_at"), "file_modified_at", column)


# A file is not read again once this many runs died while ingesting it alone (it becomes a bronze row whose
# parse_error says so): a run that dies is not an error this process can catch, so without this one file that
# exhausts the JVM's memory would kill every later run at the same place.
GIVE_UP_AFTER = 2


def _plan(new: list[LandingFile], chunk_bytes: int, died: Attempt | None) -> Iterator[tuple[list[LandingFile], int]]:
    """The chunks to ingest, each with how many runs died ingesting its file alone before. The files of the chunk a
    run died in (which of them killed it is not known) come last, so the others land whatever happens, and in two
    halves, each holding every other file of each source: a kill that had nothing to do with the files costs one
    more chunk, a file that kills every run is cornered in about log2(files) runs. A file that killed a run alone
    is tried alone again, counting."""
    suspect = died.files if died else frozenset()
    suspects = [f for f in new if _key(f) in suspect]
    yield from ((chunk, 0) for chunk in chunks([f for f in new if _key(f) not in suspect], chunk_bytes))
    if len(suspects) == 1 and len(died.files) == 1:
        yield suspects, died.alone_deaths + 1
    elif suspects:
        by_source = sorted(suspects, key=lambda f: f.source)
        yield from ((half, 0) for half in (by_source[0::2], by_source[1::2]) if half)


def _key(f: LandingFile) -> tuple[str, int, str]:
    return (f.path, f.size, f.modified_at.isoformat())


def _ingest(lakehouse: Lakehouse, files: list[LandingFile], given_up: bool = False) -> set[str]:
    """Read a chunk of files, insert their records, then record the files as ingested."""
    config = lakehouse.config
    if given_up:
        reason = f"{GIVEN_UP}{GIVE_UP_AFTER} runs died ingesting this file alone (out of memory?); a new version is"
        contents = [FileContent(f, None, None, f"{reason} read again") for f in files]
    else:
        contents = [read_file(f, config.max_file_bytes, config.max_decompressed_bytes) for f in files]
    sources = sorted({f.source for f in files})
    for source in sources:
        _insert_or_isolate(lakehouse, source, [c for c in contents if c.file.source == source])
        reached(f"bronze:inserted:{source}")
    lakehouse.append(
        BRONZE_INGEST_RUNS,
        lakehouse.spark.createDataFrame(
            [(f.source, f.path, f.size, f.modified_at, config.run_at) for f in files], BRONZE_INGEST_RUNS.spark_schema
        ),
    )
    return set(sources)


def _insert_or_isolate(lakehouse: Lakehouse, source: str, contents: list[FileContent], retried: bool = False) -> None:
    """Insert the records of these files. Should that fail for a reason no parser foresaw, the files are tried one
    by one (a lone file once more), and a file that still fails becomes one bronze row whose `parse_error` is the
    failure: it costs that file, never the run, and is not retried by every later run (a new version of the file
    is ingested like any changed file)."""
    try:
        fail_if("bronze", *(c.file.path for c in contents))
        reached("bronze", *(c.file.path for c in contents if c.content is not None))
        _insert_files(lakehouse, source, contents)
        return
    except Exception as exc:  # whatever the failure, it must cost only the file it came from
        if len(contents) == 1 and retried:
            failed = FileContent(contents[0].file, None, None, f"{NOT_INGESTED}{describe(exc)}")
            _insert_files(lakehouse, source, [failed])
            return
    for content in contents:
        _insert_or_isolate(lakehouse, source, [content], retried=True)


# A chunk handed over in memory (not staged) is held whole by the JVM (or sent in one Spark Connect message): at most
# this much, whatever `bronze_chunk_bytes` says.
IN_MEMORY_CHUNK_BYTES = 16 * 1024 * 1024


def _stages(config: Config) -> bool:
    """Whether chunks reach Spark as scratch files: only when its tasks run on this machine (a local master), not
    through a remote or Databricks session, whose tasks cannot read this machine's disk, and with the scratch files
    under a local checkpoint folder."""
    local_checkpoints = is_local(config.checkpoints)
    return not runs_remotely(config) and config.spark_master.startswith("local") and local_checkpoints


def _insert_files(lakehouse: Lakehouse, source: str, contents: list[FileContent]) -> None:
    """Insert the records of files already read on the driver. Locally they reach Spark as scratch Parquet files
    (tasks stream them; a chunk is not held in the driver's JVM heap); elsewhere as an in-memory frame. A large
    JSON Lines file goes as pieces of whole lines (`line_pieces`), so no value Spark holds is larger than a piece."""
    piece_bytes = lakehouse.config.bronze_piece_bytes
    rows = []
    for c in contents:
        f = c.file
        row = {"path": f.path, "modificationTime": f.modified_at, "length": f.size, "read_error": c.error}
        data = c.data if c.data is not None else c.content
        pieces = None if c.error or data is None else line_pieces(source, f.path, c.content, data, piece_bytes)
        if pieces is None:
            # plain files: their content is their data, not sent twice
            rows.append(row | {"content": c.content, "data": c.data if f.path.lower().endswith(".gz") else None})
            continue
        whole = {"content_hash": pieces.content_hash, "file_sha256": pieces.file_sha256}
        rows.extend(row | whole | {"data": p.data, "first_line": p.first_line} for p in pieces.pieces)
    files = pa.Table.from_pylist(rows, _FILES_ARROW)
    if not _stages(lakehouse.config):
        insert_records(lakehouse, source, lakehouse.spark.createDataFrame(files, _FILES_SCHEMA))
        return
    name = f"bronze-{source}"
    try:
        insert_records(lakehouse, source, lakehouse.sources.staged(files, _FILES_SCHEMA, name))
    finally:
        lakehouse.sources.unstage(name)


_FILES_ARROW = pa.schema(
    [
        ("path", pa.string()),
        ("modificationTime", pa.timestamp("us", tz="UTC")),
        ("length", pa.int64()),
        ("content", pa.binary()),
        ("data", pa.binary()),
        ("read_error", pa.string()),
        ("content_hash", pa.string()),
        ("file_sha256", pa.string()),
        ("first_line", pa.int32()),
    ]
)


def insert_records(lakehouse: Lakehouse, source: str, files: DataFrame) -> None:
    """Build the bronze rows of some landing files and insert the ones bronze does not hold yet."""
    spec = BRONZE_SOURCES[source]
    if lakehouse.log.known_empty(spec):  # a new table (a first run, a full refresh): one append, nothing to compare
        lakehouse.insert_new(spec, build_raw_records(files, source, lakehouse.config.run_at))
        return
    # on disk: a chunk's rows are read twice (their bounds, the MERGE), and in a 1 GB driver heap a cached chunk
    # crowds out the work itself
    rows = build_raw_records(files, source, lakehouse.config.run_at).transform(cached, StorageLevel.DISK_ONLY)
    try:
        bounds = Bounds.of(rows, "collected_at", or_null=True)
        if bounds is not None:
            lakehouse.insert_new(spec, rows, bounds)
    finally:
        release(rows)


def _run_streams(lakehouse: Lakehouse, progress: Progress) -> list[BronzeCounts]:
    """Auto Loader (or Spark's file source for a remote landing root): discovery by the stream's checkpoint, each
    micro-batch handed to `StreamBatch`."""
    config = lakehouse.config
    for source, spec in BRONZE_SOURCES.items():
        progress(f"bronze: ingesting {lakehouse.sources.landing_path(source)}/ -> {spec.name}")
        lakehouse.sources.stream_landing_files(source, StreamBatch(config, source))
    ingested = lakehouse.sources.count_ingested(list(BRONZE_SOURCES.values()), config.run_at)
    return [BronzeCounts(spec.name, *ingested[spec.name]) for spec in BRONZE_SOURCES.values()]


@dataclass(frozen=True)
class StreamBatch:
    """What Auto Loader (on Databricks) or Spark's file stream source calls with each micro-batch of one landing
    source's files (foreachBatch). It carries the run's settings, not a session: under Spark Connect (serverless)
    it is pickled and called in a Python process of the server, whose session is the batch's own."""

    config: Config
    source: str

    def __call__(self, files: DataFrame, _batch_id: int) -> None:
        ingest_batch(Lakehouse(files.sparkSession, self.config), self.source, files)


# a file whose records could not be inserted: no content, the failure as its read error
_FAILED_FILE_SCHEMA = (
    "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY, data BINARY, read_error STRING"
)


def ingest_batch(lakehouse: Lakehouse, source: str, files: DataFrame) -> None:
    """Insert the records of a micro-batch of landing files (columns of BINARY_FILE_SCHEMA), then record the files in
    bronze.ingest_runs, as the listing path does. Should the batch fail for a reason no parser foresaw, its files are
    tried one by one, and a file that still fails becomes one bronze row whose parse_error is the failure: it costs
    that file, never the run, and the stream moves past it. Idempotent: a batch handed over again (its run crashed
    before the checkpoint commit) adds nothing twice."""
    config = lakehouse.config
    files = files.select("path", "modificationTime", "length", "content")
    listed = [(r["path"], r["length"], r["modificationTime"]) for r in files.drop("content").collect()]
    if not listed:
        return
    try:
        fail_if("bronze", *(path for path, _, _ in listed))
        insert_records(lakehouse, source, files)
    except Exception:  # whatever the failure, it must cost only the file it came from
        for path, size, modified_at in listed:
            try:
                fail_if("bronze", path)
                insert_records(lakehouse, source, files.where(F.col("path") == path))
            except Exception as exc:
                failed = [(path, modified_at, size, None, None, f"{NOT_INGESTED}{describe(exc)}")]
                insert_records(lakehouse, source, lakehouse.spark.createDataFrame(failed, _FAILED_FILE_SCHEMA))
    recorded = [(source, path, size, modified_at, config.run_at) for path, size, modified_at in listed]
    lakehouse.insert_new(BRONZE_INGEST_RUNS, lakehouse.spark.createDataFrame(recorded, BRONZE_INGEST_RUNS.spark_schema))
