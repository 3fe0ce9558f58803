"""Decode any table of a metadata block straight from its FlatBuffers bytes into the models.

The flatc object API (``fbs/``) decodes a table by building an intermediate ``<Table>T``
object through the flatbuffers library's type-checked accessors, and the models are then
built from those objects: about three times the work of reading the bytes. A planning run
decodes every metadata event of every chain and a full integrity check every block of a
chain, so this module reads the buffer itself instead.

Which vtable slot holds which model field, and how to read it, comes from the schema
(``reconciler/schemas/odf.fbs``, shipped as package data): models and tables share names,
so one plan per model class is derived on first use and cached. The reader is strict where
the object API was lax or unbounded: every offset is range-checked, an unknown union type
is an error, and a buffer whose references share data cannot make decoding produce more
than a small multiple of its own size (see ``_Budget``).

Results equal the object API's exactly, down to which fields a model marks as set: a
table's absent scalar reads as its default (and is set), any other absent field is left
unset, a union whose type is ``NONE`` is absent. The reader also reads what the object API
read (and nothing it skipped), so a corrupted buffer fails here where it failed there;
``tests/test_fbs_reader.py`` compares the two on intact and corrupted blocks.
"""

from __future__ import annotations

import importlib.resources
import re
import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from . import models
from .multiformat import DatasetId, Multihash
from .timestamps import Timestamp

# --- Building models -------------------------------------------------------------------

_ABSENT = object()
"""A required field's place in a ``_template``."""


@cache
def _template(model_class: type[models.OdfModel]) -> tuple[dict[str, Any], frozenset[str]]:
    """Every field of the class in declaration order, with its default or ``_ABSENT``,
    and the names of the required fields (those with no default)."""
    template = {
        name: _ABSENT if f.is_required() else f.get_default(call_default_factory=True)
        for name, f in model_class.model_fields.items()
    }
    return template, frozenset(name for name, value in template.items() if value is _ABSENT)


def build_model(model_class: type[models.OdfModel], values: dict[str, Any]) -> Any:
    """What ``model_construct`` builds (defaults filled in, the given fields marked set),
    without its per-call overhead, which dominates decoding a small table. The fields
    keep their declaration order, as pydantic serialises ``__dict__`` in its order:
    updating a copy of the template keeps the template's key order.

    A required field missing from ``values`` is a ``ValueError`` (``missing_field``):
    a table without one (a ``SetPollingSource`` with no ``fetch``, say) is malformed,
    and a model built without it would fail later, far from the block, in whatever
    rule first reads the field."""
    template, required = _template(model_class)
    if not required <= values.keys():
        raise missing_field(model_class, sorted(required - values.keys()))
    fields = template.copy()
    fields.update(values)
    model = object.__new__(model_class)
    object.__setattr__(model, "__dict__", fields)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def missing_field(model_class: type[models.OdfModel], names: list[str]) -> ValueError:
    """The error for a table lacking required fields, named as ODF names them."""
    fields = model_class.model_fields
    listed = ", ".join(fields[n].alias or n if n in fields else n for n in names)
    return ValueError(f"{model_class.__name__} lacks its required {listed}")


# --- The schema --------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaField:
    """One field of a table or struct: ``name: type`` or ``name: [type]``, maybe ``= default``."""

    name: str
    type: str
    vector: bool
    default: str | None


@dataclass(frozen=True)
class Schema:
    """The declarations of a ``.fbs`` file that this reader understands."""

    tables: dict[str, tuple[SchemaField, ...]]
    structs: dict[str, tuple[SchemaField, ...]]
    unions: dict[str, tuple[str, ...]]
    """Member table names; a member's type id is its position plus one (0 is NONE)."""
    enums: dict[str, str]
    """The underlying scalar type; a member's value is its position."""


_COMMENT = re.compile(r"//[^\n]*")
_DECLARATION = re.compile(r"(table|struct|union|enum)\s+(\w+)\s*(?::\s*(\w+))?\s*\{([^}]*)\}")
_FIELD = re.compile(r"(\w+)\s*:\s*(\[\s*\w+\s*\]|\w+)\s*(?:=\s*([\w.+-]+))?")


