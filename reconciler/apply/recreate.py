"""Carry out a RECREATE: build the new chain beside the old one, then swap them.

The plan's ``Recreate`` says what the new chain holds (``plan/recreate.py``). Apply builds
it in a staging folder of the repository (``OdfRepository.staging``): the Seed with a
fresh ``did:odf`` id and the planned events (``apply.metadata.recreate_metadata``), then
the whole history's data, pulled or transformed into it by the usual code. Only when all
of that succeeded does it take the old folder's place (``OdfRepository.replace``), so a
failure or a crash leaves the old chain exactly as it was, and a crash during the swap is
settled by the next run's sweep. The old chain stays in git history.

Datasets are recreated in the plan's dependency order, so when a reader is rebuilt its
recreated inputs are already in place, under the ids recorded in ``ids`` here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..odf import Timestamp
from ..odf.repository import Dataset, OdfRepository
from ..plan.model import DatasetPlan
from .metadata import MetadataResult, recreate_metadata


@contextmanager
def recreating(
    repo: OdfRepository, plan: DatasetPlan, system_time: Timestamp, ids: dict[str, str]
) -> Iterator[tuple[Dataset, MetadataResult]]:
    """The new chain's staging dataset, with its metadata written, for the body to fill
    with data; when the body ends normally the new chain replaces the old one and ``ids``
    maps the name to its new id, and when it raises the new chain is discarded."""
    staged = repo.staging(plan.name)
    try:
        yield staged, recreate_metadata(staged, plan, system_time, ids)
    except BaseException:
        repo.discard(staged)
        raise
    dataset_id = staged.state().dataset_id
    repo.replace(plan.name, staged)
    ids[plan.name] = str(dataset_id)
