"""Merge strategies on Spark: how a new batch of source data becomes changelog rows.

Semantics are kamu's current (DataFusion) ones, ENGINE-SEMANTICS §1.5, with two
deliberate differences, both about NULL keys, where kamu's plain equality joins go wrong:
keys are matched with null-safe equality (a Ledger row whose key is NULL is appended
once, not on every run; a Snapshot row with a NULL key is diffed like any other), and
"present on one side" is told by a marker column rather than by the first key column
being NULL.

History is not re-read. What a strategy needs from the past comes from the checkpoint of
the previous slice: the set of keys for Ledger, the projected current state for Snapshot
(each key's latest row, retracted keys removed). So a run costs what its new data and
the current state cost, not what the whole history costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import IntegerType

from ..engine.frames import ROW_ID, column, data_columns
from ..odf import models


class MergeError(ValueError):
    """The data cannot be merged as the strategy says (a key column is missing...)."""


class Op:
    """ODF operation types (the ``op`` column)."""

    APPEND = 0
    RETRACT = 1
    CORRECT_FROM = 2
    CORRECT_TO = 3


_STATE = -1
"""In ``merge_snapshot``, the kind of the state row that a row of the join gives besides
its changelog rows (an ``op`` value to be); the row's ``op`` is then NULL."""


@dataclass(frozen=True)
class Merged:
    """The changelog rows of one slice, before offsets and system time are added."""

    changes: DataFrame
    """``op``, then the data columns, then ``ROW_ID``; event times may still be NULL."""
    order: list[str]
    """The columns of ``changes`` in whose order (each ascending, nulls first) offsets
    are assigned: a total order."""
    state: Column | None = None
    """Snapshot only: true for the rows of ``changes`` that are not changelog rows but
    the projected state after this slice (the next checkpoint), ``op`` NULL. One pass
    over the merge's input gives both, so a run reads its data once, with no cache, and
    writes the slice and the checkpoint in one query."""
    state_is_changes: bool = False
    """Snapshot with no previous state: every changelog row is an append and is also a
    row of the state, in the same order, so the writer writes both files from the same
    sorted rows rather than sorting every row twice."""

    @property
    def keeps_state(self) -> bool:
        """Whether the changes come with the state after them (Snapshot)."""
        return self.state is not None or self.state_is_changes


def _op(value: int | Column, name: str) -> Column:
    literal = F.lit(value) if isinstance(value, int) else value
    return literal.cast(IntegerType()).alias(name)


