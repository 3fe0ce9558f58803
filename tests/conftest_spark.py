"""The shared SparkSession fixture (a pytest plugin loaded by ``conftest.py``).

Starting Spark costs seconds, so the whole test session shares one, started the first
time a test asks for ``spark``; tests that do not ask never start a JVM. Two local
cores and two shuffle partitions match the small machines the tests run on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.engine.session import SparkSettings, get_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEST_SETTINGS = SparkSettings(
    master="local[2]",
    app_name="odf-reconciler-tests",
    conf=(("spark.sql.shuffle.partitions", "2"),),
)


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    """The process's SparkSession, configured as in production but sized for tests."""
    return get_spark(TEST_SETTINGS)
