"""Slices and checkpoints written by Spark tasks, never collected into the driver.

ODF wants one Parquet file per slice, so one task writes each file, with pyarrow, in a
Spark Python worker: a row group at a time, cast to the exact Arrow schema the chain
declares, embedded in the file, and with kamu's encoding (``odf.slices``). Spark's own
Parquet writer cannot embed an Arrow schema, so a reader would get other nullability and
list item names back; written this way the file reads back with the declared schema,
and its records, hence the logical hash, are exactly what collecting the frame and
writing it in the driver gave.

A frame already in its order is coalesced into one partition, which keeps the order
(``write_frame``: a transform's output). Rows that must be sorted first (an ingest's
changelog, by event time or key) are sorted where they are: each task sorts its own
partition into runs, and the file's writer merges the runs (``write_sorted``, with
``sorted_runs``), so the sort and the conversion of rows to Arrow use every core rather
than the writer's alone. Files computed from the same rows (a Snapshot's slice and
checkpoint) are written by one query, each by a task of its own, side by side; the rows
are computed once, with no cache.

Offsets are assigned in the writing task, counting from the slice's first offset in the
partition's order: sequential, and deterministic whenever the frame's order is.

The task also hashes what it writes, so the driver never reads the file back: the
physical hash from the bytes as they go to disk, the logical hash from the row groups
as they are written (a flat schema's records are the same read back; below a struct or
a list the task reads the file back instead, see ``odf.slices.records_digest``), and
the latest event time. The driver receives only the digests, the size and the row
count (or why the rows could not be written). The path, and the runs written beside
it, must be on a filesystem every task reaches: local mode, as the reconciler runs
Spark, or a mount a cluster's executors share.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.pandas.types import to_arrow_schema

from ..engine.frames import column
from ..odf import models
from ..odf.arrow_digest import RecordDigest
from ..odf.multiformat import ARROW0_SHA3_256, Multihash
from ..odf.schema_evolution import IncompatibleSchemaError
from ..odf.slices import (
    ROW_GROUP_ROWS,
    WrittenFile,
    latest_of,
    max_event_time,
    parquet_writer,
    records_digest,
    slice_dictionary,
)
from ..odf.timestamps import Timestamp
from .sorted_runs import merge_runs, mergeable, rechunked, write_runs

# A row group holds at most ROW_GROUP_ROWS rows or about this many bytes, whichever
# comes first: the writing task holds one row group, a reader too.
ROW_GROUP_BYTES = 8 << 20

RUNS_FROM_BYTES = 8 << 20
"""Input from which an ingest's rows are sorted in runs (``write_sorted``): measured on
2 cores, 20,000 rows of CSV (0.8 MB) took 0.1 s longer that way, 200,000 (8 MB) about
as long, a million (40 MB) 0.6 s shorter."""

_HASHED_AHEAD = 2
"""Row groups the logical digest may lag behind the writer."""

_SUMMARY = (
    "output INT, rows LONG, error STRING, kind STRING, physical BINARY, logical BINARY,"
    " size LONG, latest LONG"
)
_SUMMARY_SCHEMA = pa.schema(
    [
        ("output", pa.int32()),
        ("rows", pa.int64()),
        ("error", pa.string()),
        ("kind", pa.string()),
        ("physical", pa.binary()),
        ("logical", pa.binary()),
        ("size", pa.int64()),
        ("latest", pa.int64()),
    ]
)
_RUNS = "output INT, run STRING, rows LONG"
_RUNS_SCHEMA = pa.schema([("output", pa.int32()), ("run", pa.string()), ("rows", pa.int64())])
_OUTPUT = "__output"
"""The column ``write_sorted`` tells each row's output by."""
_NOT_NULL = "not-null"
_CAST = "cast"


Written = tuple[WrittenFile, Timestamp | None]
"""A written file, hashed, and the latest time in its event column (when it has one)."""


