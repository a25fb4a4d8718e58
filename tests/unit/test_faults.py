"""The test-only injection point of failures: a test names a point of a run and what happens there; a user's
settings cannot."""

from __future__ import annotations

import pytest

from quorumlake.pipelines.config import Config, ConfigError, typed_settings
from quorumlake.pipelines.jobs import faults


def test_a_point_fails_or_dies_only_while_a_test_injects_it():
    died = []
    faults.reached("bronze:recorded")  # nothing injected: nothing happens
    faults.fail_if("silver:bronze.quorum_raw")
    with faults.inject(crash_at="bronze:recorded", fail_on="silver:bronze.quorum_raw", crash=lambda: died.append(1)):
        faults.reached("gold:round")
        assert died == []
        faults.reached("bronze:recorded")
        assert died == [1]
        with pytest.raises(faults.InjectedFailure, match=r"silver:bronze\.quorum_raw"):
            faults.fail_if("silver:bronze.quorum_raw")
        faults.fail_if("silver:bronze.metrics_raw")
    faults.reached("bronze:recorded")
    faults.fail_if("silver:bronze.quorum_raw")
    assert died == [1]


def test_a_file_point_names_every_bronze_chunk_holding_a_matching_file():
    with faults.inject(fail_on="file:poison"):
        faults.fail_if("bronze", "/l/a.jsonl")
        with pytest.raises(faults.InjectedFailure):
            faults.fail_if("bronze", "/l/a.jsonl", "/l/poison.jsonl")
        faults.fail_if("silver:bronze.quorum_raw", "/l/poison.jsonl")  # a file point is bronze's only


@pytest.mark.parametrize("hook", ["crash_at", "fail_on"])
def test_the_hooks_are_not_settings(hook):
    assert hook not in {f for f in Config.__dataclass_fields__}
    with pytest.raises(ConfigError, match="unknown setting"):
        typed_settings([(hook, "bronze:recorded")])
