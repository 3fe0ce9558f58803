"""The direct FlatBuffers reader (``fbs_reader``) against the object API it replaced.

Every block must decode to exactly what the object API gave (``odf_reference_decode``):
equal models, the same fields marked set and the same ``__dict__`` order, since
pydantic serialises in that order and hashes, re-encodings and JSON depend on it. The
blocks are kamu's reference vectors, blocks built here to hold every event type and
every union member with optional fields absent and present, and random ones.
Malformed and hostile buffers must raise ``BlockDecodeError``, nothing else.
"""

from __future__ import annotations

import contextlib
import enum
import random
import re
import struct
import types
import typing
from typing import Any

import flatbuffers
import numpy as np
import pytest
from conftest import load_vectors
from hypothesis import HealthCheck, given, settings
from odf_reference_decode import reference_decode, reference_decode_content
from strategies import blocks_with

from reconciler.odf import BlockDecodeError, decode_block, encode_block, fbs_reader, models
from reconciler.odf.codec import _content_of, decode_data_block
from reconciler.odf.fbs.Manifest import ManifestT
from reconciler.odf.fbs.Timestamp import CreateTimestamp
from reconciler.odf.multiformat import ODF_METADATA_BLOCK, DatasetId, Multihash
from reconciler.odf.timestamps import Timestamp

BLOCK_VECTORS = load_vectors("block-vectors.json")
T0 = Timestamp.parse("2026-01-01T00:00:00.123456789Z")
HASH = Multihash.sha3_256(b"prev")
DATASET_ID = DatasetId.from_public_key(bytes(range(32)))


# --- Comparing models ----------------------------------------------------------------------


def assert_identical(new: Any, old: Any, where: str = "block") -> None:
    """Equal, of the same type, and for models: the same fields set, in the same order."""
    assert type(new) is type(old), where
    assert new == old, where
    if isinstance(old, models.OdfModel):
        assert new.__pydantic_fields_set__ == old.__pydantic_fields_set__, where
        assert list(new.__dict__) == list(old.__dict__), where
        assert new.__pydantic_extra__ == old.__pydantic_extra__, where
        assert new.__pydantic_private__ == old.__pydantic_private__, where
        for name, value in old.__dict__.items():
            assert_identical(new.__dict__[name], value, f"{where}.{name}")
    elif isinstance(old, list):
        assert len(new) == len(old), where
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            assert_identical(a, b, f"{where}[{i}]")


def assert_decodes_as_before(data: bytes) -> models.MetadataBlock:
    """``decode_block`` and the generic reader alone both give what the object API gave."""
    old = reference_decode(data)
    new = decode_block(data)
    assert_identical(new, old)
    assert_identical(fbs_reader.read_root(_content_of(data), models.MetadataBlock), old)
    assert new.model_dump_json(by_alias=True) == old.model_dump_json(by_alias=True)
    assert encode_block(new, 3) == encode_block(old, 3)
    return new


# --- Blocks covering every event and union member ---------------------------------------


def _bare(annotation: Any) -> Any:
    """The annotation without ``| None`` and ``Annotated``."""
    while True:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is typing.Annotated:
            annotation = args[0]
        elif origin in (typing.Union, types.UnionType) and type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            annotation = rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007
        else:
            return annotation


def _int_values(hint: Any) -> list[int]:
    """Zero and the bounds of the integer type (``UInt64``, ``Int32``)."""
    low, high = 0, 7
    if typing.get_origin(hint) is typing.Annotated:
        for meta in typing.get_args(hint)[1:]:
            for bound in getattr(meta, "metadata", []):
                low, high = getattr(bound, "ge", low), getattr(bound, "le", high)
    return [0, high, low]


