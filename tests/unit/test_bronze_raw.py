"""quorumlake.bronze.raw.build_raw_records on tiny binaryFile-shaped inputs."""

from __future__ import annotations

import base64
import gzip
import hashlib
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from quorumlake.bronze.raw import BINARY_FILE_SCHEMA, PIECE_SCHEMA, build_raw_records, gunzip, line_pieces
from tests.frames import assert_frames_equal
from tests.helpers import ts

RUN_AT = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)
MTIME = datetime(2026, 11, 21, 11, 0, 0)
COLUMNS = ["format", "cluster_id", "node_id", "collected_at", "api_version", "line_number", "payload", "parse_error"]
EXPECTED_SCHEMA = (
    "format STRING, cluster_id STRING, node_id INT, collected_at TIMESTAMP, api_version INT, line_number INT, "
    "payload STRING, parse_error STRING"
)
QUORUM_OK = '{"cluster_id":"c1","collected_at_ms":1730000000600,"api_version":1,"response":{"errorCode":0,"topics":[]}}'


def files(spark, *entries: tuple[str, bytes]):
    rows = [(f"file:/landing/{path}", MTIME, len(data), bytearray(data)) for path, data in entries]
    return spark.createDataFrame(rows, BINARY_FILE_SCHEMA)


def records(spark, source: str, *entries: tuple[str, bytes]):
    return build_raw_records(files(spark, *entries), source, RUN_AT)


def test_output_has_the_registry_columns(spark):
    from quorumlake.contract.tables import BRONZE_QUORUM_RAW

    out = records(spark, "quorum", ("q/a.jsonl", QUORUM_OK.encode()))
    assert out.columns == BRONZE_QUORUM_RAW.column_names
    assert {f.name: f.dataType.simpleString() for f in out.schema.fields} == {
        n: t.lower() for n, t, _ in BRONZE_QUORUM_RAW.columns
    }


def test_json_lines_become_one_row_per_line_with_envelope_fields(spark):
    data = (QUORUM_OK + "\nnot json\n" + QUORUM_OK.replace("1730000000600", '"1730000000600"') + "\n").encode()
    out = records(spark, "quorum", ("quorum/2024/a.jsonl", data)).select(*COLUMNS)
    lines = data.decode().splitlines()
    expected = spark.createDataFrame(
        [
            ("describe_quorum_json", "c1", None, ts(1730000000600), 1, 1, lines[0], None),
            ("describe_quorum_json", None, None, None, None, 2, "not json", "malformed JSON"),
            (
                "describe_quorum_json",
                "c1",
                None,
                None,
                1,
                3,
                lines[2],
                "field 'collected_at_ms' must be an integer, not string",
            ),
        ],
        EXPECTED_SCHEMA,
    )
    assert_frames_equal(out, expected, ignore_row_order=True, ignore_nullable=True)


ENVELOPE_ERRORS = [
    ('{"cluster_id":"c1","collected_at_ms":1,"api_version":0}', "missing field 'response'"),
    (
        '{"cluster_id":"c1","collected_at_ms":1,"api_version":0,"response":"x"}',
        "field 'response' must be an object, not string",
    ),
    ('{"cluster_id":"c1","collected_at_ms":1,"api_version":-1,"response":{}}', "field 'api_version' is negative"),
    (
        '{"cluster_id":7,"collected_at_ms":1,"api_version":0,"response":{}}',
        "field 'cluster_id' must be a string, not bigint",
    ),
    ('{"cluster_id":"c1","collected_at_ms":null,"api_version":0,"response":{}}', "field 'collected_at_ms' is null"),
    (
        '{"cluster_id":"c1","collected_at_ms":1.5,"api_version":0,"response":{}}',
        "field 'collected_at_ms' must be an integer, not decimal(2,1)",
    ),
    (
        '{"collected_at_ms":1,"api_version":0,"response":{}}',
        "missing field 'cluster_id' (and no cluster= path segment)",
    ),
    ("[1,2]", "not a JSON object"),
    ("   ", "blank line"),
    (
        '{"cluster_id":"c1"}',
        "missing field 'collected_at_ms'; missing field 'api_version'; missing field 'response'",
    ),
]


