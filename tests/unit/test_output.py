"""quorumlake.pipelines.app.output: what the commands print (query results in three formats, a run's summary)."""

from __future__ import annotations

from datetime import datetime

from quorumlake.pipelines.app.output import format_rows, run_summary
from quorumlake.pipelines.jobs.run import TableSummary


def test_format_rows_table_csv_json():
    columns = ["cluster_id", "lag", "at"]
    rows = [["a", 1, datetime(2024, 10, 27, 3, 33, 20)], ["b", None, None]]
    assert format_rows(columns, rows, "csv") == "cluster_id,lag,at\na,1,2024-10-27 03:33:20\nb,NULL,NULL\n"
    assert format_rows(columns, rows, "json") == (
        '{"cluster_id": "a", "lag": 1, "at": "2024-10-27T03:33:20"}\n{"cluster_id": "b", "lag": null, "at": null}\n'
    )
    table = format_rows(columns, rows, "table").splitlines()
    assert table[1] == "| cluster_id | lag  | at                  |"
    assert table[3] == "| a          | 1    | 2024-10-27 03:33:20 |"
    assert table[-1] == "(2 rows)"


def test_run_summary_aligns_one_line_per_table():
    text = run_summary([TableSummary("bronze.quorum_raw", 12, 0), TableSummary("silver.quarantine", 3, 1)])
    assert text.splitlines() == [
        "table              rows added  quarantined",
        "bronze.quorum_raw          12            0",
        "silver.quarantine           3            1",
    ]
