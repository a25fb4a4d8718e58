"""`quorumlake bench`: what a run costs, as ratios against floors measured in the same run.

Every figure is the wall time of a whole process (`quorumlake run`, or a floor script started the same way), so JVM
start-up is in each of them alike:
- `floor_s`: one Spark + Delta process that reads the landing zone once with explicit schemas and writes the raw
  records and the exploded replica rows as two Delta tables, nothing else (`python -m benchmarks.bench floor`);
- `backfill_s` (per layer from the run's own timings, and in total) from an empty warehouse, over the floor;
- `noop_s`: a run with nothing new, over `startup_s` (start Spark + Delta and read one table); the medians of
  NOOP_PAIRS alternating pairs, each sample in `noop_samples_s`;
- `incremental_after_history_over_empty`: the same batch of new files (1 % of the size) into a warehouse holding
  `history` times that batch, over the same batch into an empty warehouse (the runs' own seconds, so start-up is
  not counted twice; the medians of INCREMENTAL_PAIRS alternating pairs, each sample in `incremental_samples_s`);
- the newcomer's run, whatever the size: `demo_run_s`, a `quorumlake run` of the demo fleet into an empty warehouse
  with the demo's JVM options (`demo_pipeline_s`: the seconds it prints, which `make demo` shows), over
  `tables_floor_s`: one Spark + Delta process that creates, appends to and reads back each of the contract's tables
  with five rows, nothing else (`python -m benchmarks.bench tables`): what any run that writes every table pays in
  Delta's fixed costs, whatever its data.
Sizes: about 0.1M / 1M / 10M replica rows, with partition states and metric scrapes in the proportions of a polled
fleet (DescribeQuorum every 10 s, partition states every minute, a metrics scrape per node every 5 minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from quorumlake.contract.tables import ALL_TABLES, LAYERS
from quorumlake.pipelines.progress import Progress
from quorumlake.simulator import FleetSpec, generate

REPLICAS_PER_SNAPSHOT = 8  # 3 controllers (voters) + 5 brokers (observers)
_BASE = FleetSpec(
    brokers=5,
    controllers=3,
    topics=4,
    partitions=6,
    interval_s=10,
    partitions_every=6,
    scrape_every=30,
    scenarios=("healthy", "lagging-voter", "broker-failure", "metadata-divergence"),
)
# size -> (clusters, replica rows)
SIZES = {"small": (4, 100_000), "medium": (8, 1_000_000), "large": (16, 10_000_000)}
MARKER = ".quorumlake-bench"
CHECKOUT = Path(__file__).resolve().parents[1]  # the source checkout holding benchmarks/
INCREMENTAL_PAIRS = 3  # alternating pairs of runs behind incremental_after_history_over_empty
NOOP_PAIRS = 3  # alternating pairs of processes behind noop_over_startup


def fleet_for(size: str, fraction: float = 1.0, start_ms: int | None = None) -> FleetSpec:
    clusters, replica_rows = SIZES[size]
    steps = max(1, round(replica_rows * fraction / REPLICAS_PER_SNAPSHOT / clusters))
    spec = replace(_BASE, clusters=clusters, hours=steps * _BASE.interval_s / 3600)
    return replace(spec, start_ms=start_ms) if start_ms is not None else spec


def run_bench(root: Path, size: str, history: int, progress: Progress) -> dict:
    """Generate the landing zones under `root` and time every phase; returns the JSON-able results."""
    prepare_root(root)
    full = root / "landing"
    spec = fleet_for(size)
    progress(f"bench: generating the {size} fleet ({spec.clusters} clusters x {spec.steps} snapshots)")
    summary = generate(full, spec)
    results: dict = {
        "size": size,
        "landing_files": summary.total_files,
        "landing_records": summary.total_records,
        "replica_rows": spec.clusters * spec.steps * REPLICAS_PER_SNAPSHOT,
        "landing_bytes": _bytes(full),
    }

    progress("bench: floor (read once, write raw and replica rows)")
    results["floor_s"], _ = _timed([sys.executable, "-m", "benchmarks.bench", "floor", str(full), str(root / "floor")])

    progress("bench: backfill into an empty warehouse")
    results["backfill_s"], stats = _run(full, root / "warehouse", root / "backfill.json")
    results["backfill_layers_s"] = {k: stats["layers"].get(k) for k in LAYERS}
    rows = sum(t["rows_added"] for t in stats["tables"].values())
    results["rows_written"] = rows
    results["rows_per_second"] = round(rows / results["backfill_s"], 1)
    results["backfill_over_floor"] = round(results["backfill_s"] / results["floor_s"], 2)
    silver = stats["layers"].get("silver") or 0
    results["dq_share_of_silver"] = round(stats["layers"].get("silver_dq", 0) / silver, 3) if silver else None

    progress("bench: a run with nothing new, and Spark's own start-up")
    # Each arm is a cold process of ~10-15 s, whose time varies by seconds from one minute to the next, so one sample
    # of each says little about their ratio (docs/decisions/0012): the medians of alternating pairs, as below.
    noop, startup = alternating_pairs(
        (
            lambda pair: _run(full, root / "warehouse", root / f"noop-{pair}.json")[0],
            lambda pair: _timed(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.bench",
                    "startup",
                    str(root / "warehouse" / "gold" / "quorum_health"),
                ]
            )[0],
        ),
        NOOP_PAIRS,
    )
    results["noop_s"] = statistics.median(noop)
    results["startup_s"] = statistics.median(startup)
    results["noop_over_startup"] = round(results["noop_s"] / results["startup_s"], 2)
    results["noop_samples_s"] = {"noop": noop, "startup": startup}

    progress(f"bench: the same 1% batch after {history}x history, and into an empty warehouse")
    hist_spec = fleet_for(size, 0.01 * history)
    batch_spec = fleet_for(size, 0.01, start_ms=hist_spec.start_ms + hist_spec.steps * hist_spec.interval_s * 1000)
    with_history, batch_only = root / "landing-history", root / "landing-batch"
    generate(with_history, hist_spec)
    generate(root / "batch", batch_spec)
    for target in (with_history, batch_only):
        for source in ("quorum", "metrics", "partitions"):
            if (root / "batch" / source).is_dir():
                shutil.copytree(root / "batch" / source, target / source / "batch", dirs_exist_ok=True)
    hist_wh = root / "warehouse-history"
    _run(with_history, hist_wh, root / "history.json", exclude_batch=True)
    # Each arm is one ~1-minute run, and such runs vary by +-5 s from one minute to the next on a small machine: one
    # pair decides nothing near the target. INCREMENTAL_PAIRS pairs, their order alternating, each after-history run
    # on a fresh copy of the history's warehouse; the ratio is of the two arms' medians.
    after, empty = alternating_pairs(
        (
            lambda pair: _incremental(with_history, hist_wh, root / f"after-history-{pair}"),
            lambda pair: _incremental(batch_only, None, root / f"into-empty-{pair}"),
        ),
        INCREMENTAL_PAIRS,
    )
    results["incremental_after_history_s"] = statistics.median(after)
    results["incremental_into_empty_s"] = statistics.median(empty)
    results["incremental_after_history_over_empty"] = round(
        results["incremental_after_history_s"] / results["incremental_into_empty_s"], 2
    )
    results["incremental_samples_s"] = {"after_history": after, "into_empty": empty}
    results["history"] = history

    progress("bench: the demo fleet's run, and plain Delta touching every table of the contract")
    from quorumlake.pipelines.engine.local import SMALL_RUN_JAVA_OPTIONS
    from quorumlake.simulator.demo import DEMO_FLEET

    demo = root / "demo"
    generate(demo / "landing", DEMO_FLEET)
    settings = demo / "demo.toml"
    settings.write_text(f'java_options = "{SMALL_RUN_JAVA_OPTIONS}"\n', encoding="utf-8")
    results["demo_run_s"], demo_stats = _run(
        demo / "landing", demo / "warehouse", demo / "run.json", extra=("--config", str(settings))
    )
    results["demo_pipeline_s"] = demo_stats["seconds"]
    results["tables_floor_s"], _ = _timed(
        [sys.executable, "-m", "benchmarks.bench", "tables", str(root / "tables"), str(len(ALL_TABLES))]
    )
    results["demo_run_over_tables_floor"] = round(results["demo_run_s"] / results["tables_floor_s"], 2)
    return results


def prepare_root(root: Path) -> None:
    """A scratch folder the bench owns: new, or one it made before (marked); anything else is refused."""
    if root.exists():
        if not (root / MARKER).is_file():
            raise ValueError(f"{root} exists and was not made by 'quorumlake bench'; choose another --root")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / MARKER).write_text("made by quorumlake bench; deleted by the next bench run\n", encoding="utf-8")


def alternating_pairs(arms: Sequence[Callable[[int], float]], pairs: int) -> list[list[float]]:
    """Each arm measured once per pair, `pairs` times, the arms' order reversed every other pair (A B, B A, A B, ...),
    so that a slow minute falls on both alike; `arm(pair)` returns one sample. Each arm's samples, in the arms'
    order."""
    samples: list[list[float]] = [[] for _ in arms]
    for pair in range(pairs):
        order = range(len(arms)) if pair % 2 == 0 else reversed(range(len(arms)))
        for i in order:
            samples[i].append(arms[i](pair))
    return samples


def _incremental(landing: Path, history: Path | None, out: Path) -> float:
    """The seconds a run reports for the batch into a copy of the `history` warehouse (None: an empty one) at `out`;
    the copy is removed afterwards."""
    warehouse = out / "warehouse"
    out.mkdir(parents=True, exist_ok=True)
    if history is not None:
        shutil.copytree(history, warehouse, symlinks=True)
    try:
        _, stats = _run(landing, warehouse, out / "run.json")
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
    return stats["seconds"]


def _run(
    landing: Path, warehouse: Path, stats: Path, exclude_batch: bool = False, extra: tuple[str, ...] = ()
) -> tuple[float, dict]:
    hidden = []
    if exclude_batch:  # ingest the history alone first: hide the batch folders from this run
        for source in ("quorum", "metrics", "partitions"):
            folder = landing / source / "batch"
            if folder.is_dir():
                hidden.append((folder, folder.with_name("_batch")))
                folder.rename(folder.with_name("_batch"))
    try:
        seconds, _ = _timed(
            [
                sys.executable,
                "-m",
                "quorumlake.pipelines.app.cli",
                "run",
                "--landing",
                str(landing),
                "--warehouse",
                str(warehouse),
                "--stats",
                str(stats),
                *extra,
            ]
        )
    finally:
        for folder, moved in hidden:
            moved.rename(folder)
    return seconds, json.loads(stats.read_text(encoding="utf-8"))


def _timed(command: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    # `python -m benchmarks.bench` finds this folder from the checkout it belongs to
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    seconds = round(time.monotonic() - started, 2)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(command[:4])} failed (exit {done.returncode}): {' | '.join(tail)}")
    return seconds, done.stdout


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def table(results: dict) -> str:
    """The results as an aligned two-column table."""
    keys = [
        "size",
        "replica_rows",
        "landing_files",
        "landing_bytes",
        "floor_s",
        "backfill_s",
        "backfill_layers_s",
        "backfill_over_floor",
        "rows_written",
        "rows_per_second",
        "dq_share_of_silver",
        "startup_s",
        "noop_s",
        "noop_over_startup",
        "noop_samples_s",
        "history",
        "incremental_after_history_s",
        "incremental_into_empty_s",
        "incremental_after_history_over_empty",
        "incremental_samples_s",
        "demo_run_s",
        "demo_pipeline_s",
        "tables_floor_s",
        "demo_run_over_tables_floor",
    ]
    width = max(len(k) for k in keys)
    lines = []
    for k in keys:
        value = results.get(k)
        if isinstance(value, dict):
            value = ", ".join(f"{name} {v}" for name, v in value.items())
        lines.append(f"{k:<{width}}  {value}")
    return "\n".join(lines) + "\n"


# --- the floors, run as their own processes -------------------------------------------------------------------------

_REPLICA = "replicaId INT, logEndOffset BIGINT, lastFetchTimestamp BIGINT, lastCaughtUpTimestamp BIGINT"
_ENVELOPE = (
    f"cluster_id STRING, collected_at_ms BIGINT, api_version INT, response STRUCT<errorCode: INT, "
    f"topics: ARRAY<STRUCT<topicName: STRING, partitions: ARRAY<STRUCT<partitionIndex: INT, "
    f"errorCode: INT, leaderId: INT, leaderEpoch: INT, highWatermark: BIGINT, "
    f"currentVoters: ARRAY<STRUCT<{_REPLICA}>>, observers: ARRAY<STRUCT<{_REPLICA}>>>>>>>"
)


def _floor(landing: str, out: str) -> None:
    """Read every landing file once (text, gzip transparently), write the raw lines and the replica rows."""
    from pyspark.sql import functions as F

    spark = _session(out)
    lines = (
        spark.read.option("recursiveFileLookup", "true")
        .text(landing)
        .withColumn("source_file", F.input_file_name())
        .persist()
    )
    lines.write.format("delta").save(f"{out}/raw")
    quorum = lines.where(F.col("source_file").contains("/quorum/") & F.col("source_file").rlike(r"\.jsonl(\.gz)?$"))
    env = quorum.select(F.from_json("value", _ENVELOPE).alias("e")).select("e.*")
    partitions = env.select("cluster_id", "collected_at_ms", F.explode("response.topics").alias("t")).select(
        "cluster_id", "collected_at_ms", F.explode("t.partitions").alias("p")
    )
    replicas = partitions.select(
        "cluster_id",
        F.timestamp_millis("collected_at_ms").alias("collected_at"),
        "p.leaderId",
        F.explode(
            F.concat(
                F.transform("p.currentVoters", lambda r: F.struct(r.alias("r"), F.lit(True).alias("v"))),
                F.transform("p.observers", lambda r: F.struct(r.alias("r"), F.lit(False).alias("v"))),
            )
        ).alias("x"),
    ).select("cluster_id", "collected_at", "leaderId", "x.r.*", F.col("x.v").alias("is_voter"))
    replicas.write.format("delta").save(f"{out}/replicas")


def _startup(table_path: str) -> None:
    """Start Spark + Delta and read one table: what any run pays before it does anything."""
    spark = _session(str(Path(table_path).parent.parent))
    print(spark.read.format("delta").load(table_path).count())


def _tables(out: str, count: str) -> None:
    """Create (five rows), append to (five rows) and read back each of `count` Delta tables, one after the other:
    the fixed cost of touching that many tables, in a JVM tuned as the demo's small run is."""
    from pyspark.sql import functions as F

    from quorumlake.pipelines.engine.local import SMALL_RUN_JAVA_OPTIONS

    spark = _session(out, SMALL_RUN_JAVA_OPTIONS)
    rows = spark.range(5).select(
        F.col("id").alias("key"), F.lit("value").alias("value"), F.timestamp_millis(F.col("id")).alias("at")
    )
    paths = [f"{out}/table_{i:02d}" for i in range(int(count))]
    for path in paths:
        rows.write.format("delta").save(path)
    for path in paths:
        rows.write.format("delta").mode("append").save(path)
    for path in paths:
        spark.read.format("delta").load(path).where(F.col("key") > 1).count()


def _session(warehouse: str, java_options: str = ""):
    from quorumlake.pipelines.config import Config
    from quorumlake.pipelines.engine.session import get_spark, quiet

    spark = get_spark(Config(warehouse=warehouse, java_options=java_options))
    quiet(spark)
    return spark


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"floor": _floor, "startup": _startup, "tables": _tables}[command](*args)