def parse_schema(text: str) -> Schema:
    """The tables, structs, unions and enums of a schema, fields in declaration order.

    Only the subset ``odf.fbs`` uses is accepted (no attributes, no explicit enum values),
    so that a schema change this reader would misread fails loudly instead.
    """
    text = _COMMENT.sub("", text)
    schema = Schema({}, {}, {}, {})
    for keyword, name, base, body in _DECLARATION.findall(text):
        items = [item.strip() for item in body.replace(";", ",").split(",") if item.strip()]
        if keyword in ("table", "struct"):
            target = schema.tables if keyword == "table" else schema.structs
            target[name] = tuple(_parse_field(name, item) for item in items)
        else:
            for item in items:
                if not re.fullmatch(r"\w+", item):
                    raise ValueError(f"unsupported member {item!r} of {keyword} {name}")
            if keyword == "union":
                schema.unions[name] = tuple(items)
            else:
                schema.enums[name] = base
    return schema


def _parse_field(table: str, item: str) -> SchemaField:
    match = _FIELD.fullmatch(item)
    if match is None:
        raise ValueError(f"unsupported field {item!r} of {table}")
    name, type_, default = match.groups()
    vector = type_.startswith("[")
    return SchemaField(name, type_.strip("[] "), vector, default)


@cache
def odf_schema() -> Schema:
    """The schema the generated code was built from, read from the package's data."""
    resource = importlib.resources.files("reconciler").joinpath("schemas").joinpath("odf.fbs")
    return parse_schema(resource.read_text(encoding="utf-8"))


# --- Reading primitives ------------------------------------------------------------------

_U16, _U32, _I32 = (struct.Struct(f) for f in ("<H", "<I", "<i"))
_MAX_SLOTS = 64
_SLOTS = tuple(struct.Struct(f"<{n}H") for n in range(_MAX_SLOTS))
_SCALARS = {
    "bool": "?",
    "byte": "b",
    "ubyte": "B",
    "short": "h",
    "ushort": "H",
    "int": "i",
    "uint": "I",
    "long": "q",
    "ulong": "Q",
    "float": "f",
    "double": "d",
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float32": "f",
    "float64": "d",
}

BUDGET_FACTOR = 8
"""How many times its own size a buffer may decode to (``_Budget``)."""


class _Budget:
    """Bytes a decode may still produce: strings and byte vectors cost their size plus the
    length prefix, every vector element four bytes (the reference it stands for).

    A buffer whose parts do not overlap never costs more than its own size. References may
    point at shared data, though, and hostile ones at the same large string from thousands
    of places: without a bound, a buffer of one megabyte would decode to gigabytes.
    """

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = BUDGET_FACTOR * size


def _overrun(buf: bytes, start: int, end: int) -> ValueError:
    """The error of a vector or string (its data at ``start:end``) that cannot be read."""
    if end > len(buf):
        return ValueError(f"the vector at {start - 4} runs past the end of the buffer")
    return ValueError(
        f"the buffer decodes to more than {BUDGET_FACTOR} times its size: its references "
        f"share data (last at {start - 4})"
    )


def slot_offsets(buf: bytes, pos: int, count: int) -> tuple[int, ...]:
    """The offsets from ``pos`` of a table's first ``count`` slots, 0 for an absent one.

    A table with no fields (``MergeStrategyAppend``, say) has nothing to look up: its
    vtable is not read, as the object API does not read it."""
    if not count:
        return ()
    vtable = pos - _I32.unpack_from(buf, pos)[0]
    if vtable < 0:
        raise ValueError(f"the vtable of the table at {pos} lies outside the buffer")
    # Slot i is present when its two bytes start inside the vtable (``4 + 2i < size``), as
    # the flatbuffers library reads it: an odd size counts its last, half slot.
    present = (_U16.unpack_from(buf, vtable)[0] - 3) >> 1
    if present >= count:
        return _SLOTS[count].unpack_from(buf, vtable + 4)
    present = max(present, 0)
    return _SLOTS[present].unpack_from(buf, vtable + 4) + (0,) * (count - present)  # type: ignore[no-any-return]


