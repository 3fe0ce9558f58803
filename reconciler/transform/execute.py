"""Run a derivative's SQL over its inputs' new slices and stage the result (§2).

Each input is a view under its alias holding only its unconsumed rows, in one partition
in offset order (``engine.stored_rows.rows_in_one_partition``), and the query runs
under settings that keep its plan in that one partition and fix its join strategy
(``one_task``): what makes the result the same however Spark is configured to
partition the work. The query's output keeps its own row order: offsets follow it,
``op`` passes through when the query selects it (so retractions and corrections flow
through a map or a filter) and is 0 otherwise, and ``system_time`` is the run's.
Columns are ``offset, op, system_time`` and then the query's, as the Spark engine
writes them. A Spark task writes the slice and hashes it as it writes
(``writer.slice_files``).

The first run records the output's schema (a ``SetDataSchema`` before the
``ExecuteTransform``), even over inputs with no data yet. A later output with new
columns (a query that now selects more, or an input that grew one under ``SELECT *``)
appends a new ``SetDataSchema`` with them at the end, stored nullable: the earlier rows
have no value in them (``odf.schema_evolution``).

The output watermark is the smallest of the inputs' watermarks; each input's is the
latest watermark among its consumed blocks, or the one remembered in the previous
checkpoint. Like kamu's Spark engine, a transform checkpoint holds only those per-input
watermarks (aggregations see only the current slice), as a small JSON document.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import IntegerType

from ..engine.frames import column, normalize_timestamps
from ..engine.query_check import QueryError, apply_transform, columns_from_schema
from ..engine.stored_rows import rows_in_one_partition
from ..ingest.checkpoints import CHECKPOINT_KIND
from ..odf import models
from ..odf.arrow_schema import decode_arrow_schema, encode_arrow_schema
from ..odf.chain import ChainState
from ..odf.hashing import physical_hash
from ..odf.repository import Dataset
from ..odf.schema_evolution import grown_schema
from ..odf.slices import normalize_type
from ..odf.timestamps import Timestamp
from ..writer.commit import Staged, data_slice, system_fields
from ..writer.slice_files import collected_schema, slice_output, write_frame
from .inputs import InputSlice
from .one_task import one_task
from .ordering import deterministic_order
from .output_rules import output_problem


class TransformError(ValueError):
    """The query failed or its output cannot be a slice of this dataset."""


def has_work(dataset: Dataset, state: ChainState, inputs: list[InputSlice]) -> bool:
    """Whether the query must run (§2.1 skip rules): the output has no schema yet, or an
    input has new data or a later watermark to pass on.

    A dataset with no schema runs as soon as every input has one, even with no data, so
    that its columns are known to plans and to its own downstream (kamu skips the engine
    only when there is nothing new and the output already has a schema). kamu also runs
    when an input merely repeats its watermark (every data block carries one), which
    appends an ExecuteTransform that changes nothing downstream; here a watermark counts
    only if it is later than the one this dataset last saw.
    """
    if any(i.schema is None for i in inputs):
        return False  # an input that never had data: nothing to read, not even a schema
    if state.data_schema is None or any(i.data_files for i in inputs):
        return True
    if not any(i.watermarks for i in inputs):
        return False  # decided without the checkpoint: a store outside git fetches it
    seen = _previous_watermarks(dataset, state)
    for i in inputs:
        last = seen.get(str(i.dataset_id))
        if i.watermarks and (last is None or max(i.watermarks) > last):
            return True
    return False


def stage_transform(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    inputs: list[InputSlice],
    system_time: Timestamp,
    workdir: Path,
) -> Staged:
    """Run the query over ``inputs`` and write the slice and checkpoint; append nothing.

    The query is planned and run (by ``write_frame``) under ``one_task``'s settings,
    so that the repository's Spark conf cannot change its result."""
    assert state.transform is not None
    vocab = state.vocabulary()
    with one_task(spark):
        frames = {i.alias: _input_frame(spark, i) for i in inputs}
        try:
            output = apply_transform(spark, frames, state.transform.transform)
        except QueryError as e:
            where = f" (line {e.line})" if e.line else ""
            raise TransformError(f"query failed{where}: {e.message}") from None
        output = deterministic_order(_checked_output(output, vocab), vocab)
        collected = collected_schema(output)
        staged = Staged(head=state.head)
        schema = decode_arrow_schema(state.data_schema) if state.data_schema else None
        slice_schema = _slice_schema(collected, output, vocab, schema)
        if schema is None or slice_schema.names != schema.names:  # the first, or grown
            staged.schema_event = models.SetDataSchema(schema_=encode_arrow_schema(slice_schema))
        written = write_frame(
            output,
            slice_output(
                workdir / "slice.parquet", slice_schema, vocab, state.next_offset, system_time
            ),
        )
    if written is not None:
        staged.slice = written[0]
        staged.files.append((staged.slice.path, "data", staged.slice.physical_hash))
    watermarks = _input_watermarks(dataset, state, inputs)
    checkpoint = _write_checkpoint(watermarks, workdir / "checkpoint.json")
    staged.files.append((checkpoint[0], CHECKPOINT_KIND, checkpoint[1].physical_hash))
    staged.data_event = models.ExecuteTransform(
        query_inputs=[i.query_input() for i in inputs],
        prev_checkpoint=state.checkpoint,
        prev_offset=state.last_offset,
        new_data=data_slice(staged.slice, state.next_offset),
        new_checkpoint=checkpoint[1],
        new_watermark=_output_watermark(state, watermarks),
    )
    return staged


