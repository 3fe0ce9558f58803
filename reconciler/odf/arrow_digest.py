"""arrow-digest: the "logical hash" ODF gives a data slice, byte-exact with kamu's.

ODF identifies the *content* of a data slice (independently of how Parquet happened to
encode it) by ``RecordDigestV0<Sha3_256>`` from the Rust crate ``kamu-data/arrow-digest``.
A dataset written by us must carry the same logical hash the reference would compute,
or a reference node rejects our blocks; so this module reproduces the crate's exact byte
stream (see ``shared/odf/BINARY-FORMAT.md`` section 4) rather than inventing a hash.

Why it is vectorised: the reference walks values one by one in Rust. Doing the same in
Python would cost seconds per million rows. SHA3 is a streaming hash, so instead we
build, with numpy over whole Arrow buffers, the *exact* bytes the reference feeds to each
column hasher (its "preimage") a chunk of elements at a time, and feed each chunk with one
``update`` call. The preimage is identical, hence so is the digest.

Preimage of one column (``ArrayDigestV0``), per element, after the type hash:

* null element (per the combined validity, see ``_combine``): one ``00`` byte;
* fixed-width types: the raw little-endian value bytes;
* Boolean: ``01`` for false, ``02`` for true;
* binary/string types: ``u64 length`` then the bytes (FixedSizeBinary too);
* lists: ``u64 sublist length`` then the items' preimages (item type not re-hashed).

Two reference quirks are kept on purpose, because the hash must match the reference:

* ``maybe_combine`` ORs a struct's validity with its child's (valid in either means
  valid), and drops both when the parent's combined buffer has no nulls;
* that combination is applied per array handed in (per record batch), so below a
  struct with nulls the digest can depend on batch boundaries, exactly as in the
  reference. Everywhere else it does not.

This module must stay free of Spark: it only imports the stdlib, numpy and pyarrow.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

if TYPE_CHECKING:  # typing only: the protocol hashlib's update() takes
    from _typeshed import ReadableBuffer

__all__ = [
    "LOGICAL_HASH_MULTIBASE_PREFIX",
    "UnsupportedArrowTypeError",
    "array_digest",
    "array_preimage",
    "arrow_digest",
    "logical_hash",
]

#: Multibase base16 prefix of the logical hash: ``f`` + varint(0x300016
#: "arrow0-sha3-256") ``9680c001`` + digest length ``20``.
LOGICAL_HASH_MULTIBASE_PREFIX = "f9680c00120"

# Elements encoded per numpy pass: bounds the temporary memory of one pass (a few MB
# for typical columns) while keeping the per-pass Python overhead negligible.
_CHUNK_ELEMENTS = 1 << 16

_U64_MASK = (1 << 64) - 1
_NULL_MARKER = b"\x00"

# hash_data_type: type ids (u16 LE) from arrow-digest src/schema_digest.rs.
_TYPE_INT = 1
_TYPE_FLOAT = 2
_TYPE_BINARY = 3
_TYPE_UTF8 = 4
_TYPE_BOOL = 5
_TYPE_DECIMAL = 6
_TYPE_DATE = 7
_TYPE_TIME = 8
_TYPE_TIMESTAMP = 9
_TYPE_LIST = 11

_TIME_UNIT_ID = {"s": 0, "ms": 1, "us": 2, "ns": 3}

Mask = npt.NDArray[np.bool_]
Bytes = npt.NDArray[np.uint8]
Lengths = npt.NDArray[np.int64]


class UnsupportedArrowTypeError(TypeError):
    """The reference panics (``unimplemented!``) on this Arrow type; we refuse clearly.

    A digest we cannot prove equal to the reference's is worse than none, so types the
    reference does not hash (Null, Map, Union, Duration, Interval, list views, run-end
    encoding, structs inside lists, ...) are rejected with the offending field named.
    """

    def __init__(self, field: str, arrow_type: pa.DataType, reason: str = "") -> None:
        self.field = field
        self.arrow_type = arrow_type
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"arrow-digest cannot hash field {field!r} of Arrow type {arrow_type}{detail}"
        )


class _Sink(Protocol):
    """Anything with ``update(bytes-like)``: a hashlib object, or a recorder in tests."""

    def update(self, data: ReadableBuffer, /) -> None: ...


class _Hasher(_Sink, Protocol):
    """A hashlib-like object: a sink that can also produce its digest."""

    def digest(self) -> bytes: ...


class _Recorder:
    """A sink that keeps every byte, so tests can compare preimages, not just digests."""

    def __init__(self) -> None:
        self.data = bytearray()

    def update(self, data: ReadableBuffer, /) -> None:
        self.data += memoryview(data).tobytes()


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def arrow_digest(data: pa.Table | pa.RecordBatch) -> bytes:
    """Return the raw 32-byte ``RecordDigestV0<Sha3_256>`` of a table or record batch.

    Each ChunkedArray chunk is streamed into its column hasher in order, so the result
    equals feeding the reference one record batch per chunk.
    """
    schema: pa.Schema = data.schema
    record = hashlib.sha3_256()
    leaves_per_column: list[list[_Hasher]] = []
    for field in schema:
        column_leaves: list[_Hasher] = []
        for name, path, level, leaf_type in _walk_fields(field, field.name, 0):
            raw_name = name.encode("utf-8")
            record.update(_u64(len(raw_name)) + raw_name + _u64(level))
            if leaf_type is not None:
                column_leaves.append(hashlib.sha3_256(_hash_data_type(leaf_type, path)))
        leaves_per_column.append(column_leaves)

    for index, field in enumerate(schema):
        column = data.column(index)
        chunks: Sequence[pa.Array] = (
            column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        )
        for chunk in chunks:
            leaves = iter(leaves_per_column[index])
            _feed_nested(chunk, field.name, None, leaves)

    for column_leaves in leaves_per_column:
        for hasher in column_leaves:
            record.update(hasher.digest())
    return record.digest()


def logical_hash(data: pa.Table | pa.RecordBatch) -> str:
    """Return the ODF logical hash as kamu prints it: ``f9680c00120`` + hex digest."""
    return LOGICAL_HASH_MULTIBASE_PREFIX + arrow_digest(data).hex()


def array_digest(array: pa.Array | pa.ChunkedArray) -> bytes:
    """Return ``ArrayDigestV0<Sha3_256>::digest`` of one array: type hash, then values.

    A ChunkedArray is streamed chunk after chunk into the same hasher, so chunking does
    not change the result. Struct arrays are refused, as in the reference (only the
    record digest flattens structs).
    """
    hasher = hashlib.sha3_256()
    _feed_array(hasher, array, "<array>")
    return hasher.digest()


def array_preimage(array: pa.Array | pa.ChunkedArray) -> bytes:
    """Return the exact bytes ``array_digest`` feeds to SHA3-256 (for tests, debugging).

    Materialises the whole preimage, so use it on small arrays only.
    """
    recorder = _Recorder()
    _feed_array(recorder, array, "<array>")
    return bytes(recorder.data)


# ---------------------------------------------------------------------------------------
# Schema side: field preamble and hash_data_type
# ---------------------------------------------------------------------------------------


def _walk_fields(
    field: pa.Field, path: str, level: int
) -> Iterator[tuple[str, str, int, pa.DataType | None]]:
    """Yield ``(name, dotted path, level, leaf type or None for a struct)`` depth-first.

    Mirrors ``RecordDigestV0::walk_nested_fields``: a struct contributes its name to the
    preamble but no column; its children follow at ``level + 1``.
    """
    data_type = _storage_type(field.type)
    if pa.types.is_struct(data_type):
        yield field.name, path, level, None
        for i in range(data_type.num_fields):
            child = data_type.field(i)
            yield from _walk_fields(child, f"{path}.{child.name}", level + 1)
    else:
        yield field.name, path, level, field.type


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """Strip wrappers the reference never sees as such.

    Extension types are a pyarrow notion (arrow-rs keeps them in field metadata over
    the storage type), and dictionaries are decoded before hashing, as kamu requires.
    """
    while True:
        if isinstance(data_type, pa.BaseExtensionType):
            data_type = data_type.storage_type
        elif pa.types.is_dictionary(data_type):
            data_type = data_type.value_type
        else:
            return data_type


def _u64(value: int) -> bytes:
    """Little-endian u64, wrapping like Rust's ``as u64`` (negative decimal scales)."""
    return struct.pack("<Q", value & _U64_MASK)


