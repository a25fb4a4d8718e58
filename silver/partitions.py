"""silver.partition_states: one row per partition per snapshot (cluster, capture time, topic, partition), from
partition-state JSON Lines and `kafka-topics --describe` captures, with the KIP-427 flags as `kafka-topics` decides
them (docs/contract.md §2): offline = no leader; under min ISR = offline or |ISR| < min ISR; at min ISR = |ISR| =
min ISR; under-replicated = replication factor (replicas minus adding replicas) − |ISR| > 0; `status` is the most
severe.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from quorumlake.contract.tables import SILVER_PARTITION_STATES
from quorumlake.silver.cli_text import CaptureError, parse_topics
from quorumlake.silver.common import latest_per_key, parsed_once, rejected
from quorumlake.silver.udf_guard import guarded

_JSON_SCHEMA = (
    "topic STRING, partition INT, leader INT, replicas ARRAY<INT>, isr ARRAY<INT>, min_isr INT, "
    "adding_replicas ARRAY<INT>, removing_replicas ARRAY<INT>, elr ARRAY<INT>"
)


# the partition fields both sources give, under the same names
_FIELDS = ("topic", "partition", "replicas", "isr", "min_isr", "adding_replicas", "removing_replicas", "elr")


def build_partition_states(bronze: DataFrame, default_min_isr: int = 1) -> tuple[DataFrame, DataFrame]:
    """(partition states, rejected records) from readable bronze.partitions_raw rows.

    Needs record_id, format, cluster_id, collected_at, payload, source_file, ingested_at, parse_error. All records
    of a snapshot must be in the input; a partition seen in several records keeps the later-ingested one.
    """
    return split_partition_states(*parse_partition_states(bronze, default_min_isr))


def parse_partition_states(bronze: DataFrame, default_min_isr: int = 1) -> tuple[DataFrame, DataFrame]:
    """The expensive half of `build_partition_states`: (partition rows of the JSON records, typed; CLI captures
    with `_parsed`, their partitions or the reason they cannot be read)."""
    readable = bronze.where(F.col("parse_error").isNull())
    from_json = (
        readable.where(F.col("format") == "partition_json")
        .select(
            "cluster_id",
            "collected_at",
            "record_id",
            "source_file",
            "ingested_at",
            F.from_json("payload", _JSON_SCHEMA).alias("_p"),
            F.lit("json").alias("source"),
            F.lit(0).alias("_line"),
        )
        .select(
            "*",
            *[F.col(f"_p.{c}").alias(c) for c in _FIELDS],
            F.when(F.col("_p.leader") != -1, F.col("_p.leader")).alias("leader_id"),
        )
        .drop("_p")
    )

    captures = parsed_once(
        readable.where(F.col("format") == "kafka_topics_cli"), _parsed=_topics_udf("payload", F.lit(default_min_isr))
    )
    return from_json, captures


def split_partition_states(from_json: DataFrame, captures: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(partition states, rejected records) from `parse_partition_states`' two parsed frames."""
    bad = rejected(
        captures.where(F.col("_parsed.error").isNotNull()),
        "silver.partition_states",
        ["topics_capture_parses"],
        F.col("_parsed.error"),
    )
    from_cli = (
        captures.where(F.col("_parsed.error").isNull())
        .select(
            "cluster_id",
            "collected_at",
            "record_id",
            "source_file",
            "ingested_at",
            F.lit("cli").alias("source"),
            F.explode("_parsed.partitions").alias("_p"),
        )
        .select(
            "cluster_id",
            "collected_at",
            "record_id",
            "source_file",
            "ingested_at",
            "source",
            F.col("_p.line_number").alias("_line"),
            *[F.col(f"_p.{c}").alias(c) for c in _FIELDS],
            F.col("_p.leader_id").alias("leader_id"),
        )
    )
    rows = latest_per_key(
        from_json.unionByName(from_cli),
        ["cluster_id", "collected_at", "topic", "partition"],
        order=["ingested_at", "record_id", "_line"],
    )
    return rows.transform(with_partition_flags).select(*SILVER_PARTITION_STATES.column_names), bad


def with_partition_flags(rows: DataFrame) -> DataFrame:
    """Add replication_factor, isr_size, the four flags and status (needs leader_id, replicas, isr, min_isr,
    adding_replicas)."""
    adding = F.coalesce(F.col("adding_replicas"), F.array().cast("array<int>"))
    rf = F.size(F.filter("replicas", lambda r: ~F.array_contains(adding, r)))
    isr_size = F.size("isr")
    offline = F.col("leader_id").isNull()
    return (
        rows.withColumn("replication_factor", rf)
        .withColumn("isr_size", isr_size)
        .withColumn("is_offline", offline)
        .withColumn("is_under_min_isr", offline | (isr_size < F.col("min_isr")))
        .withColumn("is_at_min_isr", isr_size == F.col("min_isr"))
        .withColumn("is_under_replicated", (F.col("replication_factor") - isr_size) > 0)
        .withColumn("status", _status())
    )


def _status() -> Column:
    return (
        F.when(F.col("is_offline"), "offline")
        .when(F.col("is_under_min_isr"), "under_min_isr")
        .when(F.col("is_at_min_isr"), "at_min_isr")
        .when(F.col("is_under_replicated"), "under_replicated")
        .otherwise("healthy")
    )


_INTS = T.ArrayType(T.IntegerType())
_TOPICS = T.StructType(
    [
        T.StructField("error", T.StringType()),
        T.StructField(
            "partitions",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("topic", T.StringType()),
                        T.StructField("partition", T.IntegerType()),
                        T.StructField("leader_id", T.IntegerType()),
                        T.StructField("replicas", _INTS),
                        T.StructField("isr", _INTS),
                        T.StructField("min_isr", T.IntegerType()),
                        T.StructField("adding_replicas", _INTS),
                        T.StructField("removing_replicas", _INTS),
                        T.StructField("elr", _INTS),
                        T.StructField("line_number", T.IntegerType()),
                    ]
                )
            ),
        ),
    ]
)


def topics_capture(text: str, default_min_isr: int) -> dict:
    """Partitions of a `kafka-topics --describe` capture, or the reason it cannot be read."""
    try:
        partitions = parse_topics(text, default_min_isr)
    except CaptureError as exc:
        return {"error": str(exc), "partitions": None}
    if not partitions:
        return {"error": "no partition lines in the capture", "partitions": None}
    return {"error": None, "partitions": partitions}


_topics_udf = F.udf(
    guarded(topics_capture, _TOPICS, lambda reason: {"error": reason, "partitions": None}), _TOPICS, useArrow=True
)
