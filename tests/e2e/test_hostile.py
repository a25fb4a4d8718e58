"""A hostile landing zone through the whole pipeline (`quorumlake.pipelines.jobs.run.run_pipeline`, real Spark, real Delta).

Poison records of every kind (timestamps past year 9999, 64-bit overflow, integers of thousands of digits, JSON
nested 10,000 deep, a BOM, one invalid byte, a gzip bomb, an empty mbean, a node id beyond 32 bits, CLI captures and
scrapes with values no column can hold) sit beside the good test landing zone. The run completes, twice; every good
record reaches silver; every bad one is in bronze with its parse_error or in silver.quarantine with a reason; the
second run changes nothing; a later good file is still ingested.

File-system-level cases: a dangling symlink, a symlink (file or folder) out of the landing root, a file vanishing
between listing and reading, a file larger than the configured limit: each is a bronze row with a parse_error, and
the run goes on.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from quorumlake.bronze.raw import MAX_DECOMPRESSED_BYTES
from quorumlake.contract.tables import ALL_TABLES, by_name
from quorumlake.pipelines.jobs import faults
from quorumlake.pipelines.jobs.run import run_pipeline
from tests import read_back
from tests.helpers import set_field

DATA = Path(__file__).parents[1] / "data" / "landing"
GOOD_QUORUM = json.loads((DATA / "quorum" / "date=2024-10-27" / "describe-quorum.jsonl").read_text().splitlines()[1])
GOOD_JMX = json.loads((DATA / "metrics" / "jolokia" / "2024-10-27" / "kraft-v1.jsonl").read_text().splitlines()[0])
GOOD_PARTITION = json.loads((DATA / "partitions" / "date=2024-10-27" / "kip427.jsonl").read_text().splitlines()[0])
REPLICATION = (DATA / "quorum" / "cluster=kraft-cli39" / "1730000000600.replication.txt").read_text()
TOPICS = (DATA / "partitions" / "cluster=kraft-v2" / "1730000000700.topics.txt").read_text()

EPOCH = "epoch milliseconds must be between 0 and 253402300799999 (year 9999)"
NOT_UTF8 = "not UTF-8 text (binary data?); bytes kept in payload_base64"
SILVER_TABLES = ("quorum_snapshots", "replica_states", "partition_states", "node_metrics")


def _line(record: dict, **changes) -> str:
    return json.dumps({**record, **changes}, separators=(",", ":"))


def _quorum(cluster: str, **partition_changes) -> dict:
    record = json.loads(json.dumps(GOOD_QUORUM))
    record["cluster_id"] = cluster
    partition = record["response"]["topics"][0]["partitions"][0]
    for key, value in partition_changes.items():
        set_field(partition, key, value)
    return record


def _raw(text: str, **numbers: str) -> str:
    """JSON text with numbers JSON allows but Python's json module would not write (e.g. 5000 digits) spliced in."""
    for placeholder, number in numbers.items():
        text = text.replace(f'"{placeholder}"', number)
    return text


