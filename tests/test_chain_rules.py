"""Every metadata chain rule, exercised on real chains stored on disk.

Each rejection test builds a chain with ``Dataset`` in ``tmp_path``, offers one bad block
and checks the exact error class, its ``rule`` id and the key words of its message, and
that the rejected append left the dataset folder byte-for-byte as it was. The positive
tests fold valid root and derivative chains and read the projection from ``ChainState``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.odf import models
from reconciler.odf.chain import (
    ChainRuleError,
    ChainState,
    CheckpointMismatchError,
    DataSchemaMissingError,
    DatasetKindMismatchError,
    FirstBlockNotSeedError,
    InputCursor,
    NoOpEventError,
    OffsetsNotSequentialError,
    PrevBlockNotFoundError,
    SeedNotFirstError,
    SequenceNumberError,
    SourceConflictError,
    SystemTimeNotMonotonicError,
    TransformInputsError,
    TransformMissingError,
    TransformNotNormalizedError,
    WatermarkNotMonotonicError,
    fold,
    validate_append,
)
from reconciler.odf.models import DatasetKind, MetadataBlock
from reconciler.odf.multiformat import ARROW0_SHA3_256, DatasetId, Multihash
from reconciler.odf.repository import Dataset
from reconciler.odf.timestamps import Timestamp

T0 = Timestamp.parse("2020-01-01T00:00:00Z")
SCHEMA = b"arrow schema v1"  # the chain rules treat the schema as opaque bytes
ROOT, DERIVATIVE = DatasetKind.ROOT, DatasetKind.DERIVATIVE


def minute(n: int) -> Timestamp:
    return Timestamp(T0.seconds + 60 * n)


def hour(n: int) -> Timestamp:
    return Timestamp(T0.seconds + 3600 * n)


def digest(label: str) -> Multihash:
    return Multihash.sha3_256(label.encode())


def data_slice(start: int, end: int) -> models.DataSlice:
    label = f"slice {start}-{end}"
    return models.DataSlice(
        logical_hash=Multihash.from_digest(
            hashlib.sha3_256(label.encode()).digest(), ARROW0_SHA3_256
        ),
        physical_hash=digest(label),
        offset_interval=models.OffsetInterval(start=start, end=end),
        size=100 * (end - start + 1),
    )


def checkpoint(label: str) -> models.Checkpoint:
    return models.Checkpoint(physical_hash=digest(f"checkpoint {label}"), size=64)


def etag(value: str) -> models.SourceState:
    return models.SourceState(source_name="default", kind="odf/etag", value=value)


def spark(*steps: models.SqlQueryStep, query: str | None = None) -> models.TransformSql:
    return models.TransformSql(engine="spark", query=query, queries=list(steps) or None)


def step(query: str, alias: str | None = None) -> models.SqlQueryStep:
    return models.SqlQueryStep(alias=alias, query=query)


POLLING = models.SetPollingSource(
    fetch=models.FetchStepUrl(url="https://example.org/cities.csv"),
    read=models.ReadStepCsv(header=True, schema_=["city STRING", "population BIGINT"]),
    merge=models.MergeStrategyLedger(primary_key=["city"]),
)
PUSH = models.AddPushSource(
    source_name="api",
    read=models.ReadStepNdJson(),
    merge=models.MergeStrategyAppend(),
)


def _listing(root: Path) -> dict[str, bytes]:
    """Every file under a dataset folder with its bytes (empty if the folder is absent)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


class Chain:
    """A dataset on disk whose clock moves one minute per block."""

    def __init__(self, root: Path, kind: DatasetKind | None = ROOT) -> None:
        self.ds = Dataset(root)
        self.id = DatasetId.generate()[0]
        self.clock = 0
        self.seed: Multihash | None = None
        if kind is not None:
            self.seed = self.add(models.Seed(dataset_id=self.id, dataset_kind=kind))

    @property
    def state(self) -> ChainState:
        return self.ds.state()

    def add(self, event: models.AnyEvent) -> Multihash:
        self.clock += 1
        return self.ds.append_event(event, minute(self.clock))

    def block(
        self,
        event: models.AnyEvent,
        *,
        sequence_number: int | None = None,
        prev: Multihash | str | None = "head",
        system_time: Timestamp | None = None,
    ) -> MetadataBlock:
        """A block that would follow the head, with any of its linkage overridden."""
        state = self.state
        return MetadataBlock(
            system_time=system_time or minute(self.clock + 1),
            prev_block_hash=state.head if prev == "head" else prev,
            sequence_number=(
                state.sequence_number + 1 if sequence_number is None else sequence_number
            ),
            event=event,
        )

    def reject(
        self,
        offered: models.AnyEvent | MetadataBlock,
        error: type[ChainRuleError],
        rule: str,
        *fragments: str,
    ) -> ChainRuleError:
        """Append ``offered``; it must fail with exactly ``error`` and change no file."""
        block = offered if isinstance(offered, MetadataBlock) else self.block(offered)
        head, before = self.ds.head(), _listing(self.ds.root)
        with pytest.raises(ChainRuleError) as caught:
            self.ds.append(block, head)
        exc = caught.value
        assert type(exc) is error, f"{type(exc).__name__}: {exc}"
        assert exc.rule == rule
        assert exc.sequence_number == block.sequence_number
        message = str(exc)
        assert message.startswith(f"block #{block.sequence_number}: ")
        for fragment in fragments:
            assert fragment in message
        assert self.ds.head() == head
        assert _listing(self.ds.root) == before
        # The pure rule gives the same verdict as the repository.
        with pytest.raises(error):
            validate_append(self.ds.state(), block)
        return exc


