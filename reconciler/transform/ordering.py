"""A transform's output rows (or a root's preprocessed data) in an order that does not
depend on how Spark ran it.

Offsets follow the output's row order, and the logical hash covers it, so the order must
be a function of the inputs and the query alone (§2, determinism): the same run on two
machines, or replayed by ``verify``, must give the same offsets and hashes.

Each input is one partition in offset order (``engine.stored_rows.rows_in_one_partition``)
and Spark keeps row order through projections, filters, limits and generators, so two
cases are already deterministic and stay as the query wrote them: a query that ends in
its own ``ORDER BY``, and a map or filter over one input. Everything else (joins,
aggregations, windows, unions, ``DISTINCT``) comes out in an order no one promises:
even in the one task the query runs as (``one_task``) it is set by the operators'
internals (a hash aggregate's table, a sort's spills), which memory and Spark versions
change. Those outputs are sorted by event time,
then op, then every other column, which is a total order over distinct rows: rows equal
in all of those columns are indistinguishable (map columns, which Spark cannot order,
are the one exception). Retractions and corrections keep their meaning: at the same
event time an append (0) sorts before its retraction (1), and a correction's old values
(2) before its new (3).

A root's preprocess query reads the data as read, in as many partitions as Spark splits
the file into. ``row_wise`` tells the queries whose result does not depend on that split
(a map or filter, which keeps the file's order); any other runs over the data in one
partition, in file order, and its output is ordered here like a transform's
(``ingest.preprocess.preprocessed``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from ..engine.frames import column
from ..odf import models
from ..writer.slice_files import sorted_in_one_partition

_ROW_WISE = frozenset({"Project", "Filter", "SubqueryAlias", "Generate"})
"""Logical plan nodes that make each output row from one row of their child, in its
order, within each partition: whatever the partitions, their rows and order are the
same once the partitions are concatenated."""

_ORDER_PRESERVING = _ROW_WISE | {"GlobalLimit", "LocalLimit"}
"""Logical plan nodes whose output keeps their child's row order: the row-wise ones, and
a limit, which over one partition takes its first rows (over several, it takes each
one's first rows and gathers them by a shuffle, in the order its blocks arrive)."""

_INPUT_READ = frozenset(
    {"Project", "Filter", "Union", "LogicalRelation", "Sort", "InMemoryRelation"}
)
"""The nodes an input read by ``rows_in_one_partition`` has under its ``coalesce(1)``
once optimized: its scans (a union of them, or one sorted by offset) and the filters and
projections Spark pushes down to them. The query can put nothing else there: it sees
the input only through its view, which already ends in the ``coalesce(1)``. A root's
preprocess query that runs in one partition (``ingest.preprocess.preprocessed``) sees
the data read likewise, as cached by its check (``ingest.readers.read_data``)."""


def deterministic_order(output: DataFrame, vocab: models.DatasetVocabulary) -> DataFrame:
    """``output`` itself when its order is already fixed, else sorted totally.

    The sort shuffles the rows into the one partition the slice is written from and
    sorts them there, which spares a global sort's sampling job (``write_frame``
    coalesces to one partition anyway)."""
    if _keeps_order(output):
        return output
    event, op = vocab.event_time_column, vocab.operation_type_column
    rest = [f.name for f in output.schema.fields if f.name not in (event, op)]
    orderable = [n for n in rest if _orderable(output.schema[n].dataType)]
    keys = [n for n in (event, op) if n in output.columns] + orderable
    return sorted_in_one_partition(output, [column(n).asc_nulls_first() for n in keys])


def _keeps_order(frame: DataFrame) -> bool:
    """Whether the optimized plan, under order-preserving nodes only, is a global sort
    (the query's ``ORDER BY``) or an input as read, in one partition in offset order."""
    node = _optimized_plan(frame)
    while node.nodeName() in _ORDER_PRESERVING:
        node = node.child()
    if node.nodeName() == "Sort":
        return bool(getattr(node, "global")())
    return bool(
        node.nodeName() == "Repartition"
        and node.numPartitions() == 1
        and not node.shuffle()
        and _input_read(node.child())
    )


def row_wise(frame: DataFrame) -> bool:
    """Whether each row of ``frame`` is made from one row of one leaf of its plan (a
    file's scan, the cache of one, a table of literals), in the leaf's order: the
    optimized plan is a chain of row-wise nodes (``_ROW_WISE``) down to that leaf, with
    no subquery in their expressions (a scalar subquery's sum, say, adds up the rows of
    every partition). Such a frame's rows, their values and their order, partitions
    concatenated, are the same however Spark splits the leaf into partitions."""
    node = _optimized_plan(frame)
    while node.nodeName() in _ROW_WISE and node.subqueries().isEmpty():
        node = node.child()
    return bool(node.children().isEmpty())


def _optimized_plan(frame: DataFrame) -> Any:
    """``frame``'s optimized logical plan (a JVM object), which the classifiers read
    rather than the analysed one: the optimizer turns a filter on a subquery
    (``IN (SELECT ...)``) into a join, which keeps neither rows nor order."""
    return frame._jdf.queryExecution().optimizedPlan()


def _input_read(node: Any) -> bool:
    """Whether ``node`` (a JVM logical plan) holds only what an input read has: see
    ``_INPUT_READ``; a sort there is the global sort by offset of many slices."""
    name = node.nodeName()
    if name not in _INPUT_READ or (name == "Sort" and not getattr(node, "global")()):
        return False
    children = node.children()
    return all(_input_read(children.apply(i)) for i in range(children.size()))


def _orderable(data_type: DataType) -> bool:
    if isinstance(data_type, MapType) or data_type.typeName() == "variant":
        return False
    if isinstance(data_type, ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return True
