"""One ingest iteration staged: merge the new data into the chain's state, shape it as
a slice and have Spark write it, with the strategy's next checkpoint; append nothing.

This is the ingest half of kamu's DataWriter (ENGINE-SEMANTICS §1.2-§1.7, §1.10) on
Spark: the merge runs on Spark, and a Spark task writes the slice as one Parquet file, in
offset order, with its system columns and cast to the dataset's schema
(``writer.slice_files``); a Snapshot's checkpoint is written by another task of the same
query, from the same pass over the merge. The tasks hash the files as they write them, so
the driver never holds a slice. What is staged is committed by ``writer.commit``, which
transforms share.

The first slice defines the dataset's schema (a ``SetDataSchema`` block before the first
``AddData``). A later slice must have the same columns, or, when its source declares a
read schema, may add nullable ones: then a new ``SetDataSchema`` with them at the end
comes before its ``AddData`` (``odf.schema_evolution``). Any other difference fails the
iteration with the difference spelled out, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DataType, DateType, TimestampType

from ..engine.frames import (
    ROW_ID,
    column,
    data_columns,
    normalize_timestamps,
    timestamp_literal,
    with_row_id,
)
from ..odf import models
from ..odf.arrow_schema import decode_arrow_schema, encode_arrow_schema
from ..odf.chain import ChainState
from ..odf.repository import Dataset
from ..odf.schema_evolution import grown_schema
from ..odf.slices import WrittenFile, latest_of, normalize_type
from ..odf.timestamps import Timestamp
from ..writer.commit import Staged, data_slice, system_fields
from ..writer.slice_files import (
    RUNS_FROM_BYTES,
    collected_schema,
    slice_output,
    write_sorted,
)
from .checkpoints import (
    CHECKPOINT_KIND,
    Previous,
    checkpoint_output,
    checkpoint_written,
    previous_checkpoint,
    write_checkpoint_frame,
    write_keys_checkpoint,
)
from .merge import Merged, merge_append, merge_ledger, merge_snapshot


@dataclass(frozen=True)
class SliceRequest:
    """One batch of preprocessed source data and what the chain should remember of it."""

    frame: DataFrame | None
    """The preprocessed data; None when the source produced no DataFrame at all."""
    merge: models.MergeStrategy
    system_time: Timestamp
    source_state: models.SourceState | None = None
    source_event_time: Timestamp | None = None
    required: frozenset[str] = frozenset()
    """Data columns declared NOT NULL by the read schema."""
    schema_may_grow: bool = False
    """Whether new nullable columns may extend the dataset's schema: only when the source
    declares a read schema, so that the columns come from a manifest a plan has shown.
    Columns that appear in schema-less data alone are an error, as in kamu."""
    input_bytes: int = 0
    """The size of the file read: from ``RUNS_FROM_BYTES`` up, its rows are sorted where
    they are read, in parallel (``write_sorted``)."""


def stage(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    request: SliceRequest,
    workdir: Path,
) -> Staged:
    """Merge, shape and write one slice; append nothing yet."""
    vocab = state.vocabulary()
    schema = decode_arrow_schema(state.data_schema) if state.data_schema else None
    staged = Staged(head=state.head)
    checkpoint = _carried_checkpoint(dataset, state)
    watermark = state.watermark
    if request.frame is not None:
        frame = _prepare_frame(request.frame, vocab, schema)
        grown = None if schema is None else _slice_schema(frame, schema, vocab, request)
        written, latest, written_checkpoint, slice_schema = _merge_and_write(
            spark, dataset, state, request, frame, grown, workdir
        )
        if grown is None or grown is not schema:  # the first schema, or one grown
            staged.schema_event = models.SetDataSchema(schema_=encode_arrow_schema(slice_schema))
        if written is not None:
            staged.slice = written
            staged.files.append((written.path, "data", written.physical_hash))
            watermark = latest_of(watermark, latest)
            if written_checkpoint is not None:
                staged.files.append(
                    (written_checkpoint.path, CHECKPOINT_KIND, written_checkpoint.physical_hash)
                )
                checkpoint = models.Checkpoint(
                    physical_hash=written_checkpoint.physical_hash, size=written_checkpoint.size
                )
            else:  # a merge that keeps none (Append): the old one lacks this slice's rows
                checkpoint = None
    staged.data_event = _add_data(state, staged, checkpoint, watermark, request.source_state)
    return staged


def _carried_checkpoint(dataset: Dataset, state: ChainState) -> models.Checkpoint | None:
    """The last checkpoint, which the next block names again unless the run replaces
    it or adds data under a merge that keeps none; none when its file is gone (pruned,
    or never copied from kamu): a block must not name a missing object, and a run that
    needs it rebuilds it from history."""
    if state.checkpoint is None:
        return None
    size = dataset.layout.checkpoint_size(state.checkpoint)  # a remote one is not fetched
    if size is None:
        return None
    return models.Checkpoint(physical_hash=state.checkpoint, size=size)


def _add_data(
    state: ChainState,
    staged: Staged,
    checkpoint: models.Checkpoint | None,
    watermark: Timestamp | None,
    source_state: models.SourceState | None,
) -> models.AddData | None:
    """The AddData block, or None when it would advance nothing (§1.7 "up to date")."""
    new_data = data_slice(staged.slice, state.next_offset)
    moved_checkpoint = (checkpoint.physical_hash if checkpoint else None) != state.checkpoint
    changed_state = source_state is not None and source_state != state.last_source_state
    if not (new_data or moved_checkpoint or changed_state or watermark != state.watermark):
        return None
    return models.AddData(
        prev_checkpoint=state.checkpoint,
        prev_offset=state.last_offset,
        new_data=new_data,
        new_checkpoint=checkpoint,
        new_watermark=watermark,
        new_source_state=source_state,
    )


def _prepare_frame(
    frame: DataFrame, vocab: models.DatasetVocabulary, schema: pa.Schema | None
) -> DataFrame:
    """Timestamps in ms, an event-time column even if the data has none, and the input
    order captured."""
    frame = normalize_timestamps(frame)
    event = vocab.event_time_column
    if event not in frame.columns:
        frame = frame.withColumn(event, F.lit(None).cast(_event_type(schema, event)))
    return with_row_id(frame)


def _event_type(schema: pa.Schema | None, event: str) -> DataType:
    if schema is not None and pa.types.is_date(schema.field(event).type):
        return DateType()
    return TimestampType()


def _slice_schema(
    frame: DataFrame, schema: pa.Schema, vocab: models.DatasetVocabulary, request: SliceRequest
) -> pa.Schema:
    """The schema this slice is written with: the dataset's, or the dataset's grown by
    the frame's new columns, which the read schema must not declare NOT NULL."""
    fields = [
        pa.field(
            f.name,
            normalize_type(to_arrow_type(f.dataType, timezone="UTC")),
            f.name not in request.required,
        )
        for f in frame.schema.fields
        if f.name != ROW_ID
    ]
    system = (vocab.offset_column, vocab.operation_type_column, vocab.system_time_column)
    return grown_schema(
        schema, fields, system=system, declared=True, may_grow=request.schema_may_grow
    )


