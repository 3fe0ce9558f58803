"""Queries that read a change log as if every row of it were a new one.

A ``Snapshot`` merge records each change of its source's state as rows with an
operation type (``op``): 0 a new row, 1 a row gone (its old values), 2 and 3 a row's old
and new values. A derivative's query that never names ``op`` reads every one of them
as a row like any other (kamu's engines do the same: the column only passes through
when selected), so a join over a changed store matches its old and its new row, a sum
counts a correction twice and a retraction still. The query is what the user wrote and
may be meant so; the plan warns beside it, where the reviewer reads it, when the query
or the input's source is new or changed in this plan.

Read from the text alone (``sql_text``), as ``per_run_clauses`` is: a query naming the
column anywhere is taken to handle it, and one that passes every column through
(``SELECT *``, so ``op`` too) with nothing that combines rows keeps the log's meaning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..odf import models
from ..sql_text import structure
from .desired import DesiredDataset, DesiredState, polling_source, set_transform
from .model import DatasetPlan, Problem, Severity
from .per_run_clauses import per_run_clauses, sql_steps
from .policies import field_location

_SOURCE_EVENTS = frozenset({"SetPollingSource", "AddPushSource", "SetVocab"})
_SELECT_ALL = re.compile(r"\bSELECT\s+(?:ALL\s+)?(?:\w+\.)?\*", re.IGNORECASE)


def changelog_problems(
    desired: DesiredState, plans: Mapping[str, DatasetPlan], left_out: frozenset[str]
) -> list[Problem]:
    """A warning for each derivative, new or changed in ``plans`` or reading an input
    whose source is, that reads a change log without naming its operation column."""
    logs: dict[str, str] = {}  # dataset name → its operation column, for each change log
    problems = []
    for name, ds in desired.datasets.items():  # dependency order: inputs first
        if _merges_snapshots(ds):
            logs[name] = _operation_column(ds)
            continue
        index, transform = set_transform(ds.snapshot)
        read = [i for i in ds.inputs if i in logs]
        if transform is None or not read:
            continue
        queries = sql_steps(transform)
        text = "\n".join(structure(q) for q in queries)
        raw = "\n".join(queries)
        unnamed = [i for i in read if not _names(text, raw, logs[i])]
        passes = _passes_through(text, queries)
        if passes or len(unnamed) < len(read):
            logs[name] = _operation_column(ds)  # its output carries the log's rows on
        if unnamed and not passes and name not in left_out and _changed(name, unnamed, plans):
            problems.append(_warning(ds, index, transform, unnamed, logs))
    return problems


def _merges_snapshots(ds: DesiredDataset) -> bool:
    """Whether a source of the root (its polling source in force, a push source) merges
    by ``Snapshot``, whose rows carry retractions and corrections."""
    _, polling = polling_source(ds.snapshot)
    sources: list[models.SetPollingSource | models.AddPushSource] = [
        e for e in ds.snapshot.metadata if isinstance(e, models.AddPushSource)
    ]
    sources += [polling] if polling is not None else []
    return any(isinstance(s.merge, models.MergeStrategySnapshot) for s in sources)


def _operation_column(ds: DesiredDataset) -> str:
    """The name of the dataset's operation column (its last ``SetVocab``'s, else ``op``)."""
    vocab = [e for e in ds.snapshot.metadata if isinstance(e, models.SetVocab)]
    return (vocab[-1].operation_type_column if vocab else None) or "op"


def _names(text: str, raw: str, column: str) -> bool:
    """Whether the query names ``column``, bare (outside strings and comments) or quoted."""
    bare = re.search(rf"(?<![\w$]){re.escape(column)}(?![\w$])", text, re.IGNORECASE)
    return bare is not None or f"`{column}`".lower() in raw.lower()


def _passes_through(text: str, queries: list[str]) -> bool:
    """A query selecting every column (``op`` among them) that combines no rows."""
    return _SELECT_ALL.search(text) is not None and not any(per_run_clauses(q) for q in queries)


def _changed(name: str, inputs: list[str], plans: Mapping[str, DatasetPlan]) -> bool:
    """Whether the plan creates the reader or changes its query, or changes the source
    (or the column names) of one of the ``inputs`` it reads."""
    reader = plans.get(name)
    if reader is not None and any(e.kind == "SetTransform" for e in reader.events):
        return True
    return any(e.kind in _SOURCE_EVENTS for i in inputs if i in plans for e in plans[i].events)


def _warning(
    ds: DesiredDataset,
    index: int,
    event: models.SetTransform,
    inputs: list[str],
    logs: Mapping[str, str],
) -> Problem:
    """The warning at the query (``event``, the manifest's ``index``-th) of ``ds``."""
    sql = event.transform
    key = "query" if isinstance(sql, models.TransformSql) and sql.query is not None else "queries"
    column = logs[inputs[0]]
    named = ", ".join(inputs)
    return Problem(
        f"reads {named}, a change log (a row changed is two rows, its old values with"
        f" {column} 2 and its new ones with {column} 3; a row gone is one with {column} 1),"
        f" but its query never names `{column}`: every such row is read as a new one, so a"
        f" join matches a changed row twice and a sum counts what was retracted. Keep"
        f" `{column} IN (0, 3)` for rows as they are now, or select `{column}` to pass the"
        " changes on (README: Transforms)",
        dataset=ds.name,
        location=field_location(ds.loaded, ("content", "metadata", index, "transform", key)),
        field=f"content.metadata[{index}].transform.{key}",
        severity=Severity.WARNING,
    )
