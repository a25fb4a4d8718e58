"""A local session's Py4J keeps the answers of its name lookups: a PySpark function call is one request to the JVM,
not three; what may change (a static field's value, a failed lookup, a class name the JVM cannot see yet) is asked
again each time."""

from __future__ import annotations

import contextlib

import pytest
from chispa import assert_df_equality
from py4j.protocol import Py4JError
from pyspark.sql import functions as F

from quorumlake.pipelines.engine.jvm_lookups import remember_lookups


@contextlib.contextmanager
def requests_to_the_jvm(spark):
    """The Py4J commands this thread sends while the block runs (the real client's, counted on their way)."""
    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    real = client.send_command

    def counting(command, *args, **kwargs):
        sent.append(command)
        return real(command, *args, **kwargs)

    client.send_command = counting
    try:
        yield sent
    finally:
        del client.send_command  # the class's method again


def _reflection(sent: list[str]) -> list[str]:
    return [c for c in sent if c.startswith("r\n")]


def test_the_suite_s_local_session_remembers_lookups(spark):
    assert remember_lookups()  # installed by get_spark; installing again changes nothing
    assert remember_lookups()


def test_a_pyspark_function_call_is_one_request_once_its_method_was_looked_up(spark):
    F.coalesce(F.col("a"), F.lit(1))  # first use: the class and methods are looked up
    with requests_to_the_jvm(spark) as sent:
        for i in range(20):
            F.coalesce(F.col(f"a{i}"), F.lit(i))
    assert _reflection(sent) == []
    calls = [c for c in sent if c.startswith("c\nz:org.apache.spark.sql.functions\n")]
    assert len(calls) == 3 * 20  # col, lit and coalesce: one request each


def test_columns_built_from_remembered_methods_compute_the_same_rows(spark):
    df = spark.createDataFrame([(1, None), (2, "x")], "n INT, s STRING")
    built = df.select(
        (F.col("n") * 2).alias("twice"), F.coalesce(F.col("s"), F.lit("-")).alias("s"), F.upper(F.col("s")).alias("u")
    )
    expected = spark.createDataFrame([(2, "-", None), (4, "x", "X")], "twice INT, s STRING, u STRING")
    assert_df_equality(built, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_static_field_is_read_again_each_time(spark):
    integer = spark.sparkContext._jvm.java.lang.Integer
    assert integer.MAX_VALUE == 2147483647
    with requests_to_the_jvm(spark) as sent:
        assert integer.MAX_VALUE == 2147483647
    assert len(_reflection(sent)) == 1
    assert "MAX_VALUE" not in integer.__dict__.get("_quorumlake_lookups", {})


def test_a_failed_lookup_fails_again_and_is_not_kept(spark):
    integer = spark.sparkContext._jvm.java.lang.Integer
    for _ in range(2):
        with requests_to_the_jvm(spark) as sent, pytest.raises(Py4JError):
            _ = integer.noSuchMethodHere
        assert len(_reflection(sent)) == 1


def test_a_class_name_the_jvm_cannot_see_is_asked_again(spark):
    jvm = spark.sparkContext._jvm
    _ = jvm.NoSuchClassHere  # answered as a package: a later import could make it a class
    with requests_to_the_jvm(spark) as sent:
        _ = jvm.NoSuchClassHere
    assert len(_reflection(sent)) == 1
    # a fully qualified class and its static method are asked once
    getattr(jvm, "org.apache.spark.api.python.PythonUtils").toSeq([])
    with requests_to_the_jvm(spark) as sent:
        assert getattr(jvm, "org.apache.spark.api.python.PythonUtils").toSeq([]).size() == 0
    assert _reflection(sent) == []
