"""The preprocess stage: a source's SQL over the view ``input``, or the default clean-up.

With a ``preprocess`` transform the read data is the view ``input`` and each aliased
step a view of its own, the alias-less step being the result (ENGINE-SEMANTICS §1.8).
Without one, and only when the read step declares no schema, kamu's default applies:
columns named like system columns get a ``_`` prefix, and an event-time column holding
strings (RFC 3339) or integers (UNIX seconds) becomes a timestamp.

Either way the result is then checked the same way: no data column may take a system
column's name, and the event-time column, if present, must be a DATE or a TIMESTAMP.

A slice must be a function of the file and the query alone (§2, determinism), however
Spark is configured: offsets follow the event time, then the order the rows come out of
the preprocess in (``frames.with_row_id``). The file is read in as many partitions as
Spark splits it into (cores, ``spark.sql.files.maxPartitionBytes``). A query that makes
each row from one row read (a map or a filter: ``transform.ordering.row_wise``) keeps
the file's order over any split, and runs as it is, in parallel. Any other (an
aggregation, a window, a join, ``DISTINCT``, a limit, a sort, a subquery) would emit
its rows in an order set by the partitions, and sum floating-point values in one too:
it reads the data in one partition instead, in file order, and runs, with the merge and
the write that compute it, under the settings a transform runs under
(``transform.one_task``: no broadcast, no adaptive execution, one shuffle partition),
its output sorted as a transform's is (``transform.ordering.deterministic_order``).
Each sum is then a left-to-right fold in file order. The price is the query's
parallelism (it runs as one task, over the data its check cached) and, for an output as
large as the input, a sort: for 200,000 rows on two cores, an aggregation took as long
as before, a window about 0.1 s more. A map or a filter pays only the classification
(an optimizer pass, a few milliseconds), and ingest without a query nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import IntegralType, StringType, TimestampType

from ..engine.frames import column, is_time
from ..engine.query_check import QueryError, apply_transform, columns_from_schema
from ..odf import models
from ..transform.one_task import one_task
from ..transform.ordering import deterministic_order, row_wise
from ..transform.output_rules import (
    clash_text,
    column_problem,
    preprocess_case_clash,
    same_names,
    system_column,
)

INPUT_VIEW = "input"


class BadInputSchemaError(ValueError):
    """The data's columns cannot become a slice: a system column's name is taken, or
    the event time has the wrong type."""


class PreprocessError(ValueError):
    """The preprocess query failed; the message names the step and line."""


@contextmanager
def preprocessed(
    spark: SparkSession,
    frame: DataFrame | None,
    transform: models.TransformSql | None,
    vocab: models.DatasetVocabulary,
    has_read_schema: bool,
) -> Iterator[DataFrame | None]:
    """The data as the merge sees it (None when none was read), for the ``with`` block,
    which must compute it: a query that is not row-wise runs over the data in one
    partition, and Spark plans a query when an action runs it, so the block (the merge
    and the slice write) runs under ``one_task``'s settings. See the module docstring."""
    if frame is None:
        yield None
        return
    result = preprocess(spark, frame, transform, vocab, has_read_schema)
    if transform is None or row_wise(result):
        yield result
        return
    with one_task(spark):
        alone = preprocess(spark, frame.coalesce(1), transform, vocab, has_read_schema)
        yield deterministic_order(alone, vocab)


def preprocess(
    spark: SparkSession,
    frame: DataFrame,
    transform: models.TransformSql | None,
    vocab: models.DatasetVocabulary,
    has_read_schema: bool,
) -> DataFrame:
    """The query's (or the default's) result over ``frame``, checked; ``preprocessed``
    makes it independent of how Spark splits ``frame``."""
    if transform is not None:
        try:
            result = apply_transform(spark, {INPUT_VIEW: frame}, transform)
        except QueryError as e:
            where = f" (line {e.line})" if e.line else ""
            raise PreprocessError(f"preprocess query failed{where}: {e.message}") from None
        _check_query_output(result, vocab)
    elif not has_read_schema:
        result = _default(frame, vocab)
    else:
        result = frame
    check_columns(result, vocab)
    return result


def _check_query_output(result: DataFrame, vocab: models.DatasetVocabulary) -> None:
    """Refuse, in the plan's words (``plan.preprocess_output``), a query output the plan
    refuses: a system column's name in another case, a name twice, a type a slice cannot
    hold. A manifest merged past its failed plan stops here, before anything is written."""
    columns = [(c.name, c.type) for c in columns_from_schema(result.schema)]
    for name, type_ in columns:
        system = system_column(name, vocab)
        if system is not None and system != name:
            raise BadInputSchemaError(preprocess_case_clash(name, system))
        if (problem := column_problem(name, type_)) is not None:
            raise BadInputSchemaError(f"the preprocess query's {problem}")
    if (clash := same_names(name for name, _ in columns)) is not None:
        raise BadInputSchemaError(
            f"the preprocess query's output {clash_text(*clash)}; rename one of them with AS"
        )


def _default(frame: DataFrame, vocab: models.DatasetVocabulary) -> DataFrame:
    """The data read without a schema: the event time parsed, and a column named as a
    system column, in any case (Spark holds ``OFFSET`` and ``offset`` as one), renamed
    with leading ``_`` until the name is no other column's (the data may have its own
    ``_offset``, and two columns of one name make every later reference ambiguous)."""
    taken = {field.name.lower() for field in frame.schema.fields}
    selected = []
    for field in frame.schema.fields:
        ref = column(field.name)
        name = field.name
        if system_column(name, vocab) is not None:
            while (name := "_" + name).lower() in taken:
                pass
            taken.add(name.lower())
        if field.name == vocab.event_time_column:
            if isinstance(field.dataType, IntegralType):
                ref = F.timestamp_seconds(ref)
            elif isinstance(field.dataType, StringType):
                ref = ref.cast(TimestampType())
        selected.append(ref.alias(name))
    return frame.select(*selected)


def check_columns(frame: DataFrame, vocab: models.DatasetVocabulary) -> None:
    """Refuse data that would collide with the system columns or has a bad event time."""
    for field in frame.schema.fields:
        system = system_column(field.name, vocab)
        if system == field.name:
            raise BadInputSchemaError(
                f"the data has a column {field.name!r}, which is a system column's name;"
                " rename it in the read schema or the preprocess query"
            )
        if system is not None:
            raise BadInputSchemaError(
                f"the data has a column {field.name!r}, which differs only in case from the"
                f" system column {system!r} and which Spark (spark.sql.caseSensitive=false)"
                " cannot hold apart from it; rename it in the read schema or the preprocess"
                " query"
            )
        if field.name == vocab.event_time_column and not is_time(field.dataType):
            raise BadInputSchemaError(
                f"event time column {field.name!r} should be a DATE or a TIMESTAMP,"
                f" not {field.dataType.simpleString()}"
            )
