"""The one settings object of a run: paths, catalog, thresholds and the run's own time.

Settings come from defaults, then an optional TOML file (`--config`), then command-line flags. Nothing here reads
the environment at import time; `Config` is frozen so a run cannot change its own settings half way.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A setting that cannot be used; the CLI prints it as one line and exits 2."""


@dataclass(frozen=True)
class Config:
    landing: str = "./lakehouse/landing"
    warehouse: str = "./lakehouse/warehouse"
    # Unity Catalog catalog on Databricks; None locally, where tables are `<schema>.<table>` in spark_catalog.
    catalog: str | None = None
    # Prefix for the bronze/silver/gold schema names, e.g. "dev_alice_" for a personal copy in a shared catalog.
    schema_prefix: str = ""
    # Bronze's scratch and bookkeeping files, silver's materialized batches, and Auto Loader's checkpoints; defaults to
    # <warehouse>/_checkpoints.
    checkpoint_root: str | None = None
    # `files`: Spark's open-source file source; `autoloader`: Databricks' cloudFiles. Same code path otherwise.
    ingest_mode: str = "files"
    max_files_per_trigger: int = 1000
    # Auto Loader only: delete a landing file this many days after bronze ingested it (cloudFiles.cleanSource,
    # quorumlake.pipelines.storage.autoloader); 0 keeps every landing file. Set only by the deployment that owns the
    # landing volume.
    landing_retention_days: int = 0
    # A landing folder in which nothing changed for this many minutes is settled: later runs check only its
    # modification time instead of listing its files again (0: list every file on every run).
    landing_settle_minutes: int = 60
    # Bronze reads new landing files in chunks of at most this many bytes (one insert per bronze table per chunk,
    # each a fixed cost of plans, jobs and commits). Locally a chunk reaches Spark as scratch Parquet files that
    # tasks stream, so its size is bounded by the driver's Python memory (~3x the chunk), not by the JVM heap.
    bronze_chunk_bytes: int = 128 * 1024 * 1024
    # A JSON Lines file larger than this reaches Spark as pieces of whole lines of about this size (Spark holds a
    # whole file as one value and copies it several times while splitting it, so a file of tens of MB would take
    # hundreds of MB of the JVM's heap).
    bronze_piece_bytes: int = 4 * 1024 * 1024
    # Silver and gold read a backlog of the layer before (a backfill, a run after an outage) in batches of about this
    # many bytes of that layer's Parquet each, recording their progress after each: a batch's rows are parsed, sorted
    # and cached together, so this bounds their memory whatever the backlog (the default fits Spark's default 1 GB
    # driver heap; docs/decisions/0007). A batch holds at least one commit.
    batch_bytes: int = 64 * 1024 * 1024
    # A silver batch of more than twice this many bytes of bronze Parquet is spread over one partition per this many
    # bytes and kept on disk only. A record expands many times when parsed (a `kafka-topics` capture of a few KB into
    # hundreds of partition rows), and a block of persisted rows is read back whole into the heap.
    spread_bytes: int = 4 * 1024 * 1024
    # A landing file larger than this, or a .gz that decompresses to more, is not read: its record gets a
    # parse_error saying so (a file is held whole in the driver's Python memory while its chunk is handed over).
    max_file_bytes: int = 256 * 1024 * 1024
    max_decompressed_bytes: int = 256 * 1024 * 1024
    # A local run whose new landing data is at most this many bytes runs Spark's interpreted engine (no generated
    # code, no adaptive re-planning): for small batches compiling each query's code costs more CPU than it saves.
    # 0 = always generate code. Never applied on Databricks.
    small_run_bytes: int = 64 * 1024 * 1024
    spark_master: str = "local[*]"
    # Options for the JVM of a local Spark driver, after quorumlake's own (not on Databricks or Spark Connect, whose
    # JVMs are started elsewhere), e.g. "-Xss4m". The local JVM runs the parallel collector unless these name another
    # (quorumlake.pipelines.engine.local.java_options). Runs known to be small (the demo, the test suite) take
    # quorumlake.pipelines.engine.local.SMALL_RUN_JAVA_OPTIONS (docs/configuration.md).
    java_options: str = ""
    # A Spark Connect server to run on instead of starting Spark in this process (`sc://host:port`); the server must
    # have Delta (its SQL extension and catalog). Locally a stand-in for serverless (tests/e2e/test_connect.py).
    spark_remote: str | None = None
    shuffle_partitions: int = 2
    # Data-quality and SLO settings (contract defaults).
    replica_caught_up_slo_ms: int = 2000
    quorum_lag_time_slo_ms: int = 2000
    window_minutes: int = 5
    high_watermark_stall_ms: int = 5000
    divergence_tolerance_ms: int = 15000
    future_skew_ms: int = 300_000
    # An AtMinIsr episode's `bounces` counts earlier episodes of the partition within this many minutes.
    flap_window_minutes: int = 60
    # Fleet overview: a node this far behind the active controller (records or ms) makes its cluster `warn`.
    divergence_warn_records: int = 1000
    metadata_lag_warn_ms: int = 30_000
    # Fleet overview: a cluster with no new quorum snapshot for this many minutes (by the query's clock) is `stale`;
    # 0 turns the check off (e.g. to look at a replayed or simulated history).
    stale_after_minutes: int = 15
    # Incidents: an anomaly that starts within this many minutes after the last one of an incident has cleared joins
    # it (0: only overlapping anomalies join).
    incident_grace_minutes: int = 2
    # min.insync.replicas for kafka-topics captures whose topic does not configure it (Kafka's default is 1).
    default_min_isr: int = 1
    # Which min-ISR rule AtMinIsr episodes and the fleet status follow: `effective` (min(min.insync.replicas,
    # replica count), as brokers judge acks=all writes since KIP-966) or `kafka_topics` (the raw min.insync.replicas,
    # as `kafka-topics --under-min-isr-partitions` lists them). gold.isr_health counts both either way.
    min_isr_rule: str = "effective"
    # A voter whose last fetch is older than this in a quorum snapshot is not fetching (Kafka's
    # controller.quorum.fetch.timeout.ms default, after which a follower itself would start an election):
    # gold.quorum_status.voters_not_fetching, a fleet `warn`, and `controller_down` in gold.incidents.
    quorum_fetch_timeout_ms: int = 2000
    # Optional quorum SLO on MaxFollowerLag in records, for snapshots whose lag time is unknown (DescribeQuorum v0,
    # a new leader not yet fetched from): such a snapshot is good when its MaxFollowerLag is at most this. -1: off,
    # and such snapshots are unknown (neither good nor bad).
    quorum_offset_lag_slo: int = -1
    # SLO objectives (the share of good events) behind gold.slo_budget and gold.slo_burn, each between 0 and 1.
    slo_objective_quorum_lag: float = 0.999
    slo_objective_write_availability: float = 0.999
    slo_objective_metadata_freshness: float = 0.99
    # The run's own time: every row written by this run carries it as `ingested_at`.
    run_at: datetime = field(default_factory=lambda: now_ms())

    @property
    def checkpoints(self) -> str:
        return self.checkpoint_root or join_path(self.warehouse, "_checkpoints")

    def with_overrides(self, **overrides: Any) -> Config:
        """A copy with the given non-None settings replaced, validated."""
        known = {f.name for f in dataclasses.fields(self)}
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(clean) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
        updated = dataclasses.replace(self, **clean)
        updated.validate()
        return updated

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _INT_SETTINGS and (not isinstance(value, int) or isinstance(value, bool)):
                raise ConfigError(f"{f.name} must be an integer, not {value!r}")
            if f.name in _STR_SETTINGS and value is not None and not isinstance(value, str):
                raise ConfigError(f"{f.name} must be a string, not {value!r}")
            if f.name in _FLOAT_SETTINGS:
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise ConfigError(f"{f.name} must be a number, not {value!r}")
                if not 0 < value < 1:
                    raise ConfigError(f"{f.name} must be between 0 and 1 (exclusive), not {value!r}")
        # Names and paths are spliced into SQL (CREATE SCHEMA <catalog>.<prefix>bronze LOCATION '<path>'), so only
        # what needs no quoting is accepted: an injection attempt is a configuration error, not a statement.
        if self.catalog is not None and not _IDENTIFIER.fullmatch(self.catalog):
            raise ConfigError(
                f"catalog must be a plain identifier (letters, digits and _, not starting with a digit), "
                f"not {self.catalog!r}"
            )
        if not _PREFIX.fullmatch(self.schema_prefix):
            raise ConfigError(
                f"schema_prefix may only hold letters, digits and _ (at most 100), not {self.schema_prefix!r}"
            )
        for name in _PATH_SETTINGS:
            value = getattr(self, name)
            if value is not None and (value.strip() == "" or _UNSAFE_PATH.search(value)):
                raise ConfigError(
                    f"{name} must be a non-empty path without quotes, backslashes, backticks or "
                    f"control characters, not {value!r}"
                )
        if self.ingest_mode not in ("files", "autoloader"):
            raise ConfigError(f"ingest_mode must be 'files' or 'autoloader', not {self.ingest_mode!r}")
        for name in (
            "max_files_per_trigger",
            "shuffle_partitions",
            "window_minutes",
            "bronze_chunk_bytes",
            "bronze_piece_bytes",
            "batch_bytes",
            "spread_bytes",
            "max_file_bytes",
            "max_decompressed_bytes",
        ):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.min_isr_rule not in ("effective", "kafka_topics"):
            raise ConfigError(f"min_isr_rule must be 'effective' or 'kafka_topics', not {self.min_isr_rule!r}")
        if self.quorum_offset_lag_slo < -1:
            raise ConfigError("quorum_offset_lag_slo must be -1 (off) or a number of records")
        for name in (
            "quorum_fetch_timeout_ms",
            "replica_caught_up_slo_ms",
            "quorum_lag_time_slo_ms",
            "high_watermark_stall_ms",
            "divergence_tolerance_ms",
            "future_skew_ms",
            "stale_after_minutes",
            "incident_grace_minutes",
            "small_run_bytes",
            "landing_settle_minutes",
            "landing_retention_days",
        ):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"{name} must not be negative")
        if self.run_at.tzinfo is None:
            raise ConfigError("run_at must carry a time zone")
        if not _JAVA_OPTIONS.fullmatch(self.java_options):
            raise ConfigError(
                "java_options must be JVM options separated by spaces, each starting with '-' "
                f"(e.g. -XX:+UseParallelGC -Xss4m), not {self.java_options!r}"
            )
        if self.spark_remote is not None:
            connect_address(self.spark_remote)  # raises ConfigError when it is not a Spark Connect URL


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL, `sc://host[:port][/;param=value...]` (port 15002 by default)."""
    match = re.fullmatch(r"sc://(\[[^\]]+\]|[^:/;\[\]]+)(?::([0-9]{1,5}))?(/.*|;.*)?", url.strip())
    if not match or (match.group(2) and not 0 < int(match.group(2)) < 65536):
        raise ConfigError(f"spark_remote must be a Spark Connect URL like sc://host:15002, not {url!r}")
    return match.group(1).strip("[]"), int(match.group(2) or 15002)


def now_ms() -> datetime:
    """The current UTC time at millisecond precision (what Delta and Kafka both keep)."""
    now = datetime.now(timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


_INT_SETTINGS = {f.name for f in dataclasses.fields(Config) if f.type in ("int", int)}
_STR_SETTINGS = {f.name for f in dataclasses.fields(Config) if f.type in ("str", "str | None", str)}
_FLOAT_SETTINGS = {f.name for f in dataclasses.fields(Config) if f.type in ("float", float)}
_PATH_SETTINGS = ("landing", "warehouse", "checkpoint_root")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_PREFIX = re.compile(r"[A-Za-z0-9_]{0,100}")
# JVM options reach the driver's command line through spark.driver.extraJavaOptions, which Spark splits like a shell
# would: no quotes, backslashes or other shell syntax, so that what is written is exactly what the JVM gets.
_JAVA_OPTIONS = re.compile(r"\s*(-[A-Za-z][A-Za-z0-9_.:+=,/*@%-]*(\s+|$))*")
_UNSAFE_PATH = re.compile(r"['\\`\x00-\x1f\x7f]")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Settings from a TOML file: top-level keys named like `Config` fields (a `[quorumlake]` table also works)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None
    if isinstance(data.get("quorumlake"), dict):
        data = {**{k: v for k, v in data.items() if k != "quorumlake"}, **data["quorumlake"]}
    for key, value in data.items():
        if key in _INT_SETTINGS and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"config file {p}: {key} must be an integer")
        if key in _FLOAT_SETTINGS and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ConfigError(f"config file {p}: {key} must be a number")
        if key == "run_at":
            raise ConfigError(f"config file {p}: run_at is set by the run itself")
    return data


def typed_settings(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Settings given as text on the command line (`--set KEY=VALUE`), typed like `Config`'s fields."""
    types = {f.name: f.type for f in dataclasses.fields(Config)}
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in types or key == "run_at":
            raise ConfigError(f"--set: unknown setting {key!r}")
        if key in _INT_SETTINGS:
            try:
                out[key] = int(value)
            except ValueError:
                raise ConfigError(f"--set: {key} must be an integer, not {value!r}") from None
        elif key in _FLOAT_SETTINGS:
            try:
                out[key] = float(value)
            except ValueError:
                raise ConfigError(f"--set: {key} must be a number, not {value!r}") from None
        else:
            out[key] = value or None
    return out


def build_config(config_file: str | None = None, **overrides: Any) -> Config:
    """Defaults, then the config file, then explicit overrides (e.g. command-line flags)."""
    base = Config()
    from_file = load_config_file(config_file) if config_file else {}
    return base.with_overrides(**from_file).with_overrides(**overrides)


def join_path(root: str, *parts: str) -> str:
    """Paths as Spark and Databricks spell them (also for URIs and /Volumes), so not os.path."""
    return "/".join([root.rstrip("/"), *parts])