def _span(buf: bytes, at: int, item_size: int, budget: _Budget) -> tuple[int, int]:
    """Start and end of the vector (or string) whose reference is stored at ``at``, paid
    for (``_Budget``). ``_read_str``, the most frequent caller, has its own copy."""
    start = at + _U32.unpack_from(buf, at)[0] + 4
    end = start + item_size * _U32.unpack_from(buf, start - 4)[0]
    budget.left -= end - start + 4
    if end > len(buf) or budget.left < 0:
        raise _overrun(buf, start, end)
    return start, end


def _read_bytes(buf: bytes, at: int, budget: _Budget) -> bytes:
    start, end = _span(buf, at, 1, budget)
    return bytes(buf[start:end])


def _read_str(buf: bytes, at: int, budget: _Budget) -> str:
    start = at + _U32.unpack_from(buf, at)[0] + 4
    end = start + _U32.unpack_from(buf, start - 4)[0]
    budget.left -= end - start + 4
    if end > len(buf) or budget.left < 0:
        raise _overrun(buf, start, end)
    return str(buf[start:end], "utf-8")


def _read_strs(buf: bytes, at: int, budget: _Budget) -> list[str]:
    start, end = _span(buf, at, 4, budget)
    return [_read_str(buf, item, budget) for item in range(start, end, 4)]


# --- Plans -------------------------------------------------------------------------------

Reader = Callable[[bytes, int, _Budget], Any]
"""Reads the value of a field (or vector item) whose slot is at the given position."""
UnionReader = Callable[[bytes, int, _Budget, int], Any]
"""Reads a union's value from its table's position, given its type id (never NONE)."""

_SKIP = object()
"""An absent field that stays unset (anything but a scalar with a default)."""


class _Field(NamedTuple):
    name: str
    slot: int
    kind_slot: int
    """The slot of a union's type id, -1 for any other field; ``read`` is then a UnionReader."""
    read: Callable[..., Any]
    absent: Any
    """The value of an absent field, or ``_SKIP``."""


class _Plan(NamedTuple):
    model: type[models.OdfModel]
    slots: int
    fields: tuple[_Field, ...]