def _u16(value: int) -> bytes:
    return struct.pack("<H", value)


def _hash_data_type(data_type: pa.DataType, field: str) -> bytes:
    """Bytes of ``hash_data_type`` (arrow-digest ``src/schema_digest.rs``) for a type.

    Field nullability and metadata never enter here: the reference ignores them.
    """
    t = _storage_type(data_type)
    types = pa.types
    if types.is_boolean(t):
        return _u16(_TYPE_BOOL)
    if types.is_integer(t):
        signed = b"\x01" if types.is_signed_integer(t) else b"\x00"
        return _u16(_TYPE_INT) + signed + _u64(t.bit_width)
    if types.is_floating(t):
        return _u16(_TYPE_FLOAT) + _u64(t.bit_width)
    if types.is_decimal128(t) or types.is_decimal256(t):
        return _u16(_TYPE_DECIMAL) + _u64(t.bit_width) + _u64(t.precision) + _u64(t.scale)
    if (
        types.is_binary(t)
        or types.is_large_binary(t)
        or types.is_fixed_size_binary(t)
        or types.is_binary_view(t)
    ):
        return _u16(_TYPE_BINARY)
    if types.is_string(t) or types.is_large_string(t) or types.is_string_view(t):
        return _u16(_TYPE_UTF8)
    if types.is_date32(t):
        return _u16(_TYPE_DATE) + _u64(32) + _u16(0)
    if types.is_date64(t):
        return _u16(_TYPE_DATE) + _u64(64) + _u16(1)
    if types.is_time32(t) or types.is_time64(t):
        return _u16(_TYPE_TIME) + _u64(t.bit_width) + _u16(_TIME_UNIT_ID[t.unit])
    if types.is_timestamp(t):
        head = _u16(_TYPE_TIMESTAMP) + _u16(_TIME_UNIT_ID[t.unit])
        if t.tz is None:
            return head + b"\x00"
        tz = str(t.tz).encode("utf-8")  # verbatim: "UTC" and "+00:00" hash differently
        return head + _u64(len(tz)) + tz
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return _u16(_TYPE_LIST) + _hash_data_type(t.value_type, f"{field}.item")
    if types.is_struct(t):
        raise UnsupportedArrowTypeError(
            field, data_type, "structs are only supported as record columns, not in lists"
        )
    if types.is_decimal32(t) or types.is_decimal64(t):
        raise UnsupportedArrowTypeError(
            field, data_type, "the reference type table defines only Decimal128/256"
        )
    raise UnsupportedArrowTypeError(field, data_type, "the reference does not hash it")


