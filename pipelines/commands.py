"""The longer-running commands of the CLI: generate, demo, report, serve, bench and maintenance."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from pipelines.config import Config, now_ms

Progress = Callable[[str], None]

DEMO_SCENARIOS = ("healthy", "lagging-voter", "broker-failure", "metadata-divergence")


def progress_bar(label: str) -> Callable[[int, int], None]:
    """A progress bar on stderr (one line, redrawn), quiet when stderr is not a terminal except at the end."""
    state = {"last": -1.0}

    def update(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if sys.stderr.isatty() and (fraction - state["last"] >= 0.01 or done == total):
            bar = "#" * int(30 * fraction)
            sys.stderr.write(f"\r[quorumlake] {label} [{bar:<30}] {100 * fraction:5.1f}%")
            state["last"] = fraction
        if done == total:
            sys.stderr.write(("\n" if sys.stderr.isatty() else "") + f"[quorumlake] {label}: done ({total} steps)\n")
        sys.stderr.flush()

    return update


def generate_landing(
    out: Path,
    *,
    clusters: int,
    brokers: int,
    controllers: int,
    topics: int,
    partitions: int,
    hours: float,
    interval_s: int,
    scenarios: tuple[str, ...],
    seed: int,
):
    from pipelines.simulator import FleetSpec, generate

    spec = FleetSpec(
        clusters=clusters,
        brokers=brokers,
        controllers=controllers,
        topics=topics,
        partitions=partitions,
        hours=hours,
        interval_s=interval_s,
        scenarios=scenarios,
        seed=seed,
    )
    spec.validate()
    return generate(out, spec, progress_bar("generating landing files"))


def write_report(lakehouse, out: Path) -> Path:
    from pipelines.report.page import build_report
    from pipelines.tables import ALL_TABLES

    names = {spec.name: lakehouse.table_name(spec) for spec in ALL_TABLES}
    for view in ("v_fleet_overview", "v_slo_attainment_daily", "v_partitions_at_min_isr"):
        names[f"gold.{view}"] = f"{lakehouse.schema_name('gold')}.{view}"
    html = build_report(lakehouse.spark, names, lakehouse.config.quorum_lag_time_slo_ms, now_ms())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


def serve(
    lakehouse,
    host: str,
    port: int,
    progress: Progress,
    ready: Callable[[], None] | None = None,
    stop_after_s: float | None = None,
    auth: dict[str, str] | None = None,
    read_only: bool = True,
) -> None:
    """Spark's Thrift JDBC/ODBC server on `host:port` over this session's catalog (bronze/silver/gold).

    `auth` holds the Thrift server's `hive.server2.authentication*` settings (`sql_guard.thrift_auth_settings`);
    without it the server accepts anyone who can connect, so it may only bind a loopback address. With `read_only`
    (the default) every statement passes the read-only parser guard of `pipelines.sql_guard`."""
    from pipelines.sql_guard import is_loopback, read_only_session

    if auth is None and not is_loopback(host):
        raise ValueError(f"refusing to serve on {host} without authentication (loopback only)")
    spark = lakehouse.spark
    session, guard = read_only_session(spark) if read_only else (spark._jsparkSession, None)
    settings = {
        "hive.server2.thrift.port": str(port),
        "hive.server2.thrift.bind.host": host,
        "hive.server2.transport.mode": "binary",
        "hive.server2.authentication": "NONE",
        **(auth or {}),
    }
    for key, value in settings.items():
        session.sessionState().conf().setConfString(key, value)
        spark.sparkContext._jvm.java.lang.System.setProperty(key, value)
    server_cls = spark.sparkContext._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
    server = server_cls.startWithSparkSession(session, False)
    mode = "read-only" if read_only else "read-write"
    who = f"authentication {settings['hive.server2.authentication']}" if auth else "no authentication, loopback only"
    progress(
        f"serving the lakehouse on jdbc:hive2://{host}:{port}/ ({mode}, {who}; Ctrl-C to stop); "
        f"try: beeline -u jdbc:hive2://{host}:{port}/ -e 'SELECT * FROM gold.v_fleet_overview'"
    )
    if ready:
        ready()
    started = time.monotonic()
    try:
        while stop_after_s is None or time.monotonic() - started < stop_after_s:
            time.sleep(0.5)
    finally:
        server.stop()
        del guard


def maintenance(lakehouse, vacuum_hours: int, progress: Progress) -> list[tuple[str, str]]:
    """OPTIMIZE then VACUUM every registered table (retention `vacuum_hours`, Delta's default is 168).

    A table whose changes a later layer has not read yet is compacted but not vacuumed: its change feed still needs
    the files that compaction replaced."""
    from pipelines.tables import ALL_TABLES

    readers = {"bronze": "silver", "silver": "gold"}
    done = []
    for spec in ALL_TABLES:
        name = lakehouse.table_name(spec)
        progress(f"maintenance: OPTIMIZE {name}")
        lakehouse.spark.sql(f"OPTIMIZE {name}")
        reader = readers.get(spec.schema)
        pending = None
        if reader and dict(spec.properties).get("delta.enableChangeDataFeed") == "true":
            read_upto = lakehouse.progress(reader).get(spec.name, -1)
            if read_upto < lakehouse.version(spec) - 1:  # the OPTIMIZE just made is not a change anyone needs
                pending = f"{reader} has not read versions after {read_upto} yet"
        if pending:
            progress(f"maintenance: VACUUM {name} skipped: {pending}")
            done.append((name, f"optimized; not vacuumed ({pending})"))
            continue
        progress(f"maintenance: VACUUM {name} RETAIN {vacuum_hours} HOURS")
        lakehouse.spark.sql(f"VACUUM {name} RETAIN {vacuum_hours} HOURS")
        done.append((name, "optimized, vacuumed"))
    return done


def demo_config(root: Path) -> Config:
    from pipelines.config import build_config
    from pipelines.session import SMALL_RUN_JAVA_OPTIONS

    # the demo fleet is small and known (13 MB): its JVM is tuned for a small run
    return build_config(
        None, landing=str(root / "landing"), warehouse=str(root / "warehouse"), java_options=SMALL_RUN_JAVA_OPTIONS
    )
