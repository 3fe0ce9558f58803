"""Sorted runs: a slice's rows sorted in parallel, then merged into one ordered stream.

A slice is one Parquet file in offset order, and offsets follow a sort. Sorting in the
one task that writes the file leaves every other core idle while it sorts and converts
all the rows to Arrow, which made a single-file sort cost as much as the whole of
reading and writing the same rows in parallel. Instead, each Spark task sorts its own
partition and writes it, in that order, as an Arrow IPC file (a *run*, one per output
the partition has rows for); one task per output then merges its runs into one stream
in the total order and writes the slice from it. The merge holds one chunk of each run
at a time, so neither it nor the driver ever holds a slice.

The merge compares rows with Arrow, so it must order them exactly as Spark's sort
would: ascending, nulls first, and by the same comparison per type. ``mergeable`` says
which Arrow types that is true of (integers, booleans, dates, timestamps, decimals, and
strings and binaries, which both compare byte by byte, unsigned). Floating point keys
are not among them (Spark puts NaN above every number, Arrow after them and apart), nor
nested ones; the writer then sorts in one task as before.

This module is pure Arrow, free of Spark: ``writer.slice_files`` runs it in Spark tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CHUNK_ROWS = 1 << 15
"""Rows of each run the merge holds at a time (read from its file by the batch)."""

OUT_ROWS = 1 << 14
"""The merged stream comes in tables of exactly this many rows (the last one fewer), so
what the writer cuts into row groups depends on the rows alone, not on how many
partitions the sort ran in (which follows the machine's cores)."""


def mergeable(types: Iterable[pa.DataType]) -> bool:
    """Whether Arrow orders values of all ``types`` as Spark's sort does."""
    return all(
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        for t in types
    )


def write_runs(
    batches: Iterable[pa.RecordBatch], output_column: str, directory: Path, name: str
) -> list[tuple[int, str, int]]:
    """Write one sorted partition as runs: its rows whose ``output_column`` is ``i``
    (the partition is sorted by it first) to ``directory/<name>-<i>.arrow``, in order.
    Returns (output, path, rows) for each run written."""
    writers: dict[int, tuple[Path, pa.ipc.RecordBatchFileWriter]] = {}
    rows: dict[int, int] = {}
    try:
        for batch in batches:
            outputs = batch.column(output_column).to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.diff(outputs)) + 1
            for start, end in zip([0, *starts], [*starts, len(outputs)], strict=True):
                output = int(outputs[start])
                if output not in writers:
                    path = directory / f"{name}-{output}.arrow"
                    writers[output] = (path, pa.ipc.new_file(str(path), batch.schema))
                writers[output][1].write_batch(batch.slice(start, end - start))
                rows[output] = rows.get(output, 0) + end - start
    finally:
        for _, writer in writers.values():
            writer.close()
    return [(output, str(path), rows[output]) for output, (path, _) in writers.items()]


class _Run:
    """One run being merged: the rows of it not yet merged, a chunk at a time."""

    def __init__(self, path: Path) -> None:
        self._source = pa.memory_map(str(path))
        self._reader = pa.ipc.open_file(self._source)
        self._next = 0
        self.buffer = self._reader.schema.empty_table()

    @property
    def exhausted(self) -> bool:
        """Whether every batch of the file has been read into the buffer."""
        return bool(self._next >= self._reader.num_record_batches)

    def fill(self) -> bool:
        """Read the next chunk if the buffer is empty; whether any rows are left."""
        if not self.buffer.num_rows:
            batches, rows = [], 0
            while rows < CHUNK_ROWS and not self.exhausted:
                batches.append(self._reader.get_batch(self._next))
                rows += batches[-1].num_rows
                self._next += 1
            if batches:
                self.buffer = pa.Table.from_batches(batches)
        return bool(self.buffer.num_rows > 0)

    def take(self, rows: int) -> None:
        """The first ``rows`` of the buffer were merged."""
        self.buffer = self.buffer.slice(rows)

    def rest(self) -> Iterator[pa.Table]:
        while self.fill():
            yield self.buffer
            self.take(self.buffer.num_rows)

    def close(self) -> None:
        self._source.close()


def merge_runs(paths: Sequence[Path], keys: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of the runs at ``paths`` (each sorted by ``keys``), merged into the
    order of ``keys``: ascending, nulls first, ties in the order of ``paths``.

    Each round sorts the runs' buffered rows together and yields them up to the
    *frontier*: the earliest, in that order, of the last buffered rows of the runs that
    have more in their files. No row still in a file can come before it, since each
    run is sorted; so what is yielded is final, and of each run it is a prefix. The run
    the frontier came from is then empty and reads its next chunk."""
    runs = [_Run(path) for path in paths]
    try:
        live = [run for run in runs if run.fill()]
        while len(live) > 1:
            tables = [run.buffer for run in live]
            combined = pa.concat_tables(tables)
            order = pc.sort_indices(combined, options=_ascending_nulls_first(keys)).to_numpy()
            ends = np.cumsum([table.num_rows for table in tables])
            cut = len(order)
            unread = [i for i, run in enumerate(live) if not run.exhausted]
            if unread:
                rank = np.empty(len(order), dtype=np.int64)
                rank[order] = np.arange(len(order))
                cut = int(min(rank[ends[i] - 1] for i in unread)) + 1
            merged = order[:cut]
            yield combined.take(merged)
            taken = np.bincount(np.searchsorted(ends, merged, side="right"), minlength=len(live))
            for run, count in zip(live, taken, strict=True):
                run.take(int(count))
            live = [run for run in live if run.fill()]
        for run in live:
            yield from run.rest()
    finally:
        for run in runs:
            run.close()


def rechunked(tables: Iterable[pa.Table], rows: int = OUT_ROWS) -> Iterator[pa.Table]:
    """``tables``' rows in tables of exactly ``rows`` rows, the last one fewer."""
    pending: list[pa.Table] = []
    count = 0
    for table in tables:
        pending.append(table)
        count += table.num_rows
        if count >= rows:
            whole = pa.concat_tables(pending)
            cut = count - count % rows
            for start in range(0, cut, rows):
                yield whole.slice(start, rows)
            pending, count = [whole.slice(cut)], count - cut
    if count:
        yield pa.concat_tables(pending)


def _ascending_nulls_first(keys: Sequence[str]) -> pc.SortOptions:
    """Sort options for ``keys``, ascending, nulls first: per key from pyarrow 25, which
    deprecates the option for all keys at once that earlier versions only have."""
    if int(pa.__version__.split(".")[0]) >= 25:
        return pc.SortOptions([(key, "ascending", "at_start") for key in keys])
    return pc.SortOptions([(key, "ascending") for key in keys], null_placement="at_start")