def one_action(spark, source: str, entries: list[tuple[str, bytes]]) -> list[list]:
    """Each (path, data) of `entries` as a file of its own (under a folder `case<i>/`, which no rule reads), all
    through `build_raw_records` in one input frame and one Spark action: a parametrized group's cases cost one query
    instead of one each, since a file's records depend on that file alone. Returns each file's records, in order."""
    paths = [f"case{i}/{path}" for i, (path, _) in enumerate(entries)]
    rows = records(spark, source, *((path, data) for path, (_, data) in zip(paths, entries))).collect()
    return [[r for r in rows if r["source_file"] == f"file:/landing/{path}"] for path in paths]


@pytest.fixture(scope="module")
def envelope_records(spark) -> list[list]:
    return one_action(spark, "quorum", [("quorum/a.jsonl", (line + "\n").encode()) for line, _ in ENVELOPE_ERRORS])


@pytest.mark.parametrize(("line", "error"), ENVELOPE_ERRORS)
def test_quorum_envelope_errors_are_named(envelope_records, line, error):
    [out] = envelope_records[ENVELOPE_ERRORS.index((line, error))]
    assert out["payload"] == line
    assert out["parse_error"] == error


def test_newer_api_version_is_not_an_error(spark):
    line = QUORUM_OK.replace('"api_version":1', '"api_version":3').replace('"topics":[]', '"topics":[],"newField":1')
    out = records(spark, "quorum", ("quorum/a.jsonl", line.encode())).first()
    assert (out["api_version"], out["parse_error"], out["payload"]) == (3, None, line)


def test_cluster_from_path_when_the_record_has_none(spark):
    line = '{"collected_at_ms":1,"api_version":0,"response":{}}'
    out = records(spark, "quorum", ("quorum/cluster=from-path/x.jsonl", line.encode())).first()
    assert (out["cluster_id"], out["parse_error"]) == ("from-path", None)


def test_record_cluster_wins_over_path(spark):
    out = records(spark, "quorum", ("quorum/cluster=from-path/x.jsonl", QUORUM_OK.encode())).first()
    assert out["cluster_id"] == "c1"


def test_crlf_blank_lines_and_missing_final_newline(spark):
    data = (QUORUM_OK + "\r\n\r\n" + QUORUM_OK).encode()
    out = (
        records(spark, "quorum", ("quorum/a.jsonl", data))
        .orderBy("line_number")
        .select("line_number", "payload", "parse_error")
    )
    assert [tuple(r) for r in out.collect()] == [(1, QUORUM_OK, None), (2, "", "blank line"), (3, QUORUM_OK, None)]


def test_whole_file_captures_take_cluster_and_time_from_the_path(spark):
    text = "NodeId\tLogEndOffset\t\n"
    out = records(
        spark,
        "quorum",
        ("quorum/cluster=k1/2024-10-27/1730000000500.replication.txt", text.encode()),
        ("quorum/cluster=k1/1730000000501.status.txt.gz", gzip.compress(b"LeaderId:               1\n")),
    ).select(*COLUMNS)
    expected = spark.createDataFrame(
        [
            ("quorum_cli_replication", "k1", None, ts(1730000000500), None, None, text, None),
            ("quorum_cli_status", "k1", None, ts(1730000000501), None, None, "LeaderId:               1\n", None),
        ],
        EXPECTED_SCHEMA,
    )
    assert_frames_equal(out, expected, ignore_row_order=True, ignore_nullable=True)


WHOLE_FILE_ERRORS = [
    ("quorum/1730000000500.replication.txt", b"NodeId\t\n", "no cluster=<id> segment in the path"),
    ("quorum/cluster=k/latest.replication.txt", b"NodeId\t\n", "file name does not start with <collected_at_ms>."),
    (
        "quorum/cluster=k/1.replication.txt",
        b"Error: timeout\n",
        "not a 'describe --replication' capture (no NodeId header)",
    ),
    ("quorum/cluster=k/1.status.txt", b"hello\n", "not a 'describe --status' capture (no LeaderId line)"),
    (
        "quorum/cluster=k/notes.md",
        b"hello\n",
        "unrecognized file name in quorum/: expected one of *.replication.txt[.gz], *.status.txt[.gz], *.jsonl[.gz]",
    ),
    ("quorum/cluster=k/1.status.txt.gz", b"\x1f\x8b\x08\x00garbage", None),
    ("quorum/cluster=k/1.status.txt", b"", "empty file"),
    ("quorum/cluster=k/1.status.txt.gz", gzip.compress(b"", mtime=0), "empty file after decompression"),
]


@pytest.fixture(scope="module")
def whole_file_records(spark) -> list[list]:
    return one_action(spark, "quorum", [(path, data) for path, data, _ in WHOLE_FILE_ERRORS])


