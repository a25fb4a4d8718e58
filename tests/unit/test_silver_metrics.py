"""quorumlake.silver.metrics: build_node_metrics (silver.node_metrics) on tiny bronze rows: Prometheus scrapes in the Strimzi
and the exporter's default naming (the docs/kafka-surfaces.md §6.4 examples under tests/data/landing/metrics), Jolokia
reads, node roles, per-line quarantine of a scrape, and special float values."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from quorumlake.silver.metrics import SAMPLE_COLUMNS as SCRAPE_COLUMNS
from quorumlake.silver.metrics import build_node_metrics, role_of, scrape_samples
from quorumlake.silver.prometheus_text import node_role
from tests.frames import check_rows
from tests.helpers import RUN_1, RUN_2, read_text, ts

pytestmark = pytest.mark.usefixtures("drop_cached")

BRONZE = (
    "record_id STRING, format STRING, cluster_id STRING, node_id INT, collected_at TIMESTAMP, payload STRING, "
    "source_file STRING, line_number INT, ingested_at TIMESTAMP, parse_error STRING"
)
METRICS = Path(__file__).parents[1] / "data" / "landing" / "metrics"
STRIMZI = (METRICS / "cluster=kraft-v2" / "node=3002" / "1730000000500.prom").read_text()
DEFAULT = read_text(METRICS / "cluster=kraft-v2" / "date=2024-10-27" / "node=0" / "1730000000450.prom.gz")
JOLOKIA = (METRICS / "jolokia" / "2024-10-27" / "kraft-v1.jsonl").read_text().splitlines()

SAMPLE_COLUMNS = ["metric", "topic", "partition", "value", "node_role", "source_name", "state"]
SAMPLE_SCHEMA = (
    "metric STRING, topic STRING, partition INT, value DOUBLE, node_role STRING, source_name STRING, state STRING"
)


def scrape(
    record_id: str,
    text: str,
    node: int = 3002,
    scraped_ms: int = 1730000000500,
    cluster: str = "kraft-v2",
    ingested_at: datetime = RUN_1,
) -> tuple:
    return (
        record_id,
        "prometheus_text",
        cluster,
        node,
        ts(scraped_ms),
        text,
        f"file:/landing/metrics/cluster={cluster}/node={node}/{scraped_ms}.prom",
        None,
        ingested_at,
        None,
    )


def jolokia(record_id: str, line: str, line_number: int = 1, ingested_at: datetime = RUN_1) -> tuple:
    data = json.loads(line)
    return (
        record_id,
        "jmx_json",
        data["cluster_id"],
        data["node_id"],
        ts(data["scraped_at_ms"]),
        line,
        "file:/landing/metrics/jolokia/2024-10-27/kraft-v1.jsonl",
        line_number,
        ingested_at,
        None,
    )


def run(spark, *rows: tuple):
    samples, rejected = build_node_metrics(spark.createDataFrame(list(rows), BRONZE))
    return samples.cache(), rejected.cache()


def test_strimzi_scrape_maps_every_series_and_the_node_is_combined(spark):
    samples, rejected = run(spark, scrape("s1", STRIMZI))
    role = "combined"
    check_rows(
        samples,
        SAMPLE_COLUMNS,
        SAMPLE_SCHEMA,
        [
            ("raft_current_leader", None, None, 3002.0, role, "kafka_server_raftmetrics_current_leader", None),
            (
                "raft_current_state",
                None,
                None,
                1.0,
                role,
                'kafka_server_raftmetrics_current_state{current_state="leader"}',
                "leader",
            ),
            ("raft_current_epoch", None, None, 7.0, role, "kafka_server_raftmetrics_current_epoch", None),
            ("raft_high_watermark", None, None, 18542.0, role, "kafka_server_raftmetrics_high_watermark", None),
            ("raft_log_end_offset", None, None, 18542.0, role, "kafka_server_raftmetrics_log_end_offset", None),
            ("raft_commit_latency_avg", None, None, 2.5, role, "kafka_server_raftmetrics_commit_latency_avg", None),
            (
                "raft_commit_latency_max",
                None,
                None,
                11.0,
                role,
                "kafka_server_raftmetrics_commit_latency_max_total",
                None,
            ),
            (
                "controller_active_controller_count",
                None,
                None,
                1.0,
                role,
                "kafka_controller_kafkacontroller_activecontrollercount",
                None,
            ),
            (
                "controller_last_applied_record_offset",
                None,
                None,
                18542.0,
                role,
                "kafka_controller_kafkacontroller_lastappliedrecordoffset",
                None,
            ),
            (
                "controller_last_committed_record_offset",
                None,
                None,
                18542.0,
                role,
                "kafka_controller_kafkacontroller_lastcommittedrecordoffset",
                None,
            ),
            (
                "controller_last_applied_record_timestamp",
                None,
                None,
                1730000000500.0,
                role,
                "kafka_controller_kafkacontroller_lastappliedrecordtimestamp",
                None,
            ),
            (
                "controller_last_applied_record_lag_ms",
                None,
                None,
                312.0,
                role,
                "kafka_controller_kafkacontroller_lastappliedrecordlagms",
                None,
            ),
            (
                "controller_offline_partitions_count",
                None,
                None,
                1.0,
                role,
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                None,
            ),
            (
                "broker_last_applied_record_offset",
                None,
                None,
                18542.0,
                role,
                "kafka_server_brokermetadatametrics_last_applied_record_offset",
                None,
            ),
            (
                "broker_last_applied_record_lag_ms",
                None,
                None,
                87.0,
                role,
                "kafka_server_brokermetadatametrics_last_applied_record_lag_ms",
                None,
            ),
            (
                "broker_metadata_apply_error_count",
                None,
                None,
                0.0,
                role,
                "kafka_server_brokermetadatametrics_metadata_apply_error_count",
                None,
            ),
            (
                "replica_manager_under_replicated_partitions",
                None,
                None,
                1.0,
                role,
                "kafka_server_replicamanager_underreplicatedpartitions",
                None,
            ),
            (
                "replica_manager_under_min_isr_partition_count",
                None,
                None,
                0.0,
                role,
                "kafka_server_replicamanager_underminisrpartitioncount",
                None,
            ),
            (
                "replica_manager_at_min_isr_partition_count",
                None,
                None,
                1.0,
                role,
                "kafka_server_replicamanager_atminisrpartitioncount",
                None,
            ),
            (
                "partition_at_min_isr",
                "orders",
                1,
                1.0,
                role,
                'kafka_cluster_partition_atminisr{partition="1",topic="orders"}',
                None,
            ),
            (
                "partition_at_min_isr",
                "orders",
                0,
                0.0,
                role,
                'kafka_cluster_partition_atminisr{partition="0",topic="orders"}',
                None,
            ),
            (
                "partition_under_replicated",
                "orders",
                1,
                1.0,
                role,
                'kafka_cluster_partition_underreplicated{partition="1",topic="orders"}',
                None,
            ),
        ],
        allow_nan_equality=True,
    )
    check_rows(
        samples.select(
            "cluster_id", "node_id", "scraped_at", "source", "record_id", "source_file", "ingested_at"
        ).distinct(),
        ["cluster_id", "node_id", "scraped_at", "source", "record_id", "source_file", "ingested_at"],
        "cluster_id STRING, node_id INT, scraped_at TIMESTAMP, source STRING, record_id STRING, source_file STRING, "
        "ingested_at TIMESTAMP",
        [
            (
                "kraft-v2",
                3002,
                ts(1730000000500),
                "prometheus",
                "s1",
                "file:/landing/metrics/cluster=kraft-v2/node=3002/1730000000500.prom",
                RUN_1,
            )
        ],
        allow_nan_equality=True,
    )
    assert rejected.collect() == []


def test_default_format_scrape_gives_the_same_canonical_names(spark):
    samples, rejected = run(spark, scrape("d1", DEFAULT, node=0, scraped_ms=1730000000450))
    role = "combined"  # it exposes controller_* (KafkaController) and broker-side series
    check_rows(
        samples,
        SAMPLE_COLUMNS,
        SAMPLE_SCHEMA,
        [
            (
                "replica_manager_at_min_isr_partition_count",
                None,
                None,
                1.0,
                role,
                'kafka_server_ReplicaManager_Value{name="AtMinIsrPartitionCount"}',
                None,
            ),
            (
                "replica_manager_under_min_isr_partition_count",
                None,
                None,
                0.0,
                role,
                'kafka_server_ReplicaManager_Value{name="UnderMinIsrPartitionCount"}',
                None,
            ),
            (
                "replica_manager_under_replicated_partitions",
                None,
                None,
                1.0,
                role,
                'kafka_server_ReplicaManager_Value{name="UnderReplicatedPartitions"}',
                None,
            ),
            (
                "partition_at_min_isr",
                "orders",
                1,
                1.0,
                role,
                'kafka_cluster_Partition_Value{name="AtMinIsr",partition="1",topic="orders"}',
                None,
            ),
            (
                "controller_last_applied_record_lag_ms",
                None,
                None,
                312.0,
                role,
                'kafka_controller_KafkaController_Value{name="LastAppliedRecordLagMs"}',
                None,
            ),
            (
                "controller_offline_partitions_count",
                None,
                None,
                1.0,
                role,
                'kafka_controller_KafkaController_Value{name="OfflinePartitionsCount"}',
                None,
            ),
            ("raft_current_leader", None, None, 3002.0, role, "kafka_server_raft_metrics_current_leader", None),
            (
                "broker_last_applied_record_offset",
                None,
                None,
                18542.0,
                role,
                "kafka_server_broker_metadata_metrics_last_applied_record_offset",
                None,
            ),
        ],
        allow_nan_equality=True,
    )
    assert rejected.collect() == []


def test_jolokia_reads_and_node_roles_per_scrape(spark):
    samples, rejected = run(spark, *[jolokia(f"j{i}", line, i) for i, line in enumerate(JOLOKIA, start=1)])
    check_rows(
        samples,
        ["node_id", "scraped_at", "record_id", "source"] + SAMPLE_COLUMNS,
        "node_id INT, scraped_at TIMESTAMP, record_id STRING, source STRING, " + SAMPLE_SCHEMA,
        [
            (
                3002,
                ts(1730000000500),
                "j1",
                "jmx",
                "controller_last_committed_record_offset",
                None,
                None,
                18542.0,
                "controller",
                "kafka.controller:type=KafkaController,name=LastCommittedRecordOffset/Value",
                None,
            ),
            (
                3002,
                ts(1730000000500),
                "j2",
                "jmx",
                "controller_active_controller_count",
                None,
                None,
                1.0,
                "controller",
                "kafka.controller:type=KafkaController,name=ActiveControllerCount/Value",
                None,
            ),
            (
                3002,
                ts(1730000000500),
                "j3",
                "jmx",
                "raft_current_leader",
                None,
                None,
                3002.0,
                "controller",
                "kafka.server:type=raft-metrics/current-leader",
                None,
            ),
            (
                0,
                ts(1730000000510),
                "j4",
                "jmx",
                "broker_last_applied_record_offset",
                None,
                None,
                18530.0,
                "broker",
                "kafka.server:type=broker-metadata-metrics/last-applied-record-offset",
                None,
            ),
            (
                0,
                ts(1730000000510),
                "j5",
                "jmx",
                "broker_last_applied_record_lag_ms",
                None,
                None,
                87.5,
                "broker",
                "kafka.server:type=broker-metadata-metrics/last-applied-record-lag-ms",
                None,
            ),
            (
                0,
                ts(1730000000510),
                "j6",
                "jmx",
                "partition_at_min_isr",
                "orders",
                1,
                1.0,
                "broker",
                "kafka.cluster:type=Partition,name=AtMinIsr,topic=orders,partition=1/Value",
                None,
            ),
            # KIP-1131: the active controller's view of broker 0, the broker in broker_id
            (
                3002,
                ts(1730000000500),
                "j7",
                "jmx",
                "controller_broker_registration_state",
                None,
                None,
                30.0,
                "controller",
                "kafka.controller:type=KafkaController,name=BrokerRegistrationState,broker=0/Value",
                None,
            ),
            (
                3002,
                ts(1730000000500),
                "j8",
                "jmx",
                "controller_time_since_last_heartbeat_received_ms",
                None,
                None,
                180.0,
                "controller",
                "kafka.controller:type=KafkaController,name=TimeSinceLastHeartbeatReceivedMs,broker=0/Value",
                None,
            ),
        ],
        allow_nan_equality=True,
    )
    assert rejected.collect() == []
    brokers = {r["record_id"]: r["broker_id"] for r in samples.collect()}
    assert brokers == {"j1": None, "j2": None, "j3": None, "j4": None, "j5": None, "j6": None, "j7": 0, "j8": 0}


def test_node_role_is_decided_per_scrape_from_the_metrics_it_exposes(spark):
    controller = (
        "kafka_controller_kafkacontroller_activecontrollercount 0.0\nkafka_server_raftmetrics_current_epoch 7\n"
    )
    broker = "kafka_server_replicamanager_atminisrpartitioncount 0\nkafka_server_raftmetrics_current_epoch 7\n"
    partition_only = 'kafka_cluster_partition_underminisr{topic="t",partition="0"} 0\n'
    raft_only = "kafka_server_raftmetrics_current_epoch 7\n"
    samples, _ = run(
        spark,
        scrape("c", controller, node=1),
        scrape("b", broker, node=2),
        scrape("p", partition_only, node=3),
        scrape("r", raft_only, node=4),
        # a later scrape of node 1 is its own scrape with its own role
        scrape("c2", broker, node=1, scraped_ms=1730000001500),
    )
    check_rows(
        samples.select("node_id", "scraped_at", "node_role").distinct(),
        ["node_id", "scraped_at", "node_role"],
        "node_id INT, scraped_at TIMESTAMP, node_role STRING",
        [
            (1, ts(1730000000500), "controller"),
            (2, ts(1730000000500), "broker"),
            (3, ts(1730000000500), "broker"),
            (4, ts(1730000000500), None),
            (1, ts(1730000001500), "broker"),
        ],
        allow_nan_equality=True,
    )


def test_a_bad_sample_line_is_quarantined_and_the_rest_of_the_scrape_kept(spark):
    text = (
        "# TYPE kafka_server_raftmetrics_current_epoch gauge\n"
        "kafka_server_raftmetrics_current_epoch 7.0\n"
        "kafka_server_raftmetrics_high_watermark{broken 1.0\n"
        "kafka_server_raftmetrics_log_end_offset seven\n"
        "kafka_server_raftmetrics_current_leader 3002.0\n"
    )
    row = scrape("s1", text)
    samples, rejected = run(spark, row)
    check_rows(
        samples,
        ["metric", "value", "record_id"],
        "metric STRING, value DOUBLE, record_id STRING",
        [
            ("raft_current_epoch", 7.0, "s1"),
            ("raft_current_leader", 3002.0, "s1"),
        ],
        allow_nan_equality=True,
    )
    source_file = row[6]
    check_rows(
        rejected,
        ["target_table", "failed_rules", "reason", "record", "record_id", "source_file", "ingested_at"],
        "target_table STRING, failed_rules ARRAY<STRING>, reason STRING, record STRING, record_id STRING, "
        "source_file STRING, ingested_at TIMESTAMP",
        [
            (
                "silver.node_metrics",
                ["sample_line_parses"],
                f"line 3 of {source_file}: label broken has no '='",
                json.dumps(
                    {
                        "source_file": source_file,
                        "line_number": 3,
                        "line": "kafka_server_raftmetrics_high_watermark{broken 1.0",
                    },
                    separators=(",", ":"),
                ),
                "s1",
                source_file,
                RUN_1,
            ),
            (
                "silver.node_metrics",
                ["sample_line_parses"],
                f"line 4 of {source_file}: value 'seven' is not a number",
                json.dumps(
                    {
                        "source_file": source_file,
                        "line_number": 4,
                        "line": "kafka_server_raftmetrics_log_end_offset seven",
                    },
                    separators=(",", ":"),
                ),
                "s1",
                source_file,
                RUN_1,
            ),
        ],
        allow_nan_equality=True,
    )
    # One quarantine row per line, with distinct stable ids.
    assert len({r["quarantine_id"] for r in rejected.collect()}) == 2


def test_nan_and_infinite_values_are_kept(spark):
    text = (
        "kafka_server_raftmetrics_commit_latency_avg NaN\n"
        "kafka_server_raftmetrics_commit_latency_max +Inf\n"
        "kafka_server_raftmetrics_poll_idle_ratio_avg -Inf\n"
        "kafka_server_raftmetrics_high_watermark 1.7300000005E12\n"
    )
    samples, rejected = run(spark, scrape("s1", text))
    check_rows(
        samples,
        ["metric", "value"],
        "metric STRING, value DOUBLE",
        [
            ("raft_commit_latency_avg", math.nan),
            ("raft_commit_latency_max", math.inf),
            ("kafka_server_raftmetrics_poll_idle_ratio_avg", -math.inf),
            ("raft_high_watermark", 1730000000500.0),
        ],
        allow_nan_equality=True,
    )
    assert rejected.collect() == []


def test_duplicate_samples_keep_the_later_ingested_record(spark):
    old = "kafka_server_raftmetrics_current_epoch 6.0\nkafka_server_raftmetrics_current_leader 3001.0\n"
    new = "kafka_server_raftmetrics_current_epoch 7.0\n"
    read = (
        '{"cluster_id":"kraft-v2","node_id":3002,"scraped_at_ms":1730000000500,'
        '"mbean":"kafka.server:type=raft-metrics","attribute":"current-epoch","value":5}'
    )
    samples, _ = run(
        spark,
        scrape("new", new, ingested_at=RUN_2),
        scrape("old", old, ingested_at=RUN_1),
        jolokia("j", read, ingested_at=datetime(2024, 10, 28, 3)),
    )
    check_rows(
        samples,
        ["metric", "value", "source", "record_id"],
        "metric STRING, value DOUBLE, source STRING, record_id STRING",
        [
            # the Jolokia read of the same metric was ingested last, so it wins
            ("raft_current_epoch", 5.0, "jmx", "j"),
            # a metric only the older scrape has stays
            ("raft_current_leader", 3001.0, "prometheus", "old"),
        ],
        allow_nan_equality=True,
    )


def test_unreadable_bronze_records_are_left_to_the_record_readable_quarantine(spark):
    row = scrape("x", STRIMZI)
    samples, rejected = run(spark, row[:-1] + ("node= path segment is not an integer",))
    assert samples.collect() == [] and rejected.collect() == []


@pytest.mark.parametrize(
    "metrics",
    [
        ["raft_current_leader", "controller_last_applied_record_offset"],
        ["raft_current_leader", "broker_last_applied_record_offset"],
        ["replica_manager_at_min_isr_partition_count", "replica_manager_at_min_isr_partition_count"],
        ["partition_at_min_isr"],
        ["controller_active_controller_count", "broker_last_applied_record_offset", "raft_current_epoch"],
        ["partition_under_min_isr", "controller_fenced_broker_count"],
        ["raft_current_leader", "raft_current_epoch"],
        ["controller_offline_partitions_count", None],
        [None],
    ],
)
def test_the_role_aggregate_is_node_role(spark, metrics):
    rows = spark.createDataFrame([(1, m) for m in metrics], "scrape INT, metric STRING")
    (row,) = rows.groupBy("scrape").agg(role_of(F.col("metric")).alias("role")).collect()
    assert row["role"] == node_role(metrics)


def test_a_scrape_comes_back_one_list_per_sample_field():
    text = (
        'kafka_cluster_partition_atminisr{topic="a",partition="1"} 1.0\n'
        "not a sample\n"
        "kafka_controller_kafkacontroller_activecontrollercount 1.0\n"
    )
    out = scrape_samples(text)
    assert list(out["samples"]) == SCRAPE_COLUMNS
    assert out["samples"]["metric"] == ["partition_at_min_isr", "controller_active_controller_count"]
    assert out["samples"]["partition"] == [1, None]
    assert out["samples"]["line_number"] == [1, 3]
    assert [e["line_number"] for e in out["errors"]] == [2]
