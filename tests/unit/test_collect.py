"""`quorumlake collect` without a cluster: the DescribeQuorum rendering (against docs/kafka-surfaces.md §1.5, through
kafka-python's real encoder and decoder), client properties, atomic landing writes, error records when nothing
answers, and the command's one-line usage errors. The live test (tests/live) runs it against real Kafka."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid

import pytest
from kafka.protocol.admin import DescribeQuorumResponse

from quorumlake.collector.landing import Landing, safe_segment, write_atomically
from quorumlake.collector.quorum import ZERO_UUID, kafka_uuid, render_response
from quorumlake.collector.runner import CollectOptions, Collector
from quorumlake.collector.settings import SettingsError, load_settings, read_properties
from tests.helpers import free_port, quorumlake

Topic = DescribeQuorumResponse.TopicData
Partition = Topic.PartitionData
Replica = Partition.ReplicaState
Node = DescribeQuorumResponse.Node

# docs/kafka-surfaces.md §1.5, v0, byte for byte
V0 = (
    '{"errorCode":0,"topics":[{"topicName":"__cluster_metadata","partitions":[{"partitionIndex":0,"errorCode":0,'
    '"leaderId":3002,"leaderEpoch":7,"highWatermark":18542,"currentVoters":[{"replicaId":3000,"logEndOffset":18542},'
    '{"replicaId":3001,"logEndOffset":18530},{"replicaId":3002,"logEndOffset":18542}],"observers":[{"replicaId":0,'
    '"logEndOffset":18542}]}]}]}'
)
# §1.5 v1 and v2, unwrapped
V1 = (
    '{"errorCode":0,"topics":[{"topicName":"__cluster_metadata","partitions":[{"partitionIndex":0,"errorCode":0,'
    '"leaderId":3002,"leaderEpoch":7,"highWatermark":18542,"currentVoters":['
    '{"replicaId":3000,"logEndOffset":18542,"lastFetchTimestamp":1730000000480,'
    '"lastCaughtUpTimestamp":1730000000480},'
    '{"replicaId":3001,"logEndOffset":18530,"lastFetchTimestamp":1730000000200,'
    '"lastCaughtUpTimestamp":1729999998100},'
    '{"replicaId":3002,"logEndOffset":18542,"lastFetchTimestamp":1730000000500,'
    '"lastCaughtUpTimestamp":1730000000500}],'
    '"observers":[{"replicaId":0,"logEndOffset":18542,"lastFetchTimestamp":1730000000450,'
    '"lastCaughtUpTimestamp":1730000000450}]}]}]}'
)
V2 = (
    '{"errorCode":0,"errorMessage":"","topics":[{"topicName":"__cluster_metadata","partitions":[{"partitionIndex":0,'
    '"errorCode":0,"errorMessage":"","leaderId":3002,"leaderEpoch":7,"highWatermark":18542,"currentVoters":['
    '{"replicaId":3000,"replicaDirectoryId":"ILZ5MPTeRWakmJu99uBJCA","logEndOffset":18542,'
    '"lastFetchTimestamp":1730000000480,"lastCaughtUpTimestamp":1730000000480},'
    '{"replicaId":3001,"replicaDirectoryId":"b-DwmhtOheTqZzPoh52kfA","logEndOffset":18530,'
    '"lastFetchTimestamp":1730000000200,"lastCaughtUpTimestamp":1729999998100},'
    '{"replicaId":3002,"replicaDirectoryId":"g42deArWBTRM5A1yuVpMCg","logEndOffset":18542,'
    '"lastFetchTimestamp":1730000000500,"lastCaughtUpTimestamp":1730000000500}],'
    '"observers":[{"replicaId":0,"replicaDirectoryId":"3Db5QLSqSZieL3rJBUUegA","logEndOffset":18542,'
    '"lastFetchTimestamp":1730000000450,"lastCaughtUpTimestamp":1730000000450}]}]}],'
    '"nodes":[{"nodeId":3000,"listeners":[{"name":"CONTROLLER","host":"controller-0","port":9093}]},'
    '{"nodeId":3001,"listeners":[{"name":"CONTROLLER","host":"controller-1","port":9093}]},'
    '{"nodeId":3002,"listeners":[{"name":"CONTROLLER","host":"controller-2","port":9093}]}]}'
)


def _uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _response(version: int) -> DescribeQuorumResponse:
    """The §1.5 scenario, built with kafka-python's message classes, encoded at `version` and decoded again."""

    def replica(rid, leo, fetch, caught, directory):
        return Replica(
            replica_id=rid,
            replica_directory_id=_uuid(directory),
            log_end_offset=leo,
            last_fetch_timestamp=fetch,
            last_caught_up_timestamp=caught,
        )

    voters = [
        replica(3000, 18542, 1730000000480, 1730000000480, "ILZ5MPTeRWakmJu99uBJCA"),
        replica(3001, 18530, 1730000000200, 1729999998100, "b-DwmhtOheTqZzPoh52kfA"),
        replica(3002, 18542, 1730000000500, 1730000000500, "g42deArWBTRM5A1yuVpMCg"),
    ]
    observers = [replica(0, 18542, 1730000000450, 1730000000450, "3Db5QLSqSZieL3rJBUUegA")]
    nodes = (
        [
            Node(node_id=3000 + i, listeners=[Node.Listener(name="CONTROLLER", host=f"controller-{i}", port=9093)])
            for i in range(3)
        ]
        if version >= 2
        else []
    )
    built = DescribeQuorumResponse(
        error_code=0,
        error_message="",
        nodes=nodes,
        topics=[
            Topic(
                topic_name="__cluster_metadata",
                partitions=[
                    Partition(
                        partition_index=0,
                        error_code=0,
                        error_message="",
                        leader_id=3002,
                        leader_epoch=7,
                        high_watermark=18542,
                        current_voters=voters,
                        observers=observers,
                    )
                ],
            )
        ],
    )
    if version < 2:  # fields a v0/v1 server cannot send (writing them at v0/v1 is an error in Kafka, too)
        for r in voters + observers:
            r.replica_directory_id = None
    wire = built.encode(version=version)
    return DescribeQuorumResponse.decode(wire, version=version)


