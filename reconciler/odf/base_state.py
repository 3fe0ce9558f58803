"""The chain's state at an earlier head, from only the blocks new appends' rules read.

Checking blocks appended since a base (``verify --base``) needs the state they follow,
but not all of it: an ``AddData`` is judged by the dataset kind, the data cursor (last
offset, checkpoint, watermark), whether a schema exists and its own source's last state;
a ``SetInfo`` only by the current ``SetInfo``. Each of these is settled by the newest
block of some kind, so walking back from the base head until every needed field is
settled usually reads a handful of blocks, not the chain. The walk reaches the Seed
only when a field is settled nowhere later (a first data block, ``SetPollingSource``
asking which push sources are active).

The blocks walked existed at the base, which was verified when it was merged: they are
decoded without checking their hashes, and blocks the walk does not need are not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import models
from .chain import ChainState, InputCursor
from .models import DatasetKind, MetadataBlock
from .multiformat import Multihash

Need = tuple[str, Any]
"""A field of the state to settle: ``("cursor", None)``, ``("source_state", name)``…"""

_SCHEMA_PRESENT = b""
"""Stands for "some schema exists" when data proves it and no rule compares the bytes."""

_ROOT_EVENTS = (
    models.AddData,
    models.SetPollingSource,
    models.AddPushSource,
    models.DisablePollingSource,
    models.DisablePushSource,
)
_DERIVATIVE_EVENTS = (models.ExecuteTransform, models.SetTransform)
_SETTERS = {
    models.SetVocab: "vocab",
    models.SetInfo: "info",
    models.SetLicense: "license",
    models.SetAttachments: "attachments",
}


def needs_of(events: Iterable[models.OdfModel]) -> set[Need]:
    """Every field the chain rules (``chain.validate_append``) read for these events."""
    needs: set[Need] = set()
    for event in events:
        if isinstance(event, _ROOT_EVENTS + _DERIVATIVE_EVENTS):
            needs.add(("kind", None))
        match event:
            case models.AddData():
                needs |= {("cursor", None), ("schema_present", None)}
                if event.new_source_state is not None:
                    needs.add(("source_state", event.new_source_state.source_name))
            case models.ExecuteTransform():
                needs |= {("cursor", None), ("schema_present", None), ("transform", None)}
                needs |= {("input", qi.dataset_id) for qi in event.query_inputs}
                needs.add(("input_order", None))
            case models.SetPollingSource() | models.AddPushSource():
                needs |= {("polling_source", None), ("push_sources", None)}
            case models.DisablePollingSource():
                needs.add(("polling_source", None))
            case models.DisablePushSource():
                needs.add(("push_sources", None))
            case models.SetTransform():
                needs.add(("transform", None))
            case models.SetDataSchema():
                needs.add(("schema", None))
            case _ if type(event) in _SETTERS:
                needs.add((_SETTERS[type(event)], None))
    return needs


def state_at(
    head: Multihash, needs: set[Need], read: Callable[[Multihash], MetadataBlock]
) -> tuple[ChainState, int]:
    """The state at ``head`` with every needed field settled, and how many blocks it read.

    ``read`` gets a block by hash (raising the storage's error when it is missing).
    Fields nobody needs keep their empty values.
    """
    head_block = read(head)
    fields: dict[str, Any] = {
        "head": head,
        "sequence_number": head_block.sequence_number,
        "system_time": head_block.system_time,
        "push_sources": {},
        "source_states": {},
        "inputs": {},
    }
    pending = set(needs)  # push sources are settled only at the Seed: they accumulate
    block: MetadataBlock | None = head_block
    read_count = 1
    while block is not None and pending:
        _settle(block, pending, fields)
        if block.prev_block_hash is None:
            break
        if pending:
            block = read(block.prev_block_hash)
            read_count += 1
    return ChainState(**fields), read_count


def _settle(block: MetadataBlock, pending: set[Need], fields: dict[str, Any]) -> None:
    """Settle every pending field this block (walking newest first) decides."""
    event = block.event
    if ("kind", None) in pending:
        if isinstance(event, models.Seed):
            _done(pending, fields, "kind", event.dataset_kind)
        elif isinstance(event, _ROOT_EVENTS):
            _done(pending, fields, "kind", DatasetKind.ROOT)
        elif isinstance(event, _DERIVATIVE_EVENTS):
            _done(pending, fields, "kind", DatasetKind.DERIVATIVE)
    match event:
        case models.AddData() | models.ExecuteTransform():
            _settle_data(event, pending, fields)
        case models.SetDataSchema():
            pending.discard(("schema_present", None))
            _done(pending, fields, "schema", event.schema_, "data_schema")
        case models.SetTransform():
            _done(pending, fields, "transform", event)
        case models.SetPollingSource():
            _done(pending, fields, "polling_source", event)
        case models.DisablePollingSource():
            _done(pending, fields, "polling_source", None)
        case models.AddPushSource() | models.DisablePushSource():
            if ("push_sources", None) in pending:
                active = event if isinstance(event, models.AddPushSource) else None
                fields["push_sources"].setdefault(event.source_name, active)
        case _ if type(event) in _SETTERS:
            _done(pending, fields, _SETTERS[type(event)], event)
    if block.prev_block_hash is None:  # the Seed: whatever is still pending was never set
        if ("push_sources", None) in pending:
            fields["push_sources"] = {k: v for k, v in fields["push_sources"].items() if v}
        pending.clear()


def _settle_data(
    event: models.AddData | models.ExecuteTransform, pending: set[Need], fields: dict[str, Any]
) -> None:
    if ("cursor", None) in pending:
        pending.discard(("cursor", None))
        data = event.new_data
        fields["last_offset"] = data.offset_interval.end if data else event.prev_offset
        checkpoint = event.new_checkpoint
        fields["checkpoint"] = checkpoint.physical_hash if checkpoint else None
        fields["watermark"] = event.new_watermark
        if fields["last_offset"] is not None:  # data exists, so a schema came before it
            _schema_present(pending, fields)
    if event.new_data is not None:
        _schema_present(pending, fields)
    if isinstance(event, models.AddData):
        state = event.new_source_state
        if state is not None and ("source_state", state.source_name) in pending:
            pending.discard(("source_state", state.source_name))
            fields["source_states"][state.source_name] = state
        return
    if ("input_order", None) in pending:
        _done(pending, fields, "input_order", tuple(qi.dataset_id for qi in event.query_inputs))
    for qi in event.query_inputs:
        if ("input", qi.dataset_id) in pending:
            pending.discard(("input", qi.dataset_id))
            offset = qi.new_offset if qi.new_offset is not None else qi.prev_offset
            fields["inputs"][qi.dataset_id] = InputCursor(
                qi.new_block_hash or qi.prev_block_hash, offset
            )


def _schema_present(pending: set[Need], fields: dict[str, Any]) -> None:
    if ("schema_present", None) in pending:
        pending.discard(("schema_present", None))
        fields.setdefault("data_schema", _SCHEMA_PRESENT)


def _done(
    pending: set[Need], fields: dict[str, Any], need: str, value: Any, name: str | None = None
) -> None:
    if (need, None) in pending:
        pending.discard((need, None))
        fields[name or need] = value
