"""Auto Loader (`cloudFiles`) options for bronze on Databricks, chosen for a landing zone that grows forever.

`quorumlake.pipelines.storage.Lakehouse.stream_landing_files` applies `AUTOLOADER_OPTIONS` to every landing source in
`ingest_mode = "autoloader"`, next to the options that depend on the run (schema location, max files per trigger).
`AUTOLOADER_RETENTION_OPTIONS` are added only by the deployment that owns the landing volume (prod): they delete
landing files, which a dev deployment reading the shared volume must never do. Option reference: Databricks docs,
"Auto Loader options" and "Clean up processed files with Auto Loader" (cloudFiles.cleanSource, DBR 16.4+).
"""

from __future__ import annotations

AUTOLOADER_OPTIONS: dict[str, str] = {
    # Bronze keeps each file's raw bytes: a corrupt .gz or a non-UTF-8 file becomes a row with its parse_error
    # instead of failing the stream (the same format the open-source file source reads locally).
    "cloudFiles.format": "binaryFile",
    # The first run of a new checkpoint ingests what the landing zone already holds; bronze MERGEs on record_id,
    # so files ingested before (under another checkpoint) add nothing.
    "cloudFiles.includeExistingFiles": "true",
    # Discover new files from Databricks' managed file events (the file-events service on the external location
    # behind the landing volume) instead of listing the whole ever-growing landing tree on every run. The first run
    # of a checkpoint lists once; later runs read only the events since the position stored in the checkpoint.
    # Requires file events enabled on that external location (docs/databricks.md, "Bronze on Databricks"); the job's
    # file-arrival trigger uses the same events. The events cache holds 7 days: the pipeline must run at least
    # weekly, or the next run falls back to one full listing. Do not combine with cloudFiles.backfillInterval.
    "cloudFiles.useManagedFileEvents": "true",
    # A file rewritten in place under the same name is not ingested a second time: collectors write complete files
    # under new names (temporary `.`/`_` names, then rename), and a changed copy under a new name is a new record.
    "cloudFiles.allowOverwrites": "false",
}

# Retention of landing files: bronze keeps every record losslessly (payload, or payload_base64 for non-UTF-8 bytes,
# plus file_sha256), so a landing file is not needed once ingested. Auto Loader deletes each processed file 30 days
# after ingesting it; the month is a window for re-ingesting into a rebuilt checkpoint or inspecting a raw file.
# Needs WRITE VOLUME on the landing volume for the job's run-as principal (prod only).
AUTOLOADER_RETENTION_OPTIONS: dict[str, str] = {
    # delete processed files from the landing volume (MOVE would need a second, equally growing location)
    "cloudFiles.cleanSource": "DELETE",
    # ... this long after they were ingested (Auto Loader's default, written out so a review sees it)
    "cloudFiles.cleanSource.retentionDuration": "30 days",
}
