"""quorumlake.pipelines.serving.sql_guard: what `quorumlake serve` lets through (with Spark's real SQL parser), its authentication
settings, and the CLI's refusal to serve a non-loopback address without authentication."""

from __future__ import annotations

import os

import pytest

from quorumlake.pipelines.serving.sql_guard import (
    NO_METASTORE_RETRIES,
    AuthConfigError,
    ReadOnlyViolation,
    check_read_only,
    is_loopback,
    read_only_session,
    start_thrift_server,
    thrift_auth_settings,
    thrift_settings,
)
from tests.helpers import free_port, quorumlake

ALLOWED = [
    "SELECT * FROM gold.v_fleet_overview",
    "WITH w AS (SELECT 1 AS x) SELECT x FROM w",
    "VALUES (1)",
    "SHOW TABLES IN gold",
    "SHOW DATABASES",
    "DESCRIBE TABLE gold.quorum_health",
    "EXPLAIN SELECT 1",
    "USE gold",
    "SET",
    "SET spark.sql.session.timeZone",
]
REJECTED = [
    ("DROP TABLE gold.quorum_health", "DropTable statements are not allowed"),
    ("INSERT INTO silver.quarantine SELECT * FROM silver.quarantine", "InsertIntoStatement statements"),
    ("DELETE FROM bronze.quorum_raw", "DeleteFromTable statements"),
    ("UPDATE gold.quorum_health SET sli = 1", "UpdateTable statements"),
    (
        "MERGE INTO gold.quorum_health t USING gold.quorum_health s ON false WHEN NOT MATCHED THEN INSERT *",
        "MergeIntoTable statements",
    ),
    ("CREATE TABLE x USING text LOCATION '/etc'", "CreateTable statements"),
    ("CREATE TEMPORARY VIEW v USING text OPTIONS (path '/etc/passwd')", "statements are not allowed"),
    ("ALTER TABLE gold.quorum_health SET TBLPROPERTIES ('a' = 'b')", "statements are not allowed"),
    ("CACHE TABLE gold.quorum_health", "CacheTable statements"),
    ("ADD JAR /tmp/evil.jar", "statements are not allowed"),
    ("SET spark.sql.runSQLOnFiles=true", "changing settings (SET key=value) is not allowed"),
    ("RESET", "statements are not allowed"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "calling Java methods"),
    ("SELECT java_method('java.lang.Runtime', 'getRuntime')", "calling Java methods"),
]


@pytest.fixture(scope="module")
def parser(spark):
    return spark._jsparkSession.sessionState().sqlParser()


@pytest.mark.parametrize("sql", ALLOWED)
def test_queries_and_read_only_commands_pass(parser, sql):
    check_read_only(parser, sql)


@pytest.mark.parametrize(("sql", "message"), REJECTED)
def test_everything_else_is_rejected(parser, sql, message):
    with pytest.raises(ReadOnlyViolation, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_read_only(parser, sql)


def test_the_read_only_session_guards_itself_and_the_sessions_it_opens_and_no_other(spark):
    """The guard is in the guarded session's own extensions: the sessions the Thrift server opens from it
    (`newSession`) have it too; the caller's session and the sessions the context opens afterwards do not (a
    notebook or a test that served goes on writing)."""
    guarded, guard = read_only_session(spark)
    name = "quorumlake read-only parser"
    served = guarded.newSession()  # what the Thrift server does for each connection
    for session in (guarded, served):
        assert session.sessionState().sqlParser().toString() == name
        assert session.sql("SELECT 41 + 1 AS answer").collectAsList()[0].getInt(0) == 42
        with pytest.raises(Exception, match="quorumlake serve is read-only: CreateViewCommand statements"):
            session.sql("CREATE TEMPORARY VIEW guarded_view AS SELECT 1")
    # the guard wraps the parser every session of the context is built with (Delta's SQL), not Spark's bare one
    assert {parser._delegate.getClass().getName() for parser in guard.parsers} == {"io.delta.sql.parser.DeltaSqlParser"}
    for session in (spark._jsparkSession, spark._jsparkSession.newSession()):
        assert session.sessionState().sqlParser().getClass().getName() == "io.delta.sql.parser.DeltaSqlParser"
    spark.newSession().sql("CREATE TEMPORARY VIEW unguarded_view AS SELECT 1")


def test_auth_config_maps_to_the_thrift_server_settings(tmp_path):
    ldap = tmp_path / "ldap.toml"
    ldap.write_text(
        '[auth]\nmode = "ldap"\nldap_url = "ldaps://ldap.example.com:636"\n'
        'ldap_base_dn = "ou=people,dc=example,dc=com"\n'
    )
    assert thrift_auth_settings(ldap) == {
        "hive.server2.authentication": "LDAP",
        "hive.server2.authentication.ldap.url": "ldaps://ldap.example.com:636",
        "hive.server2.authentication.ldap.baseDN": "ou=people,dc=example,dc=com",
    }
    kerberos = tmp_path / "krb.toml"
    kerberos.write_text(
        'mode = "KERBEROS"\nkerberos_principal = "hive/_HOST@EXAMPLE.COM"\n'
        'kerberos_keytab = "/etc/hive.keytab"\nssl_keystore = "/etc/ks.jks"\n'
        'ssl_keystore_password = "pw"\n'
    )
    assert thrift_auth_settings(kerberos) == {
        "hive.server2.authentication": "KERBEROS",
        "hive.server2.authentication.kerberos.principal": "hive/_HOST@EXAMPLE.COM",
        "hive.server2.authentication.kerberos.keytab": "/etc/hive.keytab",
        "hive.server2.use.SSL": "true",
        "hive.server2.keystore.path": "/etc/ks.jks",
        "hive.server2.keystore.password": "pw",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('mode = "NONE"\n', "mode must be one of LDAP, KERBEROS, CUSTOM, not 'NONE'"),
        ('mode = "PAM"\n', "mode must be one of LDAP, KERBEROS, CUSTOM, not 'PAM'"),
        ("", "mode must be one of LDAP, KERBEROS, CUSTOM, not 'missing'"),
        ('mode = "LDAP"\n', "mode LDAP needs ldap_url"),
        ('mode = "KERBEROS"\nkerberos_keytab = "/k"\n', "mode KERBEROS needs kerberos_principal"),
        ('mode = "LDAP"\nldap_url = "ldap://x"\npassword = "p"\n', "unknown key(s): password"),
        ('mode = "LDAP"\nldap_url = "ldap://x\\nhive.server2.authentication=NONE"\n', "must be a non-empty one-line"),
        ("mode = [", "is not valid TOML"),
    ],
)
def test_bad_auth_configs_are_refused(tmp_path, text, message):
    path = tmp_path / "auth.toml"
    path.write_text(text)
    with pytest.raises(AuthConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        thrift_auth_settings(path)


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")
    assert not is_loopback("no-such-host.invalid")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to serve on 0.0.0.0 without authentication"),
        (["--host", "::"], "refusing to serve on :: without authentication"),
        (["--host", "0.0.0.0", "--auth-config", "/nonexistent.toml"], "cannot read auth config /nonexistent.toml"),
    ],
)
def test_serve_refuses_a_non_loopback_address_without_authentication(tmp_path, args, message):
    result = quorumlake("serve", *args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "lakehouse").exists()