# ---------------------------------------------------------------------------------------
# Data side
# ---------------------------------------------------------------------------------------


def _feed_array(sink: _Sink, array: pa.Array | pa.ChunkedArray, field: str) -> None:
    """Feed ``ArrayDigestV0``'s full preimage (type hash, then values) into ``sink``."""
    sink.update(_hash_data_type(array.type, field))
    if pa.types.is_struct(_storage_type(array.type)):
        raise UnsupportedArrowTypeError(
            field, array.type, "struct arrays are only digested by arrow_digest"
        )
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    for chunk in chunks:
        _feed_leaf(sink, chunk, None, field)


def _feed_nested(
    array: pa.Array, field: str, parent: Mask | None, leaves: Iterator[_Hasher]
) -> None:
    """Walk one column of one batch depth-first, like ``walk_nested_columns``.

    A struct passes ``maybe_combine(parent, own validity)`` down to its children; a leaf
    goes to the next column hasher in depth-first order.
    """
    array = _normalise(array, field)
    if pa.types.is_struct(array.type):
        combined = _combine(parent, _own_validity(array))
        for i in range(array.type.num_fields):
            child_name = f"{field}.{array.type.field(i).name}"
            _feed_nested(array.field(i), child_name, combined, leaves)
    else:
        _feed_leaf(next(leaves), array, parent, field)


def _normalise(array: pa.Array, field: str) -> pa.Array:
    """Turn the array into the plain layout the reference would see.

    Extension arrays become their storage, dictionaries are decoded (the reference
    panics on them; kamu decodes first), and view types are cast to their offset
    layouts, which hash identically (HEAD hashes views like Utf8/Binary).
    """
    while True:
        t = array.type
        if isinstance(t, pa.BaseExtensionType):
            array = array.storage
        elif pa.types.is_dictionary(t):
            try:
                array = array.dictionary_decode()
            except pa.ArrowException as exc:  # pragma: no cover - defensive
                raise UnsupportedArrowTypeError(field, t, f"cannot decode: {exc}") from exc
        elif pa.types.is_string_view(t):
            array = array.cast(pa.large_string())
        elif pa.types.is_binary_view(t):
            array = array.cast(pa.large_binary())
        else:
            return array


