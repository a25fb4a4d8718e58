"""Pure-Python parsing and naming for node metrics (no Spark, no I/O, no clock); feeds `silver.node_metrics`,
one row per node per scrape per metric (per topic and partition for the partition gauges).

- `parse_exposition`: a Prometheus text exposition (format 0.0.4) into samples and per-line errors.
- `canonical_metric`: a Prometheus sample (Strimzi rule names or jmx_exporter default names, 0.x or 1.x, with or
  without `lowercaseOutputName`) to the contract's canonical metric name.
- `canonical_from_mbean`: the same for a Jolokia-style read (JMX ObjectName + attribute).
- `node_role`: `controller`, `broker` or `combined` from the canonical names a node exposes.

Naming facts are in `docs/kafka-surfaces.md` §4 and §6; the canonical names in `docs/contract.md` §2 (silver).
Beyond the contract's list, the KRaft controller-health series behind `gold.controller_health` are canonical too:
`raft_current_vote`, `raft_number_unknown_voter_connections`, `raft_commit_latency_avg|max`,
`raft_election_latency_avg|max`, `raft_append_records_rate`, `raft_fetch_records_rate`,
`controller_fenced_broker_count`, `controller_active_broker_count`, `controller_metadata_error_count`,
`controller_timed_out_broker_heartbeat_count`; and the Kafka 4.x signals behind gold's 4.x columns:
`raft_number_of_voters`, `raft_number_of_observers`, `raft_uncommitted_voter_change`,
`controller_ignored_static_voters`, `broker_ignored_static_voters`, `controller_avg_idle_ratio`,
`controller_unclean_leader_elections_total`, `controller_elr_elections_total`,
`controller_broker_registration_state`, `controller_time_since_last_heartbeat_received_ms` (these two per broker:
`broker_id`), `controller_controlled_shutdown_broker_count`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from quorumlake.contract.kafka import INTEGER

SAMPLE_TYPES = ("counter", "gauge", "histogram", "summary", "untyped", "unknown")
FAMILY_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
PARTITION_METRICS = ("partition_at_min_isr", "partition_under_min_isr", "partition_under_replicated")
BROKER_PREFIXES = ("broker_", "replica_manager_", "partition_")

# Separator-free, lower-case identity of an MBean value -> canonical name. The identity is
# domain + type + (name) + (attribute unless the yammer `Value`), all with non-alphanumerics removed, so the
# Strimzi rule names, the exporter's default names and ObjectNames of one MBean all meet on one key.
_CANONICAL = {
    "kafkacontrollerkafkacontroller" + key: "controller_" + value
    for key, value in {
        "lastappliedrecordoffset": "last_applied_record_offset",
        "lastcommittedrecordoffset": "last_committed_record_offset",
        "lastappliedrecordtimestamp": "last_applied_record_timestamp",
        "lastappliedrecordlagms": "last_applied_record_lag_ms",
        "activecontrollercount": "active_controller_count",
        "offlinepartitionscount": "offline_partitions_count",
        # ControllerMetadataMetrics (every controller) and QuorumControllerMetrics (3.6+), docs/kafka-surfaces.md §4.1
        "fencedbrokercount": "fenced_broker_count",
        "activebrokercount": "active_broker_count",
        "metadataerrorcount": "metadata_error_count",
        "timedoutbrokerheartbeatcount": "timed_out_broker_heartbeat_count",
        # KIP-853 (4.0): 1 when controller.quorum.voters is set but ignored (the quorum is dynamic)
        "ignoredstaticvoters": "ignored_static_voters",
        # KIP-1131 (4.1): per broker (`broker` key property), the active controller's view of it
        "brokerregistrationstate": "broker_registration_state",
        "timesincelastheartbeatreceivedms": "time_since_last_heartbeat_received_ms",
        "controlledshutdownbrokercount": "controlled_shutdown_broker_count",
    }.items()
}
_CANONICAL.update(
    {
        # KIP-1190 (4.2): the controller event thread's idle ratio (0 = always busy). Not MetadataLoader's AvgIdleRatio.
        "kafkacontrollercontrollereventmanageravgidleratio": "controller_avg_idle_ratio",
        # ControllerStats meters' Count, with the identity of each exporter naming: ObjectName / default names
        # (`..._Count{name="UncleanLeaderElectionsPerSec"}`: name + attribute) and Strimzi's `*PerSec` Count rule
        # (`kafka_controller_controllerstats_uncleanleaderelections_total`, its `_total` stripped below)
        **{
            "kafkacontrollercontrollerstats" + name + suffix: "controller_" + metric
            for name, metric in (
                ("uncleanleaderelections", "unclean_leader_elections_total"),
                ("electionfromeligibleleaderreplicas", "elr_elections_total"),
            )
            for suffix in ("perseccount", "")
        },
    }
)
_CANONICAL.update(
    {
        "kafkaserverbrokermetadatametrics" + key.replace("_", ""): "broker_" + key
        for key in (
            "last_applied_record_offset",
            "last_applied_record_timestamp",
            "last_applied_record_lag_ms",
            "metadata_load_error_count",
            "metadata_apply_error_count",
            "ignored_static_voters",  # KIP-853 (4.0)
        )
    }
)
_CANONICAL.update(
    {
        "kafkaserverreplicamanagerunderreplicatedpartitions": "replica_manager_under_replicated_partitions",
        "kafkaserverreplicamanagerunderminisrpartitioncount": "replica_manager_under_min_isr_partition_count",
        "kafkaserverreplicamanageratminisrpartitioncount": "replica_manager_at_min_isr_partition_count",
        "kafkaclusterpartitionatminisr": "partition_at_min_isr",
        "kafkaclusterpartitionunderminisr": "partition_under_min_isr",
        "kafkaclusterpartitionunderreplicated": "partition_under_replicated",
    }
)
_CANONICAL.update(
    {
        "kafkaserverraftmetrics" + key.replace("_", ""): "raft_" + key
        for key in (
            "current_leader",
            "current_epoch",
            "high_watermark",
            "log_end_offset",
            "current_state",
            # KRaft controller health (raft-metrics on every node, docs/kafka-surfaces.md §4.3). The Strimzi rules
            # type `*-max` as COUNTER, so jmx_exporter 1.x writes `..._commit_latency_max_total`: the `_total` is
            # stripped below because the base is known. Idle Avg/Max read NaN, kept as NaN in silver.
            "current_vote",
            "number_unknown_voter_connections",
            "commit_latency_avg",
            "commit_latency_max",
            "election_latency_avg",
            "election_latency_max",
            "append_records_rate",
            "fetch_records_rate",
            # KIP-853 (3.9+/4.0): voters on every node; observers and the uncommitted voter change on the leader only
            "number_of_voters",
            "number_of_observers",
            "uncommitted_voter_change",
        )
    }
)

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_FLOAT = re.compile(r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)$", re.IGNORECASE)
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
# How many distinct series (name and labels) a parser process remembers: a scrape repeats the series of the scrapes
# before it, so each is parsed and named once per process instead of once per sample. A series costs about 1.5 KB in
# the two caches, so the bound keeps a Python worker under about 25 MB however many partitions a fleet has (past it,
# the least recently seen series are parsed again).
SERIES_CACHE_SIZE = 1 << 14


class _LineError(ValueError):
    pass


def _compact(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def sanitize(name: str) -> str:
    """Lower case; every character outside `[a-z0-9_]` becomes `_`."""
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


# ---------------------------------------------------------------------------------------------------------------
# Text exposition


def _skip_blanks(line: str, pos: int) -> int:
    while pos < len(line) and line[pos] in " \t":
        pos += 1
    return pos


def _labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse `{k="v",...}` starting at `line[pos] == "{"`; returns the labels and the index after `}`."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        pos = _skip_blanks(line, pos)
        if line[pos : pos + 1] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(line, pos)
        if not match:
            raise _LineError(f"bad label name at column {pos + 1}")
        name = match.group()
        pos = match.end()
        pos = _skip_blanks(line, pos)
        if line[pos : pos + 1] != "=":
            raise _LineError(f"label {name} has no '='")
        pos = _skip_blanks(line, pos + 1)
        if line[pos : pos + 1] != '"':
            raise _LineError(f"label {name} has no quoted value")
        pos += 1
        value = []
        while True:
            if pos >= len(line):
                raise _LineError(f"unterminated value of label {name}")
            char = line[pos]
            if char == "\\" and pos + 1 < len(line):
                nxt = line[pos + 1]
                value.append(_UNESCAPE.get(nxt, "\\" + nxt))
                pos += 2
                continue
            if char == '"':
                pos += 1
                break
            value.append(char)
            pos += 1
        if name in labels:
            raise _LineError(f"duplicate label {name}")
        labels[name] = "".join(value)
        pos = _skip_blanks(line, pos)
        if line[pos : pos + 1] == ",":
            pos += 1
        elif line[pos : pos + 1] != "}":
            raise _LineError(f"expected ',' or '}}' after label {name}")


def _sample(line: str) -> tuple[str, dict[str, str], float, int | None]:
    stripped = line.lstrip(" \t")
    series, brace, rest = stripped.rpartition("}")
    cached = _series(series + brace) if brace else None
    if cached is None:  # no labels, or a line the cached path does not cover: parsed as written
        name, labels, rest = _name_and_labels(stripped)
    else:  # the common case, `name{labels} value [timestamp]`: the series part is parsed once per process
        name, items = cached
        labels = dict(items)
    tokens = rest.split()
    if not tokens:
        raise _LineError("missing value")
    if len(tokens) > 2:
        raise _LineError("unexpected text after the timestamp")
    if not _FLOAT.match(tokens[0]):
        raise _LineError(f"value {tokens[0]!r} is not a number")
    timestamp = None
    if len(tokens) == 2:
        if not INTEGER.match(tokens[1]):
            raise _LineError(f"timestamp {tokens[1]!r} is not an integer")
        timestamp = int(tokens[1])
    return name, labels, float(tokens[0]), timestamp


def _name_and_labels(stripped: str) -> tuple[str, dict[str, str], str]:
    """(metric name, labels, the rest of the line) of a sample line without its leading blanks."""
    match = _NAME.match(stripped)
    if not match:
        raise _LineError("line does not start with a metric name")
    name, pos = match.group(), match.end()
    labels: dict[str, str] = {}
    rest = stripped[pos:].lstrip(" \t")
    if rest.startswith("{"):
        labels, end = _labels(rest, 0)
        rest = rest[end:]
    elif rest and rest == stripped[pos:]:
        raise _LineError("metric name is followed by neither labels nor whitespace")
    return name, labels, rest


@functools.lru_cache(maxsize=SERIES_CACHE_SIZE)
def _series(text: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(name, labels as pairs) of the series part of a sample line, `text` ending at the `}` of its label set; None
    when `text` is not exactly a name and a label set (the caller then parses the line as written)."""
    try:
        name, labels, rest = _name_and_labels(text)
    except _LineError:
        return None
    return (name, tuple(labels.items())) if rest == "" else None