def _values(hint: Any, full: bool) -> list[Any]:
    """Candidate values of a field: every union member and enum member among them."""
    annotation = _bare(hint)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [m for member in typing.get_args(annotation) for m in samples(member, full)]
    if origin is list:
        items = _values(typing.get_args(annotation)[0], full)
        return [items, []] if full else [items[:1]]
    if isinstance(annotation, type) and issubclass(annotation, models.OdfModel):
        return samples(annotation, full)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return list(annotation)
    simple: dict[Any, list[Any]] = {
        str: ["ünïcode text", ""],
        bool: [True, False],
        bytes: [bytes(range(256)), b""],
        Multihash: [HASH, Multihash.sha3_256(b"other")],
        DatasetId: [DATASET_ID],
        Timestamp: [T0, Timestamp(-86_400 * 400, 1)],
    }
    if annotation is int:
        return _int_values(_strip_optional(hint))
    return simple[annotation]


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def samples(model_class: Any, full: bool) -> list[Any]:
    """Instances of a model: with only its required fields (``full`` false) or all of
    them, enough of each that every candidate value of every field appears once."""
    hints = typing.get_type_hints(model_class, include_extras=True)
    candidates: dict[str, list[Any]] = {}
    for name, field in model_class.model_fields.items():
        if name == "kind" and typing.get_origin(hints[name]) is typing.Literal:
            continue
        if field.is_required() or full:
            candidates[name] = _values(hints[name], full)
    count = max((len(c) for c in candidates.values()), default=1)
    return [
        model_class(**{name: c[i % len(c)] for name, c in candidates.items()}) for i in range(count)
    ]


def _event_samples() -> list[models.OdfModel]:
    return [
        e for event in models.EVENT_TYPES for full in (False, True) for e in samples(event, full)
    ]


EVENT_SAMPLES = _event_samples()


def _block(event: models.OdfModel, seq: int = 3) -> models.MetadataBlock:
    return models.MetadataBlock(
        system_time=T0, prev_block_hash=HASH if seq else None, sequence_number=seq, event=event
    )


def test_the_samples_hold_every_event_type_and_every_union_member() -> None:
    seen: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, models.OdfModel):
            seen.add(type(value).__name__)
            for item in value.__dict__.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for event in EVENT_SAMPLES:
        walk(event)
    schema = fbs_reader.odf_schema()
    members = {name for union in schema.unions.values() for name in union}
    assert members <= seen
    assert {e.__name__ for e in models.EVENT_TYPES} <= seen


# --- Equality with the object API -------------------------------------------------------------


@pytest.mark.parametrize("vector", BLOCK_VECTORS, ids=[v["name"] for v in BLOCK_VECTORS])
def test_a_reference_vector_block_decodes_as_the_object_api_decoded_it(vector: dict) -> None:
    block = assert_decodes_as_before(bytes.fromhex(vector["expectedManifestHex"]))
    assert block.model_dump(mode="json", by_alias=True, exclude_none=True) == vector["block"]


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize(
    "event", EVENT_SAMPLES, ids=[f"{type(e).__name__}-{i}" for i, e in enumerate(EVENT_SAMPLES)]
)
def test_every_event_and_variant_decodes_as_the_object_api_decoded_it(
    event: models.OdfModel, version: int
) -> None:
    for seq in (0, 3):
        block = _block(event, seq)
        data = encode_block(block, version)
        assert assert_decodes_as_before(data) == block


@pytest.mark.parametrize("event", models.EVENT_TYPES, ids=lambda e: e.__name__)
def test_random_blocks_decode_as_the_object_api_decoded_them(event: type[models.OdfModel]) -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(blocks_with(event))
    def same(block: models.MetadataBlock) -> None:
        assert assert_decodes_as_before(encode_block(block)) == block

    same()


def test_absent_scalars_read_as_their_defaults_and_are_marked_set() -> None:
    # Seed's dataset_kind and the block's sequence_number are plain scalars: absent (the
    # builder drops a default value), they read as 0 and count as set, as before.
    block = decode_block(
        encode_block(
            _block(models.Seed(dataset_id=DATASET_ID, dataset_kind=models.DatasetKind.ROOT), 0)
        )
    )
    assert "sequence_number" in block.__pydantic_fields_set__
    assert "dataset_kind" in block.event.__pydantic_fields_set__
    assert "prev_block_hash" not in block.__pydantic_fields_set__


def test_every_schema_field_has_a_model_field_and_every_table_a_plan() -> None:
    schema = fbs_reader.odf_schema()
    for table, fields in schema.tables.items():
        model = getattr(models, table, None)
        if table == "Manifest":  # the envelope: codec reads its three scalars itself
            continue
        if model is None:  # a <Union>Wrapper: read as its union's value
            assert table.endswith("Wrapper") and len(fields) == 1
            continue
        plan = fbs_reader.table_plan(model)
        assert {f.name for f in plan.fields} == {
            name for name in model.model_fields if name.rstrip("_") in {f.name for f in fields}
        }
        assert len(plan.fields) == len(fields), table


