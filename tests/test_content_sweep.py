"""The content sweep: a full integrity check hashes a long chain's data and checkpoint
files in a forked child, against their own names, while it folds the blocks.

The sweep only ever spares the parent a second look at a file; these tests check that
what it reports is exactly the intact files, and that a check with the sweep finds
word for word what the check without it finds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.odf import DatasetId, Multihash, Timestamp, content_sweep, models
from reconciler.odf.codec import decode_block, decode_data_block
from reconciler.odf.content_sweep import ContentSweep, verified_files
from reconciler.odf.data_step import DataBlock, SourceStateFields
from reconciler.odf.integrity import inspect_dataset
from reconciler.odf.repository import Dataset, OdfRepository

T0 = Timestamp.parse("2026-01-01T00:00:00Z")


def build(root: Path, batches: int) -> Dataset:
    """A root chain with ``batches`` AddData blocks, each over a fresh data file, the
    last two with checkpoints."""
    dataset = OdfRepository(root / "odf").dataset("org.example.sweep")
    seed = models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT)
    dataset.create(seed, T0)
    dataset.append_event(models.SetDataSchema(schema_=b"schema"), T0)
    checkpoint = None
    for i in range(batches):
        source = root / f"in-{i}"
        source.write_bytes(b"records of batch %d" % i)
        physical, size = dataset.add_file(source)
        new_checkpoint = None
        if i >= batches - 2:
            cp_source = root / f"cp-{i}"
            cp_source.write_bytes(b"checkpoint %d" % i)
            cp_hash, cp_size = dataset.add_file(cp_source, "checkpoints")
            new_checkpoint = models.Checkpoint(physical_hash=cp_hash, size=cp_size)
        dataset.append_event(
            models.AddData(
                prev_checkpoint=checkpoint,
                prev_offset=i - 1 if i else None,
                new_data=models.DataSlice(
                    logical_hash=Multihash.sha3_256(b"l%d" % i),
                    physical_hash=physical,
                    offset_interval=models.OffsetInterval(start=i, end=i),
                    size=size,
                ),
                new_checkpoint=new_checkpoint,
            ),
            T0,
        )
        checkpoint = new_checkpoint.physical_hash if new_checkpoint else None
    return dataset


def data_files(dataset: Dataset) -> list[Path]:
    return sorted(dataset.layout.data.iterdir())


def test_the_sweep_reports_exactly_the_files_whose_bytes_hash_to_their_names(
    tmp_path: Path,
) -> None:
    dataset = build(tmp_path, 4)
    files = data_files(dataset)
    files[0].write_bytes(b"changed")  # bytes no longer hash to the name
    (dataset.layout.data / "not-a-hash").write_bytes(b"x")
    (dataset.layout.data / "f1620abcd").mkdir()  # a folder named like a hash
    expected = {f"data/{p.name}": p.stat().st_size for p in files[1:]} | {
        f"checkpoints/{p.name}": p.stat().st_size
        for p in sorted(dataset.layout.checkpoints.iterdir())
    }
    assert len(expected) == 5
    assert verified_files(dataset.root) == expected

    sweep = ContentSweep.start(dataset.root, blocks=False, threshold=1)
    assert sweep.pid is not None  # a child was forked
    assert sweep.files() == expected
    assert sweep.pid is None


def test_below_the_threshold_no_child_is_made_and_the_answer_is_empty(tmp_path: Path) -> None:
    dataset = build(tmp_path, 3)
    sweep = ContentSweep.start(dataset.root, threshold=6)  # 5 blocks
    assert (sweep.pid, sweep.block_names, sweep.blocks(), sweep.files()) == (None, [], {}, {})
    assert ContentSweep.start(dataset.root, blocks=False, threshold=5).files() != {}


@pytest.mark.parametrize("sweep_from", [1, 10**9], ids=["swept", "not-swept"])
def test_a_full_check_finds_the_same_problems_with_and_without_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sweep_from: int
) -> None:
    monkeypatch.setattr(content_sweep, "SWEEP_FROM", sweep_from)
    dataset = build(tmp_path, 5)
    assert inspect_dataset(dataset).problems == []

    by_offset = {
        block.event.new_data.offset_interval.start: block
        for _, block in dataset.iter_blocks()
        if isinstance(block.event, models.AddData) and block.event.new_data is not None
    }
    damaged = by_offset[1].event.new_data
    missing = by_offset[3].event.new_data
    assert damaged is not None and missing is not None
    (dataset.layout.data / damaged.physical_hash).write_bytes(b"records of batch 9")
    os.remove(dataset.layout.data / missing.physical_hash)
    checkpoint = by_offset[4].event.new_checkpoint
    assert checkpoint is not None
    (dataset.layout.checkpoints / checkpoint.physical_hash).write_bytes(b"checkpoint 3")

    inspection = inspect_dataset(dataset)
    assert [str(p) for p in inspection.problems] == [
        f"block #3: data file bytes do not match physical hash {damaged.physical_hash}; "
        "its records cannot be read (ArrowInvalid)",
        f"block #5: data file {missing.physical_hash} is missing",
        f"block #6: checkpoint file bytes do not match physical hash {checkpoint.physical_hash}",
    ]
    assert inspection.files == 7


@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_the_intact_blocks_are_parsed_by_the_child_and_the_parent_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(content_sweep, "CHUNK", chunk)  # the forked child inherits it
    monkeypatch.setattr(content_sweep, "FILE_CHUNK", chunk)
    dataset = build(tmp_path, 6)
    blocks = sorted(dataset.layout.blocks.iterdir())
    assert len(blocks) == 8  # Seed, SetDataSchema, 6 AddData
    expected = {path.name: decode_block(path.read_bytes()) for path in blocks}
    damaged = next(p for p in blocks if isinstance(expected[p.name].event, models.AddData))
    damaged.write_bytes(damaged.read_bytes() + b"\x00")
    del expected[damaged.name]
    (dataset.layout.blocks / "not-a-hash").write_bytes(b"x")

    sweep = ContentSweep.start(dataset.root, threshold=1)
    assert sweep.pid is not None
    assert len(sweep.block_names) == 9
    parsed = sweep.blocks()
    assert sorted(parsed) == sorted(expected)
    for name, block in parsed.items():  # data blocks as tuples, the others as models
        if isinstance(block, DataBlock):
            assert block == decode_data_block(blocks[0].parent.joinpath(name).read_bytes())
        else:
            assert block == expected[name]
            assert isinstance(block.event, models.Seed | models.SetDataSchema)
    assert sum(isinstance(b, DataBlock) for b in parsed.values()) == 5
    assert sorted(sweep.files()) == sorted(
        [f"data/{p.name}" for p in data_files(dataset)]
        + [f"checkpoints/{p.name}" for p in dataset.layout.checkpoints.iterdir()]
    )
    assert sweep.pid is None


@pytest.mark.parametrize("chunk", [1, 1024])
def test_both_processes_give_source_states_as_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The parent's own blocks and the child's rebuilt ones alike, so that the fold finds
    one form: the codec's block with its source state as ``SourceStateFields``."""
    monkeypatch.setattr(content_sweep, "CHUNK", chunk)  # the forked child inherits it
    dataset = build(tmp_path, 0)
    for i in range(4):
        state = models.SourceState(source_name="default", kind="odf/etag", value=f"v{i}")
        dataset.append_event(models.AddData(new_source_state=state), T0)

    sweep = ContentSweep.start(dataset.root, files=False, threshold=1)
    assert sweep.pid is not None
    parsed = sweep.blocks()
    sweep.close()

    states = []
    for name, block in parsed.items():
        if isinstance(block, DataBlock):
            codec = decode_data_block(read(dataset, name))
            assert codec is not None
            assert block == codec.with_state_fields()
            assert type(block.step.new_source_state) is SourceStateFields
            states.append(block.step.new_source_state.value)
    assert sorted(states) == ["v0", "v1", "v2", "v3"]


