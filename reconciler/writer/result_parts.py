"""A query's whole result, written by Spark's tasks in parts the driver copies out.

``reconcile sql`` exports whole datasets (``--format parquet --out``, CSV, JSON), and
collecting such a result into the driver, as its table's first hundred rows are, needs
the whole result in the driver's memory at once: an export of a dataset larger than the
driver fails however large the cluster is. Instead each Spark task writes its partition
of the result, in that partition's order, to a file of its own: the rows rendered as
text by the task itself (CSV, JSON), or Arrow IPC (Parquet, which the driver writes as
one file, a batch at a time). The driver takes the parts in partition order: the order
collecting gives (partitions in index order, each in its own order), and with the types
collecting gives, the same conversion of Spark's rows to Arrow.

A result may name two columns alike (``SELECT a.id, b.id``, which CSV allows), and a
task is handed its columns by name, so the tasks see positional names, and each batch
read gets the result's own names back. The folder must be one every executor reaches,
as for slices (``writer.scratch``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame

from .slice_files import map_in_arrow

_PARTS = "part INT, path STRING"
_PARTS_SCHEMA = pa.schema([("part", pa.int32()), ("path", pa.string())])


def write_parts(
    frame: DataFrame, directory: Path, render: Callable[[pa.RecordBatch], bytes] | None = None
) -> list[Path]:
    """Run ``frame`` and write each non-empty partition as ``directory/<part>-<attempt>``:
    Arrow IPC, or, given ``render``, the bytes it makes of each batch (a text format's
    rows, rendered by the tasks in parallel). The files, in partition order. Runs one
    Spark job (and whatever the query needs before it, such as a sort's sampling), and
    raises what the query raises."""
    positional = frame.toDF(*[f"_{i}" for i in range(len(frame.columns))])
    folder = str(directory)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None, "runs in a Spark task"
        part = context.partitionId()
        path = f"{folder}/{part:05d}-{context.attemptNumber()}"  # a retry: a new file
        written = _write_rendered(batches, path, render) if render else _write_ipc(batches, path)
        if written:
            yield pa.RecordBatch.from_pydict({"part": [part], "path": [path]}, _PARTS_SCHEMA)

    written = map_in_arrow(positional, task, _PARTS).collect()
    return [Path(row["path"]) for row in sorted(written, key=lambda row: row["part"])]


def _write_ipc(batches: Iterator[pa.RecordBatch], path: str) -> bool:
    writer = None
    try:
        for batch in batches:
            if batch.num_rows:
                writer = writer or pa.ipc.new_file(path, batch.schema)
                writer.write_batch(batch)
    finally:
        if writer is not None:
            writer.close()
    return writer is not None


def _write_rendered(
    batches: Iterator[pa.RecordBatch], path: str, render: Callable[[pa.RecordBatch], bytes]
) -> bool:
    out = None
    try:
        for batch in batches:
            if batch.num_rows:
                out = out or open(path, "wb")  # noqa: SIM115 (closed below)
                out.write(render(batch))
    finally:
        if out is not None:
            out.close()
    return out is not None


def read_parts(paths: Sequence[Path], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches of Arrow ``paths`` in order, named and typed by ``schema`` (what
    ``collected_schema`` gives); each file is removed once read, so that an export
    never holds the result on disk twice over."""
    for path in paths:
        with pa.OSFile(str(path)) as source:  # read a batch at a time, never mapped whole
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                batch = reader.get_batch(index)
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        path.unlink()
