"""bronze.quorum_raw, bronze.metrics_raw, bronze.partitions_raw: one row per landing record, raw and lossless.

A landing file arrives as one row of Spark's `binaryFile` source (`path`, `modificationTime`, `length`, `content`).
JSON Lines files give one record per line; CLI captures and Prometheus scrapes are one record per file. Every
record keeps its text unchanged in `payload` (or its bytes in `payload_base64` when they are not UTF-8 text), and
gets a `parse_error` when it cannot be read; nothing is dropped.

`record_id` is the MERGE key that makes ingestion idempotent: it hashes the record's format, the path segments
that carry meaning (`cluster=`, `node=`, the capture time in the file name), the file's content and the line
number, so the same file arriving again, under another name or in another date folder, adds nothing. An empty
file has no content to identify it by, so its path stands in for the content.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from quorumlake.contract.tables import BRONZE_QUORUM_RAW

BINARY_FILE_SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
# A piece of a file (`line_pieces`): `data` holds the piece, `content` is NULL, and these carry the rest.
_PIECE_COLUMNS = (("content_hash", "STRING"), ("file_sha256", "STRING"), ("first_line", "INT"))
PIECE_SCHEMA = ", ".join(f"{name} {sql_type}" for name, sql_type in _PIECE_COLUMNS)

# (source folder, file-name suffix without .gz) -> (format, one record per line?)
FORMATS: dict[str, list[tuple[str, str, bool]]] = {
    "quorum": [
        (".replication.txt", "quorum_cli_replication", False),
        (".status.txt", "quorum_cli_status", False),
        (".jsonl", "describe_quorum_json", True),
    ],
    "metrics": [
        (".prom", "prometheus_text", False),
        (".jsonl", "jmx_json", True),
    ],
    "partitions": [
        (".topics.txt", "kafka_topics_cli", False),
        (".jsonl", "partition_json", True),
    ],
}

# A JSON integer beyond 64 bits is a DECIMAL(p,0) in a VARIANT: still an integer, then rejected as out of range.
_INTEGER = "^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL\\([0-9]+,0\\))$"
_NUMBER = "^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL\\(.*\\))$"
_INT_ARRAY = "^ARRAY<(TINYINT|SMALLINT|INT|BIGINT|VOID|DECIMAL\\([0-9]+,0\\))>$"

# A gzip file may not decompress to more than this (a "gzip bomb" must not exhaust the executor's memory).
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
# Capture times must be epoch milliseconds from 1970-01-01 to 9999-12-31T23:59:59.999Z: what SQL TIMESTAMP,
# Python's datetime and every BI tool can hold (Spark itself would overflow, or make year 287168, beyond it).
MIN_EPOCH_MS = 0
MAX_EPOCH_MS = 253_402_300_799_999
_EPOCH_RANGE = f"between {MIN_EPOCH_MS} and {MAX_EPOCH_MS} (year 9999)"


def build_raw_records(files: DataFrame, source: str, ingested_at: datetime) -> DataFrame:
    """One bronze row per record of the given landing files (columns of BINARY_FILE_SCHEMA; a reader that read
    them already may add `data` and `read_error`, and hand a large JSON Lines file over as pieces with the
    columns of PIECE_SCHEMA)."""
    if source not in FORMATS:
        raise ValueError(f"unknown landing source {source!r}; expected one of {sorted(FORMATS)}")
    for name, sql_type in _PIECE_COLUMNS:  # given for the pieces of a large file (see `line_pieces`)
        if name not in files.columns:
            files = files.withColumn(name, F.lit(None).cast(sql_type))
    return (
        files.transform(_decompressed)
        .transform(lambda df: _classified(df, source))
        .transform(_split_into_records)
        .transform(lambda df: _parsed(df, source))
        .withColumn("ingested_at", F.lit(ingested_at).cast("timestamp"))
        .transform(_keyed)
        .select(*BRONZE_QUORUM_RAW.column_names)
    )


# --- files -> decoded text ------------------------------------------------------------------------------------------


def gunzip(data: bytes | None, limit: int = MAX_DECOMPRESSED_BYTES) -> tuple[bytes | None, str | None]:
    """Decompressed bytes, or None and the reason they could not be decompressed.

    Decompression stops as soon as the output exceeds `limit` bytes, so a small archive of a huge file (a gzip
    bomb) costs at most `limit` bytes of memory. Concatenated gzip members are read like `gzip.decompress` reads
    them. Never raises: any failure is the reason."""
    if data is None:
        return None, None
    try:
        out = bytearray()
        rest = bytes(data)
        while True:
            member = zlib.decompressobj(wbits=31)  # 31: gzip header and trailer
            out += member.decompress(rest, limit - len(out) + 1)
            if len(out) > limit:
                return None, f"decompressed size exceeds {limit} bytes (MAX_DECOMPRESSED_BYTES); not decompressed"
            if not member.eof:
                return None, "not a valid gzip file (truncated archive)"
            rest = member.unused_data
            if not rest.strip(b"\x00"):
                return bytes(out), None
    except zlib.error as exc:
        return None, f"not a valid gzip file ({exc})"
    except Exception as exc:
        return None, f"not a valid gzip file ({type(exc).__name__}: {exc})"


_gunzip_udf = F.udf(
    gunzip,
    T.StructType([T.StructField("data", T.BinaryType()), T.StructField("error", T.StringType())]),
    useArrow=True,
)


def _decompressed(files: DataFrame) -> DataFrame:
    """`data` holds the file's bytes after gzip; `decode_error` says why it could not be decompressed.

    A reader that already read and decompressed the files (`quorumlake.pipelines.storage.landing`) passes `data` and `read_error`."""
    if "data" in files.columns:  # `data` is given for .gz files and pieces only; else a file's data is its content
        given = F.col("data").isNotNull() | F.lower(F.col("path")).endswith(".gz")
        data = F.when(given, F.col("data")).otherwise(F.col("content"))
        return files.withColumn("data", data).withColumn("decode_error", F.col("read_error")).drop("read_error")
    is_gz = F.lower(F.col("path")).endswith(".gz")
    gz = (
        files.where(is_gz)
        .withColumn("_gz", _gunzip_udf(F.col("content")))
        .select("*", F.col("_gz.data").alias("data"), F.col("_gz.error").alias("decode_error"))
        .drop("_gz")
    )
    plain = (
        files.where(~is_gz).withColumn("data", F.col("content")).withColumn("decode_error", F.lit(None).cast("string"))
    )
    return gz.unionByName(plain)


def _classified(files: DataFrame, source: str) -> DataFrame:
    """Format, whether it is line-oriented, and what the path says (cluster, node, capture time)."""
    file_name = F.regexp_extract(F.col("path"), r"([^/]*)$", 1)
    base_name = F.regexp_replace(file_name, r"(?i)\.gz$", "")
    fmt: Column = F.lit("unknown")
    per_line: Column = F.lit(False)
    for suffix, name, lines in reversed(FORMATS[source]):
        matches = F.lower(base_name).endswith(suffix)
        fmt = F.when(matches, F.lit(name)).otherwise(fmt)
        per_line = F.when(matches, F.lit(lines)).otherwise(per_line)
    text = F.col("data").cast("string")
    return files.select(
        F.col("path").alias("source_file"),
        F.col("modificationTime").alias("file_modified_at"),
        F.col("length").alias("file_size"),
        F.col("content"),
        F.col("data"),
        F.col("decode_error"),
        *(F.col(name) for name, _ in _PIECE_COLUMNS),
        fmt.alias("format"),
        per_line.alias("per_line"),
        F.lit(source).alias("source"),
        F.lit(", ".join(f"*{suffix}[.gz]" for suffix, _, _ in FORMATS[source])).alias("expected_suffixes"),
        _path_segment("cluster").alias("path_cluster_id"),
        _path_segment("node").alias("path_node"),
        F.expr(
            r"try_cast(nullif(regexp_extract("
            "regexp_extract(path, '([^/]*)$', 1), '^(-?[0-9]+)\\.', 1), '') AS BIGINT)"
        ).alias("path_collected_at_ms"),
        text.alias("text"),
        F.when(F.col("data").isNotNull(), F.expr("is_valid_utf8(cast(data AS STRING))")).alias("is_utf8"),
        # on the bytes: string functions walk UTF-8 characters and can step over a NUL after an invalid lead byte
        F.when(F.col("data").isNotNull(), F.expr("contains(data, X'00')")).alias("has_nul"),
    )


def _path_segment(key: str) -> Column:
    value = F.regexp_extract(F.col("path"), rf"/{key}=([^/]+)/", 1)
    return F.when(value != "", value)


# --- large JSON Lines files -> pieces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A run of whole lines of a JSON Lines file: its bytes and how many lines come before it in the file."""

    first_line: int
    data: bytes


