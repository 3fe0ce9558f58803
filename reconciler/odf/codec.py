"""Canonical FlatBuffers encoding of metadata blocks, byte-compatible with kamu-cli.

The flatc-generated object API in ``fbs/`` already builds every table the canonical way
(children first in schema order, then the fields in schema order, defaults omitted,
optional scalars written whenever present), so encoding only maps our pydantic models
onto those generated objects. Models and tables share names, so the mapping is generic:
one plan per model class, derived from its annotations. Decoding skips the object API,
which costs several times the reading itself: data blocks have a reader of their own
below, every other block goes through the schema-driven one in ``fbs_reader``.

Two details are ours: the manifest envelope, and the ``Timestamp`` struct, which
manifest version 2 writes unaligned (as flatbuffers-rs did before kamu 0.265) and
version 3 writes 4-aligned. See ``shared/odf/BINARY-FORMAT.md`` §2.
"""

from __future__ import annotations

import importlib
import struct
from functools import cache
from typing import Any

import flatbuffers
import numpy as np

from . import models
from .data_step import (
    DataBlock,
    DataStep,
    NewCheckpoint,
    NewData,
    SourceStateFields,
    new_tuple,
    state_model,
)
from .fbs.Manifest import ManifestT
from .fbs.Timestamp import CreateTimestamp
from .fbs_reader import build_model, missing_field, read_root, slot_offsets
from .multiformat import ODF_METADATA_BLOCK, DatasetId, Multihash
from .timestamps import Timestamp

SUPPORTED_VERSIONS = (2, 3)
DEFAULT_VERSION = 2
_FBS_PACKAGE = "reconciler.odf.fbs"
_UNIONS = (
    "MetadataEvent",
    "FetchStep",
    "PrepStep",
    "ReadStep",
    "Transform",
    "MergeStrategy",
    "EventTimeSource",
    "SourceCaching",
    "Attachments",
)


class BlockDecodeError(ValueError):
    """The bytes are not a metadata block manifest this library can read."""


# --- Generated-code lookups ------------------------------------------------------------


@cache
def _table_class(name: str) -> type:
    """The generated object-API class ``<name>T`` for the table ``name``."""
    return getattr(importlib.import_module(f"{_FBS_PACKAGE}.{name}"), f"{name}T")  # type: ignore[no-any-return]


@cache
def _union_members() -> dict[str, tuple[str, int]]:
    """Table name -> (union name, type id), read from the generated union enums."""
    members: dict[str, tuple[str, int]] = {}
    for union in _UNIONS:
        enum_class = getattr(importlib.import_module(f"{_FBS_PACKAGE}.{union}"), union)
        for attr, value in vars(enum_class).items():
            if isinstance(value, int) and attr != "NONE":
                members[attr] = (union, value)
    return members


def _attr(field_name: str) -> str:
    """The object-API attribute of a model field: camelCase of the schema field name."""
    head, *rest = field_name.rstrip("_").split("_")
    return head + "".join(p.title() for p in rest)


# --- Timestamps --------------------------------------------------------------------------


class _PackedTimestamp:
    """Stands in for the generated ``TimestampT`` so that the struct is laid out per version."""

    __slots__ = ("aligned", "fields")

    def __init__(self, value: Timestamp, aligned: bool) -> None:
        self.fields = value.to_fields()
        self.aligned = aligned

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802  (generated-code protocol)
        if self.aligned:
            return CreateTimestamp(builder, *self.fields)  # type: ignore[no-any-return]
        # Version 2: 16 bytes with no padding and no rise of the buffer's minimum alignment.
        builder.Prep(1, 16)
        builder.head -= 16
        year, ordinal, seconds, nanos = self.fields
        struct.pack_into("<iHxxII", builder.Bytes, builder.head, year, ordinal, seconds, nanos)
        return builder.Offset()  # type: ignore[no-any-return]


# --- Encoding ----------------------------------------------------------------------------


