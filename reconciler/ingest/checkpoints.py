"""Ingest checkpoints: what Ledger and Snapshot merges need to remember between runs.

kamu re-reads every past slice on every ingest (its own TODO PERF), so the 100th run
costs a hundred times the first. Here each AddData that adds data to a Ledger or
Snapshot dataset also commits a checkpoint: a Parquet file in ``checkpoints/``, named
by its physical hash and referenced from the block like any checkpoint, holding the set
of primary keys seen (Ledger) or the projected current state (Snapshot: each key's
latest row, retracted keys removed). The next run reads only that.

A Ledger checkpoint is layered, so that a run writes what it adds, not the whole key
set again: its file holds some keys and names, in its metadata, the earlier checkpoints
(layers) holding the rest, each one a checkpoint an earlier block committed, so the
store stays append-only and a head never reaches a missing object. Layers are merged
like an LSM tree's (``write_keys_checkpoint``): O(log n) of them, each key rewritten
O(log n) times. A checkpoint naming no layers (every one before layering) holds all.
A run reads only the layers that may hold one of its batch's keys, as their footers'
statistics tell (``_candidate_keys``): when keys grow, as ids do, none but the newest.

A checkpoint is tagged with the strategy and key it was made for. When it or one of its
layers is missing or was made for another strategy or key (a chain written by kamu, or
a merge strategy that changed), it is rebuilt once from the full history with the same
projection kamu uses, so the result never depends on whether a checkpoint existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import DataType, StringType

from ..engine.frames import column
from ..engine.stored_rows import stored_rows
from ..odf import models
from ..odf.chain import ChainState
from ..odf.multiformat import Multihash
from ..odf.repository import Dataset, DatasetLayout
from ..odf.slices import WrittenFile, normalize_type, write_parquet
from ..writer.slice_files import Output, Written, collected_schema, write_frame, write_tables
from .merge import Op

CHECKPOINT_KIND = "checkpoint"
_TAG_KEY = b"odf-reconciler.checkpoint"
_LAYERS_KEY = b"odf-reconciler.layers"

MIN_LAYER_ROWS = 1 << 16
"""A layer of at most this many keys is always merged into the next checkpoint: copying
it costs less than what one more file costs every later run (a footer to read, an
object to fetch, a file for Spark to open), and a small dataset keeps a single file."""


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
    output = checkpoint_output(collected_schema(frame), merge, path)
    return checkpoint_written(write_frame(frame, output), output)


def checkpoint_output(collected: pa.Schema, merge: models.MergeStrategy, path: Path) -> Output:
    """The checkpoint for ``merge`` of rows that collect as ``collected`` (the Arrow
    schema), written to ``path``: every column nullable, types as ODF stores them."""
    label = tag(merge)
    assert label is not None, "only Ledger and Snapshot keep checkpoints"
    fields = [f.with_type(normalize_type(f.type)).with_nullable(True) for f in collected]
    return Output(path, pa.schema(fields, metadata={_TAG_KEY: label.encode()}))


def checkpoint_written(written: Written | None, output: Output) -> WrittenFile:
    """The checkpoint file Spark wrote for ``output``; when it had no rows, an empty
    one: an empty state is a state."""
    if written is None:
        return write_parquet(output.schema.empty_table(), output.path)
    return written[0]


@dataclass(frozen=True)
class Layer:
    """A committed checkpoint file: the whole of a Snapshot's state, or one layer of a
    Ledger's keys."""

    hash: Multihash
    rows: int
    layout: DatasetLayout = field(compare=False, repr=False)
    footer: pq.FileMetaData = field(compare=False, repr=False)
    """Its Parquet footer, read once: the tags, and the key statistics a run prunes by.
    From a remote store only the footer is read; the file is fetched when it is read
    (``path``), so a layer a run's keys cannot meet is never downloaded."""

    @property
    def path(self) -> Path:
        """The file, fetched from a remote store on first use."""
        return self.layout.checkpoint_to_read(self.hash)


