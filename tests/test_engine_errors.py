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
