"""silver.node_metrics: one row per metric sample (cluster, node, scrape time, canonical metric, topic, partition),
from Prometheus scrapes (Strimzi rule names or jmx_exporter default names) and Jolokia-style JSON samples.

Names are mapped to the contract's canonical metrics (`quorumlake.silver.prometheus_text`); `node_role` comes from what
the node exposes in that scrape. Each sample line of a scrape is parsed on its own: an unparseable line goes to
quarantine, naming the file and line, and the scrape's other samples are kept.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from quorumlake.contract.tables import SILVER_NODE_METRICS
from quorumlake.silver.common import latest_per_key, parsed_once, quarantine_rows
from quorumlake.silver.prometheus_text import BROKER_PREFIXES, canonical_from_mbean, canonical_metric, parse_exposition
from quorumlake.silver.udf_guard import guarded, out_of_range

KEY = ["cluster_id", "node_id", "scraped_at", "metric", "topic", "partition", "broker_id"]

_SAMPLE_FIELDS = [
    T.StructField("metric", T.StringType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("broker_id", T.IntegerType()),
    T.StructField("value", T.DoubleType()),
    T.StructField("source_name", T.StringType()),
    T.StructField("state", T.StringType()),
    T.StructField("line_number", T.IntegerType()),
]
SAMPLE_COLUMNS = [f.name for f in _SAMPLE_FIELDS]
# A scrape's samples come back column by column (one array per field, the i-th sample at index i of each): a scrape
# holds hundreds of samples, and handing Spark a few lists of plain values costs far less than a dict per sample.
_SCRAPE = T.StructType(
    [
        T.StructField(
            "samples", T.StructType([T.StructField(f.name, T.ArrayType(f.dataType)) for f in _SAMPLE_FIELDS])
        ),
        T.StructField(
            "errors",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("line_number", T.IntegerType()),
                        T.StructField("line", T.StringType()),
                        T.StructField("reason", T.StringType()),
                    ]
                )
            ),
        ),
    ]
)


def scrape_samples(text: str) -> dict:
    """Canonical samples and unparseable lines of one Prometheus scrape; a sample that cannot be mapped (or whose
    partition label is beyond a 32-bit integer) becomes an unparseable line, the others are kept. `samples` holds
    one list per field of `SAMPLE_COLUMNS`, in the scrape's order."""
    samples, errors = parse_exposition(text)
    lines = text.split("\n")
    columns: dict[str, list] = {name: [] for name in SAMPLE_COLUMNS}
    for s in samples:
        number = s["line_number"]
        try:
            mapped = canonical_metric(s["name"], s["labels"])
            if mapped is None:
                reason = "sample has no metric name"
            elif out_of_range(mapped.get("partition"), T.IntegerType()):
                reason = "partition label is out of range (not a 32-bit integer)"
            elif out_of_range(mapped.get("broker_id"), T.IntegerType()):
                reason = "broker label is out of range (not a 32-bit integer)"
            else:
                reason = None
        except Exception as exc:
            reason = f"cannot be mapped ({type(exc).__name__}: {str(exc)[:200]})"
        if reason is not None:
            line = lines[number - 1].removesuffix("\r") if 0 < number <= len(lines) else None
            errors.append({"line_number": number, "line": line, "reason": reason})
            continue
        mapped["value"], mapped["line_number"] = s["value"], number
        for name in SAMPLE_COLUMNS:
            columns[name].append(mapped[name])
    return {"samples": columns, "errors": errors}


def mbean_sample(mbean: str | None, attribute: str | None) -> dict:
    """The canonical sample of a Jolokia-style read, or `error` saying why there is none."""
    if mbean is None or not mbean.strip():
        return {"error": "empty mbean: no metric name can be derived"}
    if attribute is None or not attribute.strip():
        return {"error": "empty attribute: no metric name can be derived"}
    mapped = canonical_from_mbean(mbean, attribute)
    if mapped is None:
        return {"error": f"mbean {mbean[:200]!r} maps to no metric"}
    return {**mapped, "error": None}


_MBEAN = T.StructType(
    [*[f for f in _SAMPLE_FIELDS if f.name not in ("value", "line_number")], T.StructField("error", T.StringType())]
)
_scrape_udf = F.udf(
    guarded(
        scrape_samples,
        _SCRAPE,
        lambda reason: {
            "samples": {name: [] for name in SAMPLE_COLUMNS},
            "errors": [{"line_number": None, "line": None, "reason": reason}],
        },
    ),
    _SCRAPE,
    useArrow=False,  # lists of plain values travel faster pickled than through Arrow's per-row conversion
)
_mbean_udf = F.udf(guarded(mbean_sample, _MBEAN, lambda reason: {"error": reason}), _MBEAN, useArrow=True)


def role_of(metric: Column) -> Column:
    """`prometheus_text.node_role` as an aggregate over the canonical metric names of one node's scrape."""
    controller = F.bool_or(metric.startswith("controller_"))
    broker = F.bool_or(functools.reduce(Column.__or__, [metric.startswith(p) for p in BROKER_PREFIXES]))
    return F.when(controller & broker, "combined").when(controller, "controller").when(broker, "broker")


