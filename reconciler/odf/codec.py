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
from .fbs.Manifest import Manifest, ManifestT
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
        manifest = Manifest.GetRootAs(data, 0)
        kind, version = manifest.Kind(), manifest.Version()
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
    content = Manifest.GetRootAs(data, 0).ContentAsNumpy()
    if isinstance(content, int):
        raise BlockDecodeError("metadata block manifest has no content")
    block = FbMetadataBlock.GetRootAs(content.tobytes(), 0)
    kind = _event_names().get(block.EventType())
    if kind is None:
        raise BlockDecodeError(f"unknown metadata event type {block.EventType()}")
    prev = block.PrevBlockHashAsNumpy()
    return kind, None if isinstance(prev, int) else Multihash.from_bytes(prev.tobytes())


def decode_block(data: bytes) -> models.MetadataBlock:
    """Parse a stored block (manifest versions 2 and 3) into a model."""
    manifest_version(data)
    content = Manifest.GetRootAs(data, 0).ContentAsNumpy()
    if isinstance(content, int):
        raise BlockDecodeError("metadata block manifest has no content")
    try:
        table = MetadataBlockT.InitFromObj(FbMetadataBlock.GetRootAs(content.tobytes(), 0))
        block: models.MetadataBlock = _from_table(table, models.MetadataBlock)
    except BlockDecodeError:
        raise
    except Exception as e:
        raise BlockDecodeError(f"malformed metadata block content: {e}") from None
    return block
