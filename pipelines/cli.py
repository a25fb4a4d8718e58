"""The `quorumlake` command line.

Usage errors, a missing landing folder and an unreadable config print one line on stderr and exit 2; nothing a
user can get wrong ends in a stack trace.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pipelines.config import Config, ConfigError, build_config
from pipelines.lock import Busy, warehouse_lock

EXIT_USAGE = 2
EXIT_BUSY = 3


class UsageError(Exception):
    """A problem with what the user asked for: printed as one line, exit 2."""


class RuntimeFailure(Exception):
    """Something outside the user's input failed (Spark would not start, ...): one line, exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="quorumlake",
        description="KRaft quorum and partition-replication health for a fleet of Kafka clusters, on Delta Lake.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    run = commands.add_parser(
        "run",
        help="ingest new landing files and update every layer (incremental, idempotent)",
        description="Ingest the landing files not ingested yet and update every layer; print a summary per table.",
    )
    run.add_argument("--stats", metavar="FILE", help="also write seconds per layer and rows per table as JSON")
    run.add_argument(
        "--full-refresh",
        action="store_true",
        help="rebuild the given --layers from scratch: silver and gold from bronze, bronze (only when "
        "listed) from the landing zone; see README 'Recovery'",
    )
    _add_wait(run)
    _add_common(run, landing=True)

    sql = commands.add_parser(
        "sql",
        help="run a Spark SQL query against the lakehouse",
        description="Run one Spark SQL query against the lakehouse tables (bronze.*, silver.*, gold.*).",
    )
    sql.add_argument("query", help='the SQL text, e.g. "SELECT * FROM bronze.quorum_raw LIMIT 5"')
    sql.add_argument(
        "--format", choices=("table", "csv", "json"), default="table", help="output format (default: table)"
    )
    sql.add_argument("--limit", type=_positive_int, default=1000, help="print at most this many rows (default: 1000)")
    _add_common(sql, landing=False)
    gen = commands.add_parser(
        "generate",
        help="write a simulated fleet's landing zone (every contract format, fault scenarios)",
        description="Write a deterministic landing zone for a simulated fleet of KRaft clusters.",
    )
    gen.add_argument("--out", metavar="PATH", required=True, help="landing zone root to write")
    _add_fleet(gen)

    demo = commands.add_parser(
        "demo",
        help="simulate a small fleet, run the pipeline, print the fleet overview and write the report",
        description="Generate a small fleet with several fault scenarios into --root/landing, run every layer into "
        "--root/warehouse, print the fleet overview and write --root/report.html.",
    )
    demo.add_argument(
        "--root", metavar="PATH", default="./lakehouse", help="demo lakehouse folder (default: ./lakehouse)"
    )

    report = commands.add_parser(
        "report",
        help="write the HTML health report (self-contained, works offline)",
        description="Write a self-contained HTML page of charts over the gold tables.",
    )
    report.add_argument(
        "--out",
        metavar="FILE",
        default="./lakehouse/report.html",
        help="where to write it (default: ./lakehouse/report.html)",
    )
    _add_common(report, landing=False)

    serve = commands.add_parser(
        "serve",
        help="serve the lakehouse over JDBC/ODBC (Spark Thrift server) for BI tools",
        description="Start Spark's Thrift JDBC/ODBC server over the warehouse: on loopback unless authentication is "
        "configured, read-only (queries, SHOW, DESCRIBE, EXPLAIN, USE) unless --allow-writes.",
    )
    serve.add_argument("--port", type=_port, default=10000, help="TCP port (default: 10000)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: 127.0.0.1); a non-loopback address needs --auth-config",
    )
    serve.add_argument(
        "--auth-config",
        metavar="FILE",
        help="TOML file of the Thrift server's authentication: mode = LDAP (ldap_url, ldap_base_dn, "
        "ldap_domain), KERBEROS (kerberos_principal, kerberos_keytab) or CUSTOM (custom_class); "
        "optional ssl_keystore, ssl_keystore_password (see README)",
    )
    serve.add_argument(
        "--allow-writes", action="store_true", help="let clients run any SQL, DDL and DML included (default: read-only)"
    )
    _add_common(serve, landing=False)

    bench = commands.add_parser(
        "bench",
        help="benchmark: backfill, no-op and incremental runs as ratios against Spark's own floor",
        description="Generate a fleet of the given size into --root and time, each as a whole process: the floor "
        "(plain Spark + Delta reading the landing zone once), a backfill, a run with nothing new, Spark's "
        "start-up, and the same 1% batch after --history times it versus into an empty warehouse.",
    )
    bench.add_argument(
        "--size",
        choices=("small", "medium", "large"),
        default="small",
        help="about 0.1M / 1M / 10M replica rows (default: small)",
    )
    bench.add_argument(
        "--history",
        type=_positive_int,
        default=20,
        help="history before the incremental batch, in batches (default: 20)",
    )
    bench.add_argument(
        "--root",
        metavar="PATH",
        default="./lakehouse-bench",
        help="scratch folder, created by the bench and replaced by the next one (default: "
        "./lakehouse-bench); a folder the bench did not create is refused",
    )
    bench.add_argument("--json", metavar="FILE", help="also write the results to this file")

    from pipelines.collect.command import add_collect_parser

    add_collect_parser(commands)

    maint = commands.add_parser(
        "maintenance",
        help="OPTIMIZE and VACUUM every table",
        description="Compact (OPTIMIZE) and clean up (VACUUM) every table of the lakehouse.",
    )
    maint.add_argument(
        "--vacuum-hours", type=_positive_int, default=168, help="VACUUM retention in hours (default: 168)"
    )
    _add_wait(maint)
    _add_common(maint, landing=False)
    return parser


