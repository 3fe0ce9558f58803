"""The events that would bring one chain to its manifest, each classified.

A manifest is a definition, not a log: for every facet of a dataset (polling source,
each push source by name, transform, vocabulary, info, license, attachments, data
schema) the manifest's last event is what the dataset should be. Comparing that with the
chain's current projection (``ChainState``) gives exactly the events apply will append,
old and new side by side, and why each one is metadata-only, compatible,
needs-validation or breaking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..odf import models
from ..odf.chain import ChainState
from .ddl import DdlError, parse_columns
from .model import ChangeClass, Column, EventChange, SchemaChange
from .per_run_clauses import per_run_note, sql_steps

SourceEvent = models.SetPollingSource | models.AddPushSource


def to_json(event: models.OdfModel | None) -> dict[str, Any] | None:
    if event is None:
        return None
    data: dict[str, Any] = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def normalize_event(event: Any, resolve: Callable[[str], str]) -> Any:
    """The form an event takes in a chain: queries normalized, inputs resolved and aliased.

    ``resolve`` maps a manifest's dataset reference (name or id) to what the chain holds:
    the input's ``did:odf`` id when it exists, else the name (a dataset apply will create).
    """
    if isinstance(event, models.SetPollingSource | models.AddPushSource) and event.preprocess:
        return event.model_copy(update={"preprocess": event.preprocess.normalized()})
    if isinstance(event, models.SetTransform):
        inputs = [
            models.TransformInput(
                dataset_ref=resolve(i.dataset_ref), alias=i.alias or i.dataset_ref
            )
            for i in event.inputs
        ]
        return event.model_copy(
            update={"inputs": inputs, "transform": event.transform.normalized()}
        )
    return event


@dataclass(frozen=True)
class Facets:
    """A dataset's definition split by facet; the key names the facet in the plan."""

    events: dict[str, Any]

    @classmethod
    def of_manifest(cls, snapshot: models.DatasetSnapshot, resolve: Callable[[str], str]) -> Facets:
        events: dict[str, Any] = {}
        for event in snapshot.metadata:
            events.pop(facet_key(event), None)  # the last occurrence wins, in its position
            events[facet_key(event)] = normalize_event(event, resolve)
        return cls(events)

    @classmethod
    def of_chain(cls, state: ChainState) -> Facets:
        events: dict[str, Any] = {}
        for value in (
            state.polling_source,
            *state.push_sources.values(),
            state.transform,
            state.vocab,
            state.info,
            state.license,
            state.attachments,
        ):
            if value is not None:
                events[facet_key(value)] = value
        if state.data_schema is not None:
            events["SetDataSchema"] = models.SetDataSchema(schema_=state.data_schema)
        return cls(events)


def facet_key(event: Any) -> str:
    if isinstance(event, models.AddPushSource | models.DisablePushSource):
        return f"AddPushSource:{event.source_name}"
    if isinstance(event, models.DisablePollingSource):
        return "SetPollingSource"
    return str(event.kind)


def creation_events(desired: Facets) -> list[EventChange]:
    """Events of a new dataset, in manifest order (the Seed is implied)."""
    return [_classified(None, event) for event in desired.events.values()]


def update_events(
    desired: Facets, actual: Facets, chain_names: Mapping[str, str], *, inputs_resolve: bool = True
) -> list[EventChange]:
    """Events that take the chain to the manifest: disables first, then changes in
    manifest order. ``chain_names`` maps input ids to names so SetTransforms compare
    by what they mean rather than by how the reference was spelled. ``inputs_resolve``
    is False when an input names no dataset: that is an error of its own, and a verdict
    on inputs it replaces would only count it twice."""
    removals: list[EventChange] = []
    for key, old in actual.events.items():
        if key in desired.events:
            continue
        if isinstance(old, models.SetPollingSource):
            removals.append(_disable(old, models.DisablePollingSource()))
        elif isinstance(old, models.AddPushSource):
            removals.append(_disable(old, models.DisablePushSource(source_name=old.source_name)))
    changes = []
    for key, new in desired.events.items():
        old = actual.events.get(key)
        if old is None or _comparable(old, chain_names) != _comparable(new, chain_names):
            changes.append(_classified(old, new, inputs_resolve=inputs_resolve, chains=chain_names))
    return removals + changes


def _comparable(event: Any, chain_names: Mapping[str, str]) -> Any:
    if isinstance(event, models.SetTransform):
        inputs = [
            i.model_copy(update={"dataset_ref": chain_names.get(i.dataset_ref, i.dataset_ref)})
            for i in event.inputs
        ]
        return event.model_copy(update={"inputs": inputs})
    return event


