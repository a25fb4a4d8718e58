"""Bronze's sources and scratch space: the landing zone's streams (Spark's file source or Auto Loader), staged
Parquet of rows the driver read, a run's materialized frames, and bronze's checkpoints of listings and attempts.
"""

from __future__ import annotations

import functools
import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quorumlake.bronze.raw import BINARY_FILE_SCHEMA
from quorumlake.contract.tables import TableSpec
from quorumlake.pipelines.config import Config, join_path
from quorumlake.pipelines.engine.session import cached, is_connect
from quorumlake.pipelines.storage.autoloader import AUTOLOADER_OPTIONS, retention_options
from quorumlake.pipelines.storage.catalog import absolute
from quorumlake.pipelines.storage.landing import Folder, is_local


class Sources:
    """The landing zone, staging and scratch space, bronze's checkpoints (a part of `Lakehouse`)."""

    spark: SparkSession
    config: Config

    # --- landing ------------------------------------------------------------------------------------------------------

    def landing_path(self, source: str) -> str:
        return join_path(self.config.landing, source)

    def stream_landing_files(self, source: str, on_batch: Callable[[DataFrame, int], None]) -> None:
        """Hand every landing file of `source` not seen by an earlier run to `on_batch(files, batch_id)`, in bounded
        batches (Structured Streaming's foreachBatch).

        The streaming checkpoint records which files were handed over; `on_batch` must be idempotent, because a
        batch whose run crashed before the checkpoint commit is handed over again. Under Spark Connect (serverless)
        `on_batch` is pickled and called in a Python process of the server, with `files.sparkSession` as its session:
        it must carry what it needs by value, never a session.
        """
        path = self.landing_path(source)
        if self.config.ingest_mode == "autoloader":
            reader = (
                self.spark.readStream.format("cloudFiles")
                .options(**AUTOLOADER_OPTIONS)
                .options(**retention_options(self.config.landing_retention_days))
                .option("cloudFiles.schemaLocation", self.checkpoint("bronze", source, "_schema"))
                .option("cloudFiles.maxFilesPerTrigger", str(self.config.max_files_per_trigger))
            )
        else:
            reader = (
                self.spark.readStream.format("binaryFile")
                .schema(BINARY_FILE_SCHEMA)
                .option("recursiveFileLookup", "true")
                .option("maxFilesPerTrigger", str(self.config.max_files_per_trigger))
            )
        query = (
            reader.load(path)
            .writeStream.queryName(f"bronze_{source}")
            .foreachBatch(on_batch)
            .option("checkpointLocation", self.checkpoint("bronze", source))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    def landing_folders(self, fingerprint: str | None) -> dict[str, Folder]:
        """The folders bronze's last completed listing saw, if that listing is the one whose fingerprint bronze
        recorded (after a crash, a reset or a full refresh they are not trusted: the next listing walks everything)."""
        path = self._landing_folders_path()
        if fingerprint is None or path is None or not path.is_file():
            return {}
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if saved.get("fingerprint") != fingerprint:
            return {}
        return {d: Folder(m, tuple(subs), settled) for d, (m, subs, settled) in saved["folders"].items()}

    def save_landing_folders(self, fingerprint: str, folders: dict[str, Folder]) -> None:
        """Keep what a completed listing saw of each folder (written after bronze recorded its progress)."""
        path = self._landing_folders_path()
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "fingerprint": fingerprint,
            "folders": {d: [f.mtime_ns, list(f.subfolders), f.settled] for d, f in folders.items()},
        }
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(json.dumps(body), encoding="utf-8")
        scratch.replace(path)  # atomic: a reader sees the old state or the new one

    def reset_landing_checkpoints(self) -> None:
        """Auto Loader's record of ingested files, removed so that bronze reads the landing zone again."""
        path = self.checkpoint("bronze")
        if not is_local(path):
            raise RuntimeError(f"remove {path} by hand (or with dbutils) before a bronze full refresh")
        shutil.rmtree(path, ignore_errors=True)

    # --- bronze's attempts --------------------------------------------------------------------------------------------

    def bronze_attempt(self) -> Attempt | None:
        """The chunk of landing files a bronze run was ingesting when it died (it records each chunk before
        reading it and forgets it once the files are recorded as ingested), or None."""
        path = self._attempt_path()
        if path is None or not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return Attempt(frozenset(tuple(key) for key in saved["files"]), int(saved["alone_deaths"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_bronze_attempt(self, attempt: Attempt | None) -> None:
        """Record the chunk about to be ingested (None: forget it, the chunk is done)."""
        path = self._attempt_path()
        if path is None:
            return
        if attempt is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(path.name + ".tmp")
        body = {"files": sorted(list(key) for key in attempt.files), "alone_deaths": attempt.alone_deaths}
        scratch.write_text(json.dumps(body), encoding="utf-8")
        scratch.replace(path)

    def _attempt_path(self) -> Path | None:
        root = self.checkpoint("bronze")
        return Path(root) / "attempt.json" if is_local(root) else None

    def _landing_folders_path(self) -> Path | None:
        root = self.checkpoint("bronze")
        return Path(root) / "landing_folders.json" if is_local(root) else None

    def count_ingested(
        self, specs: list[TableSpec], run_at: datetime, since: dict[str, int | None] | None = None
    ) -> dict[str, tuple[int, int]]:
        """Rows this run added to each of the bronze tables, and how many of them carry a parse error. Where the
        table's version before the run is known (`since`) and its log is local, counted from the statistics of the
        files its commits since then added (bronze only appends); the others in one query (files of earlier runs
        are skipped by their `ingested_at` statistics)."""
        counts: dict[str, tuple[int, int]] = {}
        asked = []
        for spec in specs:
            before = (since or {}).get(spec.name)
            upto = self.local_version(spec) if before is not None else None
            added = self.added_rows(spec, before, upto, "parse_error") if upto is not None else None
            if added is None:
                asked.append(spec)
            else:
                counts[spec.name] = added
        if asked:
            per_table = [
                self.read(spec)
                .where(F.col("ingested_at") == F.lit(run_at))
                .agg(F.count(F.lit(1)).alias("rows"), F.count("parse_error").alias("errors"))
                .withColumn("table", F.lit(spec.name))
                for spec in asked
            ]
            rows = functools.reduce(DataFrame.unionByName, per_table).collect()
            counts.update({r["table"]: (int(r["rows"]), int(r["errors"])) for r in rows})
        return counts

    # --- staging and scratch ------------------------------------------------------------------------------------------

    def staged(self, table: pa.Table, schema: str, name: str, group_bytes: int = 8 * 1024 * 1024) -> DataFrame:
        """`table` (rows the driver read, e.g. landing files) as a DataFrame that Spark reads from scratch Parquet
        files of about `group_bytes` each: tasks stream them a few MB at a time. Handed over in memory instead, the
        rows are one local relation in the driver's JVM heap, shipped inside every task of every query over them
        (a 40 MB task per stage), which caps how much a run can hand over at once. Local sessions only (the files
        are on the driver's disk); `unstage(name)` deletes them once the queries over them are done."""
        folder = Path(self.staging(name))
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        weights = [0] * table.num_rows
        for column in table.columns:
            if pa.types.is_binary(column.type) or pa.types.is_string(column.type):
                lengths = pc.fill_null(pc.binary_length(column), 0).to_pylist()
                weights = [w + n for w, n in zip(weights, lengths)]
        start, size, part = 0, 0, 0
        for row, weight in enumerate([*weights, None]):
            if weight is None or (row > start and size + weight > group_bytes):
                if row > start:
                    pq.write_table(
                        table.slice(start, row - start), folder / f"part-{part:05d}.parquet", compression="none"
                    )
                    part += 1
                start, size = row, 0
            size += weight or 0
        return self.spark.read.schema(schema).parquet(str(folder))

    def staging(self, name: str | None = None) -> str:
        """The scratch folder of one staged table, or (no name) of them all."""
        root = Path(absolute(self.config.checkpoints)) / "_staging"
        return str(root / name if name else root)

    def unstage(self, name: str | None = None) -> None:
        """Delete one staged table's files, or (no name) every staged file left by a run that was killed."""
        if not is_local(self.config.checkpoints):
            return  # never staged there (bronze stages only under a local checkpoint folder)
        shutil.rmtree(self.staging(name), ignore_errors=True)

    def materialized(self, df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
        """`df` computed once for the several actions that read it. A classic session keeps it (`cached`: persisted, or
        a local checkpoint in a small local run). A Spark Connect session cannot (serverless refuses persist()), and
        every action would recompute `df` from bronze: a silver batch's parse, Python UDFs over every record's
        payload, ran once per action, ~20 times per batch.
        There `df` is written once as Parquet to the run's scratch folder and read back, so each action reads files.
        Free with `release`/`release_all` (classic) and `drop_scratch` (Connect, once the run's last reader is done)."""
        if not is_connect(self.spark):
            return cached(df, level)
        path = join_path(self.scratch(), uuid.uuid4().hex)
        df.write.mode("overwrite").parquet(path)
        return self.spark.read.schema(df.schema).parquet(path)

    def scratch(self) -> str:
        """Where `materialized` writes under Spark Connect (a folder of the checkpoints, beside bronze's staging)."""
        return join_path(absolute(self.config.checkpoints), "_scratch")

    def drop_scratch(self) -> None:
        """Delete what `materialized` wrote (and what a killed run left): the folder itself where this process can
        reach it, otherwise through Spark (an empty Parquet dataset written over it)."""
        if not is_connect(self.spark):
            return  # nothing is written there on a classic session
        if is_local(self.config.checkpoints):
            shutil.rmtree(self.scratch(), ignore_errors=True)
        else:
            self.spark.range(0).write.mode("overwrite").parquet(self.scratch())


@dataclass(frozen=True)
class Attempt:
    """A chunk of landing files bronze set out to ingest: each file's (path, size, modification time as ISO text),
    and, for a file tried alone, how many runs before already died with it alone."""

    files: frozenset[tuple[str, int, str]]
    alone_deaths: int = 0