@dataclass(frozen=True)
class Pieces:
    """A file handed to Spark as pieces, with what needs the whole file computed once, here."""

    content_hash: str  # sha256 of the file's data (after gzip), as `sha2(data, 256)` gives it
    file_sha256: str  # sha256 of the bytes as stored
    pieces: list[Piece]


def line_pieces(source: str, path: str, content: bytes, data: bytes, max_bytes: int) -> Pieces | None:
    """A JSON Lines file larger than `max_bytes`, cut after newlines into pieces of about `max_bytes`, when its
    records come out of the pieces exactly as out of the whole file: valid UTF-8 without NUL bytes (the rare file
    that is not stays whole, judged line by line in Spark). Otherwise None.

    Spark holds a whole file as one value, copied several times while it is split into lines: a file of tens of MB
    costs hundreds of MB of the JVM's heap, where a piece costs a few. A line longer than `max_bytes` is a piece of
    its own."""
    if len(data) <= max_bytes or not _is_line_format(source, path) or b"\x00" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    pieces, start, lines = [], 0, 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + max_bytes) + 1
        if end <= start:  # no newline within max_bytes: the piece runs to the end of this line
            end = data.find(b"\n", start + max_bytes) + 1 or len(data)
        piece = data[start:end]
        pieces.append(Piece(lines, piece))
        lines += piece.count(b"\n")
        start = end
    return Pieces(hashlib.sha256(data).hexdigest(), hashlib.sha256(content).hexdigest(), pieces)


