"""silver.quorum_snapshots (one row per quorum snapshot: cluster, capture time) and silver.replica_states (one row per
replica per snapshot), from DescribeQuorum JSON envelopes (v0, v1, v2 and newer) and kafka-metadata-quorum captures.

Definitions (docs/contract.md §2): the snapshot's reference time `ref_ms` is the leader's own
`lastCaughtUpTimestamp` (the leader's clock when it answered), else the capture time. `offset_lag` = leader LEO −
replica LEO, `caught_up_lag_ms` = ref − lastCaughtUp, `fetch_age_ms` = ref − lastFetch; NULL when unknown (-1); the
leader's own row has 0 for all three. An error response keeps its snapshot row (code, message, NULL
leader/epoch/HW) and has no replica rows. CLI captures take the cluster from the path; a `--status` capture of the
same time adds the epoch, the high watermark and the voters' response order.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from quorumlake.bronze.raw import MAX_EPOCH_MS, MIN_EPOCH_MS, epoch_ms_to_timestamp
from quorumlake.contract.kafka import ZERO_UUID
from quorumlake.contract.tables import SILVER_QUORUM_SNAPSHOTS, SILVER_REPLICA_STATES
from quorumlake.silver.cli_text import CaptureError, parse_replication, parse_status
from quorumlake.silver.common import latest_per_key, parsed_once, rejected
from quorumlake.silver.udf_guard import guarded

_REPLICA = (
    "STRUCT<replicaId: INT, replicaDirectoryId: STRING, logEndOffset: BIGINT, lastFetchTimestamp: BIGINT, "
    "lastCaughtUpTimestamp: BIGINT>"
)
RESPONSE_SCHEMA = (
    "response STRUCT<errorCode: INT, errorMessage: STRING, topics: ARRAY<STRUCT<topicName: STRING, "
    "partitions: ARRAY<STRUCT<partitionIndex: INT, errorCode: INT, errorMessage: STRING, leaderId: INT, "
    f"leaderEpoch: INT, highWatermark: BIGINT, currentVoters: ARRAY<{_REPLICA}>, observers: ARRAY<{_REPLICA}>>>>>, "
    "nodes: ARRAY<STRUCT<nodeId: INT, listeners: ARRAY<STRUCT<name: STRING, host: STRING, port: INT>>>>>"
)

# The same response with every number read as its JSON text: a number the typed schema cannot hold (beyond INT or
# BIGINT, or not an integer) is NULL there but not here, so it is caught instead of passing for "unknown".
RAW_RESPONSE_SCHEMA = (
    RESPONSE_SCHEMA.replace("BIGINT", "STRING").replace("INT>", "STRING>").replace(": INT,", ": STRING,")
)
# The envelope around the response, with what the collector records of the node that answered: its release and the
# cluster's finalized feature levels (an object read as its JSON text, so that a malformed one cannot make the whole
# record unreadable; its levels are read from that text).
_ENVELOPE_SCHEMA = RESPONSE_SCHEMA + ", kafka_version STRING, finalized_features STRING"
_PARTITION_NUMBERS = ("partitionIndex", "errorCode", "leaderId", "leaderEpoch", "highWatermark")
_REPLICA_NUMBERS = ("replicaId", "logEndOffset", "lastFetchTimestamp", "lastCaughtUpTimestamp")
_REPLICA_TIMESTAMPS = ("lastFetchTimestamp", "lastCaughtUpTimestamp")


def build_quorum_snapshots(bronze: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(snapshots, replica states, rejected records) from readable bronze.quorum_raw rows.

    Needs bronze columns record_id, format, cluster_id, collected_at, api_version, payload, source_file,
    ingested_at. All records of a snapshot key must be in the input (the caller reads them together), so the
    result does not depend on how records were batched: duplicates of a key keep the later-ingested record.
    """
    return split_quorum(*parse_quorum(bronze))


