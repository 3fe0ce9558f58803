"""Ingest checkpoints: what Ledger and Snapshot merges need to remember between runs.

kamu re-reads every past slice on every ingest (its own TODO PERF), so the 100th run
costs a hundred times the first. Here each AddData that adds data to a Ledger or
Snapshot dataset also commits a checkpoint: a Parquet file in ``checkpoints/``, named
by its physical hash and referenced from the block like any checkpoint, holding the set
of primary keys seen (Ledger) or the projected current state (Snapshot: each key's
latest row, retracted keys removed). The next run reads only that.

A checkpoint is tagged with the strategy and key it was made for. When it is missing or
was made for another strategy or key (a chain written by kamu, or a merge strategy that
changed), it is rebuilt once from the full history with the same projection kamu uses,
so the result never depends on whether a checkpoint existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)

from ..engine.stored_rows import stored_rows
from ..engine.write_slices import write_frame, write_tables
from ..odf import models
from ..odf.chain import ChainState
from ..odf.repository import Dataset
from ..odf.slices import WrittenFile, normalize_type, write_parquet
from .frames import column
from .merge import Op

CHECKPOINT_KIND = "checkpoint"
_TAG_KEY = b"odf-reconciler.checkpoint"


def tag(merge: models.MergeStrategy) -> str | None:
    """What a checkpoint for ``merge`` holds, or None when the strategy keeps none."""
    match merge:
        case models.MergeStrategyLedger():
            return json.dumps({"kind": "ledger-keys", "primaryKey": merge.primary_key})
        case models.MergeStrategySnapshot():
            return json.dumps({"kind": "snapshot-state", "primaryKey": merge.primary_key})
    return None


def write_checkpoint_frame(
    frame: DataFrame, merge: models.MergeStrategy, path: Path
) -> WrittenFile:
    """Have Spark write ``frame``, in its order, as a checkpoint for ``merge`` (every
    column nullable, types as ODF stores them), hashed as it is written."""
    label = tag(merge)
    assert label is not None, "only Ledger and Snapshot keep checkpoints"
    collected = frame.limit(0).toArrow().schema  # the types collecting would give
    fields = [f.with_type(normalize_type(f.type)).with_nullable(True) for f in collected]
    schema = pa.schema(fields, metadata={_TAG_KEY: label.encode()})
    written = write_frame(frame, path, schema)
    if written is None:
        return write_parquet(schema.empty_table(), path)  # an empty state is a state
    return written[0]


def write_keys_checkpoint(
    sources: Sequence[Path], merge: models.MergeStrategyLedger, path: Path
) -> WrittenFile:
    """A Ledger checkpoint holding the keys of ``sources`` (the previous checkpoint,
    then the new slice), in that order, typed as the first one holds them. The keys are
    copied from file to file a row group at a time, in the driver: a Spark job would
    cost more than the copy, on every run, as the set of keys grows."""
    label = tag(merge)
    assert label is not None
    first = pq.read_schema(sources[0])
    fields = [first.field(k).with_nullable(True) for k in merge.primary_key]
    schema = pa.schema(fields, metadata={_TAG_KEY: label.encode()})
    written = write_tables(_row_groups(sources, merge.primary_key), path, schema)
    if written is None:
        return write_parquet(schema.empty_table(), path)
    return written[0]


def _row_groups(sources: Sequence[Path], columns: list[str]) -> Iterator[pa.Table]:
    for source in sources:
        parquet = pq.ParquetFile(source)
        try:
            for index in range(parquet.num_row_groups):
                yield parquet.read_row_group(index, columns=columns, use_threads=False)
        finally:
            parquet.close()


def _tag_of(path: Path) -> str | None:
    metadata = pq.read_schema(path).metadata or {}
    value = metadata.get(_TAG_KEY)
    return value.decode() if value is not None else None


@dataclass(frozen=True)
class Previous:
    """The keys or state a merge compares against."""

    frame: DataFrame
    path: Path | None
    """The checkpoint file it was read from; None when rebuilt from history."""

    def table(self) -> pa.Table:
        """The same rows as Arrow, read from the file directly when there is one."""
        if self.path is not None:
            return pq.read_table(self.path).replace_schema_metadata(None)
        return self.frame.toArrow()


def previous_checkpoint(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    merge: models.MergeStrategy,
    vocab: models.DatasetVocabulary,
) -> Previous | None:
    """The keys or state the merge compares against, or None before the first data."""
    wanted = tag(merge)
    if wanted is None or state.last_offset is None:
        return None
    if state.checkpoint is not None:
        path = dataset.layout.checkpoint_file(state.checkpoint)
        if path.exists() and _tag_of(path) == wanted:
            return Previous(spark.read.parquet(str(path)), path)
    return Previous(_rebuild(spark, dataset, state, merge, vocab), None)


def _rebuild(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    merge: models.MergeStrategy,
    vocab: models.DatasetVocabulary,
) -> DataFrame:
    """The checkpoint recomputed from every slice in the chain (kamu's way), read with
    the dataset's schema so that slices older than a column hold it as null."""
    paths = [
        dataset.layout.data_file(block.event.new_data.physical_hash)
        for _, block in dataset.iter_blocks(state.head)
        if isinstance(block.event, models.AddData) and block.event.new_data is not None
    ]
    assert state.data_schema is not None, "a dataset with data has a schema"
    history = stored_rows(spark, state.data_schema, paths[::-1], vocab.offset_column)
    if isinstance(merge, models.MergeStrategyLedger):
        return history.select(*[column(k) for k in merge.primary_key])
    assert isinstance(merge, models.MergeStrategySnapshot)
    return project(history, merge.primary_key, vocab)


def project(
    history: DataFrame, primary_key: list[str], vocab: models.DatasetVocabulary
) -> DataFrame:
    """The current state of a changelog: per key the row with the highest offset, gone
    if that row is a retraction; system columns other than event time dropped."""
    offset, op = vocab.offset_column, vocab.operation_type_column
    latest = Window.partitionBy(*[column(k) for k in primary_key]).orderBy(column(offset).desc())
    system = {offset, op, vocab.system_time_column}
    data = [c for c in history.columns if c not in system]
    return (
        history.withColumn("__rank", F.row_number().over(latest))
        .where((F.col("__rank") == 1) & (column(op) != Op.RETRACT))
        .select(*[column(c) for c in data])
    )