def test_the_schema_parser_refuses_what_it_does_not_understand() -> None:
    with pytest.raises(ValueError, match="unsupported field"):
        fbs_reader.parse_schema("table T { a: string (required); }")
    with pytest.raises(ValueError, match="unsupported member"):
        fbs_reader.parse_schema("enum E: int32 { A = 3, B }")


# --- Malformed and hostile buffers ----------------------------------------------------------


def _manifest(content: bytes, version: int = 2) -> bytes:
    """A manifest around arbitrary content bytes, as ``encode_block`` would wrap them."""
    manifest = ManifestT()
    manifest.kind = ODF_METADATA_BLOCK
    manifest.version = version
    manifest.content = np.frombuffer(content, dtype=np.uint8)
    builder = flatbuffers.Builder(1024)
    builder.Finish(manifest.Pack(builder))
    return bytes(builder.Output())


def _content(event: models.OdfModel) -> bytes:
    return _content_of(encode_block(_block(event)))


POLLING = models.SetPollingSource(
    fetch=models.FetchStepUrl(
        url="https://example.org/x.csv",
        event_time=models.EventTimeSourceFromPath(pattern="(.*)"),
        headers=[models.RequestHeader(name="a", value="b")],
    ),
    prepare=[models.PrepStepPipe(command=["gunzip", "-c"])],
    read=models.ReadStepCsv(schema=["a STRING"], header=True),
    merge=models.MergeStrategySnapshot(primary_key=["a"]),
)


def test_an_unknown_event_type_is_a_decode_error() -> None:
    content = _content(models.SetInfo(description="d"))
    root = struct.unpack_from("<I", content)[0]
    vtable = root - struct.unpack_from("<i", content, root)[0]
    type_at = root + struct.unpack_from("<H", content, vtable + 4 + 2 * 3)[0]
    assert content[type_at] == 8  # SetInfo
    bad = content[:type_at] + bytes([99]) + content[type_at + 1 :]
    with pytest.raises(BlockDecodeError, match="unknown MetadataEvent type 99"):
        decode_block(_manifest(bad))


def test_an_unknown_nested_union_type_is_a_decode_error() -> None:
    content = _content(POLLING)
    type_at, _ = _union_slots(content, "fetch")
    assert content[type_at] == 1  # FetchStepUrl
    bad = bytearray(content)
    bad[type_at] = 42
    with pytest.raises(BlockDecodeError, match="unknown FetchStep type 42"):
        decode_block(_manifest(bytes(bad)))


def _union_slots(content: bytes, field: str) -> tuple[int, int]:
    """The position of a SetPollingSource union field's type byte, and of its value slot."""

    def slots(pos: int, count: int) -> list[int]:
        vtable = pos - struct.unpack_from("<i", content, pos)[0]
        return [pos + o if o else 0 for o in struct.unpack_from(f"<{count}H", content, vtable + 4)]

    root = struct.unpack_from("<I", content)[0]
    event_at = slots(root, 5)[4]
    event = event_at + struct.unpack_from("<I", content, event_at)[0]
    index = {"fetch": 0, "read": 3, "merge": 7}[field]
    positions = slots(event, 9)
    return positions[index], positions[index + 1]


@pytest.mark.parametrize("cut", [0.1, 0.25, 0.5, 0.75, 0.9])
def test_a_truncated_block_is_a_decode_error(cut: float) -> None:
    content = _content(POLLING)
    size = int(len(content) * cut)
    with pytest.raises(BlockDecodeError, match="malformed metadata block content"):
        decode_block(_manifest(content[:size]))


def test_every_truncation_and_byte_flip_decodes_or_raises_a_decode_error() -> None:
    content = _content(POLLING)
    original = decode_block(_manifest(content))
    for size in range(len(content)):
        with contextlib.suppress(BlockDecodeError):
            assert decode_block(_manifest(content[:size])) == original
    for at in range(len(content)):
        for value in (0x00, 0x7F, 0xFF):
            flipped = content[:at] + bytes([value]) + content[at + 1 :]
            with contextlib.suppress(BlockDecodeError):
                decode_block(_manifest(flipped))


# Where the direct reader is stricter than the object API was, on purpose.
STRICTER = re.compile(
    r"unknown \w+ type \d+|runs past the end of the buffer|lacks its required \w+"
)