@pytest.mark.parametrize(("path", "data", "error"), WHOLE_FILE_ERRORS)
def test_whole_file_errors(whole_file_records, path, data, error):
    [out] = whole_file_records[WHOLE_FILE_ERRORS.index((path, data, error))]
    if error is None:
        assert out["parse_error"].startswith("not a valid gzip file")
        assert base64.b64decode(out["payload_base64"]) == data
    else:
        assert out["parse_error"] == error


def test_binary_garbage_keeps_its_bytes(spark):
    data = bytes((i * 37 + 11) % 256 for i in range(64))
    out = records(spark, "quorum", ("quorum/g.jsonl", data)).collect()
    assert len(out) == 1
    assert out[0]["parse_error"].startswith("not UTF-8 text")
    assert base64.b64decode(out[0]["payload_base64"]) == data


def test_metrics_formats(spark):
    jmx = (
        '{"cluster_id":"c1","node_id":3,"scraped_at_ms":1730000000500,'
        '"mbean":"kafka.server:type=raft-metrics","attribute":"current-leader","value":3002.0}'
    )
    bad_jmx = jmx.replace('"value":3002.0', '"value":"leader"')
    prom = "# TYPE x gauge\nx 1.0\n"
    out = records(
        spark,
        "metrics",
        ("metrics/2024/s.jsonl", (jmx + "\n" + bad_jmx + "\n").encode()),
        ("metrics/cluster=c1/node=7/1730000000400.prom", prom.encode()),
        ("metrics/cluster=c1/node=x/1730000000400.prom", prom.encode()),
        ("metrics/cluster=c1/node=8/1730000000400.prom", b"# only comments\n"),
    ).select("format", "cluster_id", "node_id", "collected_at", "line_number", "parse_error")
    expected = spark.createDataFrame(
        [
            ("jmx_json", "c1", 3, ts(1730000000500), 1, None),
            ("jmx_json", "c1", 3, ts(1730000000500), 2, "field 'value' must be a number, not string"),
            ("prometheus_text", "c1", 7, ts(1730000000400), None, None),
            ("prometheus_text", "c1", None, ts(1730000000400), None, "node= path segment is not an integer"),
            ("prometheus_text", "c1", 8, ts(1730000000400), None, "no samples in the scrape"),
        ],
        "format STRING, cluster_id STRING, node_id INT, collected_at TIMESTAMP, line_number INT, parse_error STRING",
    )
    assert_frames_equal(out, expected, ignore_row_order=True, ignore_nullable=True)


def test_partition_json_checks_every_field(spark):
    good = (
        '{"cluster_id":"c1","collected_at_ms":1,"topic":"t","partition":0,"leader":-1,"replicas":[1,2],'
        '"isr":[],"min_isr":1,"adding_replicas":[2]}'
    )
    bad = '{"cluster_id":"c1","collected_at_ms":1,"topic":"t","partition":0,"leader":1,"replicas":["1"],"isr":"1","elr":[true]}'
    out = records(spark, "partitions", ("partitions/p.jsonl", (good + "\n" + bad + "\n").encode()))
    errors = [r["parse_error"] for r in out.orderBy("line_number").collect()]
    assert errors == [
        None,
        "field 'replicas' must be an array of integers, not array<string>; "
        "field 'isr' must be an array of integers, not string; missing field 'min_isr'; "
        "field 'elr' must be an array of integers, not array<boolean>",
    ]


def test_record_id_ignores_file_name_and_date_folder_but_not_content_or_cluster(spark):
    out = records(
        spark,
        "quorum",
        ("quorum/day1/a.jsonl", QUORUM_OK.encode()),
        ("quorum/day2/copy-of-a.jsonl", QUORUM_OK.encode()),
        ("quorum/day2/copy-of-a.jsonl.gz", gzip.compress(QUORUM_OK.encode())),
        ("quorum/cluster=k/1.status.txt", b"LeaderId: 1\n"),
        ("quorum/cluster=j/1.status.txt", b"LeaderId: 1\n"),
        ("quorum/cluster=k/e1.jsonl", b""),
        ("quorum/cluster=k/e2.jsonl", b""),
    )
    ids = {r["source_file"].removeprefix("file:/landing/"): r["record_id"] for r in out.collect()}
    assert ids["quorum/day1/a.jsonl"] == ids["quorum/day2/copy-of-a.jsonl"] == ids["quorum/day2/copy-of-a.jsonl.gz"]
    assert ids["quorum/cluster=k/1.status.txt"] != ids["quorum/cluster=j/1.status.txt"]
    assert ids["quorum/cluster=k/e1.jsonl"] != ids["quorum/cluster=k/e2.jsonl"]


