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

import sys
from typing import NamedTuple

from . import models
from .fbs_reader import build_model
from .multiformat import Multihash
from .timestamps import Timestamp

new_tuple = tuple.__new__
"""Builds one of these named tuples from its fields: ``_make`` is a Python function
around it (and a length check that the codec and ``data_block_wire``, which build them
by the hundred thousand, do not need), a fifth of a rebuild."""


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


class SourceStateFields(NamedTuple):
    """A source state as its three fields, for a fold that only compares it and passes
    it on. A ``models.SourceState`` is four objects more per block to build, to keep
    and to free, scattered in memory where the fold reads them: over a chain of 100,000
    blocks the models cost a seventh of the fold and nearly half of the freeing after
    it. Every field is required, so two states' models are equal exactly when their
    fields are (``state_fields``)."""

    source_name: str
    kind: str
    value: str

    @classmethod
    def of(cls, state: models.SourceState | SourceStateFields) -> SourceStateFields:
        """A state's fields (``interned``)."""
        return cls.interned(state.source_name, state.kind, state.value)

    @classmethod
    def interned(cls, source_name: str, kind: str, value: str) -> SourceStateFields:
        """The fields, the name and kind interned: every block of a chain repeats them,
        so all its blocks share one string of each (``marshal`` sends it once per
        answer, then a reference), which the fold finds in the cache."""
        return new_tuple(cls, (sys.intern(source_name), sys.intern(kind), value))

    def model(self) -> models.SourceState:
        """The model of these fields, every field marked set, as the codec builds it."""
        return build_model(models.SourceState, self._asdict())  # type: ignore[no-any-return]


def state_model(state: models.SourceState | SourceStateFields) -> models.SourceState:
    """A source state as a model, whichever form it has: what a model (an event, a
    chain state) holds."""
    return state.model() if isinstance(state, SourceStateFields) else state


def state_fields(
    state: models.SourceState | SourceStateFields | None,
) -> tuple[str, str, str] | None:
    """A source state's fields, whichever form it has (None for no state)."""
    return None if state is None else (state.source_name, state.kind, state.value)


class DataStep(NamedTuple):
    """Every field of an ``AddData`` or ``ExecuteTransform`` event."""

    query_inputs: list[models.ExecuteTransformInput] | None
    """None for an AddData; the inputs (possibly none) of an ExecuteTransform."""
    prev_checkpoint: Multihash | None
    prev_offset: int | None
    new_data: NewData | None
    new_checkpoint: NewCheckpoint | None
    new_watermark: Timestamp | None
    new_source_state: models.SourceState | SourceStateFields | None
    """A model when the step was made from one (``of``) or by the codec by default; its
    fields when the codec was asked for them (``decode_data_block``'s ``state_fields``:
    a full integrity check and ``Dataset.state`` ask), or the block was rebuilt by
    ``data_block_wire``. The chain rules take both (``state_fields``, ``state_model``)."""

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
        data, checkpoint = self.new_data, self.new_checkpoint
        if data is not None:
            named.append(("data/" + data.physical_hash, data.size))
        if checkpoint is not None:
            named.append(("checkpoints/" + checkpoint.physical_hash, checkpoint.size))
        return named


class DataBlock(NamedTuple):
    """A stored data block: its header and its ``DataStep``."""

    system_time: Timestamp
    prev_block_hash: Multihash | None
    sequence_number: int
    step: DataStep

    def with_state_fields(self) -> DataBlock:
        """This block with its source state as ``SourceStateFields``: all that a fold
        needs of it."""
        step = self.step
        state = step.new_source_state
        if state is None or isinstance(state, SourceStateFields):
            return self
        fields = SourceStateFields.of(state)
        return DataBlock._make((*self[:3], DataStep._make((*step[:6], fields))))