@dataclass(frozen=True)
class Output:
    """One file to write, and what the writing task needs for it: picklable, free of
    Spark."""

    path: Path
    schema: pa.Schema
    dictionary: list[str] | None = None
    offset: tuple[str, int] | None = None
    """The offset column and the first offset, when the task assigns offsets."""
    system_time: tuple[str, int] | None = None
    """The system time column and its value in epoch milliseconds, when the task sets it."""
    event_column: str | None = None
    """The column whose latest time the task reports, if any."""


def slice_output(
    path: Path,
    schema: pa.Schema,
    vocab: models.DatasetVocabulary,
    first_offset: int,
    system_time: Timestamp,
    event_column: str | None = None,
) -> Output:
    """A data slice of ``schema`` at ``path``, as ingest and transforms alike write it:
    the offsets from ``first_offset`` and the system time filled in by the task, with
    kamu's dictionary encoding."""
    return Output(
        path,
        schema,
        dictionary=slice_dictionary(vocab),
        offset=(vocab.offset_column, first_offset),
        system_time=(vocab.system_time_column, system_time.epoch_millis),
        event_column=event_column,
    )


def write_frame(frame: DataFrame, output: Output) -> Written | None:
    """Write ``frame``, in its order, as one Parquet file: ``output``. Returns the file,
    hashed, and the latest time in its event column (when it has one), or None for no
    rows (no file is written then).

    ``frame`` has every column of the output's schema (by name) but those the task
    fills in (offset, system time). A NULL in a NOT NULL column fails with
    ``IncompatibleSchemaError`` and leaves no file, as does a value the cast refuses
    (``pa.ArrowInvalid``).
    """
    return write_partitions(frame.coalesce(1), [output])[0]


def write_partitions(frame: DataFrame, outputs: Sequence[Output]) -> list[Written | None]:
    """``write_frame`` for several files in one Spark query: partition ``i`` of
    ``frame`` (one per output: ``sorted_by_output``), in its order, written as
    ``outputs[i]`` by its own task. Returns each output's file, or None where the
    partition has no rows.

    All or nothing: when one output fails, the files of the others are removed too,
    and the error of the first one that failed is raised."""
    plans = tuple(outputs)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None, "runs in a Spark task"
        index = context.partitionId()
        yield _write_partition(batches, plans[index], index)

    results = map_in_arrow(frame, task).collect()
    return _outcomes(plans, [r.asDict() for r in results])


