"""quorumlake.pipelines.config: settings that reach SQL (catalog, schema prefix, paths) are validated before any statement is
built, so an injection attempt is a one-line configuration error (exit 2), never SQL."""

from __future__ import annotations

import re

import pytest

from quorumlake.pipelines.config import Config, ConfigError, build_config, typed_settings
from tests.helpers import quorumlake

INJECTIONS = [
    ({"catalog": "x; DROP TABLE y"}, "catalog must be a plain identifier"),
    ({"catalog": "main`.`bronze"}, "catalog must be a plain identifier"),
    ({"catalog": "1main"}, "catalog must be a plain identifier"),
    ({"schema_prefix": "a`b"}, "schema_prefix may only hold letters, digits and _"),
    ({"schema_prefix": "dev; DROP SCHEMA gold CASCADE; --"}, "schema_prefix may only hold letters, digits and _"),
    ({"warehouse": "/tmp/it's"}, "warehouse must be a non-empty path without quotes"),
    ({"warehouse": "/tmp/x' LOCATION '/etc"}, "warehouse must be a non-empty path without quotes"),
    ({"landing": "/tmp/a\\b"}, "landing must be a non-empty path without quotes"),
    ({"checkpoint_root": "/tmp/a\nb"}, "checkpoint_root must be a non-empty path without quotes"),
    ({"window_minutes": "5 MINUTES; DROP"}, "window_minutes must be an integer"),
    ({"spark_remote": "http://localhost:15002"}, "spark_remote must be a Spark Connect URL"),
    ({"spark_remote": "sc://host:99999"}, "spark_remote must be a Spark Connect URL"),
    # the driver's command line: options only, nothing a shell-like split could turn into something else
    ({"java_options": "UseParallelGC"}, "java_options must be JVM options separated by spaces"),
    ({"java_options": "-Dx='y z'"}, "java_options must be JVM options separated by spaces"),
    ({"java_options": "-Xmx2g; rm -rf /"}, "java_options must be JVM options separated by spaces"),
    ({"java_options": "-Xmx2g -"}, "java_options must be JVM options separated by spaces"),
]


@pytest.mark.parametrize(("settings", "message"), INJECTIONS)
def test_settings_that_reach_sql_are_validated(settings, message):
    with pytest.raises(ConfigError, match=message) as raised:
        Config().with_overrides(**settings)
    assert "\n" not in str(raised.value)


def test_plain_names_and_paths_are_accepted():
    config = Config().with_overrides(
        catalog="main",
        schema_prefix="dev_alice_",
        warehouse="/Volumes/main/q/wh",
        landing="dbfs:/mnt/landing zone/x",
        checkpoint_root="s3://bucket/cp",
    )
    assert (config.catalog, config.schema_prefix) == ("main", "dev_alice_")


def test_jvm_options_are_accepted_as_written():
    options = " -XX:+UseParallelGC  -Xlog:gc*:file=/tmp/gc.log -Dquorumlake.x=a,b "
    assert Config().with_overrides(java_options=options).java_options == options
    assert Config().java_options == ""  # the JVM's own defaults unless asked


def test_a_config_file_is_validated_too(tmp_path):
    path = tmp_path / "q.toml"
    path.write_text('catalog = "x; DROP TABLE y"\n')
    with pytest.raises(ConfigError, match="catalog must be a plain identifier"):
        build_config(str(path))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--catalog", "x; DROP TABLE y"], "catalog must be a plain identifier"),
        (["--schema-prefix", "a`b"], "schema_prefix may only hold letters, digits and _"),
        (["--warehouse", "/tmp/wh'; DROP TABLE bronze.quorum_raw; --"], "warehouse must be a non-empty path"),
    ],
)
@pytest.mark.parametrize("command", ["run", "sql", "serve"])
def test_injection_through_the_cli_is_one_line_and_exit_2(tmp_path, command, args, message):
    extra = {"run": ["--landing", str(tmp_path)], "sql": ["SELECT 1"], "serve": []}[command]
    result = quorumlake(command, *extra, *args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quorumlake: error: ") and message in lines[0], result.stderr
    assert not (tmp_path / "lakehouse").exists()  # nothing was created: Spark was never started


# --- the SLO objectives: the first settings that are numbers between 0 and 1 ------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.0, "between 0 and 1 (exclusive)"),
        (0, "between 0 and 1 (exclusive)"),
        (-0.5, "between 0 and 1 (exclusive)"),
        (float("nan"), "between 0 and 1 (exclusive)"),
        ("0.99", "must be a number"),
        (True, "must be a number"),
    ],
)
def test_slo_objectives_are_shares_strictly_between_0_and_1(value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config().with_overrides(slo_objective_write_availability=value)


def test_slo_objectives_from_a_file_and_the_command_line(tmp_path):
    path = tmp_path / "q.toml"
    path.write_text("slo_objective_quorum_lag = 0.995\nslo_objective_metadata_freshness = 0.9\n")
    config = build_config(str(path), **typed_settings([("slo_objective_write_availability", "0.9999")]))
    assert (
        config.slo_objective_quorum_lag,
        config.slo_objective_write_availability,
        config.slo_objective_metadata_freshness,
    ) == (0.995, 0.9999, 0.9)
    path.write_text('slo_objective_quorum_lag = "high"\n')
    with pytest.raises(ConfigError, match="slo_objective_quorum_lag must be a number"):
        build_config(str(path))
    with pytest.raises(ConfigError, match="--set: slo_objective_quorum_lag must be a number, not 'high'"):
        typed_settings([("slo_objective_quorum_lag", "high")])