def _is_line_format(source: str, path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower().removesuffix(".gz")
    return next((lines for suffix, _, lines in FORMATS.get(source, []) if name.endswith(suffix)), False)


# --- text -> records ------------------------------------------------------------------------------------------------


def split_lines(data: bytes | None) -> list[dict] | None:
    """The lines of a JSON Lines file that is not valid UTF-8 as a whole, each judged on its own.

    One entry per line (`pos` 1-based, the final newline does not start a line): `line` is the text when the line
    is valid UTF-8 (a CR before the newline and a BOM at the start of the file removed), else the text with
    invalid bytes replaced and `raw` holds the line's bytes. Never raises."""
    if data is None:
        return None
    try:
        body = bytes(data)
        if body.startswith(_BOM):
            body = body[len(_BOM) :]
        parts = body.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        out = []
        for pos, part in enumerate(parts, start=1):
            part = part.removesuffix(b"\r")
            try:
                out.append({"pos": pos, "line": part.decode("utf-8"), "raw": None})
            except UnicodeDecodeError:
                out.append({"pos": pos, "line": part.decode("utf-8", "replace"), "raw": part})
        return out
    except Exception:
        return None


_BOM = b"\xef\xbb\xbf"
_LINE = T.StructType(
    [
        T.StructField("pos", T.IntegerType()),
        T.StructField("line", T.StringType()),
        T.StructField("raw", T.BinaryType()),
    ]
)
_split_lines_udf = F.udf(split_lines, T.ArrayType(_LINE), useArrow=True)
_NOT_UTF8 = "not UTF-8 text (binary data?); bytes kept in payload_base64"


def _split_into_records(files: DataFrame) -> DataFrame:
    """One row per record: a line of a JSON Lines file, else the whole file.

    A JSON Lines file is split into lines before its text is judged, so one invalid byte costs one line: a file
    that is valid UTF-8 is split by Spark; one that is not (but has no NUL byte, which no text file has) is split
    as bytes, line by line. A UTF-8 byte order mark at the start of the file is not part of the first record.
    Everything that needs the whole file (hashes, the file-level error) is computed once per file, before the
    file is split: a record row must not carry (or re-hash) its file's full content."""
    content_hash = (
        F.when(F.col("file_size") == 0, F.concat(F.lit("empty:"), F.col("source_file")))
        .when(F.col("content_hash").isNotNull(), F.col("content_hash"))
        .when(
            F.col("content").isNull(),
            F.concat(F.lit("unread:"), F.col("source_file"), F.lit(":"), F.col("file_modified_at").cast("string")),
        )
        .otherwise(F.sha2(F.coalesce(F.col("data"), F.col("content")), 256))
    )
    first_line = F.coalesce(F.col("first_line"), F.lit(0))
    files = files.select(
        *(c for c in files.columns if c not in ("content_hash", "file_sha256", "first_line")),
        content_hash.alias("content_hash"),
        F.coalesce(F.col("file_sha256"), F.sha2(F.col("content"), 256)).alias("file_sha256"),
        first_line.alias("first_line"),
        _file_error().alias("file_error"),
    )
    has_text = F.col("data").isNotNull() & (F.length("data") > 0)
    as_text = F.col("per_line") & has_text & F.col("is_utf8")
    as_bytes = F.coalesce(F.col("per_line") & has_text & ~F.col("is_utf8") & ~F.col("has_nul"), F.lit(False))
    text = F.when(F.col("first_line") == 0, F.regexp_replace(F.col("text"), "^\ufeff", "")).otherwise(F.col("text"))
    lines = F.split(text, "\n", -1)
    lines = F.when(text.endswith("\n"), F.slice(lines, 1, F.size(lines) - 1)).otherwise(lines)
    no_bytes = F.lit(None).cast("binary")
    no_text = F.lit(None).cast("string")
    text_lines = F.transform(
        lines,
        lambda line, i: F.struct(
            (i + 1 + F.col("first_line")).alias("pos"),
            F.regexp_replace(line, "\r$", "").alias("line"),
            no_bytes.alias("raw"),
            no_text.alias("b64"),
        ),
    )
    byte_lines = F.transform(
        _split_lines_udf(F.col("data")),
        lambda r: F.struct(
            r["pos"].alias("pos"), r["line"].alias("line"), r["raw"].alias("raw"), F.base64(r["raw"]).alias("b64")
        ),
    )
    # a whole-file record: its text, or for bytes that are not text, their repaired text and base64
    undecodable = F.col("data").isNull() | ~F.coalesce(F.col("is_utf8"), F.lit(False))
    whole_file = F.array(
        F.struct(
            F.lit(None).cast("int").alias("pos"),
            F.when(undecodable, F.expr("make_valid_utf8(cast(coalesce(data, content) AS STRING))"))
            .otherwise(F.col("text"))
            .alias("line"),
            no_bytes.alias("raw"),
            F.when(undecodable, F.base64(F.col("content"))).alias("b64"),
        )
    )
    # Everything that needs the file's bytes is inside the generator, evaluated once per file: the record rows
    # carry only the small per-file columns (carrying the file along would copy it once per line).
    small = [c for c in files.columns if c not in ("content", "data", "text", "first_line")]
    # Only files split as bytes (rare) go through the Python UDF: its evaluation queues every input row, whole file
    # included, in the JVM while Python works, which for a chunk of ordinary files would cost memory for nothing.
    plain = files.where(~as_bytes).select(
        *small, F.explode(F.when(as_text, text_lines).otherwise(whole_file)).alias("_record")
    )
    as_lines = files.where(as_bytes).select(*small, F.explode(F.coalesce(byte_lines, whole_file)).alias("_record"))
    exploded = plain.unionByName(as_lines)
    split = F.col("_record.pos").isNotNull()
    return exploded.select(
        *small,
        F.col("_record.pos").alias("line_number"),
        F.col("_record.line").alias("payload"),
        F.col("_record.b64").alias("payload_base64"),
        F.when(split & F.col("_record.raw").isNotNull(), F.lit(_NOT_UTF8)).alias("line_error"),
    )


# --- records -> envelope fields and parse errors --------------------------------------------------------------------

# Each source has one JSON Lines format. The top-level fields its checks read, with the types each is read as: the
# JSON type of every such field (and each typed value) is computed once per record, as a column that the envelope
# and every check then refer to by name. Written inline, the same `variant_get` expressions would be repeated in every
# check that reads a field, and Spark's optimizer would inline them further into a plan of many KB of expressions
# (analysed, optimized and evaluated per record); and each source carries only its own format's checks.
_JSON_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "describe_quorum_json": {
        "cluster_id": ("string",),
        "collected_at_ms": ("bigint",),
        "api_version": ("int",),
        "response": (),
    },
    "jmx_json": {
        "cluster_id": ("string",),
        "node_id": ("int",),
        "scraped_at_ms": ("bigint",),
        "mbean": ("string",),
        "attribute": ("string",),
        "value": (),
    },
    "partition_json": {
        "cluster_id": ("string",),
        "collected_at_ms": ("bigint",),
        "topic": (),
        "partition": ("int",),
        "leader": ("int",),
        "replicas": ("array<int>",),
        "isr": ("array<int>",),
        "min_isr": ("int",),
        "adding_replicas": ("array<int>",),
        "removing_replicas": ("array<int>",),
        "elr": ("array<int>",),
    },
}
# the field that holds a JSON record's capture time
_TIME_FIELD = {
    "describe_quorum_json": "collected_at_ms",
    "jmx_json": "scraped_at_ms",
    "partition_json": "collected_at_ms",
}