@pytest.mark.parametrize("how", ["spark_remote", "databricks"])
def test_serve_refuses_a_session_it_cannot_run_a_thrift_server_in(tmp_path, how):
    settings = tmp_path / "settings.toml"
    settings.write_text('spark_remote = "sc://127.0.0.1:1"\n' if how == "spark_remote" else "")
    env = {**os.environ, **({"DATABRICKS_RUNTIME_VERSION": "client.5.0"} if how == "databricks" else {})}
    result = quorumlake("serve", "--config", str(settings), cwd=tmp_path, env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "serve runs Spark's Thrift server inside this process's JVM" in lines[0], result.stderr


def thrift_listeners(spark) -> list[str]:
    """The Thrift server's listeners on the context's listener bus, by class name."""
    every = spark.sparkContext._jsc.sc().listenerBus().listeners()
    return [name for name in (x.getClass().getSimpleName() for x in every) if name.startswith("HiveThriftServer2")]


def test_the_thrift_server_s_sessions_close_without_retrying_a_hive_metastore_it_does_not_have(spark):
    """Closing a JDBC session, Hive asks for a metastore client; the server has none (Spark's in-memory catalog), so
    that fails, and Hive's default retries it ten times two seconds apart: ~20 s per closed session. The server makes
    one attempt, and its sessions still open, answer and close. Stopped, it puts back the system properties and session
    settings it was started with."""
    jvm = spark.sparkContext._jvm
    system = jvm.java.lang.System
    port = free_port()
    settings = thrift_settings("127.0.0.1", port)  # what `quorumlake serve` starts it with on loopback
    before = {key: system.getProperty(key) for key in (*settings, *NO_METASTORE_RETRIES)}
    assert before["hive.hmshandler.retry.attempts"] is None  # nothing set it before the server
    stop = start_thrift_server(spark, settings, read_only=False)  # the guard is tested above and end to end
    assert thrift_listeners(spark) == ["HiveThriftServer2Listener"]
    try:
        connection = jvm.java.sql.DriverManager.getConnection(f"jdbc:hive2://127.0.0.1:{port}/", "", "")
        try:
            result = connection.createStatement().executeQuery("SELECT 41 + 1 AS answer")
            assert result.next() and result.getInt("answer") == 42
        finally:
            connection.close()
        # what each session's Hive settings are built from (system properties over Hive's defaults)
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        assert conf.get("hive.hmshandler.retry.attempts") == "1"
        assert (
            conf.getTimeVar(
                conf.getConfVars("hive.hmshandler.retry.interval"), jvm.java.util.concurrent.TimeUnit.MILLISECONDS
            )
            == 0
        )
        assert spark.conf.get("hive.server2.thrift.port") == str(port)
    finally:
        stop()
    # stopped, the server leaves the suite's session and JVM as they were, its listener gone from the context
    assert {key: system.getProperty(key) for key in before} == before
    assert all(spark.conf.get(key, None) is None for key in before)
    assert thrift_listeners(spark) == []
