"""Spark's variable substitution is off for every query a manifest or a user gives.

By default Spark rewrites ``${env:NAME}``, ``${system:property}`` and ``${spark.key}`` in
SQL text before it parses it, so a query under review could copy the runner's
environment (the scheduled job's credentials) into a committed slice, a plan's error or
a log line. With ``spark.sql.variable.substitute`` fixed off, the text is taken as
written, on every path SQL takes: the plan's check, a derivative's run, a root's
preprocess query and ``reconcile sql``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.config import ConfigError
from reconciler.engine.query_check import apply_transform, check_query
from reconciler.engine.session import FIXED_CONF, SparkSettings
from reconciler.ingest.preprocess import preprocess
from reconciler.inspection.sql import run_sql
from reconciler.odf.models import DatasetVocabulary, TransformSql
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Column

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEMPLATES = ("${env:PATH}", "${system:user.home}", "${spark.sql.session.timeZone}")
QUERY = "SELECT " + ", ".join(f"'{t}' AS c{i}" for i, t in enumerate(TEMPLATES))


def sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


def test_the_setting_is_fixed() -> None:
    assert FIXED_CONF["spark.sql.variable.substitute"] == "false"
    with pytest.raises(ConfigError, match=r"spark\.sql\.variable\.substitute='true'"):
        SparkSettings(conf=(("spark.sql.variable.substitute", "true"),))


def test_a_derivative_run_keeps_the_text(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("x",)], "doc string")
    rows = apply_transform(spark, {"src": frame}, sql(QUERY + " FROM src")).collect()
    assert [tuple(row) for row in rows] == [TEMPLATES]


def test_a_preprocess_query_keeps_the_text(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("x",)], "doc string")
    transform = sql(QUERY + ", CAST('2026-01-01' AS TIMESTAMP) AS event_time FROM input")
    out = preprocess(spark, frame, transform, DatasetVocabulary(), has_read_schema=True)
    assert [tuple(row)[:3] for row in out.collect()] == [TEMPLATES]


def test_reconcile_sql_keeps_the_text(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "odf").mkdir()
    result = run_sql(spark, OdfRepository(tmp_path / "odf"), QUERY)
    assert [tuple(row.values()) for row in result.table.to_pylist()] == [TEMPLATES]


def test_the_plan_check_does_not_read_the_environment(spark: SparkSession) -> None:
    """Unquoted, a substituted value would be named by the error (``TOPSECRET cannot be
    resolved``); taken as written, the ``$`` is a syntax error that shows no value."""
    query = "SELECT ${env:PATH} AS leaked, ${system:user.home} AS home FROM src"
    check = check_query(spark, "acme.out", {"src": (Column("doc", "string"),)}, sql(query))
    assert check.ok is False
    assert check.error is not None
    assert os.environ["PATH"] not in check.error
    assert str(Path.home()) not in check.error
    assert "'$'" in check.error
