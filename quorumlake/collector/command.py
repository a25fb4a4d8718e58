"""The `quorumlake collect` command: its arguments (added to the main parser by `quorumlake.pipelines.app.cli`) and its
run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

# stdlib-only imports here: every `quorumlake` command builds this parser; the Kafka client loads in run_collect
from quorumlake.collector.settings import SettingsError, load_settings, split_address


class CollectUsageError(ValueError):
    """A bad argument of `collect`: printed as one line, exit 2."""


def _addresses(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts:
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...]")
    try:
        for part in parts:
            split_address(part)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return parts


def _metrics_url(text: str) -> tuple[int, str]:
    node, sep, url = text.partition("=")
    if not sep or not node.strip().isdigit() or not url.strip().startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"expected NODE_ID=http(s)://..., got {text!r}")
    return int(node), url.strip()


def _positive(kind: type) -> Callable[[str], float]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if kind is int else ''}number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError("must be above 0")
        return value

    return parse


def add_collect_parser(commands) -> argparse.ArgumentParser:
    collect = commands.add_parser(
        "collect",
        help="poll a Kafka cluster and write its landing zone (DescribeQuorum, partitions, scrapes)",
        description="Poll a KRaft cluster every --interval-s seconds and write DescribeQuorum responses, partition "
        "states and Prometheus scrapes into the landing zone, in the data contract's formats. A failed "
        "capture is written as an error record and never stops the collector.",
    )
    target = collect.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        type=_addresses,
        help="brokers to ask (they forward DescribeQuorum to the active controller)",
    )
    target.add_argument(
        "--bootstrap-controller",
        metavar="HOST:PORT[,...]",
        type=_addresses,
        help="controllers to ask (quorum only: partition states need --bootstrap-server)",
    )
    collect.add_argument(
        "--metrics-url",
        metavar="NODE_ID=URL",
        action="append",
        default=[],
        type=_metrics_url,
        help="a node's JMX exporter endpoint, e.g. 1=http://host:7071/metrics; repeatable",
    )
    collect.add_argument("--cluster-id", metavar="ID", help="cluster id in the landing paths (default: Kafka's own)")
    collect.add_argument("--landing", metavar="PATH", required=True, help="landing zone root to write into")
    collect.add_argument(
        "--interval-s", type=_positive(float), default=30.0, help="seconds between polls (default: 30)"
    )
    collect.add_argument("--count", type=_positive(int), help="stop after this many polls (default: until stopped)")
    collect.add_argument(
        "--timeout-s",
        type=_positive(float),
        default=10.0,
        help="timeout of each connection, request and scrape (default: 10)",
    )
    collect.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties (security.protocol, ssl.*, sasl.*), as for Kafka's tools",
    )
    return collect


def run_collect(args: argparse.Namespace, progress: Callable[[str], None]) -> int:
    from quorumlake.collector.runner import CollectOptions, Collector

    try:
        settings = load_settings(args.command_config)
    except SettingsError as exc:
        raise CollectUsageError(f"--command-config: {exc}") from None
    nodes = [node for node, _ in args.metrics_url]
    if len(set(nodes)) != len(nodes):
        raise CollectUsageError("--metrics-url: the same node id is given twice")
    if args.cluster_id is not None and not args.cluster_id.strip():
        raise CollectUsageError("--cluster-id must not be empty")
    try:
        Path(args.landing).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectUsageError(f"cannot create landing folder {args.landing}: {exc.strerror or exc}") from None
    options = CollectOptions(
        landing=args.landing,
        bootstrap_servers=args.bootstrap_server or (),
        bootstrap_controllers=args.bootstrap_controller or (),
        metrics_urls=tuple(args.metrics_url),
        cluster_id=args.cluster_id,
        interval_s=args.interval_s,
        count=args.count,
        timeout_s=args.timeout_s,
        settings=settings,
    )
    Collector(options, progress=progress).run()
    return 0