def _bare(annotation: Any) -> Any:
    """The annotation without ``| None`` and ``Annotated`` (constraints, union tags)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _bare(args[0])
    if origin is typing.Annotated:
        return _bare(typing.get_args(annotation)[0])
    return annotation


def _mismatch(where: str, field: SchemaField, annotation: Any) -> TypeError:
    return TypeError(f"{where}: schema type {field.type!r} does not fit model type {annotation}")


@cache
def table_plan(model_class: type[models.OdfModel]) -> _Plan:
    """Slot, reader and absent value of each field the model shares with its table.

    Model fields are visited in declaration order; those the table lacks (the ``kind``
    tag of a union member) are left to their defaults. A union takes two slots, its type
    id's and its value's. Nested plans are built eagerly: the schema has no recursion.
    """
    schema = odf_schema()
    hints = typing.get_type_hints(model_class, include_extras=True)
    slots: dict[str, tuple[int, SchemaField]] = {}
    slot = 0
    for field in schema.tables[model_class.__name__]:
        if field.type in schema.unions and not field.vector:
            slot += 1  # the type id's slot, just before the value's
        slots[field.name] = (slot, field)
        slot += 1
    if slot >= _MAX_SLOTS:
        raise TypeError(f"table {model_class.__name__} has more than {_MAX_SLOTS - 1} slots")
    fields = []
    for name in model_class.model_fields:
        if (found := slots.get(name.rstrip("_"))) is not None:
            where = f"{model_class.__name__}.{name}"
            fields.append(_plan_field(where, name, *found, hints[name]))
    return _Plan(model_class, slot, tuple(fields))


def _plan_field(where: str, name: str, slot: int, field: SchemaField, hint: Any) -> _Field:
    schema = odf_schema()
    annotation = _bare(hint)
    if field.vector:
        return _Field(name, slot, -1, _vector_reader(where, field, annotation), _SKIP)
    if field.type in schema.unions:
        return _Field(name, slot, slot - 1, _union_reader(where, field.type, annotation), _SKIP)
    if field.type in _SCALARS or field.type in schema.enums:
        read, default = _scalar_reader(where, field, annotation)
        return _Field(name, slot, -1, read, _SKIP if field.default == "null" else default)
    return _Field(name, slot, -1, _reader(where, field, annotation), _SKIP)


def _scalar_reader(where: str, field: SchemaField, annotation: Any) -> tuple[Reader, Any]:
    """A scalar or enum field's reader and its value when absent (the schema default)."""
    schema = odf_schema()
    is_enum = field.type in schema.enums
    unpack = struct.Struct("<" + _SCALARS[schema.enums.get(field.type, field.type)]).unpack_from
    literal = field.default if field.default not in (None, "null") else "0"
    if is_enum:
        is_model_enum = isinstance(annotation, type) and issubclass(annotation, models.OdfEnum)
        if not (is_model_enum and annotation.__name__ == field.type):
            raise _mismatch(where, field, annotation)
        from_fb = annotation.from_fb
        if not literal.isdigit():
            raise TypeError(f"{where}: enum defaults by name are not supported")
        return (lambda buf, at, budget: from_fb(unpack(buf, at)[0])), from_fb(int(literal))
    kind = annotation if annotation in (bool, int, float) else None
    if kind is None or (kind is bool) != (field.type == "bool"):
        raise _mismatch(where, field, annotation)
    default = literal == "true" if kind is bool else kind(literal)
    return (lambda buf, at, budget: unpack(buf, at)[0]), default


def _reader(where: str, field: SchemaField, annotation: Any) -> Reader:
    """The reader of a string, struct or table field (not a vector, union or scalar)."""
    schema = odf_schema()
    if field.type == "string":
        if annotation is not str:
            raise _mismatch(where, field, annotation)
        return _read_str
    if field.type in schema.structs:
        if annotation is not Timestamp:
            raise _mismatch(where, field, annotation)
        return _timestamp_reader(schema.structs[field.type])
    model_class = getattr(models, field.type, None)
    if field.type not in schema.tables or annotation is not model_class:
        raise _mismatch(where, field, annotation)
    plan = table_plan(model_class)
    return lambda buf, at, budget: read_table(buf, at + _U32.unpack_from(buf, at)[0], plan, budget)


def _timestamp_reader(fields: tuple[SchemaField, ...]) -> Reader:
    """The ``Timestamp`` struct, laid out as FlatBuffers lays out structs: every field at a
    multiple of its size. Manifest version 2 only misaligns the struct as a whole."""
    layout, size = "<", 0
    for field in fields:
        code = _SCALARS[field.type]
        width = struct.calcsize(code)
        padding = -size % width
        layout += "x" * padding + code
        size += padding + width
    unpack = struct.Struct(layout).unpack_from
    return lambda buf, at, budget: Timestamp.from_fields(*unpack(buf, at))


def _vector_reader(where: str, field: SchemaField, annotation: Any) -> Reader:
    """Byte vectors (hashes, ids, raw bytes), string vectors and table vectors."""
    schema = odf_schema()
    if field.type == "ubyte":
        convert = {Multihash: Multihash.from_bytes, DatasetId: DatasetId.from_bytes, bytes: None}
        if annotation not in convert:
            raise _mismatch(where, field, annotation)
        from_bytes = convert[annotation]
        if from_bytes is None:
            return _read_bytes
        return lambda buf, at, budget: from_bytes(_read_bytes(buf, at, budget))
    if typing.get_origin(annotation) is not list:
        raise _mismatch(where, field, annotation)
    item = _bare(typing.get_args(annotation)[0])
    if field.type == "string":
        if item is not str:
            raise _mismatch(where, field, annotation)
        return _read_strs
    if field.type not in schema.tables:
        raise _mismatch(where, field, annotation)
    read_item = _item_reader(where, field, item)

    def read(buf: bytes, at: int, budget: _Budget) -> list[Any]:
        start, end = _span(buf, at, 4, budget)
        return [
            read_item(buf, i + _U32.unpack_from(buf, i)[0], budget) for i in range(start, end, 4)
        ]

    return read