def root_with_schema(root: Path, source: models.AnyEvent | None = POLLING) -> Chain:
    chain = Chain(root, ROOT)
    if source is not None:
        chain.add(source)
    chain.add(models.SetDataSchema(schema_=SCHEMA))
    return chain


def root_with_data(root: Path) -> Chain:
    """Seed, polling source, schema, one slice 0..9 with checkpoint, watermark and state."""
    chain = root_with_schema(root)
    chain.add(
        models.AddData(
            new_data=data_slice(0, 9),
            new_checkpoint=checkpoint("1"),
            new_watermark=hour(10),
            new_source_state=etag("v1"),
        )
    )
    return chain


def qi(
    dataset: Chain,
    prev_block: Multihash | None = None,
    new_block: Multihash | None = None,
    prev_offset: int | None = None,
    new_offset: int | None = None,
) -> models.ExecuteTransformInput:
    return models.ExecuteTransformInput(
        dataset_id=dataset.id,
        prev_block_hash=prev_block,
        new_block_hash=new_block,
        prev_offset=prev_offset,
        new_offset=new_offset,
    )


@dataclass
class Derivation:
    """A derivative reading two root inputs, ``a`` (three slices) and ``b`` (two)."""

    out: Chain
    a: Chain
    a_blocks: list[Multihash]  # AddData 0..9, 10..19, 20..29
    b: Chain
    b_blocks: list[Multihash]  # AddData 0..4, SetInfo, AddData 5..9

    def transform_event(self) -> models.SetTransform:
        return set_transform(self.a, self.b)


def set_transform(*inputs: Chain) -> models.SetTransform:
    return models.SetTransform(
        inputs=[
            models.TransformInput(dataset_ref=str(c.id), alias=f"input{i}")
            for i, c in enumerate(inputs)
        ],
        transform=spark(step("SELECT * FROM input0 UNION ALL SELECT * FROM input1")),
    )


def derivation(tmp_path: Path, *, with_transform: bool = True) -> Derivation:
    a = root_with_schema(tmp_path / "a")
    a_blocks = [
        a.add(models.AddData(new_data=data_slice(0, 9), new_watermark=hour(1))),
        a.add(models.AddData(prev_offset=9, new_data=data_slice(10, 19), new_watermark=hour(2))),
        a.add(models.AddData(prev_offset=19, new_data=data_slice(20, 29), new_watermark=hour(3))),
    ]
    b = root_with_schema(tmp_path / "b")
    b_blocks = [
        b.add(models.AddData(new_data=data_slice(0, 4), new_watermark=hour(1))),
        b.add(models.SetInfo(description="b")),
        b.add(models.AddData(prev_offset=4, new_data=data_slice(5, 9), new_watermark=hour(2))),
    ]
    out = Chain(tmp_path / "out", DERIVATIVE)
    d = Derivation(out, a, a_blocks, b, b_blocks)
    if with_transform:
        out.add(d.transform_event())
        out.add(models.SetDataSchema(schema_=SCHEMA))
    return d


def first_execution(d: Derivation) -> models.ExecuteTransform:
    """Both inputs read up to their first slice; output 0..14."""
    return models.ExecuteTransform(
        query_inputs=[
            qi(d.a, new_block=d.a_blocks[0], new_offset=9),
            qi(d.b, new_block=d.b_blocks[0], new_offset=4),
        ],
        new_data=data_slice(0, 14),
        new_checkpoint=checkpoint("t1"),
        new_watermark=hour(1),
    )


# --- Seed, sequence numbers, linkage, system time --------------------------------------


def test_a_first_block_that_is_not_a_seed_is_rejected_as_first_block_not_seed(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds", kind=None)
    block = chain.block(models.SetInfo(description="no seed"), sequence_number=0, prev=None)
    chain.reject(
        block,
        FirstBlockNotSeedError,
        "seed-block-order",
        "block #0: the first block of a chain must be a Seed",
    )
    assert not chain.ds.exists()


def test_a_second_seed_block_is_rejected_as_seed_not_first(tmp_path: Path) -> None:
    chain = root_with_schema(tmp_path / "ds")
    chain.reject(
        models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=ROOT),
        SeedNotFirstError,
        "seed-block-order",
        "block #3: a Seed block can only start a chain",
    )