def write_keys_checkpoint(
    layers: Sequence[Layer], sources: Sequence[Path], merge: models.MergeStrategyLedger, path: Path
) -> WrittenFile:
    """A Ledger checkpoint: the keys of ``sources`` (files no block names: the keys
    rebuilt from history, then the new slice's) as a new layer over the committed
    ``layers``, typed as the slice holds them.

    The top layers are merged into the new one while each holds no more keys than it
    does so far, or at most ``MIN_LAYER_ROWS``: a binary counter's carry, so layers grow
    geometrically downwards (O(log n) of them) and a key is copied O(log n) times, where
    copying the whole set on every run cost O(n) each time. The layers left are named
    in the file's metadata, oldest first; its keys are the merged layers', oldest first,
    then the sources'. They are copied a row group at a time, in the driver: a Spark job
    would cost more than the copy."""
    label = tag(merge)
    assert label is not None
    kept = _kept(layers, sum(pq.read_metadata(source).num_rows for source in sources))
    merged = [layer.path for layer in layers[len(kept) :]]
    typed = pq.read_schema(sources[-1])
    fields = [typed.field(k).with_nullable(True) for k in merge.primary_key]
    metadata = {_TAG_KEY: label.encode()}
    if kept:
        metadata[_LAYERS_KEY] = json.dumps([layer.hash for layer in kept]).encode()
    schema = pa.schema(fields, metadata=metadata)
    written = write_tables(_row_groups([*merged, *sources], merge.primary_key), path, schema)
    if written is None:
        return write_parquet(schema.empty_table(), path)
    return written[0]


def _kept(layers: Sequence[Layer], rows: int) -> Sequence[Layer]:
    """The bottom layers a new layer of ``rows`` keys leaves as they are."""
    keep = len(layers)
    while keep and layers[keep - 1].rows <= max(rows, MIN_LAYER_ROWS):
        keep -= 1
        rows += layers[keep].rows
    return layers[:keep]


def _row_groups(sources: Sequence[Path], columns: list[str]) -> Iterator[pa.Table]:
    for source in sources:
        parquet = pq.ParquetFile(source)
        try:
            for index in range(parquet.num_row_groups):
                yield parquet.read_row_group(index, columns=columns, use_threads=False)
        finally:
            parquet.close()


@dataclass(frozen=True)
class Previous:
    """The keys or state a merge compares against."""

    frame: DataFrame
    layers: tuple[Layer, ...]
    """The checkpoint's files, oldest first (``frame`` may read only some of a
    Ledger's); none when rebuilt from history (no committed file holds it then)."""


def previous_checkpoint(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    merge: models.MergeStrategy,
    vocab: models.DatasetVocabulary,
    batch: DataFrame | None = None,
) -> Previous | None:
    """The keys or state the merge compares against, or None before the first data:
    one Spark read over every layer of the last checkpoint. Given the ``batch`` a
    Ledger merges, only the layers that may hold one of its keys are read
    (``_candidate_keys``)."""
    wanted = tag(merge)
    if wanted is None or state.last_offset is None:
        return None
    layers = _layers(dataset, state.checkpoint, wanted) if state.checkpoint else None
    if layers is None:
        return Previous(_rebuild(spark, dataset, state, merge, vocab), ())
    if batch is not None and isinstance(merge, models.MergeStrategyLedger):
        return Previous(_candidate_keys(spark, layers, batch, merge.primary_key), layers)
    return Previous(_read(spark, layers), layers)


