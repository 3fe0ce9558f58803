"""The decoder the codec used before its direct reader: flatc's object API, then models.

Kept here, out of the product, as the reference the direct reader (``fbs_reader``) must
match: the generated ``<Table>T`` classes read every field the way FlatBuffers defines,
and ``_from_table`` maps them onto the models with ``model_construct``.
"""

from __future__ import annotations

import importlib
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from reconciler.odf import models
from reconciler.odf.codec import _content_of
from reconciler.odf.fbs.MetadataBlock import MetadataBlock as FbMetadataBlock
from reconciler.odf.fbs.MetadataBlock import MetadataBlockT
from reconciler.odf.multiformat import DatasetId, Multihash
from reconciler.odf.timestamps import Timestamp

Converter = Callable[[Any], Any]


def reference_decode(data: bytes) -> models.MetadataBlock:
    """A stored block (the whole manifest) decoded through the object API, any event."""
    return reference_decode_content(_content_of(data))


def reference_decode_content(content: bytes) -> models.MetadataBlock:
    """The ``MetadataBlock`` buffer inside a manifest, decoded through the object API."""
    table = MetadataBlockT.InitFromObj(FbMetadataBlock.GetRootAs(content, 0))
    block: models.MetadataBlock = _from_table(table, models.MetadataBlock)
    return block


def _table_class(name: str) -> type:
    return getattr(importlib.import_module(f"reconciler.odf.fbs.{name}"), f"{name}T")  # type: ignore[no-any-return]


def _attr(field_name: str) -> str:
    head, *rest = field_name.rstrip("_").split("_")
    return head + "".join(p.title() for p in rest)


def _unwrap_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _converter(annotation: Any) -> Converter:
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
    values = {}
    for name, attr, convert in _decode_plan(model_class):
        raw = getattr(table, attr)
        if raw is not None:
            values[name] = convert(raw)
    return model_class.model_construct(**values)
