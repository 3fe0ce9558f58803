"""The metadata part of applying a plan: append exactly the events the plan showed.

New datasets get a Seed with a fresh ``did:odf`` id, then their events, all sharing one
system time as kamu does. Transform inputs that name a dataset created in the same run
are resolved to its new id here, because the plan (which writes nothing) could not know
it. ``apply.run`` calls this in the plan's dependency order, so an input is always
created before its readers.

A Seed is appended only where there is no head at all (compare-and-swap from "no chain"),
so a dataset another run created in the meantime is reported as that conflict, never
given a second Seed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from ..odf import DatasetId, Timestamp, models
from ..odf.chain import ChainRuleError
from ..odf.repository import Dataset, HeadMovedError, OdfRepository, RepositoryError
from ..plan.model import Action, DatasetPlan


@dataclass(frozen=True)
class MetadataResult:
    """What happened to one dataset: blocks appended, or why it failed."""

    dataset: str
    blocks: int = 0
    error: str | None = None
    deleted: bool = False


def _event(data: dict[str, Any], ids: dict[str, str]) -> Any:
    event: Any = models.MetadataBlock.model_validate(
        {"systemTime": "1970-01-01T00:00:00Z", "sequenceNumber": 0, "event": data}
    ).event
    if isinstance(event, models.SetTransform):
        inputs = [
            i.model_copy(update={"dataset_ref": ids.get(i.dataset_ref, i.dataset_ref)})
            for i in event.inputs
        ]
        event = event.model_copy(update={"inputs": inputs})
    return event


def apply_dataset(
    repo: OdfRepository, plan: DatasetPlan, system_time: Timestamp, ids: dict[str, str]
) -> MetadataResult:
    """Append one dataset's planned events; on a rule violation nothing after it is written."""
    return append_planned(repo.dataset(plan.name), plan, system_time, ids)


def append_planned(
    dataset: Dataset, plan: DatasetPlan, system_time: Timestamp, ids: dict[str, str]
) -> MetadataResult:
    """``apply_dataset`` through a given ``Dataset`` object, so that a caller recording it
    (``Dataset.recording``) can take these blocks back with its own writes: a new
    dataset's metadata is kept only together with its first data
    (``apply._first_data_or_nothing``)."""
    blocks = 0
    try:
        if plan.action is Action.CREATE:
            dataset_id, _ = DatasetId.generate()
            kind = models.DatasetKind(plan.kind)
            seed = models.Seed(dataset_id=dataset_id, dataset_kind=kind)
            dataset.create(seed, system_time)
            dataset.write_alias(plan.name)
            ids[plan.name] = str(dataset_id)
            blocks += 1
        for change in plan.events:
            if change.after is not None:
                dataset.append_event(_event(change.after, ids), system_time)
                blocks += 1
    except HeadMovedError:
        kept = (
            f"{blocks} block(s) of this run were kept" if blocks else "nothing of this run was kept"
        )
        return MetadataResult(plan.name, blocks, f"another run advanced {plan.name}; {kept}")
    except (ChainRuleError, RepositoryError, ValueError) as e:
        return MetadataResult(plan.name, blocks, f"{type(e).__name__}: {e}")
    return MetadataResult(plan.name, blocks)


def recreate_metadata(
    staged: Dataset, plan: DatasetPlan, system_time: Timestamp, ids: dict[str, str]
) -> MetadataResult:
    """Start a recreated dataset's new chain in ``staged`` (``OdfRepository.staging``): a
    Seed with a fresh ``did:odf`` id, then exactly the plan's ``Recreate.events``, inputs
    recreated before it resolved to their new ids through ``ids``. The folder is private
    to this run until it replaces the old chain, so no other writer can interfere."""
    assert plan.recreate is not None, "only a RECREATE has a new chain"
    dataset_id, _ = DatasetId.generate()
    kind = models.DatasetKind(plan.kind)
    try:
        staged.create(models.Seed(dataset_id=dataset_id, dataset_kind=kind), system_time)
        staged.write_alias(plan.name)
        for data in plan.recreate.events:
            staged.append_event(_event(data, ids), system_time)
    except (ChainRuleError, RepositoryError, ValueError) as e:
        return MetadataResult(plan.name, error=f"{type(e).__name__}: {e}")
    return MetadataResult(plan.name, 1 + len(plan.recreate.events))


def delete_dataset(repo: OdfRepository, plan: DatasetPlan) -> str | None:
    """Remove an orphaned chain (only ever planned when the user asked with --prune);
    returns the error, if any."""
    try:
        shutil.rmtree(repo.dataset(plan.name).root)
    except OSError as e:
        return f"cannot delete: {e}"
    return None
