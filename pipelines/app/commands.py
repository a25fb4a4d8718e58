"""Every command of the CLI, one handler each (`HANDLERS`): what `quorumlake <command>` does once
`quorumlake.pipelines.app.cli` has parsed its arguments.

A handler takes the parsed arguments and returns the exit code; it raises `UsageError` for what the user got wrong
and `RuntimeFailure` for what failed around it (both printed as one line by the CLI). A command that reads or
writes the lakehouse opens it with `open_lakehouse`; its settings come from `config_of` (defaults, then the
config file, then the flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from quorumlake.contract.tables import LAYERS
from quorumlake.pipelines.app.lock import warehouse_lock
from quorumlake.pipelines.app.output import format_rows, progress_bar, run_summary
from quorumlake.pipelines.config import Config, build_config, now_ms, typed_settings
from quorumlake.pipelines.errors import EXIT_DEGRADED, RuntimeFailure, UsageError, one_line
from quorumlake.pipelines.progress import Progress, progress

# --- settings and the lakehouse ----------------------------------------------------------------------------------


def config_of(args: argparse.Namespace) -> Config:
    """The command's settings: defaults, then `--config FILE`, then its flags and `--set KEY=VALUE`s."""
    return build_config(
        args.config,
        landing=getattr(args, "landing", None),
        warehouse=args.warehouse,
        catalog=args.catalog,
        schema_prefix=args.schema_prefix,
        ingest_mode=getattr(args, "ingest_mode", None),
        checkpoint_root=getattr(args, "checkpoint_root", None),
        **typed_settings(getattr(args, "set", [])),
    )


def open_lakehouse(config: Config, register: bool = True):
    """The lakehouse a command works on, in this process's Spark session (started here if there is none), with
    every table and view registered by name unless `register` is False (a run registers what it writes)."""
    spark = _spark(config)
    # Spark first, then the layers: a Spark Connect session must exist before modules that define Python UDFs at
    # import (quorumlake.bronze.raw, via quorumlake.pipelines.storage) are imported, or PySpark builds them for a
    # classic session.
    from quorumlake.pipelines.jobs.run import register_all
    from quorumlake.pipelines.storage import Lakehouse

    lakehouse = Lakehouse(spark, config)
    if register:
        register_all(lakehouse)
    return lakehouse


def _spark(config: Config):
    from pyspark.sql import SparkSession

    from quorumlake.pipelines.engine.session import get_spark, on_databricks, quiet, runs_remotely

    if runs_remotely(config):
        # Databricks hands us its session and a Connect server runs its JVM elsewhere: no JVM starts in this
        # process, so its output is not redirected (serverless gives a job no file descriptors to play with)
        if config.spark_remote and not on_databricks():
            _check_reachable(config.spark_remote)
        return get_spark(config)
    from quorumlake.pipelines.engine.local import start_with_output_to_log

    if SparkSession.getActiveSession() is None:
        progress("starting Spark (the first run on a machine downloads Delta's jars from Maven Central)")
    spark = start_with_output_to_log(config, lambda: get_spark(config))
    quiet(spark)
    return spark


def _check_reachable(url: str, timeout_s: float = 10.0) -> None:
    """A Spark Connect server that does not answer is a one-line error, not minutes of client retries and a stack
    trace."""
    import socket

    from quorumlake.pipelines.config import connect_address

    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(
            f"no Spark Connect server answers at {host}:{port} (spark_remote): {exc.strerror or exc}"
        ) from None


# --- the handlers ------------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    config = config_of(args)
    layers = args.layers
    if args.layer is not None:  # quorumlake-<layer>: that layer, if --layers names it
        layers = (args.layer,) if args.layer in args.layers else ()
        if not layers:
            progress(f"{args.layer}: not in --layers {','.join(args.layers)}: nothing to do")
            if args.outcome_since is None:
                return 0
    with warehouse_lock(config.warehouse, args.wait):
        return run(config, layers, args.stats, args.full_refresh, args.outcome_since, args.degraded_exit_code)


