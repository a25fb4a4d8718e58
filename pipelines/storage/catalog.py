"""The lakehouse's names and places, and its tables' creation and registration: where each table lives, what SQL
calls it, and bringing every table to the definition the registry (`quorumlake.contract.tables`) declares.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from quorumlake.contract.tables import LAYERS, PIPELINE_RUNS, TableSpec, by_name, sql_string
from quorumlake.pipelines.config import Config, join_path
from quorumlake.pipelines.engine.session import is_connect


class Catalog:
    """Names, places, creation and registration of the tables (a part of `Lakehouse`)."""

    spark: SparkSession
    config: Config

    # --- names and places ---------------------------------------------------------------------------------------------

    def table_name(self, spec: TableSpec) -> str:
        return f"{self.schema_name(spec.schema)}.{spec.table}"

    def schema_name(self, schema: str) -> str:
        name = f"{self.config.schema_prefix}{schema}"
        return f"{self.config.catalog}.{name}" if self.config.catalog else name

    def name_of(self, name: str) -> str:
        """This lakehouse's name for a contract object: a table (`gold.quorum_status`) or a view
        (`gold.v_fleet_overview`)."""
        try:
            return self.table_name(by_name(name))
        except KeyError:
            schema, obj = name.split(".")
            return f"{self.schema_name(schema)}.{obj}"

    def table_path(self, spec: TableSpec) -> str:
        return join_path(absolute(self.config.warehouse), spec.schema, spec.table)

    def checkpoint(self, *parts: str) -> str:
        return join_path(absolute(self.config.checkpoints), *parts)

    def ref(self, spec: TableSpec) -> str:
        """How SQL names the table in this lakehouse: its catalog name, or locally `delta.`<path>`` (no catalog
        lookup, no registration needed)."""
        return self.table_name(spec) if self.config.catalog else f"delta.`{self.table_path(spec)}`"

    # --- creation and registration ------------------------------------------------------------------------------------

    def ensure_tables(self, specs: tuple[TableSpec, ...]) -> None:
        """Create the tables that do not exist yet; cheap when they all do (locally a look at each `_delta_log`)."""
        if self.config.catalog:
            self.register_names(specs)
            return
        missing = [spec for spec in specs if not self._exists(spec)]
        migrating = PIPELINE_RUNS in missing and len(missing) < len(specs)

        templates = self._templates()

        def create(spec: TableSpec) -> None:
            if templates is not None and templates.create(spec, self.table_path(spec)):
                return
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.ref(spec)} {_declared(spec)}")
            if templates is not None:
                templates.keep(spec, self.table_path(spec))

        # Each CREATE is one small commit, mostly waiting: a new warehouse's tables are created a few at a time.
        with ThreadPoolExecutor(max_workers=TABLES_AT_ONCE) as pool:
            list(pool.map(create, missing))
        if PIPELINE_RUNS in missing:
            self._progress_rows, self._progress_at = {}, {}  # just created: no consumer has progress yet
        if migrating:
            # A warehouse built before run bookkeeping existed: turn on what the tables now declare (e.g. the change
            # data feed that silver reads bronze by).
            for spec in specs:
                if spec.properties and spec not in missing:
                    self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")
        if PIPELINE_RUNS in specs:
            self._migrate(specs, missing)

    def _migrate(self, specs: tuple[TableSpec, ...], created: list[TableSpec]) -> None:
        """Bring existing tables to their declared definition (new columns, comments, properties) when the
        registry changed since the last run; a hash of the registry is kept in `bronze.pipeline_runs`, so this
        costs nothing while the definitions stay the same."""
        fingerprint = registry_fingerprint(specs)
        if self.fingerprint("registry", "tables") == fingerprint:
            return
        for spec in specs:
            if spec not in created:
                self.evolve(spec)
        record = ({"tables": len(specs)}, {"tables": fingerprint})
        if len(created) == len(specs):
            # A new warehouse: its tables are as declared whether this is recorded or not, so the record waits for
            # the run's first progress commit instead of being a commit of its own (in a new process, the JVM's
            # first write: ~5 s of a demo's run). Lost with a run killed before that commit, it costs the next run
            # the look at each table above, nothing else.
            self.save_progress("registry", *record, hold=True)
        else:
            self.save_progress("registry", *record)

    def evolve(self, spec: TableSpec) -> None:
        """Add declared columns the table lacks and update changed column comments and table properties."""
        actual = {f.name: f for f in self.read(spec).schema.fields}
        missing = [(n, t, c) for n, t, c in spec.columns if n not in actual]
        if missing:
            columns = ", ".join(f"`{n}` {t} COMMENT '{sql_string(c)}'" for n, t, c in missing)
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} ADD COLUMNS ({columns})")
        for name, _, comment in spec.columns:
            if name in actual and actual[name].metadata.get("comment", "") != comment:
                self.spark.sql(f"ALTER TABLE {self.ref(spec)} ALTER COLUMN `{name}` COMMENT '{sql_string(comment)}'")
        clustered = bool(spec.clustering) and not spec.partitioned_by
        if not spec.properties and not clustered:
            return
        # properties and clustering are set only where they differ: each ALTER is a commit, and a warehouse whose
        # record of its definitions was lost (a first run killed before its first progress commit) is as declared
        detail = self.spark.sql(f"DESCRIBE DETAIL {self.ref(spec)}").first()
        held = dict(detail["properties"] or {})
        if any(held.get(key) != value for key, value in spec.properties or ()):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} SET{_properties(spec)}")
        if clustered and list(detail["clusteringColumns"] or []) != list(spec.clustering):
            self.spark.sql(f"ALTER TABLE {self.ref(spec)} CLUSTER BY ({', '.join(spec.clustering)})")

    def _templates(self) -> TableTemplates | None:
        """The machine's table templates, for a local session this process started itself (not Databricks, not Spark
        Connect: there the files may be on another machine, and the session's defaults are not ours)."""
        from quorumlake.pipelines.engine.session import on_databricks, templates_home

        if on_databricks() or is_connect(self.spark) or "://" in self.table_path(PIPELINE_RUNS):
            return None
        # settings that Delta writes into a new table's definition (default table properties) are part of its template
        defaults = sorted((k, v) for k, v in self.spark.conf.getAll.items() if k.startswith(_DELTA_DEFAULTS))
        return TableTemplates(templates_home(), repr(defaults))

    def _exists(self, spec: TableSpec) -> bool:
        path = self.table_path(spec)
        if "://" not in path:
            return os.path.isdir(os.path.join(path, "_delta_log"))
        try:
            self.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("format").first()
        except AnalysisException:  # no table there (or not a Delta table)
            return False
        return True

    def register_names(self, specs: tuple[TableSpec, ...]) -> None:
        """Create (or just register) every schema and table by name, so SQL users find `gold.quorum_status`."""
        for schema in LAYERS:
            if self.config.catalog:
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)}")
            else:
                location = join_path(absolute(self.config.warehouse), schema)
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_name(schema)} LOCATION '{location}'")
        for spec in specs:
            if self.config.catalog:
                self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.table_name(spec)} {_declared(spec)}")
                continue
            path, marker = self.table_path(spec), f"quorumlake.registered.{self.table_name(spec)}"
            if self.spark.conf.get(marker, None) == path:
                continue  # registered at this location earlier in this session
            # Local names live in this process's in-memory catalog: (re)point them at this warehouse.
            # Dropping an external table leaves its Delta folder untouched.
            self.spark.sql(f"DROP TABLE IF EXISTS {self.table_name(spec)}")
            if self._exists(spec):
                # the name only: columns, comments, clustering and properties are the table's own, in its log
                # (declaring them again made Delta compare each with the log: ~0.25 s a table, 5 s a registration)
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} USING DELTA LOCATION '{path}'")
            else:
                self.spark.sql(f"CREATE TABLE {self.table_name(spec)} {_declared(spec, path)}")
            self.spark.conf.set(marker, path)

    def define_views(self, statements: list[str]) -> None:
        """Run `CREATE OR REPLACE VIEW` statements (the gold views, their names already resolved by `name_of`)."""
        for statement in statements:
            self.spark.sql(statement)