def _add_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another run (or maintenance) on the same warehouse to finish (default: 0, exit 3)",
    )


def _add_fleet(p: argparse.ArgumentParser, hours: float = 1.0, clusters: int = 2) -> None:
    from pipelines.simulator import SCENARIOS

    p.add_argument("--clusters", type=_positive_int, default=clusters, help=f"clusters (default: {clusters})")
    p.add_argument("--brokers", type=_positive_int, default=3, help="brokers per cluster (default: 3)")
    p.add_argument("--controllers", type=_positive_int, default=3, help="controllers per cluster (default: 3)")
    p.add_argument("--topics", type=_positive_int, default=3, help="topics per cluster (default: 3)")
    p.add_argument("--partitions", type=_positive_int, default=3, help="partitions per topic (default: 3)")
    p.add_argument("--hours", type=_positive_float, default=hours, help=f"simulated hours (default: {hours:g})")
    p.add_argument("--interval-s", type=_positive_int, default=30, help="seconds between captures (default: 30)")
    p.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help="fault scenario, repeatable, assigned to clusters round-robin: " + ", ".join(SCENARIOS),
    )
    p.add_argument("--seed", type=int, default=42, help="random seed (default: 42); same seed, same files")


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError("must be at most 65535")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


LAYERS = ("bronze", "silver", "gold")


def _layers(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in LAYERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(LAYERS)}")
    return names


