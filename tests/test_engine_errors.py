"""Engine errors read in one line, with their cause: what ``describe`` keeps of real
errors raised by Spark's Python workers and by the JVM through py4j."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import SparkSession

from reconciler.engine.errors import describe


def test_a_python_workers_error_shows_its_cause(spark: SparkSession) -> None:
    """A full disk in a task used to read 'An exception was thrown from the Python
    worker:' and nothing more without -v."""

    def full_disk(_: int) -> int:  # nested: the worker gets it by value, not by module
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception) as raised:
        spark.sparkContext.parallelize([1]).map(full_disk).collect()
    assert describe(raised.value) == (
        "PythonException: An exception was thrown from the Python worker: OSError: [Errno 28]"
        " No space left on device"
    )


def test_a_jvm_call_that_failed_shows_the_jvms_exception(spark: SparkSession) -> None:
    with pytest.raises(Exception) as raised:
        spark.sparkContext._jsc.sc().getConf().get("no.such.setting")
    assert re.fullmatch(
        r"Py4JJavaError: An error occurred while calling o\d+\.get: "
        r"java\.util\.NoSuchElementException: no\.such\.setting",
        describe(raised.value),
    )


def test_an_error_that_says_what_it_is_keeps_its_first_line_only(spark: SparkSession) -> None:
    with pytest.raises(Exception) as raised:
        spark.sql("SELECT nope").collect()
    assert describe(raised.value).startswith(
        "AnalysisException: [UNRESOLVED_COLUMN.WITHOUT_SUGGESTION] A column, variable, or"
        " function parameter with name `nope` cannot be resolved."
    )
    assert "\n" not in describe(raised.value)


def test_a_recursion_past_its_limits_is_told_in_advice_that_can_be_followed(
    spark: SparkSession,
) -> None:
    """Spark advises ``MAX RECURSION LEVEL 200``, which the sandbox refuses (at most 100),
    and a larger LIMIT for the row limit; the report says what a query can do instead."""
    deep = "WITH RECURSIVE r(n) MAX RECURSION LEVEL 5 AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"
    with pytest.raises(Exception) as raised:
        spark.sql(f"{deep} SELECT * FROM r").collect()
    assert describe(raised.value).endswith(
        "org.apache.spark.SparkException: [RECURSION_LEVEL_LIMIT_EXCEEDED] a recursive WITH"
        " went 5 levels deep and had not ended: a recursion may go at most 100 levels deep"
        " (MAX RECURSION LEVEL can lower that, not raise it), so make it end sooner, e.g."
        " with a WHERE on a level counter"
    )
    wide = "WITH RECURSIVE r(n) AS (SELECT id FROM range(10) UNION ALL SELECT n + 1 FROM r)"
    spark.conf.set("spark.sql.cteRecursionRowLimit", "50")
    try:
        with pytest.raises(Exception) as raised:
            spark.sql(f"{wide} SELECT * FROM r").collect()
    finally:
        spark.conf.unset("spark.sql.cteRecursionRowLimit")
    assert describe(raised.value).endswith(
        "org.apache.spark.SparkException: [RECURSION_ROW_LIMIT_EXCEEDED] a recursive WITH made"
        " 50 rows and had not ended, the most a recursion may make"
        " (spark.sql.cteRecursionRowLimit): make it end sooner, e.g. with a WHERE on a level"
        " counter"
    )
