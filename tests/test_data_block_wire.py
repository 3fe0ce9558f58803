"""Data blocks parsed in one process and rebuilt in another (``data_block_wire``).

The chain rules must not be able to tell a block parsed by the content sweep's child
from one parsed in place: the rebuilt ``DataBlock`` must equal the codec's with its
source state as fields (``DataBlock.with_state_fields``, what the parent keeps of its
own blocks), its models must have the same fields marked set, its source state must
build the codec's model, and its hashes must be ``Multihash`` again.
"""

from __future__ import annotations

import marshal
import sys

import pytest

from reconciler.odf import DatasetId, Multihash, Timestamp, encode_block, models
from reconciler.odf.codec import decode_data_block
from reconciler.odf.data_block_wire import from_plain, to_plain
from reconciler.odf.data_step import DataBlock, SourceStateFields

T0 = Timestamp(1_767_225_600, 123_456_789)
H1, H2, H3 = (Multihash.sha3_256(b"%d" % i) for i in range(3))
DATASET = DatasetId.generate()[0]

EVENTS: dict[str, models.AddData | models.ExecuteTransform] = {
    "add-data-every-field": models.AddData(
        prev_checkpoint=H1,
        prev_offset=9,
        new_data=models.DataSlice(
            logical_hash=H2,
            physical_hash=H3,
            offset_interval=models.OffsetInterval(start=10, end=19),
            size=1234,
        ),
        new_checkpoint=models.Checkpoint(physical_hash=H1, size=56),
        new_watermark=Timestamp(1_700_000_000, 5),
        new_source_state=models.SourceState(source_name="default", kind="odf/etag", value='"x"'),
    ),
    "add-data-watermark-only": models.AddData(new_watermark=Timestamp(1_700_000_000)),
    "transform-two-inputs": models.ExecuteTransform(
        query_inputs=[
            models.ExecuteTransformInput(
                dataset_id=DATASET,
                prev_block_hash=H1,
                new_block_hash=H2,
                prev_offset=4,
                new_offset=8,
            ),
            models.ExecuteTransformInput(dataset_id=DATASET, new_block_hash=H3),
        ],
        prev_offset=0,
        new_data=models.DataSlice(
            logical_hash=H2,
            physical_hash=H3,
            offset_interval=models.OffsetInterval(start=1, end=1),
            size=7,
        ),
        new_checkpoint=models.Checkpoint(physical_hash=H2, size=3),
    ),
    "transform-no-inputs": models.ExecuteTransform(query_inputs=[], prev_checkpoint=H3),
}


@pytest.mark.parametrize("prev", [None, H1], ids=["first", "linked"])
@pytest.mark.parametrize("name", list(EVENTS))
def test_a_data_block_comes_back_from_marshal_as_the_codec_parsed_it(
    name: str, prev: Multihash | None
) -> None:
    block = models.MetadataBlock(
        system_time=T0, prev_block_hash=prev, sequence_number=7, event=EVENTS[name]
    )
    parsed = decode_data_block(encode_block(block))
    assert parsed is not None

    rebuilt = from_plain(marshal.loads(marshal.dumps(to_plain(parsed))))

    assert rebuilt == parsed.with_state_fields()
    assert type(rebuilt) is DataBlock
    assert rebuilt.system_time == T0
    hashes = [rebuilt.prev_block_hash, rebuilt.step.prev_checkpoint]
    if rebuilt.step.new_data is not None:
        hashes += [rebuilt.step.new_data.logical_hash, rebuilt.step.new_data.physical_hash]
    for model in rebuilt.step.query_inputs or []:
        hashes += [model.prev_block_hash, model.new_block_hash]
        assert type(model.dataset_id) is DatasetId
    assert all(type(h) is Multihash for h in hashes if h is not None)
    state = rebuilt.step.new_source_state
    assert state is None or type(state) is SourceStateFields
    models_of = [*(rebuilt.step.query_inputs or []), None if state is None else state.model()]
    originals = [*(parsed.step.query_inputs or []), parsed.step.new_source_state]
    for again, original in zip(models_of, originals, strict=True):
        if original is None:
            assert again is None
            continue
        assert again.__pydantic_fields_set__ == original.__pydantic_fields_set__
        assert again.model_dump(exclude_unset=True) == original.model_dump(exclude_unset=True)


def test_the_blocks_of_one_answer_share_their_source_name_and_kind() -> None:
    """Every block of a chain repeats its source's name and kind: they are sent once per
    answer and come back as one string each, the one ``sys.intern`` gives."""
    parsed = []
    for value in ("a", "b"):
        event = models.AddData(
            new_watermark=T0,
            new_source_state=models.SourceState(
                source_name="default", kind="odf/etag", value=value
            ),
        )
        block = models.MetadataBlock(system_time=T0, sequence_number=1, event=event)
        decoded = decode_data_block(encode_block(block))
        assert decoded is not None
        parsed.append(decoded)

    answer = marshal.loads(marshal.dumps([to_plain(block) for block in parsed]))
    states = [from_plain(plain).step.new_source_state for plain in answer]

    assert states == [("default", "odf/etag", "a"), ("default", "odf/etag", "b")]
    assert states[0] is not None and states[1] is not None
    assert states[0].source_name is states[1].source_name is sys.intern("default")
    assert states[0].kind is states[1].kind is sys.intern("odf/etag")
