"""Which part of each input a transform consumes, read from the chains (no Spark).

A derivative remembers, per input, the last block and offset it consumed (from its last
``ExecuteTransform``). The next run consumes everything after that up to the input's
current head: the data slices in between, whose rows lie in ``prevOffset+1 … newOffset``,
and the watermarks those blocks carry (ENGINE-SEMANTICS §2.1). The same description,
built from a recorded ``ExecuteTransformInput``, lets verification replay a past run.

Each input is read with the ``SetDataSchema`` in force at the block the run consumed up
to: for the next run the input's head, for a replay the recorded block. An input whose
schema grew later was seen without the new columns, and its replay must see it so too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..odf import models
from ..odf.chain import ChainState
from ..odf.multiformat import DatasetId, Multihash
from ..odf.repository import Dataset, OdfRepository
from ..odf.timestamps import Timestamp


class InputError(RuntimeError):
    """An input that cannot be read: unknown id, or a chain that went back."""


@dataclass(frozen=True)
class InputSlice:
    """One input of one transform run."""

    dataset_id: DatasetId
    name: str
    alias: str
    dataset: Dataset
    prev_block_hash: Multihash | None
    new_block_hash: Multihash | None
    prev_offset: int | None
    new_offset: int | None
    schema: bytes | None
    """The input's SetDataSchema (raw Arrow schema); None if it has no data yet."""
    data_files: list[Path] = field(default_factory=list)
    """The files of the slices in the interval, oldest first."""
    watermarks: list[Timestamp] = field(default_factory=list)
    """Watermarks of the consumed data blocks, oldest first."""

    @property
    def interval(self) -> tuple[int, int] | None:
        """The offsets to consume, inclusive, or None when there are none."""
        if self.new_offset is None:
            return None
        start = 0 if self.prev_offset is None else self.prev_offset + 1
        return start, self.new_offset

    def query_input(self) -> models.ExecuteTransformInput:
        return models.ExecuteTransformInput(
            dataset_id=self.dataset_id,
            prev_block_hash=self.prev_block_hash,
            new_block_hash=self.new_block_hash,
            prev_offset=self.prev_offset,
            new_offset=self.new_offset,
        )


def next_inputs(
    state: ChainState, repo: OdfRepository, names: Mapping[DatasetId, str]
) -> list[InputSlice]:
    """What the next run of the derivative at ``state`` would consume, per input."""
    assert state.transform is not None
    slices = []
    for spec in state.transform.inputs:
        dataset_id = DatasetId.parse(spec.dataset_ref)
        dataset = _dataset(repo, names, dataset_id)
        cursor = state.inputs.get(dataset_id)
        prev_hash = cursor.block_hash if cursor else None
        prev_offset = cursor.offset if cursor else None
        head_state = dataset.state()
        new_hash = head_state.head if head_state.head != prev_hash else None
        last = head_state.last_offset
        new_offset = last if last != prev_offset else None
        slices.append(
            _between(
                dataset,
                dataset_id,
                names[dataset_id],
                spec.alias or spec.dataset_ref,
                prev_hash,
                new_hash,
                prev_offset,
                new_offset,
                head_state.data_schema,
            )
        )
    return slices


def recorded_inputs(
    state: ChainState,
    event: models.ExecuteTransform,
    repo: OdfRepository,
    names: Mapping[DatasetId, str],
) -> list[InputSlice]:
    """The inputs exactly as a past ``ExecuteTransform`` recorded them (for replay), each
    with the schema it had at the last block that run consumed."""
    assert state.transform is not None
    aliases = {
        DatasetId.parse(i.dataset_ref): i.alias or i.dataset_ref for i in state.transform.inputs
    }
    slices = []
    for qi in event.query_inputs:
        dataset = _dataset(repo, names, qi.dataset_id)
        head = qi.new_block_hash or qi.prev_block_hash
        schema = _schema_at(dataset, head) if head is not None else None
        slices.append(
            _between(
                dataset,
                qi.dataset_id,
                names[qi.dataset_id],
                aliases.get(qi.dataset_id, names[qi.dataset_id]),
                qi.prev_block_hash,
                qi.new_block_hash,
                qi.prev_offset,
                qi.new_offset,
                schema,
            )
        )
    return slices


def _schema_at(dataset: Dataset, block_hash: Multihash) -> bytes | None:
    """The dataset's SetDataSchema in force at ``block_hash``: the latest at or before it."""
    for _, block in dataset.iter_blocks(block_hash):
        if isinstance(block.event, models.SetDataSchema):
            return block.event.schema_
    return None


def _dataset(repo: OdfRepository, names: Mapping[DatasetId, str], dataset_id: DatasetId) -> Dataset:
    name = names.get(dataset_id)
    if name is None:
        raise InputError(f"input {dataset_id} is not in the repository")
    return repo.dataset(name)


def _between(
    dataset: Dataset,
    dataset_id: DatasetId,
    name: str,
    alias: str,
    prev_hash: Multihash | None,
    new_hash: Multihash | None,
    prev_offset: int | None,
    new_offset: int | None,
    schema: bytes | None,
) -> InputSlice:
    """Collect the data files and watermarks of the blocks in (prev_hash, new_hash]."""
    hashes: list[str] = []
    watermarks: list[Timestamp] = []
    if new_hash is not None:
        found_prev = prev_hash is None
        for hash_, block in dataset.iter_blocks(new_hash):
            if hash_ == prev_hash:
                found_prev = True
                break
            event = block.event
            if isinstance(event, models.AddData | models.ExecuteTransform):
                if event.new_data is not None:
                    hashes.append(event.new_data.physical_hash)
                if event.new_watermark is not None:
                    watermarks.append(event.new_watermark)
        if not found_prev:
            raise InputError(f"input {name}: block {prev_hash} is no longer in its chain")
    files = dataset.layout.data_files_to_read(hashes[::-1])
    watermarks.reverse()
    return InputSlice(
        dataset_id,
        name,
        alias,
        dataset,
        prev_hash,
        new_hash,
        prev_offset,
        new_offset,
        schema,
        files,
        watermarks,
    )