def _json_format(source: str) -> str:
    return next(name for _, name, lines in FORMATS[source] if lines)


def _parsed(records: DataFrame, source: str) -> DataFrame:
    fmt = F.col("format")
    json_format = _json_format(source)
    fields = _JSON_FIELDS[json_format]
    with_json = records.withColumn("_json", F.when(fmt == json_format, F.expr("try_parse_json(payload)")))
    helpers = [F.expr(f"schema_of_variant(variant_get(_json, '$.{f}'))").alias(_kind_name(f)) for f in fields]
    helpers += [
        F.expr(f"try_variant_get(_json, '$.{f}', '{t}')").alias(_value_name(f, t))
        for f, types in fields.items()
        for t in types
    ]
    with_fields = with_json.select("*", *helpers)

    cluster_id = F.when(
        fmt == json_format, F.coalesce(_get("cluster_id", "string"), F.col("path_cluster_id"))
    ).otherwise(F.col("path_cluster_id"))
    collected_ms = F.when(fmt == json_format, _get(_TIME_FIELD[json_format], "bigint")).otherwise(
        F.col("path_collected_at_ms")
    )
    no_int = F.lit(None).cast("int")
    node_id = no_int
    if source == "metrics":
        node_id = F.when(fmt == "jmx_json", F.coalesce(_get("node_id", "int"), _path_node_id())).when(
            fmt == "prometheus_text", _path_node_id()
        )
    api_version = F.when(fmt == "describe_quorum_json", _get("api_version", "int")) if source == "quorum" else no_int

    helper_names = [name for name in with_fields.columns if name not in with_json.columns]
    return with_fields.select(
        "*",
        cluster_id.alias("cluster_id"),
        node_id.alias("node_id"),
        epoch_ms_to_timestamp(collected_ms).alias("collected_at"),
        api_version.alias("api_version"),
        _parse_error(source).alias("parse_error"),
    ).drop("_json", *helper_names)


