"""Validate a derivative's SQL against its inputs' schemas without reading any data.

The plan must tell a reviewer whether a new or changed query works and what columns it
produces, before anything is applied and without access to the data. Spark's analyzer
answers both from schemas alone: each input is registered as an *empty* DataFrame of
its schema, each step is analysed (``spark.sql`` plus ``df.schema``), and no action is
ever run, so no job is scheduled and no file is read.

Views follow the Spark engine (ENGINE-SEMANTICS §2.2): each input is a temporary view
named by its alias, each aliased step becomes a view of that name, and the last step is
the output. Aliases are ODF dataset names such as ``com.acme.orders``; Spark 4 parses
the name given to ``createOrReplaceTempView`` as an identifier and rejects an unquoted
dotted name (TEMP_VIEW_NAME_TOO_MANY_NAME_PARTS), so views are registered under the
backtick-quoted alias, and queries must quote such names as well:
``SELECT * FROM `com.acme.orders```, exactly as with kamu's engine.

Queries come from unreviewed pull requests, so each step is sandboxed (``sandbox``):
a statement that is not a query is refused from its parse alone, and a query whose
analysed plan reads anything but the inputs and earlier steps, or calls into the JVM,
is refused before any of it runs. Both are reported as the step's error. What in the
steps is non-deterministic is reported beside the output columns (``nondeterministic``),
for the plan's policy to judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import AnalysisException, ParseException
from pyspark.errors.exceptions.captured import capture_sql_exception
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from reconciler.engine.determinism import Nondeterminism
from reconciler.engine.errors import first_line
from reconciler.engine.query_size import MAX_INLINED, step_size
from reconciler.engine.sandbox import SandboxError, check_parsed, check_plan, tables_named
from reconciler.engine.sql_nesting import MAX_NESTING, too_deep
from reconciler.engine.view_hints import with_view_hint
from reconciler.odf.models import TransformSql
from reconciler.plan.model import Column, QueryCheck

OUTPUT_STEP = "output"  # how errors name the last, alias-less step
QUERY_FIELD = "`query`"
"""How messages name the step of a transform written with ``query:``: it has no step name
the user wrote, and ``step `output``` named one they could not find."""
NOT_A_QUERY = "only a query (SELECT, WITH, VALUES, TABLE)"  # how a statement's refusal begins

_TRAILING_SEMICOLONS = re.compile(r"[\s;]+\Z")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class QueryError(Exception):
    """A step (or an input's schema) the engine rejected, with its message and line."""

    def __init__(self, message: str, line: int | None = None, step: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.step = step


def check_query(
    spark: SparkSession,
    dataset: str,
    inputs: Mapping[str, Sequence[Column]],
    transform: TransformSql,
) -> QueryCheck:
    """Analyse ``transform`` over empty inputs and give its output columns or the error.

    The temporary views are dropped afterwards, so that the next check (of another
    dataset, with other inputs) cannot resolve a name this one registered. Checks share
    the session's view namespace and so must not run concurrently.
    """
    try:
        frames = {alias: _empty_input(spark, alias, columns) for alias, columns in inputs.items()}
        output, nondeterministic = _analyse_transform(spark, frames, transform)
    except QueryError as failed:
        return QueryCheck(
            dataset=dataset, ok=False, error=failed.message, line=failed.line, step=failed.step
        )
    return QueryCheck(
        dataset=dataset,
        ok=True,
        output_schema=columns_from_schema(output.schema),
        nondeterministic=nondeterministic,
    )


def tables_read(spark: SparkSession, query: str) -> frozenset[str] | None:
    """The tables a query names, from its parse alone (``sandbox.tables_named``); None
    when that cannot tell (a table named by an expression) or the text is not a single
    query, whose error the analysis reports."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    query = _TRAILING_SEMICOLONS.sub("", query)
    if too_deep(query) is not None:
        return None
    try:
        plan = capture_sql_exception(parser.parseQuery)(query)
    except ParseException:
        return None
    return tables_named(plan, spark.sparkContext._jvm)


class ViewHint(Protocol):
    """Rewrites an engine message given the views the step could read (``view_hints``);
    ``reader`` names the step in the hint's words (``this step``, ``the query``)."""

    def __call__(self, message: str, views: Sequence[str], /, *, reader: str) -> str: ...


def apply_transform(
    spark: SparkSession,
    inputs: Mapping[str, DataFrame],
    transform: TransformSql,
    hint: ViewHint = with_view_hint,
) -> DataFrame:
    """The transform's output over ``inputs``, each readable as a view under its alias.

    Register the inputs, then analyse the steps in order; the last one is the output.
    The views are dropped before returning: the returned DataFrame keeps the analysed
    plans it was built from, and the next transform (of another dataset, with other
    inputs) must not resolve a name this one registered. Transforms share the session's
    view namespace and so must not run concurrently.

    Non-deterministic functions are not refused here: the plan judges them by policy
    before anything is committed, and ``reconcile sql`` commits nothing. ``hint`` says
    what to write for a view the query cannot find (``reconcile sql`` knows more names
    than the views it registered).
    """
    return _analyse_transform(spark, inputs, transform, hint)[0]


def _analyse_transform(
    spark: SparkSession,
    inputs: Mapping[str, DataFrame],
    transform: TransformSql,
    hint: ViewHint = with_view_hint,
) -> tuple[DataFrame, tuple[str, ...]]:
    """``apply_transform``'s output, and what in its steps is non-deterministic, each
    as ``rand() in step `daily` (line 2)`` (``in `query```, written with ``query:``)."""
    views: list[str] = []
    sizes: dict[str, int] = {}  # each earlier step's inlined size (``query_size``)
    nondeterministic: list[str] = []
    try:
        for alias, frame in inputs.items():
            _register(frame, alias, views)
        output: DataFrame | None = None
        steps = transform.normalized().queries or []
        for number, step in enumerate(steps, 1):
            label = step.alias or OUTPUT_STEP
            named = _step_words(transform, number == len(steps), label)
            output, found, size = _analyse_step(spark, label, named, step.query, views, hint, sizes)
            nondeterministic += [_in_step(named, finding) for finding in found]
            if step.alias is not None:
                _register(output, step.alias, views)
                sizes[step.alias] = size
    finally:
        for name in views:
            spark.catalog.dropTempView(name)
    if output is None:
        raise QueryError("the transform has no query")
    return output, tuple(nondeterministic)


def _step_words(transform: TransformSql, last: bool, label: str) -> str:
    """How messages name a step: ``QUERY_FIELD`` for the one written as ``query:`` (which
    ``normalized`` makes the last), ``step `daily``` for one of ``queries:``."""
    return QUERY_FIELD if last and transform.query is not None else f"step `{label}`"


def _in_step(named: str, finding: Nondeterminism) -> str:
    where = f" (line {finding.line})" if finding.line is not None else ""
    return f"{finding.what} in {named}{where}"


def _empty_input(spark: SparkSession, alias: str, columns: Sequence[Column]) -> DataFrame:
    """A DataFrame with the input's schema and no rows.

    Types are parsed by Spark's own DDL parser, so the check accepts exactly the type
    spellings the engine does; nullability is kept because it shapes the output's.
    """
    schema = StructType([_field(alias, c) for c in columns])
    return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)


def _field(alias: str, column: Column) -> StructField:
    try:
        data_type = DataType.fromDDL(column.type)
    except ParseException as e:
        raise QueryError(
            f"input `{alias}`: column `{column.name}` has a type Spark cannot read,"
            f" {column.type!r}: {_engine_message(e)}"
        ) from None
    return StructField(column.name, data_type, column.nullable)


def _register(frame: DataFrame, alias: str, views: list[str]) -> None:
    """Make ``frame`` readable as `` `alias` `` and remember the view for dropping.

    ``createOrReplaceTempView`` parses its argument, hence the quoting; ``dropTempView``
    takes the view's name as it is, hence the raw alias in ``views``.
    """
    frame.createOrReplaceTempView(_quote(alias))
    views.append(alias)


def _analyse_step(
    spark: SparkSession,
    label: str,
    named: str,
    query: str,
    views: Sequence[str],
    hint: ViewHint,
    sizes: Mapping[str, int],
) -> tuple[DataFrame, tuple[Nondeterminism, ...], int]:
    """Parse, sandbox and analyse one step, which may read only ``views``; the step's
    frame, what in it is non-deterministic, and its size with every reference replaced
    (``query_size``; ``sizes``, the earlier steps'). ``label`` is the step's name in the
    error, ``named`` the words its messages begin with (``step `daily``` or ``QUERY_FIELD``).

    ``spark.sql`` analyses a query eagerly (that is where unknown columns and tables are
    found) but runs no job until an action; the sandbox checks the parsed plan before
    analysis and the analysed plan after it, so a refused step never runs.
    """
    query = _TRAILING_SEMICOLONS.sub("", query)  # accepted by spark.sql, not by the query rule
    if (deep := too_deep(query)) is not None:
        message = f"{named}: parentheses nest more than {MAX_NESTING} deep: {_TOO_COMPLEX}"
        raise QueryError(message, deep, label)
    try:
        parsed = _require_query(spark, label, named, query)
        jvm = spark.sparkContext._jvm
        size, measured = step_size(parsed, jvm, query, sizes)
        if measured and size > MAX_INLINED:
            raise QueryError(f"{named}: {_TOO_LARGE}", None, label)
        check_parsed(parsed, jvm)
        frame = spark.sql(query)
        nondeterministic = check_plan(frame, views)
    except Py4JJavaError as e:
        if _out_of_memory(e):
            raise QueryError(f"{named}: {_NO_MEMORY}", None, label) from None
        if not _stack_overflow(e):
            raise
        raise QueryError(f"{named}: {_TOO_COMPLEX}", None, label) from None
    except (AnalysisException, ParseException) as e:
        reader = "the query" if named == QUERY_FIELD else "this step"
        message = f"{named}: {hint(_engine_message(e), views, reader=reader)}"
        raise QueryError(message, _engine_line(e, query), label) from None
    except SandboxError as e:
        raise QueryError(f"{named}: not allowed: {e.reason}", e.line, label) from None
    return frame, nondeterministic, size


_TOO_COMPLEX = "Spark's parser cannot read a query this deeply nested; split it into steps"
_TOO_LARGE = (
    f"with each WITH name and earlier step it reads replaced by its query, as Spark"
    f" analyses it, the query comes to more than {MAX_INLINED:,} operators, which would"
    " take the engine minutes or all its memory; read each of them fewer times"
)
_NO_MEMORY = "the engine ran out of memory analysing the query; make it smaller"


def _out_of_memory(error: Py4JJavaError) -> bool:
    return "java.lang.OutOfMemoryError" in str(error.java_exception)


def _stack_overflow(error: Py4JJavaError) -> bool:
    """Whether the JVM ran out of stack: Spark turns most such overflows into its own
    FAILED_TO_PARSE_TOO_COMPLEX, but not every one."""
    return "java.lang.StackOverflowError" in str(error.java_exception)


def _require_query(spark: SparkSession, label: str, named: str, query: str) -> Any:
    """Refuse anything but a query before ``spark.sql`` sees it.

    ``spark.sql`` *runs* commands (CREATE TABLE, INSERT, SET, ADD JAR…) as soon as it is
    called, and a plan analyses queries from unreviewed pull requests. Spark's parser
    has a rule for queries alone (``parseQuery``); if it fails but the text parses as
    some other statement, the step is a command. A plain syntax error is raised by
    ``parsePlan`` exactly as ``spark.sql`` would raise it. The parser is reached through
    the classic (non-Connect) session's JVM side, as pyspark exposes no query-only parse.
    Returns the parsed (JVM) plan.
    """
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        return capture_sql_exception(parser.parseQuery)(query)
    except ParseException:
        capture_sql_exception(parser.parsePlan)(query)
        where = "written here" if named == QUERY_FIELD else "a step"
        raise QueryError(
            f"{named}: {NOT_A_QUERY} may be {where}; Spark would execute this statement",
            step=label,
        ) from None


def _engine_message(error: AnalysisException | ParseException) -> str:
    """The engine's own message, first line only: later lines are the analysed plan,
    the SQL echoed back, or generic advice about catalogs and search paths."""
    return first_line(error.getMessage(), str(error))


def _engine_line(error: AnalysisException | ParseException, query: str) -> int | None:
    """The 1-based line of ``query`` the engine blames, when it says.

    Analysis errors carry a SQL query context whose start index is an offset into the
    query text. Parse errors have no query context; their position is only on the JVM
    exception (``line()``), which pyspark keeps as ``_origin``. Some parse errors (an
    "extra input" at the end of a statement) come with no position at all.
    """
    for context in error.getQueryContext():
        if context.contextType().name == "SQL":
            return query.count("\n", 0, context.startIndex()) + 1
    origin = getattr(error, "_origin", None)
    position = origin.line() if origin is not None else None
    return int(position.get()) if position is not None and position.isDefined() else None


def columns_from_schema(struct: StructType) -> tuple[Column, ...]:
    """Spark's schema as plan Columns: name, DDL type, nullability."""
    return tuple(Column(f.name, _ddl_type(f.dataType), f.nullable) for f in struct.fields)


def _ddl_type(data_type: DataType) -> str:
    """Spark's ``simpleString`` (``bigint``, ``decimal(12,2)``, ``array<int>``), except
    that struct field names are quoted when they need it: ``simpleString`` writes
    ``struct<a b:int>``, which Spark's own DDL parser rejects, and an output type must
    read back as the input type of the datasets downstream.
    """
    if isinstance(data_type, StructType):
        fields = ",".join(f"{_quote_field(f.name)}:{_ddl_type(f.dataType)}" for f in data_type)
        return f"struct<{fields}>"
    if isinstance(data_type, ArrayType):
        return f"array<{_ddl_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"map<{_ddl_type(data_type.keyType)},{_ddl_type(data_type.valueType)}>"
    return str(data_type.simpleString())


def _quote_field(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else _quote(name)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
