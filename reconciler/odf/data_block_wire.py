"""Parsed data blocks as plain tuples, to hand them from one process to another.

A full integrity check parses part of a long chain in a forked child
(``content_sweep``). What the child parsed must come back cheaply: pickling a
``DataBlock`` costs about as much as parsing the block again (its timestamps and source
state are objects pickle rebuilds field by field), while ``marshal`` of the same fields
as built-in values, and rebuilding the tuples here, costs a third of a parse. The
rebuilt block equals the one ``codec.decode_data_block`` gives with its source state as
fields (``state_fields``), models included (the same fields marked set), so the rules
cannot tell where it was parsed.
"""

from __future__ import annotations

from typing import Any

from . import models
from .data_step import DataBlock, DataStep, NewCheckpoint, NewData, SourceStateFields, new_tuple
from .fbs_reader import build_model
from .multiformat import DatasetId, Multihash
from .timestamps import Timestamp

Plain = tuple[Any, ...]
"""A ``DataBlock`` as nested tuples of ``str``, ``int`` and None (``marshal``-able)."""


def to_plain(block: DataBlock) -> Plain:
    """The block's fields as built-in values; ``from_plain`` rebuilds it."""
    step = block.step
    time, data, checkpoint, watermark = (
        block.system_time,
        step.new_data,
        step.new_checkpoint,
        step.new_watermark,
    )
    return (
        time.seconds,
        time.nanos,
        _text(block.prev_block_hash),
        block.sequence_number,
        None if step.query_inputs is None else tuple(_set_fields(i) for i in step.query_inputs),
        _text(step.prev_checkpoint),
        step.prev_offset,
        None if data is None else (str(data[0]), str(data[1]), data[2], data[3], data[4]),
        None if checkpoint is None else (str(checkpoint[0]), checkpoint[1]),
        None if watermark is None else (watermark.seconds, watermark.nanos),
        None
        if step.new_source_state is None
        else tuple(SourceStateFields.of(step.new_source_state)),
    )


def from_plain(plain: Plain) -> DataBlock:
    """The ``DataBlock`` that ``to_plain`` was given, its source state as its fields."""
    (
        seconds,
        nanos,
        prev,
        seq,
        inputs,
        prev_checkpoint,
        prev_offset,
        data,
        checkpoint,
        watermark,
        state,
    ) = plain
    step = new_tuple(
        DataStep,
        (
            None if inputs is None else [_input(fields) for fields in inputs],
            _hash(prev_checkpoint),
            prev_offset,
            None
            if data is None
            else new_tuple(NewData, (_hash(data[0]), _hash(data[1]), data[2], data[3], data[4])),
            None
            if checkpoint is None
            else new_tuple(NewCheckpoint, (_hash(checkpoint[0]), checkpoint[1])),
            None if watermark is None else Timestamp(*watermark),
            None if state is None else new_tuple(SourceStateFields, state),
        ),
    )
    return new_tuple(DataBlock, (Timestamp(seconds, nanos), _hash(prev), seq, step))


def _text(hash_: Multihash | None) -> str | None:
    return None if hash_ is None else str(hash_)


def _hash(text: str | None) -> Multihash | None:
    """A multihash parsed once already (in the child): wrapped, not validated again."""
    return None if text is None else str.__new__(Multihash, text)


def _set_fields(model: models.OdfModel) -> tuple[tuple[str, Any], ...]:
    """The fields the codec set on ``model`` (it sets only those the block holds), as
    (name, built-in value) pairs in declaration order."""
    values = model.__dict__
    return tuple(
        (name, value if type(value) in (int, str) else str(value))
        for name, value in values.items()
        if name in model.__pydantic_fields_set__
    )


def _input(fields: tuple[tuple[str, Any], ...]) -> models.ExecuteTransformInput:
    values = dict(fields)
    values["dataset_id"] = str.__new__(DatasetId, values["dataset_id"])
    for name in ("prev_block_hash", "new_block_hash"):
        if name in values:
            values[name] = _hash(values[name])
    return build_model(models.ExecuteTransformInput, values)  # type: ignore[no-any-return]