# How many tables are created (a new warehouse) or maintained (`quorumlake maintenance`) at once: each table's commands
# are mostly fixed costs and waiting (planning, listing, a commit), and tables are independent.
TABLES_AT_ONCE = 4

# the session settings whose values Delta writes into a new table's definition
_DELTA_DEFAULTS = "spark.databricks.delta.properties.defaults."


class TableTemplates:
    """The first commit of each table, as Delta wrote it for `CREATE TABLE` on this machine, kept to create the
    same table in a new warehouse without a Spark statement.

    Creating a table is a commit of Delta's: ~0.35 s of a warm session's time per table, 19 tables per new warehouse
    (a cold process's first ~6 s; the test suite makes dozens of warehouses). Its commit holds no path, only the
    table's definition and a few identities, so a table created once is created again by writing the same commit
    (and its checksum) with a new table id, transaction id and time: the file Delta would have written, put in
    place by an atomic link that fails if the commit exists (`IF NOT EXISTS`). A template is kept per definition
    (its DDL) and per Spark and Delta version, the first time a table is created by SQL; `prepare` (the install)
    creates them all once."""

    _COMMIT = "00000000000000000000.json"
    _CHECKSUM = "00000000000000000000.crc"

    def __init__(self, home: Path, settings: str = ""):
        self.home = home
        self.settings = settings

    def _folder(self, spec: TableSpec) -> Path:
        from quorumlake.pipelines.engine.session import engine_versions

        key = f"{engine_versions()}|{self.settings}|{_declared(spec)}"
        return self.home / f"{spec.schema}.{spec.table}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}"

    def create(self, spec: TableSpec, path: str) -> bool:
        """Create the table at `path` from its template; False when there is no template (create it by SQL)."""
        folder = self._folder(spec)
        now, table_id, txn_id = _now_ms(), str(uuid.uuid4()), str(uuid.uuid4())
        try:
            commit = _renewed((folder / self._COMMIT).read_text(encoding="utf-8"), now, table_id, txn_id)
            checksum = _renewed((folder / self._CHECKSUM).read_text(encoding="utf-8"), now, table_id, txn_id)
        except OSError:  # no template yet: created by SQL, then kept
            return False
        except (ValueError, KeyError, TypeError):  # damaged: created by SQL, then kept again
            (folder / self._CHECKSUM).unlink(missing_ok=True)
            return False
        log = Path(path) / "_delta_log"
        log.mkdir(parents=True, exist_ok=True)
        if _link_new(log / self._COMMIT, commit):
            # the checksum of our commit only (another process's commit has its own, or none: both valid)
            _link_new(log / self._CHECKSUM, checksum)
        return True

    def keep(self, spec: TableSpec, path: str) -> None:
        """Keep the first commit of the table just created at `path` as its template (best effort)."""
        folder, log = self._folder(spec), Path(path) / "_delta_log"
        if (folder / self._CHECKSUM).is_file() or (log / "00000000000000000001.json").exists():
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in (self._COMMIT, self._CHECKSUM):  # the checksum last: a template is whole once it is there
                partial = folder / f"{name}.{os.getpid()}.{uuid.uuid4().hex}.partial"
                shutil.copyfile(log / name, partial)
                os.replace(partial, folder / name)
        except OSError:
            return