def _family_type(name: str, types: dict[str, str]) -> str | None:
    if name in types:
        return types[name]
    for suffix in FAMILY_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in types:
            return types[name[: -len(suffix)]]
    return None


def parse_exposition(text: str) -> tuple[list[dict], list[dict]]:
    """Parse a Prometheus text exposition (0.0.4) into `(samples, errors)`; an unparseable line does not stop it.

    Sample keys: `name`, `labels` (dict in written order, values unescaped), `value` (float; NaN and ±Inf
    allowed), `timestamp_ms` (int or None), `line_number` (1-based), `type` (from the preceding `# TYPE` line of
    the series' family; `x_total`, `x_count`, `x_sum`, `x_bucket` also match family `x`; else None).
    Error keys: `line_number`, `line` (as written, without its line ending), `reason`.
    HELP lines, other comments and blank lines are skipped; a `# TYPE` line with a missing or unknown type is an
    error. A trailing comma inside a label set (jmx_exporter 0.x) is accepted.
    """
    samples: list[dict] = []
    errors: list[dict] = []
    types: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] == "TYPE":
                if len(parts) != 4 or not _NAME.fullmatch(parts[2]) or parts[3].strip() not in SAMPLE_TYPES:
                    errors.append({"line_number": number, "line": line, "reason": "malformed # TYPE line"})
                else:
                    types[parts[2]] = parts[3].strip()
            continue
        try:
            name, labels, value, timestamp = _sample(line)
        except _LineError as error:
            errors.append({"line_number": number, "line": line, "reason": str(error)})
            continue
        samples.append(
            {
                "name": name,
                "labels": labels,
                "value": value,
                "timestamp_ms": timestamp,
                "line_number": number,
                "type": _family_type(name, types),
            }
        )
    return samples, errors


