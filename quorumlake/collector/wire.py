"""A small blocking Kafka protocol connection for the collector, built on kafka-python's protocol classes.

kafka-python (a maintained pure-Python client) encodes and decodes every message here from Kafka's own JSON
message schemas; this module only frames them over one socket (TLS and SASL as configured), negotiates versions
with ApiVersions, and bounds every step by a timeout. Its admin client is not used because it bootstraps through
brokers only (the collector must also talk to controllers, `--bootstrap-controller`) and keeps retrying in the
background, where the collector needs one bounded attempt per poll.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kafka import errors as kafka_errors
from kafka.net.sasl import get_sasl_mechanism
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from quorumlake.collector.settings import ClientSettings, split_address

CLIENT_ID = "quorumlake-collect"
MAX_FRAME = 100 * 1024 * 1024
T = TypeVar("T")


class CollectError(Exception):
    """A poll could not be completed (timeout, refused connection, protocol or authorization error); one line."""


def error_name(code: int) -> str:
    """Kafka's name for an error code, e.g. 31 -> CLUSTER_AUTHORIZATION_FAILED."""
    return getattr(kafka_errors.for_code(code), "message", f"ERROR_{code}")


class KafkaConnection:
    """One connection to one Kafka node (broker or controller)."""

    def __init__(self, address: str, settings: ClientSettings, timeout_s: float):
        self.address = address
        self.timeout_s = timeout_s
        host, port = split_address(address)
        self._correlation = 0
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except TimeoutError:
            raise CollectError(f"{address}: connection timed out after {timeout_s:g}s") from None
        except OSError as exc:
            raise CollectError(f"{address}: {exc.strerror or exc}") from None
        try:
            if settings.ssl_context is not None:
                try:
                    sock = settings.ssl_context.wrap_socket(sock, server_hostname=host)
                except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
                    raise CollectError(
                        f"{address}: TLS handshake failed: {getattr(exc, 'verify_message', None) or exc}"
                    ) from None
            sock.settimeout(timeout_s)
            self._sock = sock
            self.api_versions = self._negotiate()
            if settings.uses_sasl:
                self._authenticate(host, settings)
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- framing -------------------------------------------------------------------------------------------------

    def _read_exactly(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise CollectError(f"{self.address}: connection closed by the server")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def send(self, request: Any, version: int, response_class: Any) -> Any:
        """Send `request` at `version`, return the decoded response (same version)."""
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id=CLIENT_ID)
        payload = request.encode(version=version, header=True, framed=True)
        try:
            self._sock.sendall(payload)
            (size,) = struct.unpack(">i", self._read_exactly(4))
            if not 0 < size <= MAX_FRAME:
                raise CollectError(f"{self.address}: bad response frame size {size}")
            body = self._read_exactly(size)
        except TimeoutError:
            raise CollectError(
                f"{self.address}: no response to {type(request).__name__} v{version} within {self.timeout_s:g}s"
            ) from None
        except OSError as exc:
            raise CollectError(f"{self.address}: {exc.strerror or exc}") from None
        try:
            response = response_class.decode(body, version=version, header=True)
        except Exception as exc:  # a malformed frame: report it, never crash the collector
            raise CollectError(f"{self.address}: cannot decode {response_class.__name__} v{version}: {exc}") from None
        header = getattr(response, "header", None) or getattr(response, "_header", None)
        if header is not None and getattr(header, "correlation_id", self._correlation) != self._correlation:
            raise CollectError(f"{self.address}: response correlation id does not match the request")
        return response

    # --- session setup -------------------------------------------------------------------------------------------

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        response = self.send(ApiVersionsRequest(), 0, ApiVersionsResponse)
        if response.error_code != 0:
            raise CollectError(f"{self.address}: ApiVersions failed: {error_name(response.error_code)}")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, request_class: Any, highest: int | None = None) -> int:
        """The highest version both sides support (at most `highest`), or CollectError when there is none."""
        key = request_class.API_KEY
        ours = request_class.max_version if highest is None else min(highest, request_class.max_version)
        if key not in self.api_versions:
            raise CollectError(f"{self.address}: the server does not support {request_class.__name__} (API key {key})")
        low, high = self.api_versions[key]
        version = min(ours, high)
        if version < low:
            raise CollectError(
                f"{self.address}: no common version of {request_class.__name__} "
                f"(server {low}-{high}, collector up to {ours})"
            )
        return version

    def supports(self, request_class: Any) -> bool:
        return request_class.API_KEY in self.api_versions

    def _authenticate(self, host: str, settings: ClientSettings) -> None:
        version = self.version_for(SaslHandshakeRequest, 1)
        handshake = self.send(SaslHandshakeRequest(mechanism=settings.sasl_mechanism), version, SaslHandshakeResponse)
        if handshake.error_code != 0:
            raise CollectError(
                f"{self.address}: SASL handshake failed: {error_name(handshake.error_code)} "
                f"(server mechanisms: {', '.join(handshake.mechanisms or [])})"
            )
        mechanism = get_sasl_mechanism(settings.sasl_mechanism)(
            host=host,
            sasl_mechanism=settings.sasl_mechanism,
            security_protocol=settings.security_protocol,
            sasl_plain_username=settings.sasl_username,
            sasl_plain_password=settings.sasl_password,
        )
        auth_version = self.version_for(SaslAuthenticateRequest, 2)
        while not mechanism.is_done():
            reply = self.send(
                SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()), auth_version, SaslAuthenticateResponse
            )
            if reply.error_code != 0:
                raise CollectError(
                    f"{self.address}: SASL authentication failed: {error_name(reply.error_code)}"
                    f"{': ' + reply.error_message if reply.error_message else ''}"
                )
            mechanism.receive(reply.auth_bytes)
        if not mechanism.is_authenticated():
            raise CollectError(f"{self.address}: SASL {settings.sasl_mechanism} authentication failed")


def first_reachable(
    addresses: Iterable[str], settings: ClientSettings, timeout_s: float, call: Callable[[KafkaConnection], T]
) -> T:
    """`call` on a connection to the first address that connects and answers; CollectError naming every failure."""
    reasons = []
    deadline = time.monotonic() + 3 * timeout_s
    for address in addresses:
        if time.monotonic() > deadline:
            reasons.append(f"{address}: not tried (time budget of the poll used up)")
            continue
        try:
            with KafkaConnection(address, settings, timeout_s) as conn:
                return call(conn)
        except CollectError as exc:
            reasons.append(str(exc))
    raise CollectError("; ".join(reasons) or "no address to connect to")