def _kind_name(field: str) -> str:
    return f"_kind_{field}"


def _value_name(field: str, sql_type: str) -> str:
    return f"_value_{field}_" + re.sub(r"[^a-z]", "_", sql_type)


def _kind(field: str) -> Column:
    """The JSON type of a top-level field as Spark names it (BIGINT, STRING, OBJECT<...>, VOID for null)."""
    return F.col(_kind_name(field))


def _value(field: str, sql_type: str) -> Column:
    """The field read as `sql_type` (`try_variant_get`: NULL when it cannot be)."""
    return F.col(_value_name(field, sql_type))


def _get(field: str, sql_type: str) -> Column:
    """The field as `sql_type` when the JSON value has a matching type, else NULL."""
    pattern = {"string": "^STRING$", "bigint": _INTEGER, "int": _INTEGER}[sql_type]
    return F.when(_kind(field).rlike(pattern), _value(field, sql_type))


def epoch_ms_to_timestamp(ms: Column) -> Column:
    """Epoch milliseconds as TIMESTAMP; NULL outside MIN_EPOCH_MS..MAX_EPOCH_MS (never an overflow error)."""
    return F.timestamp_millis(F.when(ms.between(MIN_EPOCH_MS, MAX_EPOCH_MS), ms))


def _path_node_id() -> Column:
    return F.expr("try_cast(path_node AS INT)")


