"""The query sandbox: a step reads only its inputs and earlier steps, on the shared
SparkSession (conftest_spark.py).

Each escape attempt goes through ``check_query`` as a plan would run it, and must come
back as a failed check whose error gives the reason. The session is given things worth
stealing first: a temporary view and a global temporary view that are not inputs, a
catalog table over a file, a Python UDF, and a file with a secret in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reconciler.engine.query_check import check_query
from reconciler.engine.sandbox import SandboxError, check_plan
from reconciler.odf.models import SqlQueryStep, TransformSql
from reconciler.plan.model import Column, QueryCheck

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ORDERS = (
    Column("offset", "bigint", False),
    Column("event_time", "timestamp", True),
    Column("order_id", "bigint", False),
    Column("customer_id", "bigint", True),
    Column("amount", "decimal(12,2)", True),
    Column("payload", "string", True),
)
CUSTOMERS = (
    Column("customer_id", "bigint", False),
    Column("name", "string", True),
)
INPUTS = {"orders": ORDERS, "com.acme.customers": CUSTOMERS}

SECRET = "TOPSECRET-4f1c"
NOT_A_QUERY = "only a query (SELECT, WITH, VALUES, TABLE) may be written here; Spark would execute this statement"
NOT_FOUND = "[TABLE_OR_VIEW_NOT_FOUND]"
SECRET_VIEW = "not allowed: reads `secret`, which is not an input"
GLOBAL_VIEW = "not allowed: reads `global_temp`.`gsecret`, which is not an input"
REFLECT = "('java.lang.System', 'getProperty', 'user.home')"


def sql(query: str | None = None, *steps: tuple[str, str]) -> TransformSql:
    queries = [SqlQueryStep(alias=alias, query=q) for alias, q in steps] or None
    return TransformSql(engine="spark", query=query, queries=queries)


@pytest.fixture(scope="module")
def bait(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Things in the session and on disk a query must not reach; the folder holding them."""
    folder = tmp_path_factory.mktemp("bait")
    (folder / "secret.csv").write_text(f"{SECRET},x\n1,2\n")
    pq.write_table(pa.table({"id": [1]}), folder / "secret.parquet")
    spark.range(3).createOrReplaceTempView("secret")
    spark.range(3).createOrReplaceGlobalTempView("gsecret")
    spark.catalog.createTable(
        "sandbox_secret", path=str(folder / "secret.parquet"), source="parquet"
    )
    spark.udf.register("sneaky", lambda x: x)
    try:
        yield folder
    finally:
        spark.catalog.dropTempView("secret")
        spark.catalog.dropGlobalTempView("gsecret")
        spark.sql("DROP TABLE IF EXISTS sandbox_secret")
        spark.sql("DROP TEMPORARY FUNCTION IF EXISTS sneaky")


