"""Connection settings of the collector from a standard Kafka client properties file (`--command-config`).

Supported keys (everything else is ignored, as Kafka's own tools ignore unknown keys):
- `security.protocol`: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL;
- TLS: `ssl.truststore.type=PEM` with `ssl.truststore.location` (a PEM file) or `ssl.truststore.certificates`
  (inline PEM); `ssl.keystore.type=PEM` with `ssl.keystore.location` (PEM holding certificate and key) or
  `ssl.keystore.certificate.chain` + `ssl.keystore.key`; `ssl.key.password`;
  `ssl.endpoint.identification.algorithm` (empty turns host-name checks off). JKS and PKCS12 stores cannot be
  read by Python's ssl module: convert them to PEM (`keytool -exportcert -rfc`, `openssl pkcs12 -nodes`);
- SASL: `sasl.mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default is GSSAPI) and `sasl.jaas.config`
  (`... required username="..." password="...";`). The SASL exchanges are kafka-python's mechanisms.
"""

from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SettingsError(ValueError):
    """The client properties cannot be used; the message is one line."""


@dataclass(frozen=True)
class ClientSettings:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts in brackets) -> (host, port); ValueError naming the text otherwise."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def read_properties(text: str) -> dict[str, str]:
    """Java `.properties` text: `key=value` or `key: value`, `#`/`!` comments, `\\` line continuations."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", logical)
        if match:
            props[match.group(1).replace("\\", "")] = match.group(2)
        elif logical:
            props[logical] = ""
        logical = ""
    return props


def _jaas_option(jaas: str, name: str) -> str | None:
    match = re.search(rf'\b{name}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas) or re.search(rf"\b{name}\s*=\s*([^\s;\"]+)", jaas)
    return match.group(1).replace('\\"', '"') if match else None


def _ssl_context(props: dict[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context()
    trust_type = props.get("ssl.truststore.type", "PEM").upper()
    if "ssl.truststore.certificates" in props:
        context = ssl.create_default_context(cadata=props["ssl.truststore.certificates"].replace("\\n", "\n"))
    elif "ssl.truststore.location" in props:
        if trust_type != "PEM":
            raise SettingsError(f"ssl.truststore.type {trust_type} cannot be read by the collector; use a PEM file")
        context = ssl.create_default_context(cafile=props["ssl.truststore.location"])
    key_type = props.get("ssl.keystore.type", "PEM").upper()
    password = props.get("ssl.key.password") or props.get("ssl.keystore.password") or None
    if "ssl.keystore.certificate.chain" in props and "ssl.keystore.key" in props:
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:
            pem.write(props["ssl.keystore.certificate.chain"].replace("\\n", "\n") + "\n")
            pem.write(props["ssl.keystore.key"].replace("\\n", "\n") + "\n")
            pem.flush()
            context.load_cert_chain(pem.name, password=password)
    elif "ssl.keystore.location" in props:
        if key_type != "PEM":
            raise SettingsError(f"ssl.keystore.type {key_type} cannot be read by the collector; use a PEM file")
        context.load_cert_chain(props["ssl.keystore.location"], password=password)
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        context.check_hostname = False
    return context


def load_settings(path: str | Path | None) -> ClientSettings:
    """Settings from a client properties file (None: plaintext, no authentication)."""
    if path is None:
        return ClientSettings()
    try:
        props = read_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise SettingsError(f"security.protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = _ssl_context(props)
        except (OSError, ssl.SSLError) as exc:
            raise SettingsError(f"TLS settings in {path}: {exc}") from None
    if not protocol.startswith("SASL_"):
        return ClientSettings(protocol, ssl_context=context)
    mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
    if mechanism not in SASL_MECHANISMS:
        raise SettingsError(
            f"sasl.mechanism {mechanism} is not supported by the collector (supported: {', '.join(SASL_MECHANISMS)})"
        )
    jaas = props.get("sasl.jaas.config", "")
    username, password = _jaas_option(jaas, "username"), _jaas_option(jaas, "password")
    if not username or password is None:
        raise SettingsError(f'sasl.jaas.config in {path} needs username="..." and password="..."')
    return ClientSettings(protocol, mechanism, username, password, context)
