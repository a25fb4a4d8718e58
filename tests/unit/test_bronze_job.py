"""quorumlake.pipelines.jobs.bronze_job's chunk plan after a run that died (pure: no Spark)."""

from __future__ import annotations

from datetime import datetime, timezone

from quorumlake.pipelines.jobs.bronze_job import GIVE_UP_AFTER, _key, _plan
from quorumlake.pipelines.storage import Attempt
from quorumlake.pipelines.storage.landing import LandingFile

T = datetime(2026, 11, 24, tzinfo=timezone.utc)


def files(*sizes: int, source: str = "quorum") -> list[LandingFile]:
    return [LandingFile(source, f"file:/l/{source}/{i}.jsonl", size, T) for i, size in enumerate(sizes)]


def plan(new, died, chunk_bytes=10):
    return [([f.path.split("/l/")[1] for f in chunk], deaths) for chunk, deaths in _plan(new, chunk_bytes, died)]


def test_without_a_run_that_died_files_go_in_chunks():
    assert plan(files(4, 4, 4, 20), None) == [
        (["quorum/0.jsonl", "quorum/1.jsonl"], 0),
        (["quorum/2.jsonl"], 0),
        (["quorum/3.jsonl"], 0),
    ]


def test_the_chunk_a_run_died_in_comes_last_in_halves_holding_every_other_file_of_each_source():
    quorum, metrics = files(1, 1, 1, 1), files(1, 1, 1, source="metrics")
    new = [*quorum, *metrics]
    died = Attempt(frozenset(map(_key, [*quorum[1:], *metrics])))
    assert plan(new, died) == [
        (["quorum/0.jsonl"], 0),
        (["metrics/0.jsonl", "metrics/2.jsonl", "quorum/2.jsonl"], 0),
        (["metrics/1.jsonl", "quorum/1.jsonl", "quorum/3.jsonl"], 0),
    ]


def test_a_file_that_killed_runs_alone_counts_its_deaths_until_it_is_given_up():
    new = files(4, 4)
    assert plan(new, Attempt(frozenset({_key(new[1])}))) == [(["quorum/0.jsonl"], 0), (["quorum/1.jsonl"], 1)]
    assert plan(new, Attempt(frozenset({_key(new[1])}), 1)) == [
        (["quorum/0.jsonl"], 0),
        (["quorum/1.jsonl"], GIVE_UP_AFTER),
    ]
    # the last file of a chunk that held others is tried alone, from no deaths
    died = Attempt(frozenset({_key(new[1]), ("file:/l/quorum/gone.jsonl", 1, T.isoformat())}))
    assert plan(new, died) == [(["quorum/0.jsonl"], 0), (["quorum/1.jsonl"], 0)]


def test_a_changed_file_is_not_the_one_that_died():
    new = files(4, 4)
    old_version = LandingFile("quorum", new[1].path, 3, T)
    assert plan(new, Attempt(frozenset({_key(old_version)}), 1)) == [(["quorum/0.jsonl", "quorum/1.jsonl"], 0)]
