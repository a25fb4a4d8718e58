"""Read-only SQL for `quorumlake serve`: a parser guard in front of Spark's SQL parser, and the Thrift server's
authentication settings.

Spark's Thrift (HiveServer2) server runs every statement through the session's SQL parser. Spark lets a session
extension wrap that parser (`SparkSessionExtensions.injectParser`); here the wrapper is a Python object that the JVM
calls through Py4J (the same callback mechanism PySpark uses for `foreachBatch`), so no Java code is needed. It lets
through only:
- queries (`SELECT`, `WITH`, `VALUES`, `TABLE`, `FROM ...`): whatever Spark's own `parseQuery` accepts;
- `SHOW ...`, `DESCRIBE ...`, `EXPLAIN ...`, `USE ...`, and `SET` without a value (reading a setting);
and rejects everything else (DDL, DML, `CACHE`, `ADD JAR`, `SET key=value`, `RESET`, SQL scripts) with a one-line
error. Queries may not call `reflect`/`java_method`/`try_reflect` (they call arbitrary static Java methods). Before
every statement the guard also forces the settings in `FORCED_SETTINGS` back, so a client cannot re-enable reading
arbitrary files (`SELECT * FROM text.`/etc/passwd``) through connection properties.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# Statements other than queries that are let through, by the class of the plan Spark's parser builds: every
# SHOW ..., DESCRIBE ... and EXPLAIN ... plan (ShowTables, ShowNamespacesCommand, DescribeRelation, ExplainCommand,
# ...) only reads metadata; USE only changes the session's current namespace.
READ_ONLY_PREFIXES = ("Show", "Describe", "Explain")
READ_ONLY_COMMANDS = frozenset({"SetCatalogAndNamespace", "SetNamespaceCommand", "SetCatalogCommand"})
FORCED_SETTINGS = {
    "spark.sql.runSQLOnFiles": "false",  # no `SELECT * FROM csv.`/any/path``, `delta.`/any/path``
}
_REFLECTION = re.compile(r"\b(reflect|java_method|try_reflect)\s*\(", re.IGNORECASE)


class ReadOnlyViolation(Exception):
    pass


def check_read_only(delegate: Any, sql_text: str) -> None:
    """Raise ReadOnlyViolation unless `sql_text` is a query or a read-only command (see the module docstring)."""
    if _REFLECTION.search(sql_text):
        raise ReadOnlyViolation("calling Java methods (reflect, java_method) is not allowed")
    try:
        delegate.parseQuery(sql_text)
        return
    except Exception:
        pass
    plan = delegate.parsePlan(sql_text)  # a syntax error surfaces here as Spark's own ParseException
    kind = plan.getClass().getSimpleName()
    if kind == "SetCommand":
        kv = plan.kv()
        if kv.isEmpty() or kv.get()._2().isEmpty():
            return
        raise ReadOnlyViolation("changing settings (SET key=value) is not allowed")
    if not kind.startswith(READ_ONLY_PREFIXES) and kind not in READ_ONLY_COMMANDS:
        raise ReadOnlyViolation(f"{kind} statements are not allowed; only queries, SHOW, DESCRIBE, EXPLAIN and USE")


class _ReadOnlyParser:
    """A Python implementation of Spark's ParserInterface that delegates to Spark's parser after the check."""

    class Java:
        implements = ["org.apache.spark.sql.catalyst.parser.ParserInterface"]  # noqa: RUF012 - Py4J reads it

    def __init__(self, session: Any, delegate: Any):
        self._session = session
        self._delegate = delegate

    def _guard(self, sql_text: str) -> None:
        conf = self._session.sessionState().conf()
        for key, value in FORCED_SETTINGS.items():
            conf.setConfString(key, value)
        try:
            check_read_only(self._delegate, sql_text)
        except ReadOnlyViolation as exc:
            # Py4J rethrows it in the JVM; the Thrift server reports it to the client as the statement's error.
            raise ReadOnlyViolation(f"quorumlake serve is read-only: {exc}") from None

    def parsePlan(self, sql_text: str):
        self._guard(sql_text)
        return self._delegate.parsePlan(sql_text)

    def parsePlanWithParameters(self, sql_text: str, parameters: Any):
        self._guard(sql_text)
        return self._delegate.parsePlanWithParameters(sql_text, parameters)

    def parseQuery(self, sql_text: str):
        self._guard(sql_text)
        return self._delegate.parseQuery(sql_text)

    def parseExpression(self, text: str):
        return self._delegate.parseExpression(text)

    def parseTableIdentifier(self, text: str):
        return self._delegate.parseTableIdentifier(text)

    def parseFunctionIdentifier(self, text: str):
        return self._delegate.parseFunctionIdentifier(text)

    def parseMultipartIdentifier(self, text: str):
        return self._delegate.parseMultipartIdentifier(text)

    def parseRoutineParam(self, text: str):
        return self._delegate.parseRoutineParam(text)

    def parseTableSchema(self, text: str):
        return self._delegate.parseTableSchema(text)

    def parseDataType(self, text: str):
        return self._delegate.parseDataType(text)

    def toString(self) -> str:
        return "quorumlake read-only parser"


class _ParserBuilder:
    """scala.Function2[SparkSession, ParserInterface, ParserInterface] for SparkSessionExtensions.injectParser."""

    class Java:
        implements = ["scala.Function2"]  # noqa: RUF012 - Py4J reads it

    def __init__(self) -> None:
        self.parsers: list[_ReadOnlyParser] = []  # keep the Python objects alive while the JVM holds them

    def apply(self, session: Any, delegate: Any):
        parser = _ReadOnlyParser(session, delegate)
        self.parsers.append(parser)
        return parser

    def toString(self) -> str:
        return "quorumlake read-only parser builder"


def _scala_object(package: Any, name: str) -> Any:
    """The Scala `object` (companion) `name` of a Py4J JVM package view: its methods that have no static forwarder."""
    return getattr(getattr(package, f"{name}$"), "MODULE$")


def read_only_session(spark) -> tuple[Any, Any]:
    """(JVM session, guard): a new session of `spark`'s context (same catalog and tables) whose SQL parser is
    read-only; the sessions the Thrift server opens from it (`newSession`) inherit the guard, and no other session
    does. Keep the guard referenced while the session is in use (the JVM holds only a proxy of it).

    The guard goes into extensions of the guarded session's own: the context's extensions (Delta's: what every
    session of it is built with) and the guard. It must not go into `spark`'s own extensions: `newSession` passes
    its extensions on, so every session the context built afterwards would be read-only, and a process that serves
    and then goes on (a notebook, a test) could not write any more."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    jvm = spark.sparkContext._jvm
    jsession = spark._jsparkSession
    sc = jsession.sparkContext()
    # what Spark builds every session's extensions from (`spark.sql.extensions`, and the extension providers on the
    # class path), in a new object; the constructor is the one `newSession` uses, with that object instead of ours
    extensions = _scala_object(jvm.org.apache.spark.sql.classic, "SparkSession").applyAndLoadExtensions(sc)
    builder = _ParserBuilder()
    extensions.injectParser(builder)
    empty = _scala_object(jvm.scala.collection.immutable, "Map").empty()
    guarded = jvm.org.apache.spark.sql.classic.SparkSession(
        sc, jvm.scala.Some(jsession.sharedState()), jvm.scala.Option.empty(), extensions, empty, empty
    )
    for key, value in FORCED_SETTINGS.items():
        guarded.sessionState().conf().setConfString(key, value)
    return guarded, builder


