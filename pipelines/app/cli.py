"""The `quorumlake` command line: its arguments, and the dispatch of each command to its handler in
`quorumlake.pipelines.app.commands`.

Usage errors, a missing landing folder and an unreadable config print one line on stderr and exit 2; nothing a
user can get wrong ends in a stack trace. This module imports only the standard library and the project's
stdlib-only modules, so `--help` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from quorumlake.contract.tables import LAYERS
from quorumlake.pipelines.app.lock import Busy
from quorumlake.pipelines.config import ConfigError
from quorumlake.pipelines.errors import EXIT_DEGRADED, RuntimeFailure, UsageError, one_line

EXIT_USAGE = 2
EXIT_BUSY = 3


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
        nargs="?",
        const=True,
        default=False,
        type=_boolean,
        metavar="BOOL",
        help="rebuild the given --layers from scratch: silver and gold from bronze, bronze (only when "
        "listed) from the landing zone; see docs/operations.md, 'Recovery' (a value, true or false, for a scheduler "
        "that always passes the flag)",
    )
    run.add_argument(
        "--outcome-since",
        type=_timestamp,
        metavar="TIME",
        help="exit 4 if any run since this ISO 8601 time (UTC unless it says otherwise) could not ingest a landing "
        "file or quarantined a whole silver batch (default: since this run's start); see docs/operations.md",
    )
    run.add_argument(
        "--degraded-exit-code",
        type=_exit_code,
        default=EXIT_DEGRADED,
        metavar="N",
        help=f"the exit code of such a run (default: {EXIT_DEGRADED}; 0 leaves the report to a later task)",
    )
    # set by the quorumlake-<layer> entry points: run this layer, if --layers names it
    run.add_argument("--layer", choices=LAYERS, help=argparse.SUPPRESS)
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
    gen.add_argument(
        "--end",
        type=_end_time,
        metavar="TIME",
        help="simulate the time that ends here: epoch milliseconds or ISO-8601 (UTC unless it names an offset), e.g. "
        "2026-01-31T12:00:00Z (default: a fixed time in 2024, so the same seed gives the same files)",
    )
    gen.add_argument(
        "--plan",
        metavar="FILE",
        help="outages at chosen times: a JSON list of {cluster, kind, start_ms, end_ms, nodes?} (kinds voter-cut-off, "
        "brokers-down, applier-frozen; see quorumlake.simulator.plan)",
    )

    demo = commands.add_parser(
        "demo",
        help="simulate a small fleet, run the pipeline, print the fleet overview and write the report",
        description="Generate a small fleet with several fault scenarios into --root/landing, run every layer into "
        "--root/warehouse, print the fleet overview and write --root/report.html.",
    )
    demo.add_argument(
        "--root", metavar="PATH", default="./lakehouse", help="demo lakehouse folder (default: ./lakehouse)"
    )
    demo.add_argument("--seed", type=int, default=42, help="random seed (default: 42); same seed and end, same files")
    demo.add_argument(
        "--end",
        type=_end_time,
        metavar="TIME",
        help="the simulated hour ends here: epoch milliseconds or ISO-8601 (default: now, to the minute)",
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
        "optional ssl_keystore, ssl_keystore_password (see docs/serving.md)",
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
        "start-up, the same 1% batch after --history times it versus into an empty warehouse, and the demo "
        "fleet's run versus plain Delta creating, appending to and reading back each of the contract's tables.",
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

    from quorumlake.collector.command import add_collect_parser

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
    from quorumlake.simulator import SCENARIOS

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


def _end_time(text: str) -> int:
    """Epoch milliseconds from epoch milliseconds or an ISO-8601 time (UTC when it names no offset)."""
    from datetime import datetime, timezone

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not epoch milliseconds or an ISO-8601 time: {text!r}") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return int(at.timestamp() * 1000)


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
            "--checkpoint-root", metavar="PATH", help="scratch and checkpoint files (default: <warehouse>/_checkpoints)"
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
    p.add_argument("--config", metavar="FILE", help="TOML file of settings (see docs/configuration.md)")


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _timestamp(text: str):
    from datetime import datetime, timezone

    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _exit_code(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 125:
        raise argparse.ArgumentTypeError("must be between 0 and 125")
    return value


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
        from quorumlake.pipelines.app.commands import HANDLERS

        return HANDLERS[args.command](args)
    except (UsageError, ConfigError) as exc:
        print(
            f"quorumlake: error: {one_line(exc)}" if not str(exc).startswith("quorumlake") else one_line(exc),
            file=sys.stderr,
        )
        return EXIT_USAGE
    except RuntimeFailure as exc:
        print(f"quorumlake: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except Busy as exc:
        print(f"quorumlake: busy: {one_line(exc)}", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt:
        print("quorumlake: interrupted", file=sys.stderr)
        return 130


def layer_main(layer: str):
    """An entry point that runs one layer (`quorumlake-bronze ...`), as the Databricks job tasks call it: the layer,
    if `--layers` (default: every layer) names it, else nothing; the job passes its `layers` parameter to every task.
    Called as a console script (no `argv`), a non-zero code is raised as SystemExit: Databricks may call a wheel
    task's entry point as a function and ignore what it returns."""

    def entry(argv: Sequence[str] | None = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        if any(a in ("-h", "--help") for a in args):
            build_parser().parse_args(["run", "--help"])
        code = main(["run", "--layer", layer, *args])
        if code and argv is None:
            raise SystemExit(code)
        return code

    entry.__name__ = f"{layer}_main"
    return entry


bronze_main = layer_main("bronze")
silver_main = layer_main("silver")
gold_main = layer_main("gold")

__all__ = ["RuntimeFailure", "UsageError", "build_parser", "main"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