# ---------------------------------------------------------------------------------------------------------------
# Canonical names


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _partition(value: str | None) -> int | None:
    return int(value) if value is not None and INTEGER.match(value.strip()) else None


def _result(
    metric: str, labels: dict[str, str], source_name: str, state: str | None = None, canonical: bool = True
) -> dict:
    """`broker_id` is the `broker` label (key property) of a canonical per-broker controller metric (KIP-1131's
    BrokerRegistrationState, TimeSinceLastHeartbeatReceivedMs); other series keep their label values in their name."""
    return {
        "metric": metric,
        "topic": labels.get("topic"),
        "partition": _partition(labels.get("partition")),
        "broker_id": _partition(labels.get("broker")) if canonical else None,
        "source_name": source_name,
        "state": state,
    }


def _own_name(base: str, labels: dict[str, str]) -> str:
    """Sanitized series name; the values of labels other than topic/partition (sorted by label name) are
    appended, so that series told apart only by a label (`{name="LeaderCount"}`, `{quantile="0.99"}`) keep
    distinct metric names under the silver key."""
    extra = [labels[key] for key in sorted(labels) if key not in ("topic", "partition")]
    return sanitize("_".join([base, *extra]))


def canonical_metric(name: str, labels: dict[str, str]) -> dict | None:
    """Map one Prometheus sample to `{metric, topic, partition, broker_id, source_name, state}`.

    `metric` is the contract's canonical name when the series is one of the known Kafka MBean values, whatever
    the exporter naming: Strimzi rules (`kafka_controller_kafkacontroller_lastappliedrecordoffset`), the
    exporter's default format (`kafka_controller_KafkaController_Value{name="LastAppliedRecordOffset"}`: the
    `_Value` suffix and the `name` label are folded into the identity), `lowercaseOutputName` variants.
    A trailing `_total` is stripped only when what remains is a known metric (jmx_exporter 1.x appends it to
    anything typed COUNTER); other `*_total` series keep it, as their own name.
    Any other series gets its own sanitized name plus its non-topic/partition label values (see `_own_name`).
    `topic`/`partition` (int, None if not an integer) come from the labels of any series; `broker_id` from the
    `broker` label of a canonical series (KIP-1131's per-broker gauges). `state` is the
    raft state (`leader`, `follower`, ...) of `raft_current_state` (Strimzi's `current_state` label), else None.
    `source_name` is the series as written: name plus labels in their order, values re-escaped.
    Returns None only for an empty name.
    """
    mapped = _canonical(name, tuple(labels.items()))
    return None if mapped is None else dict(mapped)


