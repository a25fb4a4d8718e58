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

EXIT_USAGE = 2


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
        "run", help="ingest new landing files and update every layer (incremental, idempotent)",
        description="Ingest the landing files not ingested yet and update every layer; print a summary per table.",
    )
    _add_common(run, landing=True)

    sql = commands.add_parser(
        "sql", help="run a Spark SQL query against the lakehouse",
        description="Run one Spark SQL query against the lakehouse tables (bronze.*, silver.*, gold.*).",
    )
    sql.add_argument("query", help="the SQL text, e.g. \"SELECT * FROM bronze.quorum_raw LIMIT 5\"")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (default: table)")
    sql.add_argument("--limit", type=_positive_int, default=1000, help="print at most this many rows (default: 1000)")
    _add_common(sql, landing=False)
    demo = commands.add_parser(
        "demo", help="build a lakehouse from demo data and show what quorumlake tells",
        description="Copy demo landing data into ./lakehouse (or --root), run the pipeline and print an overview.",
    )
    demo.add_argument("--root", metavar="PATH", default="./lakehouse", help="where the demo lakehouse goes (default: ./lakehouse)")
    return parser


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
        p.add_argument("--layers", type=_layers, default=LAYERS, metavar="LIST",
                       help="comma-separated layers to run, in order (default: bronze,silver,gold)")
        p.add_argument("--ingest-mode", choices=("files", "autoloader"),
                       help="bronze reader: Spark's file source (default) or Databricks Auto Loader")
        p.add_argument("--checkpoint-root", metavar="PATH", help="streaming checkpoints (default: <warehouse>/_checkpoints)")
    p.add_argument("--catalog", metavar="NAME", help="Unity Catalog catalog (Databricks); tables become <catalog>.<schema>.<table>")
    p.add_argument("--schema-prefix", metavar="TEXT", help="prefix for the bronze/silver/gold schema names (e.g. dev_alice_)")
    p.add_argument("--warehouse", metavar="PATH", help="warehouse root for the Delta tables (default: ./lakehouse/warehouse)")
    p.add_argument("--config", metavar="FILE", help="TOML file of settings (see README, 'Configuration')")


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
        print(f"quorumlake: error: {_one_line(exc)}" if not str(exc).startswith("quorumlake") else _one_line(exc),
              file=sys.stderr)
        return EXIT_USAGE
    except RuntimeFailure as exc:
        print(f"quorumlake: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("quorumlake: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        return _cmd_demo(Path(args.root))
    config = build_config(
        args.config,
        landing=getattr(args, "landing", None),
        warehouse=args.warehouse,
        catalog=args.catalog,
        schema_prefix=args.schema_prefix,
        ingest_mode=getattr(args, "ingest_mode", None),
        checkpoint_root=getattr(args, "checkpoint_root", None),
    )
    if args.command == "run":
        return _cmd_run(config, args.layers)
    if args.command == "sql":
        return _cmd_sql(config, args.query, args.format, args.limit)
    raise UsageError(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first


def _cmd_run(config: Config, layers: tuple[str, ...] = LAYERS) -> int:
    if config.ingest_mode == "files" and "bronze" in layers and not Path(config.landing).is_dir():
        raise UsageError(f"landing folder not found: {config.landing}")
    from pipelines.io import Lakehouse
    from pipelines.run import run_pipeline

    started = time.monotonic()
    lakehouse = Lakehouse(_spark(config), config)
    summaries = run_pipeline(lakehouse, layers=layers, progress=_progress)
    width = max(len(s.table) for s in summaries)
    print(f"{'table':<{width}}  {'rows added':>10}  {'quarantined':>11}")
    for s in summaries:
        print(f"{s.table:<{width}}  {s.rows_added:>10}  {s.rows_quarantined:>11}")
    _progress(f"run finished in {time.monotonic() - started:.1f}s (run_at {config.run_at.isoformat()})")
    return 0


def _cmd_demo(root: Path) -> int:
    import shutil

    sample = Path(__file__).resolve().parents[1] / "tests" / "data" / "landing"
    if not sample.is_dir():
        raise UsageError(f"demo data not found at {sample} (run the demo from a clone of the repository)")
    landing = root / "landing"
    shutil.copytree(sample, landing, dirs_exist_ok=True)
    config = build_config(None, landing=str(landing), warehouse=str(root / "warehouse"))
    _cmd_run(config)
    query = (
        "SELECT format, count(*) AS records, count(parse_error) AS unreadable, min(collected_at) AS first_seen, "
        "max(collected_at) AS last_seen FROM (SELECT * FROM bronze.quorum_raw UNION ALL SELECT * FROM "
        "bronze.metrics_raw UNION ALL SELECT * FROM bronze.partitions_raw) GROUP BY format ORDER BY format"
    )
    print()
    print("What landed, by format:")
    _cmd_sql(config, query, "table", 1000)
    print(f"\nTry: .venv/bin/quorumlake sql \"SELECT * FROM bronze.quorum_raw LIMIT 5\" --warehouse {root / 'warehouse'}")
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
    from pipelines.session import get_spark, quiet

    _progress("starting Spark (the first run on a machine downloads Delta's jars from Maven Central)")
    spark = _with_jvm_stderr_to_log(config, lambda: get_spark(config))
    quiet(spark)
    return spark


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
