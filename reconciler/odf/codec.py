"""Canonical FlatBuffers encoding of metadata blocks, byte-compatible with kamu-cli.

The flatc-generated object API in ``fbs/`` already builds every table the canonical way
(children first in schema order, then the fields in schema order, defaults omitted,
optional scalars written whenever present), so this module only maps our pydantic
models onto those generated objects and back. Models and tables share names, so the
mapping is generic: one plan per model class, derived from its annotations.

Two details are ours: the manifest envelope, and the ``Timestamp`` struct, which
manifest version 2 writes unaligned (as flatbuffers-rs did before kamu 0.265) and
version 3 writes 4-aligned. See ``shared/odf/BINARY-FORMAT.md`` §2.
"""

from __future__ import annotations

import importlib
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

import flatbuffers
import numpy as np

from . import models
from .fbs.Manifest import ManifestT
from .fbs.MetadataBlock import MetadataBlock as FbMetadataBlock
from .fbs.MetadataBlock import MetadataBlockT
from .fbs.Timestamp import CreateTimestamp
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

Converter = Callable[[Any], Any]


def _unwrap_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _converter(annotation: Any) -> Converter:
    """How to turn an object-API value into the model value of this annotation."""
    annotation = _unwrap_optional(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _converter(typing.get_args(annotation)[0])
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _from_union_value
    if origin is list:
        item = _converter(typing.get_args(annotation)[0])
        return lambda raw: [item(v) for v in raw]
    if annotation is Multihash:
        return lambda raw: Multihash.from_bytes(bytes(raw))
    if annotation is DatasetId:
        return lambda raw: DatasetId.from_bytes(bytes(raw))
    if annotation is Timestamp:
        return lambda raw: Timestamp.from_fields(
            raw.year, raw.ordinal, raw.secondsFromMidnight, raw.nanoseconds
        )
    if annotation is bytes:
        return bytes
    if annotation is str:
        return lambda raw: raw.decode("utf-8")
    if isinstance(annotation, type) and issubclass(annotation, models.OdfEnum):
        return annotation.from_fb
    if isinstance(annotation, type) and issubclass(annotation, models.OdfModel):
        return lambda raw: _from_table(raw, annotation)
    return lambda raw: raw


def _from_union_value(raw: Any) -> models.OdfModel:
    if type(raw).__name__.endswith("WrapperT"):
        raw = raw.value
    name = type(raw).__name__.removesuffix("T")
    model_class: type[models.OdfModel] = getattr(models, name)
    value: models.OdfModel = _from_table(raw, model_class)
    return value


@cache
def _decode_plan(model_class: type[models.OdfModel]) -> list[tuple[str, str, Converter]]:
    hints = typing.get_type_hints(model_class, include_extras=True)
    probe = _table_class(model_class.__name__)()
    return [
        (name, _attr(name), _converter(hints[name]))
        for name in model_class.model_fields
        if hasattr(probe, _attr(name))
    ]


def _from_table(table: Any, model_class: type[models.OdfModel]) -> Any:
    """Build the model without re-validating: every converter already returns a typed,
    checked value (hashes, ids and timestamps validate on construction), and FlatBuffers
    scalars cannot leave their declared ranges."""
    values = {}
    for name, attr, convert in _decode_plan(model_class):
        raw = getattr(table, attr)
        if raw is not None:
            values[name] = convert(raw)
    return model_class.model_construct(**values)


def manifest_version(data: bytes) -> int:
    """Read and check the envelope; return the manifest version."""
    try:
        manifest = _Table(data, _U32.unpack_from(data, 0)[0])
        kind_at, version_at = manifest.field(0), manifest.field(1)
        kind = _I64.unpack_from(data, kind_at)[0] if kind_at else 0
        version = _I32.unpack_from(data, version_at)[0] if version_at else 0
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
    return int(version)


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
    manifest_version(data)
    try:
        content = _Reader(data).content()
        if content is None:
            raise BlockDecodeError("metadata block manifest has no content")
        block = _Table(content.buf, _U32.unpack_from(content.buf, 0)[0])
        at = block.field(3)
        type_id = content.buf[at] if at else 0
        prev = block.hash(1)
    except BlockDecodeError:
        raise
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None
    kind = _event_names().get(type_id)
    if kind is None:
        raise BlockDecodeError(f"unknown metadata event type {type_id}")
    return kind, prev


def decode_block(data: bytes) -> models.MetadataBlock:
    """Parse a stored block (manifest versions 2 and 3) into a model.

    Data blocks (``AddData``, ``ExecuteTransform``: nearly every block of a long chain)
    are read straight from the buffer (``_Reader``), which is several times cheaper than
    the generated object API; every other event goes through the generic mapping.
    """
    manifest_version(data)
    try:
        content = _Reader(data).content()
        if content is None:
            raise BlockDecodeError("metadata block manifest has no content")
        block = content.metadata_block()
        if block is not None:
            return block
        table = MetadataBlockT.InitFromObj(FbMetadataBlock.GetRootAs(content.buf, 0))
        generic: models.MetadataBlock = _from_table(table, models.MetadataBlock)
    except BlockDecodeError:
        raise
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None
    return generic


# --- Fast path for data blocks -----------------------------------------------------------

_U16, _U32, _I32, _U64, _I64 = (struct.Struct(f) for f in ("<H", "<I", "<i", "<Q", "<q"))
_TIMESTAMP = struct.Struct("<iHxxII")  # the same field offsets in versions 2 and 3


@cache
def _defaults(model_class: type[models.OdfModel]) -> dict[str, Any]:
    return {
        name: f.get_default(call_default_factory=True)
        for name, f in model_class.model_fields.items()
        if not f.is_required()
    }


def _build(model_class: type[models.OdfModel], values: dict[str, Any]) -> Any:
    """What ``model_construct`` builds (defaults filled in, the given fields marked set),
    without its per-call overhead, which dominates decoding a small table. The fields
    keep their declaration order, as pydantic serialises ``__dict__`` in its order."""
    defaults = _defaults(model_class)
    fields = {
        name: values[name] if name in values else defaults[name]
        for name in model_class.model_fields
        if name in values or name in defaults
    }
    model = object.__new__(model_class)
    object.__setattr__(model, "__dict__", fields)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


class _Table:
    """One FlatBuffers table in ``buf`` at ``pos``: field ``i`` is vtable slot ``4 + 2i``."""

    __slots__ = ("buf", "pos", "vtable", "vtable_len")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vtable = pos - _I32.unpack_from(buf, pos)[0]
        self.vtable_len = _U16.unpack_from(buf, self.vtable)[0]

    def field(self, i: int) -> int:
        """The field's position in the buffer, 0 when absent."""
        slot = 4 + 2 * i
        if slot >= self.vtable_len:
            return 0
        off = _U16.unpack_from(self.buf, self.vtable + slot)[0]
        return self.pos + off if off else 0

    def u64(self, i: int) -> int | None:
        at = self.field(i)
        return _U64.unpack_from(self.buf, at)[0] if at else None

    def table(self, i: int) -> _Table | None:
        at = self.field(i)
        return _Table(self.buf, at + _U32.unpack_from(self.buf, at)[0]) if at else None

    def bytes(self, i: int) -> bytes | None:
        at = self.field(i)
        if not at:
            return None
        start = at + _U32.unpack_from(self.buf, at)[0]
        return self.buf[start + 4 : start + 4 + _U32.unpack_from(self.buf, start)[0]]

    def hash(self, i: int) -> Multihash | None:
        raw = self.bytes(i)
        return None if raw is None else Multihash.from_bytes(raw)

    def text(self, i: int) -> str | None:
        raw = self.bytes(i)
        return None if raw is None else raw.decode("utf-8")

    def timestamp(self, i: int) -> Timestamp | None:
        at = self.field(i)
        return Timestamp.from_fields(*_TIMESTAMP.unpack_from(self.buf, at)) if at else None

    def vector(self, i: int) -> list[_Table]:
        at = self.field(i)
        if not at:
            return []
        start = at + _U32.unpack_from(self.buf, at)[0]
        items = range(start + 4, start + 4 + 4 * _U32.unpack_from(self.buf, start)[0], 4)
        return [_Table(self.buf, p + _U32.unpack_from(self.buf, p)[0]) for p in items]


class _Reader:
    """The envelope and the data-block tables, read by field index (``odf.fbs`` order)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def content(self) -> _Content | None:
        raw = _Table(self.data, _U32.unpack_from(self.data, 0)[0]).bytes(2)
        return None if raw is None else _Content(raw)


class _Content:
    """The ``MetadataBlock`` buffer inside the manifest."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def metadata_block(self) -> models.MetadataBlock | None:
        """The block, or None when its event is not a data event (the generic path's)."""
        block = _Table(self.buf, _U32.unpack_from(self.buf, 0)[0])
        at = block.field(3)
        kind = _event_names().get(self.buf[at]) if at else None
        event_table = block.table(4)
        if event_table is None or kind not in ("AddData", "ExecuteTransform"):
            return None
        values: dict[str, Any] = {"system_time": block.timestamp(0)}
        prev = block.hash(1)
        if prev is not None:
            values["prev_block_hash"] = prev
        values["sequence_number"] = block.u64(2) or 0
        values["event"] = _data_event(event_table, kind == "ExecuteTransform")
        return _build(models.MetadataBlock, values)  # type: ignore[no-any-return]


def _data_event(table: _Table, transform: bool) -> models.AddData | models.ExecuteTransform:
    """AddData fields are 0-5; ExecuteTransform's are the same shifted by its inputs (0)."""
    shift = 1 if transform else 0
    values: dict[str, Any] = {}
    if transform:
        values["query_inputs"] = [_query_input(t) for t in table.vector(0)]
    _put(values, "prev_checkpoint", table.hash(shift))
    _put(values, "prev_offset", table.u64(shift + 1))
    data = table.table(shift + 2)
    if data is not None:
        interval = data.table(2)
        values["new_data"] = _build(
            models.DataSlice,
            {
                "logical_hash": data.hash(0),
                "physical_hash": data.hash(1),
                "offset_interval": _build(
                    models.OffsetInterval,
                    {
                        "start": (interval.u64(0) or 0) if interval else 0,
                        "end": (interval.u64(1) or 0) if interval else 0,
                    },
                ),
                "size": data.u64(3) or 0,
            },
        )
    checkpoint = table.table(shift + 3)
    if checkpoint is not None:
        values["new_checkpoint"] = _build(
            models.Checkpoint,
            {"physical_hash": checkpoint.hash(0), "size": checkpoint.u64(1) or 0},
        )
    _put(values, "new_watermark", table.timestamp(shift + 4))
    if not transform:
        state = table.table(5)
        if state is not None:
            fields = {"source_name": state.text(0), "kind": state.text(1), "value": state.text(2)}
            values["new_source_state"] = _build(
                models.SourceState, {k: v for k, v in fields.items() if v is not None}
            )
        return _build(models.AddData, values)  # type: ignore[no-any-return]
    return _build(models.ExecuteTransform, values)  # type: ignore[no-any-return]


def _query_input(table: _Table) -> models.ExecuteTransformInput:
    raw_id = table.bytes(0)
    values: dict[str, Any] = {"dataset_id": DatasetId.from_bytes(raw_id or b"")}
    _put(values, "prev_block_hash", table.hash(1))
    _put(values, "new_block_hash", table.hash(2))
    _put(values, "prev_offset", table.u64(3))
    _put(values, "new_offset", table.u64(4))
    return _build(models.ExecuteTransformInput, values)  # type: ignore[no-any-return]


def _put(values: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        values[name] = value