@functools.lru_cache(maxsize=SERIES_CACHE_SIZE)
def _canonical(name: str, items: tuple[tuple[str, str], ...]) -> dict | None:
    """`canonical_metric` of one series, remembered (callers get copies)."""
    labels = dict(items)
    if not name:
        return None
    rendered = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    source_name = f"{name}{{{rendered}}}" if labels else name
    lowered = name.lower()
    candidates = [_compact(name)]
    if lowered.endswith("_value") and "name" in labels:
        candidates.append(_compact(name[: -len("_value")]) + _compact(labels["name"]))
    if lowered.endswith("_count") and "name" in labels:  # a yammer meter's Count under the default names
        candidates.append(_compact(name[: -len("_count")]) + _compact(labels["name"]) + "count")
    candidates += [key[: -len("total")] for key in candidates if lowered.endswith("_total")]
    for key in candidates:
        metric = _CANONICAL.get(key)
        if metric == "raft_current_state":
            return _result(metric, labels, source_name, labels.get("current_state", labels.get("state")))
        if metric is not None:
            return _result(metric, labels, source_name)
    return _result(_own_name(name, labels), labels, source_name, canonical=False)


def _object_name(mbean: str) -> tuple[str, dict[str, str]]:
    """`domain:k=v,k="quoted,v"` -> (domain, key properties in order)."""
    domain, _, rest = mbean.partition(":")
    props: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        eq = rest.find("=", pos)
        if eq < 0:
            break
        key = rest[pos:eq].strip()
        pos = eq + 1
        if rest[pos : pos + 1] == '"':
            end = pos + 1
            while end < len(rest) and rest[end] != '"':
                end += 2 if rest[end] == "\\" else 1
            value = rest[pos + 1 : end].replace('\\"', '"').replace("\\\\", "\\")
            pos = rest.find(",", end)
        else:
            comma = rest.find(",", pos)
            value = rest[pos:] if comma < 0 else rest[pos:comma]
            pos = comma
        props[key] = value.strip()
        if pos < 0:
            break
        pos += 1
    return domain.strip(), props