@pytest.mark.parametrize("seed", range(4))
def test_corrupted_blocks_fail_where_the_object_api_failed_and_decode_alike_elsewhere(
    seed: int,
) -> None:
    """Random byte changes in every sample event's buffer: the generic reader fails
    (only with ``BlockDecodeError``) where the object API failed, and otherwise gives the
    same model, but for the two checks it adds: union types and string bounds."""
    rng = random.Random(seed)
    for event in EVENT_SAMPLES[seed::4]:
        content = bytearray(_content(event))
        for _ in range(25):
            corrupted = bytearray(content)
            for _ in range(rng.randint(1, 3)):
                corrupted[rng.randrange(len(corrupted))] = rng.choice([0, 1, 0x7F, 0xFF])
            try:
                old: Any = reference_decode_content(bytes(corrupted))
            except Exception as e:
                old = e
            try:
                new: Any = fbs_reader.read_root(bytes(corrupted), models.MetadataBlock)
            except Exception as e:
                new = e
            if isinstance(old, Exception):
                assert isinstance(new, Exception), (corrupted.hex(), old)
            elif isinstance(new, Exception):
                assert STRICTER.search(str(new)), (corrupted.hex(), new)
            else:
                assert_identical(new, old)
            with contextlib.suppress(BlockDecodeError):  # and nothing else
                decode_block(_manifest(bytes(corrupted)))


def test_offsets_out_of_range_are_decode_errors() -> None:
    content = _content(models.SetLicense(short_name="s", name="n", website_url="w"))
    for root in (len(content), 2**32 - 1, 0xFFFF):
        with pytest.raises(BlockDecodeError, match="malformed metadata block content"):
            decode_block(_manifest(struct.pack("<I", root) + content[4:]))
    # A vtable that would lie before the start of the buffer (the event's).
    event, bad = _event_vtable_before_the_buffer(content)
    with pytest.raises(BlockDecodeError, match=f"the vtable of the table at {event} lies outside"):
        decode_block(_manifest(bad))


def _event_vtable_before_the_buffer(content: bytes) -> tuple[int, bytes]:
    """The position of a block's event table, and the block with that table's vtable
    offset pointing before the start of the buffer."""
    root = struct.unpack_from("<I", content)[0]
    vtable = root - struct.unpack_from("<i", content, root)[0]
    event_at = root + struct.unpack_from("<H", content, vtable + 4 + 2 * 4)[0]
    event = event_at + struct.unpack_from("<I", content, event_at)[0]
    bad = bytearray(content)
    struct.pack_into("<i", bad, event, event + 8)
    return event, bytes(bad)


def test_a_string_running_past_the_end_is_a_decode_error_not_a_shorter_string() -> None:
    content = _content(models.SetInfo(description="abcdef"))
    at = content.index(b"abcdef") - 4
    bad = bytearray(content)
    struct.pack_into("<I", bad, at, 10_000)
    with pytest.raises(BlockDecodeError, match="runs past the end of the buffer"):
        decode_block(_manifest(bytes(bad)))


def test_the_data_block_reader_checks_vtables_and_vectors_as_the_generic_one_does() -> None:
    """The fast path for data blocks reads vtables through the same ``slot_offsets``,
    and a vector running past the buffer is an error there too, not a shorter value."""
    event = models.AddData(
        new_watermark=Timestamp.parse("2026-01-01T00:00:00Z"),
        new_source_state=models.SourceState(source_name="default", kind="odf/etag", value="e-123"),
    )
    content = _content(event)
    assert decode_block(_manifest(content)).event == event
    bad = bytearray(content)
    struct.pack_into("<I", bad, content.index(b"e-123") - 4, 10_000)
    with pytest.raises(BlockDecodeError, match="runs past the end of the buffer"):
        decode_block(_manifest(bytes(bad)))
    table, vtable_outside = _event_vtable_before_the_buffer(content)
    with pytest.raises(BlockDecodeError, match=f"the vtable of the table at {table} lies outside"):
        decode_block(_manifest(vtable_outside))


def test_a_string_that_is_not_utf8_is_a_decode_error() -> None:
    content = _content(models.SetInfo(description="abcdef"))
    bad = content.replace(b"abcdef", b"abc\xffef")
    with pytest.raises(BlockDecodeError, match="can't decode byte 0xff"):
        decode_block(_manifest(bad))


