"""Queries the engine rejected, as plan problems: where in the manifest, and why.

A failed query check is an error like any other problem, so it is made one here, once,
and every renderer and the exit code read it from ``Plan.problems``. The problem points
at the manifest line the engine blamed: the line of the query inside the YAML (a
``query: |`` block starts on the line after its key) plus the error's line within the
query, in the step that failed. When the query broke because an input's columns changed
in this same plan (a column it reads is dropped upstream), the problem names that
upstream change, since that is where the reviewer must look.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..odf import models
from .desired import DesiredDataset
from .model import DatasetPlan, Location, Problem, QueryCheck
from .policies import YamlPath, field_location, step_query_path


@dataclass(frozen=True)
class CheckedQuery:
    """Which event's query a dataset's check analysed: a transform or a preprocess."""

    index: int  # the event's position in the manifest's metadata
    facet: str  # "transform" (SetTransform) or "preprocess" (a source's)


def query_problem(
    ds: DesiredDataset, plans: Mapping[str, DatasetPlan], checked: CheckedQuery
) -> Problem:
    """The error of ``ds``'s failed query check (``plans[ds.name].query``), at its line."""
    check = plans[ds.name].query
    assert check is not None and not check.ok
    path = _query_path(ds.snapshot, checked, check.step)
    return Problem(
        _cause(ds, plans, check),
        dataset=ds.name,
        location=_location(ds, path, check.line),
        field=_field_text(path),
    )


def _cause(ds: DesiredDataset, plans: Mapping[str, DatasetPlan], check: QueryCheck) -> str:
    """The upstream change that broke the query when there is one, else the engine's error.

    A column the error names that an input drops in this plan is that input's doing; so
    is any failure over an input whose columns change while this query did not.
    """
    error = check.error or "no message from the engine"
    changed = [name for name in ds.inputs if name in plans and _schema_changes(plans[name])]
    for name in changed:
        for column in _removed_columns(plans[name]):
            if f"`{column}`" in error:
                return f"its query reads column `{column}`, which {name} drops in this change"
    if changed and not _own_query_changed(plans[ds.name]):
        return f"its query fails over the changed columns of {', '.join(changed)}: {error}"
    return f"query check failed: {error}"


def _schema_changes(plan: DatasetPlan) -> bool:
    return any(e.schema is not None for e in plan.events)


def _removed_columns(plan: DatasetPlan) -> Iterator[str]:
    for event in plan.events:
        if event.schema is not None:
            yield from event.schema.removed


def _own_query_changed(plan: DatasetPlan) -> bool:
    return any(e.kind in ("SetTransform", "SetPollingSource", "AddPushSource") for e in plan.events)


def _query_path(
    snapshot: models.DatasetSnapshot, checked: CheckedQuery, step: str | None
) -> YamlPath:
    """The YAML path of the failed step's query text: ``query``, or the matching entry of
    ``queries`` (by alias; the output step is the last entry)."""
    base: YamlPath = ("content", "metadata", checked.index, checked.facet)
    transform = getattr(snapshot.metadata[checked.index], checked.facet, None)
    if not isinstance(transform, models.TransformSql):
        return (*base, "query")
    return (*base, *step_query_path(transform, step))


def _location(ds: DesiredDataset, path: YamlPath, line: int | None) -> Location:
    """The manifest line of the error: the query's first line plus the error's line in it."""
    return field_location(ds.loaded, path, line or 1)


def _field_text(path: YamlPath) -> str:
    """``content.metadata[0].transform.query``: the path as problems spell fields."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text