def _input_frame(spark: SparkSession, source: InputSlice) -> DataFrame:
    """The input's unconsumed rows in one partition in offset order, typed by its
    SetDataSchema."""
    assert source.schema is not None
    interval = source.interval
    files = source.data_files if interval is not None else []
    offset_column = source.dataset.state().vocabulary().offset_column
    return rows_in_one_partition(spark, source.schema, files, offset_column, interval)


def _checked_output(output: DataFrame, vocab: models.DatasetVocabulary) -> DataFrame:
    """The output with its ``op`` column, once the plan's own rules pass: its columns are
    spelled as the plan's query check spells them (``columns_from_schema``), so that the
    run refuses with the plan's words what the plan would have refused."""
    columns = [(c.name, c.type) for c in columns_from_schema(output.schema)]
    problem = output_problem(columns, vocab)
    if problem is not None:
        raise TransformError(problem)
    op = vocab.operation_type_column
    output = normalize_timestamps(output)
    if op in dict(columns):
        return output.withColumn(op, column(op).cast(IntegerType()))
    return output.withColumn(op, F.lit(0).cast(IntegerType()))


def _slice_schema(
    collected: pa.Schema,
    output: DataFrame,
    vocab: models.DatasetVocabulary,
    schema: pa.Schema | None,
) -> pa.Schema:
    """``offset, op, system_time`` and the query's columns (``collected``: their Arrow
    types), in the order of the dataset's schema (grown by any new column), or for the
    first run in the query's order."""
    op = vocab.operation_type_column
    nullable = {f.name: f.nullable for f in output.schema.fields}
    data = [
        pa.field(n, normalize_type(collected.field(n).type), nullable[n])
        for n in collected.names
        if n != op
    ]
    system = [vocab.offset_column, op, vocab.system_time_column]
    if schema is None:
        return pa.schema(system_fields(vocab) + data)
    return grown_schema(schema, data, system=system, declared=False, what="the query's output")


def _previous_watermarks(dataset: Dataset, state: ChainState) -> dict[str, Timestamp]:
    if state.checkpoint is None:
        return {}
    path = dataset.layout.checkpoint_to_read(state.checkpoint)
    document = json.loads(path.read_text(encoding="utf-8"))
    return {k: Timestamp.parse(v) for k, v in document.get("inputWatermarks", {}).items()}


def _input_watermarks(
    dataset: Dataset, state: ChainState, inputs: list[InputSlice]
) -> dict[str, Timestamp | None]:
    before = _previous_watermarks(dataset, state)
    return {
        str(i.dataset_id): max(i.watermarks) if i.watermarks else before.get(str(i.dataset_id))
        for i in inputs
    }


def _output_watermark(
    state: ChainState, watermarks: dict[str, Timestamp | None]
) -> Timestamp | None:
    """The slowest input's watermark; unknown while any input has none, never going back."""
    values = list(watermarks.values())
    low = None if any(v is None for v in values) else min(v for v in values if v is not None)
    if state.watermark is not None and (low is None or low < state.watermark):
        return state.watermark
    return low


def _write_checkpoint(
    watermarks: dict[str, Timestamp | None], path: Path
) -> tuple[Path, models.Checkpoint]:
    document = {
        "kind": "transform-watermarks",
        "inputWatermarks": {k: v.isoformat() for k, v in sorted(watermarks.items()) if v},
    }
    path.write_bytes(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())
    return path, models.Checkpoint(physical_hash=physical_hash(path), size=path.stat().st_size)