def _disable(old: SourceEvent, event: models.OdfModel) -> EventChange:
    return EventChange(
        kind=str(event.model_dump()["kind"]),
        key=facet_key(old),
        before=to_json(old),
        after=to_json(event),
        change_class=ChangeClass.COMPATIBLE,
        reasons=("the source is disabled: no more data will be ingested from it",),
    )


def _classified(
    old: Any, new: Any, *, inputs_resolve: bool = True, chains: Mapping[str, str] | None = None
) -> EventChange:
    change_class, reasons, schema = classify(old, new, inputs_resolve=inputs_resolve, chains=chains)
    return EventChange(
        kind=new.kind,
        key=facet_key(new),
        before=to_json(old),
        after=to_json(new),
        change_class=change_class,
        reasons=tuple(reasons),
        schema=schema,
    )


def classify(
    old: Any, new: Any, *, inputs_resolve: bool = True, chains: Mapping[str, str] | None = None
) -> tuple[ChangeClass, list[str], SchemaChange | None]:
    """The class of replacing ``old`` (None: nothing before) by ``new``, and why.
    ``chains``: the ids of the chains there are (to their names), when known."""
    if isinstance(new, models.SetInfo | models.SetLicense | models.SetAttachments):
        return ChangeClass.METADATA_ONLY, [f"{new.kind} changes descriptive metadata only"], None
    if isinstance(new, models.SetVocab):
        if old is None:
            return ChangeClass.COMPATIBLE, ["sets the names of the system columns"], None
        return ChangeClass.BREAKING, ["renames system columns that readers depend on"], None
    if isinstance(new, models.SetTransform):
        return _classify_transform(old, new, inputs_resolve, chains)
    if isinstance(new, models.SetPollingSource | models.AddPushSource):
        return _classify_source(old, new)
    if isinstance(new, models.SetDataSchema):
        return ChangeClass.BREAKING, ["replaces the declared data schema"], None
    return ChangeClass.COMPATIBLE, [], None


def _classify_transform(
    old: models.SetTransform | None,
    new: models.SetTransform,
    inputs_resolve: bool,
    chains: Mapping[str, str] | None,
) -> tuple[ChangeClass, list[str], SchemaChange | None]:
    note = per_run_note(sql_steps(new))
    if old is None:
        reasons = ["a new query: the engine analyses it", *([note] if note else [])]
        return ChangeClass.NEEDS_VALIDATION, reasons, None
    reasons = []
    # An input dropped or replaced (a renamed input is a new dataset): its data is in
    # this dataset's history already, and an input new to the query is read from its
    # first slice, so whatever the two share would be there twice. Only a recreate gives
    # the output that the new inputs alone define.
    # An input under the same alias whose old id no chain has any more was recreated (by
    # an earlier run that stopped before this reader): the same input, whose reader is
    # recreated for it (``recreate``), as it would have been in that run, with no new
    # approval. Judged breaking, it stopped every later plan on a missing override.
    kept = {i.dataset_ref for i in new.inputs}
    aliases = {i.alias or i.dataset_ref for i in new.inputs}
    gone = [
        i.alias or i.dataset_ref
        for i in old.inputs
        if i.dataset_ref not in kept
        and not (_recreated(i.dataset_ref, chains) and (i.alias or i.dataset_ref) in aliases)
    ]
    if gone and inputs_resolve:
        reasons.append(
            f"stops reading {', '.join(gone)}, whose data this dataset holds already: only"
            " a recreate makes its data the new inputs' alone"
        )
        return ChangeClass.BREAKING, reasons, None
    if [(i.dataset_ref, i.alias) for i in old.inputs] != [
        (i.dataset_ref, i.alias) for i in new.inputs
    ]:
        reasons.append("the inputs changed")
    if old.transform != new.transform:
        reasons += ["the query changed: the engine analyses it", *([note] if note else [])]
    return ChangeClass.NEEDS_VALIDATION, reasons, None


