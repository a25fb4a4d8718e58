"""`quorumlake serve`: Spark's Thrift JDBC/ODBC server over the lakehouse's catalog, read-only unless told otherwise."""

from __future__ import annotations

import threading
from collections.abc import Callable

from quorumlake.pipelines.progress import Progress


def serve(
    lakehouse,
    host: str,
    port: int,
    progress: Progress,
    ready: Callable[[], None] | None = None,
    until: threading.Event | None = None,
    auth: dict[str, str] | None = None,
    read_only: bool = True,
) -> None:
    """Spark's Thrift JDBC/ODBC server on `host:port` over this session's catalog (bronze/silver/gold), until `until`
    is set (None: until interrupted); `ready` is called once it accepts connections.

    `auth` holds the Thrift server's `hive.server2.authentication*` settings (`sql_guard.thrift_auth_settings`);
    without it the server accepts anyone who can connect, so it may only bind a loopback address. With `read_only`
    (the default) every statement passes the read-only parser guard of `quorumlake.pipelines.serving.sql_guard`."""
    from quorumlake.pipelines.serving.sql_guard import is_loopback, start_thrift_server, thrift_settings

    if auth is None and not is_loopback(host):
        raise ValueError(f"refusing to serve on {host} without authentication (loopback only)")
    settings = thrift_settings(host, port, auth)
    stop = start_thrift_server(lakehouse.spark, settings, read_only)
    mode = "read-only" if read_only else "read-write"
    who = f"authentication {settings['hive.server2.authentication']}" if auth else "no authentication, loopback only"
    progress(
        f"serving the lakehouse on jdbc:hive2://{host}:{port}/ ({mode}, {who}; Ctrl-C to stop); "
        f"try: beeline -u jdbc:hive2://{host}:{port}/ -e 'SELECT * FROM gold.v_fleet_overview'"
    )
    if ready:
        ready()
    waiting = until or threading.Event()  # never set: until interrupted (Ctrl-C between two waits)
    try:
        while not waiting.wait(0.5):
            pass
    finally:
        stop()