def test_ingested_at_is_the_run_time_given(spark):
    out = records(spark, "quorum", ("quorum/a.jsonl", QUORUM_OK.encode())).first()
    assert out["ingested_at"] == RUN_AT.replace(tzinfo=None)


def test_gunzip_reports_corrupt_input():
    assert gunzip(gzip.compress(b"abc")) == (b"abc", None)
    data, error = gunzip(b"not gzip")
    assert data is None and error.startswith("not a valid gzip file")
    assert gunzip(None) == (None, None)


def test_unknown_source_is_rejected(spark):
    with pytest.raises(ValueError, match="unknown landing source"):
        records(spark, "elsewhere", ("x/a.jsonl", b"{}"))


# --- hostile records: each costs its own record, never the batch ------------------------------------------------

EPOCH_RANGE = "epoch milliseconds must be between 0 and 253402300799999 (year 9999)"


EPOCH_CASES = [
    ("9000000000000000", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),  # year 287168
    ("253402300800000", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),  # 10000-01-01
    ("-5", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),
    ("4611686018427387904", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),  # 2^62: long overflow
    ("9223372036854775808", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),  # 2^63
    ("-9223372036854775809", f"field 'collected_at_ms' is out of range: {EPOCH_RANGE}"),
    ("1" + "0" * 5000, "malformed JSON"),  # thousands of digits: beyond what the JSON parser reads
    ("253402300799999", None),  # the last millisecond of year 9999 is fine
]


@pytest.fixture(scope="module")
def epoch_records(spark) -> list[list]:
    lines = [QUORUM_OK.replace("1730000000600", collected_at_ms) for collected_at_ms, _ in EPOCH_CASES]
    return one_action(spark, "quorum", [("quorum/a.jsonl", line.encode()) for line in lines])


@pytest.mark.parametrize(("collected_at_ms", "error"), EPOCH_CASES)
def test_epoch_milliseconds_beyond_a_timestamp_are_parse_errors(epoch_records, collected_at_ms, error):
    [out] = epoch_records[EPOCH_CASES.index((collected_at_ms, error))]
    assert out["parse_error"] == error
    assert (out["collected_at"] is None) == (error is not None)


def test_integers_beyond_32_bits_are_parse_errors(spark):
    jmx = (
        '{"cluster_id":"c1","node_id":4294967296,"scraped_at_ms":1730000000500,'
        '"mbean":"kafka.server:type=raft-metrics","attribute":"current-leader","value":1}'
    )
    part = (
        '{"cluster_id":"c1","collected_at_ms":1,"topic":"t","partition":2147483648,"leader":1,'
        '"replicas":[1,99999999999999999999999],"isr":[1],"min_isr":1,"elr":[null]}'
    )
    quorum = QUORUM_OK.replace('"api_version":1', '"api_version":2147483648')
    out = (
        build_raw_records(
            files(
                spark,
                ("metrics/m.jsonl", jmx.encode()),
            ),
            "metrics",
            RUN_AT,
        )
        .unionByName(records(spark, "partitions", ("partitions/p.jsonl", part.encode())))
        .unionByName(records(spark, "quorum", ("quorum/q.jsonl", quorum.encode())))
        .select("format", "node_id", "parse_error")
    )
    expected = spark.createDataFrame(
        [
            ("jmx_json", None, "field 'node_id' is out of range: not a 32-bit integer"),
            (
                "partition_json",
                None,
                "field 'partition' is out of range: not a 32-bit integer; field 'replicas' is out "
                "of range: every element must be a 32-bit integer; field 'elr' is out of range: every element must be a "
                "32-bit integer",
            ),
            ("describe_quorum_json", None, "field 'api_version' is out of range: not a 32-bit integer"),
        ],
        "format STRING, node_id INT, parse_error STRING",
    )
    assert_frames_equal(out, expected, ignore_row_order=True, ignore_nullable=True)


