"""The raw Arrow Schema flatbuffer of ODF 0.36 ``SetDataSchema.schema``.

What is checked against what:

* kamu's pinned bytes (arrow-rs output) for ``a: Int64 not null, b: Boolean not null``
  decode to that schema and re-encode byte for byte;
* the same for every ``SetDataSchema`` vector in ``block-vectors.json`` (none yet);
* our encoding is read back by Arrow C++ (``pyarrow.ipc.read_schema``, after wrapping
  the raw table in an IPC ``Message``): an independent decoder, which also catches a
  wrongly omitted or written default (e.g. Date32's ``DAY`` unit);
* Arrow C++'s own encoding (``Schema.serialize()``, re-rooted at its Schema table) is
  read by our decoder: an independent encoder with a different layout;
* the ODF system-column schema encodes to pinned bytes, hand-checked against arrow-rs
  ``convert.rs`` (build order) and ``Schema.fbs`` (defaults).
"""

from __future__ import annotations

import base64
import contextlib
import struct
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.odf.arrow_schema import (
    ArrowSchemaError,
    decode_arrow_schema,
    encode_arrow_schema,
)

# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _describe_field(field: pa.Field) -> tuple[Any, ...]:
    """Everything a field carries, children included (pyarrow's list equality ignores
    the item name, and struct equality ignores child metadata)."""
    t = field.type
    nested = pa.types.is_list(t) or pa.types.is_large_list(t)
    nested = nested or pa.types.is_fixed_size_list(t) or pa.types.is_struct(t)
    children = [_describe_field(t.field(i)) for i in range(t.num_fields)] if nested else []
    tz = t.tz if pa.types.is_timestamp(t) else None
    return (field.name, str(t), tz, field.nullable, field.metadata or None, children)


def describe(schema: pa.Schema) -> tuple[Any, ...]:
    return ([_describe_field(f) for f in schema], schema.metadata or None)


def assert_same_schema(actual: pa.Schema, expected: pa.Schema) -> None:
    assert actual.equals(expected, check_metadata=True), f"{actual}\n!=\n{expected}"
    assert describe(actual) == describe(expected)


def as_ipc_message(raw: bytes) -> bytes:
    """Wrap a raw Schema flatbuffer in an IPC stream message Arrow C++ can read.

    Message (format/Message.fbs): version (slot 0) = V5 (4), header_type (slot 1) =
    Schema (1), header (slot 2) -> the Schema table of ``raw``, bodyLength 0 (omitted).
    The raw bytes are appended unchanged at 32; their offsets are relative, so they
    stay valid.
    """
    schema_table = struct.unpack_from("<I", raw, 0)[0]
    head = bytearray(32)
    struct.pack_into("<I", head, 0, 16)  # root: Message table at 16
    struct.pack_into("<5H", head, 4, 10, 12, 8, 10, 4)  # vtable at 4
    struct.pack_into("<i", head, 16, 16 - 4)  # table -> vtable
    struct.pack_into("<I", head, 20, 32 + schema_table - 20)  # header
    struct.pack_into("<hB", head, 24, 4, 1)  # version, header_type
    message = bytes(head) + raw
    message += b"\0" * (-len(message) % 8)
    return struct.pack("<Ii", 0xFFFFFFFF, len(message)) + message


def read_with_pyarrow(raw: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(as_ipc_message(raw)))


def raw_from_pyarrow(schema: pa.Schema) -> bytes:
    """Arrow C++'s encoding of ``schema``, re-rooted at its Schema table."""
    stream = schema.serialize().to_pybytes()
    assert stream[:4] == b"\xff\xff\xff\xff"
    (length,) = struct.unpack_from("<i", stream, 4)
    message = stream[8 : 8 + length]
    (table,) = struct.unpack_from("<I", message, 0)
    (to_vtable,) = struct.unpack_from("<i", message, table)
    vtable = table - to_vtable
    type_slot, header_slot = struct.unpack_from("<2H", message, vtable + 6)
    assert message[table + type_slot] == 1  # MessageHeader.Schema
    header = table + header_slot
    schema_table = header + struct.unpack_from("<I", message, header)[0]
    return struct.pack("<II", schema_table + 8, 0) + message


