"""Reads of the lakehouse's tables: whole tables, SQL queries by name, and change feeds."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quorumlake.contract.tables import TableSpec
from quorumlake.pipelines.config import Config
from quorumlake.pipelines.storage.catalog import Catalog


class Reads:
    """Reads of tables, queries and change feeds (a part of `Lakehouse`)."""

    def __init__(self, spark: SparkSession, config: Config, catalog: Catalog):
        self.spark = spark
        self.config = config
        self.catalog = catalog

    def read(self, spec: TableSpec) -> DataFrame:
        if self.config.catalog:
            return self.spark.table(self.catalog.table_name(spec))
        return self.spark.read.format("delta").load(self.catalog.table_path(spec))

    def query(self, sql: str) -> DataFrame:
        """A SQL query over the registered tables and views (`quorumlake sql`, the report, notebooks)."""
        return self.spark.sql(sql)

    def rows(self, sql: str) -> list[dict]:
        """A small query's rows, as dicts."""
        return [row.asDict() for row in self.query(sql).collect()]

    def size_bytes(self, spec: TableSpec) -> int:
        """The bytes of the table's current files (DESCRIBE DETAIL)."""
        return int(self.spark.sql(f"DESCRIBE DETAIL {self.catalog.ref(spec)}").first()["sizeInBytes"] or 0)

    def changes(self, spec: TableSpec, after_version: int, upto_version: int) -> DataFrame:
        """The rows the table gained or changed in versions (after_version, upto_version], as change-data-feed rows
        (`_change_type`); from the start (after_version < 0), the whole table as of upto_version, as inserts."""
        reader = self.spark.read.format("delta")
        if after_version < 0:
            reader = reader.option("versionAsOf", upto_version)
        else:
            reader = (
                reader.option("readChangeFeed", "true")
                .option("startingVersion", after_version + 1)
                .option("endingVersion", upto_version)
            )
        if self.config.catalog:
            df = reader.table(self.catalog.table_name(spec))
        else:
            df = reader.load(self.catalog.table_path(spec))
        if after_version < 0:
            df = df.withColumn("_change_type", F.lit("insert")).withColumn("_commit_version", F.lit(upto_version))
        return df