def test_empty_mbean_or_attribute_is_a_parse_error(spark):
    jmx = '{"cluster_id":"c1","node_id":3,"scraped_at_ms":1730000000500,"mbean":"%s","attribute":"%s","value":1}'
    data = "\n".join([jmx % ("", "Value"), jmx % ("kafka.server:type=x", " "), jmx % ("kafka.server:type=x", "Value")])
    out = records(spark, "metrics", ("metrics/m.jsonl", data.encode())).orderBy("line_number")
    assert [r["parse_error"] for r in out.collect()] == ["field 'mbean' is empty", "field 'attribute' is empty", None]


def test_capture_time_in_a_file_name_beyond_year_9999_is_a_parse_error(spark):
    out = records(spark, "quorum", ("quorum/cluster=k/99999999999999999.status.txt", b"LeaderId: 1\n")).first()
    assert out["collected_at"] is None
    assert out["parse_error"] == f"the time in the file name is out of range: {EPOCH_RANGE}"


def test_nesting_ten_thousand_deep_is_one_parse_error(spark):
    deep = '{"cluster_id":"c1","collected_at_ms":1,"api_version":1,"response":' + '{"a":' * 10_000 + "1" + "}" * 10_001
    data = (QUORUM_OK + "\n" + deep + "\n" + "[" * 10_000 + "]" * 10_000 + "\n").encode()
    out = records(spark, "quorum", ("quorum/a.jsonl", data)).orderBy("line_number")
    assert [r["parse_error"] for r in out.collect()] == [None, "malformed JSON", "malformed JSON"]


def test_a_bom_at_the_start_of_a_json_lines_file_is_not_part_of_the_record(spark):
    bom = b"\xef\xbb\xbf"
    out = records(
        spark,
        "quorum",
        ("quorum/a.jsonl", bom + QUORUM_OK.encode() + b"\n"),
        ("quorum/b.jsonl.gz", gzip.compress(bom + QUORUM_OK.encode() + b"\n" + b"\xff\n")),
    ).select("source_file", "line_number", "payload", "parse_error")
    expected = spark.createDataFrame(
        [
            ("file:/landing/quorum/a.jsonl", 1, QUORUM_OK, None),
            ("file:/landing/quorum/b.jsonl.gz", 1, QUORUM_OK, None),
            (
                "file:/landing/quorum/b.jsonl.gz",
                2,
                "\ufffd",
                "not UTF-8 text (binary data?); bytes kept in payload_base64",
            ),
        ],
        "source_file STRING, line_number INT, payload STRING, parse_error STRING",
    )
    assert_frames_equal(out, expected, ignore_row_order=True, ignore_nullable=True)


def test_one_invalid_byte_costs_only_its_line(spark):
    bad_line = QUORUM_OK.encode().replace(b'"c1"', b'"c\xff1"')
    data = QUORUM_OK.encode() + b"\r\n" + bad_line + b"\n\n" + QUORUM_OK.replace("600", "601").encode() + b"\n"
    out = records(spark, "quorum", ("quorum/a.jsonl", data)).orderBy("line_number")
    rows = [
        (r["line_number"], r["parse_error"], r["payload_base64"] and base64.b64decode(r["payload_base64"]))
        for r in out.collect()
    ]
    assert rows == [
        (1, None, None),
        (2, "not UTF-8 text (binary data?); bytes kept in payload_base64", bad_line),
        (3, "blank line", None),
        (4, None, None),
    ]
    assert out.where("line_number = 4").first()["collected_at"] == ts(1730000000601)


def test_gunzip_is_bounded_and_never_raises():
    assert gunzip(gzip.compress(b"x" * 100), limit=100) == (b"x" * 100, None)
    data, error = gunzip(gzip.compress(b"x" * 101), limit=100)
    assert data is None and error.startswith("decompressed size exceeds 100 bytes")
    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"cd") + b"\x00\x00") == (b"abcd", None)
    assert gunzip(gzip.compress(b"abc")[:-4]) == (None, "not a valid gzip file (truncated archive)")
    data, error = gunzip(gzip.compress(b"ab") + b"trailing garbage")
    assert data is None and error.startswith("not a valid gzip file")