# (query, fragment of the error). {bait} is the bait folder. Statements are refused from
# their parse; paths and unknown table functions are unknown to the analyser, as the
# session does not run SQL on files; the rest is refused from the analysed plan.
ESCAPES: dict[str, tuple[str, str]] = {
    # statements Spark would execute
    "create table over a location": (
        "CREATE TABLE t USING csv LOCATION '{bait}' AS SELECT 1",
        NOT_A_QUERY,
    ),
    "create temp view": (
        "CREATE TEMPORARY VIEW orders AS SELECT * FROM secret",
        NOT_A_QUERY,
    ),
    "insert": ("INSERT INTO orders SELECT * FROM orders", NOT_A_QUERY),
    "insert overwrite directory": (
        "INSERT OVERWRITE DIRECTORY '{bait}/out' USING parquet SELECT 1 AS one",
        NOT_A_QUERY,
    ),
    "load data": (
        "LOAD DATA LOCAL INPATH '{bait}/secret.csv' INTO TABLE sandbox_secret",
        NOT_A_QUERY,
    ),
    "drop table": ("DROP TABLE sandbox_secret", NOT_A_QUERY),
    "set": ("SET spark.sql.runSQLOnFiles=true", NOT_A_QUERY),
    "reset": ("RESET", NOT_A_QUERY),
    "use": ("USE global_temp", NOT_A_QUERY),
    "add jar": ("ADD JAR {bait}/evil.jar", NOT_A_QUERY),
    "create function using jar": (
        "CREATE TEMPORARY FUNCTION evil AS 'com.evil.Udf' USING JAR '{bait}/evil.jar'",
        NOT_A_QUERY,
    ),
    "cache": ("CACHE TABLE orders", NOT_A_QUERY),
    "uncache": ("UNCACHE TABLE orders", NOT_A_QUERY),
    "refresh": ("REFRESH TABLE sandbox_secret", NOT_A_QUERY),
    "msck": ("MSCK REPAIR TABLE sandbox_secret", NOT_A_QUERY),
    "analyze": ("ANALYZE TABLE sandbox_secret COMPUTE STATISTICS", NOT_A_QUERY),
    "explain": ("EXPLAIN SELECT * FROM secret", NOT_A_QUERY),
    "describe": ("DESCRIBE secret", NOT_A_QUERY),
    "show tables": ("SHOW TABLES", NOT_A_QUERY),
    "execute immediate": ("EXECUTE IMMEDIATE 'DROP TABLE sandbox_secret'", NOT_A_QUERY),
    "sql script": ("BEGIN\n  DROP TABLE sandbox_secret;\nEND", NOT_A_QUERY),
    "statement behind a comment": ("-- SELECT 1\nDROP TABLE sandbox_secret", NOT_A_QUERY),
    "statement behind a block comment": (
        "/* SELECT * FROM orders; */ DROP TABLE sandbox_secret",
        NOT_A_QUERY,
    ),
    "second statement": ("SELECT 1 AS one; DROP TABLE sandbox_secret", "[PARSE_SYNTAX_ERROR]"),
    # files and table functions that would read them
    "parquet path": ("SELECT * FROM parquet.`{bait}/secret.parquet`", NOT_FOUND),
    "csv path in a CTE": (
        "WITH x AS (SELECT * FROM csv.`{bait}/secret.csv`) SELECT * FROM x",
        NOT_FOUND,
    ),
    "file in a WHERE subquery": (
        "SELECT * FROM orders WHERE order_id IN (SELECT * FROM text.`{bait}/secret.csv`)",
        NOT_FOUND,
    ),
    "file in a SELECT subquery": (
        "SELECT (SELECT max(value) FROM text.`{bait}/secret.csv`) AS v FROM orders",
        NOT_FOUND,
    ),
    "join with a file": (
        "SELECT * FROM orders o JOIN json.`{bait}/secret.csv` j ON o.order_id = j.id",
        NOT_FOUND,
    ),
    "sampled file": ("SELECT * FROM csv.`{bait}/secret.csv` TABLESAMPLE (50 PERCENT)", NOT_FOUND),
    "read_files": (
        "SELECT * FROM read_files('{bait}/secret.csv')",
        "[UNRESOLVABLE_TABLE_VALUED_FUNCTION]",
    ),
    "jdbc table function": (
        "SELECT * FROM jdbc('jdbc:h2:mem:x', 'users')",
        "[UNRESOLVABLE_TABLE_VALUED_FUNCTION]",
    ),
    "python worker logs": ("SELECT * FROM python_worker_logs()", "[FEATURE_NOT_ENABLED]"),
    # the session's other views and tables
    "temp view": ("SELECT * FROM secret", SECRET_VIEW),
    "TABLE of a temp view": ("TABLE secret", SECRET_VIEW),
    "upper-case temp view": ("SELECT * FROM SECRET", SECRET_VIEW),
    "IDENTIFIER-built name": ("SELECT * FROM IDENTIFIER('sec' || 'ret')", SECRET_VIEW),
    "global temp view": ("SELECT * FROM global_temp.gsecret", GLOBAL_VIEW),
    "catalog table": (
        "SELECT * FROM sandbox_secret",
        "not allowed: reads table `spark_catalog`.`default`.`sandbox_secret`, which is not an input",
    ),
    "qualified catalog table": (
        "SELECT * FROM spark_catalog.default.sandbox_secret",
        "not allowed: reads table `spark_catalog`.`default`.`sandbox_secret`, which is not an input",
    ),
    "join with a view": (
        "SELECT * FROM orders o JOIN secret s ON o.order_id = s.id",
        SECRET_VIEW,
    ),
    "union with a view": (
        "SELECT order_id FROM orders UNION ALL SELECT id FROM secret",
        SECRET_VIEW,
    ),
    "IN subquery": ("SELECT * FROM orders WHERE order_id IN (SELECT id FROM secret)", SECRET_VIEW),
    "scalar subquery": ("SELECT (SELECT max(id) FROM secret) AS m FROM orders", SECRET_VIEW),
    "EXISTS subquery": (
        "SELECT * FROM orders WHERE EXISTS (SELECT 1 FROM global_temp.gsecret)",
        GLOBAL_VIEW,
    ),
    "lateral subquery": ("SELECT * FROM orders, LATERAL (SELECT * FROM secret)", SECRET_VIEW),
    "sampled view": ("SELECT * FROM secret TABLESAMPLE (50 PERCENT)", SECRET_VIEW),
    "CTE named like an input": (
        "WITH orders AS (SELECT * FROM secret) SELECT * FROM orders",
        SECRET_VIEW,
    ),
    "subquery aliased like an input": (
        "SELECT * FROM (SELECT * FROM secret) AS orders",
        SECRET_VIEW,
    ),
    "window over a view": (
        "SELECT id, row_number() OVER (ORDER BY id) AS n FROM secret",
        SECRET_VIEW,
    ),
    # Java reflection, however spelt and wherever put
    "reflect": (
        "SELECT reflect('java.lang.Runtime', 'getRuntime') AS r",
        "calls Java reflection (reflect)",
    ),
    "java_method": (
        "SELECT java_method('java.lang.System', 'exit', 0) AS r",
        "calls Java reflection (java_method)",
    ),
    "try_reflect": (f"SELECT try_reflect{REFLECT} AS r", "calls Java reflection (try_reflect)"),
    "mixed-case reflect": (f"SELECT ReFlEcT{REFLECT} AS r", "calls Java reflection (reflect)"),
    "qualified reflect": (
        f"SELECT system.builtin.reflect{REFLECT} AS r",
        "calls Java reflection (reflect)",
    ),
    "IDENTIFIER('java_method')": (
        f"SELECT IDENTIFIER('java_method'){REFLECT} AS r",
        "calls Java reflection (java_method)",
    ),
    "IDENTIFIER-built function name": (
        f"SELECT IDENTIFIER('ref' || 'lect'){REFLECT} AS r",
        "names a function with IDENTIFIER() over an expression",
    ),
    "reflect in a LATERAL VIEW": (
        f"SELECT x FROM orders LATERAL VIEW explode(array(reflect{REFLECT})) t AS x",
        "calls Java reflection (reflect)",
    ),
    "reflect in a lambda": (
        f"SELECT transform(array(1), x -> reflect{REFLECT}) AS r",
        "calls Java reflection (reflect)",
    ),
    "reflect in an unused CTE": (
        f"WITH r AS (SELECT reflect{REFLECT} AS v) SELECT 1 AS one",
        "calls Java reflection (reflect)",
    ),
    "reflect in a subquery": (
        f"SELECT * FROM orders WHERE payload IN (SELECT java_method{REFLECT})",
        "calls Java reflection (java_method)",
    ),
    "reflect as a table function argument": (
        f"SELECT * FROM explode(array(reflect{REFLECT}))",
        "calls Java reflection (reflect)",
    ),
    "reflect in VALUES": (
        f"VALUES (try_reflect{REFLECT})",
        "calls Java reflection (try_reflect)",
    ),
    # programs run by Spark's script transformation
    "TRANSFORM USING": (
        "SELECT TRANSFORM(order_id) USING 'cat {bait}/secret.csv' AS (line) FROM orders",
        "not allowed: runs an external program (TRANSFORM ... USING 'cat {bait}/secret.csv')",
    ),
    "MAP USING in a CTE": (
        "WITH m AS (MAP order_id USING 'sh -c id' AS (line) FROM orders) SELECT * FROM m",
        "not allowed: runs an external program (TRANSFORM ... USING 'sh -c id')",
    ),
    "REDUCE USING in a subquery": (
        "SELECT * FROM orders WHERE payload IN (REDUCE payload USING 'env' AS (v) FROM orders)",
        "not allowed: runs an external program (TRANSFORM ... USING 'env')",
    ),
    # a recursion let go deeper than Spark's own limit: only its data would end it
    "recursion past the limit": (
        "WITH RECURSIVE r(n) MAX RECURSION LEVEL 100000000 AS"
        " (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000000) SELECT n FROM r",
        "not allowed: sets MAX RECURSION LEVEL 100000000: a recursive WITH may go 1 to 100"
        " levels deep, Spark's own limit, so that a run ends",
    ),
    "recursion level zero": (
        "WITH RECURSIVE r(n) MAX RECURSION LEVEL 0 AS"
        " (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r",
        "not allowed: sets MAX RECURSION LEVEL 0: a recursive WITH may go 1 to 100",
    ),
    # a function the session has but the manifest does not define
    "session UDF": (
        "SELECT sneaky(order_id) AS s FROM orders",
        "not allowed: calls user-defined function `sneaky`",
    ),
}