def check_all_ways(schema: pa.Schema) -> None:
    raw = encode_arrow_schema(schema)
    assert_same_schema(decode_arrow_schema(raw), schema)
    assert_same_schema(read_with_pyarrow(raw), schema)
    assert_same_schema(decode_arrow_schema(raw_from_pyarrow(schema)), schema)
    assert encode_arrow_schema(decode_arrow_schema(raw)) == raw


# ---------------------------------------------------------------------------------------
# Reference bytes
# ---------------------------------------------------------------------------------------

# kamu-cli src/domain/opendatafabric/tests/tests/test_serde_yaml.rs, serde_set_data_schema:
# SetDataSchema::new(Schema[Field("a", Int64, false), Field("b", Boolean, false)]) as
# YAML (base64 of the raw schema). The same bytes are pinned before ODF 0.34 (``schema:``)
# and after 0.37 (``rawArrowSchema:``), i.e. across the arrow-rs versions in between.
KAMU_INT64_BOOL = base64.b64decode(
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEA"
    "AABiAAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAA"
    "AQAAAGEAAAA="
)


def test_kamu_reference_bytes_decode_and_reencode() -> None:
    expected = pa.schema([pa.field("a", pa.int64(), False), pa.field("b", pa.bool_(), False)])
    decoded = decode_arrow_schema(KAMU_INT64_BOOL)
    assert_same_schema(decoded, expected)
    assert encode_arrow_schema(expected) == KAMU_INT64_BOOL
    assert_same_schema(read_with_pyarrow(KAMU_INT64_BOOL), expected)


# ---------------------------------------------------------------------------------------
# The ODF system columns plus data columns
# ---------------------------------------------------------------------------------------

UTC_MS = pa.timestamp("ms", tz="UTC")
SYSTEM_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", UTC_MS, nullable=False),
        pa.field("event_time", UTC_MS),
        pa.field("city", pa.string()),
        pa.field("population", pa.int64()),
    ]
)

# Checked by hand against arrow-rs convert.rs / Schema.fbs, e.g. "system_time" reads
# (lowest address first): children [] 00000000; Timestamp vtable 0800 0c00 0a00 0400
# (unit at +10, timezone at +4); table: soffset 08000000, timezone -> +8, 2 pad bytes,
# unit 0100 (ms; pushed first, so last); "UTC" 03000000 55544300; then the name.
# Its Field table (soffset 90ffffff reuses the "offset" field's vtable) holds type,
# children, 3 pad bytes + type_type 0a, name; nullable=false is absent. "event_time"
# has its own vtable 1000 1400 1000 0e00 0f00 0400 0000 0800 with nullable 01 at +14.
SYSTEM_SCHEMA_HEX = (
    "0c000000 08000800 00000400 08000000 04000000 06000000 44010000 04010000 bc000000 "
    "7c000000 3c000000 04000000 a0ffffff 10000000 18000000 00000102 14000000 d4feffff "
    "40000000 00000001 00000000 0a000000 706f7075 6c617469 6f6e0000 d4ffffff 18000000 "
    "0c000000 00000105 10000000 00000000 04000400 04000000 04000000 63697479 00000000 "
    "10001400 10000e00 0f000400 00000800 10000000 14000000 0c000000 0000010a 1c000000 "
    "00000000 c4ffffff 08000000 00000100 03000000 55544300 0a000000 6576656e 745f7469 "
    "6d650000 90ffffff 1c000000 0c000000 0000000a 24000000 00000000 08000c00 0a000400 "
    "08000000 08000000 00000100 03000000 55544300 0b000000 73797374 656d5f74 696d6500 "
    "d4ffffff 10000000 18000000 00000002 14000000 c4ffffff 20000000 00000001 00000000 "
    "02000000 6f700000 10001400 10000000 0f000400 00000800 10000000 18000000 20000000 "
    "00000002 1c000000 08000c00 04000b00 08000000 40000000 00000001 00000000 06000000 "
    "6f666673 65740000"
).replace(" ", "")


