"""``chain.fold``'s shortcut for AddData blocks (``_added_data``) judges as the rules do.

A full integrity check folds most data blocks through a few comparisons instead of
``validate_append``. Whatever a block holds, the fold must end in the same state, or
raise the same error with the same words, as ``validate_append`` and ``apply`` taken a
block at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler.odf import DatasetId, Multihash, Timestamp, block_hash, encode_block, models
from reconciler.odf.chain import ChainState, fold, validate_append
from reconciler.odf.codec import decode_block, decode_data_block
from reconciler.odf.data_step import DataBlock, NewCheckpoint
from reconciler.odf.models import MetadataBlock

ID = DatasetId.generate()[0]
OTHER = Multihash.sha3_256(b"other")


def _time(seq: int) -> Timestamp:
    return Timestamp(1_767_225_600 + seq, 500)


def _add_data(start: int) -> models.AddData:
    return models.AddData(
        prev_offset=start - 1 if start else None,
        prev_checkpoint=Multihash.sha3_256(b"c%d" % (start - 10)) if start else None,
        new_data=models.DataSlice(
            logical_hash=Multihash.sha3_256(b"l%d" % start),
            physical_hash=Multihash.sha3_256(b"p%d" % start),
            offset_interval=models.OffsetInterval(start=start, end=start + 9),
            size=10,
        ),
        new_checkpoint=models.Checkpoint(physical_hash=Multihash.sha3_256(b"c%d" % start), size=3),
        new_watermark=_time(start),
        new_source_state=models.SourceState(
            source_name="default", kind="odf/etag", value=str(start)
        ),
    )


def _chain(
    kind: models.DatasetKind = models.DatasetKind.ROOT, schema: bool = True
) -> list[tuple[Multihash, MetadataBlock | DataBlock]]:
    """Five AddData blocks after a Seed, a push source and (``schema``) a schema; every
    other data block's source state as its fields, as a full check folds them."""
    events: list[models.AnyEvent] = [
        models.Seed(dataset_id=ID, dataset_kind=kind),
        models.AddPushSource(
            source_name="default",
            read=models.ReadStepNdJson(schema=["v BIGINT"]),
            merge=models.MergeStrategyAppend(),
        ),
    ]
    if schema:
        events.append(models.SetDataSchema(schema_=b"schema"))
    events += [_add_data(start) for start in range(0, 50, 10)]
    blocks: list[tuple[Multihash, MetadataBlock | DataBlock]] = []
    prev: Multihash | None = None
    for seq, event in enumerate(events):
        block = models.MetadataBlock(
            system_time=_time(seq), prev_block_hash=prev, sequence_number=seq, event=event
        )
        data = encode_block(block)
        prev = block_hash(data)
        judged = decode_data_block(data, state_fields=seq % 2 == 0) or decode_block(data)
        blocks.append((prev, judged))
    return blocks


def _outcome(run: Callable[[], ChainState]) -> object:
    try:
        return run()
    except ValueError as e:
        return type(e), str(e)


def _stepwise(blocks: list[tuple[Multihash, MetadataBlock | DataBlock]]) -> ChainState:
    state = ChainState()
    for hash_, block in blocks:
        validate_append(state, block)
        state = state.apply(block, hash_)
    return state


def _step(**changes: object) -> Callable[[DataBlock], DataBlock]:
    return lambda block: block._replace(step=block.step._replace(**changes))


def _data(**changes: object) -> Callable[[DataBlock], DataBlock]:
    return lambda block: block._replace(
        step=block.step._replace(new_data=block.step.new_data._replace(**changes))
    )


def _earlier(time: Timestamp, seconds: int, nanos: int) -> Timestamp:
    return Timestamp(time.seconds - seconds, time.nanos - nanos)


def _watermark(seconds: int, nanos: int) -> Callable[[DataBlock], DataBlock]:
    """A watermark earlier than the previous block's (``_time(20)``) by so much."""
    return _step(new_watermark=_earlier(_time(20), seconds, nanos))


CHANGES: dict[str, Callable[[DataBlock], DataBlock]] = {
    "unchanged": lambda block: block,
    "no-prev-hash": lambda block: block._replace(prev_block_hash=None),
    "other-prev-hash": lambda block: block._replace(prev_block_hash=OTHER),
    "sequence-ahead": lambda block: block._replace(sequence_number=block.sequence_number + 1),
    "sequence-behind": lambda block: block._replace(sequence_number=block.sequence_number - 1),
    "time-a-second-earlier": lambda block: block._replace(
        system_time=_earlier(_time(block.sequence_number - 1), 1, 0)
    ),
    "time-a-nanosecond-earlier": lambda block: block._replace(
        system_time=_earlier(_time(block.sequence_number - 1), 0, 1)
    ),
    "time-equal": lambda block: block._replace(system_time=_time(block.sequence_number - 1)),
    "start-ahead": _data(start=31),
    "start-behind": _data(start=29),
    "end-before-start": _data(end=29),
    "no-new-data": _step(new_data=None),
    "prev-offset-none": _step(prev_offset=None),
    "prev-offset-wrong": _step(prev_offset=30),
    "prev-checkpoint-none": _step(prev_checkpoint=None),
    "prev-checkpoint-wrong": _step(prev_checkpoint=OTHER),
    "no-new-checkpoint": _step(new_checkpoint=None),
    "new-checkpoint-repeated": _step(new_checkpoint=NewCheckpoint(OTHER, 3)),
    "watermark-dropped": _step(new_watermark=None),
    "watermark-a-second-earlier": _watermark(1, 0),
    "watermark-a-nanosecond-earlier": _watermark(0, 1),
    "watermark-equal": _watermark(0, 0),
    "no-source-state": _step(new_source_state=None),
    "execute-transform": _step(query_inputs=[]),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
@pytest.mark.parametrize(
    ("kind", "schema"),
    [
        (models.DatasetKind.ROOT, True),
        (models.DatasetKind.ROOT, False),
        (models.DatasetKind.DERIVATIVE, True),
    ],
    ids=["root", "root-without-schema", "derivative"],
)
def test_the_fold_judges_a_changed_data_block_as_the_rules_one_at_a_time_do(
    change: str, kind: models.DatasetKind, schema: bool
) -> None:
    blocks = _chain(kind, schema)
    at = len(blocks) - 2  # the fourth AddData: its data starts at offset 30
    hash_, block = blocks[at]
    assert isinstance(block, DataBlock) and block.step.new_data is not None
    assert block.step.new_data.start == 30
    blocks[at] = (hash_, CHANGES[change](block))

    expected = _outcome(lambda: _stepwise(blocks))
    assert _outcome(lambda: fold(blocks)) == expected
    if change == "unchanged" and kind is models.DatasetKind.ROOT and schema:
        assert isinstance(expected, ChainState) and expected.last_offset == 49
