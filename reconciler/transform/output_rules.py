"""What a derivative's query output must hold to become a slice, as one rule for the plan
and the run alike.

A transform's output gets the system columns added by the writer, so it may not have
columns of their names; it must have the event time column the vocabulary names, a DATE
or a TIMESTAMP; an ``op`` column, when it has one, must be an integer; and no column may
be or hold a VARIANT, whose Arrow form carries field metadata the chain's schema cannot
encode. The run refuses an output that breaks a rule (``transform.execute``), and the
plan, which analyses a new or changed query, refuses the same query before it is
approved (``plan.builder``): a plan that passes must not fail its apply on the shape of
the output. Types are Spark's ``simpleString`` spelling, which both sides have without
running a query; this module imports no Spark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..odf import models

_TIMES = frozenset({"date", "timestamp", "timestamp_ntz"})
_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
_VARIANT = re.compile(r"(?<![\w`])variant\b")


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
    return next(filter(None, (variant_problem(n, t) for n, t in types.items())), None)


def variant_problem(name: str, type_: str) -> str | None:
    """Why a column of Spark type ``type_`` cannot be in a slice, if it is or holds a
    VARIANT (a transform's output or a root's preprocess output alike)."""
    if _VARIANT.search(type_) is None:
        return None
    return (
        f"column {name!r} is or holds a VARIANT ({type_}), which a slice cannot hold: its"
        " Arrow form carries field metadata that the chain's schema cannot encode; give it"
        " as a STRING (to_json) or as typed columns"
    )