def run(
    config: Config,
    layers: tuple[str, ...] = LAYERS,
    stats_file: str | None = None,
    full_refresh: bool = False,
    outcome_since: datetime | None = None,
    degraded_exit_code: int = EXIT_DEGRADED,
) -> int:
    """Run the given layers (a full refresh of them first if asked) and print rows added per table. The exit code is
    0, or `degraded_exit_code` when this run (or any since `outcome_since`) could not ingest a landing file or
    quarantined a whole silver batch (quorumlake.pipelines.jobs.outcome)."""
    local_landing = "://" not in config.landing and not config.landing.startswith("dbfs:")
    if config.ingest_mode == "files" and "bronze" in layers and local_landing and not Path(config.landing).is_dir():
        raise UsageError(f"landing folder not found: {config.landing}")
    from pyspark.sql import SparkSession

    started = time.monotonic()
    # a caller that goes on using this session (a notebook, the tests) finds the tables by name; a fresh
    # process would only pay for a registration nobody uses
    in_process = SparkSession.getActiveSession() is not None
    lakehouse = open_lakehouse(config, register=False)
    from quorumlake.pipelines.jobs.run import full_refresh as refresh
    from quorumlake.pipelines.jobs.run import register_all, run_pipeline

    timings: dict[str, float] = {}
    if full_refresh:
        refresh(lakehouse, layers, progress)
    summaries = run_pipeline(lakehouse, layers=layers, progress=progress, timings=timings)
    if in_process:
        register_all(lakehouse)
    if stats_file:
        stats = {
            "seconds": round(time.monotonic() - started, 3),
            "layers": timings,
            "tables": {
                s.table: {"rows_added": s.rows_added, "rows_quarantined": s.rows_quarantined} for s in summaries
            },
        }
        Path(stats_file).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(run_summary(summaries))
    progress(f"run finished in {time.monotonic() - started:.1f}s (run_at {config.run_at.isoformat()})")
    from quorumlake.pipelines.jobs.outcome import run_outcome

    # this run alone quarantined nothing (failed files and whole batches are counted there too): nothing to look up
    if outcome_since is None and not any(s.rows_quarantined for s in summaries):
        return 0
    outcome = run_outcome(lakehouse, outcome_since or config.run_at)
    if outcome.degraded:
        since = "this run" if outcome_since is None else f"the runs since {outcome_since.isoformat()}"
        progress(f"{since}: {outcome.describe()}: exit {degraded_exit_code} (docs/operations.md, 'Exit codes')")
        return degraded_exit_code
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    return sql(config_of(args), args.query, args.format, args.limit)


