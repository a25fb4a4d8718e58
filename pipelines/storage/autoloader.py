"""Auto Loader (`cloudFiles`) options for bronze on Databricks, chosen for a landing zone that grows forever.

`quorumlake.pipelines.storage.Lakehouse.stream_landing_files` applies `AUTOLOADER_OPTIONS` to every landing source in
`ingest_mode = "autoloader"`, next to the options that depend on the run (schema location, max files per trigger), and
`retention_options(config.landing_retention_days)`, which is empty unless the deployment owns the landing volume
(the bundle's prod target sets 30 days; a dev deployment reading the shared volume must never delete from it).
Option reference: Databricks docs, "Auto Loader options" and "Clean up processed files with Auto Loader".
"""

from __future__ import annotations

AUTOLOADER_OPTIONS: dict[str, str] = {
    # Bronze keeps each file's raw bytes: a corrupt .gz or a non-UTF-8 file becomes a row with its parse_error
    # instead of failing the stream (the same format the open-source file source reads locally).
    "cloudFiles.format": "binaryFile",
    # The first run of a new checkpoint ingests what the landing zone already holds; bronze MERGEs on record_id,
    # so files ingested before (under another checkpoint) add nothing.
    "cloudFiles.includeExistingFiles": "true",
    # Discover new files from Databricks' file events where the storage behind the landing volume has them enabled,
    # else by listing (Auto Loader's own default, written out so a review sees it). With file events, the first run of
    # a checkpoint lists once and later runs read only the events since the position kept in the checkpoint; the
    # job's file-arrival trigger uses the same events. The events cache holds 7 days: a pipeline idle for longer
    # lists once again. Not combined with cloudFiles.backfillInterval.
    "cloudFiles.useManagedFileEvents": "if_available",
    # A file rewritten in place under the same name is not ingested a second time: collectors write complete files
    # under new names (temporary `.`/`_` names, then rename), and a changed copy under a new name is a new record.
    "cloudFiles.allowOverwrites": "false",
}


def retention_options(days: int) -> dict[str, str]:
    """Options that delete landing files `days` after Auto Loader processed them (none for 0).

    A file counts as processed once the micro-batch holding it committed to the stream's checkpoint, which happens
    only after the batch function returned: after its records (or, for a file that could not be read, a row with
    its parse_error) were inserted into bronze and the file recorded in bronze.ingest_runs. So a file is never
    deleted before bronze holds it, and bronze keeps every record losslessly (payload, or payload_base64 for
    non-UTF-8 bytes, plus file_sha256). The days are a window for re-ingesting into a rebuilt checkpoint or looking
    at a raw file. Deleting needs WRITE VOLUME on the landing volume for the job's run-as principal (granted in
    resources/quorumlake.schemas.yml, prod only). DELETE rather than MOVE: a move target would grow like the landing
    zone itself."""
    if days <= 0:
        return {}
    return {"cloudFiles.cleanSource": "DELETE", "cloudFiles.cleanSource.retentionDuration": f"{days} days"}