def test_system_schema_encoding_is_pinned() -> None:
    assert encode_arrow_schema(SYSTEM_SCHEMA).hex() == SYSTEM_SCHEMA_HEX


def test_system_schema_round_trips_with_nullability_and_utc() -> None:
    raw = bytes.fromhex(SYSTEM_SCHEMA_HEX)
    decoded = decode_arrow_schema(raw)
    assert_same_schema(decoded, SYSTEM_SCHEMA)
    assert [f.nullable for f in decoded] == [False, False, False, True, True, True]
    assert decoded.field("system_time").type.tz == "UTC"  # not "+00:00"
    assert_same_schema(read_with_pyarrow(raw), SYSTEM_SCHEMA)
    check_all_ways(SYSTEM_SCHEMA)


def test_encoding_does_not_depend_on_a_previous_call() -> None:
    first = encode_arrow_schema(SYSTEM_SCHEMA)
    encode_arrow_schema(pa.schema([pa.field("x", pa.list_(pa.string()))]))
    assert encode_arrow_schema(SYSTEM_SCHEMA) == first


# ---------------------------------------------------------------------------------------
# Every supported type
# ---------------------------------------------------------------------------------------

TIME_UNITS = ("s", "ms", "us", "ns")
TIMEZONES = (None, "UTC", "+00:00", "-07:30", "Europe/Paris", "America/New_York")

SUPPORTED_TYPES: list[pa.DataType] = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(0),
    pa.binary(16),
    pa.decimal128(1, 0),
    pa.decimal128(10, 2),
    pa.decimal128(38, 38),
    pa.decimal128(5, -3),
    pa.decimal256(40, 4),
    pa.decimal256(76, 0),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    *[pa.timestamp(unit, tz=tz) for unit in TIME_UNITS for tz in TIMEZONES],
    pa.list_(pa.int64()),
    pa.list_(pa.field("item", pa.string(), nullable=False)),
    pa.list_(pa.field("element", pa.date32())),  # a non-default item name is kept
    pa.large_list(pa.float64()),
    pa.list_(pa.int16(), 3),
    pa.list_(pa.null(), 0),
    pa.struct([]),
    pa.struct(
        [
            pa.field("a", pa.int32(), nullable=False),
            pa.field("b", pa.timestamp("us", tz="UTC")),
            pa.field("c", pa.list_(pa.struct([pa.field("d", pa.decimal128(9, 3))]))),
        ]
    ),
    pa.list_(pa.large_list(pa.list_(pa.time64("ns")))),
]


@pytest.mark.parametrize(
    ("data_type", "nullable"),
    [
        pytest.param(t, nullable, id=f"{t}-{'null' if nullable else 'not null'}")
        for t in SUPPORTED_TYPES
        for nullable in (True, False)
        if nullable or not pa.types.is_null(t)  # pyarrow forbids non-nullable null fields
    ],
)
def test_every_supported_type(data_type: pa.DataType, nullable: bool) -> None:
    check_all_ways(pa.schema([pa.field("col", data_type, nullable=nullable)]))


def test_all_supported_types_in_one_schema() -> None:
    schema = pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(SUPPORTED_TYPES)])
    check_all_ways(schema)


def test_default_scalars_are_left_out() -> None:
    """Scalars equal to their Schema.fbs default are not written (arrow-rs default
    builder): Date64 / Time32(ms) / Float16 / Decimal128 scale 0 give smaller tables
    than their siblings, while Date32's DAY (0) is not the default and is written."""

    def size(t: pa.DataType) -> int:
        return len(encode_arrow_schema(pa.schema([pa.field("x", t)])))

    assert size(pa.date64()) < size(pa.date32())
    assert size(pa.time32("ms")) < size(pa.time32("s")) < size(pa.time64("us"))
    assert size(pa.float16()) < size(pa.float32()) == size(pa.float64())
    assert size(pa.decimal128(10, 0)) < size(pa.decimal128(10, 2)) < size(pa.decimal256(10, 2))