def _field_check(
    field: str, pattern: str, expected: str, required: bool = True, in_range: Column | None = None, range_text: str = ""
) -> Column:
    """Why a field is unusable: missing, null, of another JSON type, or (when `in_range` is given and false)
    beyond what its column can hold."""
    kind = _kind(field)
    missing = F.lit(f"missing field '{field}'") if required else F.lit(None).cast("string")
    check = (
        F.when(kind.isNull(), missing)
        .when(kind == "VOID", F.lit(f"field '{field}' is null") if required else F.lit(None).cast("string"))
        .when(~kind.rlike(pattern), F.concat(F.lit(f"field '{field}' must be {expected}, not "), F.lower(kind)))
    )
    if in_range is not None:
        check = check.when(~F.coalesce(in_range, F.lit(False)), F.lit(f"field '{field}' is out of range: {range_text}"))
    return check


def _int_field(field: str, required: bool = True) -> Column:
    """A 32-bit integer field (ids, versions, partition numbers)."""
    return _field_check(
        field, _INTEGER, "an integer", required, _value(field, "int").isNotNull(), "not a 32-bit integer"
    )


def _epoch_ms_field(field: str) -> Column:
    value = _value(field, "bigint")
    return _field_check(
        field,
        _INTEGER,
        "an integer",
        True,
        value.between(MIN_EPOCH_MS, MAX_EPOCH_MS),
        f"epoch milliseconds must be {_EPOCH_RANGE}",
    )


def _int_array_field(field: str, required: bool = True) -> Column:
    values = _value(field, "array<int>")
    return _field_check(
        field,
        _INT_ARRAY,
        "an array of integers",
        required,
        ~F.exists(values, lambda x: x.isNull()),
        "every element must be a 32-bit integer",
    )


def _json_errors(checks: list[Column]) -> Column:
    """Errors of a JSON Lines record: blank, malformed, not an object, then each field check."""
    blank = F.trim(F.col("payload")) == ""
    not_json = F.col("_json").isNull()
    not_object = ~F.expr("schema_of_variant(_json)").startswith("OBJECT")
    structural = (
        F.when(blank, F.lit("blank line"))
        .when(not_json, F.lit("malformed JSON"))
        .when(not_object, F.lit("not a JSON object"))
    )
    return F.coalesce(structural, F.concat_ws("; ", F.array(*checks)))


def _cluster_check() -> Column:
    kind = _kind("cluster_id")
    return (
        F.when(
            kind.isNull() & F.col("path_cluster_id").isNull(),
            F.lit("missing field 'cluster_id' (and no cluster= path segment)"),
        )
        .when(kind == "VOID", F.lit("field 'cluster_id' is null"))
        .when(
            kind.isNotNull() & (kind != "STRING"),
            F.concat(F.lit("field 'cluster_id' must be a string, not "), F.lower(kind)),
        )
        .when((kind == "STRING") & (F.trim(_value("cluster_id", "string")) == ""), F.lit("field 'cluster_id' is empty"))
    )


def _node_check() -> Column:
    kind = _kind("node_id")
    return (
        F.when(
            kind.isNull() & F.col("path_node").isNull(), F.lit("missing field 'node_id' (and no node= path segment)")
        )
        .when(kind.isNull() & _path_node_id().isNull(), F.lit("node= path segment is not an integer"))
        .when(kind == "VOID", F.lit("field 'node_id' is null"))
        .when(
            kind.isNotNull() & ~kind.rlike(_INTEGER),
            F.concat(F.lit("field 'node_id' must be an integer, not "), F.lower(kind)),
        )
        .when(
            kind.isNotNull() & _value("node_id", "int").isNull(),
            F.lit("field 'node_id' is out of range: not a 32-bit integer"),
        )
    )


def _whole_file_errors(content_check: Column, needs_node: bool) -> Column:
    checks = [
        F.when(F.col("path_cluster_id").isNull(), F.lit("no cluster=<id> segment in the path")),
        F.when(F.col("path_collected_at_ms").isNull(), F.lit("file name does not start with <collected_at_ms>.")).when(
            ~F.col("path_collected_at_ms").between(MIN_EPOCH_MS, MAX_EPOCH_MS),
            F.lit(f"the time in the file name is out of range: epoch milliseconds must be {_EPOCH_RANGE}"),
        ),
    ]
    if needs_node:
        checks.append(
            F.when(F.col("path_node").isNull(), F.lit("no node=<id> segment in the path")).when(
                F.expr("try_cast(path_node AS INT)").isNull(), F.lit("node= path segment is not an integer")
            )
        )
    checks.append(content_check)
    return F.concat_ws("; ", F.array(*checks))


