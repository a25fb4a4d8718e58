"""Pure-Python parsers for the Kafka CLI captures of the landing zone (no Spark, no I/O, no clock).

- `parse_replication`: `kafka-metadata-quorum describe --replication`, one dict per printed replica row
  (feeds `silver.replica_states`, one row per replica per quorum snapshot).
- `parse_status`: `kafka-metadata-quorum describe --status`, one dict per capture (feeds `silver.quorum_snapshots`).
- `parse_topics`: `kafka-topics --describe`, one dict per partition line (feeds `silver.partition_states`).

Formats as in `docs/kafka-surfaces.md` §3.2, §3.3 and §5.2. Every parser raises `CaptureError` (a `ValueError`)
with a one-line message naming the 1-based line when the text is not a valid capture. Lines may end in CRLF; blank
lines are ignored wherever they appear.
"""

from __future__ import annotations

import json
import re

from quorumlake.contract.kafka import INTEGER, ZERO_UUID

LAYOUT_OLD = "3.3-3.8"
LAYOUT_NEW = "3.9+"
STATUSES = ("Leader", "Follower", "Observer")
REPLICATION_COLUMNS = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
STATUS_LABELS = {
    "ClusterId": "kafka_cluster_id",
    "LeaderId": "leader_id",
    "LeaderEpoch": "leader_epoch",
    "HighWatermark": "high_watermark",
    "MaxFollowerLag": "max_follower_lag",
    "MaxFollowerLagTimeMs": "max_follower_lag_time_ms",
    "CurrentVoters": "voters",
    "CurrentObservers": "observers",
}

_MS_AGO = re.compile(r"^(\d+) ms ago$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9._-]+=")


class CaptureError(ValueError):
    """The text is not a valid capture of the CLI command; the message is one line and names the line number."""