def test_timestamp_without_timezone_still_writes_an_empty_string() -> None:
    """arrow-rs creates the timezone string before the table even when there is none
    and then leaves it unreferenced. Hand-checked layout of ``t: timestamp[ms]``:

    0 root; 4 Schema vtable, 12 Schema table, 20 fields vector; 28 Field vtable
    (nullable at +14, type_type +15, type +4, children +8, name +16), 44 Field table;
    64 children [] + 2 pad; 70 Timestamp vtable 0600 0800 0600 (unit at +6, no
    timezone slot), 76 Timestamp table, unit 0100 at 82; 84 the unreferenced ""
    (len 0, NUL, 3 pad); 92 the name "t".
    """
    naive = encode_arrow_schema(pa.schema([pa.field("t", pa.timestamp("ms"))]))
    words = (
        "0c000000 08000800 00000400 08000000 04000000 01000000 14000000 10001400 10000e00"
        " 0f000400 00000800 10000000 1c000000 0c000000 0000010a 20000000 00000000 00000600"
        " 08000600 06000000 00000100 00000000 00000000 01000000 74000000"
    )
    assert naive == bytes.fromhex(words)
    assert_same_schema(decode_arrow_schema(naive), pa.schema([pa.field("t", pa.timestamp("ms"))]))


# ---------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
leaf_types = st.one_of(
    st.sampled_from([t for t in SUPPORTED_TYPES if not pa.types.is_nested(t)]),
    st.builds(pa.binary, st.integers(min_value=0, max_value=64)),
    st.integers(min_value=1, max_value=38).flatmap(
        lambda p: st.builds(pa.decimal128, st.just(p), st.integers(min_value=-5, max_value=p))
    ),
    st.integers(min_value=1, max_value=76).flatmap(
        lambda p: st.builds(pa.decimal256, st.just(p), st.integers(min_value=-5, max_value=p))
    ),
    st.builds(pa.timestamp, st.sampled_from(TIME_UNITS), st.sampled_from(TIMEZONES)),
)


@st.composite
def fields_of(draw: st.DrawFn, types: st.SearchStrategy[pa.DataType]) -> pa.Field:
    data_type = draw(types)
    nullable = True if pa.types.is_null(data_type) else draw(st.booleans())
    return pa.field(draw(names), data_type, nullable=nullable)