def _feed_leaf(sink: _Sink, array: pa.Array, parent: Mask | None, field: str) -> None:
    """``ArrayDigestV0::update(array, parent)``: feed the values of one leaf array."""
    array = _normalise(array, field)
    valid = _combine(parent, _own_validity(array))
    if valid is not None and bool(valid.all()):
        valid = None  # same bytes: every element takes the non-null branch
    length = len(array)
    width = _fixed_width(array.type)
    if width is not None and valid is None:
        # The reference hashes the value slice in one go; so can we, zero-copy.
        start = array.offset * width
        if length:
            sink.update(memoryview(array.buffers()[1])[start : start + length * width])
        return
    for start in range(0, length, _CHUNK_ELEMENTS):
        piece = array.slice(start, _CHUNK_ELEMENTS)
        piece_valid = None if valid is None else valid[start : start + len(piece)]
        data, _ = _encode(piece, piece_valid, field)
        sink.update(np.ascontiguousarray(data).data)  # the bytes, zero-copy


def _combine(parent: Mask | None, own: Mask | None) -> Mask | None:
    """``maybe_combine_null_buffers`` from arrow-digest ``src/utils.rs``, exactly.

    ``own`` is ``None`` whenever the array has no nulls: arrow-rs drops zero-null
    validity buffers when it builds ``ArrayData`` (and the reference calls
    ``to_data()``), so a present-but-empty own buffer never reaches the reference.
    ``parent`` may however be an OR-combined buffer with zero nulls, which the reference
    keeps; with such a parent the result is "no validity", even if ``own`` has nulls.
    Validity is OR-ed (valid if valid in either), a quirk of the reference.
    """
    parent_has_nulls = parent is not None and not bool(parent.all())
    if parent is None:
        return own
    if not parent_has_nulls:
        return None
    if own is None:
        return parent
    return parent | own


def _own_validity(array: pa.Array) -> Mask | None:
    """The array's own validity as a bool mask, or ``None`` if it has no nulls."""
    if array.null_count == 0:
        return None
    return _unpack_bits(array.buffers()[0], array.offset, len(array))


def _unpack_bits(buffer: pa.Buffer, bit_offset: int, length: int) -> Mask:
    """Unpack ``length`` LSB-first bits starting at ``bit_offset`` (any bit alignment)."""
    first = bit_offset >> 3
    last = (bit_offset + length + 7) >> 3
    raw = np.frombuffer(buffer, dtype=np.uint8)[first:last]
    shift = bit_offset & 7
    bits = np.unpackbits(raw, bitorder="little")[shift : shift + length]
    return bits.view(np.bool_)


def _fixed_width(data_type: pa.DataType) -> int | None:
    """Byte width of types whose preimage is the raw value buffer, else ``None``."""
    types = pa.types
    if (
        types.is_integer(data_type)
        or types.is_floating(data_type)
        or types.is_decimal128(data_type)
        or types.is_decimal256(data_type)
        or types.is_temporal(data_type)
    ) and not (types.is_duration(data_type) or types.is_interval(data_type)):
        return int(data_type.bit_width) // 8
    return None


def _encode(array: pa.Array, valid: Mask | None, field: str) -> tuple[Bytes, Lengths]:
    """Preimage bytes of a (normalised) array plus the byte length of each element.

    The per-element lengths let a list locate each sublist's bytes inside its child's
    preimage. ``valid`` is the already-combined validity (``None`` = all valid).
    """
    n = len(array)
    t = array.type
    types = pa.types
    if n == 0:
        return np.empty(0, np.uint8), np.empty(0, np.int64)

    width = _fixed_width(t)
    if width is not None:
        start = array.offset * width
        raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)[start : start + n * width]
        if valid is None:
            return raw, np.full(n, width, np.int64)
        payload = raw.reshape(n, width)[valid].reshape(-1)
        return _assemble(valid, None, payload, np.where(valid, width, 0))

    if types.is_boolean(t):
        values = _unpack_bits(array.buffers()[1], array.offset, n).view(np.uint8) + 1
        if valid is not None:
            values = np.where(valid, values, 0).astype(np.uint8)
        return values, np.ones(n, np.int64)

    if (
        types.is_string(t)
        or types.is_binary(t)
        or types.is_large_string(t)
        or types.is_large_binary(t)
    ):
        large = types.is_large_string(t) or types.is_large_binary(t)
        offsets = _offsets(array, np.int64 if large else np.int32)
        lengths = np.diff(offsets)
        data_buffer = array.buffers()[2]
        data = (
            np.empty(0, np.uint8)
            if data_buffer is None
            else np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0] : offsets[-1]]
        )
        return _assemble_variable(valid, lengths, data, lengths)

    if types.is_fixed_size_binary(t):
        width = t.byte_width
        start = array.offset * width
        raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)[start : start + n * width]
        lengths = np.full(n, width, np.int64)
        payload = raw if valid is None else raw.reshape(n, width)[valid].reshape(-1)
        return _assemble(valid, lengths, payload, _valid_only(lengths, valid))

    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        if types.is_fixed_size_list(t):
            size = t.list_size
            offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * size
        else:
            offsets = _offsets(array, np.int64 if types.is_large_list(t) else np.int32)
        sublens = np.diff(offsets)
        base = int(offsets[0])
        child = _normalise(array.values.slice(base, int(offsets[-1]) - base), field)
        if pa.types.is_struct(child.type):
            raise UnsupportedArrowTypeError(f"{field}.item", child.type)
        # The reference calls update(sublist, None): items keep only their own nulls.
        child_data, child_lens = _encode(child, _own_validity(child), f"{field}.item")
        ends = np.concatenate(([0], np.cumsum(child_lens)))
        payload_lens = ends[offsets[1:] - base] - ends[offsets[:-1] - base]
        return _assemble_variable(valid, sublens, child_data, payload_lens, child_lens)

    raise UnsupportedArrowTypeError(field, t)


