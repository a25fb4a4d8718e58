"""Every read, write, MERGE and checkpoint of the lakehouse, in one package: nothing outside it touches a Delta
table, runs SQL on a lakehouse table, reads a Delta log, or reaches into the JVM (besides
`quorumlake.pipelines.engine`, which starts the engine, and `quorumlake.pipelines.serving`, which serves it).

Locally each table is an external Delta table at `<warehouse>/<schema>/<table>`, registered by name at session start
(cheap and idempotent), so `bronze.quorum_raw` resolves in every process without a metastore. On Databricks the
tables are Unity Catalog managed tables `<catalog>.<schema>.<table>`.

Everything that reads or writes rows is plain Spark (DataFrames and SQL), so it runs the same on a classic session and
through Spark Connect (Databricks serverless): MERGEs are SQL `MERGE INTO` statements whose source is a temporary view
of the DataFrame, and a table's history is `DESCRIBE HISTORY`. Delta's Python `DeltaTable` API is not used, because
over Spark Connect it needs Delta's Connect plugin on the server, which Maven Central does not publish for Delta 4.4
on Spark 4.2. A local table's log is read on the driver by delta-rs (`log`).

One `Lakehouse` object is the way in, made of parts by concern:
- `catalog`: names and places, creating tables from the registry, registering names, views;
- `log`: what a table's Delta log says (versions, commits and their metrics, current files and their statistics);
- `reads`: tables, SQL queries by name, change feeds;
- `writes`: appends and MERGEs (insert-if-new, replace-in-scope), truncation, OPTIMIZE and VACUUM;
- `ledger`: the run progress ledger (`bronze.pipeline_runs`);
- `sources`: the landing zone's streams, staging, scratch space, bronze's checkpoints;
- `bounds`: the row predicates that keep reads and MERGEs to the files of a batch.
"""

from quorumlake.pipelines.storage.bounds import Bounds
from quorumlake.pipelines.storage.catalog import registry_fingerprint
from quorumlake.pipelines.storage.lakehouse import PARQUET_TO_LANDING, Lakehouse
from quorumlake.pipelines.storage.log import batches
from quorumlake.pipelines.storage.sources import Attempt

__all__ = [
    "PARQUET_TO_LANDING",
    "Attempt",
    "Bounds",
    "Lakehouse",
    "batches",
    "registry_fingerprint",
]