def parse_quorum(bronze: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The expensive half of `build_quorum_snapshots`: (DescribeQuorum records with their parsed response,
    CLI snapshots with their parsed captures). Each of the three outputs reads them, so a caller that builds all
    three caches these two instead of parsing every record three times."""
    readable = bronze.where(F.col("parse_error").isNull())
    admin = readable.where(F.col("format") == "describe_quorum_json")
    cli = readable.where(F.col("format").isin("quorum_cli_replication", "quorum_cli_status"))
    return _parse_admin(admin), _parse_cli(cli)


def split_quorum(admin: DataFrame, cli: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(snapshots, replica states, rejected records) from `parse_quorum`'s two parsed frames."""
    admin_snap, admin_rep, admin_rej = _from_admin(admin)
    cli_snap, cli_rep, cli_rej = _from_cli(cli)
    snapshots = admin_snap.unionByName(cli_snap)
    winners = latest_per_key(snapshots, ["cluster_id", "collected_at"], order=["ingested_at", "_rank", "_winner"])
    keep = winners.select("cluster_id", "collected_at", "_winner")
    replicas = admin_rep.unionByName(cli_rep).join(keep, ["cluster_id", "collected_at", "_winner"], "left_semi")
    return (
        winners.select(*SILVER_QUORUM_SNAPSHOTS.column_names),
        replicas.select(*SILVER_REPLICA_STATES.column_names),
        admin_rej.unionByName(cli_rej),
    )


# --- DescribeQuorum JSON ---------------------------------------------------------------------------------------------


def _parse_admin(records: DataFrame) -> DataFrame:
    """The records with `_r`, the typed response, and `_range_error`, why its numbers are unusable (or NULL)."""
    typed = parsed_once(
        records,
        _doc=F.from_json("payload", _ENVELOPE_SCHEMA),
        _raw=F.from_json("payload", RAW_RESPONSE_SCHEMA).getField("response"),
    ).select(
        "*",
        F.col("_doc.response").alias("_r"),
        F.col("_doc.kafka_version").alias("_kafka_version"),
        F.col("_doc.finalized_features").alias("_features"),
    )
    return parsed_once(typed.drop("_doc"), _range_error=_range_errors(F.col("_r"), F.col("_raw"))).drop("_raw")


def _from_admin(unusable: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    out_of_range = rejected(
        unusable.where(F.col("_range_error").isNotNull()),
        "silver.quorum_snapshots",
        ["values_in_range"],
        F.col("_range_error"),
    )
    parsed = unusable.where(F.col("_range_error").isNull()).drop("_range_error")
    topics = F.col("_r.topics")
    top_error = F.coalesce(F.col("_r.errorCode"), F.lit(0))
    # A top-level error response carries no topics at all (DescribeQuorumResponse.getTopLevelErrorResponse).
    shape_ok = F.col("_r").isNotNull() & (
        (top_error != 0) | ((F.size(topics) == 1) & (F.size(F.get(topics, 0)["partitions"]) == 1))
    )
    bad_shape = rejected(
        parsed.where(~F.coalesce(shape_ok, F.lit(False))),
        "silver.quorum_snapshots",
        ["response_shape"],
        F.lit("the response must hold exactly one topic with one partition (__cluster_metadata-0)"),
    )
    p = F.get(F.get(F.col("_r.topics"), 0)["partitions"], 0)
    part_error = F.coalesce(p["errorCode"], F.lit(0))
    error_code = F.when(top_error != 0, top_error).otherwise(part_error)
    error_message = F.when(top_error != 0, F.col("_r.errorMessage")).when(part_error != 0, p["errorMessage"])
    is_error = error_code != 0
    leader = F.get(F.filter(p["currentVoters"], lambda v: v["replicaId"] == p["leaderId"]), 0)
    ref_ms = F.coalesce(_known(leader["lastCaughtUpTimestamp"]), F.unix_millis("collected_at"))
    ok = parsed.where(shape_ok).select(
        "*",
        p.alias("_p"),
        error_code.alias("error_code"),
        F.nullif(error_message, F.lit("")).alias("error_message"),
        is_error.alias("_is_error"),
        leader.alias("_leader"),
        ref_ms.alias("_ref_ms"),
    )
    snapshots = ok.select(
        "cluster_id",
        "collected_at",
        F.lit("admin").alias("source"),
        "api_version",
        F.when(~F.col("_is_error"), _known(F.col("_p.leaderId"))).cast("int").alias("leader_id"),
        F.when(~F.col("_is_error"), F.col("_p.leaderEpoch")).alias("leader_epoch"),
        F.when(~F.col("_is_error"), _known(F.col("_p.highWatermark"))).alias("high_watermark"),
        _count("_p.currentVoters").alias("voter_count"),
        _count("_p.observers").alias("observer_count"),
        F.transform("_p.currentVoters", lambda v: v["replicaId"]).alias("voter_ids"),
        "error_code",
        "error_message",
        epoch_ms_to_timestamp(F.col("_ref_ms")).alias("ref_at"),
        F.lit(None).cast("string").alias("kafka_cluster_id"),
        F.lit(None).cast("bigint").alias("cli_max_follower_lag"),
        F.lit(None).cast("bigint").alias("cli_max_follower_lag_time_ms"),
        F.array("record_id").alias("record_ids"),
        "ingested_at",
        *_reported_by_collector(F.col("_kafka_version"), F.col("_features")),
        F.lit(1).alias("_rank"),
        F.col("record_id").alias("_winner"),
    )
    healthy = ok.where(~F.col("_is_error"))
    # voters then observers, each with its position in its own list, in one pass over the responses
    both = healthy.select(
        "*", F.inline(F.concat(_listed(F.col("_p.currentVoters"), True), _listed(F.col("_p.observers"), False)))
    )
    missing = rejected(
        both.where(F.col("_rep.replicaId").isNull() | F.col("_rep.logEndOffset").isNull()),
        "silver.replica_states",
        ["replica_fields_present"],
        F.concat(F.lit("replica entry without replicaId or logEndOffset: "), F.to_json("_rep")),
    )
    replicas = (
        both.where(F.col("_rep.replicaId").isNotNull() & F.col("_rep.logEndOffset").isNotNull())
        .select(
            "cluster_id",
            "collected_at",
            F.col("_rep.replicaId").alias("replica_id"),
            "is_voter",
            "position",
            F.when(F.col("_rep.replicaDirectoryId") != ZERO_UUID, F.col("_rep.replicaDirectoryId")).alias(
                "replica_directory_id"
            ),
            _role(F.col("_rep.replicaId"), F.col("_p.leaderId"), F.col("is_voter")).alias("role"),
            _endpoints(F.col("_r.nodes"), F.col("_rep.replicaId")).alias("endpoints"),
            F.col("_rep.logEndOffset").alias("_leo"),
            F.col("_leader.logEndOffset").alias("_leader_leo"),
            F.col("_rep.lastFetchTimestamp").alias("_fetch_ms"),
            F.col("_rep.lastCaughtUpTimestamp").alias("_caught_up_ms"),
            "_ref_ms",
            F.lit("admin").alias("source"),
            "record_id",
            "ingested_at",
            F.col("record_id").alias("_winner"),
        )
        .transform(_with_lags)
    )
    return snapshots, replicas, out_of_range.unionByName(bad_shape).unionByName(missing)


def _listed(replicas: Column, is_voter: bool) -> Column:
    """`(_rep, position, is_voter)` for each entry of a voter or observer list (none when the list is absent)."""
    return F.transform(
        F.coalesce(replicas, F.array()),
        lambda rep, i: F.struct(rep.alias("_rep"), i.alias("position"), F.lit(is_voter).alias("is_voter")),
    )


def _reported_by_collector(version: Column, features_json: Column) -> list[Column]:
    """kafka_version, metadata_version_level and kraft_version from the envelope's optional `kafka_version` and
    `finalized_features` (NULL when absent; a level that is not an integer is unknown; kraft.version is 0 when the
    recorded features omit it, as Kafka lists only levels above 0)."""
    features = F.from_json(features_json, "MAP<STRING, STRING>")

    def level(name: str) -> Column:
        return features[name].try_cast("int")

    return [
        F.nullif(F.trim(version), F.lit("")).alias("kafka_version"),
        level("metadata.version").alias("metadata_version_level"),
        F.when(
            features.isNotNull(), F.when(features["kraft.version"].isNull(), F.lit(0)).otherwise(level("kraft.version"))
        ).alias("kraft_version"),
    ]


def _range_errors(typed: Column, raw: Column) -> Column:
    """Why a response cannot be typed: the numbers its columns cannot hold, and timestamps that are neither -1
    (unknown) nor epoch milliseconds up to year 9999. NULL when every number is usable.

    One pass over each array decides whether the response has any such number; only a response that has one is
    gone over again, field by field, to name them."""

    def unreadable(t: Column, r: Column) -> Column:
        return r.isNotNull() & t.isNull()

    def bad_time(t: Column) -> Column:
        return t.isNotNull() & (t != -1) & ~t.between(MIN_EPOCH_MS, MAX_EPOCH_MS)

    def any_of(tests: list[Column]) -> Column:
        return functools.reduce(Column.__or__, tests)

    t_parts = F.flatten(F.transform(typed["topics"], lambda x: x["partitions"]))
    r_parts = F.flatten(F.transform(raw["topics"], lambda x: x["partitions"]))
    replicas = {
        array: (F.flatten(F.transform(t_parts, _field_of(array))), F.flatten(F.transform(r_parts, _field_of(array))))
        for array in ("currentVoters", "observers")
    }

    def replica_problem(t: Column, r: Column) -> Column:
        return any_of(
            [unreadable(t[n], r[n]) for n in _REPLICA_NUMBERS] + [bad_time(t[n]) for n in _REPLICA_TIMESTAMPS]
        )

    suspect = any_of(
        [
            unreadable(typed["errorCode"], raw["errorCode"]),
            _any_pair(t_parts, r_parts, lambda t, r: any_of([unreadable(t[n], r[n]) for n in _PARTITION_NUMBERS])),
            *[_any_pair(t_reps, r_reps, replica_problem) for t_reps, r_reps in replicas.values()],
        ]
    )
    problems = [F.when(unreadable(typed["errorCode"], raw["errorCode"]), F.lit("errorCode"))]
    for name in _PARTITION_NUMBERS:
        problems.append(F.when(_any_pair(t_parts, r_parts, _pair_test(name, unreadable)), F.lit(name)))
    for array, (t_reps, r_reps) in replicas.items():
        for name in _REPLICA_NUMBERS:
            problems.append(F.when(_any_pair(t_reps, r_reps, _pair_test(name, unreadable)), F.lit(f"{array}[].{name}")))
        for name in _REPLICA_TIMESTAMPS:
            problems.append(
                F.when(
                    F.exists(t_reps, _field_test(name, bad_time)),
                    F.lit(f"{array}[].{name} (not -1 or epoch ms up to year 9999)"),
                )
            )
    found = F.concat_ws(", ", F.array(*problems))
    # the field-by-field pass is skipped only where the first one says "none" (not where it cannot tell: NULL)
    maybe = F.coalesce(suspect, F.lit(True))
    return F.when(maybe & (found != ""), F.concat(F.lit("numbers out of range or not integers: "), found))


def _field_of(name: str):
    return lambda element: element[name]


def _field_test(name: str, test):
    return lambda element: test(element[name])


def _pair_test(name: str, test):
    return lambda t, r: test(t[name], r[name])


def _any_pair(typed: Column, raw: Column, test) -> Column:
    """Whether `test(t, r)` holds for some pair of elements of the two (parallel) arrays."""
    return F.exists(F.zip_with(typed, raw, test), lambda hit: hit)


def _count(array: str) -> Column:
    """Size of an array field, 0 when absent (size(NULL) is -1 when ANSI mode is off)."""
    return F.when(F.col(array).isNull(), F.lit(0)).otherwise(F.size(array))


def _known(value: Column) -> Column:
    """Kafka's -1 ("unknown") as NULL."""
    return F.when(value != -1, value)


def _endpoints(nodes: Column, replica_id: Column) -> Column:
    """The replica's listener endpoints as `NAME://host:port` from a v2 response's `nodes` (voters only have them);
    NULL when the response lists none for it."""
    node = F.get(F.filter(nodes, lambda n: n["nodeId"] == replica_id), 0)
    listeners = F.transform(
        node["listeners"],
        lambda ln: F.concat(ln["name"], F.lit("://"), ln["host"], F.lit(":"), ln["port"].cast("string")),
    )
    return F.when(F.size(listeners) > 0, listeners)


def _role(replica_id: Column, leader_id: Column, is_voter: Column) -> Column:
    return F.when(is_voter & (replica_id == leader_id), "leader").when(is_voter, "follower").otherwise("observer")


def _with_lags(rows: DataFrame) -> DataFrame:
    """From raw `_leo`, `_leader_leo`, `_fetch_ms`, `_caught_up_ms`, `_ref_ms` and `role` to the typed columns."""
    is_leader = F.col("role") == "leader"
    leo, leader_leo = _known(F.col("_leo")), _known(F.col("_leader_leo"))
    fetch, caught_up = _known(F.col("_fetch_ms")), _known(F.col("_caught_up_ms"))
    # try_subtract: under ANSI mode an overflowing difference would fail the whole batch instead of this row
    return (
        rows.withColumn("log_end_offset", leo)
        .withColumn("last_fetch_at", epoch_ms_to_timestamp(fetch))
        .withColumn("last_caught_up_at", epoch_ms_to_timestamp(caught_up))
        .withColumn("offset_lag", F.when(is_leader, F.lit(0).cast("bigint")).otherwise(F.try_subtract(leader_leo, leo)))
        .withColumn(
            "caught_up_lag_ms",
            F.when(is_leader, F.lit(0).cast("bigint")).otherwise(F.try_subtract(F.col("_ref_ms"), caught_up)),
        )
        .withColumn(
            "fetch_age_ms",
            F.when(is_leader, F.lit(0).cast("bigint")).otherwise(F.try_subtract(F.col("_ref_ms"), fetch)),
        )
    )


# --- kafka-metadata-quorum captures ---------------------------------------------------------------------------------

_CLI_REPLICA = T.StructType(
    [
        T.StructField("replica_id", T.IntegerType()),
        T.StructField("is_voter", T.BooleanType()),
        T.StructField("position", T.IntegerType()),
        T.StructField("replica_directory_id", T.StringType()),
        T.StructField("endpoints", T.ArrayType(T.StringType())),
        T.StructField("log_end_offset", T.LongType()),
        T.StructField("last_fetch_ms", T.LongType()),
        T.StructField("last_caught_up_ms", T.LongType()),
        T.StructField("is_leader", T.BooleanType()),
    ]
)
_CLI_SNAPSHOT = T.StructType(
    [
        T.StructField("error", T.StringType()),
        T.StructField("kafka_cluster_id", T.StringType()),
        T.StructField("leader_id", T.IntegerType()),
        T.StructField("leader_epoch", T.IntegerType()),
        T.StructField("high_watermark", T.LongType()),
        T.StructField("voter_ids", T.ArrayType(T.IntegerType())),
        T.StructField("observer_count", T.IntegerType()),
        T.StructField("ref_ms", T.LongType()),
        T.StructField("max_follower_lag", T.LongType()),
        T.StructField("max_follower_lag_time_ms", T.LongType()),
        T.StructField("replicas", T.ArrayType(_CLI_REPLICA)),
    ]
)


def cli_snapshot(replication: str | None, status: str | None, collected_at_ms: int) -> dict:
    """One snapshot from a `--replication` and/or a `--status` capture taken at the same time."""
    try:
        rows = parse_replication(replication, collected_at_ms) if replication is not None else None
        st = parse_status(status) if status is not None else None
    except CaptureError as exc:
        return {"error": str(exc)}
    leader_rows = [r for r in rows or [] if r["status"] == "Leader"]
    leader_id = st["leader_id"] if st else leader_rows[0]["replica_id"]
    if st and rows is not None and leader_rows and st["leader_id"] != leader_rows[0]["replica_id"]:
        return {
            "error": f"--status says leader {st['leader_id']} but --replication says {leader_rows[0]['replica_id']}"
        }
    # Response order of the voters: --status lists them as the server returned them; --replication prints the
    # leader first, so without --status the leader's true position is unknown and it is taken as first.
    voter_order = (
        [v["id"] for v in st["voters"]] if st else [r["replica_id"] for r in rows if r["status"] != "Observer"]
    )
    observer_order = (
        [o["id"] for o in st["observers"]] if st else [r["replica_id"] for r in rows if r["status"] == "Observer"]
    )
    # --status (3.9+) prints each voter's endpoints; --replication never does
    endpoints = {v["id"]: v["endpoints"] for v in st["voters"] if v["endpoints"]} if st else {}
    replicas = []
    for r in rows or []:
        is_voter = r["status"] != "Observer"
        order = voter_order if is_voter else observer_order
        position = order.index(r["replica_id"]) if r["replica_id"] in order else len(order) + r["position"]
        replicas.append(
            {
                "replica_id": r["replica_id"],
                "is_voter": is_voter,
                "position": position,
                "replica_directory_id": r["replica_directory_id"],
                "endpoints": endpoints.get(r["replica_id"]) if is_voter else None,
                "log_end_offset": r["log_end_offset"],
                "last_fetch_ms": r["last_fetch_ms"],
                "last_caught_up_ms": r["last_caught_up_ms"],
                "is_leader": r["status"] == "Leader",
            }
        )
    ref_ms = (leader_rows[0]["last_caught_up_ms"] if leader_rows else None) or collected_at_ms
    for r in replicas:
        for key, label in (("last_fetch_ms", "LastFetchTimestamp"), ("last_caught_up_ms", "LastCaughtUpTimestamp")):
            if r[key] is not None and r[key] != -1 and not MIN_EPOCH_MS <= r[key] <= MAX_EPOCH_MS:
                return {
                    "error": f"replica {r['replica_id']}: {label} {r[key]} is out of range "
                    f"(epoch milliseconds up to year 9999)"
                }
    return {
        "error": None,
        "kafka_cluster_id": st["kafka_cluster_id"] if st else None,
        "leader_id": leader_id,
        "leader_epoch": st["leader_epoch"] if st else None,
        "high_watermark": st["high_watermark"] if st else None,
        "voter_ids": voter_order,
        "observer_count": len(observer_order),
        "ref_ms": ref_ms,
        "max_follower_lag": st["max_follower_lag"] if st else None,
        "max_follower_lag_time_ms": st["max_follower_lag_time_ms"] if st else None,
        "replicas": replicas,
    }


_cli_snapshot_udf = F.udf(
    guarded(cli_snapshot, _CLI_SNAPSHOT, lambda reason: {"error": reason}), _CLI_SNAPSHOT, useArrow=True
)


def _parse_cli(records: DataFrame) -> DataFrame:
    """One row per CLI snapshot (cluster, capture time): its `--replication` and `--status` captures paired, and
    `_s`, what they say."""
    latest = latest_per_key(records, ["cluster_id", "collected_at", "format"], order=["ingested_at", "record_id"])
    is_rep = F.col("format") == "quorum_cli_replication"
    pairs = latest.groupBy("cluster_id", "collected_at").agg(
        F.max(F.when(is_rep, F.col("payload"))).alias("_replication"),
        F.max(F.when(~is_rep, F.col("payload"))).alias("_status"),
        F.max(F.when(is_rep, F.col("record_id"))).alias("_rep_record"),
        F.max(F.when(~is_rep, F.col("record_id"))).alias("_status_record"),
        F.max("ingested_at").alias("ingested_at"),
        F.first(F.when(is_rep, F.col("source_file")), ignorenulls=True).alias("_rep_file"),
        F.first(F.when(~is_rep, F.col("source_file")), ignorenulls=True).alias("_status_file"),
        F.collect_list(F.to_json(F.struct("record_id", "format", "source_file", "payload"))).alias("_records"),
    )
    parsed = parsed_once(
        pairs, _s=_cli_snapshot_udf("_replication", "_status", F.unix_millis("collected_at"))
    ).withColumn(
        "_winner", F.concat_ws("+", F.coalesce("_rep_record", F.lit("")), F.coalesce("_status_record", F.lit("")))
    )
    return parsed


def _from_cli(parsed: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    bad = parsed.where(F.col("_s.error").isNotNull()).select(
        F.concat_ws("+", "_rep_record", "_status_record").alias("record_id"),
        F.concat_ws(" + ", "_rep_file", "_status_file").alias("source_file"),
        "ingested_at",
        F.concat(F.lit("["), F.concat_ws(",", "_records"), F.lit("]")).alias("_record_json"),
        F.col("_s.error").alias("_reason"),
    )
    bad_rows = rejected(
        bad, "silver.quorum_snapshots", ["cli_capture_parses"], F.col("_reason"), record=F.col("_record_json")
    )
    good = parsed.where(F.col("_s.error").isNull())
    snapshots = good.select(
        "cluster_id",
        "collected_at",
        F.lit("cli").alias("source"),
        F.lit(None).cast("int").alias("api_version"),
        _known(F.col("_s.leader_id")).alias("leader_id"),
        F.col("_s.leader_epoch").alias("leader_epoch"),
        _known(F.col("_s.high_watermark")).alias("high_watermark"),
        F.size("_s.voter_ids").alias("voter_count"),
        F.col("_s.observer_count").alias("observer_count"),
        F.col("_s.voter_ids").alias("voter_ids"),
        F.lit(0).alias("error_code"),
        F.lit(None).cast("string").alias("error_message"),
        epoch_ms_to_timestamp(F.col("_s.ref_ms")).alias("ref_at"),
        F.col("_s.kafka_cluster_id").alias("kafka_cluster_id"),
        F.col("_s.max_follower_lag").alias("cli_max_follower_lag"),
        F.col("_s.max_follower_lag_time_ms").alias("cli_max_follower_lag_time_ms"),
        F.filter(F.array("_rep_record", "_status_record"), lambda x: x.isNotNull()).alias("record_ids"),
        "ingested_at",
        F.lit(None).cast("string").alias("kafka_version"),
        F.lit(None).cast("int").alias("metadata_version_level"),
        F.lit(None).cast("int").alias("kraft_version"),
        F.lit(0).alias("_rank"),
        "_winner",
    )
    rep = good.select("*", F.explode("_s.replicas").alias("_rep"))
    leader_leo = F.get(F.filter("_s.replicas", lambda r: r["is_leader"]), 0)["log_end_offset"]
    replicas = rep.select(
        "cluster_id",
        "collected_at",
        F.col("_rep.replica_id").alias("replica_id"),
        F.col("_rep.is_voter").alias("is_voter"),
        F.col("_rep.position").alias("position"),
        F.col("_rep.replica_directory_id").alias("replica_directory_id"),
        F.col("_rep.endpoints").alias("endpoints"),
        F.when(F.col("_rep.is_leader"), "leader")
        .when(F.col("_rep.is_voter"), "follower")
        .otherwise("observer")
        .alias("role"),
        F.coalesce(F.col("_rep.log_end_offset"), F.lit(-1)).alias("_leo"),
        F.coalesce(leader_leo, F.lit(-1)).alias("_leader_leo"),
        F.coalesce(F.col("_rep.last_fetch_ms"), F.lit(-1)).alias("_fetch_ms"),
        F.coalesce(F.col("_rep.last_caught_up_ms"), F.lit(-1)).alias("_caught_up_ms"),
        F.col("_s.ref_ms").alias("_ref_ms"),
        F.lit("cli").alias("source"),
        F.col("_rep_record").alias("record_id"),
        "ingested_at",
        "_winner",
    ).transform(_with_lags)
    return snapshots, replicas, bad_rows
