"""The Auto Loader options bronze passes on Databricks (Auto Loader itself exists only there; the foreachBatch
function it drives is run locally by tests/e2e/test_stream_path.py)."""

from __future__ import annotations

import pytest

from quorumlake.pipelines.config import Config, ConfigError
from quorumlake.pipelines.storage.autoloader import AUTOLOADER_OPTIONS, retention_options


def test_files_are_read_raw_and_discovered_by_file_events_where_available():
    assert AUTOLOADER_OPTIONS["cloudFiles.format"] == "binaryFile"
    assert AUTOLOADER_OPTIONS["cloudFiles.useManagedFileEvents"] == "if_available"
    assert AUTOLOADER_OPTIONS["cloudFiles.includeExistingFiles"] == "true"
    assert "cloudFiles.backfillInterval" not in AUTOLOADER_OPTIONS  # not combined with file events
    assert not any(key.startswith("cloudFiles.cleanSource") for key in AUTOLOADER_OPTIONS), "deletes only if asked"


def test_landing_files_are_deleted_only_when_a_retention_is_set():
    assert retention_options(Config().landing_retention_days) == {}
    assert retention_options(30) == {
        "cloudFiles.cleanSource": "DELETE",
        "cloudFiles.cleanSource.retentionDuration": "30 days",
    }
    with pytest.raises(ConfigError, match="landing_retention_days must not be negative"):
        Config().with_overrides(landing_retention_days=-1)
