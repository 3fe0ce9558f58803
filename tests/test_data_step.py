"""Source states kept as their fields (``SourceStateFields``) in a ``DataStep``.

A full integrity check keeps a data block's source state as its three fields, not as a
``models.SourceState``, and the chain rules take either form. The fields must build the
very model the codec builds, judge equal exactly when the models do, and fold to the
same ``ChainState``, models included, whichever form each block carries.
"""

from __future__ import annotations

import marshal
import sys

import pytest

from reconciler.odf import DatasetId, Multihash, Timestamp, block_hash, encode_block, models
from reconciler.odf.chain import ChainState, NoOpEventError, fold, validate_append
from reconciler.odf.codec import BlockDecodeError, _data_event, decode_block, decode_data_block
from reconciler.odf.data_block_wire import from_plain, to_plain
from reconciler.odf.data_step import DataBlock, SourceStateFields, state_fields

T0 = Timestamp(1_767_225_600)
ID = DatasetId.generate()[0]


def etag(value: str, source: str = "default") -> models.SourceState:
    return models.SourceState(source_name=source, kind="odf/etag", value=value)


def slice_(start: int) -> models.DataSlice:
    return models.DataSlice(
        logical_hash=Multihash.sha3_256(b"l%d" % start),
        physical_hash=Multihash.sha3_256(b"p%d" % start),
        offset_interval=models.OffsetInterval(start=start, end=start + 9),
        size=10,
    )


def add_data(start: int, state: models.SourceState | None) -> models.AddData:
    return models.AddData(
        prev_offset=start - 1 if start else None,
        new_data=slice_(start),
        new_source_state=state,
    )


EVENTS: list[models.AnyEvent] = [
    models.Seed(dataset_id=ID, dataset_kind=models.DatasetKind.ROOT),
    models.AddPushSource(
        source_name="default",
        read=models.ReadStepNdJson(schema=["v BIGINT"]),
        merge=models.MergeStrategyAppend(),
    ),
    models.SetDataSchema(schema_=b"schema"),
    add_data(0, etag("v1")),
    add_data(10, etag("v2")),
    add_data(20, etag("a", source="other")),
    add_data(30, None),
    add_data(40, etag("v3")),
]


def stored_chain() -> list[tuple[Multihash, bytes]]:
    """``EVENTS`` as stored blocks, oldest first, each with its hash."""
    chain: list[tuple[Multihash, bytes]] = []
    prev: Multihash | None = None
    for seq, event in enumerate(EVENTS):
        block = models.MetadataBlock(
            system_time=T0, prev_block_hash=prev, sequence_number=seq, event=event
        )
        data = encode_block(block)
        prev = block_hash(data)
        chain.append((prev, data))
    return chain


def parsed(data: bytes) -> models.MetadataBlock | DataBlock:
    return decode_data_block(data) or decode_block(data)


def test_the_fields_build_the_model_the_codec_builds() -> None:
    model = decode_data_block(stored_chain()[3][1]).step.new_source_state  # type: ignore[union-attr]
    assert type(model) is models.SourceState

    fields = SourceStateFields.of(model)

    assert fields == ("default", "odf/etag", "v1")
    assert fields.source_name is sys.intern("default")
    assert fields.kind is sys.intern("odf/etag")
    again = fields.model()
    assert type(again) is models.SourceState
    assert again == model == etag("v1")
    assert again.__pydantic_fields_set__ == model.__pydantic_fields_set__
    assert again.model_dump_json(by_alias=True) == (
        '{"sourceName":"default","kind":"odf/etag","value":"v1"}'
    )
    assert state_fields(model) == state_fields(fields) == ("default", "odf/etag", "v1")
    assert state_fields(None) is None


def test_a_block_with_its_state_as_fields_differs_from_the_codecs_only_in_that_state() -> None:
    chain = stored_chain()
    with_state = decode_data_block(chain[3][1])
    without_state = decode_data_block(chain[6][1])
    assert with_state is not None and without_state is not None

    light = with_state.with_state_fields()

    assert light.step.new_source_state == SourceStateFields("default", "odf/etag", "v1")
    assert light._replace(step=light.step._replace(new_source_state=None)) == (
        with_state._replace(step=with_state.step._replace(new_source_state=None))
    )
    assert light.with_state_fields() is light
    assert without_state.with_state_fields() is without_state


