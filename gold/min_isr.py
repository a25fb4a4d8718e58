"""The two min-ISR rules over silver.partition_states rows (KIP-966, KAFKA-21377).

- `kafka_topics`: what `kafka-topics --describe --under-min-isr-partitions` / `--at-min-isr-partitions` list, the
  raw `min.insync.replicas` (silver's `is_under_min_isr`, `is_at_min_isr`, `status`).
- `effective`: what brokers judge acks=all writes and their AtMinIsr/UnderMinIsr gauges by,
  `min(min.insync.replicas, replica count)` (`Partition.effectiveMinIsr`; the controller caps it the same way).
  A topic whose min.insync.replicas exceeds its replica count is "under min ISR" for ever by the first rule while
  its brokers accept acks=all writes; `min_isr_above_replicas` counts that misconfiguration itself.

Both rules have the same shape: under = offline or ISR smaller than the threshold; at = ISR size equal to it (no
leader check, as kafka-topics'). Only the threshold differs.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

RULES = ("effective", "kafka_topics")
DEFAULT_RULE = "effective"


def effective_min_isr() -> Column:
    """min(min.insync.replicas, replica count): the replicas assigned (a reassignment's adding replicas included)."""
    return F.least(F.col("min_isr"), F.size("replicas"))


def with_effective_flags(partitions: DataFrame) -> DataFrame:
    """silver.partition_states rows (min_isr, replicas, isr_size, is_offline) plus `is_under_min_isr_effective`,
    `is_at_min_isr_effective` and `is_min_isr_above_replicas`."""
    effective = effective_min_isr()
    return (
        partitions.withColumn("is_under_min_isr_effective", F.col("is_offline") | (F.col("isr_size") < effective))
        .withColumn("is_at_min_isr_effective", F.col("isr_size") == effective)
        .withColumn("is_min_isr_above_replicas", F.col("min_isr") > F.size("replicas"))
    )


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"min_isr_rule must be one of {', '.join(RULES)}, not {rule!r}")
    return rule


def with_min_isr_rule(partitions: DataFrame, rule: str) -> DataFrame:
    """The rows with `is_under_min_isr`, `is_at_min_isr` and `status` as `rule` decides them (`kafka_topics`: as
    silver has them; `effective`: against the effective min ISR)."""
    if check_rule(rule) == "kafka_topics":
        return partitions
    flagged = with_effective_flags(partitions)
    status = (
        F.when(F.col("is_offline"), "offline")
        .when(F.col("is_under_min_isr_effective"), "under_min_isr")
        .when(F.col("is_at_min_isr_effective"), "at_min_isr")
        .when(F.col("is_under_replicated"), "under_replicated")
        .otherwise("healthy")
    )
    return (
        flagged.withColumn("is_under_min_isr", F.col("is_under_min_isr_effective"))
        .withColumn("is_at_min_isr", F.col("is_at_min_isr_effective"))
        .withColumn("status", status)
        .drop("is_under_min_isr_effective", "is_at_min_isr_effective", "is_min_isr_above_replicas")
    )