@cache
def _encode_plan(model_class: type[models.OdfModel]) -> tuple[type, list[tuple[str, str]]]:
    """The table class and the (model field, table attribute) pairs, schema order."""
    table_class = _table_class(model_class.__name__)
    probe = table_class()
    # The `kind` tag of a union member is not a table field, so it has no attribute.
    fields = [(n, _attr(n)) for n in model_class.model_fields if hasattr(probe, _attr(n))]
    return table_class, fields


def _to_table(model: models.OdfModel, aligned: bool) -> Any:
    table_class, fields = _encode_plan(type(model))
    table = table_class()
    unions = _union_members()
    for name, attr in fields:
        value = getattr(model, name)
        if value is None:
            continue
        if isinstance(value, models.OdfModel) and type(value).__name__ in unions:
            setattr(table, attr + "Type", unions[type(value).__name__][1])
        setattr(table, attr, _to_fb_value(value, aligned))
    return table


def _to_fb_value(value: Any, aligned: bool) -> Any:
    if isinstance(value, (Multihash, DatasetId)):
        return np.frombuffer(value.to_bytes(), dtype=np.uint8)
    if isinstance(value, models.OdfEnum):
        return value.fb_value
    if isinstance(value, models.OdfModel):
        return _to_table(value, aligned)
    if isinstance(value, Timestamp):
        return _PackedTimestamp(value, aligned)
    if isinstance(value, bytes):
        return np.frombuffer(value, dtype=np.uint8)
    if isinstance(value, list):
        return [_to_list_item(v, aligned) for v in value]
    return value


def _to_list_item(value: Any, aligned: bool) -> Any:
    """List items; a union inside a list travels in its ``<Union>Wrapper`` table."""
    union = _union_members().get(type(value).__name__)
    if union is None:
        return _to_fb_value(value, aligned)
    wrapper = _table_class(union[0] + "Wrapper")()
    wrapper.valueType = union[1]
    wrapper.value = _to_table(value, aligned)
    return wrapper


def _finish(table: Any) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(table.Pack(builder))
    return bytes(builder.Output())


def encode_block(block: models.MetadataBlock, version: int = DEFAULT_VERSION) -> bytes:
    """The whole ``Manifest`` buffer of a block: the bytes that are hashed and stored."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"cannot write manifest version {version}; supported: 2, 3")
    inner = _finish(_to_table(block, aligned=version >= 3))
    manifest = ManifestT()
    manifest.kind = ODF_METADATA_BLOCK
    manifest.version = version
    manifest.content = np.frombuffer(inner, dtype=np.uint8)
    return _finish(manifest)


# --- Decoding ----------------------------------------------------------------------------


def manifest_version(data: bytes) -> int:
    """Read and check the envelope; return the manifest version."""
    return _open_manifest(data)[0]


def _content_of(data: bytes) -> bytes:
    """Check the envelope and return the ``MetadataBlock`` buffer inside it."""
    return _open_manifest(data)[1]


def _open_manifest(data: bytes) -> tuple[int, bytes]:
    """The envelope's version, checked with its kind, and the content it carries."""
    try:
        root = _U32.unpack_from(data, 0)[0]
        kind_at, version_at, content_at = slot_offsets(data, root, 3)
        kind = _I64.unpack_from(data, root + kind_at)[0] if kind_at else 0
        version = _I32.unpack_from(data, root + version_at)[0] if version_at else 0
    except Exception as e:
        raise BlockDecodeError(f"not a metadata block manifest: {e}") from None
    if kind != ODF_METADATA_BLOCK:
        raise BlockDecodeError(
            f"manifest kind {kind:#x} is not odf-metadata-block ({ODF_METADATA_BLOCK:#x})"
        )
    if version not in SUPPORTED_VERSIONS:
        raise BlockDecodeError(
            f"unsupported metadata block manifest version {version}; this library reads 2 and 3"
        )
    if not content_at:
        raise BlockDecodeError("metadata block manifest has no content")
    try:
        return version, _bytes(data, root + content_at)
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None


