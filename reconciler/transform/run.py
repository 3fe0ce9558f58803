"""Run a derivative dataset: consume its inputs' new slices with its query, and commit.

Like a root pull, a run is all or nothing: on failure the head goes back and the files
it added are removed. Inputs must already be up to date, so ``apply`` runs derivatives
after their inputs, in dependency order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..ingest.pull import IngestContext, PullResult
from ..odf import models
from ..odf.multiformat import DatasetId
from ..odf.repository import Dataset, OdfRepository
from ..plan.per_run_clauses import per_run_clauses, sql_steps
from ..wording import count
from ..writer.commit import all_or_nothing, commit
from ..writer.scratch import TRANSFORM_PREFIX, scratch_dir
from .execute import has_work, stage_transform
from .inputs import InputSlice, next_inputs


def run_derivative(
    dataset: Dataset,
    repo: OdfRepository,
    names: Mapping[DatasetId, str],
    context: IngestContext,
) -> PullResult:
    """One transform run over whatever the inputs added since the last run."""
    state = dataset.state()
    if state.transform is None:
        return PullResult(note="no transform")
    inputs = next_inputs(state, repo, names)
    if not has_work(dataset, state, inputs):
        return PullResult()
    system_time = context.now()
    context.progress("transform")
    spark = context.spark()
    with all_or_nothing(dataset), scratch_dir(context.scratch, TRANSFORM_PREFIX) as tmp:
        staged = stage_transform(spark, dataset, state, inputs, system_time, Path(tmp))
        context.progress("commit")
        blocks = commit(dataset, staged, system_time)
    size = staged.slice.size if staged.slice is not None else 0
    return PullResult(
        blocks, staged.rows, size=size, note=_no_rows_note(state.transform, inputs, staged.rows)
    )


def _no_rows_note(transform: models.SetTransform, inputs: list[InputSlice], rows: int) -> str:
    """What the run line says when the query gave nothing from rows its inputs gained:
    "updated: 1 block, 0 records" alone read as nothing to do, while a sale whose store
    row came in an earlier run had just been dropped by the join."""
    read = 0
    for i in inputs:
        if i.interval is not None:
            start, end = i.interval
            read += end - start + 1
    if rows or not read:
        return ""
    note = f"the query gave no rows from {count(read, 'new input record')}"
    if any("JOIN" in per_run_clauses(q) for q in sql_steps(transform)):
        note += (
            ": each run reads only the rows its inputs gained since the last one, so a JOIN"
            " matches rows that arrive in the same run (README: Transforms)"
        )
    return note
