"""The command line: help everywhere, one-line errors with exit 2, output formats."""

from __future__ import annotations

import pytest

from quorumlake.contract.tables import LAYERS
from quorumlake.pipelines.app import cli
from tests.helpers import quorumlake


@pytest.mark.parametrize("command", [[], ["run"], ["sql"], ["demo"]])
def test_every_command_has_help(command):
    result = quorumlake(*command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: quorumlake")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (["run", "--landing", "/nonexistent/landing"], "landing folder not found: /nonexistent/landing"),
        (["run", "--config", "/nonexistent.toml"], "config file not found: /nonexistent.toml"),
        (["sql"], "the following arguments are required: query"),
        (["sql", "SELECT 1", "--format", "xml"], "invalid choice: 'xml'"),
        (["sql", "SELECT 1", "--limit", "0"], "must be at least 1"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, message):
    result = quorumlake(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("quorumlake")
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_a_spark_connect_server_that_does_not_answer_is_a_one_line_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = quorumlake("run", "--landing", str(tmp_path), "--set", f"spark_remote=sc://127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"no Spark Connect server answers at 127.0.0.1:{port} (spark_remote)" in lines[0]


def test_bad_config_files_are_one_line_errors(tmp_path):
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("window_minutes = [")
    wrong_type = tmp_path / "wrong.toml"
    wrong_type.write_text('window_minutes = "five"\n')
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("colour = 1\n")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    for path, message in [
        (bad_toml, "is not valid TOML"),
        (wrong_type, "window_minutes must be an integer"),
        (unknown, "unknown setting(s): colour"),
        (binary, "cannot read config file"),
    ]:
        result = quorumlake("run", "--config", str(path), "--landing", str(tmp_path))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert message in result.stderr


def test_config_file_settings_apply(tmp_path):
    from quorumlake.pipelines.config import build_config

    path = tmp_path / "q.toml"
    path.write_text('warehouse = "/wh"\n[quorumlake]\nwindow_minutes = 10\n')
    config = build_config(str(path), landing="/land")
    assert (config.warehouse, config.window_minutes, config.landing) == ("/wh", 10, "/land")


def test_sql_errors_are_one_line(spark, tmp_path, capsys):
    code = cli.main(["sql", "SELECT nope FROM nowhere", "--warehouse", str(tmp_path / "wh")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("quorumlake: error: query failed: [TABLE_OR_VIEW_NOT_FOUND]")


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_entry_point_runs_that_layer_alone_with_its_arguments(layer, monkeypatch):
    # what the Databricks job's tasks call (`quorumlake-<layer> --landing ... --warehouse ...`); the wheel test
    # checks that the installed scripts reach the CLI, this that each runs `run --layer <layer>` with its arguments
    calls = []
    monkeypatch.setattr(cli, "main", lambda argv: calls.append(list(argv)) or 0)
    entry = getattr(cli, f"{layer}_main")
    assert entry(["--landing", "/l", "--warehouse", "/w", "--set", "batch_bytes=1"]) == 0
    assert calls == [["run", "--layer", layer, "--landing", "/l", "--warehouse", "/w", "--set", "batch_bytes=1"]]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], False),
        (["--full-refresh"], True),
        (["--full-refresh=true"], True),
        (["--full-refresh=false"], False),
        (["--full-refresh", "True"], True),
    ],
)
def test_full_refresh_is_a_flag_or_a_value(flags, expected):
    assert cli.build_parser().parse_args(["run", *flags]).full_refresh is expected


def test_a_bad_full_refresh_value_or_outcome_time_is_a_usage_error(capsys):
    assert cli.main(["run", "--full-refresh=sometimes"]) == 2
    assert cli.main(["run", "--outcome-since=yesterday"]) == 2
    assert cli.main(["run", "--degraded-exit-code=300"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("quorumlake run: argument --") for line in err)


def test_the_outcome_time_is_utc_unless_it_says_otherwise():
    parse = cli.build_parser().parse_args
    naive = parse(["run", "--outcome-since=2026-01-02T03:04:05.678"]).outcome_since
    zulu = parse(["run", "--outcome-since=2026-01-02T03:04:05.678Z"]).outcome_since
    assert naive == zulu and naive.utcoffset().total_seconds() == 0