def _offsets(array: pa.Array, dtype: type[np.int32] | type[np.int64]) -> Lengths:
    """The array's ``n + 1`` offsets (slice offset applied), widened to int64."""
    n = len(array)
    raw = np.frombuffer(array.buffers()[1], dtype=dtype)
    return raw[array.offset : array.offset + n + 1].astype(np.int64)


def _valid_only(lengths: Lengths, valid: Mask | None) -> Lengths:
    return lengths if valid is None else np.where(valid, lengths, 0)


def _assemble_variable(
    valid: Mask | None,
    headers: Lengths,
    data: Bytes,
    payload_lens: Lengths,
    unit_lens: Lengths | None = None,
) -> tuple[Bytes, Lengths]:
    """Length-prefixed elements whose payloads lie back to back in ``data``.

    Null elements' payloads (normally empty, but Arrow allows otherwise) are dropped
    from ``data`` first: the reference never looks at them. ``unit_lens`` gives the
    byte length of each unit (child item) of ``data`` when a unit is not one byte.
    """
    if valid is not None and bool((headers[~valid] != 0).any()):
        keep = np.repeat(valid, headers)
        if unit_lens is not None:
            keep = np.repeat(keep, unit_lens)
        data = data[keep]
    return _assemble(valid, headers, data, _valid_only(payload_lens, valid))


def _assemble(
    valid: Mask | None, headers: Lengths | None, payload: Bytes, payload_lens: Lengths
) -> tuple[Bytes, Lengths]:
    """Interleave per-element prefixes with payloads into one preimage buffer.

    Element ``i`` becomes ``u64(headers[i]) + payload_i`` when valid (no prefix when
    ``headers`` is None), or a single ``00`` byte when null. ``payload`` holds the valid
    elements' payloads back to back, and ``payload_lens`` their lengths (0 for nulls).
    Done with one ``np.repeat`` of a per-element prefix/payload pattern into a mask of
    the output, then two masked assignments: no Python loop per value.
    """
    n = len(payload_lens)
    header_len = 0 if headers is None else 8
    if valid is None:
        if header_len == 0:
            return payload, payload_lens
        prefix_lens = np.full(n, header_len, np.int64)
    else:
        prefix_lens = np.where(valid, header_len, 1)
    element_lens = prefix_lens + payload_lens

    counts = np.empty(2 * n, np.int64)
    counts[0::2] = prefix_lens
    counts[1::2] = payload_lens
    pattern = np.zeros(2 * n, np.bool_)
    pattern[1::2] = True
    is_payload = np.repeat(pattern, counts)

    out = np.empty(len(is_payload), np.uint8)
    out[is_payload] = payload
    if headers is None:
        out[~is_payload] = 0  # only null markers are not payload
    else:
        header_values = headers.astype("<u8")
        if valid is not None:
            header_values[~valid] = 0  # a null keeps just the first (zero) byte
        header_bytes = header_values.view(np.uint8).reshape(n, 8)
        if valid is None:
            prefixes = header_bytes.reshape(-1)
        else:
            keep = np.repeat(valid[:, None], 8, axis=1)
            keep[:, 0] = True
            prefixes = header_bytes[keep]
        out[~is_payload] = prefixes
    return out, element_lens