def _candidate_keys(
    spark: SparkSession, layers: Sequence[Layer], batch: DataFrame, primary_key: list[str]
) -> DataFrame:
    """The stored keys of the layers that may hold one of ``batch``'s keys; when none
    may, no keys (an empty frame, which Spark plans away with the joins on it: a frame
    made from an empty list would be an RDD, scanned and joined).

    Ledger keys mostly grow (order ids, event ids): a batch then lies beyond every
    layer but the newest few, and the layers it misses, however large, are neither
    read nor joined, so a run costs what its batch costs, not what the history holds.
    What a layer may hold is told by the statistics in its footer (each row group's
    least and greatest key, and whether it has NULLs); the batch's by one small job
    over its keys. That job is run only when the history suggests it pays: when some
    stored keys lie outside the span of the newest ones (``_pays``). Random keys (all
    spans alike) never pay it, and every layer is read, as before."""
    groups = [_row_group_spans(layer.footer, primary_key) for layer in layers]
    wanted = _batch_spans(batch, primary_key) if _pays(groups) else None
    if wanted is None:
        read = list(layers)
    else:
        read = [
            layer
            for layer, spans in zip(layers, groups, strict=True)
            if spans is None or any(_may_share(wanted, group) for _, group in spans)
        ]
    if not read:  # filtered out by a constant, which Spark turns into an empty relation
        return batch.select(*[column(k) for k in primary_key]).where(F.lit(False))
    return _read(spark, read)


def _read(spark: SparkSession, layers: Sequence[Layer]) -> DataFrame:
    """The layers' rows, read with the schema their footers hold (all alike: the same
    key, or the one state file). Spark would otherwise run a job to read a footer for
    its schema, 0.1 to 0.2 s of every run; the schema is the one it would infer, as the
    reconciler wrote the file from Spark's types (Spark makes every column nullable on
    reading either way)."""
    schema = from_arrow_schema(layers[-1].footer.schema.to_arrow_schema())
    return spark.read.schema(schema).parquet(*[str(layer.path) for layer in layers])


@dataclass(frozen=True)
class Span:
    """The values one key column takes in some rows: the least and the greatest that is
    not NULL (both None when every one is NULL), compared as ``kind`` (``_kind``), and
    whether NULL is among them."""

    kind: str
    low: Any
    high: Any
    nulls: bool

    def may_share(self, other: Span) -> bool:
        """Whether a value of one may equal, null-safely, a value of the other."""
        if self.nulls and other.nulls:
            return True
        if self.low is None or other.low is None:
            return False
        if self.kind != other.kind:
            return True  # of different types, which Spark casts to compare: not known
        try:
            return bool(self.low <= other.high and other.low <= self.high)
        except TypeError:  # values Python cannot compare (bytes from a footer): not known
            return True


def _may_share(rows: Sequence[Span], others: Sequence[Span]) -> bool:
    """Whether a key of some rows may equal one of others: every column may share."""
    return all(a.may_share(b) for a, b in zip(rows, others, strict=True))


def _kind(type_: pa.DataType) -> str | None:
    """How the values of Arrow type ``type_`` compare, as Python values, the way Spark
    compares them; None for a type where they may not (floating point: NaN and -0.0).
    Strings compare by code point, which is UTF-8's byte order, Spark's."""
    if pa.types.is_integer(type_):
        return "integer"
    if pa.types.is_decimal(type_):
        return "decimal"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "string"
    if pa.types.is_date(type_):
        return "date"
    if pa.types.is_timestamp(type_) and type_.unit != "ns":  # a datetime holds micros
        return "timestamp" if type_.tz is None else "instant"
    return None


RowGroupSpans = list[tuple[int, list[Span]]]
"""The rows of each row group of a file and the Span of each key column in it."""


def _row_group_spans(footer: pq.FileMetaData, primary_key: list[str]) -> RowGroupSpans | None:
    """The Spans of each row group of a layer, from its ``footer``; None when a
    statistic is missing or a key's type has no ``_kind`` (it may hold anything)."""
    types = footer.schema.to_arrow_schema()
    columns = []
    for k in primary_key:
        index = types.get_field_index(k)
        kind = _kind(types.field(index).type) if index >= 0 else None
        if kind is None:
            return None
        columns.append((index, kind))
    groups = []
    for group in range(footer.num_row_groups):
        metadata = footer.row_group(group)
        spans = []
        for index, kind in columns:
            chunk = metadata.column(index)
            stats = chunk.statistics
            if stats is None or not stats.has_null_count:
                return None
            if stats.has_min_max:
                spans.append(Span(kind, stats.min, stats.max, stats.null_count > 0))
            elif stats.null_count == chunk.num_values:  # NULLs only
                spans.append(Span(kind, None, None, True))
            else:
                return None
        groups.append((metadata.num_rows, spans))
    return groups


