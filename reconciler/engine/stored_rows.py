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
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..odf.arrow_schema import decode_arrow_schema
from .frames import as_read, column

MOST_SCANS = 16
"""``rows_in_offset_order`` reads up to this many files as a scan each; more files are
sorted instead, since each scan costs the driver planning time (about 15 ms a file)
that soon outweighs sorting rows that are already nearly in order."""


def stored_rows(
    spark: SparkSession,
    data_schema: bytes,
    files: Sequence[Path],
    offset_column: str,
    interval: tuple[int, int] | None = None,
) -> DataFrame:
    """The rows of ``files`` (whole, or only offsets in ``interval``, inclusive), typed by
    ``data_schema`` (a raw Arrow schema) and sorted by offset: a global sort, so the rows
    stay spread over partitions for whatever reads them."""
    schema = from_arrow_schema(decode_arrow_schema(data_schema))
    if not files:
        return spark.createDataFrame([], as_read(schema))
    return _scan(spark, schema, files, offset_column, interval).orderBy(column(offset_column))


def rows_in_one_partition(
    spark: SparkSession,
    data_schema: bytes,
    files: Sequence[Path],
    offset_column: str,
    interval: tuple[int, int] | None = None,
) -> DataFrame:
    """``stored_rows``' rows in one partition, in offset order, mostly without sorting.

    What a transform reads. One partition in a fixed order is what makes its result
    independent of how Spark partitions the work: a map or a filter keeps the order,
    and an aggregation's partial results, folded in offset order in one task, are each
    merged once, so even a floating-point sum (whose result depends on the order of
    its additions) comes out the same for any number of cores, shuffle partitions or
    split size. Across partitions, partial sums are added in an order set by how the
    input was split and which task finished first. A transform's query also runs under
    settings that keep each of its steps in this one partition and make each join a
    sort-merge join (``transform.one_task``).

    Each slice is written in offset order, and slices follow each other in the chain,
    so the files are read each as its own scan, concatenated in chain order by a
    union (whose partitions are its children's, in order) and then by ``coalesce(1)``
    (likewise): no sort and no shuffle. This relies on a scan of one file listing its
    splits in file order, as Spark does (a stable sort of the splits by size, all
    equal but the last); ``tests/test_transform_order.py`` holds it to that for any
    split size. Beyond ``MOST_SCANS`` files, the rows are sorted first.
    """
    return rows_in_offset_order(spark, data_schema, files, offset_column, interval).coalesce(1)


def rows_in_offset_order(
    spark: SparkSession,
    data_schema: bytes,
    files: Sequence[Path],
    offset_column: str,
    interval: tuple[int, int] | None = None,
) -> DataFrame:
    """``stored_rows``' rows in offset order across partitions taken in index order,
    which is how collecting or streaming a result reads them: up to ``MOST_SCANS``
    files, each file's scan in chain order, with no sort and no shuffle (see
    ``rows_in_one_partition``); beyond, sorted."""
    if not files or len(files) > MOST_SCANS:
        return stored_rows(spark, data_schema, files, offset_column, interval)
    schema = from_arrow_schema(decode_arrow_schema(data_schema))
    scans = [_scan(spark, schema, [path], offset_column, interval) for path in files]
    return reduce(DataFrame.union, scans)


def _scan(
    spark: SparkSession,
    schema: StructType,
    files: Sequence[Path],
    offset_column: str,
    interval: tuple[int, int] | None,
) -> DataFrame:
    frame = spark.read.schema(schema).parquet(*[str(p) for p in files])
    if interval is not None:
        frame = frame.where(column(offset_column).between(*interval))
    return frame