def _item_reader(where: str, field: SchemaField, item: Any) -> Reader:
    """An item of a table vector, read from the table's position: the model of the table,
    or, for a ``<Union>Wrapper`` table (unions cannot be vector items), its union's value."""
    schema = odf_schema()
    model_class = getattr(models, field.type, None)
    if model_class is not None:
        if item is not model_class:
            raise _mismatch(where, field, item)
        plan = table_plan(model_class)
        return lambda buf, pos, budget: read_table(buf, pos, plan, budget)
    wrapper = schema.tables[field.type]
    if len(wrapper) != 1 or wrapper[0].type not in schema.unions or wrapper[0].vector:
        raise _mismatch(where, field, item)
    read_union = _union_reader(where, wrapper[0].type, item)

    def read(buf: bytes, pos: int, budget: _Budget) -> Any:
        kind_at, value_at = slot_offsets(buf, pos, 2)
        kind = buf[pos + kind_at] if kind_at else 0
        if not value_at or not kind:
            raise ValueError(f"the {field.type} at {pos} holds no value")
        value_at += pos
        return read_union(buf, value_at + _U32.unpack_from(buf, value_at)[0], budget, kind)

    return read


def _union_reader(where: str, union: str, annotation: Any) -> UnionReader:
    """The member model of a union value, chosen by its type id."""
    members = []
    # A union of one member is that member: ``Union[X]`` is ``X``.
    union_origin = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    annotated = set(typing.get_args(annotation)) if union_origin else {annotation}
    for name in odf_schema().unions[union]:
        model_class = getattr(models, name, None)
        if model_class not in annotated:
            raise TypeError(f"{where}: union {union} member {name} is not in {annotation}")
        members.append(table_plan(model_class))
    plans = tuple(members)

    def read(buf: bytes, pos: int, budget: _Budget, kind: int) -> Any:
        if kind > len(plans):
            raise ValueError(f"unknown {union} type {kind}")
        return read_table(buf, pos, plans[kind - 1], budget)

    return read


# --- Reading tables ----------------------------------------------------------------------


def read_table(buf: bytes, pos: int, plan: _Plan, budget: _Budget) -> Any:
    """The model of the table at ``pos``: its present fields read, its absent scalars
    given their defaults, everything else absent left unset."""
    offsets = slot_offsets(buf, pos, plan.slots)
    values: dict[str, Any] = {}
    for name, slot, kind_slot, read, absent in plan.fields:
        at = offsets[slot]
        if kind_slot >= 0:
            # A union: its type id and its value's reference are both read when present,
            # as the object API reads them, even if the type is NONE and the value unused.
            kind_at = offsets[kind_slot]
            kind = buf[pos + kind_at] if kind_at else 0
            if at:
                at += pos
                at += _U32.unpack_from(buf, at)[0]
                if kind:
                    values[name] = read(buf, at, budget, kind)
        elif at:
            values[name] = read(buf, pos + at, budget)
        elif absent is not _SKIP:
            values[name] = absent
    return build_model(plan.model, values)


def read_root(buf: bytes, model_class: type[models.OdfModel]) -> Any:
    """The model of a finished buffer's root table (a ``MetadataBlock``'s, say).

    Raises ``ValueError`` or ``struct.error`` (among others) for a malformed buffer: the
    caller says what the buffer was meant to be.
    """
    return read_table(buf, _U32.unpack_from(buf, 0)[0], table_plan(model_class), _Budget(len(buf)))
