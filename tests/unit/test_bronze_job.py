"""pipelines.bronze_job's chunk plan after a run that died (pure: no Spark)."""

from __future__ import annotations

from datetime import datetime, timezone

from pipelines.bronze_job import GIVE_UP_AFTER, _key, _plan
from pipelines.io import Attempt
from pipelines.landing import LandingFile

T = datetime(2026, 11, 24, tzinfo=timezone.utc)


def files(*sizes: int) -> list[LandingFile]:
    return [LandingFile("quorum", f"file:/l/quorum/{i}.jsonl", size, T) for i, size in enumerate(sizes)]


def plan(new, died, chunk_bytes=10):
    return [([f.path[-7:] for f in chunk], deaths) for chunk, deaths in _plan(new, chunk_bytes, died)]


def test_without_a_run_that_died_files_go_in_chunks():
    assert plan(files(4, 4, 4, 20), None) == [(["0.jsonl", "1.jsonl"], 0), (["2.jsonl"], 0), (["3.jsonl"], 0)]


def test_the_files_of_the_chunk_a_run_died_in_come_first_one_by_one():
    new = files(4, 4, 4, 4, 4)
    died = Attempt(frozenset({_key(new[2]), _key(new[3])}))
    assert plan(new, died) == [
        (["2.jsonl"], 0),
        (["3.jsonl"], 0),
        (["0.jsonl", "1.jsonl"], 0),
        (["4.jsonl"], 0),
    ]


def test_a_file_that_killed_runs_alone_counts_its_deaths_until_it_is_given_up():
    new = files(4, 4)
    assert plan(new, Attempt(frozenset({_key(new[1])}))) == [(["1.jsonl"], 1), (["0.jsonl"], 0)]
    assert plan(new, Attempt(frozenset({_key(new[1])}), 1)) == [(["1.jsonl"], GIVE_UP_AFTER), (["0.jsonl"], 0)]


def test_a_changed_file_is_not_the_one_that_died():
    new = files(4, 4)
    old_version = LandingFile("quorum", new[1].path, 3, T)
    assert plan(new, Attempt(frozenset({_key(old_version)}), 1)) == [(["0.jsonl", "1.jsonl"], 0)]