@pytest.mark.parametrize(("version", "expected"), [(0, V0), (1, V1), (2, V2)])
def test_render_matches_the_json_converter(version, expected):
    rendered = json.dumps(render_response(_response(version), version), separators=(",", ":"))
    assert rendered == expected


def test_render_keeps_error_responses_and_knows_no_v3():
    error = DescribeQuorumResponse(error_code=31, error_message="Cluster authorization failed.", topics=[], nodes=[])
    decoded = DescribeQuorumResponse.decode(error.encode(version=2), version=2)
    assert render_response(decoded, 2) == {
        "errorCode": 31,
        "errorMessage": "Cluster authorization failed.",
        "topics": [],
        "nodes": [],
    }
    with pytest.raises(ValueError, match="v3"):
        render_response(decoded, 3)


def test_kafka_uuid():
    assert kafka_uuid(None) == ZERO_UUID
    assert kafka_uuid(uuid.UUID(int=0)) == ZERO_UUID
    assert kafka_uuid(_uuid("b-DwmhtOheTqZzPoh52kfA")) == "b-DwmhtOheTqZzPoh52kfA"
    assert kafka_uuid(_uuid("b-DwmhtOheTqZzPoh52kfA").bytes) == "b-DwmhtOheTqZzPoh52kfA"


def test_read_properties():
    text = (
        "# comment\n! also\nsecurity.protocol = SASL_SSL\nsasl.mechanism:PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="alice" password="s3cr=t";\nempty.key\n'
    )
    props = read_properties(text)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "PLAIN"
    assert props["sasl.jaas.config"].endswith('username="alice" password="s3cr=t";')
    assert props["empty.key"] == ""


def test_load_settings(tmp_path):
    assert load_settings(None).security_protocol == "PLAINTEXT"
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" '
        'password="pw";\n'
    )
    settings = load_settings(sasl)
    assert (settings.security_protocol, settings.sasl_mechanism, settings.sasl_username, settings.sasl_password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "bob",
        "pw",
    )
    assert settings.uses_sasl and settings.ssl_context is None
    tls = tmp_path / "tls.properties"
    tls.write_text("security.protocol=SSL\nssl.endpoint.identification.algorithm=\n")
    assert load_settings(tls).ssl_context.check_hostname is False
    for text, message in [
        ("security.protocol=HTTP\n", "is not one of"),
        ("security.protocol=SSL\nssl.truststore.location=/x.jks\nssl.truststore.type=JKS\n", "JKS cannot be read"),
        ("security.protocol=SASL_SSL\n", "GSSAPI is not supported"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "needs username"),
    ]:
        bad = tmp_path / "bad.properties"
        bad.write_text(text)
        with pytest.raises(SettingsError, match=message):
            load_settings(bad)
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "missing.properties")


def test_write_atomically_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "a" / "b" / "1.jsonl"
    write_atomically(target, b"x\n")
    write_atomically(target, b"y\n")
    assert target.read_bytes() == b"y\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["1.jsonl"]