def _merge_and_write(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    request: SliceRequest,
    frame: DataFrame,
    grown: pa.Schema | None,
    workdir: Path,
) -> tuple[WrittenFile | None, Timestamp | None, WrittenFile | None, pa.Schema]:
    """Run the merge on Spark and have Spark write the changelog rows, in offset order,
    as the slice, then the strategy's next checkpoint: nothing is collected. Returns the
    written slice (None when the merge changed nothing), its latest event time, the
    written checkpoint, if the strategy keeps one, and the slice's schema.

    A Snapshot's merge reads the prepared frame once, for its changelog and its state
    alike (``Merged.state``): one query sorts both and writes both files side by side
    (``write_sorted``), the slice in its order and the state by primary key (the same
    order: the key comes first in it). That needs no cache of the frame and no
    second query after the slice's; the state is written even when the slice turns
    out empty, and that file is then dropped, as no block names it. A first Snapshot's
    state is its slice's rows (``Merged.state_is_changes``): both files are written
    from the same sorted rows."""
    vocab = state.vocabulary()
    op, event = vocab.operation_type_column, vocab.event_time_column
    fallback_time = request.source_event_time or request.system_time
    fallback = timestamp_literal(fallback_time, frame.schema[event].dataType)
    previous = previous_checkpoint(spark, dataset, state, request.merge, vocab, frame)
    before = _with_new_columns(previous.frame, frame) if previous is not None else None
    merged: Merged
    match request.merge:
        case models.MergeStrategyAppend():
            merged = merge_append(frame, op, event)
        case models.MergeStrategyLedger():
            merged = merge_ledger(request.merge, frame, before, op, event)
        case models.MergeStrategySnapshot():
            merged = merge_snapshot(request.merge, frame, before, op, event)
        case _:
            raise ValueError(f"merge strategy {request.merge.kind} is not supported")
    names = [c for c in merged.changes.columns if c not in (ROW_ID, op, event)]
    columns = [
        column(op),
        F.coalesce(column(event), fallback).alias(event),
        *[column(c) for c in names],
    ]
    rows = merged.changes.select(*columns)
    schema = _slice_arrow_schema(collected_schema(rows), vocab, request, grown)
    slice_file = workdir / "slice.parquet"
    outputs = [
        slice_output(slice_file, schema, vocab, state.next_offset, request.system_time, event)
    ]
    by_output = None
    if merged.keeps_state:  # the data columns in the order the frame has them
        state_columns = [column(c) for c in merged.changes.columns if c not in (ROW_ID, op)]
        collected = collected_schema(rows.select(*state_columns))
        outputs.append(checkpoint_output(collected, request.merge, workdir / "checkpoint.parquet"))
        if merged.state is not None:  # else every row goes to both
            by_output = F.when(merged.state, 1).otherwise(0)  # the changelog 0, the state 1
    in_runs = request.input_bytes >= RUNS_FROM_BYTES
    results = write_sorted(merged.changes, merged.order, columns, outputs, by_output, in_runs)
    if results[0] is None:
        for output in outputs[1:]:
            output.path.unlink(missing_ok=True)
        return None, None, None, schema
    written, latest = results[0]
    checkpoint: WrittenFile | None
    if merged.keeps_state:
        checkpoint = checkpoint_written(results[1], outputs[1])
    else:
        checkpoint = _next_checkpoint(request.merge, previous, written, workdir)
    return written, latest, checkpoint, schema


