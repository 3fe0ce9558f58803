"""A transform's output rows in an order that does not depend on how Spark ran it.

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
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from ..engine.write_slices import sorted_in_one_partition
from ..ingest.frames import column
from ..odf import models

_ORDER_PRESERVING = frozenset(
    {"Project", "Filter", "SubqueryAlias", "GlobalLimit", "LocalLimit", "Generate"}
)
"""Logical plan nodes whose output keeps their child's row order."""

_INPUT_READ = frozenset({"Project", "Filter", "Union", "LogicalRelation", "Sort"})
"""The nodes an input read by ``rows_in_one_partition`` has under its ``coalesce(1)``
once optimized: its scans (a union of them, or one sorted by offset) and the filters and
projections Spark pushes down to them. The query can put nothing else there: it sees
the input only through its view, which already ends in the ``coalesce(1)``."""


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
    keys = [event] + ([op] if op in output.columns else []) + orderable
    return sorted_in_one_partition(output, [column(n).asc_nulls_first() for n in keys])


def _keeps_order(frame: DataFrame) -> bool:
    """Whether the optimized plan, under order-preserving nodes only, is a global sort
    (the query's ``ORDER BY``) or an input as read, in one partition in offset order.

    The optimized plan, not the analysed one: the optimizer turns a filter on a
    subquery (``IN (SELECT ...)``) into a join, which does not keep the order."""
    node = frame._jdf.queryExecution().optimizedPlan()
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