def write_sorted(
    frame: DataFrame,
    order: Sequence[str],
    columns: Sequence[Column],
    outputs: Sequence[Output],
    output: Column | None = None,
    in_runs: bool = True,
) -> list[Written | None]:
    """Write ``frame``'s rows as the ``outputs``, sorted by the columns named
    ``order`` (ascending, nulls first; a total order): the rows ``columns`` (an
    expression each, over ``frame``) give, those whose ``output`` (an integer column)
    is ``i`` as ``outputs[i]``, or, when there is none, every row as every output (each
    file takes the columns its schema names: a first Snapshot's slice and state).

    With ``in_runs``, when Arrow orders the keys as Spark does
    (``sorted_runs.mergeable``), every task sorts its own partition and writes it as
    runs, and one task per output merges them and writes the file, all in one query;
    outputs of the same rows share the runs, so each row is sorted once. Otherwise each
    output's rows are sorted in the one task that writes them (``sorted_by_output``).
    The files are the same. The runs pay off from a few MiB of input
    (``RUNS_FROM_BYTES``): below that, their extra step costs more than the sort it
    spreads."""
    keys = [f"__sort{i}" for i in range(len(order))]
    chosen = F.lit(0) if output is None else output
    selected = frame.select(
        *[column(name).alias(key) for name, key in zip(order, keys, strict=True)],
        chosen.cast("int").alias(_OUTPUT),
        *columns,
    )
    arrow = collected_schema(selected)
    if not (in_runs and mergeable(arrow.field(key).type for key in keys)):
        if output is None and len(outputs) > 1:  # every row, once for each output
            every = F.explode(F.sequence(F.lit(0), F.lit(len(outputs) - 1)))
            selected = selected.withColumn(_OUTPUT, every)
        ordered = sorted_by_output(selected, F.col(_OUTPUT), len(outputs), [F.col(k) for k in keys])
        return write_partitions(ordered.drop(*keys, _OUTPUT), outputs)  # sorted: not sent
    plans = tuple(outputs)
    shared = range(len(plans)) if output is None else None  # every row to each: same runs
    runs = plans[0].path.with_name(plans[0].path.name + ".runs")
    runs.mkdir()

    def sort_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None, "runs in a Spark task"
        name = f"{context.partitionId():05d}-{context.attemptNumber()}"  # a retry: new files
        written = write_runs(batches, _OUTPUT, runs, name)
        if written:
            found = [
                {"output": o, "run": run, "rows": n}
                for written_for, run, n in written
                for o in (shared if shared is not None else [written_for])
            ]
            yield pa.RecordBatch.from_pylist(found, schema=_RUNS_SCHEMA)

    def merge_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None, "runs in a Spark task"
        index = context.partitionId()
        paths = sorted(Path(path) for batch in batches for path in batch["run"].to_pylist())
        # The runs stay until the query ends: a retried task reads them again.
        yield _write_partition(rechunked(merge_runs(paths, keys)), plans[index], index)

    sorted_runs = map_in_arrow(
        selected.sortWithinPartitions(F.col(_OUTPUT), *[F.col(k).asc_nulls_first() for k in keys]),
        sort_task,
        _RUNS,
    )
    merged = map_in_arrow(sorted_runs.repartitionById(len(plans), F.col("output")), merge_task)
    try:
        results = merged.collect()
    finally:
        shutil.rmtree(runs, ignore_errors=True)
    return _outcomes(plans, [r.asDict() for r in results])


def write_tables(tables: Iterable[pa.Table], path: Path, schema: pa.Schema) -> Written | None:
    """``write_frame`` for rows the driver streams from files, a row group at a time
    (a Ledger checkpoint's keys): the same file, written and hashed the same way,
    without the cost of a Spark job."""
    output = Output(path, schema)
    return _outcomes([output], _write_partition(iter(tables), output, 0).to_pylist())[0]


def _outcomes(outputs: Sequence[Output], summaries: list[dict[str, Any]]) -> list[Written | None]:
    """The written files, from the writers' summaries, or the error the first output
    that failed met (its own file already removed, the others' are removed here)."""
    failed = sorted((s for s in summaries if s["error"] is not None), key=lambda s: s["output"])
    if failed:
        for output in outputs:
            output.path.unlink(missing_ok=True)
        if failed[0]["kind"] == _NOT_NULL:
            raise IncompatibleSchemaError(failed[0]["error"])
        raise pa.ArrowInvalid(failed[0]["error"])
    written = {s["output"]: s for s in summaries if s["rows"]}
    return [
        _written(output.path, written[i]) if i in written else None
        for i, output in enumerate(outputs)
    ]


def _written(path: Path, summary: dict[str, Any]) -> Written:
    latest = summary["latest"]
    written = WrittenFile(
        path=path,
        physical_hash=Multihash.from_digest(summary["physical"]),
        logical_hash=Multihash.from_digest(summary["logical"], ARROW0_SHA3_256),
        size=summary["size"],
        rows=summary["rows"],
    )
    return written, None if latest is None else Timestamp.from_epoch_nanos(latest * 1_000_000)


def collected_schema(frame: DataFrame) -> pa.Schema:
    """The Arrow schema collecting ``frame`` would give (``DataFrame.toArrow`` derives
    it from the Spark schema this way), without running a Spark query for it."""
    return to_arrow_schema(
        frame.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC"
    )


