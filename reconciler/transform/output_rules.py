"""What a derivative's query output must hold to become a slice, as one rule for the plan
and the run alike.

A transform's output gets the system columns added by the writer, so it may not have
columns of their names; it must have the event time column the vocabulary names, a DATE
or a TIMESTAMP; and an ``op`` column, when it has one, must be an integer. The run
refuses an output that breaks a rule (``transform.execute``), and the plan, which
analyses a new or changed query, refuses the same query before it is approved
(``plan.builder``): a plan that passes must not fail its apply on the shape of the
output. Types are Spark's ``simpleString`` spelling, which both sides have without
running a query; this module imports no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..odf import models

_TIMES = frozenset({"date", "timestamp", "timestamp_ntz"})
_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})


def output_problem(types: Mapping[str, str], vocab: models.DatasetVocabulary) -> str | None:
    """Why an output whose columns have ``types`` (name: Spark type) cannot be a slice
    of a dataset with ``vocab``, or None when it can."""
    for name in (vocab.offset_column, vocab.system_time_column):
        if name in types:
            return f"the query's output has a column {name!r}, a system column's name"
    event = vocab.event_time_column
    if event not in types:
        return f"the query's output has no event time column {event!r}"
    if types[event] not in _TIMES:
        return f"event time column {event!r} should be a DATE or a TIMESTAMP, not {types[event]}"
    op = vocab.operation_type_column
    if op in types and types[op] not in _INTEGERS:
        return f"column {op!r} must be an integer, not {types[op]}"
    return None