def build_node_metrics(bronze: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(node metrics, rejected sample lines) from readable bronze.metrics_raw rows.

    Needs record_id, format, cluster_id, node_id, collected_at, payload, source_file, ingested_at, parse_error.
    All records of a scrape (cluster, node, time) must be in the input: the node's role is decided per scrape.
    """
    return split_node_metrics(*parse_node_metrics(bronze))


_BASE = ["cluster_id", "node_id", "scraped_at", "record_id", "source_file", "ingested_at"]


def parse_node_metrics(bronze: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The expensive half of `build_node_metrics`: (Prometheus scrapes with `_s`, their samples and unreadable
    lines; JMX samples with `_j`, the sample). Both the table and the rejects read them, so a caller that builds
    both caches these instead of parsing every scrape twice."""
    readable = bronze.where(F.col("parse_error").isNull()).withColumnRenamed("collected_at", "scraped_at")
    scrapes = parsed_once(
        readable.where(F.col("format") == "prometheus_text").select(*_BASE, "payload"), _s=_scrape_udf("payload")
    ).drop("payload")
    jmx_json = parsed_once(
        readable.where(F.col("format") == "jmx_json").select(*_BASE, "payload"),
        _j=F.from_json("payload", "mbean STRING, attribute STRING, value DOUBLE"),
    ).withColumn("source", F.lit("jmx"))
    return scrapes, jmx_json


def _jmx_mapped(jmx_json: DataFrame) -> DataFrame:
    """The JMX samples with `_m`, the mapping of their MBean and attribute: computed once per distinct pair (a fleet
    reads the same few hundred MBeans over and over) and joined back."""
    pairs = jmx_json.select(F.col("_j.mbean").alias("_mbean"), F.col("_j.attribute").alias("_attribute")).distinct()
    mapped = parsed_once(pairs, _m=_mbean_udf("_mbean", "_attribute"))
    same = F.col("_j.mbean").eqNullSafe(F.col("_mbean")) & F.col("_j.attribute").eqNullSafe(F.col("_attribute"))
    return jmx_json.join(F.broadcast(mapped), same, "left").drop("_mbean", "_attribute")


def split_node_metrics(scrapes: DataFrame, jmx_json: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(node metrics, rejected sample lines) from `parse_node_metrics`' two parsed frames."""
    prom = scrapes.select(
        *_BASE,
        F.lit("prometheus").alias("source"),
        F.inline(F.arrays_zip(*[F.col(f"_s.samples.{c}").alias(c) for c in SAMPLE_COLUMNS])),
    )
    bad_lines = scrapes.select(*_BASE, F.explode("_s.errors").alias("_e"))
    rejected_lines = quarantine_rows(
        bad_lines,
        "silver.node_metrics",
        F.array(F.lit("sample_line_parses")),
        F.concat(
            F.coalesce(F.concat(F.lit("line "), F.col("_e.line_number").cast("string"), F.lit(" of ")), F.lit("")),
            F.col("source_file"),
            F.lit(": "),
            F.coalesce(F.col("_e.reason"), F.lit("unreadable")),
        ),
        F.to_json(
            F.struct("source_file", F.col("_e.line_number").alias("line_number"), F.col("_e.line").alias("line"))
        ),
    )

    jmx_parsed = _jmx_mapped(jmx_json)
    jmx_error = F.coalesce(F.col("_m.error"), F.when(F.col("_m.metric").isNull(), F.lit("no metric name")))
    rejected_jmx = quarantine_rows(
        jmx_parsed.where(jmx_error.isNotNull()),
        "silver.node_metrics",
        F.array(F.lit("jmx_sample_maps")),
        F.concat(F.lit("JMX sample of "), F.col("source_file"), F.lit(": "), jmx_error),
        F.to_json(F.struct("record_id", "source_file", "payload")),
    )
    jmx = jmx_parsed.where(jmx_error.isNull()).select(
        *_BASE,
        "source",
        *[F.col(f"_m.{c}").alias(c) for c in ("metric", "topic", "partition", "broker_id")],
        F.col("_j.value").alias("value"),
        F.col("_m.source_name").alias("source_name"),
        F.col("_m.state").alias("state"),
        F.lit(0).alias("line_number"),
    )
    # every sample now has a metric (scrape_samples and the JMX mapping move the others to quarantine)
    samples = latest_per_key(prom.unionByName(jmx), KEY, order=["ingested_at", "record_id", "line_number"])
    roles = samples.groupBy("cluster_id", "node_id", "scraped_at").agg(role_of(F.col("metric")).alias("node_role"))
    return (
        samples.join(roles, ["cluster_id", "node_id", "scraped_at"]).select(*SILVER_NODE_METRICS.column_names),
        rejected_lines.unionByName(rejected_jmx),
    )