# --- authentication ---------------------------------------------------------------------------------------------

AUTH_MODES = ("LDAP", "KERBEROS", "CUSTOM")


class AuthConfigError(ValueError):
    pass


# Closing a JDBC session, Hive asks for a metastore client (to drop DataNucleus's class loaders). This server has no
# Hive metastore (its catalog is Spark's own, in memory), so creating that client fails; by default Hive retries it
# ten times, two seconds apart, which would hold every closing session (each beeline, each disconnect of a BI tool)
# and one of the server's threads for about 20 s. With one attempt it fails at once, and the close goes on (Hive logs
# the failure and continues).
NO_METASTORE_RETRIES = {"hive.hmshandler.retry.attempts": "1", "hive.hmshandler.retry.interval": "0ms"}


def thrift_settings(host: str, port: int, auth: dict[str, str] | None = None) -> dict[str, str]:
    """The Thrift server's `hive.server2.*` settings for a binary endpoint on `host:port`: without authentication
    unless `auth` (`thrift_auth_settings`) says otherwise."""
    return {
        "hive.server2.thrift.port": str(port),
        "hive.server2.thrift.bind.host": host,
        "hive.server2.transport.mode": "binary",
        "hive.server2.authentication": "NONE",
        **(auth or {}),
    }


def start_thrift_server(spark, settings: dict[str, str], read_only: bool = True) -> Callable[[], None]:
    """Start Spark's Thrift JDBC/ODBC server over this session's catalog with the `hive.server2.*` `settings`
    (read-only behind the parser guard unless `read_only` is False); returns the function that stops it."""
    session, guard = read_only_session(spark) if read_only else (spark._jsparkSession, None)
    jvm = spark.sparkContext._jvm
    system = jvm.java.lang.System
    ours = {**NO_METASTORE_RETRIES, **settings}
    conf = session.sessionState().conf()
    before = {key: (system.getProperty(key), conf.getConfString(key, None)) for key in ours}
    # as system properties too: the server and each session it opens build their Hive settings from them
    for key, value in ours.items():
        conf.setConfString(key, value)
        system.setProperty(key, value)
    thriftserver = jvm.org.apache.spark.sql.hive.thriftserver
    server = thriftserver.HiveThriftServer2.startWithSparkSession(session, False)
    # the listener the server added to the context's listener bus (it records the server's sessions and statements
    # for a UI tab); the field is the server's object's, which a later start replaces
    listener = _scala_object(thriftserver, "HiveThriftServer2").listener()

    def stop(_guard=guard) -> None:  # holds the guard (a Py4J callback the JVM calls) as long as the server runs
        """Stop the server, and put back the system properties and session settings it was started with, and take its
        listener off the context (a process that goes on, a notebook or a test, keeps none of its address,
        authentication, or bookkeeping of every later Spark event)."""
        server.stop()
        spark.sparkContext._jsc.sc().removeSparkListener(listener)
        for key, (property_, setting) in before.items():
            if property_ is None:
                system.clearProperty(key)
            else:
                system.setProperty(key, property_)
            if setting is None:
                conf.unsetConf(key)
            else:
                conf.setConfString(key, setting)

    return stop


