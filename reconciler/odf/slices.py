"""Data slices and checkpoints as ODF stores them: one Parquet file each, hashed two ways.

Every file the reconciler commits goes through here, so the bytes follow one recipe
(kamu's: snappy, Parquet 1.0 logical types, dictionary encoding only for ``op`` and
``system_time``, one file per slice) and the Arrow schema is embedded, so a reader gets
``timestamp[ms, tz="UTC"]`` back rather than ``+00:00``: the time-zone string is part of
the logical hash. The physical hash covers the file's bytes; the logical hash covers the
records as read back from the file, which is what verification recomputes.

Pure pyarrow: the engine produces the table, this module only writes and hashes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import models
from .hashing import physical_hash
from .multiformat import Multihash
from .timestamps import Timestamp

UTC = "UTC"
MILLIS = pa.timestamp("ms", tz=UTC)
OFFSET_TYPE = pa.int64()
OP_TYPE = pa.int32()


@dataclass(frozen=True)
class WrittenFile:
    """A file written and hashed, not yet moved under its hash."""

    path: Path
    physical_hash: Multihash
    logical_hash: Multihash
    size: int
    rows: int


def normalize_type(data_type: pa.DataType) -> pa.DataType:
    """The type ODF stores for ``data_type``: every timestamp becomes ms in "UTC", and the
    large and view variants of strings, binaries and lists become the plain ones (kamu
    counts them as the same type, and one spelling keeps the schema stable)."""
    if pa.types.is_timestamp(data_type):
        return MILLIS
    if pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type) or pa.types.is_binary_view(data_type):
        return pa.binary()
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        item = data_type.value_field
        return pa.list_(item.with_type(normalize_type(item.type)))
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(normalize_type(f.type)) for f in data_type])
    return data_type


# kamu's encoding: snappy, Parquet 1.0 logical types, the Arrow schema embedded.
_PARQUET_OPTIONS = {
    "compression": "snappy",
    "version": "1.0",
    "store_schema": True,
    "write_statistics": True,
}

# Rows per row group of the files written here: what pq.read_table's batches hold, so a
# file hashed a row group at a time is fed to the digest in the batches a whole-file
# read gives (which matters only below a struct with nulls), and what a reader holds.
ROW_GROUP_ROWS = 1 << 17


def parquet_writer(
    where: Path | pa.NativeFile, schema: pa.Schema, dictionary: list[str] | None = None
) -> pq.ParquetWriter:
    """A writer with the recipe every slice and checkpoint is written with, for files
    written a row group at a time (by a Spark task, into a file object that hashes the
    bytes on their way to disk)."""
    return pq.ParquetWriter(where, schema, use_dictionary=dictionary or False, **_PARQUET_OPTIONS)


def write_parquet(table: pa.Table, path: Path, dictionary: list[str] | None = None) -> WrittenFile:
    """Write ``table`` as one Parquet file and hash it; the logical hash is taken from the
    file as read back, so it is exactly what a verifier will see."""
    pq.write_table(table, path, use_dictionary=dictionary or False, **_PARQUET_OPTIONS)
    return hash_file(path)


def hash_file(path: Path) -> WrittenFile:
    """Hash a written file: SHA3 of its bytes, and the logical hash of its records read
    back (``records_digest``), so it is exactly what a verifier will see."""
    from .multiformat import ARROW0_SHA3_256

    return WrittenFile(
        path=path,
        physical_hash=physical_hash(path),
        logical_hash=Multihash.from_digest(records_digest(path), ARROW0_SHA3_256),
        size=path.stat().st_size,
        rows=pq.read_metadata(path).num_rows,
    )


def records_digest(path: Path) -> bytes:
    """The raw logical digest of a file's records, read back a row group at a time
    (never the whole file at once), in the batches a whole-file read gives."""
    from .arrow_digest import RecordDigest

    parquet = pq.ParquetFile(path)
    try:
        digest = RecordDigest(parquet.schema_arrow)
        for index in range(parquet.num_row_groups):
            digest.update(parquet.read_row_group(index, use_threads=False))
    finally:
        parquet.close()
    return digest.digest()


def latest_of(current: Timestamp | None, candidate: Timestamp | None) -> Timestamp | None:
    """The later of two times, either of which may be unknown."""
    if current is None:
        return candidate
    return current if candidate is None or candidate < current else candidate


def write_slice(table: pa.Table, path: Path, vocab: models.DatasetVocabulary) -> WrittenFile:
    """Write a data slice with kamu's encoding choices."""
    return write_parquet(table, path, slice_dictionary(vocab))


def slice_dictionary(vocab: models.DatasetVocabulary) -> list[str]:
    """The columns kamu dictionary-encodes in a slice: ``op`` and ``system_time``."""
    return [vocab.operation_type_column, vocab.system_time_column]


def max_event_time(column: pa.ChunkedArray | pa.Array) -> Timestamp | None:
    """The largest event time in a column (a DATE counts as midnight UTC), or None."""
    if len(column) == 0 or column.null_count == len(column):
        return None
    if pa.types.is_date(column.type):
        column = pc.cast(pc.cast(column, pa.date32()), pa.timestamp("ms", tz=UTC))
    millis = pc.max(pc.cast(pc.cast(column, MILLIS), pa.int64())).as_py()
    return Timestamp.from_epoch_nanos(int(millis) * 1_000_000)