def test_a_seed_that_references_a_previous_block_is_rejected_as_seed_not_first(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds", kind=None)
    elsewhere = digest("some other chain's head")
    block = chain.block(
        models.Seed(dataset_id=chain.id, dataset_kind=ROOT), sequence_number=0, prev=elsewhere
    )
    chain.reject(
        block,
        SeedNotFirstError,
        "seed-block-order",
        f"the Seed block cannot reference a previous block ({elsewhere})",
    )


def test_a_seed_with_a_nonzero_sequence_number_is_rejected(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds", kind=None)
    block = chain.block(
        models.Seed(dataset_id=chain.id, dataset_kind=ROOT), sequence_number=1, prev=None
    )
    chain.reject(
        block,
        SequenceNumberError,
        "sequence-numbers",
        "block #1: the Seed block must have sequence number 0, got 1",
    )


@pytest.mark.parametrize(("offset", "text"), [(2, "sequence number 4"), (0, "sequence number 2")])
def test_a_block_whose_sequence_number_does_not_follow_the_head_is_rejected(
    tmp_path: Path, offset: int, text: str
) -> None:
    chain = root_with_schema(tmp_path / "ds")  # head is #2
    block = chain.block(models.SetInfo(description="x"), sequence_number=2 + offset)
    chain.reject(block, SequenceNumberError, "sequence-numbers", f"{text} does not follow 2")


def test_a_block_whose_prev_hash_is_not_the_head_is_rejected_as_prev_block_not_found(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(models.SetInfo(description="one"))
    head = chain.add(models.SetInfo(description="two"))
    block = chain.block(models.SetInfo(description="fork"), prev=chain.seed)
    chain.reject(
        block,
        PrevBlockNotFoundError,
        "prev-block-exists",
        f"previous block {chain.seed} is not the head of the chain ({head})",
    )
    unknown = digest("never stored")
    chain.reject(
        chain.block(models.SetInfo(description="fork"), prev=unknown),
        PrevBlockNotFoundError,
        "prev-block-exists",
        f"previous block {unknown} is not the head",
    )


def test_a_later_block_without_a_prev_hash_is_rejected_as_first_block_not_seed(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds")
    block = chain.block(models.SetInfo(description="orphan"), prev=None)
    chain.reject(
        block,
        FirstBlockNotSeedError,
        "seed-block-order",
        "block #1: the block does not reference a previous block",
    )


def test_a_system_time_earlier_than_the_head_is_rejected_and_an_equal_one_is_accepted(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(models.SetInfo(description="at minute 2"))
    earlier = Timestamp(minute(2).seconds, 0)
    late_by_a_nano = Timestamp(minute(2).seconds - 1, 999_999_999)
    chain.reject(
        chain.block(models.SetInfo(description="past"), system_time=late_by_a_nano),
        SystemTimeNotMonotonicError,
        "system-time-monotonic",
        "system time 2020-01-01T00:01:59.999999999Z is earlier than the previous block's "
        "2020-01-01T00:02:00Z",
    )
    block = chain.block(models.SetInfo(description="same instant"), system_time=earlier)
    chain.ds.append(block, chain.ds.head())
    assert chain.state.system_time == minute(2)


# --- Watermarks, offsets, checkpoints ------------------------------------------------------


def test_a_watermark_earlier_than_the_last_one_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    event = models.AddData(
        prev_offset=9,
        prev_checkpoint=checkpoint("1").physical_hash,
        new_data=data_slice(10, 19),
        new_checkpoint=checkpoint("2"),
        new_watermark=hour(9),
    )
    chain.reject(
        event,
        WatermarkNotMonotonicError,
        "watermark-monotonic",
        "watermark 2020-01-01T09:00:00Z is earlier than 2020-01-01T10:00:00Z",
    )


def test_dropping_the_watermark_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    event = models.AddData(
        prev_offset=9,
        prev_checkpoint=checkpoint("1").physical_hash,
        new_data=data_slice(10, 19),
        new_checkpoint=checkpoint("2"),
    )
    chain.reject(
        event,
        WatermarkNotMonotonicError,
        "watermark-monotonic",
        "the watermark was 2020-01-01T10:00:00Z and cannot be dropped",
    )


def test_a_watermark_that_falls_in_an_execute_transform_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.out.add(first_execution(d))
    event = models.ExecuteTransform(
        query_inputs=[
            qi(d.a, d.a_blocks[0], d.a_blocks[1], 9, 19),
            qi(d.b, d.b_blocks[0], None, 4, None),
        ],
        prev_offset=14,
        prev_checkpoint=checkpoint("t1").physical_hash,
        new_data=data_slice(15, 24),
        new_checkpoint=checkpoint("t2"),
        new_watermark=Timestamp(hour(1).seconds - 1),
    )
    d.out.reject(
        event,
        WatermarkNotMonotonicError,
        "watermark-monotonic",
        "watermark 2020-01-01T00:59:59Z is earlier than 2020-01-01T01:00:00Z",
    )


def test_new_data_that_does_not_start_at_the_next_offset_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    event = models.AddData(
        prev_offset=9,
        prev_checkpoint=checkpoint("1").physical_hash,
        new_data=data_slice(12, 19),
        new_checkpoint=checkpoint("2"),
        new_watermark=hour(11),
    )
    chain.reject(
        event,
        OffsetsNotSequentialError,
        "offsets-sequential",
        "new data starts at offset 12, expected 10",
    )


def test_the_first_data_must_start_at_offset_zero(tmp_path: Path) -> None:
    chain = root_with_schema(tmp_path / "ds")
    chain.reject(
        models.AddData(new_data=data_slice(1, 9)),
        OffsetsNotSequentialError,
        "offsets-sequential",
        "new data starts at offset 1, expected 0",
    )


def test_a_prev_offset_that_is_not_the_last_offset_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    base = {
        "prev_checkpoint": checkpoint("1").physical_hash,
        "new_checkpoint": checkpoint("2"),
        "new_watermark": hour(11),
    }
    chain.reject(
        models.AddData(prev_offset=8, new_data=data_slice(10, 19), **base),
        OffsetsNotSequentialError,
        "offsets-sequential",
        "prevOffset 8 does not match the chain's last offset 9",
    )
    chain.reject(
        models.AddData(**base),  # no data, but the offset must still be carried
        OffsetsNotSequentialError,
        "offsets-sequential",
        "prevOffset None does not match the chain's last offset 9",
    )


def test_an_empty_offset_interval_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    event = models.AddData(
        prev_offset=9,
        prev_checkpoint=checkpoint("1").physical_hash,
        new_data=data_slice(10, 9),
        new_checkpoint=checkpoint("2"),
        new_watermark=hour(11),
    )
    chain.reject(
        event,
        OffsetsNotSequentialError,
        "offsets-sequential",
        "offset interval [10, 9] is empty",
    )


def test_a_prev_checkpoint_that_is_not_the_last_checkpoint_is_rejected(tmp_path: Path) -> None:
    chain = root_with_data(tmp_path / "ds")
    last = checkpoint("1").physical_hash
    wrong = checkpoint("0").physical_hash
    for prev, text in [(wrong, f"prevCheckpoint {wrong} "), (None, "prevCheckpoint None ")]:
        chain.reject(
            models.AddData(
                prev_offset=9,
                prev_checkpoint=prev,
                new_data=data_slice(10, 19),
                new_checkpoint=checkpoint("2"),
                new_watermark=hour(11),
            ),
            CheckpointMismatchError,
            "checkpoints-chained",
            text + f"does not match the last checkpoint {last}",
        )


def test_a_data_block_without_a_new_checkpoint_leaves_no_checkpoint_to_chain_from(
    tmp_path: Path,
) -> None:
    # kamu compares prevCheckpoint with the previous data block's newCheckpoint: a block
    # that writes none resets it, it is not carried over from an older block.
    chain = root_with_data(tmp_path / "ds")
    chain.add(
        models.AddData(
            prev_offset=9,
            prev_checkpoint=checkpoint("1").physical_hash,
            new_data=data_slice(10, 19),
            new_watermark=hour(11),
        )
    )
    assert chain.state.checkpoint is None
    chain.reject(
        models.AddData(
            prev_offset=19,
            prev_checkpoint=checkpoint("1").physical_hash,
            new_data=data_slice(20, 29),
            new_watermark=hour(12),
        ),
        CheckpointMismatchError,
        "checkpoints-chained",
        f"prevCheckpoint {checkpoint('1').physical_hash} does not match the last checkpoint None",
    )
    chain.add(models.AddData(prev_offset=19, new_data=data_slice(20, 29), new_watermark=hour(12)))
    assert chain.state.last_offset == 29


# --- Schema before data ---------------------------------------------------------------------


def test_add_data_before_set_data_schema_is_rejected(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(POLLING)
    chain.reject(
        models.AddData(new_data=data_slice(0, 9), new_watermark=hour(1)),
        DataSchemaMissingError,
        "schema-before-data",
        "a SetDataSchema block must come before the first data",
    )
    # Without data (only a source state) no schema is needed.
    chain.add(models.AddData(new_source_state=etag("v0")))
    assert chain.state.data_schema is None


def test_execute_transform_with_data_before_set_data_schema_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    d.out.add(d.transform_event())
    d.out.reject(
        first_execution(d),
        DataSchemaMissingError,
        "schema-before-data",
        "a SetDataSchema block must come before the first data",
    )


# --- Derivative inputs ------------------------------------------------------------------------


def test_execute_transform_without_set_transform_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    d.out.add(models.SetDataSchema(schema_=SCHEMA))
    d.out.reject(
        first_execution(d),
        TransformMissingError,
        "transform-before-execute",
        "ExecuteTransform needs a SetTransform earlier in the chain",
    )


def test_execute_transform_inputs_in_another_order_than_set_transform_are_rejected(
    tmp_path: Path,
) -> None:
    d = derivation(tmp_path)
    event = first_execution(d)
    swapped = event.model_copy(update={"query_inputs": event.query_inputs[::-1]})
    d.out.reject(
        swapped,
        TransformInputsError,
        "transform-inputs",
        "query inputs must follow the SetTransform's inputs in order",
    )
    missing = event.model_copy(update={"query_inputs": event.query_inputs[:1]})
    d.out.reject(missing, TransformInputsError, "transform-inputs", "must follow")


def test_an_input_prev_block_hash_that_is_not_where_the_last_transform_stopped_is_rejected(
    tmp_path: Path,
) -> None:
    d = derivation(tmp_path)
    d.out.add(first_execution(d))
    event = models.ExecuteTransform(
        query_inputs=[
            qi(d.a, d.a_blocks[1], d.a_blocks[2], 9, 29),  # prev should be a_blocks[0]
            qi(d.b, d.b_blocks[0], None, 4, None),
        ],
        prev_offset=14,
        prev_checkpoint=checkpoint("t1").physical_hash,
        new_data=data_slice(15, 34),
        new_checkpoint=checkpoint("t2"),
        new_watermark=hour(1),
    )
    d.out.reject(
        event,
        TransformInputsError,
        "transform-inputs",
        f"input {d.a.id}: prevBlockHash {d.a_blocks[1]} is not where the last transform "
        f"stopped ({d.a_blocks[0]})",
    )


def test_an_input_prev_offset_that_is_not_where_the_last_transform_stopped_is_rejected(
    tmp_path: Path,
) -> None:
    d = derivation(tmp_path)
    d.out.add(first_execution(d))
    event = models.ExecuteTransform(
        query_inputs=[
            qi(d.a, d.a_blocks[0], None, 9, None),
            qi(d.b, d.b_blocks[0], d.b_blocks[2], 3, 9),  # prevOffset should be 4
        ],
        prev_offset=14,
        prev_checkpoint=checkpoint("t1").physical_hash,
        new_data=data_slice(15, 19),
        new_checkpoint=checkpoint("t2"),
        new_watermark=hour(1),
    )
    d.out.reject(
        event,
        TransformInputsError,
        "transform-inputs",
        f"input {d.b.id}: prevOffset 3 is not where the last transform stopped (4)",
    )


def test_the_first_execute_transform_must_read_inputs_from_their_start(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    event = first_execution(d)
    late = event.model_copy(
        update={
            "query_inputs": [qi(d.a, d.a_blocks[0], d.a_blocks[1], 9, 19), event.query_inputs[1]]
        }
    )
    d.out.reject(
        late,
        TransformInputsError,
        "transform-inputs",
        f"input {d.a.id}: prevBlockHash {d.a_blocks[0]} is not where the last transform "
        "stopped (None)",
    )


def test_an_input_new_offset_without_new_block_hash_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    event = first_execution(d)
    broken = event.model_copy(
        update={"query_inputs": [qi(d.a, None, None, None, 9), event.query_inputs[1]]}
    )
    d.out.reject(
        broken,
        TransformInputsError,
        "transform-inputs",
        f"input {d.a.id}: newOffset is set without newBlockHash",
    )


def test_an_input_that_does_not_move_forward_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.out.add(first_execution(d))
    base = {
        "prev_offset": 14,
        "prev_checkpoint": checkpoint("t1").physical_hash,
        "new_checkpoint": checkpoint("t2"),
        "new_watermark": hour(1),
    }
    same_block = models.ExecuteTransform(
        query_inputs=[
            qi(d.a, d.a_blocks[0], d.a_blocks[0], 9, None),
            qi(d.b, d.b_blocks[0], None, 4),
        ],
        **base,
    )
    d.out.reject(
        same_block,
        TransformInputsError,
        "transform-inputs",
        f"input {d.a.id}: newBlockHash equals prevBlockHash",
    )
    same_offset = models.ExecuteTransform(
        query_inputs=[qi(d.a, d.a_blocks[0], d.a_blocks[1], 9, 9), qi(d.b, d.b_blocks[0], None, 4)],
        **base,
    )
    d.out.reject(
        same_offset,
        TransformInputsError,
        "transform-inputs",
        f"input {d.a.id}: newOffset 9 does not advance past 9",
    )


# --- Transform normalization ---------------------------------------------------------------


NOT_NORMALIZED = [
    pytest.param(
        spark(query="SELECT * FROM input0"),
        "a stored transform must use 'queries', not 'query'",
        id="query-set",
    ),
    pytest.param(
        spark(step("SELECT * FROM input0", alias="out")),
        "the last query is the output and must have no alias",
        id="last-step-with-alias",
    ),
    pytest.param(
        spark(step("SELECT * FROM input0"), step("SELECT * FROM x")),
        "every query but the last must have an alias",
        id="earlier-step-without-alias",
    ),
    pytest.param(
        models.TransformSql(engine="spark", queries=[]),
        "a transform needs at least one query",
        id="no-queries",
    ),
]


@pytest.mark.parametrize(("transform", "text"), NOT_NORMALIZED)
def test_a_set_transform_that_is_not_normalized_is_rejected(
    tmp_path: Path, transform: models.TransformSql, text: str
) -> None:
    d = derivation(tmp_path, with_transform=False)
    event = d.transform_event().model_copy(update={"transform": transform})
    d.out.reject(event, TransformNotNormalizedError, "transform-normalized", text)


@pytest.mark.parametrize(("transform", "text"), NOT_NORMALIZED)
def test_a_source_whose_preprocess_is_not_normalized_is_rejected(
    tmp_path: Path, transform: models.TransformSql, text: str
) -> None:
    chain = Chain(tmp_path / "ds")
    for source in (POLLING, PUSH):
        chain.reject(
            source.model_copy(update={"preprocess": transform}),
            TransformNotNormalizedError,
            "transform-normalized",
            text,
        )


# --- SetTransform inputs -----------------------------------------------------------------------


def test_a_set_transform_input_not_resolved_to_a_dataset_id_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    event = models.SetTransform(
        inputs=[
            models.TransformInput(dataset_ref="kamu/cities", alias="cities"),
        ],
        transform=spark(step("SELECT * FROM cities")),
    )
    d.out.reject(
        event,
        TransformInputsError,
        "transform-inputs",
        "input 0 ('kamu/cities') must be resolved to a dataset id",
    )
    malformed = models.SetTransform(
        inputs=[models.TransformInput(dataset_ref="did:odf:fnot-hex", alias="x")],
        transform=spark(step("SELECT * FROM x")),
    )
    d.out.reject(
        malformed,
        TransformInputsError,
        "transform-inputs",
        "input 0 ('did:odf:fnot-hex') must be resolved to a dataset id",
    )


def test_a_set_transform_input_without_alias_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    event = d.transform_event()
    event = event.model_copy(
        update={"inputs": [event.inputs[0], models.TransformInput(dataset_ref=str(d.b.id))]}
    )
    d.out.reject(
        event, TransformInputsError, "transform-inputs", f"input 1 ({d.b.id}) has no alias"
    )


def test_a_set_transform_with_a_duplicate_input_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    event = d.transform_event()
    twice = event.model_copy(
        update={
            "inputs": [*event.inputs, models.TransformInput(dataset_ref=str(d.a.id), alias="again")]
        }
    )
    d.out.reject(twice, TransformInputsError, "transform-inputs", f"input {d.a.id} appears twice")
    # The same id in another multibase encoding is the same input.
    base58 = "did:odf:" + d.a.id.to_did_key()[len("did:key:") :]
    assert base58 != str(d.a.id)
    disguised = event.model_copy(
        update={"inputs": [*event.inputs, models.TransformInput(dataset_ref=base58, alias="again")]}
    )
    d.out.reject(
        disguised, TransformInputsError, "transform-inputs", f"input {d.a.id} appears twice"
    )


def test_a_set_transform_without_inputs_is_rejected(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    event = d.transform_event().model_copy(update={"inputs": []})
    d.out.reject(
        event, TransformInputsError, "transform-inputs", "a transform needs at least one input"
    )


# --- Dataset kind and sources ------------------------------------------------------------------


def test_add_data_on_a_derivative_is_rejected_as_dataset_kind_mismatch(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.out.reject(
        models.AddData(new_data=data_slice(0, 9)),
        DatasetKindMismatchError,
        "dataset-kind",
        "AddData is only valid in a Root dataset, this one is Derivative",
    )


def test_execute_transform_on_a_root_is_rejected_as_dataset_kind_mismatch(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.a.reject(
        first_execution(d),
        DatasetKindMismatchError,
        "dataset-kind",
        "ExecuteTransform is only valid in a Derivative dataset, this one is Root",
    )


def test_set_transform_on_a_root_is_rejected_as_dataset_kind_mismatch(tmp_path: Path) -> None:
    d = derivation(tmp_path, with_transform=False)
    d.a.reject(
        d.transform_event(),
        DatasetKindMismatchError,
        "dataset-kind",
        "SetTransform is only valid in a Derivative dataset, this one is Root",
    )


@pytest.mark.parametrize("source", [POLLING, PUSH], ids=["polling", "push"])
def test_a_source_on_a_derivative_is_rejected_as_dataset_kind_mismatch(
    tmp_path: Path, source: models.AnyEvent
) -> None:
    chain = Chain(tmp_path / "ds", DERIVATIVE)
    chain.reject(
        source,
        DatasetKindMismatchError,
        "dataset-kind",
        f"{source.kind} is only valid in a Root dataset, this one is Derivative",
    )


def test_a_polling_source_while_push_sources_are_active_is_rejected(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(PUSH.model_copy(update={"source_name": "upload"}))
    chain.add(PUSH)
    chain.reject(
        POLLING,
        SourceConflictError,
        "sources",
        "a polling source cannot be set while push sources are active: api, upload",
    )


def test_a_push_source_while_a_polling_source_is_active_is_rejected(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(POLLING)
    chain.reject(
        PUSH,
        SourceConflictError,
        "sources",
        "a push source cannot be added while a polling source is active",
    )


# --- No-op events --------------------------------------------------------------------------------


def test_an_add_data_on_a_chain_without_data_that_adds_nothing_is_rejected_as_no_op(
    tmp_path: Path,
) -> None:
    chain = root_with_schema(tmp_path / "ds")
    chain.reject(
        models.AddData(),
        NoOpEventError,
        "no-op-event",
        "AddData neither adds data nor advances the checkpoint, watermark or source state",
    )


def test_an_add_data_that_repeats_checkpoint_watermark_and_source_state_is_rejected_as_no_op(
    tmp_path: Path,
) -> None:
    chain = root_with_data(tmp_path / "ds")
    event = models.AddData(
        prev_offset=9,
        prev_checkpoint=checkpoint("1").physical_hash,
        new_checkpoint=checkpoint("1"),
        new_watermark=hour(10),
        new_source_state=etag("v1"),
    )
    chain.reject(event, NoOpEventError, "no-op-event", "AddData neither adds data")
    # Any one of them moving makes it a real event.
    changes: list[dict[str, object]] = [
        {"new_watermark": hour(11)},
        {"new_source_state": etag("v2")},
        {"new_checkpoint": checkpoint("2")},
    ]
    for change in changes:
        event = event.model_copy(update=change)
        chain.add(event)
        assert event.new_checkpoint is not None
        event = event.model_copy(update={"prev_checkpoint": event.new_checkpoint.physical_hash})
    assert chain.state.last_offset == 9


def test_an_execute_transform_that_advances_nothing_is_rejected_as_no_op(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.out.add(first_execution(d))
    event = models.ExecuteTransform(
        query_inputs=[qi(d.a, d.a_blocks[0], None, 9), qi(d.b, d.b_blocks[0], None, 4)],
        prev_offset=14,
        prev_checkpoint=checkpoint("t1").physical_hash,
        new_checkpoint=checkpoint("t1"),
        new_watermark=hour(1),
    )
    d.out.reject(
        event,
        NoOpEventError,
        "no-op-event",
        "ExecuteTransform neither adds data nor advances the checkpoint, watermark or inputs",
    )


IDENTICAL = [
    pytest.param(
        models.SetInfo(description="Cities", keywords=["geo"]),
        "SetInfo is identical to the current one",
        id="SetInfo",
    ),
    pytest.param(
        models.SetLicense(
            short_name="CC0",
            name="Creative Commons Zero",
            spdx_id="CC0-1.0",
            website_url="https://creativecommons.org/publicdomain/zero/1.0/",
        ),
        "SetLicense is identical to the current one",
        id="SetLicense",
    ),
    pytest.param(
        models.SetVocab(event_time_column="date"),
        "SetVocab is identical to the current one",
        id="SetVocab",
    ),
    pytest.param(
        models.SetDataSchema(schema_=SCHEMA),
        "the new schema is identical to the current one",
        id="SetDataSchema",
    ),
    pytest.param(
        POLLING, "SetPollingSource is identical to the current one", id="SetPollingSource"
    ),
    pytest.param(PUSH, "AddPushSource is identical to the current one", id="AddPushSource"),
    pytest.param(
        models.SetAttachments(
            attachments=models.AttachmentsEmbedded(
                items=[models.AttachmentEmbedded(path="README.md", content="# Cities")]
            )
        ),
        "SetAttachments is identical to the current one",
        id="SetAttachments",
    ),
]


@pytest.mark.parametrize(("event", "text"), IDENTICAL)
def test_repeating_an_identical_set_event_is_rejected_as_no_op(
    tmp_path: Path, event: models.AnyEvent, text: str
) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(event)
    chain.reject(event, NoOpEventError, "no-op-event", text)


def test_repeating_an_identical_set_transform_is_rejected_as_no_op(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    d.out.reject(
        d.transform_event(),
        NoOpEventError,
        "no-op-event",
        "SetTransform is identical to the current one",
    )


def test_disabling_a_polling_source_when_there_is_none_is_rejected_as_no_op(
    tmp_path: Path,
) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(PUSH)
    chain.reject(
        models.DisablePollingSource(),
        NoOpEventError,
        "no-op-event",
        "there is no active polling source to disable",
    )


def test_disabling_an_unknown_push_source_is_rejected_as_no_op(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(PUSH)
    chain.reject(
        models.DisablePushSource(source_name="upload"),
        NoOpEventError,
        "no-op-event",
        "there is no active push source named 'upload'",
    )


# --- Valid chains and the projection ------------------------------------------------------------


def test_a_valid_root_chain_folds_and_exposes_its_projection(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(POLLING)
    assert chain.state.vocabulary() == models.DatasetVocabulary()
    chain.add(models.SetDataSchema(schema_=SCHEMA))
    slices = [(0, 9), (10, 19), (20, 24)]
    prev_offset: int | None = None
    prev_checkpoint: Multihash | None = None
    for i, (start, end) in enumerate(slices, start=1):
        chain.add(
            models.AddData(
                prev_offset=prev_offset,
                prev_checkpoint=prev_checkpoint,
                new_data=data_slice(start, end),
                new_checkpoint=checkpoint(str(i)),
                new_watermark=hour(9 + i),
                new_source_state=etag(f"v{i}"),
            )
        )
        prev_offset, prev_checkpoint = end, checkpoint(str(i)).physical_hash
        assert chain.state.next_offset == end + 1
        assert chain.state.checkpoint == prev_checkpoint
    # A state-only AddData: the source changed, but brought no rows.
    chain.add(
        models.AddData(
            prev_offset=24,
            prev_checkpoint=prev_checkpoint,
            new_checkpoint=checkpoint("3"),
            new_watermark=hour(12),
            new_source_state=etag("v4"),
        )
    )
    chain.add(models.SetVocab(event_time_column="date", offset_column="row"))

    state = chain.state
    assert state.kind is ROOT
    assert state.dataset_id == chain.id
    assert state.sequence_number == 7
    assert state.head == chain.ds.head()
    assert state.system_time == minute(8)
    assert state.polling_source == POLLING
    assert state.push_sources == {}
    assert state.data_schema == SCHEMA
    assert state.last_offset == 24
    assert state.next_offset == 25
    assert state.watermark == Timestamp.parse("2020-01-01T12:00:00Z")
    assert state.checkpoint == checkpoint("3").physical_hash
    assert state.source_states == {"default": etag("v4")}
    assert state.transform is None
    assert state.vocabulary() == models.DatasetVocabulary(
        offset_column="row",
        operation_type_column="op",
        system_time_column="system_time",
        event_time_column="date",
    )

    blocks = list(chain.ds.iter_blocks())
    blocks.reverse()
    assert [b.sequence_number for _, b in blocks] == list(range(8))
    assert fold(blocks) == state
    assert Dataset(chain.ds.root).state() == state
    # The fold is made of validate_append + apply, one block at a time.
    folded = ChainState()
    for block_hash, block in blocks:
        validate_append(folded, block)
        folded = folded.apply(block, block_hash)
    assert folded == state


def test_a_valid_derivative_chain_advances_two_inputs_at_different_speeds(tmp_path: Path) -> None:
    d = derivation(tmp_path)
    out = d.out
    out.add(first_execution(d))
    assert out.state.inputs == {
        d.a.id: InputCursor(d.a_blocks[0], 9),
        d.b.id: InputCursor(d.b_blocks[0], 4),
    }
    # a moves two slices at once; b has nothing new.
    out.add(
        models.ExecuteTransform(
            query_inputs=[
                qi(d.a, d.a_blocks[0], d.a_blocks[2], 9, 29),
                qi(d.b, d.b_blocks[0], None, 4, None),
            ],
            prev_offset=14,
            prev_checkpoint=checkpoint("t1").physical_hash,
            new_data=data_slice(15, 34),
            new_checkpoint=checkpoint("t2"),
            new_watermark=hour(1),
        )
    )
    # Now only b moves, past a SetInfo block, and the output gets no rows this time.
    out.add(
        models.ExecuteTransform(
            query_inputs=[
                qi(d.a, d.a_blocks[2], None, 29, None),
                qi(d.b, d.b_blocks[0], d.b_blocks[2], 4, 9),
            ],
            prev_offset=34,
            prev_checkpoint=checkpoint("t2").physical_hash,
            new_checkpoint=checkpoint("t3"),
            new_watermark=hour(2),
        )
    )

    state = out.state
    assert state.kind is DERIVATIVE
    assert state.transform == d.transform_event()
    assert state.input_order == (d.a.id, d.b.id)
    assert state.inputs == {
        d.a.id: InputCursor(d.a_blocks[2], 29),
        d.b.id: InputCursor(d.b_blocks[2], 9),
    }
    assert state.last_offset == 34
    assert state.next_offset == 35
    assert state.watermark == hour(2)
    assert state.checkpoint == checkpoint("t3").physical_hash
    assert state.sequence_number == 5
    assert state.polling_source is None
    assert state.source_states == {}
    blocks = list(out.ds.iter_blocks())
    blocks.reverse()
    assert fold(blocks) == state
    assert Dataset(out.ds.root).state() == state


def test_disabling_sources_removes_them_from_the_state(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "ds")
    chain.add(POLLING)
    assert chain.state.polling_source == POLLING
    chain.add(models.DisablePollingSource())
    assert chain.state.polling_source is None
    # With the polling source gone a push source no longer conflicts, and back again.
    chain.add(PUSH)
    assert chain.state.push_sources == {"api": PUSH}
    chain.add(models.DisablePushSource(source_name="api"))
    assert chain.state.push_sources == {}
    chain.add(POLLING)
    assert chain.state.polling_source == POLLING
    assert Dataset(chain.ds.root).state() == chain.state


def test_an_ethereum_logs_source_without_chain_id_or_node_url_is_rejected(tmp_path: Path) -> None:
    dataset = Dataset(tmp_path / "ds")
    dataset.append_event(
        models.Seed(
            dataset_id=DatasetId.from_public_key(bytes(32)), dataset_kind=models.DatasetKind.ROOT
        ),
        Timestamp(0),
    )
    source = models.SetPollingSource(
        fetch=models.FetchStepEthereumLogs(signature="Transfer(address,address,uint256)"),
        read=models.ReadStepParquet(),
        merge=models.MergeStrategyAppend(),
    )
    with pytest.raises(
        SourceConflictError, match="an EthereumLogs source needs chainId or nodeUrl"
    ) as e:
        dataset.append_event(source, Timestamp(0))
    assert e.value.rule == "sources"