def _renewed(text: str, now_ms: int, table_id: str, txn_id: str) -> str:
    """A template's commit or checksum (JSON lines) with a new table id, transaction id and creation time."""
    if '"metaData"' not in text and '"metadata"' not in text:
        raise ValueError("not the first commit of a table")
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = now_ms
            action["commitInfo"]["txnId"] = txn_id
        for key in ("metaData", "metadata"):  # the commit's action, the checksum's field
            if key in action:
                action[key]["id"] = table_id
                action[key]["createdTime"] = now_ms
        if "txnId" in action:
            action["txnId"] = txn_id
        lines.append(json.dumps(action, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def _link_new(target: Path, text: str) -> bool:
    """Write `text` to `target` only if it does not exist, atomically (a complete file or none); False if it did."""
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    partial.write_text(text, encoding="utf-8")
    try:
        os.link(partial, target)
    except FileExistsError:
        return False
    finally:
        partial.unlink()
    return True


def _now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


def registry_fingerprint(specs: tuple[TableSpec, ...]) -> str:
    text = "\n".join(f"{s.name}|{s.ddl}|{s.comment}|{s.properties}|{s.partitioned_by}|{s.clustering}" for s in specs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _declared(spec: TableSpec, location: str | None = None) -> str:
    """What CREATE TABLE says after the table's name: its columns, layout, location (if given), comment and
    properties."""
    where = f" LOCATION '{location}'" if location else ""
    comment = sql_string(spec.comment)
    return f"({spec.ddl}) USING DELTA{_partitioning(spec)}{where} COMMENT '{comment}'{_properties(spec)}"


def _partitioning(spec: TableSpec) -> str:
    """PARTITIONED BY, or the liquid-clustering keys the table declares (`CLUSTER BY`: compaction and OPTIMIZE keep
    rows of one cluster and time range in the same files, which the bounded reads and MERGEs skip by)."""
    if spec.partitioned_by:
        return f" PARTITIONED BY ({', '.join(spec.partitioned_by)})"
    return f" CLUSTER BY ({', '.join(spec.clustering)})" if spec.clustering else ""


def _properties(spec: TableSpec) -> str:
    if not spec.properties:
        return ""
    return " TBLPROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in spec.properties) + ")"


def absolute(path: str) -> str:
    if "://" in path or path.startswith(("dbfs:", "/Volumes/")):
        return path.rstrip("/")
    return str(Path(path).absolute())
