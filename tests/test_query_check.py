"""Query validation on a real SparkSession (shared, see conftest_spark.py), and the
session's settings. Tests that must not touch the shared session run in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reconciler.config import ConfigError, RepoConfig
from reconciler.engine import query_check
from reconciler.engine.query_check import check_query, columns_from_schema, tables_read
from reconciler.engine.session import LOG_CONFIG, SparkSettings, spark_started
from reconciler.engine.sql_nesting import too_deep
from reconciler.odf.models import SqlQueryStep, TransformSql
from reconciler.plan.model import Column, QueryCheck
from reconciler.planning.compose import spark_validator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]

ORDERS = (
    Column("offset", "bigint", False),
    Column("op", "int", False),
    Column("system_time", "timestamp", False),
    Column("event_time", "timestamp", True),
    Column("order_id", "bigint", False),
    Column("amount", "decimal(12,2)", True),
)


def sql(query: str | None = None, *steps: tuple[str, str]) -> TransformSql:
    """A Spark transform of aliased ``steps`` followed by ``query``, as manifests write it."""
    queries = [SqlQueryStep(alias=alias, query=q) for alias, q in steps] or None
    return TransformSql(engine="spark", query=query, queries=queries)


def failure(error: str, line: int | None, step: str | None = None) -> QueryCheck:
    return QueryCheck(dataset="acme.out", ok=False, error=error, line=line, step=step)


def test_single_query_gives_output_columns(spark: SparkSession) -> None:
    check = check_query(
        spark,
        "acme.out",
        {"orders": ORDERS},
        sql(
            "SELECT event_time, order_id, amount * 2 AS doubled,"
            " upper(cast(order_id AS string)) AS code FROM orders"
        ),
    )
    assert check == QueryCheck(
        dataset="acme.out",
        ok=True,
        output_schema=(
            Column("event_time", "timestamp", True),
            Column("order_id", "bigint", False),
            Column("doubled", "decimal(14,2)", True),
            Column("code", "string", False),
        ),
    )


def test_steps_read_earlier_steps_by_alias(spark: SparkSession) -> None:
    transform = sql(
        "SELECT count(*) AS n, max(total) AS top FROM totals",
        ("big", "SELECT order_id, amount FROM orders WHERE amount > 100"),
        ("totals", "SELECT order_id, sum(amount) AS total FROM big GROUP BY order_id"),
    )
    check = check_query(spark, "acme.out", {"orders": ORDERS}, transform)
    assert check.output_schema == (
        Column("n", "bigint", False),
        Column("top", "decimal(22,2)", True),
    )


def test_dotted_alias_is_read_with_backticks(spark: SparkSession) -> None:
    check = check_query(
        spark,
        "acme.out",
        {"com.acme.orders": ORDERS},
        sql("SELECT order_id FROM `com.acme.orders`"),
    )
    assert check.output_schema == (Column("order_id", "bigint", False),)


def test_unknown_column_names_it_and_its_line(spark: SparkSession) -> None:
    query = "SELECT\n  order_id,\n  nope\nFROM orders"
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(query))
    assert check == failure(
        "`query`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function"
        " parameter with name `nope` cannot be resolved. Did you mean one of the following?"
        " [`op`, `offset`, `amount`, `order_id`, `event_time`].",
        line=3,
        step="output",
    )


def test_error_in_an_aliased_step_names_the_step(spark: SparkSession) -> None:
    transform = sql(
        "SELECT * FROM ids",
        ("ids", "SELECT order_id\nFROM orders\nWHERE amount > 1\n  AND missing = 2"),
    )
    check = check_query(spark, "acme.out", {"orders": ORDERS}, transform)
    assert check == failure(
        "step `ids`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function"
        " parameter with name `missing` cannot be resolved. Did you mean one of the following?"
        " [`amount`, `offset`, `op`, `order_id`, `event_time`].",
        line=4,
        step="ids",
    )


def test_syntax_error_gives_its_line(spark: SparkSession) -> None:
    query = "SELECT order_id\nFROM orders\nWHERE (amount > 1"
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(query))
    assert check == failure(
        "`query`: [PARSE_SYNTAX_ERROR] Syntax error at or near end of input.",
        line=3,
        step="output",
    )


TOO_COMPLEX = "Spark's parser cannot read a query this deeply nested; split it into steps"


def test_a_query_nested_too_deeply_is_refused_at_its_line_before_spark_parses_it(
    spark: SparkSession,
) -> None:
    """A thousand parentheses overflowed the parser's JVM stack: the plan stopped with a
    StackOverflowError naming no manifest, query or line."""
    query = "SELECT order_id,\n  " + "(" * 1000 + "1" + ")" * 1000 + " AS x\nFROM orders"
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(query))
    assert check == failure(
        f"`query`: parentheses nest more than 200 deep: {TOO_COMPLEX}", 2, "output"
    )
    assert tables_read(spark, query) is None


def test_a_query_that_overflows_sparks_parser_otherwise_is_an_error_of_the_step(
    spark: SparkSession,
) -> None:
    query = "SELECT " + "CASE WHEN true THEN " * 1000 + "1" + " END" * 1000 + " AS x FROM orders"
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(query))
    assert check == failure(f"`query`: {TOO_COMPLEX}", None, "output")
    # the session is still usable afterwards
    assert check_query(spark, "acme.out", {"orders": ORDERS}, sql("SELECT 1 AS x")).ok


TOO_LARGE = (
    "with each WITH name and earlier step it reads replaced by its query, as Spark analyses"
    " it, the query comes to more than 20,000 operators, which would take the engine minutes"
    " or all its memory; read each of them fewer times"
)


def _doubling(levels: int) -> str:
    """WITH queries each reading the one before twice: 2**levels copies of the first."""
    parts = ["c0 AS (SELECT order_id FROM orders)"]
    parts += [
        f"c{i} AS (SELECT order_id FROM c{i - 1} UNION ALL SELECT order_id FROM c{i - 1})"
        for i in range(1, levels + 1)
    ]
    return "WITH " + ",\n".join(parts) + f"\nSELECT order_id FROM c{levels}"


def test_a_query_that_doubles_through_its_with_names_is_refused_before_analysis(
    spark: SparkSession,
) -> None:
    """Twenty-two levels ran the plan's JVM out of memory after a minute and a half,
    with an error naming no dataset; ten are analysed (two seconds)."""
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(_doubling(22)))
    assert check == failure(f"`query`: {TOO_LARGE}", None, "output")
    assert check_query(spark, "acme.out", {"orders": ORDERS}, sql(_doubling(10))).ok
    # Through steps, each reading the one before twice: the same doubling.
    steps = [("s0", "SELECT order_id FROM orders")]
    steps += [
        (f"s{i}", f"SELECT order_id FROM s{i - 1} UNION ALL SELECT order_id FROM s{i - 1}")
        for i in range(1, 22)
    ]
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql("SELECT * FROM s21", *steps))
    assert check == failure(f"step `s11`: {TOO_LARGE}", None, "s11")


def test_nesting_is_counted_outside_strings_identifiers_and_comments() -> None:
    hidden = "(" * 300
    query = (
        f"SELECT '{hidden}', \"{hidden}\", `{hidden}`, 'it\\'s {hidden}' -- {hidden}\n"
        f"/* {hidden} */ (((1))) AS x"
    )
    assert too_deep(query) is None
    assert too_deep(query, limit=2) == 2
    assert too_deep("SELECT\n" + "(" * 201 + "1" + ")" * 201) == 2
    assert too_deep("SELECT " + "(1) + " * 1000 + "1") is None  # siblings do not nest


def test_table_outside_the_inputs_is_not_found(spark: SparkSession) -> None:
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql("SELECT * FROM other"))
    assert check == failure(
        "`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `other` cannot be found:"
        " the query may read `orders`",
        line=1,
        step="output",
    )


def test_a_single_query_is_named_by_its_field_and_the_steps_of_queries_by_theirs(
    spark: SparkSession,
) -> None:
    """A transform written with ``query:`` alone was told as "step `output`", a step its
    author never named; the last step of ``queries:`` is still "step `output`"."""
    steps = TransformSql(engine="spark", queries=[SqlQueryStep(query="SELECT * FROM other")])
    assert check_query(spark, "acme.out", {"orders": ORDERS}, steps) == failure(
        "step `output`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `other` cannot be found:"
        " this step may read `orders`",
        line=1,
        step="output",
    )
    single = TransformSql(engine="spark", query="SELECT *\nFROM orders WHERE nope")
    check = check_query(spark, "acme.out", {"orders": ORDERS}, single)
    assert check.error is not None
    assert check.error.startswith(
        "`query`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function"
        " parameter with name `nope` cannot be resolved."
    )
    assert (check.line, check.step) == (2, "output")


def test_files_cannot_be_read_by_path(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    check = check_query(spark, "acme.out", {}, sql(f"SELECT * FROM parquet.`{path}`"))
    assert check == failure(
        f"`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `parquet`.`{path}` cannot"
        " be found. Verify the spelling and correctness of the schema and catalog.",
        line=1,
        step="output",
    )


@pytest.mark.parametrize(
    "statement",
    ["CREATE TABLE leaked AS SELECT 1 AS one", "SET spark.sql.ansi.enabled=false"],
)
def test_statements_are_refused_without_running(spark: SparkSession, statement: str) -> None:
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql(statement))
    assert check == failure(
        "`query`: only a query (SELECT, WITH, VALUES, TABLE) may be written here;"
        " Spark would execute this statement",
        line=None,
        step="output",
    )
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    assert not spark.catalog.tableExists("leaked")


def test_trailing_semicolon_is_accepted(spark: SparkSession) -> None:
    check = check_query(spark, "acme.out", {}, sql("SELECT 1 AS one;\n"))
    assert check.output_schema == (Column("one", "int", False),)


def test_transform_without_query_fails(spark: SparkSession) -> None:
    check = check_query(spark, "acme.out", {"orders": ORDERS}, sql())
    assert check == failure("the transform has no query", line=None)


def test_unreadable_input_type_names_the_column(spark: SparkSession) -> None:
    check = check_query(
        spark, "acme.out", {"orders": (Column("a", "nosuchtype"),)}, sql("SELECT 1 AS one")
    )
    assert check == failure(
        "input `orders`: column `a` has a type Spark cannot read, 'nosuchtype':"
        " [PARSE_SYNTAX_ERROR] Syntax error at or near end of input.",
        line=None,
    )


def test_decimal_timestamp_and_nested_types_survive(spark: SparkSession) -> None:
    columns = (
        Column("price", "decimal(38,18)", False),
        Column("at", "timestamp", True),
        Column("day", "date", True),
        Column("items", "array<struct<sku:string,qty:int>>", True),
        Column("prices", "map<string,decimal(10,2)>", True),
        Column("detail", "struct<`unit price`:decimal(9,3),tags:array<string>>", False),
    )
    check = check_query(
        spark,
        "acme.out",
        {"nested": columns},
        sql("SELECT *, named_struct('a b', 1) AS q FROM nested"),
    )
    assert check.output_schema == (*columns, Column("q", "struct<`a b`:int>", False))


def test_output_types_read_back_as_input_types(spark: SparkSession) -> None:
    frame = spark.sql(
        "SELECT CAST(1 AS TINYINT) AS t, 1.5D AS d, X'01' AS b, interval '1' day AS i,"
        " map('k', array(CAST(1 AS DECIMAL(5,1)))) AS m"
    )
    columns = columns_from_schema(frame.schema)
    assert columns == (
        Column("t", "tinyint", False),
        Column("d", "double", False),
        Column("b", "binary", False),
        Column("i", "interval day", False),
        Column("m", "map<string,array<decimal(5,1)>>", False),
    )
    check = check_query(spark, "acme.out", {"again": columns}, sql("SELECT * FROM again"))
    assert check.output_schema == columns


def test_views_of_one_check_are_invisible_to_the_next(spark: SparkSession) -> None:
    first = sql("SELECT * FROM tmp", ("tmp", "SELECT order_id FROM orders"))
    assert check_query(spark, "acme.first", {"orders": ORDERS}, first).ok
    for name in ("orders", "tmp"):
        check = check_query(spark, "acme.out", {"other": ORDERS}, sql(f"SELECT * FROM {name}"))
        assert check.error == (
            f"`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `{name}` cannot be"
            " found: the query may read `other`"
        )
    assert {"orders", "tmp", "other"}.isdisjoint(t.name for t in spark.catalog.listTables())


def test_checking_runs_no_spark_job(spark: SparkSession) -> None:
    tracker = spark.sparkContext.statusTracker()
    before = tracker.getJobIdsForGroup(None)
    transform = sql(
        "SELECT order_id, sum(amount) AS total FROM big GROUP BY order_id ORDER BY total",
        ("big", "SELECT * FROM orders WHERE amount > 100"),
    )
    assert check_query(spark, "acme.out", {"orders": ORDERS}, transform).ok
    assert tracker.getJobIdsForGroup(None) == before


def test_session_has_the_reconcilers_settings(spark: SparkSession) -> None:
    assert spark_started()
    conf = {
        key: spark.conf.get(key)
        for key in (
            "spark.sql.session.timeZone",
            "spark.sql.ansi.enabled",
            "spark.sql.parquet.outputTimestampType",
            "spark.sql.shuffle.partitions",
            "spark.ui.enabled",
            "spark.driver.host",
            "spark.master",
        )
    }
    assert conf == {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.master": "local[2]",
    }


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter from the repository root; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_importing_the_session_module_starts_nothing() -> None:
    code = "import reconciler.engine.session as s; print(s.spark_started())"
    assert run_python(code) == "False\n"


def test_missing_java_is_reported_clearly() -> None:
    code = (
        "from reconciler.engine.session import EngineUnavailableError, SparkSettings, get_spark\n"
        "try:\n"
        "    get_spark(SparkSettings())\n"
        "except EngineUnavailableError as e:\n"
        "    print(e)\n"
    )
    no_java = {"PATH": str(Path(sys.executable).parent)}
    assert run_python(code, env=no_java) == (
        "validating queries needs Java 17: install openjdk-17-jre-headless"
        " (or set JAVA_HOME to a Java 17 installation)\n"
    )


def test_settings_come_from_pyproject_then_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.reconciler.spark]\n"
        'master = "spark://cluster:7077"\n'
        'app_name = "nightly"\n'
        "executor_wait = 90\n"
        "[tool.reconciler.spark.conf]\n"
        '"spark.sql.shuffle.partitions" = 16\n'
        'spark.executor.memory = "2g"\n'
        '"spark.sql.adaptive.enabled" = true\n'
    )
    assert SparkSettings.load(tmp_path, environ={}) == SparkSettings(
        master="spark://cluster:7077",
        app_name="nightly",
        executor_wait=90.0,
        conf=(
            ("spark.sql.shuffle.partitions", "16"),
            ("spark.executor.memory", "2g"),
            ("spark.sql.adaptive.enabled", "true"),
        ),
    )
    monkeypatch.setenv("RECONCILER_SPARK_MASTER", "local[3]")
    monkeypatch.setenv("RECONCILER_SPARK_CONF", "spark.executor.memory=4g; spark.extra = a=b ;")
    assert SparkSettings.load(tmp_path) == SparkSettings(
        master="local[3]",
        app_name="nightly",
        executor_wait=90.0,
        conf=(
            ("spark.sql.shuffle.partitions", "16"),
            ("spark.executor.memory", "4g"),
            ("spark.sql.adaptive.enabled", "true"),
            ("spark.extra", "a=b"),
        ),
    )


@pytest.mark.parametrize("value", ["0", "-1", '"5m"', "true", "1e10"])
def test_executor_wait_is_a_number_of_seconds(tmp_path: Path, value: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.reconciler.spark]\nexecutor_wait = {value}\n")
    with pytest.raises(ConfigError) as caught:
        SparkSettings.load(tmp_path, environ={})
    shown = {"true": "True", '"5m"': "'5m'", "1e10": "10000000000.0"}.get(value, value)
    assert str(caught.value) == (
        f"[tool.reconciler.spark] executor_wait must be a number of seconds above 0, got {shown}"
    )


def test_settings_default_without_pyproject(tmp_path: Path) -> None:
    settings = SparkSettings.load(tmp_path, environ={})
    assert settings == SparkSettings(master="local[*]", app_name="odf-reconciler", conf=())
    assert settings.spark_conf() == {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        "spark.ui.enabled": "false",
        "spark.sql.runSQLOnFiles": "false",
        "spark.sql.variable.substitute": "false",
        "spark.executorEnv.PYTHONSAFEPATH": "1",
        "spark.sql.warehouse.dir": f"{tempfile.gettempdir()}/odf-reconciler-{os.getuid()}/spark-warehouse",
    }


def test_fixed_settings_cannot_be_changed() -> None:
    with pytest.raises(ConfigError, match=r"spark\.sql\.session\.timeZone='Europe/Paris'"):
        SparkSettings(conf=(("spark.sql.session.timeZone", "Europe/Paris"),))


def test_malformed_conf_variable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("expected key=value, got 'spark.ui.port'")):
        SparkSettings.load(tmp_path, environ={"RECONCILER_SPARK_CONF": "spark.ui.port"})


@pytest.mark.parametrize(
    ("query", "tables"),
    [
        ("SELECT * FROM `org.example.a`;", {"org.example.a"}),
        (
            "WITH w AS (SELECT * FROM `org.example.a`) SELECT * FROM w JOIN `org.Example.B`"
            " USING (id) WHERE id IN (SELECT id FROM c)",
            {"org.example.a", "w", "org.Example.B", "c"},
        ),
        ("SELECT * FROM org.example.a", {"org.example.a"}),  # three parts, joined
        ("TABLE `x`", {"x"}),
        ("SELECT 1", set()),
        ("SELECT * FROM IDENTIFIER('`org.example.a`')", {"org.example.a"}),  # a literal
        ("SELECT * FROM IDENTIFIER('org.' || 'example.a')", None),  # only analysis can tell
        ("DROP TABLE `org.example.a`", None),  # not a query: the analysis reports it
        ("SELEC 1", None),
    ],
)
def test_tables_read_are_the_names_a_query_gives_from_its_parse_alone(
    spark: SparkSession, query: str, tables: set[str] | None
) -> None:
    found = tables_read(spark, query)
    assert (None if found is None else set(found)) == tables


def test_a_misspelt_input_or_a_dotted_one_left_unquoted_says_what_to_write(
    spark: SparkSession,
) -> None:
    """Spark's advice on schemas and catalogs fits no view; the fix does."""
    inputs = {"orders": ORDERS, "com.acme.orders": ORDERS}
    misspelt = check_query(spark, "acme.out", inputs, sql("SELECT * FROM orderz"))
    assert misspelt.error == (
        "`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `orderz` cannot be"
        " found: did you mean `orders`?"
    )
    for query in ("SELECT * FROM com.acme.orders", "SELECT * FROM acme.orders"):
        unquoted = check_query(spark, "acme.out", inputs, sql(query))
        assert (
            unquoted.error
            == {
                "SELECT * FROM com.acme.orders": (
                    "`query`: a dotted name must be quoted in backticks: `com.acme.orders`"
                ),
                "SELECT * FROM acme.orders": (
                    "`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `acme`.`orders`"
                    " cannot be found. Verify the spelling and correctness of the schema and"
                    " catalog."
                ),
            }[query]
        )


def test_a_query_is_analysed_once_per_process_for_the_same_inputs(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An apply judged by two sets of policies (``--base``, then the checkout's own) made
    two plans, and analysed each changed query twice."""
    calls: list[str] = []
    analyse = query_check.check_query

    def counted(*args: Any) -> QueryCheck:
        calls.append(args[1])
        return analyse(*args)

    monkeypatch.setattr(query_check, "check_query", counted)
    validate = spark_validator(RepoConfig.load(tmp_path))
    query = sql("SELECT order_id FROM orders")
    first = validate("acme.analysed-once", {"orders": ORDERS}, query)
    again = validate("acme.analysed-once", {"orders": ORDERS}, query)
    fewer = validate("acme.analysed-once", {"orders": ORDERS[:-1]}, query)  # other inputs
    assert (first is again, first.ok, fewer.ok) == (True, True, True)
    assert calls == ["acme.analysed-once", "acme.analysed-once"]