def _lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line without its line ending) for every non-blank line."""
    out = []
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        if line.strip():
            out.append((number, line))
    return out


def _int(value: str, what: str, line_number: int) -> int:
    value = value.strip()
    if not INTEGER.match(value):
        raise CaptureError(f"line {line_number}: {what} {value[:40]!r} is not an integer")
    if len(value.lstrip("-")) > 19:  # beyond 64 bits (and Python refuses int() of more than 4300 digits)
        raise CaptureError(f"line {line_number}: {what} {value[:40]!r}... is out of range (more than 64 bits)")
    return int(value)


def _unknown_if_minus_one(value: int) -> int | None:
    return None if value == -1 else value


# ---------------------------------------------------------------------------------------------------------------
# describe --replication


def _cells(line: str) -> list[str]:
    """Cells of a table line: TAB-separated (each cell padded, a trailing TAB after the last one).

    A line without any TAB (tabs lost in transit) falls back to splitting on whitespace, re-joining the
    `N ms ago` cells of `--human-readable` output.
    """
    if "\t" in line:
        cells = [cell.strip() for cell in line.split("\t")]
        while cells and cells[-1] == "":
            cells.pop()
        return cells
    tokens = line.split()
    cells = []
    i = 0
    while i < len(tokens):
        if i + 2 < len(tokens) and tokens[i].isdigit() and tokens[i + 1] == "ms" and tokens[i + 2] == "ago":
            cells.append(" ".join(tokens[i : i + 3]))
            i += 3
        else:
            cells.append(tokens[i])
            i += 1
    return cells


def _timestamp(cell: str, column: str, collected_at_ms: int, line_number: int) -> tuple[int | None, bool | None]:
    """(epoch ms or None, True if the cell was human-readable / False if epoch / None if it was -1)."""
    ago = _MS_AGO.match(cell)
    if ago:
        return collected_at_ms - int(ago.group(1)), True
    value = _int(cell, column, line_number)
    return (None, None) if value == -1 else (value, False)


def parse_replication(text: str, collected_at_ms: int) -> list[dict]:
    """Parse `kafka-metadata-quorum describe --replication` stdout into one dict per data row, in printed order.

    Keys: `position` (0-based row index), `replica_id`, `replica_directory_id` (None when the column is absent or
    the id is all-zero), `log_end_offset` (None for -1), `lag` (as printed), `last_fetch_ms`, `last_caught_up_ms`
    (epoch ms; None for -1; `N ms ago` becomes `collected_at_ms - N`), `status` (`Leader`/`Follower`/`Observer`),
    `layout` (`3.3-3.8` or `3.9+`, by the DirectoryId column) and `human_readable` (any `ms ago` cell).
    Columns are found by header name; columns unknown to this parser are ignored.
    """
    lines = _lines(text)
    if not lines:
        raise CaptureError("empty capture: no header")
    header_number, header_line = lines[0]
    header = _cells(header_line)
    missing = [name for name in REPLICATION_COLUMNS if name not in header]
    if missing:
        raise CaptureError(f"line {header_number}: no header (missing column(s) {', '.join(missing)})")
    if len(set(header)) != len(header):
        raise CaptureError(f"line {header_number}: duplicate column in header")
    index = {name: header.index(name) for name in header}
    has_directory = "DirectoryId" in index
    if len(lines) == 1:
        raise CaptureError(f"line {header_number}: no data rows after the header")

    rows: list[dict] = []
    modes: set[bool] = set()
    for position, (number, line) in enumerate(lines[1:]):
        cells = _cells(line)
        if len(cells) != len(header):
            raise CaptureError(f"line {number}: expected {len(header)} cells, found {len(cells)}")
        cell = {name: cells[i] for name, i in index.items()}
        status = cell["Status"]
        if status not in STATUSES:
            raise CaptureError(f"line {number}: unknown status {status!r}")
        directory_id = None
        if has_directory:
            if not cell["DirectoryId"]:
                raise CaptureError(f"line {number}: empty DirectoryId")
            directory_id = None if cell["DirectoryId"] == ZERO_UUID else cell["DirectoryId"]
        last_fetch, fetch_mode = _timestamp(cell["LastFetchTimestamp"], "LastFetchTimestamp", collected_at_ms, number)
        caught_up, caught_mode = _timestamp(
            cell["LastCaughtUpTimestamp"], "LastCaughtUpTimestamp", collected_at_ms, number
        )
        modes.update(mode for mode in (fetch_mode, caught_mode) if mode is not None)
        if len(modes) > 1:
            raise CaptureError(f"line {number}: mixes 'N ms ago' and epoch-ms timestamps")
        rows.append(
            {
                "position": position,
                "replica_id": _int(cell["NodeId"], "NodeId", number),
                "replica_directory_id": directory_id,
                "log_end_offset": _unknown_if_minus_one(_int(cell["LogEndOffset"], "LogEndOffset", number)),
                "lag": _int(cell["Lag"], "Lag", number),
                "last_fetch_ms": last_fetch,
                "last_caught_up_ms": caught_up,
                "status": status,
                "layout": LAYOUT_NEW if has_directory else LAYOUT_OLD,
            }
        )
    leader_lines = [number for (number, _), row in zip(lines[1:], rows, strict=True) if row["status"] == "Leader"]
    if not leader_lines:
        raise CaptureError("no Leader row (expected exactly one)")
    if len(leader_lines) > 1:
        raise CaptureError(f"line {leader_lines[1]}: second Leader row (expected exactly one)")
    human_readable = modes == {True}
    for row in rows:
        row["human_readable"] = human_readable
    return rows


# ---------------------------------------------------------------------------------------------------------------
# describe --status


def _replica(item: object, label: str, line_number: int) -> tuple[dict, str]:
    """One CurrentVoters/CurrentObservers element: a bare id (3.3-3.8) or an object (3.9+)."""
    if isinstance(item, int) and not isinstance(item, bool):
        return {"id": item, "directory_id": None, "endpoints": []}, LAYOUT_OLD
    if not isinstance(item, dict) or not isinstance(item.get("id"), int) or isinstance(item.get("id"), bool):
        raise CaptureError(f"line {line_number}: {label} element {item!r} has no integer id")
    directory_id = item.get("directoryId")
    endpoints = item.get("endpoints", [])
    if directory_id is not None and not isinstance(directory_id, str):
        raise CaptureError(f"line {line_number}: {label} directoryId {directory_id!r} is not a string or null")
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise CaptureError(f"line {line_number}: {label} endpoints {endpoints!r} is not a list of strings")
    directory_id = None if directory_id in (None, ZERO_UUID) else directory_id
    return {"id": item["id"], "directory_id": directory_id, "endpoints": list(endpoints)}, LAYOUT_NEW


def _replica_list(value: str, label: str, line_number: int) -> tuple[list[dict], set[str]]:
    try:
        items = json.loads(value)
    except ValueError:
        raise CaptureError(f"line {line_number}: {label} is not a replica list: {value[:60]!r}") from None
    if not isinstance(items, list):
        raise CaptureError(f"line {line_number}: {label} is not a replica list: {value[:60]!r}")
    parsed = [_replica(item, label, line_number) for item in items]
    return [replica for replica, _ in parsed], {layout for _, layout in parsed}


def parse_status(text: str) -> dict:
    """Parse `kafka-metadata-quorum describe --status` stdout (3.3-3.8 or 3.9+ layout) into one dict.

    Keys: `kafka_cluster_id`, `leader_id` (None for -1), `leader_epoch`, `high_watermark` (None for -1),
    `max_follower_lag`, `max_follower_lag_time_ms` (-1 kept as printed), `voters` and `observers` (lists, in
    printed order, of `{id, directory_id, endpoints}`; directory_id None for `null`, all-zero or the 3.3-3.8
    layout, endpoints [] when not printed), `layout` (`3.3-3.8` for bare ids, `3.9+` for objects, None when both
    lists are empty). Labels this parser does not know are ignored; every label of §3.2 is required.
    """
    values: dict[str, tuple[int, str]] = {}
    for number, line in _lines(text):
        label, colon, value = line.partition(":")
        label = label.strip()
        if not colon or not label.isalnum():
            raise CaptureError(f"line {number}: not a 'Label: value' line: {line.strip()[:60]!r}")
        if label in values:
            raise CaptureError(f"line {number}: duplicate label {label}")
        values[label] = (number, value.strip())
    missing = [label for label in STATUS_LABELS if label not in values]
    if missing:
        raise CaptureError(f"missing label(s) {', '.join(missing)}")
    for label, (number, value) in values.items():
        if label in STATUS_LABELS and not value:
            raise CaptureError(f"line {number}: {label} has no value")

    def number_of(label: str) -> int:
        line_number, value = values[label]
        return _int(value, label, line_number)

    voters, voter_layouts = _replica_list(values["CurrentVoters"][1], "CurrentVoters", values["CurrentVoters"][0])
    observers, observer_layouts = _replica_list(
        values["CurrentObservers"][1], "CurrentObservers", values["CurrentObservers"][0]
    )
    layouts = voter_layouts | observer_layouts
    if len(layouts) > 1:
        raise CaptureError(f"line {values['CurrentObservers'][0]}: mixes bare ids and replica objects")
    return {
        "kafka_cluster_id": values["ClusterId"][1],
        "leader_id": _unknown_if_minus_one(number_of("LeaderId")),
        "leader_epoch": number_of("LeaderEpoch"),
        "high_watermark": _unknown_if_minus_one(number_of("HighWatermark")),
        "max_follower_lag": number_of("MaxFollowerLag"),
        "max_follower_lag_time_ms": number_of("MaxFollowerLagTimeMs"),
        "voters": voters,
        "observers": observers,
        "layout": layouts.pop() if layouts else None,
    }


# ---------------------------------------------------------------------------------------------------------------
# kafka-topics --describe


def _fields(line: str, line_number: int) -> dict[str, str]:
    """`Key: value` fields of a TAB-separated line, in order; values stripped."""
    fields: dict[str, str] = {}
    for part in line.split("\t"):
        if not part.strip():
            continue
        key, colon, value = part.partition(":")
        key = key.strip()
        if not colon or not key:
            raise CaptureError(f"line {line_number}: field {part.strip()[:40]!r} is not 'Key: value'")
        if key in fields:
            raise CaptureError(f"line {line_number}: duplicate field {key}")
        fields[key] = value.strip()
    return fields


def _configs(value: str) -> dict[str, str]:
    """`k=v,k=v`; a piece without `k=` continues the previous value (list-valued configs contain commas)."""
    configs: dict[str, str] = {}
    last = None
    for piece in value.split(","):
        if _CONFIG_KEY.match(piece):
            last, _, config_value = piece.partition("=")
            configs[last] = config_value
        elif last is not None:
            configs[last] += "," + piece
        elif piece.strip():
            raise CaptureError(f"config entry {piece!r} is not k=v")
    return configs


def _ids(value: str | None, what: str, line_number: int, optional: bool = False) -> list[int] | None:
    if value is None or (optional and value == "N/A"):
        return None
    if not value:
        return []
    return [_int(part, what, line_number) for part in value.split(",")]


def _header(fields: dict[str, str], line_number: int) -> dict:
    for key in ("PartitionCount", "ReplicationFactor"):
        if key in fields:
            _int(fields[key], key, line_number)
    try:
        configs = _configs(fields.get("Configs", ""))
    except CaptureError as error:
        raise CaptureError(f"line {line_number}: {error}") from None
    min_isr = configs.get("min.insync.replicas")
    return {
        "topic_id": fields.get("TopicId") or None,
        "min_isr": None if min_isr is None else _int(min_isr, "min.insync.replicas", line_number),
        "marked_for_deletion": fields.get("MarkedForDeletion", "").lower() == "true",
    }


def parse_topics(text: str, default_min_isr: int = 1) -> list[dict]:
    """Parse `kafka-topics --describe` stdout into one dict per partition line, in printed order.

    Keys: `topic`, `partition`, `leader_id` (None for `none`), `replicas`, `isr`, `adding_replicas`,
    `removing_replicas` (lists of ints, [] when absent or empty), `elr`, `last_known_elr` (None when absent or
    `N/A`, [] when empty), `min_isr` (the topic header's `min.insync.replicas`, else `default_min_isr`),
    `topic_id` (None without a header or TopicId), `marked_for_deletion` (on the partition line or its topic
    header), `line_number`. A line with a `Partition` field is a partition line, any other line starting with
    `Topic:` a topic header; fields this parser does not know are ignored.
    """
    headers: dict[str, dict] = {}
    partitions: list[dict] = []
    for number, line in _lines(text):
        fields = _fields(line, number)
        if "Topic" not in fields or not fields["Topic"]:
            raise CaptureError(f"line {number}: neither a topic header nor a partition line: {line.strip()[:60]!r}")
        topic = fields["Topic"]
        if "Partition" not in fields:
            headers[topic] = _header(fields, number)
            continue
        for key in ("Leader", "Replicas", "Isr"):
            if key not in fields:
                raise CaptureError(f"line {number}: partition line without {key}")
        header = headers.get(topic, {})
        leader = fields["Leader"]
        leader_id = None if leader == "none" else _unknown_if_minus_one(_int(leader, "Leader", number))
        min_isr = header.get("min_isr")
        partitions.append(
            {
                "topic": topic,
                "partition": _int(fields["Partition"], "Partition", number),
                "leader_id": leader_id,
                "replicas": _ids(fields["Replicas"], "Replicas", number),
                "isr": _ids(fields["Isr"], "Isr", number),
                "adding_replicas": _ids(fields.get("Adding Replicas", ""), "Adding Replicas", number),
                "removing_replicas": _ids(fields.get("Removing Replicas", ""), "Removing Replicas", number),
                "elr": _ids(fields.get("Elr"), "Elr", number, optional=True),
                "last_known_elr": _ids(fields.get("LastKnownElr"), "LastKnownElr", number, optional=True),
                "min_isr": default_min_isr if min_isr is None else min_isr,
                "topic_id": header.get("topic_id"),
                "marked_for_deletion": fields.get("MarkedForDeletion", "").lower() == "true"
                or header.get("marked_for_deletion", False),
                "line_number": number,
            }
        )
    return partitions