def _classify_source(
    old: SourceEvent | None, new: SourceEvent
) -> tuple[ChangeClass, list[str], SchemaChange | None]:
    schema = read_schema_change(old, new)
    if old is None:
        reasons = ["a new source"]
        if new.preprocess is not None:
            return ChangeClass.NEEDS_VALIDATION, [*reasons, "a new preprocess query"], schema
        return ChangeClass.COMPATIBLE, reasons, schema
    worst, reasons = ChangeClass.COMPATIBLE, []
    if type(old.merge) is not type(new.merge):
        worst = ChangeClass.BREAKING
        reasons.append(f"merge strategy changes from {old.merge.kind} to {new.merge.kind}")
    elif getattr(old.merge, "primary_key", None) != getattr(new.merge, "primary_key", None):
        worst = ChangeClass.BREAKING
        reasons.append(
            f"primary key changes from {getattr(old.merge, 'primary_key', None)} "
            f"to {getattr(new.merge, 'primary_key', None)}"
        )
    elif old.merge != new.merge:
        reasons.append("merge options change (compare columns)")
    if schema is not None:
        schema_class, schema_reasons = classify_schema(schema)
        worst = max(worst, schema_class, key=lambda c: c.rank)
        reasons += schema_reasons
    if old.preprocess != new.preprocess:
        worst = max(worst, ChangeClass.NEEDS_VALIDATION, key=lambda c: c.rank)
        reasons.append("the preprocess query changed: the engine analyses it")
    for facet in ("fetch", "prepare"):
        if getattr(old, facet, None) != getattr(new, facet, None):
            reasons.append(f"{facet} changes where or how data is obtained")
    if old.read != new.read and schema is None:
        reasons.append("reader options change")
    return worst, reasons, schema


def declared_columns(source: SourceEvent | None) -> tuple[Column, ...] | None:
    """The read schema a source declares, or None when it has none (or cannot be read)."""
    if source is None or not source.read.schema_:
        return None
    try:
        return parse_columns(source.read.schema_)
    except DdlError:
        return None


def read_schema_change(old: SourceEvent | None, new: SourceEvent) -> SchemaChange | None:
    before, after = declared_columns(old), declared_columns(new)
    if before == after or after is None:
        return None
    return schema_change(before, after)


def schema_change(
    before: tuple[Column, ...] | None, after: tuple[Column, ...] | None
) -> SchemaChange:
    """Added, removed, retyped and nullability-changed columns, matched by name.

    A change that only adds columns is appended to the chain as a schema that keeps the
    existing columns in their order and puts the new ones last (kamu 0.254+; matched
    by name, wherever the manifest writes them), so ``after`` is given in that order: the
    order apply writes. Any other change recreates the dataset in the declared order."""
    old = {c.name: c for c in before or ()}
    new = {c.name: c for c in after or ()}
    added = tuple(n for n in new if n not in old)
    removed = tuple(n for n in old if n not in new)
    retyped = tuple(
        (n, old[n].type, new[n].type) for n in new if n in old and old[n].type != new[n].type
    )
    nullability = tuple(
        (n, old[n].nullable, new[n].nullable)
        for n in new
        if n in old and old[n].nullable != new[n].nullable
    )
    if before and after and added and not (removed or retyped or nullability):
        after = (*(new[n] for n in old), *(new[n] for n in added))
    return SchemaChange(
        before=before,
        after=after,
        added=added,
        removed=removed,
        retyped=retyped,
        nullability=nullability,
    )


def _recreated(ref: str, chains: Mapping[str, str] | None) -> bool:
    """Whether ``ref`` is a chain's id that no chain has any more."""
    return chains is not None and ref.startswith("did:") and ref not in chains


def classify_schema(change: SchemaChange) -> tuple[ChangeClass, list[str]]:
    """Adding nullable columns is compatible; anything readers could trip on is breaking.

    Apply matches columns by name and keeps the dataset's own order, appending added
    columns at the end (``odf.schema_evolution``): a new order is no change to readers."""
    if change.before is None:
        return ChangeClass.COMPATIBLE, []
    reasons = []
    new = {c.name: c for c in change.after or ()}
    if change.removed:
        reasons.append("drops or renames columns: " + ", ".join(change.removed))
    if change.retyped:
        reasons.append(
            "retypes columns: " + ", ".join(f"{n} {a} -> {b}" for n, a, b in change.retyped)
        )
    if change.nullability:
        reasons.append("changes nullability: " + ", ".join(n for n, _, _ in change.nullability))
    required = [n for n in change.added if not new[n].nullable]
    if required:
        reasons.append("adds NOT NULL columns: " + ", ".join(required))
    if reasons:
        return ChangeClass.BREAKING, reasons
    kept = [c.name for c in change.before if c.name in new]
    if kept != [n for n in new if n in kept]:
        reasons.append(f"lists columns in another order: the dataset keeps {', '.join(kept)}")
    if change.added:
        reasons.append("adds nullable columns: " + ", ".join(change.added))
    return ChangeClass.COMPATIBLE, reasons
