"""Which datasets a plan recreates, and how: the decision, with no side effects.

A breaking change cannot be appended to a chain: the data already committed has the old
shape, and a derivative's next run would not match it. With the manifest's reviewed
override (``# reconcile: allow-breaking-change: …``) the change is carried out by
*recreating* the dataset: a new chain for the same name, with a fresh ``did:odf`` Seed,
recomputed from its inputs' whole history (a root: every file read again). Every
dataset that reads a recreated one is recreated in turn, since its chain names an id
that will no longer exist; and so is a derivative whose chain already names an id no
chain has (a run that stopped between a dataset and its readers), which is how the
repository heals on the next run.

A root can only be recreated when its history can be read again: a ``FilesGlob`` whose
every file the chain ingested still matches. Anything else (a URL or a container gives
today's data, not the history; pushed data is nowhere to be read) is a problem naming
why, and the plan fails.

The plan says per dataset why it is recreated, the datasets recreated with it, how many
input records it reprocesses, and the new chain's events (``model.Recreate``), so that
apply does exactly what the reviewer read.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..odf import models
from ..odf.chain import ChainState
from .desired import DesiredDataset, DesiredState, polling_source
from .diff import Facets, to_json
from .model import Action, ChangeClass, DatasetPlan, EventChange, Problem, Recreate
from .pending import GlobListings
from .policies import field_location

ATTACHMENT_PATH = "RECREATED.md"
"""The attachment of every recreated chain that says which chain it replaced, and why."""


@dataclass(frozen=True)
class RootHistory:
    """What a root's chain ingested, read from its data blocks."""

    ingested: tuple[str, ...] = ()  # file names the chain's AddData source states name
    pushed: int = 0  # data slices with no source state: pushed, or from a source giving none
    unreadable: str | None = None  # why the chain could not be read


HistoryReader = Callable[[str], RootHistory]
"""Reads the history of the root of that name (``root_history.history_reader``)."""


def plan_recreates(
    plans: Mapping[str, DatasetPlan],
    desired: DesiredState,
    actual: Mapping[str, ChainState],
    *,
    resolve: Callable[[str], str],
    history: HistoryReader | None,
    listings: GlobListings | None,
    problems: list[Problem],
    left_out: frozenset[str] = frozenset(),
) -> dict[str, DatasetPlan]:
    """``plans`` with every dataset to recreate turned into a RECREATE; the reasons a
    root cannot be recreated go to ``problems``. ``history`` and ``listings`` (the files
    each ``FilesGlob`` matches now) tell whether a root's files are all still there.
    ``left_out`` are not planned (``Plan.unreadable``, ``Plan.blocked``), so never
    recreated: a reader of a chain that cannot be read finds no chain with its input's
    id, which says nothing of an input recreated."""
    names = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id is not None}
    causes: dict[str, str] = {}
    for name, ds in desired.datasets.items():  # dependency order: inputs first
        state = actual.get(name)
        if state is None or state.dataset_id is None or state.head is None or name in left_out:
            continue
        cause = _breaking_cause(plans[name]) or _input_cause(ds, state, causes, names)
        if cause is not None:
            causes[name] = cause

    def new_ref(ref: str) -> str:
        """A recreated input gets its new id only in apply: named here, resolved there."""
        name = names.get(ref, ref)
        return name if name in causes else resolve(ref)

    out = dict(plans)
    for name, cause in causes.items():
        ds = desired.datasets[name]
        files: tuple[str, ...] = ()
        if ds.snapshot.kind is models.DatasetKind.ROOT:
            files, problem = _refetch(ds, history, listings)
            problems += [problem] if problem is not None else []
        recreate = _recreate(ds, actual[name], cause, actual, causes)
        recreate = replace(
            recreate,
            recreated_with=tuple(n for n in desired.downstream(name) if n in causes),
            files=files,
        )
        events = (_attachment(recreate, ds.override), *_chain_events(ds, new_ref))
        out[name] = replace(
            plans[name],
            action=Action.RECREATE,
            recreate=replace(recreate, events=events),
            pending=(),
        )
    for name, plan in plans.items():
        if plan.action is Action.CREATE and causes.keys() & set(plan.inputs):
            out[name] = replace(plan, events=tuple(_named(e, names, causes) for e in plan.events))
    return out


def _named(change: EventChange, names: Mapping[str, str], causes: Mapping[str, str]) -> EventChange:
    """A new dataset's SetTransform with each input recreated in the same run named, not
    given its old id: the new chain's id exists only once apply has built it, and apply
    resolves a name to it (the same as a recreated reader's events)."""
    if change.kind != "SetTransform" or change.after is None:
        return change
    inputs = [
        {**i, "datasetRef": names[i["datasetRef"]]} if names.get(i["datasetRef"]) in causes else i
        for i in change.after.get("inputs", [])
    ]
    return replace(change, after={**change.after, "inputs": inputs})


