"""The preprocess stage: a source's SQL over the view ``input``, or the default clean-up.

With a ``preprocess`` transform the read data is the view ``input`` and each aliased
step a view of its own, the alias-less step being the result (ENGINE-SEMANTICS §1.8).
Without one, and only when the read step declares no schema, kamu's default applies:
columns named like system columns get a ``_`` prefix, and an event-time column holding
strings (RFC 3339) or integers (UNIX seconds) becomes a timestamp.

Either way the result is then checked the same way: no data column may take a system
column's name, and the event-time column, if present, must be a DATE or a TIMESTAMP.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import IntegralType, StringType, TimestampType

from ..engine.query_check import QueryError, apply_transform
from ..odf import models
from .frames import column, is_time

INPUT_VIEW = "input"


class BadInputSchemaError(ValueError):
    """The data's columns cannot become a slice: a system column's name is taken, or
    the event time has the wrong type."""


class PreprocessError(ValueError):
    """The preprocess query failed; the message names the step and line."""


def preprocess(
    spark: SparkSession,
    frame: DataFrame,
    transform: models.TransformSql | None,
    vocab: models.DatasetVocabulary,
    has_read_schema: bool,
) -> DataFrame:
    """The data as the merge sees it."""
    if transform is not None:
        try:
            result = apply_transform(spark, {INPUT_VIEW: frame}, transform)
        except QueryError as e:
            where = f" (line {e.line})" if e.line else ""
            raise PreprocessError(f"preprocess query failed{where}: {e.message}") from None
    elif not has_read_schema:
        result = _default(frame, vocab)
    else:
        result = frame
    check_columns(result, vocab)
    return result


def _default(frame: DataFrame, vocab: models.DatasetVocabulary) -> DataFrame:
    reserved = _reserved(vocab)
    selected = []
    for field in frame.schema.fields:
        ref = column(field.name)
        name = "_" + field.name if field.name in reserved else field.name
        if field.name == vocab.event_time_column:
            if isinstance(field.dataType, IntegralType):
                ref = F.timestamp_seconds(ref)
            elif isinstance(field.dataType, StringType):
                ref = ref.cast(TimestampType())
        selected.append(ref.alias(name))
    return frame.select(*selected)


def _reserved(vocab: models.DatasetVocabulary) -> set[str]:
    return {vocab.offset_column, vocab.operation_type_column, vocab.system_time_column}


def check_columns(frame: DataFrame, vocab: models.DatasetVocabulary) -> None:
    """Refuse data that would collide with the system columns or has a bad event time."""
    for field in frame.schema.fields:
        if field.name in _reserved(vocab):
            raise BadInputSchemaError(
                f"the data has a column {field.name!r}, which is a system column's name;"
                " rename it in the read schema or the preprocess query"
            )
        if field.name == vocab.event_time_column and not is_time(field.dataType):
            raise BadInputSchemaError(
                f"event time column {field.name!r} should be a DATE or a TIMESTAMP,"
                f" not {field.dataType.simpleString()}"
            )