def _has_line(pattern: str) -> Column:
    return F.col("payload").rlike(f"(?m){pattern}")


def _file_error() -> Column:
    """Why a whole file cannot be read (needs the file-level columns data, is_utf8, text)."""
    return (
        F.when(F.col("decode_error").isNotNull(), F.col("decode_error"))
        .when(F.col("data").isNotNull() & ~F.col("is_utf8") & (~F.col("per_line") | F.col("has_nul")), F.lit(_NOT_UTF8))
        .when(F.col("file_size") == 0, F.lit("empty file"))
        .when(F.length("text") == 0, F.lit("empty file after decompression"))
    )


def _format_errors(fmt: str) -> Column:
    """Why a record of format `fmt` cannot be read (beyond what its file and line say)."""
    if fmt == "describe_quorum_json":
        return _json_errors(
            [
                _cluster_check(),
                _epoch_ms_field("collected_at_ms"),
                _int_field("api_version"),
                F.when(_get("api_version", "int") < 0, F.lit("field 'api_version' is negative")),
                _field_check("response", "^OBJECT", "an object"),
            ]
        )
    if fmt == "jmx_json":
        return _json_errors(
            [
                _cluster_check(),
                _node_check(),
                _epoch_ms_field("scraped_at_ms"),
                _field_check("mbean", "^STRING$", "a string"),
                F.when(F.trim(_value("mbean", "string")) == "", F.lit("field 'mbean' is empty")),
                _field_check("attribute", "^STRING$", "a string"),
                F.when(F.trim(_value("attribute", "string")) == "", F.lit("field 'attribute' is empty")),
                _field_check("value", _NUMBER, "a number"),
            ]
        )
    if fmt == "partition_json":
        return _json_errors(
            [
                _cluster_check(),
                _epoch_ms_field("collected_at_ms"),
                _field_check("topic", "^STRING$", "a string"),
                _int_field("partition"),
                _int_field("leader"),
                _int_array_field("replicas"),
                _int_array_field("isr"),
                _int_field("min_isr"),
                _int_array_field("adding_replicas", required=False),
                _int_array_field("removing_replicas", required=False),
                _int_array_field("elr", required=False),
            ]
        )
    if fmt == "quorum_cli_replication":
        return _whole_file_errors(
            F.when(~_has_line(r"^NodeId\s"), F.lit("not a 'describe --replication' capture (no NodeId header)")), False
        )
    if fmt == "quorum_cli_status":
        return _whole_file_errors(
            F.when(~_has_line(r"^LeaderId:"), F.lit("not a 'describe --status' capture (no LeaderId line)")), False
        )
    if fmt == "kafka_topics_cli":
        return _whole_file_errors(
            F.when(~_has_line(r"^\s*Topic:"), F.lit("not a 'kafka-topics --describe' capture (no Topic: line)")), False
        )
    if fmt == "prometheus_text":
        return _whole_file_errors(F.when(~_has_line(r"^[ \t]*[a-zA-Z_:]"), F.lit("no samples in the scrape")), True)
    raise ValueError(f"unknown format {fmt!r}")


def _parse_error(source: str) -> Column:
    """Why a record of `source` cannot be read, if it cannot: the checks of the source's own formats only (a file's
    format is one of them, or unknown)."""
    fmt = F.col("format")
    unknown = F.concat(
        F.lit("unrecognized file name in "),
        F.col("source"),
        F.lit("/: expected one of "),
        F.col("expected_suffixes"),
    )
    by_format: Column | None = None
    for _, name, _ in FORMATS[source]:
        branch = _format_errors(name)
        by_format = F.when(fmt == name, branch) if by_format is None else by_format.when(fmt == name, branch)
    by_format = by_format.when(fmt == "unknown", unknown)
    message = F.coalesce(F.col("file_error"), F.col("line_error"), by_format)
    return F.when(message != "", message)


def _keyed(records: DataFrame) -> DataFrame:
    key = F.concat_ws(
        "\u0001",
        F.col("format"),
        F.coalesce(F.col("path_cluster_id"), F.lit("")),
        F.coalesce(F.col("path_node"), F.lit("")),
        F.coalesce(F.col("path_collected_at_ms").cast("string"), F.lit("")),
        F.col("content_hash"),
        F.coalesce(F.col("line_number").cast("string"), F.lit("")),
    )
    return records.withColumn("record_id", F.sha2(key, 256))