def _recreate(
    ds: DesiredDataset,
    state: ChainState,
    cause: str,
    actual: Mapping[str, ChainState],
    causes: Mapping[str, str],
) -> Recreate:
    """The chain replaced and the records reprocessed: a derivative's inputs' counts (a
    recreated input's is its current one), a root's own count (its files are read again)."""
    estimated: tuple[str, ...]
    if ds.snapshot.kind is models.DatasetKind.ROOT:
        records, estimated = state.next_offset, (ds.name,)
    else:
        records = sum(_records(actual.get(i)) for i in ds.inputs)
        estimated = tuple(i for i in ds.inputs if i in causes)
    uncounted = tuple(i for i in ds.inputs if i not in actual)
    return Recreate(
        reason=cause,
        replaces=str(state.dataset_id),
        replaced_head=str(state.head),
        replaced_blocks=state.sequence_number + 1,
        input_records=records,
        estimated=estimated,
        uncounted=uncounted if ds.snapshot.kind is not models.DatasetKind.ROOT else (),
    )


def _breaking_cause(plan: DatasetPlan) -> str | None:
    """The breaking change the manifest's override allows, in words; None if none."""
    if plan.override is None or plan.change_class is not ChangeClass.BREAKING:
        return None
    changes = [
        f"{e.key} ({'; '.join(e.reasons)})" if e.reasons else e.key
        for e in plan.events
        if e.change_class is ChangeClass.BREAKING
    ]
    return "breaking change to " + ", ".join(changes)


def _input_cause(
    ds: DesiredDataset, state: ChainState, causes: Mapping[str, str], known_ids: Mapping[str, str]
) -> str | None:
    """Why a derivative must follow its inputs: one is recreated now, or its chain reads
    an id that no chain has any more (an input recreated by an earlier run)."""
    recreated = [i for i in ds.inputs if i in causes]
    if recreated:
        return f"reads {recreated[0]}, which is recreated"
    gone = [i.dataset_ref for i in (state.transform.inputs if state.transform else ())]
    gone = [ref for ref in gone if ref not in known_ids]
    if gone:
        return f"its chain reads {gone[0]}, which no chain has any more (an input was recreated)"
    return None


def _records(state: ChainState | None) -> int:
    """How many records a chain holds (every offset, retractions and corrections too)."""
    return 0 if state is None else state.next_offset


def _chain_events(ds: DesiredDataset, resolve: Callable[[str], str]) -> list[dict[str, Any]]:
    """The manifest's events as the new chain holds them, in manifest order."""
    facets = Facets.of_manifest(ds.snapshot, resolve)
    return [event for event in map(to_json, facets.events.values()) if event is not None]


def _attachment(recreate: Recreate, override: str | None) -> dict[str, Any]:
    """The ``SetAttachments`` written right after the new Seed: ``RECREATED.md`` says what
    the chain replaced and why, so that ``reconcile log`` shows it in the chain itself.
    A manifest's own ``SetAttachments`` comes later and takes over as the dataset's
    attachments; this block stays in the chain."""
    lines = [
        "# Recreated",
        "",
        f"This chain replaces {recreate.replaces} at head {recreate.replaced_head} "
        f"({recreate.replaced_blocks} blocks), because: {recreate.reason}.",
    ]
    if override is not None:
        lines += ["", f"Override: {override}"]
    lines += ["", "The replaced chain is in the repository's git history."]
    content = "\n".join(lines) + "\n"
    event = models.SetAttachments(
        attachments=models.AttachmentsEmbedded(
            items=[models.AttachmentEmbedded(path=ATTACHMENT_PATH, content=content)]
        )
    )
    return to_json(event) or {}


def _refetch(
    ds: DesiredDataset, history: HistoryReader | None, listings: GlobListings | None
) -> tuple[tuple[str, ...], Problem | None]:
    """The files a root reads again, and the problem that stops it, if any."""
    index, source = polling_source(ds.snapshot)
    field = f"content.metadata[{index}].fetch" if source is not None else "content.metadata"
    where = ds.location
    if source is not None:
        where = field_location(ds.loaded, ("content", "metadata", index, "fetch"))

    def problem(why: str) -> Problem:
        return Problem(f"cannot be recreated: {why}", dataset=ds.name, location=where, field=field)

    if source is None:
        return (), problem("it has no polling source, and data pushed to it cannot be read again")
    if not isinstance(source.fetch, models.FetchStepFilesGlob):
        return (), problem(
            f"its {source.fetch.kind} source gives today's data, not the history the chain "
            "holds; only a FilesGlob whose files are all still there can be read again"
        )
    listed = None if listings is None else listings.get(ds.name)
    if history is None or listed is None:
        return (), problem(f"the files {source.fetch.path} matches could not be listed")
    found = history(ds.name)
    files = tuple(sorted(listed))
    if found.unreadable is not None:
        return files, problem(found.unreadable)
    if found.pushed:
        return files, problem(
            f"{found.pushed} of its data slices came without a source state (pushed, or "
            "from a source that gave none) and cannot be read again"
        )
    missing = [name for name in found.ingested if name not in set(files)]
    if missing:
        return files, problem(
            f"files it ingested are gone: {', '.join(missing)} "
            f"({source.fetch.path} now matches: {', '.join(files) or 'nothing'}); git keeps"
            f" them: `git log --diff-filter=D --name-only -- {shlex.quote(source.fetch.path)}`"
            " names the commit that deleted each, and `git restore --source <commit>^ --"
            " <file>` brings it back"
        )
    return files, None
