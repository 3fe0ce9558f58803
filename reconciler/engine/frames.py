"""Small Spark column helpers shared by preprocess, merge and the slice writer.

Dataset columns can have any name (``Date (UTC)``, ``a.b``), so every reference goes
through ``column`` with backtick quoting rather than Spark's dotted-path parsing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import (
    DataType,
    DateType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..odf.timestamps import Timestamp

# Input order, captured right after reading, so that rows tied in the offset order keep
# the order of the source file on every run (Spark's sort is not stable by itself).
ROW_ID = "__odf_row_id"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    return F.col(quote(name))


def data_columns(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c != ROW_ID]


def with_row_id(frame: DataFrame) -> DataFrame:
    return frame.withColumn(ROW_ID, F.monotonically_increasing_id())


def as_read(schema: StructType) -> StructType:
    """The schema as Spark's file sources give it back: every column nullable."""
    return StructType([StructField(f.name, f.dataType, True) for f in schema])


def is_time(data_type: DataType) -> bool:
    return isinstance(data_type, TimestampType | TimestampNTZType | DateType)


def normalize_timestamps(frame: DataFrame) -> DataFrame:
    """Every timestamp column as an instant truncated to milliseconds, as ODF stores it
    (a zone-less timestamp is read as UTC, the session's zone)."""
    selected = []
    for field in frame.schema.fields:
        ref = column(field.name)
        if isinstance(field.dataType, TimestampType | TimestampNTZType):
            ref = F.date_trunc("millisecond", ref.cast(TimestampType())).alias(field.name)
        selected.append(ref)
    return frame.select(*selected)


def timestamp_literal(value: Timestamp, data_type: DataType) -> Column:
    """``value`` as a literal of ``data_type`` (a DATE gets the UTC day)."""
    literal = F.timestamp_millis(F.lit(value.epoch_millis))
    return literal.cast(DateType()) if isinstance(data_type, DateType) else literal