def sql(config: Config, query: str, fmt: str, limit: int) -> int:
    from pyspark.errors import PySparkException

    lakehouse = open_lakehouse(config)
    try:
        df = lakehouse.reads.query(query)
        rows = df.limit(limit).collect()
    except PySparkException as exc:
        raise UsageError(f"query failed: {one_line(exc)}") from None
    columns = df.columns
    sys.stdout.write(format_rows(columns, [[r[c] for c in columns] for r in rows], fmt))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    try:
        summary = generate_landing(Path(args.out), _fleet_spec(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write to {args.out}: {exc}") from None
    print(f"wrote {summary.total_files} files ({summary.total_records} records) to {args.out}")
    for c in summary.clusters:
        print(
            f"  {c.cluster_id}: scenario {c.scenario}, DescribeQuorum v{c.api_version}, metrics {c.metrics_format}"
            f"{', gzip' if c.gzip else ''}"
        )
    return 0


def _fleet_spec(args: argparse.Namespace):
    from quorumlake.simulator import FleetSpec, load_plan

    plan = getattr(args, "plan", None)
    spec = FleetSpec(
        clusters=args.clusters,
        brokers=args.brokers,
        controllers=args.controllers,
        topics=args.topics,
        partitions=args.partitions,
        hours=args.hours,
        interval_s=args.interval_s,
        scenarios=tuple(args.scenario or ("healthy",)),
        seed=args.seed,
        plan=load_plan(plan) if plan else (),
    )
    end = getattr(args, "end", None)
    return spec if end is None else spec.ending_at(end)


def generate_landing(out: Path, spec):
    """Write the landing zone of the simulated fleet `spec` (a `quorumlake.simulator.FleetSpec`) to `out`."""
    from quorumlake.simulator import generate

    spec.validate()
    return generate(out, spec, progress_bar("generating landing files"))


def cmd_collect(args: argparse.Namespace) -> int:
    from quorumlake.collector.command import CollectUsageError, run_collect

    try:
        return run_collect(args, progress)
    except CollectUsageError as exc:
        raise UsageError(str(exc)) from None


def cmd_demo(args: argparse.Namespace) -> int:
    root = Path(args.root)
    fleet = demo_fleet(args.seed, args.end, now_ms())
    scenarios = fleet.scenarios
    end = datetime.fromtimestamp(fleet.start_ms / 1000 + fleet.steps * fleet.interval_s, tz=timezone.utc)
    progress(
        f"demo: simulating {len(scenarios)} clusters ({', '.join(scenarios)}) for the hour ending "
        f"{end:%Y-%m-%d %H:%M} UTC into {root / 'landing'}"
    )
    generate_landing(root / "landing", fleet)
    config = demo_config(root)
    run(config)
    print("\nFleet overview (gold.v_fleet_overview):")
    query = (
        "SELECT cluster_id, status, leader_id, max_follower_lag AS lag, "
        "CASE WHEN max_follower_lag_time_ms < 0 THEN 'n/a' ELSE CAST(max_follower_lag_time_ms AS STRING) END "
        "AS lag_ms, "
        "voters, voters_within_slo AS in_slo, at_min_isr, under_min_isr, offline, "
        "worst_divergence_records AS divergence, open_incidents, latest_incident_at "
        "FROM gold.v_fleet_overview ORDER BY cluster_id"
    )
    sql(config, query, "table", 1000)
    print("\nIncidents (gold.incidents):")
    incidents = (
        "SELECT cluster_id, incident_id, severity, `trigger`, trigger_node_id AS node, "
        "round(duration_ms / 60000, 1) AS minutes, summary FROM gold.incidents ORDER BY cluster_id, started_at"
    )
    sql(config, incidents, "table", 1000)
    report = write_report(open_lakehouse(config, register=False), root / "report.html")
    print(f"\nReport: {report.resolve()}")
    example = '"SELECT * FROM gold.quorum_health LIMIT 10"'
    print(f"Query it: .venv/bin/quorumlake sql {example} --warehouse {root / 'warehouse'}")
    return 0


def demo_fleet(seed: int, end_ms: int | None, now: datetime):
    """The demo fleet with this seed over the hour ending at `end_ms`, or else at `now` floored to the snapshot
    interval (so a rerun within the same minute writes the same files)."""
    from quorumlake.simulator.demo import DEMO_FLEET

    if end_ms is None:
        interval_ms = DEMO_FLEET.interval_s * 1000
        end_ms = int(now.timestamp() * 1000) // interval_ms * interval_ms
    return dataclasses.replace(DEMO_FLEET, seed=seed).ending_at(end_ms)


def demo_config(root: Path) -> Config:
    from quorumlake.pipelines.engine.local import SMALL_RUN_JAVA_OPTIONS

    # the demo fleet is small and known (13 MB): its JVM is tuned for a small run
    return build_config(
        None, landing=str(root / "landing"), warehouse=str(root / "warehouse"), java_options=SMALL_RUN_JAVA_OPTIONS
    )


def cmd_report(args: argparse.Namespace) -> int:
    path = write_report(open_lakehouse(config_of(args)), Path(args.out))
    print(f"wrote {path}")
    return 0


def write_report(lakehouse, out: Path) -> Path:
    from quorumlake.report.page import build_report, queries

    data = {key: lakehouse.reads.rows(sql) for key, sql in queries(lakehouse.name_of).items()}
    html = build_report(data, lakehouse.config.quorum_lag_time_slo_ms, now_ms())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    from quorumlake.pipelines.engine.session import runs_remotely
    from quorumlake.pipelines.serving.sql_guard import AuthConfigError, is_loopback, thrift_auth_settings

    config = config_of(args)
    if runs_remotely(config):
        raise UsageError(
            "serve runs Spark's Thrift server inside this process's JVM: it needs a local Spark, not "
            "spark_remote or Databricks (use a SQL warehouse there)"
        )
    try:
        auth = thrift_auth_settings(args.auth_config) if args.auth_config else None
    except AuthConfigError as exc:
        raise UsageError(str(exc)) from None
    if auth is None and not is_loopback(args.host):
        raise UsageError(
            f"refusing to serve on {args.host} without authentication: anyone who can reach it could query "
            "the lakehouse; bind 127.0.0.1 or pass --auth-config FILE (see docs/serving.md)"
        )
    from quorumlake.pipelines.serving.server import serve

    serve(open_lakehouse(config), args.host, args.port, progress, auth=auth, read_only=not args.allow_writes)
    return 0


def cmd_maintenance(args: argparse.Namespace) -> int:
    config = config_of(args)
    # it commits to every table: never beside a run (a local disk's Delta log is written check-then-rename,
    # so two processes committing the same version at once could lose one commit)
    with warehouse_lock(config.warehouse, args.wait):
        for name, what in maintenance(open_lakehouse(config), args.vacuum_hours, progress, time.time()):
            print(f"{name}: {what}")
    return 0


TABLES_MAINTAINED_AT_ONCE = 4


def maintenance(lakehouse, vacuum_hours: int, progress: Progress, now_s: float) -> list[tuple[str, str]]:
    """OPTIMIZE then VACUUM every registered table (retention `vacuum_hours`, Delta's default is 168), a few tables at
    a time: each table's commands are mostly fixed costs (planning, listing, a commit), and tables are independent.

    A table whose changes a later layer has not read yet is compacted but not vacuumed: its change feed still needs
    the files that compaction replaced. Nor is a local table where VACUUM could delete nothing at `now_s` (epoch
    seconds): no file or folder outside its log older than the retention, no empty folder (VACUUM deletes only those),
    for which it would take six Spark jobs and two commits (VACUUM START and END)."""
    from concurrent.futures import ThreadPoolExecutor

    from quorumlake.contract.tables import ALL_TABLES

    readers = {"bronze": "silver", "silver": "gold"}
    lakehouse.progress("silver")  # the progress ledger is read once, here, not by the threads
    cutoff_s = now_s - vacuum_hours * 3600

    def maintain(spec) -> tuple[str, str]:
        name = lakehouse.catalog.table_name(spec)
        progress(f"maintenance: OPTIMIZE {name}")
        lakehouse.writes.optimize(spec)
        reader = readers.get(spec.schema)
        if reader and dict(spec.properties).get("delta.enableChangeDataFeed") == "true":
            read_upto = lakehouse.progress(reader).get(spec.name, -1)
            if read_upto < lakehouse.version(spec) - 1:  # the OPTIMIZE just made is not a change anyone needs
                pending = f"{reader} has not read versions after {read_upto} yet"
                progress(f"maintenance: VACUUM {name} skipped: {pending}")
                return name, f"optimized; not vacuumed ({pending})"
        if lakehouse.log.vacuum_could_delete(spec, cutoff_s) is False:
            young = f"no file older than {vacuum_hours} hours"
            progress(f"maintenance: VACUUM {name} skipped: {young}")
            return name, f"optimized; nothing to vacuum ({young})"
        progress(f"maintenance: VACUUM {name} RETAIN {vacuum_hours} HOURS")
        lakehouse.writes.vacuum(spec, vacuum_hours)
        return name, "optimized, vacuumed"

    with ThreadPoolExecutor(max_workers=TABLES_MAINTAINED_AT_ONCE) as pool:
        return list(pool.map(maintain, ALL_TABLES))


def cmd_bench(args: argparse.Namespace) -> int:
    """`quorumlake bench`: a thin entry to `benchmarks/bench.py` of the source checkout (not in the wheel)."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "benchmarks" / "bench.py").is_file():
        raise UsageError("quorumlake bench runs from a source checkout (benchmarks/ is not installed with the wheel)")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    from benchmarks.bench import run_bench, table

    try:
        results = run_bench(Path(args.root), args.size, args.history, progress)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        raise RuntimeFailure(str(exc)) from None
    print(table(results), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "sql": cmd_sql,
    "generate": cmd_generate,
    "demo": cmd_demo,
    "report": cmd_report,
    "serve": cmd_serve,
    "bench": cmd_bench,
    "collect": cmd_collect,
    "maintenance": cmd_maintenance,
}
