"""A data block as the chain rules see it, in plain tuples.

Nearly every block of a long chain is an ``AddData`` or ``ExecuteTransform``. Its model
takes five pydantic objects to build, and a full integrity check of 100,000 blocks built
half a million of them only for the rules to read a dozen fields. The codec can give a
data block as a ``DataBlock`` instead (``codec.decode_data_block``), and the chain rules
judge data events in this form only: a model is turned into its ``DataStep`` before
the same rules run (``DataStep.of``), so the rules live in one place whichever form a
caller has.
"""

from __future__ import annotations

from typing import NamedTuple

from . import models
from .multiformat import Multihash
from .timestamps import Timestamp


class NewData(NamedTuple):
    """A data block's ``newData`` slice."""

    logical_hash: Multihash
    physical_hash: Multihash
    start: int
    end: int
    size: int


class NewCheckpoint(NamedTuple):
    """A data block's ``newCheckpoint``."""

    physical_hash: Multihash
    size: int


class DataStep(NamedTuple):
    """Every field of an ``AddData`` or ``ExecuteTransform`` event."""

    query_inputs: list[models.ExecuteTransformInput] | None
    """None for an AddData; the inputs (possibly none) of an ExecuteTransform."""
    prev_checkpoint: Multihash | None
    prev_offset: int | None
    new_data: NewData | None
    new_checkpoint: NewCheckpoint | None
    new_watermark: Timestamp | None
    new_source_state: models.SourceState | None

    @property
    def is_transform(self) -> bool:
        return self.query_inputs is not None

    @classmethod
    def of(cls, event: models.AddData | models.ExecuteTransform) -> DataStep:
        data, checkpoint = event.new_data, event.new_checkpoint
        transform = isinstance(event, models.ExecuteTransform)
        return cls(
            query_inputs=list(event.query_inputs) if transform else None,  # type: ignore[union-attr]
            prev_checkpoint=event.prev_checkpoint,
            prev_offset=event.prev_offset,
            new_data=None
            if data is None
            else NewData(
                data.logical_hash,
                data.physical_hash,
                data.offset_interval.start,
                data.offset_interval.end,
                data.size,
            ),
            new_checkpoint=None
            if checkpoint is None
            else NewCheckpoint(checkpoint.physical_hash, checkpoint.size),
            new_watermark=event.new_watermark,
            new_source_state=None if transform else event.new_source_state,  # type: ignore[union-attr]
        )

    def named_files(self) -> list[tuple[str, int]]:
        """The data and checkpoint files the block names, as paths in the dataset
        folder, with the sizes it gives them."""
        named = []
        if self.new_data is not None:
            named.append((f"data/{self.new_data.physical_hash}", self.new_data.size))
        if self.new_checkpoint is not None:
            named.append(
                (f"checkpoints/{self.new_checkpoint.physical_hash}", self.new_checkpoint.size)
            )
        return named


class DataBlock(NamedTuple):
    """A stored data block: its header and its ``DataStep``."""

    system_time: Timestamp
    prev_block_hash: Multihash | None
    sequence_number: int
    step: DataStep