@cache
def _event_names() -> dict[int, str]:
    return {
        type_id: name
        for name, (union, type_id) in _union_members().items()
        if union == "MetadataEvent"
    }


def peek_block(data: bytes) -> tuple[str, Multihash | None]:
    """The event kind and previous-block hash of a stored block, without decoding the rest.

    Walking a chain backwards needs only these two fields from most blocks; reading them
    straight from the buffer is an order of magnitude cheaper than a full decode.
    """
    buf = _content_of(data)
    try:
        root = _U32.unpack_from(buf, 0)[0]
        _, prev_at, _, type_at = slot_offsets(buf, root, 4)
        type_id = buf[root + type_at] if type_at else 0
        prev = _hash(buf, root, prev_at)
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None
    kind = _event_names().get(type_id)
    if kind is None:
        raise BlockDecodeError(f"unknown metadata event type {type_id}")
    return kind, prev


def decode_block(data: bytes) -> models.MetadataBlock:
    """Parse a stored block (manifest versions 2 and 3) into a model.

    Data blocks (``AddData``, ``ExecuteTransform``: nearly every block of a long chain)
    have a reader of their own (``_data_block``) that skips even the generic reader's
    plan walk; every other event goes through the generic reader (``fbs_reader``).
    """
    buf = _content_of(data)
    try:
        block = _data_block(buf)
        if block is None:
            block = read_root(buf, models.MetadataBlock)
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None
    return block


# --- Fast path for data blocks -----------------------------------------------------------

_U16, _U32, _I32, _U64, _I64 = (struct.Struct(f) for f in ("<H", "<I", "<i", "<Q", "<q"))
_TIMESTAMP = struct.Struct("<iHxxII")  # the same field offsets in versions 2 and 3
_SHA3_PREFIX = Multihash.from_digest(bytes(32)).to_bytes()[:2]
"""The binary prefix of a SHA3-256 multihash: code 0x16, length 32."""
_SHA3_SIZE = 34


def decode_data_block(data: bytes, *, state_fields: bool = False) -> DataBlock | None:
    """A stored data block (``AddData`` or ``ExecuteTransform``) as tuples, without its
    models, for a fold that only judges it (``data_step``); None for any other event.

    Its source state is a model, or with ``state_fields`` its fields
    (``SourceStateFields``): all that the fold needs, and cheaper to build, to keep and
    to free, which a full check of a long chain pays for every block."""
    buf = _content_of(data)
    try:
        return _parse_data_block(buf, state_fields)
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None


def _data_block(buf: bytes) -> models.MetadataBlock | None:
    """The block, or None when its event is not a data event (the generic path's)."""
    parsed = _parse_data_block(buf, state_fields=True)  # the model is built by _data_event
    if parsed is None:
        return None
    values: dict[str, Any] = {"system_time": parsed.system_time}
    if parsed.prev_block_hash is not None:
        values["prev_block_hash"] = parsed.prev_block_hash
    values["sequence_number"] = parsed.sequence_number
    values["event"] = _data_event(parsed.step)
    return build_model(models.MetadataBlock, values)  # type: ignore[no-any-return]


def _data_event(step: DataStep) -> models.AddData | models.ExecuteTransform:
    """The event model of a parsed data step, with only the fields the block has set."""
    values: dict[str, Any] = {}
    if step.query_inputs is not None:
        values["query_inputs"] = step.query_inputs
    if step.prev_checkpoint is not None:
        values["prev_checkpoint"] = step.prev_checkpoint
    if step.prev_offset is not None:
        values["prev_offset"] = step.prev_offset
    if step.new_data is not None:
        logical, physical, start, end, size = step.new_data
        interval = build_model(models.OffsetInterval, {"start": start, "end": end})
        values["new_data"] = build_model(
            models.DataSlice,
            {
                "logical_hash": logical,
                "physical_hash": physical,
                "offset_interval": interval,
                "size": size,
            },
        )
    if step.new_checkpoint is not None:
        hash_, size = step.new_checkpoint
        values["new_checkpoint"] = build_model(
            models.Checkpoint, {"physical_hash": hash_, "size": size}
        )
    if step.new_watermark is not None:
        values["new_watermark"] = step.new_watermark
    if step.new_source_state is not None:
        values["new_source_state"] = state_model(step.new_source_state)
    event_class = models.AddData if step.query_inputs is None else models.ExecuteTransform
    return build_model(event_class, values)  # type: ignore[no-any-return]