def canonical_from_mbean(mbean: str, attribute: str) -> dict | None:
    """Map a Jolokia-style read (`mbean` a JMX ObjectName, `attribute` e.g. `Value` or `current-leader`) to
    `{metric, topic, partition, broker_id, source_name, state}`, with the same canonical names as `canonical_metric`.

    Unknown MBeans get the sanitized `<domain>_<type>_<name>_<attribute>` followed by the values of any other
    key properties except topic/partition (sorted by key), e.g.
    `kafka_server_brokertopicmetrics_messagesinpersec_count`. `source_name` is `<mbean>/<attribute>` (Jolokia's
    read-path form). `state` is always None (a numeric read carries no raft state). None for an empty mbean.
    """
    if not mbean.strip():
        return None
    domain, props = _object_name(mbean)
    source_name = f"{mbean}/{attribute}"
    identity = [domain, props.get("type", "")]
    if "name" in props:
        identity.append(props["name"])
    key = _compact("".join(identity)) + ("" if attribute == "Value" and "name" in props else _compact(attribute))
    metric = _CANONICAL.get(key)
    if metric is not None:
        return _result(metric, props, source_name)
    parts = [part for part in (domain, props.get("type"), props.get("name"), attribute) if part]
    parts += [props[k] for k in sorted(props) if k not in ("type", "name", "topic", "partition")]
    return _result(sanitize("_".join(parts)), props, source_name, canonical=False)


def node_role(metrics: Iterable[str]) -> str | None:
    """`combined`, `controller` or `broker` from the canonical metric names one node exposes: `controller_*`
    marks the controller role; `broker_*`, `replica_manager_*` and `partition_*` the broker role (`raft_*` is on
    every node and decides nothing). None when neither role shows."""
    names = [metric for metric in metrics if metric]
    controller = any(metric.startswith("controller_") for metric in names)
    broker = any(metric.startswith(BROKER_PREFIXES) for metric in names)
    if controller and broker:
        return "combined"
    return "controller" if controller else "broker" if broker else None
