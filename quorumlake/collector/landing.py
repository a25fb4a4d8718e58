"""Where and how the collector writes: the landing-zone layout of the data contract (docs/contract.md §1), one file
per capture, written atomically (a temporary name starting with `.`, which the pipeline ignores, then a rename).

- `quorum/cluster=<id>/<collected_at_ms>.jsonl`: one DescribeQuorum envelope line (with the answering node's release
  and the cluster's finalized features, when it said: `features.py`);
- `partitions/cluster=<id>/<collected_at_ms>.jsonl`: one line per partition;
- `metrics/cluster=<id>/node=<n>/<scraped_at_ms>.prom`: the exporter's response body, unchanged.

A failed capture is written too, in a form the pipeline reads into `silver.quarantine` with the reason:
an envelope without `response` (bronze: "missing field 'response'") carrying `"error"`; a partitions line without
partition fields, carrying `"error"`; a scrape holding only a `# quorumlake collect: ...` comment line (bronze:
"no samples in the scrape"). Kafka's own error responses (e.g. CLUSTER_AUTHORIZATION_FAILED) are written as
received: the pipeline keeps them as error snapshots (docs/contract.md §2).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_segment(text: str) -> str:
    """A cluster id usable as a `cluster=<id>` path segment."""
    return _UNSAFE.sub("_", text) or "unknown"


def write_atomically(path: Path, data: bytes) -> Path:
    """Write `data` to `path` via `.<name>.<pid>.tmp` in the same folder, fsync, rename; returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode("utf-8")


class Landing:
    """The landing zone root the collector writes into."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _unique(self, path: Path) -> Path:
        """Two captures in the same millisecond must not overwrite each other."""
        if not path.exists():
            return path
        stem, suffix = path.name.split(".", 1)
        n = 1
        while (candidate := path.with_name(f"{stem}.{n}.{suffix}")).exists():
            n += 1
        return candidate

    def quorum(
        self,
        cluster_id: str,
        collected_at_ms: int,
        api_version: int,
        response: dict,
        reported: dict[str, Any] | None = None,
    ) -> Path:
        """`reported`: what is known of the node that answered (`kafka_version`, `finalized_features`)."""
        envelope = {
            "cluster_id": cluster_id,
            "collected_at_ms": collected_at_ms,
            "api_version": api_version,
            "response": response,
            **(reported or {}),
        }
        path = self.root / "quorum" / f"cluster={safe_segment(cluster_id)}" / f"{collected_at_ms}.jsonl"
        return write_atomically(self._unique(path), _jsonl([envelope]))

    def quorum_error(self, cluster_id: str, collected_at_ms: int, reason: str) -> Path:
        envelope = {"cluster_id": cluster_id, "collected_at_ms": collected_at_ms, "error": reason}
        path = self.root / "quorum" / f"cluster={safe_segment(cluster_id)}" / f"{collected_at_ms}.error.jsonl"
        return write_atomically(self._unique(path), _jsonl([envelope]))

    def partitions(self, cluster_id: str, collected_at_ms: int, records: list[dict[str, Any]]) -> Path:
        path = self.root / "partitions" / f"cluster={safe_segment(cluster_id)}" / f"{collected_at_ms}.jsonl"
        return write_atomically(self._unique(path), _jsonl(records))

    def partitions_error(self, cluster_id: str, collected_at_ms: int, reason: str) -> Path:
        record = {"cluster_id": cluster_id, "collected_at_ms": collected_at_ms, "error": reason}
        path = self.root / "partitions" / f"cluster={safe_segment(cluster_id)}" / f"{collected_at_ms}.error.jsonl"
        return write_atomically(self._unique(path), _jsonl([record]))

    def scrape(self, cluster_id: str, node_id: int, scraped_at_ms: int, body: bytes) -> Path:
        path = (
            self.root / "metrics" / f"cluster={safe_segment(cluster_id)}" / f"node={node_id}" / f"{scraped_at_ms}.prom"
        )
        return write_atomically(self._unique(path), body)

    def scrape_error(self, cluster_id: str, node_id: int, scraped_at_ms: int, url: str, reason: str) -> Path:
        text = f"# quorumlake collect: scrape of {url} failed: {' '.join(reason.split())}\n"
        return self.scrape(cluster_id, node_id, scraped_at_ms, text.encode("utf-8"))