def thrift_auth_settings(path: str | Path) -> dict[str, str]:
    """The Thrift server's `hive.server2.*` authentication settings from a TOML file (docs/serving.md).

    mode = "LDAP":     ldap_url (required), ldap_base_dn, ldap_domain
    mode = "KERBEROS": kerberos_principal, kerberos_keytab (both required)
    mode = "CUSTOM":   custom_class (required): a Java class on the driver's class path implementing
                       org.apache.hive.service.auth.PasswdAuthenticationProvider
    ssl_keystore, ssl_keystore_password (optional, any mode): TLS for the connection (hive.server2.use.SSL).
    NONE, NOSASL and PAM are refused: the first two authenticate nobody, PAM needs a native library Spark does not
    ship."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthConfigError(f"cannot read auth config {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise AuthConfigError(f"auth config {p} is not valid TOML: {exc}") from None
    data = data.get("auth", data)
    mode = str(data.get("mode", "")).upper()
    if mode not in AUTH_MODES:
        raise AuthConfigError(
            f"auth config {p}: mode must be one of {', '.join(AUTH_MODES)}, not {mode or 'missing'!r}"
        )
    known = {
        "mode",
        "ldap_url",
        "ldap_base_dn",
        "ldap_domain",
        "kerberos_principal",
        "kerberos_keytab",
        "custom_class",
        "ssl_keystore",
        "ssl_keystore_password",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise AuthConfigError(f"auth config {p}: unknown key(s): {', '.join(unknown)}")
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n\x00"):
            raise AuthConfigError(f"auth config {p}: {key} must be a non-empty one-line string")

    def need(*keys: str) -> None:
        missing = [k for k in keys if k not in data]
        if missing:
            raise AuthConfigError(f"auth config {p}: mode {mode} needs {', '.join(missing)}")

    settings = {"hive.server2.authentication": mode}
    if mode == "LDAP":
        need("ldap_url")
        settings["hive.server2.authentication.ldap.url"] = data["ldap_url"]
        if "ldap_base_dn" in data:
            settings["hive.server2.authentication.ldap.baseDN"] = data["ldap_base_dn"]
        if "ldap_domain" in data:
            settings["hive.server2.authentication.ldap.Domain"] = data["ldap_domain"]
    elif mode == "KERBEROS":
        need("kerberos_principal", "kerberos_keytab")
        settings["hive.server2.authentication.kerberos.principal"] = data["kerberos_principal"]
        settings["hive.server2.authentication.kerberos.keytab"] = data["kerberos_keytab"]
    else:
        need("custom_class")
        settings["hive.server2.custom.authentication.class"] = data["custom_class"]
    if "ssl_keystore" in data:
        need("ssl_keystore_password")
        settings.update(
            {
                "hive.server2.use.SSL": "true",
                "hive.server2.keystore.path": data["ssl_keystore"],
                "hive.server2.keystore.password": data["ssl_keystore_password"],
            }
        )
    return settings


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    import ipaddress
    import socket

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
