"""What `quorumlake collect` records of the node that answers (`quorumlake.collector.features`): the release and the
finalized features from ApiVersions v3/v4, read from real protocol bytes (kafka-python's encoders) and over a real
socket from a small ApiVersions peer; the landing envelope carries them."""

from __future__ import annotations

import json
import socket
import struct
import threading

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.metadata import ApiVersionsResponse as Response

from quorumlake.collector.features import NodeRelease, describe_node, release_from
from quorumlake.collector.landing import Landing
from quorumlake.collector.settings import ClientSettings
from quorumlake.collector.wire import KafkaConnection
from quorumlake.contract.kafka import METADATA_VERSIONS, metadata_version_name, release_of_metadata_level

API_43 = {**BROKER_API_VERSIONS[(4, 3)], 18: (0, 4)}
CONTROLLER_API = {18: (0, 4), 55: (0, 2), 60: (0, 1), 1: (4, 17)}  # no Produce: a controller listener


def decoded(version: int, supported=(), finalized=(), epoch=-1, error=0):
    response = Response(
        error_code=error,
        api_keys=[Response.ApiVersion(api_key=18, min_version=0, max_version=4)],
        throttle_time_ms=0,
        supported_features=[
            Response.SupportedFeatureKey(name=n, min_version=a, max_version=b) for n, a, b in supported
        ],
        finalized_features_epoch=epoch,
        finalized_features=[
            Response.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v) for n, v in finalized
        ],
    )
    # with an error Kafka answers in the v0 layout, whatever was asked
    return Response.decode(bytes(response.encode(version=0 if error else version)), version=version)


def test_the_release_is_named_by_the_highest_metadata_version_a_node_supports():
    got = release_from(
        decoded(4, [("metadata.version", 7, 30), ("kraft.version", 0, 1)], [("metadata.version", 30)], epoch=12),
        API_43,
    )
    assert got == NodeRelease("4.3", {"metadata.version": 30})  # kraft.version 0 is not listed: a static quorum
    assert got.envelope_fields() == {"kafka_version": "4.3", "finalized_features": {"metadata.version": 30}}
    # a controller (no Produce API) of a dynamic quorum
    got = release_from(
        decoded(3, [("metadata.version", 7, 27)], [("metadata.version", 27), ("kraft.version", 1)], epoch=3),
        CONTROLLER_API,
    )
    assert got == NodeRelease("4.1", {"kraft.version": 1, "metadata.version": 27})


def test_without_features_a_broker_s_release_is_inferred_and_a_controller_s_is_unknown():
    assert release_from(None, {**BROKER_API_VERSIONS[(3, 2)], 18: (0, 3)}) == NodeRelease("3.2", None)
    assert release_from(decoded(3, error=35), API_43) == NodeRelease("4.3", None)  # an error: no features
    assert release_from(None, CONTROLLER_API) == NodeRelease(None, None)
    assert NodeRelease(None, None).envelope_fields() == {}


def test_metadata_version_levels():
    assert metadata_version_name(21) == "3.9-IV0" and metadata_version_name(99) == "level 99"
    assert release_of_metadata_level(27) == "4.1" and release_of_metadata_level(0) is None
    assert sorted(METADATA_VERSIONS) == list(range(1, 32))


class ApiVersionsPeer:
    """A TCP peer that answers every ApiVersions request, at the version asked, with the given features (the
    request's header read as Kafka's RequestHeader v1/v2: api key, api version, correlation id)."""

    def __init__(self, supported, finalized, epoch):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.versions: list[int] = []
        self.features = (supported, finalized, epoch)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                key, version, correlation = struct.unpack(">hhi", body[:8])
                assert key == 18
                self.versions.append(version)
                supported, finalized, epoch = self.features
                response = Response(
                    error_code=0,
                    api_keys=[
                        Response.ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in API_43.items()
                    ],
                    throttle_time_ms=0,
                    supported_features=[
                        Response.SupportedFeatureKey(name=n, min_version=a, max_version=b) for n, a, b in supported
                    ],
                    finalized_features_epoch=epoch,
                    finalized_features=[
                        Response.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                        for n, v in finalized
                    ],
                )
                # ApiVersions' response header is always the non-flexible one: the correlation id alone
                payload = struct.pack(">i", correlation) + bytes(response.encode(version=version))
                conn.sendall(struct.pack(">i", len(payload)) + payload)


def test_describe_node_asks_at_v4_on_the_connection(tmp_path):
    peer = ApiVersionsPeer([("metadata.version", 7, 30), ("kraft.version", 0, 1)], [("metadata.version", 30)], 9)
    settings = ClientSettings()
    with KafkaConnection(peer.address, settings, timeout_s=5) as conn:
        node = describe_node(conn)
    assert peer.versions == [0, 4]  # the connection's negotiation, then the features
    assert node == NodeRelease("4.3", {"metadata.version": 30})
    path = Landing(tmp_path).quorum("c", 5, 2, {"errorCode": 0}, node.envelope_fields())
    assert json.loads(path.read_text()) == {
        "cluster_id": "c",
        "collected_at_ms": 5,
        "api_version": 2,
        "response": {"errorCode": 0},
        "kafka_version": "4.3",
        "finalized_features": {"metadata.version": 30},
    }
