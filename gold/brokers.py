"""gold.broker_registrations: one row per broker per cluster per tumbling window (by scrape time), the active
controller's view of each broker (KIP-1131, Kafka 4.1+): `kafka.controller:type=KafkaController,
name=BrokerRegistrationState,broker=N` and `name=TimeSinceLastHeartbeatReceivedMs,broker=N`.

Rules:
- Only scrapes of the active controller count: a scrape whose ActiveControllerCount is 1 (standbys replay the same
  registrations but receive no heartbeats).
- `registration_state` is the state at the window's last such scrape that reports the broker: -1 `unregistered`,
  10 `fenced`, 20 `controlled_shutdown`, 30 `active` (`registration_state_code` keeps the number, also one this
  table does not name).
- `max_heartbeat_age_ms` is the largest TimeSinceLastHeartbeatReceivedMs in the window: the leading signal before a
  fence (`broker.session.timeout.ms`).
- `fenced_at` is the first scrape of the fenced stretch the broker is in at the window's end (consecutive scrapes
  reporting 10, looking back across windows through the broker's previous row, if that is at most a day older);
  NULL when it is not fenced.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quorumlake.contract.tables import GOLD_BROKER_REGISTRATIONS
from quorumlake.gold.quorum import window_start

STATE_METRIC = "controller_broker_registration_state"
HEARTBEAT_METRIC = "controller_time_since_last_heartbeat_received_ms"
ACTIVE_METRIC = "controller_active_controller_count"
METRICS = (STATE_METRIC, HEARTBEAT_METRIC, ACTIVE_METRIC)
# Kafka's BrokerRegistrationState values (metadata/.../controller/metrics/BrokerRegistrationState.java)
STATES = {-1: "unregistered", 10: "fenced", 20: "controlled_shutdown", 30: "active"}
FENCED = 10
# How far back a broker's previous row is looked for (the fenced stretch it may continue).
SEED_LOOKBACK_US = 24 * 3600 * 1_000_000

_KEY = ["cluster_id", "broker_id"]


def registration_state(code: Column) -> Column:
    """The name of a BrokerRegistrationState value; NULL for a value without one."""
    out = F.lit(None).cast("string")
    for value, name in sorted(STATES.items(), reverse=True):
        out = F.when(code == value, F.lit(name)).otherwise(out)
    return out


def build_broker_registrations(node_metrics: DataFrame, seed: DataFrame | None, window_minutes: int) -> DataFrame:
    """gold.broker_registrations rows from silver.node_metrics rows (cluster_id, node_id, scraped_at, metric,
    broker_id, value; every scrape of each cluster from some window start on), and `seed`: the broker's
    gold.broker_registrations row just before that (the fenced stretch it may continue), or None."""
    metrics = node_metrics.where(F.col("metric").isin(*METRICS))
    scrape = ["cluster_id", "node_id", "scraped_at"]
    active = metrics.where((F.col("metric") == ACTIVE_METRIC) & (F.col("value") == 1)).select(*scrape).distinct()
    readings = (
        metrics.where(F.col("broker_id").isNotNull() & (F.col("metric") != ACTIVE_METRIC))
        .join(active, scrape, "left_semi")
        .groupBy(*scrape, "broker_id")
        .agg(
            F.max(F.when(F.col("metric") == STATE_METRIC, F.col("value"))).cast("int").alias("_code"),
            F.max(F.when(F.col("metric") == HEARTBEAT_METRIC, F.col("value"))).alias("_heartbeat"),
        )
        .withColumn("_is_seed", F.lit(False))
        .withColumn("_since", F.col("scraped_at"))
    )
    if seed is not None:
        readings = readings.unionByName(
            seed.select(
                "cluster_id",
                F.col("controller_id").alias("node_id"),
                F.col("last_scraped_at").alias("scraped_at"),
                "broker_id",
                F.col("registration_state_code").alias("_code"),
                F.lit(None).cast("double").alias("_heartbeat"),
                F.lit(True).alias("_is_seed"),
                # a fenced seed's stretch began at its fenced_at
                F.coalesce("fenced_at", "last_scraped_at").alias("_since"),
            )
        )
    # fenced stretches: consecutive readings (those with a state) reporting fenced
    ordered = Window.partitionBy(*_KEY).orderBy("scraped_at", "node_id")
    fenced = F.col("_code") == FENCED
    stated = (
        readings.where(F.col("_code").isNotNull())
        .withColumn("_stretch", F.sum(F.when(fenced, 0).otherwise(1)).over(ordered))
        .withColumn(
            "_fenced_at",
            F.when(fenced, F.min(F.when(fenced, F.col("_since"))).over(Window.partitionBy(*_KEY, "_stretch"))),
        )
        .select(*scrape, "broker_id", "_fenced_at")
    )
    rows = (
        readings.where(~F.col("_is_seed"))
        .join(stated, [*scrape, "broker_id"], "left")
        .withColumn("window_start", window_start(F.col("scraped_at"), window_minutes))
    )
    last = F.when(F.col("_code").isNotNull(), F.struct("scraped_at", "node_id"))
    width = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(window_minutes))
    return (
        rows.groupBy(*_KEY, "window_start")
        .agg(
            F.max_by("_code", last).alias("registration_state_code"),
            F.max_by("_fenced_at", last).alias("fenced_at"),
            F.max(F.col("_heartbeat")).cast("bigint").alias("max_heartbeat_age_ms"),
            F.max_by("node_id", F.struct("scraped_at", "node_id")).alias("controller_id"),
            F.count_distinct("scraped_at").cast("bigint").alias("scrapes"),
            F.max("scraped_at").alias("last_scraped_at"),
        )
        .withColumn("window_end", F.col("window_start") + width)
        .withColumn("registration_state", registration_state(F.col("registration_state_code")))
        .select(*GOLD_BROKER_REGISTRATIONS.column_names)
    )


def seed_before(registrations: DataFrame, starts: DataFrame) -> DataFrame:
    """For each broker of the clusters in `starts` (cluster_id, from_at): its last gold.broker_registrations row
    before from_at."""
    before = registrations.join(starts, "cluster_id").where(F.col("window_start") < F.col("from_at"))
    latest = Window.partitionBy(*_KEY).orderBy(F.col("window_start").desc())
    return before.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n", "from_at")