# The parser below reads a data block's few tables with one ``unpack`` of each vtable and
# no intermediate objects: a long chain is almost all data blocks, and a full integrity
# check reads every one of them, so each call saved here is paid 100,000 times. Fields
# are located as the vtable gives them, by their offset from their table (0: absent).


def _parse_data_block(buf: bytes, state_fields: bool) -> DataBlock | None:
    """A data block's header and step, or None when its event is another kind."""
    root = _U32.unpack_from(buf, 0)[0]
    system_time, prev, seq, event_type, event = slot_offsets(buf, root, 5)
    transform = _data_events().get(buf[root + event_type]) if event_type else None
    if not event or transform is None:
        return None
    if not system_time:
        raise missing_field(models.MetadataBlock, ["system_time"])
    return new_tuple(
        DataBlock,
        (
            _timestamp(buf, root + system_time),
            _hash(buf, root, prev),
            _u64(buf, root, seq) or 0,
            _parse_data_step(buf, _table(buf, root, event), transform, state_fields),
        ),
    )


@cache
def _data_events() -> dict[int, bool]:
    """The type ids of the data events, each with whether it is an ``ExecuteTransform``."""
    return {
        type_id: name == "ExecuteTransform"
        for type_id, name in _event_names().items()
        if name in ("AddData", "ExecuteTransform")
    }


def _table(buf: bytes, pos: int, offset: int) -> int:
    """Where the table (or vector) that field ``offset`` of the table at ``pos`` refers
    to lies: the ``uoffset`` stored there, followed."""
    at = pos + offset
    return at + _U32.unpack_from(buf, at)[0]  # type: ignore[no-any-return]


def _bytes(buf: bytes, at: int) -> bytes:
    start = at + _U32.unpack_from(buf, at)[0] + 4
    end = start + _U32.unpack_from(buf, start - 4)[0]
    if end > len(buf):  # a slice would end early, silently
        raise ValueError(f"the vector at {start - 4} runs past the end of the buffer")
    return buf[start:end]


def _timestamp(buf: bytes, at: int) -> Timestamp:
    return Timestamp.from_fields(*_TIMESTAMP.unpack_from(buf, at))


def _hash(buf: bytes, pos: int, offset: int) -> Multihash | None:
    """The multihash in field ``offset``; a SHA3-256 one (every block and physical hash
    a block holds) is told by its prefix here, without ``Multihash.from_bytes``: a data
    block holds several, and a full check decodes every data block."""
    if not offset:
        return None
    data = _bytes(buf, pos + offset)
    if len(data) == _SHA3_SIZE and data.startswith(_SHA3_PREFIX):
        return str.__new__(Multihash, "f" + data.hex())
    return Multihash.from_bytes(data)


def _u64(buf: bytes, pos: int, offset: int) -> int | None:
    return _U64.unpack_from(buf, pos + offset)[0] if offset else None


def _text(buf: bytes, pos: int, offset: int) -> str | None:
    return _bytes(buf, pos + offset).decode("utf-8") if offset else None


_SLICE_REFERENCES = ("logical_hash", "physical_hash", "offset_interval")
"""A DataSlice's fields that are references: required, they have no default when absent
(its scalars do: an absent scalar is its default, 0, in FlatBuffers)."""