def _gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\x00" * (1 << 20)
    return b"".join(packer.compress(chunk) for _ in range(MAX_DECOMPRESSED_BYTES // len(chunk) + 1)) + packer.flush()


# (file relative to the landing root, line number or None) -> the parse_error bronze must give it
EXPECTED_PARSE_ERRORS = {
    ("quorum/hostile/poison.jsonl", 1): f"field 'collected_at_ms' is out of range: {EPOCH}",
    ("quorum/hostile/poison.jsonl", 2): f"field 'collected_at_ms' is out of range: {EPOCH}",
    ("quorum/hostile/poison.jsonl", 3): f"field 'collected_at_ms' is out of range: {EPOCH}",
    ("quorum/hostile/poison.jsonl", 4): "malformed JSON",
    ("quorum/hostile/poison.jsonl", 5): "malformed JSON",
    ("quorum/hostile/poison.jsonl", 6): "field 'api_version' is out of range: not a 32-bit integer",
    ("quorum/hostile/one-bad-byte.jsonl", 2): NOT_UTF8,
    (
        "quorum/hostile/bomb.jsonl.gz",
        None,
    ): f"decompressed size exceeds {MAX_DECOMPRESSED_BYTES} bytes (MAX_DECOMPRESSED_BYTES); not decompressed",
    ("quorum/cluster=h-cli/99999999999999999.status.txt", None): f"the time in the file name is out of range: {EPOCH}",
    ("metrics/hostile/jmx.jsonl", 1): "field 'mbean' is empty",
    ("metrics/hostile/jmx.jsonl", 2): "field 'node_id' is out of range: not a 32-bit integer",
    ("metrics/hostile/jmx.jsonl", 3): f"field 'scraped_at_ms' is out of range: {EPOCH}",
    ("metrics/cluster=h-prom/node=99999999999/1730000000000.prom", None): "node= path segment is not an integer",
    ("partitions/hostile/p.jsonl", 1): "field 'partition' is out of range: not a 32-bit integer",
    ("partitions/hostile/p.jsonl", 2): "field 'replicas' is out of range: every element must be a 32-bit integer",
    ("partitions/hostile/p.jsonl", 3): f"field 'collected_at_ms' is out of range: {EPOCH}",
}
# (file, line number or None) -> (rule, start of the reason) of what silver rejects from records bronze could read
EXPECTED_SILVER_REJECTS = {
    ("quorum/hostile/poison.jsonl", 7): ("values_in_range", "numbers out of range or not integers: highWatermark"),
    ("quorum/hostile/poison.jsonl", 8): (
        "values_in_range",
        "numbers out of range or not integers: currentVoters[].logEndOffset",
    ),
    ("quorum/hostile/poison.jsonl", 9): (
        "values_in_range",
        "numbers out of range or not integers: currentVoters[].lastFetchTimestamp (not -1 or epoch ms up to year 9999)",
    ),
    ("quorum/cluster=h-cli/1730000000600.replication.txt", None): ("cli_capture_parses", "line 4: LogEndOffset"),
    ("partitions/cluster=h-topics/1730000000000.topics.txt", None): (
        "topics_capture_parses",
        "value out of range for its column: partitions[1].partition",
    ),
    ("metrics/cluster=h-prom/node=1/1730000000000.prom", None): (
        "sample_line_parses",
        "partition label is out of range (not a 32-bit integer)",
    ),
}
# clusters of the good records hidden among the poison: each must reach its silver table
GOOD_AMONG_POISON = {
    "quorum_snapshots": {"h-good", "h-bom", "h-utf8-a", "h-utf8-b"},
    "node_metrics": {"h-jmx", "h-prom"},
    "partition_states": {"h-part"},
}


@pytest.fixture
def hostile_zone(landing) -> Path:
    root = landing("landing")
    quorum = root / "quorum" / "hostile"
    quorum.mkdir()
    poison = [
        _line(_quorum("p-year"), collected_at_ms=9 * 10**15),  # year 287168
        _line(_quorum("p-negative"), collected_at_ms=-5),
        _raw(_line(_quorum("p-2-63"), collected_at_ms="N"), N=str(2**63)),
        _raw(_line(_quorum("p-digits"), collected_at_ms="N"), N="1" + "0" * 5000),
        '{"cluster_id":"p-deep","collected_at_ms":1730000000600,"api_version":1,"response":'
        + '{"a":' * 10_000
        + "1"
        + "}" * 10_001,
        _line(_quorum("p-api"), api_version=2**31),
        _line(_quorum("p-hw", highWatermark=2**63)),
        _raw(_line(_quorum("p-leo", **{"currentVoters.1.logEndOffset": "N"})), N="1" + "0" * 30),
        _line(_quorum("p-fetch", **{"currentVoters.0.lastFetchTimestamp": 9 * 10**15})),
        _line(_quorum("h-good")),
    ]
    (quorum / "poison.jsonl").write_text("\n".join(poison) + "\n")
    (quorum / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _line(_quorum("h-bom")).encode() + b"\n")
    (quorum / "one-bad-byte.jsonl").write_bytes(
        _line(_quorum("h-utf8-a")).encode()
        + b"\n"
        + _line(_quorum("p-XX")).encode().replace(b"p-XX", b"p-\xff")
        + b"\n"
        + _line(_quorum("h-utf8-b")).encode()
        + b"\n"
    )
    (quorum / "bomb.jsonl.gz").write_bytes(_gzip_bomb())
    cli = root / "quorum" / "cluster=h-cli"
    cli.mkdir()
    (cli / "99999999999999999.status.txt").write_text("LeaderId: 3002\n")
    (cli / "1730000000600.replication.txt").write_text(REPLICATION.replace("18530       ", "9" * 5000))

    metrics = root / "metrics" / "hostile"
    metrics.mkdir()
    (metrics / "jmx.jsonl").write_text(
        "\n".join(
            [
                _line(GOOD_JMX, cluster_id="p-mbean", mbean=""),
                _line(GOOD_JMX, cluster_id="p-node", node_id=2**32),
                _line(GOOD_JMX, cluster_id="p-scraped", scraped_at_ms=9 * 10**15),
                _line(GOOD_JMX, cluster_id="h-jmx"),
            ]
        )
        + "\n"
    )
    prom = root / "metrics" / "cluster=h-prom" / "node=1"
    prom.mkdir(parents=True)
    (prom / "1730000000000.prom").write_text(
        'kafka_cluster_partition_underreplicated{topic="t",partition="4294967296"} 1.0\n'
        'kafka_cluster_partition_underreplicated{topic="t",partition="3"} 0.0\n'
    )
    big_node = root / "metrics" / "cluster=h-prom" / "node=99999999999"
    big_node.mkdir()
    (big_node / "1730000000000.prom").write_text("kafka_server_raftmetrics_current_leader 1.0\n")

    parts = root / "partitions" / "hostile"
    parts.mkdir()
    (parts / "p.jsonl").write_text(
        "\n".join(
            [
                _line(GOOD_PARTITION, cluster_id="p-partition", partition=2**31),
                _line(GOOD_PARTITION, cluster_id="p-replicas", replicas=[0, 2**40]),
                _line(GOOD_PARTITION, cluster_id="p-time", collected_at_ms=9 * 10**15),
                _line(GOOD_PARTITION, cluster_id="h-part"),
            ]
        )
        + "\n"
    )
    topics = root / "partitions" / "cluster=h-topics"
    topics.mkdir()
    (topics / "1730000000000.topics.txt").write_text(TOPICS.replace("Partition: 1\t", "Partition: 4294967296\t", 1))
    return root


def _relative(source_file: str, root: Path) -> str:
    path = source_file.removeprefix("file:")
    return str(Path(path).relative_to(root.resolve())) if path.startswith(str(root.resolve())) else path


def _contents(lakehouse) -> dict[str, list[str]]:
    return read_back.contents(Path(lakehouse.config.warehouse), ALL_TABLES)


def test_hostile_landing_zone_runs_twice_and_accounts_for_every_record(spark, hostile_zone, make_lakehouse):
    lakehouse = make_lakehouse(hostile_zone)
    run_pipeline(lakehouse)
    first = _contents(lakehouse)

    def table(name) -> list[dict]:
        return _table(lakehouse, name)

    bronze = {}
    for name in ("bronze.quorum_raw", "bronze.metrics_raw", "bronze.partitions_raw"):
        for r in table(name):
            bronze[r["record_id"]] = r
    where = {rid: (_relative(r["source_file"], hostile_zone), r["line_number"]) for rid, r in bronze.items()}

    # bronze: each poison record carries exactly the expected parse error, and nothing else is unreadable
    errors = {where[rid]: r["parse_error"] for rid, r in bronze.items() if r["parse_error"] is not None}
    assert errors == EXPECTED_PARSE_ERRORS

    # silver: every readable record is in a silver table or quarantined with a reason; nothing vanished
    in_silver: set[str] = set()
    for r in table("silver.quorum_snapshots"):
        in_silver |= set(r["record_ids"])
    for name in ("silver.replica_states", "silver.partition_states", "silver.node_metrics"):
        in_silver |= {r["record_id"] for r in table(name)}
    quarantine = table("silver.quarantine")
    assert all(q["failed_rules"] and q["reason"] and q["record"] for q in quarantine)
    quarantined: dict[str, list] = {}
    for q in quarantine:
        for rid in q["record_id"].split("+"):
            quarantined.setdefault(rid, []).append(q)
    missing = {where[rid] for rid in bronze if rid not in in_silver and rid not in quarantined}
    assert missing == set()

    # every unreadable record is quarantined once, with its parse error as the reason
    for rid, r in bronze.items():
        if r["parse_error"] is not None:
            assert [(q["failed_rules"], q["reason"]) for q in quarantined[rid]] == [
                (["record_readable"], r["parse_error"])
            ]

    # what silver rejected of the readable poison, by rule and reason
    silver_rejects: dict[tuple, list[tuple[str, str]]] = {}
    for rid, qs in quarantined.items():
        for q in qs:
            if q["failed_rules"] != ["record_readable"]:
                silver_rejects.setdefault(where[rid], []).append((q["failed_rules"][0], q["reason"]))
    for key, (rule, reason) in EXPECTED_SILVER_REJECTS.items():
        assert any(r == rule and reason in text for r, text in silver_rejects.get(key, [])), (key, silver_rejects)

    # every good record reaches silver: the whole good landing zone, and the good lines hidden among the poison
    good = {
        rid
        for rid, r in bronze.items()
        if not where[rid][0].startswith(
            (
                "quorum/hostile",
                "quorum/cluster=h-",
                "metrics/hostile",
                "metrics/cluster=h-",
                "partitions/hostile",
                "partitions/cluster=h-",
            )
        )
    }
    assert good and good <= in_silver
    for name, clusters in GOOD_AMONG_POISON.items():
        assert clusters <= {r["cluster_id"] for r in table(f"silver.{name}")}, name
    in_gold = {r["cluster_id"] for r in table("gold.quorum_status")}
    assert {"h-good", "h-bom", "h-utf8-a", "h-utf8-b"} <= in_gold

    # a second run over the same zone changes nothing
    run_pipeline(lakehouse)
    assert _contents(lakehouse) == first

    # a later good file is still ingested, through every layer
    (hostile_zone / "quorum" / "later.jsonl").write_text(_line(_quorum("h-late")) + "\n")
    run_pipeline(lakehouse)
    assert "h-late" in {r["cluster_id"] for r in table("silver.quorum_snapshots")}
    assert "h-late" in {r["cluster_id"] for r in table("gold.quorum_status")}


# --- file-system-level hostility: owned by the new landing-file listing (orchestration) ---------------------------


@pytest.fixture
def small_zone(tmp_path) -> Path:
    root = tmp_path / "landing"
    (root / "quorum").mkdir(parents=True)
    (root / "quorum" / "good.jsonl").write_text(_line(_quorum("fs-good")) + "\n")
    return root


def _table(lakehouse, name: str) -> list[dict]:
    return read_back.rows(lakehouse.catalog.table_path(by_name(name)))


def _silver_clusters(lakehouse) -> set[str]:
    return {r["cluster_id"] for r in _table(lakehouse, "silver.quorum_snapshots")}


def _bronze_rows(lakehouse) -> list:
    return _table(lakehouse, "bronze.quorum_raw")


@pytest.fixture(scope="module")
def fs_run(spark, tmp_path_factory):
    """One landing zone with every file-system hazard beside a good file, through bronze and silver once (each
    hazard is a file of its own, so one run serves every test): a dangling symlink, a symlink to a file and one
    to a folder out of the landing root, ten files of which five vanish right after they were listed, and a file
    larger than the configured limit. The tests below each check their hazard in what that run left."""
    from quorumlake.pipelines.config import Config
    from quorumlake.pipelines.storage import Lakehouse

    root = tmp_path_factory.mktemp("fs-hazards")
    zone = root / "landing"
    (zone / "quorum").mkdir(parents=True)
    (zone / "quorum" / "good.jsonl").write_text(_line(_quorum("fs-good")) + "\n")
    (zone / "quorum" / "dangling.jsonl").symlink_to(zone / "quorum" / "gone.jsonl")
    secret = root / "outside" / "secret.jsonl"
    secret.parent.mkdir()
    secret.write_text(_line(_quorum("fs-secret")) + "\n")
    (zone / "quorum" / "link.jsonl").symlink_to(secret)
    (zone / "quorum" / "linked-dir").symlink_to(secret.parent, target_is_directory=True)
    victims = []
    for i in range(10):
        victim = zone / "quorum" / f"victim-{i:02d}.jsonl"
        victim.write_text(_line(_quorum(f"fs-victim-{i}")) + "\n")
        victims.append(victim)
    (zone / "quorum" / "big.jsonl").write_text((_line(_quorum("fs-big")) + "\n") * 200)

    import quorumlake.pipelines.jobs.bronze_job as bronze_job

    listed = bronze_job.scan_landing

    def list_then_delete(landing_root, sources, *known):  # the race, made certain: files go away once listed
        files = listed(landing_root, sources, *known)
        for v in victims[5:]:
            v.unlink(missing_ok=True)
        return files

    config = Config(
        landing=str(zone),
        warehouse=str(root / "warehouse"),
        spark_master="local[2]",
        shuffle_partitions=2,
        max_file_bytes=64 * 1024,
    )
    lakehouse = Lakehouse(spark, config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bronze_job, "scan_landing", list_then_delete)
        run_pipeline(lakehouse, layers=("bronze", "silver"))
    return lakehouse, victims


def test_a_dangling_symlink_is_a_parse_error_and_the_run_goes_on(spark, fs_run):
    lakehouse, _ = fs_run
    assert "fs-good" in _silver_clusters(lakehouse)
    dangling = [r for r in _bronze_rows(lakehouse) if r["source_file"].endswith("/dangling.jsonl")]
    assert len(dangling) == 1 and dangling[0]["parse_error"]


def test_a_symlink_out_of_the_landing_root_is_not_followed(spark, fs_run):
    lakehouse, _ = fs_run
    clusters = _silver_clusters(lakehouse)
    assert "fs-good" in clusters and "fs-secret" not in clusters
    assert all("fs-secret" not in (r["payload"] or "") for r in _bronze_rows(lakehouse))


def test_a_file_vanishing_between_listing_and_reading_does_not_stop_the_run(spark, fs_run):
    lakehouse, victims = fs_run
    assert {"fs-good", *(f"fs-victim-{i}" for i in range(5))} <= _silver_clusters(lakehouse)
    vanished = {
        r["source_file"].rsplit("/", 1)[1]: r["parse_error"]
        for r in _bronze_rows(lakehouse)
        if r["source_file"].rsplit("/", 1)[1] in {v.name for v in victims[5:]}
    }
    assert vanished == {v.name: "file disappeared between listing and reading" for v in victims[5:]}


def test_a_file_larger_than_the_configured_limit_is_a_parse_error(spark, fs_run):
    lakehouse, _ = fs_run
    rows = [r for r in _bronze_rows(lakehouse) if r["source_file"].endswith("/big.jsonl")]
    assert len(rows) == 1 and "larger than" in rows[0]["parse_error"]
    assert "fs-good" in _silver_clusters(lakehouse)
    assert "fs-big" not in _silver_clusters(lakehouse)


# --- failures no parser foresaw (injected with `faults.inject(fail_on=...)`) --------------------------------------------


def test_a_file_whose_ingestion_fails_costs_that_file_not_the_run(spark, small_zone, make_lakehouse):
    (small_zone / "quorum" / "poison.jsonl").write_text(_line(_quorum("fs-poison")) + "\n")
    (small_zone / "quorum" / "other.jsonl").write_text(_line(_quorum("fs-other")) + "\n")
    with faults.inject(fail_on="file:poison"):
        run_pipeline(make_lakehouse(small_zone), layers=("bronze", "silver"))

    assert _silver_clusters(make_lakehouse(small_zone)) == {"fs-good", "fs-other"}
    poison = [r for r in _bronze_rows(make_lakehouse(small_zone)) if r["source_file"].endswith("/poison.jsonl")]
    assert [(r["cluster_id"], r["parse_error"]) for r in poison] == [
        (None, "could not be ingested: InjectedFailure: injected failure at file:poison (fail_on)")
    ]
    quarantined = [
        r for r in _table(make_lakehouse(small_zone), "silver.quarantine") if r["source_file"].endswith("/poison.jsonl")
    ]
    assert [r["failed_rules"] for r in quarantined] == [["record_readable"]]
    # the file is recorded as ingested: the next run (the failure gone or not) does not retry it forever
    lakehouse = make_lakehouse(small_zone)
    run_pipeline(lakehouse, layers=("bronze", "silver"))
    assert len(_bronze_rows(lakehouse)) == 3


def test_a_silver_batch_that_fails_twice_is_quarantined_and_later_runs_go_on(spark, small_zone, make_lakehouse):
    (small_zone / "quorum" / "second.jsonl").write_text(_line(_quorum("fs-second")) + "\n")
    with faults.inject(fail_on="silver:bronze.quorum_raw"):
        run_pipeline(make_lakehouse(small_zone), layers=("bronze", "silver"))

    lakehouse = make_lakehouse(small_zone)
    assert _silver_clusters(lakehouse) == set()
    quarantined = sorted(
        (r["target_table"], r["failed_rules"], r["reason"], json.loads(r["record"])["cluster_id"])
        for r in _table(lakehouse, "silver.quarantine")
    )
    reason = "the batch could not be processed: InjectedFailure: injected failure at silver:bronze.quorum_raw (fail_on)"
    assert quarantined == [
        ("silver.quorum_snapshots", ["batch_processable"], reason, c) for c in ("fs-good", "fs-second")
    ]
    # silver moved past the batch: a run without the failure neither replays it nor loses the next file
    (small_zone / "quorum" / "later.jsonl").write_text(_line(_quorum("fs-later")) + "\n")
    run_pipeline(lakehouse, layers=("bronze", "silver"))
    assert _silver_clusters(lakehouse) == {"fs-later"}
    assert len(_table(lakehouse, "silver.quarantine")) == 2
