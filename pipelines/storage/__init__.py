"""Every read, write, MERGE and checkpoint of the lakehouse, in one package: nothing outside it touches a Delta
table, runs SQL on a lakehouse table, or reaches into the JVM (besides `quorumlake.pipelines.engine.session`, which
starts the engine, and `quorumlake.pipelines.serving.sql_guard`, which serves it).

Locally each table is an external Delta table at `<warehouse>/<schema>/<table>`, registered by name at session start
(cheap and idempotent), so `bronze.quorum_raw` resolves in every process without a metastore. On Databricks the
tables are Unity Catalog managed tables `<catalog>.<schema>.<table>`.

Everything here is plain Spark (DataFrames and SQL), so it runs the same on a classic session and through Spark
Connect (Databricks serverless): MERGEs are SQL `MERGE INTO` statements whose source is a temporary view of the
DataFrame, and a table's history is `DESCRIBE HISTORY`. Delta's Python `DeltaTable` API is not used, because over
Spark Connect it needs Delta's Connect plugin on the server, which Maven Central does not publish for Delta 4.4 on
Spark 4.2.

One `Lakehouse` object is the way in; its parts live by concern:
- `catalog`: names and places, creating tables from the registry, registering names, views;
- `reads`: tables, SQL queries by name, what a table's Delta log says, change feeds, the run progress ledger;
- `writes`: appends and MERGEs (insert-if-new, replace-in-scope), truncation, OPTIMIZE and VACUUM;
- `sources`: the landing zone's streams, staging, scratch space, bronze's checkpoints;
- `bounds`: the row predicates that keep reads and MERGEs to the files of a batch;
- `lakehouse`: `Lakehouse` itself (all of the above) and the engine settings of a run.
"""

from quorumlake.pipelines.storage.bounds import Bounds
from quorumlake.pipelines.storage.catalog import TABLES_AT_ONCE, TableTemplates, registry_fingerprint
from quorumlake.pipelines.storage.lakehouse import INTERPRETED_ENGINE, PARQUET_TO_LANDING, Lakehouse
from quorumlake.pipelines.storage.reads import LiveFile, batches
from quorumlake.pipelines.storage.sources import Attempt

__all__ = [
    "INTERPRETED_ENGINE",
    "PARQUET_TO_LANDING",
    "TABLES_AT_ONCE",
    "Attempt",
    "Bounds",
    "Lakehouse",
    "LiveFile",
    "TableTemplates",
    "batches",
    "registry_fingerprint",
]