def _nested(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    child = fields_of(inner)
    return st.one_of(
        st.builds(pa.list_, child),
        st.builds(pa.large_list, child),
        st.builds(pa.list_, child, st.integers(min_value=0, max_value=4)),
        st.builds(pa.struct, st.lists(child, max_size=4)),
    )


data_types = st.recursive(leaf_types, _nested, max_leaves=12)
schemas = st.builds(pa.schema, st.lists(fields_of(data_types), max_size=6))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_any_supported_schema_round_trips_and_arrow_cpp_agrees(schema: pa.Schema) -> None:
    check_all_ways(schema)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corrupted_bytes_raise_only_arrow_schema_error(data: st.DataObject) -> None:
    raw = bytearray(data.draw(st.sampled_from([KAMU_INT64_BOOL, bytes.fromhex(SYSTEM_SCHEMA_HEX)])))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[position] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    try:
        decoded = decode_arrow_schema(bytes(raw[:cut]))
    except ArrowSchemaError:
        return
    assert isinstance(decoded, pa.Schema)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_arrow_schema_error(raw: bytes) -> None:
    with contextlib.suppress(ArrowSchemaError):
        assert isinstance(decode_arrow_schema(raw), pa.Schema)


# ---------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------

UNSUPPORTED_TYPES = [
    pa.dictionary(pa.int32(), pa.string()),
    pa.map_(pa.string(), pa.int64()),
    pa.duration("ms"),
    pa.month_day_nano_interval(),
    pa.dense_union([pa.field("a", pa.int8())]),
    pa.string_view(),
    pa.decimal64(10, 2),
]


@pytest.mark.parametrize("data_type", UNSUPPORTED_TYPES, ids=str)
def test_unsupported_types_are_refused_naming_the_field(data_type: pa.DataType) -> None:
    with pytest.raises(ArrowSchemaError, match="'bad_col'"):
        encode_arrow_schema(pa.schema([pa.field("ok", pa.int8()), pa.field("bad_col", data_type)]))
    nested = pa.struct([pa.field("inner", pa.list_(data_type))])
    with pytest.raises(ArrowSchemaError, match=r"'outer\.inner\.item'"):
        encode_arrow_schema(pa.schema([pa.field("outer", nested)]))


@pytest.mark.parametrize(
    "data_type",
    [pa.dictionary(pa.int32(), pa.string()), pa.map_(pa.string(), pa.int64()), pa.duration("s")],
    ids=str,
)
def test_unsupported_types_written_by_arrow_cpp_are_refused_on_decode(
    data_type: pa.DataType,
) -> None:
    raw = raw_from_pyarrow(pa.schema([pa.field("ok", pa.int8()), pa.field("bad_col", data_type)]))
    with pytest.raises(ArrowSchemaError, match="'bad_col'"):
        decode_arrow_schema(raw)


def test_schema_metadata_is_refused() -> None:
    schema = pa.schema([pa.field("a", pa.int8())], metadata={"k": "v"})
    with pytest.raises(ArrowSchemaError, match="schema metadata"):
        encode_arrow_schema(schema)


def test_field_metadata_is_refused_naming_the_field() -> None:
    with pytest.raises(ArrowSchemaError, match="'tagged'"):
        encode_arrow_schema(pa.schema([pa.field("tagged", pa.int8(), metadata={"k": "v"})]))
    child = pa.field("leaf", pa.int8(), metadata={"k": "v"})
    schema = pa.schema([pa.field("s", pa.struct([child]))])
    with pytest.raises(ArrowSchemaError, match=r"'s\.leaf'"):
        encode_arrow_schema(schema)


def test_decode_keeps_metadata() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int8(), metadata={"k": "v"}),
            pa.field("s", pa.struct([pa.field("x", pa.string(), metadata={"x": "1"})])),
        ],
        metadata={"owner": "kamu", "empty": ""},
    )
    assert_same_schema(decode_arrow_schema(raw_from_pyarrow(schema)), schema)


def _first_field_slot(raw: bytes, slot: int) -> int:
    """Absolute position of a slot of the first field's table (hand-parsed)."""

    def u32(pos: int) -> int:
        value: int = struct.unpack_from("<I", raw, pos)[0]
        return value

    def table_slot(table: int, index: int) -> int:
        vtable = table - struct.unpack_from("<i", raw, table)[0]
        offset: int = struct.unpack_from("<H", raw, vtable + 4 + 2 * index)[0]
        assert offset, "slot absent"
        return table + offset

    schema_table = u32(0)
    fields_at = table_slot(schema_table, 1)
    vector = fields_at + u32(fields_at)
    first = vector + 4 + u32(vector + 4)
    return table_slot(first, slot)


def test_non_nullable_null_field_cannot_be_represented() -> None:
    raw = bytearray(encode_arrow_schema(pa.schema([pa.field("n", pa.null())])))
    nullable_at = _first_field_slot(bytes(raw), 1)
    assert raw[nullable_at] == 1
    raw[nullable_at] = 0  # what arrow-rs writes for Field::new("n", Null, false)
    with pytest.raises(ArrowSchemaError, match="'n'"):
        decode_arrow_schema(bytes(raw))


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x04\x00\x00\x00", b"\xff" * 16])
def test_malformed_bytes(bad: bytes) -> None:
    with pytest.raises(ArrowSchemaError):
        decode_arrow_schema(bad)


def test_not_a_schema_is_refused() -> None:
    with pytest.raises(ArrowSchemaError):
        encode_arrow_schema([pa.field("a", pa.int8())])  # type: ignore[arg-type]


def test_module_does_not_import_spark() -> None:
    code = (
        "import sys, reconciler.odf.arrow_schema; "
        "assert not any(m.startswith('pyspark') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