def _require(columns: list[str], wanted: list[str], what: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise MergeError(
            f"{what} column {missing[0]!r} is not in the data; its columns are: "
            + ", ".join(columns)
        )


def _by_event_time(event_column: str) -> list[str]:
    return [event_column, ROW_ID]


def merge_append(new: DataFrame, op_column: str, event_column: str) -> Merged:
    """Every new row is appended; history does not matter."""
    names = data_columns(new)
    changes = new.select(_op(Op.APPEND, op_column), *[column(c) for c in names], F.col(ROW_ID))
    return Merged(changes, _by_event_time(event_column))


def _keys_match(left: list[Column], right: list[Column]) -> Column:
    return reduce(
        lambda a, b: a & b, [lc.eqNullSafe(rc) for lc, rc in zip(left, right, strict=True)]
    )


def merge_ledger(
    strategy: models.MergeStrategyLedger,
    new: DataFrame,
    keys: DataFrame | None,
    op_column: str,
    event_column: str,
) -> Merged:
    """New rows whose key was never seen are appended; the others are dropped (a ledger
    does not change its past).

    The seen keys are first narrowed to those among the new rows' keys (a semi join, in
    which Spark hashes the batch's keys, when they are small enough to broadcast, and
    streams the history through them), and only those few are matched against the new
    rows. A plain anti join would hash the whole history instead (broadcast while it
    is small, shuffled past that) on every run, a cost that grows with the history.
    ``keys`` need not be all the seen keys, only all that may be among the new rows':
    a checkpoint's layers whose key range the batch misses are not read at all."""
    pk = strategy.primary_key
    names = data_columns(new)
    _require(names, pk, "primary key")
    fresh = new
    if keys is not None:
        seen = keys.select(*[column(k).alias(f"__k{i}") for i, k in enumerate(pk)])
        batch = new.select(*[column(k).alias(f"__n{i}") for i, k in enumerate(pk)])
        hits = seen.join(
            batch,
            _keys_match(
                [seen[f"__k{i}"] for i in range(len(pk))],
                [batch[f"__n{i}"] for i in range(len(pk))],
            ),
            "left_semi",
        )
        fresh = new.join(
            hits,
            _keys_match([column(k) for k in pk], [hits[f"__k{i}"] for i in range(len(pk))]),
            "left_anti",
        )
    changes = fresh.select(_op(Op.APPEND, op_column), *[column(c) for c in names], F.col(ROW_ID))
    return Merged(changes, _by_event_time(event_column))


def merge_snapshot(
    strategy: models.MergeStrategySnapshot,
    new: DataFrame,
    state: DataFrame | None,
    op_column: str,
    event_column: str,
) -> Merged:
    """Change data capture of a full snapshot against the previous state: appends for new
    keys, retractions (with the old values and event time) for vanished keys, and a
    correct-from/correct-to pair for changed rows; along with them, the state after this
    slice: per new row, its values if they changed, else the old ones (which keep their
    old event time). Each row of the join of the two states gives all its rows at once
    (an ``explode``), so the join runs once. Event times may still be NULL in both: the
    writer fills them in alike."""
    names = data_columns(new)
    pk = strategy.primary_key
    _require(names, pk, "primary key")
    compared = strategy.compare_columns or [c for c in names if c not in pk]
    _require(names, compared, "compare")
    if state is None:  # every row is appended, and is the state: the same rows
        changes = new.select(_op(Op.APPEND, op_column), *[column(c) for c in names], F.col(ROW_ID))
        return Merged(changes, [*pk, ROW_ID], state_is_changes=True)  # one op: no tie
    order = [*pk, op_column, ROW_ID]

    _require(state.columns, names, "data")
    old_refs = [f"__o{i}" for i in range(len(names))]
    new_refs = [f"__n{i}" for i in range(len(names))]
    types = {f.name: f.dataType for f in new.schema.fields}
    old = state.select(
        *[column(c).cast(types[c]).alias(r) for c, r in zip(names, old_refs, strict=True)],
        F.lit(True).alias("__old"),
    )
    fresh = new.select(
        *[column(c).alias(r) for c, r in zip(names, new_refs, strict=True)],
        F.lit(True).alias("__new"),
        F.col(ROW_ID),
    )
    index = {c: i for i, c in enumerate(names)}
    joined = old.join(
        fresh,
        _keys_match([old[old_refs[index[k]]] for k in pk], [fresh[new_refs[index[k]]] for k in pk]),
        "full_outer",
    )

    def differs(name: str) -> Column:
        o, n = F.col(old_refs[index[name]]), F.col(new_refs[index[name]])
        changed = ~o.eqNullSafe(n)
        return n.isNotNull() & changed if name == event_column else changed

    changed = reduce(lambda a, b: a | b, [differs(c) for c in compared], F.lit(False))
    in_old, in_new = F.col("__old").isNotNull(), F.col("__new").isNotNull()
    both_changed = in_old & in_new & F.col("__changed")
    kinds = F.array(
        F.when(~in_old, Op.APPEND),
        F.when(~in_new, Op.RETRACT),
        F.when(both_changed, Op.CORRECT_FROM),
        F.when(both_changed, Op.CORRECT_TO),
        F.when(in_new, _STATE),
    )
    rows = joined.select("*", changed.alias("__changed")).select(
        "*", F.explode(F.filter(kinds, lambda kind: kind.isNotNull())).alias("__kind")
    )
    kind = F.col("__kind")
    kept_old = (kind == _STATE) & in_old & ~F.col("__changed")
    from_old = kind.isin(Op.RETRACT, Op.CORRECT_FROM) | kept_old
    changes = rows.select(
        _op(F.when(kind != _STATE, kind), op_column),
        *[
            F.when(from_old, F.col(o)).otherwise(F.col(n)).alias(c)
            for c, o, n in zip(names, old_refs, new_refs, strict=True)
        ],
        F.col(ROW_ID),  # NULL for a retraction: no new row
    )
    return Merged(changes, order, state=F.col(op_column).isNull())