def sorted_in_one_partition(frame: DataFrame, order: Sequence[Column]) -> DataFrame:
    """``frame`` sorted by ``order`` in one partition, the way ``write_frame`` writes it.

    Cheaper than ``orderBy(...).coalesce(1)`` for the same rows: a global sort first
    runs a job that samples the whole input for its range boundaries, and its sorted
    ranges are then concatenated by one task anyway. Here the input is shuffled straight
    into one partition (its upstream stays parallel) and sorted there, spilling to disk
    if it must. The order must be total for the result to be deterministic, as for any
    sort: a shuffle's rows arrive in no fixed order."""
    return frame.repartition(1).sortWithinPartitions(*order)


def sorted_by_output(
    frame: DataFrame, output: Column, outputs: int, order: Sequence[Column]
) -> DataFrame:
    """``frame`` in ``outputs`` partitions, the rows whose ``output`` (an integer
    column) is ``i`` in partition ``i``, each sorted by ``order``: what
    ``write_partitions`` writes as one file per output. As in
    ``sorted_in_one_partition``, no sampling job, and the order must be total. Spark
    keeps a partition count given this way even when adaptive execution would coalesce
    small partitions, and a partition left empty is still there, its file then none."""
    return frame.repartitionById(outputs, output).sortWithinPartitions(*order)


def map_in_arrow(
    frame: DataFrame,
    task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    returns: str = _SUMMARY,
) -> DataFrame:
    """``frame.mapInArrow(task, returns)``, without pandas: pyspark's own mapInArrow
    builds its function as a pandas UDF, which insists on pandas (not a dependency here)
    although Arrow batches never touch it; an Arrow-kind UDF runs the same plan node."""
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(
        task, returnType=returns, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF
    )
    call = udf(*[column(name) for name in frame.columns])  # dotted names are not paths
    return DataFrame(frame._jdf.mapInArrow(call._jc, False, None), frame.sparkSession)


def _summary(**values: object) -> pa.RecordBatch:
    row = {name: [values.get(name)] for name in _SUMMARY_SCHEMA.names}
    return pa.RecordBatch.from_pydict(row, schema=_SUMMARY_SCHEMA)


def _write_partition(
    batches: Iterator[pa.RecordBatch] | Iterator[pa.Table], plan: Output, index: int
) -> pa.RecordBatch:
    """Runs in the Spark task: conform each batch, write and hash row groups, report
    as output ``index``."""
    path = plan.path
    with _FileWriter(plan) as out:
        try:
            for batch in batches:
                if batch.num_rows:
                    out.add(_conform(batch, plan, out.rows))
            out.finish()
        except pa.ArrowInvalid as error:
            out.discard()
            return _summary(output=index, rows=0, error=str(error), kind=_CAST)
    if out.null_message is not None:
        path.unlink(missing_ok=True)
        return _summary(output=index, rows=0, error=out.null_message, kind=_NOT_NULL)
    if out.sink is None:
        return _summary(output=index, rows=0)
    return _summary(
        output=index,
        rows=out.rows,
        physical=out.sink.digest(),
        logical=out.logical or records_digest(path),  # nested: as a reader gets them
        size=out.sink.size,
        latest=None if out.latest is None else out.latest.epoch_millis,
    )