def _parse_data_step(buf: bytes, pos: int, transform: bool, state_fields: bool) -> DataStep:
    """AddData fields are 0-5; ExecuteTransform's are the same shifted by its inputs (0)."""
    if transform:
        inputs, prev_checkpoint, prev_offset, data, checkpoint, watermark = slot_offsets(
            buf, pos, 6
        )
        state = 0
    else:
        prev_checkpoint, prev_offset, data, checkpoint, watermark, state = slot_offsets(buf, pos, 6)
    new_data = _new_data(buf, _table(buf, pos, data)) if data else None
    new_checkpoint = _new_checkpoint(buf, _table(buf, pos, checkpoint)) if checkpoint else None
    source_state = _source_state(buf, _table(buf, pos, state), state_fields) if state else None
    return new_tuple(
        DataStep,
        (
            _query_inputs(buf, pos, inputs) if transform else None,
            _hash(buf, pos, prev_checkpoint),
            _u64(buf, pos, prev_offset),
            new_data,
            new_checkpoint,
            _timestamp(buf, pos + watermark) if watermark else None,
            source_state,
        ),
    )


def _new_data(buf: bytes, pos: int) -> NewData:
    logical, physical, interval, size = slot_offsets(buf, pos, 4)
    if not (logical and physical and interval):
        present = zip(_SLICE_REFERENCES, (logical, physical, interval), strict=True)
        raise missing_field(models.DataSlice, [name for name, at in present if not at])
    bounds = _table(buf, pos, interval)
    start, end = slot_offsets(buf, bounds, 2)
    return new_tuple(
        NewData,
        (
            _hash(buf, pos, logical),
            _hash(buf, pos, physical),
            _u64(buf, bounds, start) or 0,
            _u64(buf, bounds, end) or 0,
            _u64(buf, pos, size) or 0,
        ),
    )


def _new_checkpoint(buf: bytes, pos: int) -> NewCheckpoint:
    hash_at, size_at = slot_offsets(buf, pos, 2)
    if not hash_at:
        raise missing_field(models.Checkpoint, ["physical_hash"])
    return new_tuple(NewCheckpoint, (_hash(buf, pos, hash_at), _u64(buf, pos, size_at) or 0))


def _source_state(buf: bytes, pos: int, as_fields: bool) -> SourceStateFields | models.SourceState:
    """A source state as its fields (``SourceStateFields``), or the model built from
    them. All three are required, as the model's are."""
    name_at, kind_at, value_at = slot_offsets(buf, pos, 3)
    name, kind, value = (
        _text(buf, pos, name_at),
        _text(buf, pos, kind_at),
        _text(buf, pos, value_at),
    )
    if name is None or kind is None or value is None:
        texts = zip(SourceStateFields._fields, (name, kind, value), strict=True)
        raise missing_field(models.SourceState, sorted(n for n, text in texts if text is None))
    fields = SourceStateFields.interned(name, kind, value)
    return fields if as_fields else fields.model()


def _query_inputs(buf: bytes, pos: int, offset: int) -> list[models.ExecuteTransformInput]:
    if not offset:
        return []
    start = _table(buf, pos, offset)
    items = range(start + 4, start + 4 + 4 * _U32.unpack_from(buf, start)[0], 4)
    return [_query_input(buf, _table(buf, item, 0)) for item in items]


def _query_input(buf: bytes, pos: int) -> models.ExecuteTransformInput:
    dataset_id, prev_block, new_block, prev_offset, new_offset = slot_offsets(buf, pos, 5)
    values: dict[str, Any] = {
        "dataset_id": DatasetId.from_bytes(_bytes(buf, pos + dataset_id)) if dataset_id else None,
        "prev_block_hash": _hash(buf, pos, prev_block),
        "new_block_hash": _hash(buf, pos, new_block),
        "prev_offset": _u64(buf, pos, prev_offset),
        "new_offset": _u64(buf, pos, new_offset),
    }
    values = {name: value for name, value in values.items() if value is not None}
    return build_model(models.ExecuteTransformInput, values)  # type: ignore[no-any-return]
