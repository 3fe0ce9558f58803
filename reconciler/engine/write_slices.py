"""Slices and checkpoints written by a Spark task, never collected into the driver.

ODF wants one Parquet file per slice, so the ordered frame is coalesced into one
partition (which keeps its order: the partitions are concatenated in order) and that
partition's task writes the file with pyarrow, in a Spark Python worker: a row group at
a time, cast to the exact Arrow schema the chain declares, embedded in the file, and
with kamu's encoding (``odf.slices``). Spark's own Parquet writer cannot embed an Arrow
schema, so a reader would get other nullability and list item names back; written this
way the file reads back with the declared schema, and its records, hence the logical
hash, are exactly what collecting the frame and writing it in the driver gave.

Offsets are assigned in the writing task, counting from the slice's first offset in the
partition's order: sequential, and deterministic whenever the frame's order is.

The driver only receives how many rows were written (or why they could not be), then
hashes the file by streaming it (``odf.slices.hash_file``). The path must be on a
filesystem the task can write to: local mode, as the reconciler runs Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from ..ingest.frames import column
from ..odf.schema_evolution import IncompatibleSchemaError
from ..odf.slices import ROW_GROUP_ROWS, parquet_writer

# A row group holds at most ROW_GROUP_ROWS rows or about this many bytes, whichever
# comes first: the writing task holds one row group, a reader (the hashing driver) too.
ROW_GROUP_BYTES = 8 << 20

_SUMMARY = "rows LONG, error STRING, kind STRING"
_NOT_NULL = "not-null"
_CAST = "cast"


@dataclass(frozen=True)
class _Plan:
    """What the writing task needs: picklable, free of Spark."""

    path: str
    schema: pa.Schema
    dictionary: list[str] | None
    offset: tuple[str, int] | None
    """The offset column and the first offset, when the task assigns offsets."""
    system_time: tuple[str, int] | None
    """The system time column and its value in epoch milliseconds, when the task sets it."""


def write_frame(
    frame: DataFrame,
    path: Path,
    schema: pa.Schema,
    *,
    dictionary: list[str] | None = None,
    offset: tuple[str, int] | None = None,
    system_time: tuple[str, int] | None = None,
) -> int:
    """Write ``frame``, in its order, as one Parquet file of ``schema`` at ``path``;
    returns the number of rows (no file is written for none).

    ``frame`` has every column of ``schema`` (by name) but those the task fills in
    (``offset``, ``system_time``). A NULL in a NOT NULL column fails with
    ``IncompatibleSchemaError`` and leaves no file, as does a value the cast refuses
    (``pa.ArrowInvalid``).
    """
    plan = _Plan(str(path), schema, dictionary, offset, system_time)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _write_partition(batches, plan)

    results = _map_in_arrow(frame.coalesce(1), task).collect()
    for result in results:
        if result["error"] is not None:
            path.unlink(missing_ok=True)
            if result["kind"] == _NOT_NULL:
                raise IncompatibleSchemaError(result["error"])
            raise pa.ArrowInvalid(result["error"])
    written = [r["rows"] for r in results if r["rows"]]
    assert len(written) <= 1, "one partition writes one file"
    return written[0] if written else 0


def _map_in_arrow(
    frame: DataFrame, task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
) -> DataFrame:
    """``frame.mapInArrow(task, _SUMMARY)``, without pandas: pyspark's own mapInArrow
    builds its function as a pandas UDF, which insists on pandas (not a dependency here)
    although Arrow batches never touch it; an Arrow-kind UDF runs the same plan node."""
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(
        task, returnType=_SUMMARY, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF
    )
    call = udf(*[column(name) for name in frame.columns])  # dotted names are not paths
    return DataFrame(frame._jdf.mapInArrow(call._jc, False, None), frame.sparkSession)


def _summary(rows: int, error: str | None = None, kind: str | None = None) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"rows": [rows], "error": [error], "kind": [kind]},
        schema=pa.schema([("rows", pa.int64()), ("error", pa.string()), ("kind", pa.string())]),
    )


def _write_partition(batches: Iterator[pa.RecordBatch], plan: _Plan) -> Iterator[pa.RecordBatch]:
    """Runs in the Spark task: conform each batch, write row groups, report the count."""
    path = Path(plan.path)
    writer = None
    pending: list[pa.Table] = []
    pending_rows = pending_bytes = rows = 0
    nulls = dict.fromkeys((f.name for f in plan.schema if not f.nullable), 0)

    def flush(limit: int | None) -> None:
        nonlocal writer, pending, pending_rows, pending_bytes
        if not pending_rows:
            return
        table = pa.concat_tables(pending)
        if limit is not None and table.num_rows > limit:
            table, rest = table.slice(0, limit), table.slice(limit)
        else:
            rest = None
        if writer is None:
            writer = parquet_writer(path, plan.schema, plan.dictionary)
        writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        pending = [rest] if rest is not None else []
        pending_rows = rest.num_rows if rest is not None else 0
        pending_bytes = rest.nbytes if rest is not None else 0

    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            try:
                table = _conform(batch, plan, rows)
            except pa.ArrowInvalid as error:
                if writer is not None:
                    writer.close()
                    writer = None
                path.unlink(missing_ok=True)
                yield _summary(0, str(error), _CAST)
                return
            rows += table.num_rows
            for name in nulls:
                nulls[name] += table.column(name).null_count
            if any(nulls.values()):
                pending, pending_rows = [], 0  # keep counting, write nothing more
                continue
            pending.append(table)
            pending_rows += table.num_rows
            pending_bytes += table.nbytes
            while pending_rows >= ROW_GROUP_ROWS or pending_bytes >= ROW_GROUP_BYTES:
                flush(ROW_GROUP_ROWS)
        if not any(nulls.values()):
            flush(None)
    finally:
        if writer is not None:
            writer.close()
    for name, count in nulls.items():
        if count:
            path.unlink(missing_ok=True)
            message = f"column {name!r} is NOT NULL but {count} row(s) have no value"
            yield _summary(0, message, _NOT_NULL)
            return
    yield _summary(rows)


def _conform(batch: pa.RecordBatch, plan: _Plan, start: int) -> pa.Table:
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