@pytest.mark.parametrize(("query", "fragment"), ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_is_refused(spark: SparkSession, bait: Path, query: str, fragment: str) -> None:
    check = check_query(spark, "acme.out", INPUTS, sql(query.format(bait=bait)))
    assert not check.ok
    assert check.error is not None
    assert check.error.startswith("`query`: ")
    assert fragment.format(bait=bait) in check.error
    assert SECRET not in check.error


def test_escapes_run_nothing_and_change_nothing(spark: SparkSession, bait: Path) -> None:
    assert len(ESCAPES) >= 30
    tracker = spark.sparkContext.statusTracker()
    before = tracker.getJobIdsForGroup(None)
    for query, _ in ESCAPES.values():
        assert not check_query(spark, "acme.out", INPUTS, sql(query.format(bait=bait))).ok
    assert tracker.getJobIdsForGroup(None) == before
    assert spark.conf.get("spark.sql.runSQLOnFiles") == "false"
    assert spark.catalog.tableExists("sandbox_secret")
    assert spark.catalog.tableExists("secret")
    assert not spark.catalog.functionExists("evil")
    assert not (bait / "out").exists()
    assert spark.catalog.currentDatabase() == "default"


def test_escape_in_an_earlier_step_names_that_step(spark: SparkSession, bait: Path) -> None:
    transform = sql("SELECT * FROM stolen", ("stolen", "SELECT *\nFROM orders\nJOIN secret"))
    check = check_query(spark, "acme.out", INPUTS, transform)
    assert check == QueryCheck(
        dataset="acme.out", ok=False, error=f"step `stolen`: {SECRET_VIEW}", line=3, step="stolen"
    )


def test_reflection_error_gives_its_line(spark: SparkSession) -> None:
    query = f"SELECT\n  order_id,\n  reflect{REFLECT} AS r\nFROM orders"
    check = check_query(spark, "acme.out", INPUTS, sql(query))
    assert check == QueryCheck(
        dataset="acme.out",
        ok=False,
        error="`query`: not allowed: calls Java reflection (reflect)",
        line=3,
        step="output",
    )


def test_a_later_step_may_not_read_a_step_that_follows_it(spark: SparkSession) -> None:
    """Views are allowed as they are registered: a step cannot see ahead."""
    transform = sql("SELECT * FROM b", ("a", "SELECT * FROM b"), ("b", "SELECT 1 AS one"))
    check = check_query(spark, "acme.out", INPUTS, transform)
    assert check.error == (
        "step `a`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `b` cannot be found:"
        " this step may read `orders`, `com.acme.customers`"
    )


def test_dotted_alias_cannot_be_mistaken_for_a_global_view(spark: SparkSession, bait: Path) -> None:
    """An input aliased ``global_temp.gsecret`` is one view named so; the unquoted
    two-part name is the global temporary view, which is not an input."""
    inputs = {"global_temp.gsecret": CUSTOMERS}
    quoted = check_query(spark, "acme.out", inputs, sql("SELECT * FROM `global_temp.gsecret`"))
    assert quoted.ok
    unquoted = check_query(spark, "acme.out", inputs, sql("SELECT * FROM global_temp.gsecret"))
    assert unquoted.error == f"`query`: {GLOBAL_VIEW}"


def test_backtick_in_an_alias_does_not_break_quoting(spark: SparkSession, bait: Path) -> None:
    inputs = {"a`b": CUSTOMERS}
    assert check_query(spark, "acme.out", inputs, sql("SELECT name FROM `a``b`")).ok
    check = check_query(spark, "acme.out", inputs, sql("SELECT * FROM `a``b`, secret"))
    assert check.error == f"`query`: {SECRET_VIEW}"


def test_a_csv_path_reveals_nothing_of_the_file(spark: SparkSession, bait: Path) -> None:
    """With a header, schema inference would name a column after the file's first line;
    the session never resolves a path, so the file is not opened."""
    query = f"SELECT * FROM csv.`{bait}/secret.csv`"
    check = check_query(spark, "acme.out", INPUTS, sql(query))
    assert check.error == (
        f"`query`: [TABLE_OR_VIEW_NOT_FOUND] The table or view `csv`.`{bait}/secret.csv`"
        " cannot be found. Verify the spelling and correctness of the schema and catalog."
    )


def test_file_relation_is_refused_even_when_sql_on_files_is_on(
    spark: SparkSession, bait: Path
) -> None:
    """The second line: were the session ever to resolve paths (the reconciler's session
    never does; analysing would then read the file's footer), the plan is refused."""
    path = bait / "secret.parquet"
    spark.conf.set("spark.sql.runSQLOnFiles", "true")
    try:
        check = check_query(spark, "acme.out", INPUTS, sql(f"SELECT * FROM parquet.`{path}`"))
    finally:
        spark.conf.set("spark.sql.runSQLOnFiles", "false")
    assert check.error == f"`query`: not allowed: reads a file relation (file:{path})"
    assert check.line == 1


def test_check_plan_refuses_a_frame_over_files(spark: SparkSession, bait: Path) -> None:
    frame = spark.read.parquet(str(bait / "secret.parquet"))
    with pytest.raises(SandboxError, match=r"^reads a file relation \(file:.*secret\.parquet\)$"):
        check_plan(frame, allowed=())


def test_check_plan_allows_only_the_named_views(spark: SparkSession, bait: Path) -> None:
    frame = spark.sql("SELECT * FROM secret")
    check_plan(frame, allowed=("SeCrEt",))
    with pytest.raises(SandboxError) as refused:
        check_plan(frame, allowed=("orders",))
    assert refused.value.reason == "reads `secret`, which is not an input"
    assert refused.value.line == 1


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (f"SELECT reflect{REFLECT} AS r", "calls Java reflection (reflect)"),
        (f"SELECT IDENTIFIER('ref' || 'lect'){REFLECT} AS r", "calls Java reflection (reflect)"),
        (f"SELECT try_reflect{REFLECT} AS r", "calls Java reflection (try_reflect)"),
        ("SELECT sneaky(1) AS s", "calls user-defined function `sneaky`"),
        (
            "SELECT * FROM range(3) WHERE id IN (SELECT id FROM secret)",
            "reads `secret`, which is not an input",
        ),
    ],
)
def test_analysed_plan_check_stands_alone(
    spark: SparkSession, bait: Path, query: str, reason: str
) -> None:
    """What the parsed-plan check refuses by name, the analysed-plan check refuses too."""
    with pytest.raises(SandboxError) as refused:
        check_plan(spark.sql(query), allowed=("orders",))
    assert refused.value.reason == reason


