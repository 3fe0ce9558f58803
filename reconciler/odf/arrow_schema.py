"""The raw Arrow ``Schema`` flatbuffer kept in ODF 0.36 ``SetDataSchema.schema``.

Why this exists: up to ODF 0.36 a ``SetDataSchema`` event carries the dataset's Arrow
schema as the *finished Arrow ``Schema`` flatbuffer* that the reference implementation
(kamu, through arrow-rs 52 ``arrow_ipc::convert::schema_to_fb``) builds. It is neither an
IPC message nor IPC stream bytes: there is no continuation marker, no length prefix and no
``Message`` table; the root table is the ``Schema`` itself. Those bytes sit inside the
metadata block, so they enter the block hash: to write blocks whose hashes match kamu's
(kamu re-serializes blocks and compares hashes when it pulls) we must reproduce arrow-rs's
bytes exactly, not merely produce an equivalent schema. pyarrow's own IPC writer lays the
same tables out differently, hence this hand-built encoder.

Byte identity comes from calling ``flatbuffers.Builder`` in exactly the order arrow-rs
does (``schema_to_fb_offset``, ``build_field`` and ``get_fb_field_type`` in
``arrow-ipc/src/convert.rs``); the Python and Rust builders then lay out, pad and dedupe
vtables identically (flatbuffers >= 25.12.19, see ``BINARY-FORMAT.md`` section 2.5).
The order, per field:

* the name string, then the type:

  - Int and FloatingPoint: the empty ``children`` vector first, then the type table
    (Int adds ``is_signed`` before ``bitWidth``);
  - Timestamp: the timezone string (created even when there is none, as ``""``), then
    the table (``unit``, and ``timezone`` only when non-empty), then ``children``;
  - Time adds ``bitWidth`` before ``unit``; Decimal adds precision, scale, bitWidth;
  - List, LargeList, FixedSizeList and Struct: the child fields, then the type table,
    then the ``children`` vector;
  - every other type: the type table, then the empty ``children`` vector;

* then the ``Field`` table: name, type_type, nullable, children, type.

Then the ``fields`` vector and the ``Schema`` table holding only ``fields``. Scalars equal
to their ``Schema.fbs`` default are left out, as the Rust builder does without
``force_defaults``: ``nullable=false``, ``is_signed=false``, endianness Little,
``Precision.HALF``, ``Timestamp.unit=SECOND``, ``Date.unit=MILLISECOND`` (so Date64 has an
empty table and Date32 writes ``DAY=0``), ``Time.unit=MILLISECOND`` and
``Time.bitWidth=32``, ``Decimal.bitWidth=128``, zero precision/scale/byteWidth/listSize.

Key/value metadata is refused when encoding: arrow-rs writes it in ``HashMap`` order,
which is not deterministic, so no byte-identical form exists. Decoding keeps it.

This module must stay free of Spark: it only uses the stdlib, pyarrow and flatbuffers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NoReturn

import flatbuffers
import pyarrow as pa

__all__ = ["ArrowSchemaError", "decode_arrow_schema", "encode_arrow_schema"]


class ArrowSchemaError(ValueError):
    """An Arrow schema we cannot encode byte-exactly, or bytes we cannot decode."""


# Arrow ``Type`` union ids (format/Schema.fbs; union ids start at 1).
_T_NULL = 1
_T_INT = 2
_T_FLOAT = 3
_T_BINARY = 4
_T_UTF8 = 5
_T_BOOL = 6
_T_DECIMAL = 7
_T_DATE = 8
_T_TIME = 9
_T_TIMESTAMP = 10
_T_INTERVAL = 11
_T_LIST = 12
_T_STRUCT = 13
_T_UNION = 14
_T_FIXED_SIZE_BINARY = 15
_T_FIXED_SIZE_LIST = 16
_T_MAP = 17
_T_DURATION = 18
_T_LARGE_BINARY = 19
_T_LARGE_UTF8 = 20
_T_LARGE_LIST = 21

_TYPE_NAMES = {
    _T_INTERVAL: "Interval",
    _T_UNION: "Union",
    _T_MAP: "Map",
    _T_DURATION: "Duration",
    22: "RunEndEncoded",
    23: "BinaryView",
    24: "Utf8View",
    25: "ListView",
    26: "LargeListView",
}

# Table slots (vtable index; voffset = 4 + 2 * slot).
_SCHEMA_ENDIANNESS, _SCHEMA_FIELDS, _SCHEMA_METADATA, _SCHEMA_SLOTS = 0, 1, 2, 4
_FIELD_NAME, _FIELD_NULLABLE, _FIELD_TYPE_TYPE, _FIELD_TYPE = 0, 1, 2, 3
_FIELD_DICTIONARY, _FIELD_CHILDREN, _FIELD_METADATA, _FIELD_SLOTS = 4, 5, 6, 7
_KV_KEY, _KV_VALUE = 0, 1
# Int{bitWidth, is_signed}, FloatingPoint{precision}, Decimal{precision, scale, bitWidth},
# Date{unit}, Time{unit, bitWidth}, Timestamp{unit, timezone}, FixedSizeBinary{byteWidth},
# FixedSizeList{listSize}: each field's slot is its position in the table.

# Defaults from format/Schema.fbs, which the builder leaves out.
_DATE_UNIT_DEFAULT = 1  # DateUnit.MILLISECOND
_TIME_UNIT_DEFAULT = 1  # TimeUnit.MILLISECOND
_TIME_BITS_DEFAULT = 32
_DECIMAL_BITS_DEFAULT = 128

_TIME_UNITS = ("s", "ms", "us", "ns")  # Arrow TimeUnit SECOND=0 .. NANOSECOND=3
_FLOAT_PRECISION = {16: 0, 32: 1, 64: 2}  # Precision HALF, SINGLE, DOUBLE
_INT_TYPES: dict[tuple[int, bool], pa.DataType] = {
    (8, True): pa.int8(),
    (16, True): pa.int16(),
    (32, True): pa.int32(),
    (64, True): pa.int64(),
    (8, False): pa.uint8(),
    (16, False): pa.uint16(),
    (32, False): pa.uint32(),
    (64, False): pa.uint64(),
}
_MAX_DEPTH = 64


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def encode_arrow_schema(schema: pa.Schema) -> bytes:
    """The raw Arrow ``Schema`` flatbuffer arrow-rs 52 ``schema_to_fb`` writes for ``schema``.

    Raises ``ArrowSchemaError`` for any key/value metadata (schema or field) and for types
    outside the supported set (see ``decode_arrow_schema``).
    """
    if not isinstance(schema, pa.Schema):
        raise ArrowSchemaError(f"expected a pyarrow.Schema, got {type(schema).__name__}")
    if schema.metadata:
        raise ArrowSchemaError(
            "schema metadata cannot be encoded byte-exactly (arrow-rs writes it in HashMap "
            "order); drop it first"
        )
    builder = flatbuffers.Builder(256)
    fields = [_build_field(builder, field, field.name, 0) for field in schema]
    fields_vector = _offset_vector(builder, fields)
    builder.StartObject(_SCHEMA_SLOTS)
    builder.PrependUOffsetTRelativeSlot(_SCHEMA_FIELDS, fields_vector, 0)
    root = builder.EndObject()
    builder.Finish(root)
    out: bytes = bytes(builder.Output())
    return out


def _offset_vector(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    end: int = builder.EndVector()
    return end


def _empty_table(builder: flatbuffers.Builder) -> int:
    builder.StartObject(0)
    end: int = builder.EndObject()
    return end


def _build_field(builder: flatbuffers.Builder, field: pa.Field, path: str, depth: int) -> int:
    if depth > _MAX_DEPTH:
        raise ArrowSchemaError(f"field {path!r}: nested deeper than {_MAX_DEPTH} levels")
    if field.metadata:
        raise ArrowSchemaError(
            f"field {path!r} has key/value metadata, which cannot be encoded byte-exactly "
            "(arrow-rs writes it in HashMap order); drop it first"
        )
    name = builder.CreateString(_utf8(field.name, path))
    type_id, type_offset, children = _build_type(builder, field.type, path, depth)
    builder.StartObject(_FIELD_SLOTS)
    builder.PrependUOffsetTRelativeSlot(_FIELD_NAME, name, 0)
    builder.PrependUint8Slot(_FIELD_TYPE_TYPE, type_id, 0)
    builder.PrependBoolSlot(_FIELD_NULLABLE, bool(field.nullable), False)
    builder.PrependUOffsetTRelativeSlot(_FIELD_CHILDREN, children, 0)
    builder.PrependUOffsetTRelativeSlot(_FIELD_TYPE, type_offset, 0)
    end: int = builder.EndObject()
    return end


def _utf8(text: str, path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArrowSchemaError(f"field {path!r}: name is not valid UTF-8") from exc


def _build_type(
    builder: flatbuffers.Builder, t: pa.DataType, path: str, depth: int
) -> tuple[int, int, int]:
    """``(type id, type table, children vector)`` in arrow-rs ``get_fb_field_type`` order."""
    types = pa.types
    if isinstance(t, pa.BaseExtensionType):
        _unsupported(path, t, "extension types live in field metadata in arrow-rs")
    if types.is_integer(t):
        children = _offset_vector(builder, [])
        builder.StartObject(2)
        builder.PrependBoolSlot(1, types.is_signed_integer(t), False)
        builder.PrependInt32Slot(0, t.bit_width, 0)
        return _T_INT, builder.EndObject(), children
    if types.is_floating(t):
        children = _offset_vector(builder, [])
        builder.StartObject(1)
        builder.PrependInt16Slot(0, _FLOAT_PRECISION[t.bit_width], 0)
        return _T_FLOAT, builder.EndObject(), children
    simple = _simple_type_id(t)
    if simple is not None:
        table = _empty_table(builder)
        return simple, table, _offset_vector(builder, [])
    if types.is_decimal128(t) or types.is_decimal256(t):
        builder.StartObject(3)
        builder.PrependInt32Slot(0, t.precision, 0)
        builder.PrependInt32Slot(1, t.scale, 0)
        builder.PrependInt32Slot(2, t.bit_width, _DECIMAL_BITS_DEFAULT)
        table = builder.EndObject()
        return _T_DECIMAL, table, _offset_vector(builder, [])
    if types.is_fixed_size_binary(t):
        builder.StartObject(1)
        builder.PrependInt32Slot(0, t.byte_width, 0)
        table = builder.EndObject()
        return _T_FIXED_SIZE_BINARY, table, _offset_vector(builder, [])
    if types.is_date32(t) or types.is_date64(t):
        builder.StartObject(1)
        builder.PrependInt16Slot(0, 0 if types.is_date32(t) else 1, _DATE_UNIT_DEFAULT)
        table = builder.EndObject()
        return _T_DATE, table, _offset_vector(builder, [])
    if types.is_time32(t) or types.is_time64(t):
        builder.StartObject(2)
        builder.PrependInt32Slot(1, t.bit_width, _TIME_BITS_DEFAULT)
        builder.PrependInt16Slot(0, _TIME_UNITS.index(t.unit), _TIME_UNIT_DEFAULT)
        table = builder.EndObject()
        return _T_TIME, table, _offset_vector(builder, [])
    if types.is_timestamp(t):
        tz = "" if t.tz is None else str(t.tz)
        tz_offset = builder.CreateString(_utf8(tz, path))
        builder.StartObject(2)
        builder.PrependInt16Slot(0, _TIME_UNITS.index(t.unit), 0)
        if tz:
            builder.PrependUOffsetTRelativeSlot(1, tz_offset, 0)
        table = builder.EndObject()
        return _T_TIMESTAMP, table, _offset_vector(builder, [])
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        item = t.value_field
        child = _build_field(builder, item, f"{path}.{item.name}", depth + 1)
        if types.is_fixed_size_list(t):
            builder.StartObject(1)
            builder.PrependInt32Slot(0, t.list_size, 0)
            type_id, table = _T_FIXED_SIZE_LIST, builder.EndObject()
        else:
            type_id = _T_LIST if types.is_list(t) else _T_LARGE_LIST
            table = _empty_table(builder)
        return type_id, table, _offset_vector(builder, [child])
    if types.is_struct(t):
        members = [t.field(i) for i in range(t.num_fields)]
        built = [_build_field(builder, m, f"{path}.{m.name}", depth + 1) for m in members]
        table = _empty_table(builder)
        return _T_STRUCT, table, _offset_vector(builder, built)
    _unsupported(path, t, "not in the supported set")


def _simple_type_id(t: pa.DataType) -> int | None:
    """Types whose Arrow table has no fields."""
    types = pa.types
    checks = (
        (types.is_null, _T_NULL),
        (types.is_boolean, _T_BOOL),
        (types.is_string, _T_UTF8),
        (types.is_large_string, _T_LARGE_UTF8),
        (types.is_binary, _T_BINARY),
        (types.is_large_binary, _T_LARGE_BINARY),
    )
    for check, type_id in checks:
        if check(t):
            return type_id
    return None


def _unsupported(path: str, t: object, why: str) -> NoReturn:
    raise ArrowSchemaError(f"field {path!r}: Arrow type {t} is not supported ({why})")


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------


class _Buffer:
    """Bounds-checked little-endian reads over the flatbuffer bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, fmt: str, pos: int) -> int:
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.data):
            raise ArrowSchemaError(f"malformed Arrow schema: read past the end at {pos}")
        value: int = struct.unpack_from(fmt, self.data, pos)[0]
        return value

    def follow(self, pos: int) -> int:
        """Target of the uoffset stored at ``pos``."""
        target = pos + self.read("<I", pos)
        if target >= len(self.data):
            raise ArrowSchemaError(f"malformed Arrow schema: offset at {pos} points outside")
        return target

    def vector(self, pos: int, element_size: int) -> tuple[int, int]:
        """``(first element position, length)`` of the vector referenced at ``pos``."""
        start = self.follow(pos)
        length = self.read("<I", start)
        if start + 4 + length * element_size > len(self.data):
            raise ArrowSchemaError(f"malformed Arrow schema: vector at {start} overruns")
        return start + 4, length

    def string(self, pos: int) -> str:
        start, length = self.vector(pos, 1)
        try:
            return self.data[start : start + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArrowSchemaError(f"malformed Arrow schema: bad UTF-8 at {start}") from exc


@dataclass(frozen=True)
class _Table:
    buf: _Buffer
    pos: int
    vtable: int
    vtable_size: int

    @classmethod
    def at(cls, buf: _Buffer, pos: int) -> _Table:
        vtable = pos - buf.read("<i", pos)
        vtable_size = buf.read("<H", vtable)
        object_size = buf.read("<H", vtable + 2)
        if vtable_size < 4 or vtable_size % 2 or vtable + vtable_size > len(buf.data):
            raise ArrowSchemaError(f"malformed Arrow schema: bad vtable for table at {pos}")
        if object_size < 4 or pos + object_size > len(buf.data):
            raise ArrowSchemaError(f"malformed Arrow schema: table at {pos} overruns")
        return cls(buf, pos, vtable, vtable_size)

    def slot(self, index: int) -> int | None:
        """Absolute position of a present field, or None."""
        voffset = 4 + 2 * index
        if voffset >= self.vtable_size:
            return None
        offset = self.buf.read("<H", self.vtable + voffset)
        return self.pos + offset if offset else None

    def scalar(self, index: int, fmt: str, default: int) -> int:
        pos = self.slot(index)
        return default if pos is None else self.buf.read(fmt, pos)

    def table(self, index: int) -> _Table | None:
        pos = self.slot(index)
        return None if pos is None else _Table.at(self.buf, self.buf.follow(pos))

    def string(self, index: int) -> str | None:
        pos = self.slot(index)
        return None if pos is None else self.buf.string(pos)

    def tables(self, index: int) -> list[_Table]:
        pos = self.slot(index)
        if pos is None:
            return []
        start, length = self.buf.vector(pos, 4)
        return [_Table.at(self.buf, self.buf.follow(start + 4 * i)) for i in range(length)]


class _Decoder:
    def __init__(self, data: bytes) -> None:
        self.buf = _Buffer(data)
        # Forward-only offsets still allow shared or self-referencing tables in hostile
        # input; a legitimate buffer needs far more than 8 bytes per field.
        self.budget = len(data) // 8 + 1

    def schema(self) -> pa.Schema:
        root = _Table.at(self.buf, self.buf.follow(0))
        if root.scalar(_SCHEMA_ENDIANNESS, "<h", 0) != 0:
            raise ArrowSchemaError("big-endian Arrow schemas are not supported")
        if root.slot(_SCHEMA_FIELDS) is None:
            raise ArrowSchemaError("malformed Arrow schema: no fields vector")
        fields = [self.field(t, None, 0) for t in root.tables(_SCHEMA_FIELDS)]
        return pa.schema(fields, metadata=self.metadata(root, _SCHEMA_METADATA) or None)

    def metadata(self, table: _Table, index: int) -> dict[str, str]:
        out: dict[str, str] = {}
        for kv in table.tables(index):
            key, value = kv.string(_KV_KEY), kv.string(_KV_VALUE)
            if key is not None and value is not None:
                out[key] = value
        return out

    def field(self, table: _Table, parent: str | None, depth: int) -> pa.Field:
        self.budget -= 1
        if self.budget < 0 or depth > _MAX_DEPTH:
            raise ArrowSchemaError("malformed Arrow schema: too many or too deeply nested fields")
        name = table.string(_FIELD_NAME) or ""
        path = name if parent is None else f"{parent}.{name}"
        if table.slot(_FIELD_DICTIONARY) is not None:
            _unsupported(path, "Dictionary", "dictionary-encoded fields")
        data_type = self.data_type(table, path, depth)
        nullable = table.scalar(_FIELD_NULLABLE, "<B", 0) != 0
        try:
            return pa.field(
                name, data_type, nullable, metadata=self.metadata(table, _FIELD_METADATA) or None
            )
        except (ValueError, TypeError, pa.ArrowException) as exc:
            raise ArrowSchemaError(f"field {path!r}: {exc}") from exc

    def data_type(self, field: _Table, path: str, depth: int) -> pa.DataType:
        type_id = field.scalar(_FIELD_TYPE_TYPE, "<B", 0)
        if type_id in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[type_id]
        children: list[pa.Field] = []
        if type_id in (_T_LIST, _T_LARGE_LIST, _T_FIXED_SIZE_LIST, _T_STRUCT):
            children = [self.field(c, path, depth + 1) for c in field.tables(_FIELD_CHILDREN)]
            if type_id == _T_STRUCT:
                return pa.struct(children)
            if len(children) != 1:
                raise ArrowSchemaError(f"field {path!r}: a list type needs exactly one child")
            if type_id == _T_LIST:
                return pa.list_(children[0])
            if type_id == _T_LARGE_LIST:
                return pa.large_list(children[0])
        if type_id not in _PARAMETRIC_TYPES:
            name = _TYPE_NAMES.get(type_id, f"with type id {type_id}")
            _unsupported(path, name, "not in the supported set")
        table = field.table(_FIELD_TYPE)
        if table is None:
            raise ArrowSchemaError(f"field {path!r}: type id {type_id} has no type table")
        try:
            return _parametric_type(type_id, table, children)
        except KeyError as exc:
            raise ArrowSchemaError(f"field {path!r}: unsupported type parameters {exc}") from exc
        except (ValueError, TypeError, pa.ArrowException) as exc:
            raise ArrowSchemaError(f"field {path!r}: invalid type parameters: {exc}") from exc


_SIMPLE_TYPES: dict[int, pa.DataType] = {
    _T_NULL: pa.null(),
    _T_BOOL: pa.bool_(),
    _T_UTF8: pa.string(),
    _T_LARGE_UTF8: pa.large_string(),
    _T_BINARY: pa.binary(),
    _T_LARGE_BINARY: pa.large_binary(),
}
_PARAMETRIC_TYPES = frozenset(
    {
        _T_INT,
        _T_FLOAT,
        _T_DECIMAL,
        _T_DATE,
        _T_TIME,
        _T_TIMESTAMP,
        _T_FIXED_SIZE_BINARY,
        _T_FIXED_SIZE_LIST,
    }
)
_FLOAT_TYPES = {0: pa.float16(), 1: pa.float32(), 2: pa.float64()}
_DATE_TYPES = {0: pa.date32(), 1: pa.date64()}
_TIME_TYPES = {
    (32, 0): pa.time32("s"),
    (32, 1): pa.time32("ms"),
    (64, 2): pa.time64("us"),
    (64, 3): pa.time64("ns"),
}
_UNIT_NAMES = dict(enumerate(_TIME_UNITS))


def _parametric_type(type_id: int, t: _Table, children: list[pa.Field]) -> pa.DataType:
    """The pyarrow type of a type table with parameters; KeyError for unknown values."""
    if type_id == _T_INT:
        return _INT_TYPES[(t.scalar(0, "<i", 0), t.scalar(1, "<B", 0) != 0)]
    if type_id == _T_FLOAT:
        return _FLOAT_TYPES[t.scalar(0, "<h", 0)]
    if type_id == _T_DECIMAL:
        precision, scale = t.scalar(0, "<i", 0), t.scalar(1, "<i", 0)
        bits = t.scalar(2, "<i", _DECIMAL_BITS_DEFAULT)
        make = {128: pa.decimal128, 256: pa.decimal256}[bits]
        decimal: pa.DataType = make(precision, scale)
        return decimal
    if type_id == _T_DATE:
        return _DATE_TYPES[t.scalar(0, "<h", _DATE_UNIT_DEFAULT)]
    if type_id == _T_TIME:
        bits = t.scalar(1, "<i", _TIME_BITS_DEFAULT)
        return _TIME_TYPES[(bits, t.scalar(0, "<h", _TIME_UNIT_DEFAULT))]
    if type_id == _T_TIMESTAMP:
        # The timezone string is kept verbatim: "UTC" stays "UTC", not "+00:00".
        timestamp: pa.DataType = pa.timestamp(
            _UNIT_NAMES[t.scalar(0, "<h", 0)], tz=t.string(1) or None
        )
        return timestamp
    # pyarrow reads a negative width as "variable size": refuse it rather than change type.
    width = t.scalar(0, "<i", 0)
    if width < 0:
        raise ValueError(f"negative byteWidth/listSize {width}")
    if type_id == _T_FIXED_SIZE_BINARY:
        fixed: pa.DataType = pa.binary(width)
        return fixed
    fixed_list: pa.DataType = pa.list_(children[0], width)
    return fixed_list


def decode_arrow_schema(data: bytes) -> pa.Schema:
    """Read a raw Arrow ``Schema`` flatbuffer (as in ``SetDataSchema.schema``) back.

    Supported types, both ways: Null, Boolean, Int8..64, UInt8..64, Float16/32/64, Utf8,
    LargeUtf8, Binary, LargeBinary, FixedSizeBinary, Decimal128/256, Date32/64,
    Time32(s/ms), Time64(us/ns), Timestamp (any unit, with or without a timezone, kept
    verbatim), List, LargeList, FixedSizeList and Struct. Anything else (dictionary
    encoding, Map, Duration, Interval, Union, views...) and malformed bytes raise
    ``ArrowSchemaError``. Schema and field key/value metadata are kept.
    """
    return _Decoder(bytes(data)).schema()
