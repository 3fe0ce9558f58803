"""A dataset's stored rows as a Spark DataFrame: what transforms and ``reconcile sql`` read.

Slices are read with the schema the chain's ``SetDataSchema`` declares, not the one
Spark would infer from the files, so every reader sees the types the dataset promises
(and a dataset with no slices yet still has its columns). Rows come in offset order:
offsets are the dataset's own order, and a map or filter over an input must keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from ..ingest.frames import column
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
        return spark.createDataFrame([], schema)
    offset = column(offset_column)
    frame = spark.read.schema(schema).parquet(*[str(p) for p in files])
    if interval is not None:
        frame = frame.where(offset.between(*interval))
    return frame.orderBy(offset)