def test_landing_layout_and_same_millisecond(tmp_path):
    landing = Landing(tmp_path)
    first = landing.quorum("c/1", 5, 2, {"errorCode": 0})
    second = landing.quorum("c/1", 5, 2, {"errorCode": 0})
    assert first.relative_to(tmp_path).as_posix() == "quorum/cluster=c_1/5.jsonl"
    assert second.name == "5.1.jsonl"
    assert json.loads(first.read_text()) == {
        "cluster_id": "c/1",
        "collected_at_ms": 5,
        "api_version": 2,
        "response": {"errorCode": 0},
    }
    scrape = landing.scrape("c", 4, 7, b"a 1\n")
    assert scrape.relative_to(tmp_path).as_posix() == "metrics/cluster=c/node=4/7.prom"
    assert safe_segment("") == "unknown"


def test_nothing_answering_is_recorded_and_does_not_stop_the_collector(tmp_path):
    port = free_port()  # nothing listens on it
    options = CollectOptions(
        landing=str(tmp_path),
        bootstrap_servers=(f"127.0.0.1:{port}",),
        metrics_urls=((4, f"http://127.0.0.1:{port}/metrics"),),
        cluster_id="gone",
        interval_s=0.05,
        count=2,
        timeout_s=2,
    )
    summaries = Collector(options).run()
    assert [s.number for s in summaries] == [1, 2]
    assert all(s.quorum.startswith("failed") and s.scrapes_ok == 0 for s in summaries)
    quorum = sorted((tmp_path / "quorum" / "cluster=gone").iterdir())
    assert len(quorum) == 2 and all(p.name.endswith(".error.jsonl") for p in quorum)
    envelope = json.loads(quorum[0].read_text())
    assert set(envelope) == {"cluster_id", "collected_at_ms", "error"}
    assert f"127.0.0.1:{port}" in envelope["error"] and "refused" in envelope["error"].lower()
    partitions = sorted((tmp_path / "partitions" / "cluster=gone").iterdir())
    assert len(partitions) == 2 and "error" in json.loads(partitions[0].read_text())
    scrapes = sorted((tmp_path / "metrics" / "cluster=gone" / "node=4").iterdir())
    assert len(scrapes) == 2
    text = scrapes[0].read_text()
    assert text.startswith("# quorumlake collect: scrape of http://127.0.0.1:") and text.count("\n") == 1
    assert not [p for p in tmp_path.rglob(".*")]


def _collect(*args: str) -> subprocess.CompletedProcess:
    return quorumlake("collect", *args, env={**os.environ, "PYTHONPATH": os.getcwd()})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--landing", "x"], "one of the arguments --bootstrap-server --bootstrap-controller is required"),
        (["--bootstrap-server", "a:1", "--bootstrap-controller", "b:2", "--landing", "x"], "not allowed with"),
        (["--bootstrap-server", "nohost", "--landing", "x"], "expected HOST:PORT, got 'nohost'"),
        (["--bootstrap-server", "a:1"], "the following arguments are required: --landing"),
        (["--bootstrap-server", "a:1", "--landing", "x", "--metrics-url", "x=ftp://a"], "expected NODE_ID=http"),
        (
            [
                "--bootstrap-server",
                "a:1",
                "--landing",
                "x",
                "--metrics-url",
                "1=http://a",
                "--metrics-url",
                "1=http://b",
            ],
            "the same node id is given twice",
        ),
        (["--bootstrap-server", "a:1", "--landing", "x", "--count", "0"], "must be above 0"),
        (["--bootstrap-server", "a:1", "--landing", "x", "--interval-s", "soon"], "not a number: 'soon'"),
        (
            ["--bootstrap-server", "a:1", "--landing", "x", "--command-config", "/nonexistent.properties"],
            "--command-config: cannot read /nonexistent.properties",
        ),
    ],
)
def test_collect_usage_errors_are_one_line_and_exit_2(args, message, tmp_path):
    result = _collect(*[str(tmp_path / a) if a == "x" else a for a in args])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("quorumlake") and message in lines[0]


def test_collect_has_help():
    result = _collect("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: quorumlake collect")
    assert "--bootstrap-controller" in result.stdout and "--command-config" in result.stdout


def test_an_unexpected_failure_is_recorded_too(tmp_path):
    port = free_port()  # nothing listens on it
    options = CollectOptions(
        landing=str(tmp_path),
        bootstrap_servers=(f"127.0.0.1:{port}",),
        cluster_id="odd",
        metrics_urls=((1, "http://[::1/metrics"),),
        count=1,
        timeout_s=2,
    )
    summary = Collector(options).run()[0]
    assert summary.scrapes_ok == 0
    (scrape,) = (tmp_path / "metrics" / "cluster=odd" / "node=1").iterdir()
    assert "ValueError" in scrape.read_text()