class _HashingSink:
    """The file being written, hashing its bytes (SHA3-256) as they are written:
    pyarrow's Parquet writer only appends, so this is the file's physical hash."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("wb")
        self._hash = hashlib.sha3_256()
        self.size = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        self.size += len(data)
        return self._file.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self._file.close()
        self.closed = True

    def digest(self) -> bytes:
        return self._hash.digest()


class _FileWriter:
    """One file written a row group at a time, hashed as it goes, NOT NULL checked.

    A row group holds at most ROW_GROUP_ROWS rows or about ROW_GROUP_BYTES; the
    logical digest is fed exactly the row groups written, which is what a reader of
    the file gets (for flat columns the batching does not even matter)."""

    def __init__(self, plan: Output) -> None:
        self._plan = plan
        self._path = plan.path
        self._writer: pq.ParquetWriter | None = None
        self.sink: _HashingSink | None = None
        """The file, opened with its first row group: no rows, no file."""
        flat = not any(pa.types.is_nested(f.type) for f in plan.schema)
        self._digest = RecordDigest(plan.schema) if flat else None
        self._hashing = ThreadPoolExecutor(1) if flat else None
        """Feeds the logical digest the row groups in order while the next is encoded:
        hashing and Parquet encoding both release the GIL for most of their work."""
        self._hashed: deque[Future[None]] = deque()
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        self.rows = 0
        self.latest: Timestamp | None = None
        self._nulls = dict.fromkeys((f.name for f in plan.schema if not f.nullable), 0)

    def __enter__(self) -> _FileWriter:
        return self

    def __exit__(self, *_: object) -> None:
        if self._hashing is not None:
            self._hashing.shutdown(cancel_futures=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.sink is not None:
            self.sink.close()

    def add(self, table: pa.Table) -> None:
        """Count the rows, and buffer them for writing unless a NOT NULL column has a
        null: then the rows are still counted, for the error, but nothing is written."""
        self.rows += table.num_rows
        for name in self._nulls:
            self._nulls[name] += table.column(name).null_count
        if any(self._nulls.values()):
            self._pending, self._pending_rows = [], 0
            return
        if self._plan.event_column is not None:
            self.latest = latest_of(self.latest, max_event_time(table[self._plan.event_column]))
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes
        while self._pending_rows >= ROW_GROUP_ROWS or self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush(ROW_GROUP_ROWS)

    def finish(self) -> None:
        """Write what is left, and let the logical digest catch up."""
        if not any(self._nulls.values()):
            self._flush(None)
        while self._hashed:
            self._hashed.popleft().result()

    def discard(self) -> None:
        """Close and remove the file (the rows could not be written)."""
        self.__exit__()
        self._path.unlink(missing_ok=True)

    @property
    def null_message(self) -> str | None:
        for name, count in self._nulls.items():
            if count:
                return f"column {name!r} is NOT NULL but {count} row(s) have no value"
        return None

    @property
    def logical(self) -> bytes | None:
        """The logical digest of the rows written, unless the schema is nested."""
        return None if self._digest is None else self._digest.digest()

    def _flush(self, limit: int | None) -> None:
        if not self._pending_rows:
            return
        table = pa.concat_tables(self._pending)
        rest = None
        if limit is not None and table.num_rows > limit:
            table, rest = table.slice(0, limit), table.slice(limit)
        if self._writer is None:
            self.sink = _HashingSink(self._path)
            where = pa.PythonFile(self.sink, mode="w")
            self._writer = parquet_writer(where, self._plan.schema, self._plan.dictionary)
        self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        if self._digest is not None and self._hashing is not None:
            if len(self._hashed) >= _HASHED_AHEAD:  # bounds the row groups held for it
                self._hashed.popleft().result()
            self._hashed.append(self._hashing.submit(self._digest.update, table))
        self._pending = [rest] if rest is not None else []
        self._pending_rows = rest.num_rows if rest is not None else 0
        self._pending_bytes = rest.nbytes if rest is not None else 0


def _conform(batch: pa.RecordBatch | pa.Table, plan: Output, start: int) -> pa.Table:
    """The batch as rows of the plan's schema, with the columns the task fills in."""
    n = batch.num_rows
    columns: dict[str, pa.Array] = {}
    if plan.offset is not None:
        name, first = plan.offset
        columns[name] = pa.array(np.arange(first + start, first + start + n, dtype=np.int64))
    if plan.system_time is not None:
        name, millis = plan.system_time
        columns[name] = pa.array(np.full(n, millis, dtype=np.int64))
    arrays = []
    for field in plan.schema:
        array = columns[field.name] if field.name in columns else batch.column(field.name)
        arrays.append(array.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=plan.schema)