def _pays(groups: Sequence[RowGroupSpans | None]) -> bool:
    """Whether some stored keys lie outside the span of the newest ones (the last row
    group of the top layer), where keys that grow leave the layers a batch misses."""
    top = groups[-1] if groups else None
    if not top:
        return False
    newest = top[-1][1]
    return any(
        spans is not None and any(not _may_share(newest, group) for _, group in spans)
        for spans in groups
    )


def _batch_spans(batch: DataFrame, primary_key: list[str]) -> list[Span] | None:
    """The Span of each key column in ``batch`` (one aggregate, a row collected); None
    when a key is not one of its columns (the merge reports that) or its type has no
    ``_kind`` (or is a string compared by a collation other than bytes)."""
    fields = {f.name: f.dataType for f in batch.schema.fields}
    if any(k not in fields or _collated(fields[k]) for k in primary_key):
        return None
    aggregates = []
    for k in primary_key:
        aggregates += [F.min(column(k)), F.max(column(k)), F.bool_or(column(k).isNull())]
    row = batch.agg(*aggregates).toArrow()
    spans = []
    for i in range(len(primary_key)):
        low, high, nulls = (row.column(3 * i + j)[0] for j in range(3))
        kind = _kind(low.type)
        if kind is None:
            return None
        spans.append(Span(kind, low.as_py(), high.as_py(), bool(nulls.as_py())))
    return spans


def _collated(type_: DataType) -> bool:
    """Whether ``type_`` is a string type whose equality is not byte-wise."""
    return isinstance(type_, StringType) and type_ != StringType()


def _layers(dataset: Dataset, top: Multihash, wanted: str) -> tuple[Layer, ...] | None:
    """The files of checkpoint ``top``: the layers its metadata names, then itself; None
    when one is missing or was made for another strategy or key."""
    opened = _layer(dataset, top, wanted)
    if opened is None:
        return None
    top_layer, names = opened
    try:
        below = [Multihash.parse(name) for name in json.loads(names)]
    except (TypeError, ValueError):
        return None
    layers = []
    for hash_ in below:
        lower = _layer(dataset, hash_, wanted)
        if lower is None:
            return None
        layers.append(lower[0])
    return (*layers, top_layer)


def _layer(dataset: Dataset, hash_: Multihash, wanted: str) -> tuple[Layer, bytes] | None:
    """Checkpoint ``hash_`` (only its footer read, if the store is remote) and the
    JSON list of the layers under it, or None when it is missing or its tag is not
    ``wanted``."""
    footer = dataset.layout.checkpoint_footer(hash_)
    if footer is None:
        return None
    metadata = footer.metadata or {}
    if metadata.get(_TAG_KEY) != wanted.encode():
        return None
    layer = Layer(hash_, footer.num_rows, dataset.layout, footer)
    return layer, metadata.get(_LAYERS_KEY, b"[]")


def _rebuild(
    spark: SparkSession,
    dataset: Dataset,
    state: ChainState,
    merge: models.MergeStrategy,
    vocab: models.DatasetVocabulary,
) -> DataFrame:
    """The checkpoint recomputed from every slice in the chain (kamu's way), read with
    the dataset's schema so that slices older than a column hold it as null."""
    paths = dataset.layout.data_files_to_read(
        [
            block.event.new_data.physical_hash
            for _, block in dataset.iter_blocks(state.head)
            if isinstance(block.event, models.AddData) and block.event.new_data is not None
        ]
    )
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