def test_two_ends_give_every_chunk_to_one_side_or_both_never_to_neither() -> None:
    """The chunks taken from the front and from the back, interleaved every way a
    process can run ahead of the other: every chunk is taken, and only where the two
    meet can one be taken twice."""
    for count in (0, 1, 2, 7):
        for front_steps in range(count + 2):
            ends = content_sweep.TwoEnds(count)
            front, back = ends.from_front(), ends.from_back()
            mine = [index for _, index in zip(range(front_steps), front, strict=False)]
            theirs = list(back)
            mine += list(front)
            assert sorted(set(mine) | set(theirs)) == list(range(count))
            assert mine == list(range(len(mine)))
            assert theirs == list(range(count - 1, count - 1 - len(theirs), -1))
            assert len(set(mine) & set(theirs)) <= 1


@pytest.mark.parametrize("sweep_from", [1, 10**9], ids=["swept", "not-swept"])
def test_a_damaged_block_is_found_the_same_with_and_without_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sweep_from: int
) -> None:
    monkeypatch.setattr(content_sweep, "SWEEP_FROM", sweep_from)
    dataset = build(tmp_path, 5)
    hashes = [h for h, _ in dataset.iter_blocks()]
    (dataset.layout.blocks / ("f1620" + "0" * 64)).write_bytes(b"a stray file named like a block")
    assert inspect_dataset(dataset).problems == []

    damaged = dataset.layout.block(hashes[2])  # an AddData in the middle of the chain
    damaged.write_bytes(damaged.read_bytes() + b"\x00")
    actual = Multihash.sha3_256(damaged.read_bytes())
    assert [str(p) for p in inspect_dataset(dataset).problems] == [
        f"block {hashes[2]} was changed: its bytes hash to {actual}"
    ]


def test_a_child_that_fails_costs_time_never_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(block: object) -> object:
        raise RuntimeError("the child cannot send its answer")

    monkeypatch.setattr(content_sweep, "to_plain", broken)  # the forked child inherits it
    dataset = build(tmp_path, 5)
    sweep = ContentSweep.start(dataset.root, threshold=1)
    assert sweep.pid is not None
    parsed = sweep.blocks()  # what the parent took: the child failed at its first chunk
    assert set(parsed) <= set(sweep.block_names)
    for name, block in parsed.items():
        data = read(dataset, name)
        assert block == (decode_data_block(data) or decode_block(data))
    assert sweep.files() == verified_files(dataset.root)  # the parent hashed them all
    assert sweep.pid is None

    monkeypatch.setattr(content_sweep, "SWEEP_FROM", 1)
    first = data_files(dataset)[0]
    first.write_bytes(b"records of batch 9")  # the same size, other bytes
    seq = _naming_block(dataset, first.name)
    assert [str(p) for p in inspect_dataset(dataset).problems] == [
        f"block #{seq}: data file bytes do not match physical hash {first.name}; "
        "its records cannot be read (ArrowInvalid)"
    ]


def read(dataset: Dataset, name: str) -> bytes:
    return (dataset.layout.blocks / name).read_bytes()


def _naming_block(dataset: Dataset, physical: str) -> int:
    for _, block in dataset.iter_blocks():
        event = block.event
        data = event.new_data if isinstance(event, models.AddData) else None
        if data is not None and data.physical_hash == physical:
            return block.sequence_number
    raise AssertionError(physical)
