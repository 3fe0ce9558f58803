"""A transform's output rows in an order that does not depend on how Spark ran it.

Offsets follow the output's row order, and the logical hash covers it, so the order must
be a function of the inputs and the query alone (§2, determinism): the same run on two
machines, or replayed by ``verify``, must give the same offsets and hashes.

Spark keeps row order through projections, filters, limits and generators over an
ordered child, so two cases are already deterministic and stay as the query wrote them:
a query that ends in its own ``ORDER BY``, and a map or filter over one input (each input
view is sorted by offset). Everything else (joins, aggregations, windows, unions,
``DISTINCT``) comes out in an order set by shuffle partitioning and by which task
finished first. Those outputs are sorted by event time, then op, then every other column,
which is a total order over distinct rows: rows equal in all of those columns are
indistinguishable (map columns, which Spark cannot order, are the one exception).
Retractions and corrections keep their meaning: at the same event time an append (0)
sorts before its retraction (1), and a correction's old values (2) before its new (3).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from ..ingest.frames import column
from ..odf import models

_ORDER_PRESERVING = frozenset(
    {"Project", "Filter", "SubqueryAlias", "GlobalLimit", "LocalLimit", "Generate"}
)
"""Logical plan nodes whose output keeps their child's row order."""


def deterministic_order(output: DataFrame, vocab: models.DatasetVocabulary) -> DataFrame:
    """``output`` itself when its order is already fixed, else sorted totally."""
    if _ends_in_sort(output):
        return output
    event, op = vocab.event_time_column, vocab.operation_type_column
    rest = [f.name for f in output.schema.fields if f.name not in (event, op)]
    orderable = [n for n in rest if _orderable(output.schema[n].dataType)]
    keys = [event] + ([op] if op in output.columns else []) + orderable
    return output.orderBy(*[column(n).asc_nulls_first() for n in keys])


def _ends_in_sort(frame: DataFrame) -> bool:
    """Whether the optimized plan is a global sort under order-preserving nodes only."""
    node = frame._jdf.queryExecution().optimizedPlan()
    while node.nodeName() in _ORDER_PRESERVING:
        node = node.child()
    return bool(node.nodeName() == "Sort" and getattr(node, "global")())


def _orderable(data_type: DataType) -> bool:
    if isinstance(data_type, MapType) or data_type.typeName() == "variant":
        return False
    if isinstance(data_type, ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return True