LEGITIMATE: dict[str, tuple[TransformSql, tuple[Column, ...]]] = {
    "join of two inputs": (
        sql(
            "SELECT o.order_id, c.name FROM orders o"
            " JOIN `com.acme.customers` c ON o.customer_id = c.customer_id"
        ),
        (Column("order_id", "bigint", False), Column("name", "string", True)),
    ),
    "CTE and window": (
        sql(
            "WITH big AS (SELECT * FROM orders WHERE amount > 10)"
            " SELECT order_id, row_number() OVER (PARTITION BY customer_id ORDER BY amount) AS n"
            " FROM big"
        ),
        (Column("order_id", "bigint", False), Column("n", "int", False)),
    ),
    "subqueries over inputs": (
        sql(
            "SELECT order_id, (SELECT count(*) FROM `com.acme.customers`) AS c FROM orders o"
            " WHERE customer_id IN (SELECT customer_id FROM `com.acme.customers`)"
            " AND EXISTS (SELECT 1 FROM `com.acme.customers` c WHERE c.customer_id = o.customer_id)"
        ),
        (Column("order_id", "bigint", False), Column("c", "bigint", True)),
    ),
    "steps reading earlier steps": (
        sql(
            "SELECT name, total FROM totals JOIN named USING (customer_id)",
            ("totals", "SELECT customer_id, sum(amount) AS total FROM orders GROUP BY 1"),
            ("named", "SELECT * FROM `com.acme.customers` WHERE name IS NOT NULL"),
        ),
        (Column("name", "string", True), Column("total", "decimal(22,2)", True)),
    ),
    "names in other cases and by IDENTIFIER": (
        sql(
            "SELECT IDENTIFIER('upper')(name) AS n FROM `COM.ACME.CUSTOMERS`"
            " JOIN IDENTIFIER('ord' || 'ers') USING (customer_id)"
        ),
        (Column("n", "string", True),),
    ),
    "lateral view and lambda over an input": (
        sql(
            "SELECT order_id, x FROM orders"
            " LATERAL VIEW explode(transform(array(1, 2), v -> v * order_id)) t AS x"
        ),
        (Column("order_id", "bigint", False), Column("x", "bigint", False)),
    ),
    "recursive CTE, its limit lowered": (
        sql(
            "WITH RECURSIVE r(n) MAX RECURSION LEVEL 10 AS"
            " (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3)"
            " SELECT n FROM r JOIN orders ON r.n = orders.order_id"
        ),
        (Column("n", "int", True),),
    ),
    "recursive CTE": (
        sql(
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3)"
            " SELECT n FROM r JOIN orders ON r.n = orders.order_id"
        ),
        (Column("n", "int", True),),
    ),
    "VALUES, range() and from_json": (
        sql(
            "SELECT v.a, r.id, from_json('{\"k\": 1}', 'k int') AS j"
            " FROM VALUES (1), (2) AS v(a) JOIN range(10) AS r ON v.a = r.id"
        ),
        (
            Column("a", "int", False),
            Column("id", "bigint", False),
            Column("j", "struct<k:int>", True),
        ),
    ),
}


@pytest.mark.parametrize(("transform", "columns"), LEGITIMATE.values(), ids=LEGITIMATE.keys())
def test_legitimate_query_passes(
    spark: SparkSession, bait: Path, transform: TransformSql, columns: tuple[Column, ...]
) -> None:
    check = check_query(spark, "acme.out", INPUTS, transform)
    assert check == QueryCheck(dataset="acme.out", ok=True, output_schema=columns)
