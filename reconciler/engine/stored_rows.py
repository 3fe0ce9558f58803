"""A dataset's stored rows as a Spark DataFrame: what transforms and ``reconcile sql`` read.

Slices are read with the schema the chain's ``SetDataSchema`` declares, not the one
Spark would infer from the files, so every reader sees the types the dataset promises
(and a dataset with no slices yet still has its columns). The latest ``SetDataSchema``
covers the older slices too: a column added since (only nullable ones can be) reads as
null where a slice does not have it. Rows come in offset order: offsets are the
dataset's own order, and a map or filter over an input must keep it.

Spark's file sources make every column nullable, whatever the schema says; the rows of
no files are given the same nullability, so a query's output columns, and the schema a
derivative records from them, do not depend on whether its inputs had data yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from ..ingest.frames import as_read, column
from ..odf.arrow_schema import decode_arrow_schema


def stored_rows(
    spark: SparkSession,
    data_schema: bytes,
    files: Sequence[Path],
    offset_column: str,
    interval: tuple[int, int] | None = None,
) -> DataFrame:
    """The rows of ``files`` (whole, or only offsets in ``interval``, inclusive), typed by
    ``data_schema`` (a raw Arrow schema) and sorted by offset."""
    schema = from_arrow_schema(decode_arrow_schema(data_schema))
    if not files:
        return spark.createDataFrame([], as_read(schema))
    offset = column(offset_column)
    frame = spark.read.schema(schema).parquet(*[str(p) for p in files])
    if interval is not None:
        frame = frame.where(offset.between(*interval))
    return frame.orderBy(offset)