def test_a_gzip_bomb_is_not_decompressed(spark):
    from quorumlake.bronze.raw import MAX_DECOMPRESSED_BYTES

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\x00" * (1 << 20)
    bomb = b"".join(packer.compress(chunk) for _ in range(MAX_DECOMPRESSED_BYTES // len(chunk) + 1)) + packer.flush()
    assert len(bomb) < 1 << 20
    out = records(spark, "quorum", ("quorum/bomb.jsonl.gz", bomb), ("quorum/a.jsonl", QUORUM_OK.encode()))
    rows = {r["source_file"]: r for r in out.collect()}
    assert rows["file:/landing/quorum/bomb.jsonl.gz"]["parse_error"] == (
        f"decompressed size exceeds {MAX_DECOMPRESSED_BYTES} bytes (MAX_DECOMPRESSED_BYTES); not decompressed"
    )
    assert base64.b64decode(rows["file:/landing/quorum/bomb.jsonl.gz"]["payload_base64"]) == bomb
    assert rows["file:/landing/quorum/a.jsonl"]["parse_error"] is None


def test_a_binary_json_lines_file_with_newlines_stays_one_record(spark):
    # not UTF-8, and holding NUL bytes after invalid lead bytes: binary data, not lines of text
    data = (Path(__file__).parents[1] / "data" / "landing_bad" / "quorum" / "garbage.jsonl").read_bytes()
    assert b"\x00" in data and b"\n" in data
    out = records(spark, "quorum", ("quorum/garbage.jsonl", data)).collect()
    assert len(out) == 1
    assert out[0]["parse_error"] == "not UTF-8 text (binary data?); bytes kept in payload_base64"
    assert base64.b64decode(out[0]["payload_base64"]) == data


# --- large JSON Lines files as pieces -------------------------------------------------------------------------------


def test_a_large_json_lines_file_is_cut_after_newlines_and_counts_the_lines_before_each_piece():
    data = b"aaaa\nbb\ncccccccccccc\nd\n\ne"
    pieces = line_pieces("quorum", "q/cluster=c1/1.jsonl", data, data, 6)
    assert [(p.first_line, p.data) for p in pieces.pieces] == [
        (0, b"aaaa\n"),
        (1, b"bb\n"),
        (2, b"cccccccccccc\n"),  # a line longer than a piece is a piece of its own
        (3, b"d\n\n"),
        (5, b"e"),
    ]
    assert b"".join(p.data for p in pieces.pieces) == data
    assert pieces.content_hash == hashlib.sha256(data).hexdigest() == pieces.file_sha256


@pytest.mark.parametrize(
    ("source", "path", "data"),
    [
        ("quorum", "q/a.jsonl", b"small\n"),  # not larger than a piece
        ("quorum", "q/a.replication.txt", b"NodeId\n" * 10),  # one record per file
        ("metrics", "m/a.prom.gz", b"x 1\n" * 10),
        ("quorum", "q/a.jsonl", b"ok\n\xff\n" * 10),  # not UTF-8: judged line by line in Spark, whole
        ("quorum", "q/a.jsonl", b"ok\n\x00\n" * 10),  # a NUL: not text
    ],
)
def test_only_valid_text_json_lines_files_are_cut(source, path, data):
    assert line_pieces(source, path, data, data, 8) is None


def _pieces_frame(spark, path: str, content: bytes, data: bytes, piece_bytes: int):
    cut = line_pieces("quorum", path, content, data, piece_bytes)
    rows = [
        (f"file:/landing/{path}", MTIME, len(content), None, bytearray(p.data), None)
        + (cut.content_hash, cut.file_sha256, p.first_line)
        for p in cut.pieces
    ]
    assert len(rows) > 2
    schema = BINARY_FILE_SCHEMA + ", data BINARY, read_error STRING, " + PIECE_SCHEMA
    return spark.createDataFrame(rows, schema)


@pytest.mark.parametrize("gz", [False, True])
def test_a_file_in_pieces_gives_exactly_the_records_of_the_whole_file(spark, gz):
    bom = "\ufeff"
    lines = [
        bom + QUORUM_OK,  # a BOM starts the file: not part of the record
        "",
        "not json\r",
        bom + QUORUM_OK,  # a BOM at the start of a later piece is part of its record
        QUORUM_OK.replace("c1", "c2"),
        "{}",
        QUORUM_OK,
    ]
    data = "\n".join(lines).encode()  # no final newline
    content = gzip.compress(data) if gz else data
    path = "quorum/cluster=c1/1730000000000.jsonl" + (".gz" if gz else "")
    whole = records(spark, "quorum", (path, content))
    pieces = build_raw_records(_pieces_frame(spark, path, content, data, len(QUORUM_OK) + 4), "quorum", RUN_AT)
    assert whole.count() == len(lines)
    assert_frames_equal(pieces, whole, ignore_row_order=True, ignore_nullable=True)