def _shared_keywords(count: int, size: int) -> bytes:
    """A SetInfo block whose ``keywords`` name one string ``count`` times."""
    builder = flatbuffers.Builder(1024)
    text = builder.CreateString("k" * size)
    builder.StartVector(4, count, 4)
    for _ in range(count):
        builder.PrependUOffsetTRelative(text)
    keywords = builder.EndVector()
    builder.StartObject(2)
    builder.PrependUOffsetTRelativeSlot(1, keywords, 0)
    event = builder.EndObject()
    builder.StartObject(5)
    builder.PrependStructSlot(0, CreateTimestamp(builder, *T0.to_fields()), 0)
    builder.PrependUOffsetTRelativeSlot(4, event, 0)
    builder.PrependUint8Slot(3, 8, 0)  # SetInfo
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def test_shared_strings_decode_while_a_sharing_bomb_is_a_decode_error() -> None:
    block = decode_block(_manifest(_shared_keywords(3, 100)))
    assert block.event.keywords == ["k" * 100] * 3
    assert_identical(block, reference_decode_content(_shared_keywords(3, 100)))
    with pytest.raises(BlockDecodeError, match="decodes to more than 8 times its size"):
        decode_block(_manifest(_shared_keywords(2_000, 10_000)))


def _lacking(event: Any, system_time: Timestamp | None = T0) -> bytes:
    """A stored block whose tables lack what ``event`` (built with ``model_construct``)
    lacks: the encoder writes an absent reference for a field left None."""
    block = models.MetadataBlock.model_construct(
        system_time=system_time, prev_block_hash=None, sequence_number=1, event=event
    )
    return encode_block(block)


INTERVAL = models.OffsetInterval(start=0, end=1)
LACKING = {
    "SetPollingSource lacks its required fetch": models.SetPollingSource.model_construct(
        fetch=None, read=models.ReadStepCsv(), merge=models.MergeStrategyAppend()
    ),
    "DataSlice lacks its required logicalHash": models.AddData(
        new_data=models.DataSlice.model_construct(
            logical_hash=None, physical_hash=HASH, offset_interval=INTERVAL, size=3
        )
    ),
    "DataSlice lacks its required physicalHash, offsetInterval": models.AddData(
        new_data=models.DataSlice.model_construct(
            logical_hash=HASH, physical_hash=None, offset_interval=None, size=3
        )
    ),
    "Checkpoint lacks its required physicalHash": models.AddData(
        new_checkpoint=models.Checkpoint.model_construct(physical_hash=None, size=3)
    ),
    "SourceState lacks its required kind": models.AddData(
        new_source_state=models.SourceState.model_construct(source_name="s", kind=None, value="v")
    ),
    "ExecuteTransformInput lacks its required datasetId": models.ExecuteTransform(
        query_inputs=[models.ExecuteTransformInput.model_construct(dataset_id=None)]
    ),
}


@pytest.mark.parametrize("message", list(LACKING))
def test_a_table_lacking_a_required_field_is_a_decode_error(message: str) -> None:
    """Before, such a table decoded to a model without the attribute, and whatever rule
    read it first failed with an AttributeError far from the block. Data blocks are read
    by two paths (the model, and the tuples a full check folds): both say the same."""
    data = _lacking(LACKING[message])
    expected = f"malformed metadata block content: {message}$"
    with pytest.raises(BlockDecodeError, match=expected):
        decode_block(data)
    if not message.startswith("SetPollingSource"):  # a data block
        with pytest.raises(BlockDecodeError, match=expected):
            decode_data_block(data)


def test_a_data_block_lacking_its_system_time_is_a_decode_error() -> None:
    data = _lacking(models.AddData(prev_offset=3), system_time=None)
    message = "malformed metadata block content: MetadataBlock lacks its required systemTime$"
    for decode in (decode_block, decode_data_block):
        with pytest.raises(BlockDecodeError, match=message):
            decode(data)


def test_absent_scalars_are_their_defaults_not_missing_fields() -> None:
    """FlatBuffers leaves out a scalar equal to its default: a slice of size 0 at
    offsets 0..0 is complete, whatever its bytes lack."""
    event = models.AddData(
        new_data=models.DataSlice(
            logical_hash=HASH,
            physical_hash=HASH,
            offset_interval=models.OffsetInterval(start=0, end=0),
            size=0,
        )
    )
    decoded = decode_block(_lacking(event))
    assert decoded.event == event
    assert decode_data_block(_lacking(event)).step.new_data == (HASH, HASH, 0, 0, 0)
