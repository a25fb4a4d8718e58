"""The collector's poll loop: every `interval_s`, one DescribeQuorum, the partition states (brokers only) and one
scrape per `--metrics-url`, each written to the landing zone as soon as it is taken. Nothing that goes wrong with
the cluster stops the loop: a failed capture is written as an error record (see `landing.py`) and the next poll
runs on time.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from quorumlake.collector.landing import Landing, safe_segment
from quorumlake.collector.partitions import partition_record, partition_states
from quorumlake.collector.quorum import quorum_via_brokers, quorum_via_controllers
from quorumlake.collector.settings import ClientSettings
from quorumlake.collector.wire import CollectError

MAX_SCRAPE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class CollectOptions:
    landing: str
    bootstrap_servers: tuple[str, ...] = ()
    bootstrap_controllers: tuple[str, ...] = ()
    metrics_urls: tuple[tuple[int, str], ...] = ()
    cluster_id: str | None = None
    interval_s: float = 30.0
    count: int | None = None  # None: until interrupted
    timeout_s: float = 10.0
    settings: ClientSettings = field(default_factory=ClientSettings)


@dataclass
class RoundSummary:
    number: int
    cluster_id: str
    quorum: str
    partitions: str
    scrapes_ok: int
    scrapes: int

    def line(self) -> str:
        return (
            f"poll {self.number} ({self.cluster_id}): quorum {self.quorum}; partitions {self.partitions}; "
            f"scrapes {self.scrapes_ok}/{self.scrapes}"
        )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def scrape(url: str, timeout_s: float) -> bytes:
    """One GET of a Prometheus endpoint; CollectError (one line) for anything but a 200 with a body."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "quorumlake"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(MAX_SCRAPE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise CollectError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise CollectError(str(getattr(exc.reason, "strerror", None) or exc.reason)) from None
    except (TimeoutError, OSError) as exc:
        raise CollectError(f"{type(exc).__name__}: {exc}") from None
    if len(body) > MAX_SCRAPE_BYTES:
        raise CollectError(f"response larger than {MAX_SCRAPE_BYTES} bytes")
    if not body.strip():
        raise CollectError("empty response")
    return body


class Collector:
    def __init__(self, options: CollectOptions, progress: Callable[[str], None] = lambda _: None):
        self.options = options
        self.landing = Landing(options.landing)
        self.progress = progress
        self.cluster_id = options.cluster_id

    def _fallback_cluster_id(self) -> str:
        first = (self.options.bootstrap_servers or self.options.bootstrap_controllers or ("unknown",))[0]
        return safe_segment(first)

    def _quorum(self) -> str:
        o = self.options
        at = now_ms()
        try:
            if o.bootstrap_servers:
                result = quorum_via_brokers(o.bootstrap_servers, o.settings, o.timeout_s)
            else:
                result = quorum_via_controllers(o.bootstrap_controllers, o.settings, o.timeout_s)
        except CollectError as exc:
            self.landing.quorum_error(self.cluster_id or self._fallback_cluster_id(), at, str(exc))
            return f"failed ({exc})"
        if self.cluster_id is None and result.kafka_cluster_id:
            self.cluster_id = result.kafka_cluster_id
        cluster_id = self.cluster_id or self._fallback_cluster_id()
        reported = result.node.envelope_fields() if result.node is not None else None
        self.landing.quorum(cluster_id, at, result.api_version, result.response, reported)
        partition = (result.response.get("topics") or [{}])[0].get("partitions", [{}])[0]
        code = result.response.get("errorCode") or partition.get("errorCode") or 0
        if code:
            return f"v{result.api_version} error {code} via {result.answered_by}"
        return f"v{result.api_version} leader {partition.get('leaderId')} via {result.answered_by}"

    def _partitions(self) -> str:
        o = self.options
        if not o.bootstrap_servers:
            return "skipped (needs --bootstrap-server)"
        at = now_ms()
        cluster_id = self.cluster_id or self._fallback_cluster_id()
        try:
            result = partition_states(o.bootstrap_servers, o.settings, o.timeout_s)
        except CollectError as exc:
            self.landing.partitions_error(cluster_id, at, str(exc))
            return f"failed ({exc})"
        records, missing = [], []
        for state in result.partitions:
            if state.topic in result.min_isr:
                records.append(partition_record(cluster_id, at, state, result.min_isr[state.topic]))
            elif state.topic not in missing:
                missing.append(state.topic)
        errors = list(result.errors) + [
            f"topic {t}: no min.insync.replicas"
            for t in missing
            if not any(e.startswith(f"topic {t}:") for e in result.errors)
        ]
        if records:
            self.landing.partitions(cluster_id, at, records)
        for reason in errors:
            self.landing.partitions_error(cluster_id, at, reason)
        return f"{len(records)} written" + (f", {len(errors)} errors" if errors else "")

    def _scrape_one(self, node_id: int, url: str) -> bool:
        cluster_id = self.cluster_id or self._fallback_cluster_id()
        at = now_ms()
        try:
            body = scrape(url, self.options.timeout_s)
        except CollectError as exc:
            self.landing.scrape_error(cluster_id, node_id, at, url, str(exc))
            self.progress(f"scrape of node {node_id} ({url}) failed: {exc}")
            return False
        self.landing.scrape(cluster_id, node_id, at, body)
        return True

    def _guarded(self, capture: Callable[[], str], record: Callable[[str], object]) -> str:
        """Run one capture; anything unexpected is recorded like a failed capture instead of ending the loop."""
        try:
            return capture()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            record(reason)
            return f"failed ({reason})"

    def poll(self, number: int) -> RoundSummary:
        cluster_id = self.cluster_id or self._fallback_cluster_id()
        quorum = self._guarded(self._quorum, lambda r: self.landing.quorum_error(cluster_id, now_ms(), r))
        partitions = self._guarded(self._partitions, lambda r: self.landing.partitions_error(cluster_id, now_ms(), r))
        urls = self.options.metrics_urls
        ok = 0
        if urls:

            def one(item: tuple[int, str]) -> bool:
                node_id, url = item
                failed = self._guarded(
                    lambda: "ok" if self._scrape_one(node_id, url) else "failed",
                    lambda r: self.landing.scrape_error(
                        self.cluster_id or self._fallback_cluster_id(), node_id, now_ms(), url, r
                    ),
                )
                return failed == "ok"

            with ThreadPoolExecutor(max_workers=min(8, len(urls))) as pool:
                ok = sum(pool.map(one, urls))
        return RoundSummary(number, self.cluster_id or self._fallback_cluster_id(), quorum, partitions, ok, len(urls))

    def run(self, sleep: Callable[[float], None] = time.sleep) -> list[RoundSummary]:
        summaries = []
        number = 0
        next_at = time.monotonic()
        while self.options.count is None or number < self.options.count:
            number += 1
            summary = self.poll(number)
            self.progress(summary.line())
            summaries.append(summary)
            if self.options.count is not None and number >= self.options.count:
                break
            next_at += self.options.interval_s
            sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic())
        return summaries
