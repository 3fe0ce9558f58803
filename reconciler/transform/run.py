"""Run a derivative dataset: consume its inputs' new slices with its query, and commit.

Like a root pull, a run is all or nothing: on failure the head goes back and the files
it added are removed. Inputs must already be up to date, so ``apply`` runs derivatives
after their inputs, in dependency order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..ingest.pull import IngestContext, PullResult
from ..odf.multiformat import DatasetId
from ..odf.repository import Dataset, OdfRepository
from ..writer.commit import all_or_nothing, commit
from ..writer.scratch import TRANSFORM_PREFIX, scratch_dir
from .execute import has_work, stage_transform
from .inputs import next_inputs


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
    return PullResult(blocks, staged.rows, size=size)
