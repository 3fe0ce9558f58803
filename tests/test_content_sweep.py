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
from reconciler.odf.content_sweep import ContentSweep, verified_files
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

    sweep = ContentSweep.start(dataset.root, threshold=1)
    assert sweep.pid is not None  # a child was forked
    assert sweep.result() == expected
    assert sweep.pid is None


def test_below_the_threshold_no_child_is_made_and_the_answer_is_empty(tmp_path: Path) -> None:
    dataset = build(tmp_path, 3)
    sweep = ContentSweep.start(dataset.root, threshold=6)  # 3 data + 2 checkpoint files
    assert (sweep.pid, sweep.result()) == (None, {})
    assert ContentSweep.start(dataset.root, threshold=5).result() != {}


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