@pytest.mark.parametrize("form", ["codec", "fields", "wire", "mixed"])
def test_a_chain_folds_to_the_same_state_whichever_form_its_source_states_have(
    form: str,
) -> None:
    chain = stored_chain()
    blocks = [(hash_, parsed(data)) for hash_, data in chain]
    if form != "codec":
        for i, (hash_, block) in enumerate(blocks):
            if isinstance(block, DataBlock) and (form != "mixed" or i % 2):
                light = (
                    from_plain(marshal.loads(marshal.dumps(to_plain(block))))
                    if form == "wire"
                    else block.with_state_fields()
                )
                assert isinstance(light.step.new_source_state, SourceStateFields | None)
                blocks[i] = (hash_, light)

    state = fold(blocks)

    last = state.last_source_state
    assert type(last) is models.SourceState
    assert last == etag("v3")
    assert last.model_dump_json(by_alias=True) == (
        '{"sourceName":"default","kind":"odf/etag","value":"v3"}'
    )
    assert state.source_states == {"default": etag("v3"), "other": etag("a", source="other")}
    assert all(type(s) is models.SourceState for s in state.source_states.values())
    assert state.source_states["default"] is last
    assert state.head == chain[-1][0]
    assert (state.sequence_number, state.last_offset) == (7, 49)
    stepwise = ChainState()
    for hash_, block in blocks:
        validate_append(stepwise, block)
        stepwise = stepwise.apply(block, hash_)
        if stepwise.last_source_state is not None:
            assert type(stepwise.last_source_state) is models.SourceState
        assert all(type(s) is models.SourceState for s in stepwise.source_states.values())
    assert stepwise == state
    codec_state = fold([(hash_, parsed(data)) for hash_, data in chain])
    assert state == codec_state


@pytest.mark.parametrize("repeated_as", ["model", "fields"])
@pytest.mark.parametrize("folded_as", ["model", "fields"])
def test_a_repeated_source_state_is_a_no_op_in_either_form(
    folded_as: str, repeated_as: str
) -> None:
    """The last state folded in one form, the block repeating it in the other or the same."""
    chain = stored_chain()[:4]  # the first AddData, with state v1
    blocks = [(hash_, parsed(data)) for hash_, data in chain]
    if folded_as == "fields":
        hash_, block = blocks[-1]
        assert isinstance(block, DataBlock)
        blocks[-1] = (hash_, block.with_state_fields())
    state = fold(blocks)
    event = models.AddData(prev_offset=9, new_source_state=etag("v1"))
    repeated = models.MetadataBlock(
        system_time=T0, prev_block_hash=state.head, sequence_number=4, event=event
    )
    offered = decode_data_block(encode_block(repeated))
    assert offered is not None
    if repeated_as == "fields":
        offered = offered.with_state_fields()

    with pytest.raises(NoOpEventError) as caught:
        validate_append(state, offered)
    assert str(caught.value) == (
        "block #4: AddData neither adds data nor advances the checkpoint, watermark or source state"
    )
    moved = offered._replace(
        step=offered.step._replace(new_source_state=SourceStateFields("default", "odf/etag", "v2"))
    )
    validate_append(state, moved)  # a new value advances the source
    assert state.apply(moved, Multihash.sha3_256(b"next")).last_source_state == etag("v2")


@pytest.mark.parametrize("at", [3, 5, 6], ids=["state", "other-source", "no-state"])
def test_the_codec_gives_the_state_as_fields_when_asked_as_it_would_be_made_of_the_model(
    at: int,
) -> None:
    """``state_fields``: what a full check and ``Dataset.state`` fold, built without the
    model, equals the model's fields, interned the same."""
    data = stored_chain()[at][1]
    as_model = decode_data_block(data)
    as_fields = decode_data_block(data, state_fields=True)
    assert as_model is not None and as_fields is not None

    assert as_fields == as_model.with_state_fields()
    state = as_fields.step.new_source_state
    if at == 6:
        assert state is None
        return
    assert type(state) is SourceStateFields
    assert type(as_model.step.new_source_state) is models.SourceState
    assert state.source_name is sys.intern(state.source_name)
    assert state.kind is sys.intern("odf/etag")


def test_the_event_made_of_a_step_holds_a_model_whichever_form_the_steps_state_has() -> None:
    """The codec builds a data block's model from its step (``_data_event``): a state
    given as fields is built as its model, never put in the event as a tuple."""
    data = stored_chain()[3][1]
    as_fields = decode_data_block(data, state_fields=True)
    as_model = decode_data_block(data)
    assert as_fields is not None and as_model is not None

    events = [_data_event(block.step) for block in (as_fields, as_model)]

    for event in events:
        state = event.new_source_state
        assert type(state) is models.SourceState
        assert state.__pydantic_fields_set__ == {"source_name", "kind", "value"}
        assert event == decode_block(data).event == EVENTS[3]
    assert events[0].model_dump_json(by_alias=True) == events[1].model_dump_json(by_alias=True)


@pytest.mark.parametrize("state_fields", [False, True], ids=["model", "fields"])
def test_a_state_lacking_fields_is_the_same_decode_error_in_either_form(state_fields: bool) -> None:
    state = models.SourceState.model_construct(source_name="s", kind=None, value=None)
    block = models.MetadataBlock.model_construct(
        system_time=T0,
        prev_block_hash=None,
        sequence_number=1,
        event=models.AddData(new_source_state=state),
    )
    message = "malformed metadata block content: SourceState lacks its required kind, value$"
    with pytest.raises(BlockDecodeError, match=message):
        decode_data_block(encode_block(block), state_fields=state_fields)