def _add_common(p: argparse.ArgumentParser, landing: bool) -> None:
    if landing:
        p.add_argument("--landing", metavar="PATH", help="landing zone root (default: ./lakehouse/landing)")
        p.add_argument(
            "--layers",
            type=_layers,
            default=LAYERS,
            metavar="LIST",
            help="comma-separated layers to run, in order (default: bronze,silver,gold)",
        )
        p.add_argument(
            "--ingest-mode",
            choices=("files", "autoloader"),
            help="bronze reader: Spark's file source (default) or Databricks Auto Loader",
        )
        p.add_argument(
            "--checkpoint-root", metavar="PATH", help="streaming checkpoints (default: <warehouse>/_checkpoints)"
        )
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            type=_setting,
            help="override one setting of the config (e.g. --set replica_caught_up_slo_ms=1500); repeatable",
        )
    p.add_argument(
        "--catalog", metavar="NAME", help="Unity Catalog catalog (Databricks); tables become <catalog>.<schema>.<table>"
    )
    p.add_argument(
        "--schema-prefix", metavar="TEXT", help="prefix for the bronze/silver/gold schema names (e.g. dev_alice_)"
    )
    p.add_argument(
        "--warehouse", metavar="PATH", help="warehouse root for the Delta tables (default: ./lakehouse/warehouse)"
    )
    p.add_argument("--config", metavar="FILE", help="TOML file of settings (see README, 'Configuration')")


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return _dispatch(args)
    except (UsageError, ConfigError) as exc:
        print(
            f"quorumlake: error: {_one_line(exc)}" if not str(exc).startswith("quorumlake") else _one_line(exc),
            file=sys.stderr,
        )
        return EXIT_USAGE
    except RuntimeFailure as exc:
        print(f"quorumlake: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Busy as exc:
        print(f"quorumlake: busy: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt:
        print("quorumlake: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        return _cmd_demo(Path(args.root))
    if args.command == "generate":
        return _cmd_generate(args)
    if args.command == "bench":
        return _cmd_bench(args)
    if args.command == "collect":
        return _cmd_collect(args)
    config = build_config(
        args.config,
        landing=getattr(args, "landing", None),
        warehouse=args.warehouse,
        catalog=args.catalog,
        schema_prefix=args.schema_prefix,
        ingest_mode=getattr(args, "ingest_mode", None),
        checkpoint_root=getattr(args, "checkpoint_root", None),
        **_typed_settings(getattr(args, "set", [])),
    )
    if args.command == "run":
        with warehouse_lock(config.warehouse, args.wait):
            return _cmd_run(config, args.layers, args.stats, args.full_refresh)
    if args.command == "sql":
        return _cmd_sql(config, args.query, args.format, args.limit)
    if args.command == "report":
        return _cmd_report(config, Path(args.out))
    if args.command == "serve":
        return _cmd_serve(config, args.host, args.port, args.auth_config, not args.allow_writes)
    if args.command == "maintenance":
        # it commits to every table: never beside a run (a local disk's Delta log is written check-then-rename,
        # so two processes committing the same version at once could lose one commit)
        with warehouse_lock(config.warehouse, args.wait):
            return _cmd_maintenance(config, args.vacuum_hours)
    raise UsageError(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first


def _cmd_run(
    config: Config, layers: tuple[str, ...] = LAYERS, stats_file: str | None = None, full_refresh: bool = False
) -> int:
    if config.ingest_mode == "files" and "bronze" in layers and not Path(config.landing).is_dir():
        raise UsageError(f"landing folder not found: {config.landing}")
    from pyspark.sql import SparkSession

    started = time.monotonic()
    in_process = SparkSession.getActiveSession() is not None
    # Spark first, then the layers: a Spark Connect session must exist before modules that define Python UDFs at
    # import (bronze.raw, via pipelines.io) are imported, or PySpark builds them for a classic session.
    spark = _spark(config)
    from pipelines.io import Lakehouse
    from pipelines.run import run_pipeline

    lakehouse = Lakehouse(spark, config)
    timings: dict[str, float] = {}
    if full_refresh:
        from pipelines.run import full_refresh as refresh

        refresh(lakehouse, layers, _progress)
    summaries = run_pipeline(lakehouse, layers=layers, progress=_progress, timings=timings)
    if in_process:
        # a caller that goes on using this session (a notebook, the tests) finds the tables by name; a fresh
        # process would only pay for a registration nobody uses
        from pipelines.run import register_all

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
    width = max(len(s.table) for s in summaries)
    print(f"{'table':<{width}}  {'rows added':>10}  {'quarantined':>11}")
    for s in summaries:
        print(f"{s.table:<{width}}  {s.rows_added:>10}  {s.rows_quarantined:>11}")
    _progress(f"run finished in {time.monotonic() - started:.1f}s (run_at {config.run_at.isoformat()})")
    return 0


def _typed_settings(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    import dataclasses

    fields = {f.name: f.type for f in dataclasses.fields(Config)}
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in fields or key == "run_at":
            raise UsageError(f"--set: unknown setting {key!r}")
        if fields[key] in ("int", int):
            try:
                out[key] = int(value)
            except ValueError:
                raise UsageError(f"--set: {key} must be an integer, not {value!r}") from None
        else:
            out[key] = value or None
    return out


def _fleet_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "clusters": args.clusters,
        "brokers": args.brokers,
        "controllers": args.controllers,
        "topics": args.topics,
        "partitions": args.partitions,
        "hours": args.hours,
        "interval_s": args.interval_s,
        "scenarios": tuple(args.scenario or ("healthy",)),
        "seed": args.seed,
    }


def _cmd_generate(args: argparse.Namespace) -> int:
    from pipelines.commands import generate_landing

    try:
        summary = generate_landing(Path(args.out), **_fleet_args(args))
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


def _cmd_collect(args: argparse.Namespace) -> int:
    from pipelines.collect.command import CollectUsageError, run_collect

    try:
        return run_collect(args, _progress)
    except CollectUsageError as exc:
        raise UsageError(str(exc)) from None


def _cmd_demo(root: Path) -> int:
    from pipelines.commands import DEMO_SCENARIOS, demo_config, generate_landing, write_report

    _progress(f"demo: simulating {len(DEMO_SCENARIOS)} clusters ({', '.join(DEMO_SCENARIOS)}) into {root / 'landing'}")
    generate_landing(
        root / "landing",
        clusters=len(DEMO_SCENARIOS),
        brokers=3,
        controllers=3,
        topics=3,
        partitions=3,
        hours=1.0,
        interval_s=60,
        scenarios=DEMO_SCENARIOS,
        seed=42,
    )
    config = demo_config(root)
    _cmd_run(config)
    print("\nFleet overview (gold.v_fleet_overview):")
    query = (
        "SELECT cluster_id, status, leader_id, max_follower_lag AS lag, max_follower_lag_time_ms AS lag_ms, "
        "voters, voters_within_slo AS in_slo, at_min_isr, under_min_isr, offline, "
        "worst_divergence_records AS divergence FROM gold.v_fleet_overview ORDER BY cluster_id"
    )
    _cmd_sql(config, query, "table", 1000)
    from pipelines.io import Lakehouse

    report = write_report(Lakehouse(_spark(config), config), root / "report.html")
    print(f"\nReport: {report.resolve()}")
    print(
        f'Query it: .venv/bin/quorumlake sql "SELECT * FROM gold.quorum_health LIMIT 10" --warehouse {root / "warehouse"}'
    )
    return 0


def _cmd_report(config: Config, out: Path) -> int:
    from pipelines.commands import write_report
    from pipelines.io import Lakehouse
    from pipelines.run import register_all

    lakehouse = Lakehouse(_spark(config), config)
    register_all(lakehouse)
    path = write_report(lakehouse, out)
    print(f"wrote {path}")
    return 0


def _cmd_serve(config: Config, host: str, port: int, auth_config: str | None = None, read_only: bool = True) -> int:
    from pipelines.session import runs_remotely
    from pipelines.sql_guard import AuthConfigError, is_loopback, thrift_auth_settings

    if runs_remotely(config):
        raise UsageError(
            "serve runs Spark's Thrift server inside this process's JVM: it needs a local Spark, not "
            "spark_remote or Databricks (use a SQL warehouse there)"
        )

    try:
        auth = thrift_auth_settings(auth_config) if auth_config else None
    except AuthConfigError as exc:
        raise UsageError(str(exc)) from None
    if auth is None and not is_loopback(host):
        raise UsageError(
            f"refusing to serve on {host} without authentication: anyone who can reach it could query "
            "the lakehouse; bind 127.0.0.1 or pass --auth-config FILE (see README, serve)"
        )
    from pipelines.commands import serve
    from pipelines.io import Lakehouse
    from pipelines.run import register_all

    lakehouse = Lakehouse(_spark(config), config)
    register_all(lakehouse)
    serve(lakehouse, host, port, _progress, auth=auth, read_only=read_only)
    return 0


def _cmd_maintenance(config: Config, vacuum_hours: int) -> int:
    from pipelines.commands import maintenance
    from pipelines.io import Lakehouse
    from pipelines.run import register_all

    lakehouse = Lakehouse(_spark(config), config)
    register_all(lakehouse)
    for name, what in maintenance(lakehouse, vacuum_hours, _progress):
        print(f"{name}: {what}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from pipelines.bench import run_bench, table

    try:
        results = run_bench(Path(args.root), args.size, args.history, _progress)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        raise RuntimeFailure(str(exc)) from None
    print(table(results), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def _cmd_sql(config: Config, query: str, fmt: str, limit: int) -> int:
    from pyspark.errors import PySparkException

    from pipelines.io import Lakehouse
    from pipelines.run import register_all

    lakehouse = Lakehouse(_spark(config), config)
    register_all(lakehouse)
    try:
        df = lakehouse.spark.sql(query)
        rows = df.limit(limit).collect()
    except PySparkException as exc:
        raise UsageError(f"query failed: {_one_line(exc)}") from None
    columns = df.columns
    sys.stdout.write(format_rows(columns, [[r[c] for c in columns] for r in rows], fmt))
    return 0


def format_rows(columns: list[str], rows: list[list[Any]], fmt: str) -> str:
    """Render query results as an aligned text table, CSV, or JSON Lines."""
    if fmt == "json":
        return "".join(json.dumps(dict(zip(columns, r)), default=_json_default) + "\n" for r in rows)
    cells = [[_cell(v) for v in r] for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(cells)
        return out.getvalue()
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"
    head = "|" + "|".join(f" {c:<{w}} " for c, w in zip(columns, widths)) + "|\n"
    body = "".join("|" + "|".join(f" {v:<{w}} " for v, w in zip(r, widths)) + "|\n" for r in cells)
    return line + head + line + body + line + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=_json_default)
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return str(value).replace("\n", "\\n").replace("\t", "\\t")


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def _spark(config: Config):
    from pyspark.sql import SparkSession

    from pipelines.session import get_spark, on_databricks, quiet, runs_remotely

    if runs_remotely(config):
        # Databricks hands us its session and a Connect server runs its JVM elsewhere: no JVM starts in this
        # process, so its output is not redirected (serverless gives a job no file descriptors to play with)
        if config.spark_remote and not on_databricks():
            _check_reachable(config.spark_remote)
        return get_spark(config)
    if SparkSession.getActiveSession() is None:
        _progress("starting Spark (the first run on a machine downloads Delta's jars from Maven Central)")
    spark = _with_jvm_stderr_to_log(config, lambda: get_spark(config))
    quiet(spark)
    return spark


def _check_reachable(url: str, timeout_s: float = 10.0) -> None:
    """A Spark Connect server that does not answer is a one-line error, not minutes of client retries and a stack
    trace."""
    import socket

    from pipelines.config import connect_address

    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(
            f"no Spark Connect server answers at {host}:{port} (spark_remote): {exc.strerror or exc}"
        ) from None


def _with_jvm_stderr_to_log(config: Config, start):
    """Start the JVM with its stderr (Ivy and log4j chatter) sent to <warehouse>/_logs/spark.log."""
    if os.environ.get("QUORUMLAKE_JVM_STDERR") == "inherit":
        return start()
    log_dir = Path(config.warehouse) / "_logs"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_dir / "spark.log", "ab")  # noqa: SIM115 - the JVM keeps the descriptor for its lifetime
    except OSError:
        return start()
    # Ivy prints to stdout and log4j to stderr; both belong in the log, not in the user's terminal or pipe.
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    for fd in saved:
        os.dup2(log.fileno(), fd)
    try:
        return start()
    except Exception as exc:
        raise RuntimeFailure(f"could not start Spark: {_one_line(exc)} (details in {log_dir / 'spark.log'})") from None
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        log.close()


def layer_main(layer: str):
    """An entry point that runs one layer (`quorumlake-bronze ...`), as the Databricks job tasks call it."""

    def entry(argv: Sequence[str] | None = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        if any(a in ("-h", "--help") for a in args):
            build_parser().parse_args(["run", "--help"])
        return main(["run", "--layers", layer, *args])

    entry.__name__ = f"{layer}_main"
    return entry


bronze_main = layer_main("bronze")
silver_main = layer_main("silver")
gold_main = layer_main("gold")


def _progress(message: str) -> None:
    print(f"[quorumlake] {message}", file=sys.stderr, flush=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