def _with_new_columns(before: DataFrame, frame: DataFrame) -> DataFrame:
    """The previous state with the columns the slice adds to the schema, null: what the
    earlier rows hold in them, so a Snapshot compares like with like."""
    types = {f.name: f.dataType for f in frame.schema.fields}
    for name in data_columns(frame):
        if name not in before.columns:
            before = before.withColumn(name, F.lit(None).cast(types[name]))
    return before


def _next_checkpoint(
    merge: models.MergeStrategy,
    previous: Previous | None,
    written: WrittenFile,
    workdir: Path,
) -> WrittenFile | None:
    """What the next run of a strategy other than Snapshot (whose state is written
    with its slice) needs from history: the keys (Ledger: the slice's as a new layer
    over the previous checkpoint's, or over none after the keys rebuilt from history,
    copied from the files), or nothing. A slice with no rows changes none, and the block
    carries the old one."""
    path = workdir / "checkpoint.parquet"
    if isinstance(merge, models.MergeStrategyLedger):
        sources = [written.path]
        if previous is not None and not previous.layers:
            sources.insert(0, _rebuilt_keys(previous, merge, workdir))
        layers = previous.layers if previous is not None else ()
        return write_keys_checkpoint(layers, sources, merge, path)
    return None


def _rebuilt_keys(previous: Previous, merge: models.MergeStrategyLedger, workdir: Path) -> Path:
    """The keys rebuilt from history, written to a file the checkpoint is copied from."""
    path = workdir / "rebuilt-keys.parquet"
    keys = previous.frame.select(*[column(k) for k in merge.primary_key])
    return write_checkpoint_frame(keys, merge, path).path


def _slice_arrow_schema(
    rows: pa.Schema,
    vocab: models.DatasetVocabulary,
    request: SliceRequest,
    schema: pa.Schema | None,
) -> pa.Schema:
    """The schema of the slice: ``offset, op, system_time, event_time, <data>``, typed
    as the dataset stores them: ``schema`` (the slice's, from ``_slice_schema``), or, for
    the first slice, the event time first and the data columns as the merge gave them
    (``rows``: the Arrow schema of the merged rows)."""
    if schema is not None:
        return schema
    op, event = vocab.operation_type_column, vocab.event_time_column
    data = [n for n in rows.names if n not in (op, event)]
    fields = system_fields(vocab)
    fields.append(pa.field(event, normalize_type(rows.field(event).type), False))
    fields += [
        pa.field(n, normalize_type(rows.field(n).type), n not in request.required) for n in data
    ]
    return pa.schema(fields)
