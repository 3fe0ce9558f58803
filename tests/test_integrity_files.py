"""A full check's files against the sweep's answer (``integrity._check_files``).

Once the sweep's child has hashed the files, an intact dataset is settled by comparing
the files the blocks name, gathered beforehand, with the files found intact. These tests
check that the comparison only ever settles what the look block by block would settle:
the same count of files, and never silence where that look finds a problem, even when
two blocks name one file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.odf import DatasetId, Multihash, Timestamp, content_sweep, models
from reconciler.odf.content_sweep import verified_files
from reconciler.odf.integrity import _check_files, _named_sizes, inspect_dataset
from reconciler.odf.repository import Dataset, OdfRepository

T0 = Timestamp.parse("2026-01-01T00:00:00Z")


def build(root: Path, sizes: list[int | None]) -> tuple[Dataset, Multihash, int]:
    """A root chain of one AddData per entry of ``sizes``: over a data file of its own
    where the entry is None, else over one file that those blocks share, with the entry
    as its size; and the shared file's hash and true size."""
    dataset = OdfRepository(root / "odf").dataset("org.example.files")
    seed = models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT)
    dataset.create(seed, T0)
    dataset.append_event(models.SetDataSchema(schema_=b"schema"), T0)
    shared_source = root / "shared"
    shared_source.write_bytes(b"records named by several blocks")
    shared, shared_size = dataset.add_file(shared_source)
    for i, size in enumerate(sizes):
        if size is None:
            source = root / f"in-{i}"
            source.write_bytes(b"records of batch %d" % i)
            physical, size = dataset.add_file(source)
        else:
            physical = shared
        data = models.DataSlice(
            logical_hash=Multihash.sha3_256(b"l%d" % i),
            physical_hash=physical,
            offset_interval=models.OffsetInterval(start=i, end=i),
            size=size,
        )
        dataset.append_event(models.AddData(prev_offset=i - 1 if i else None, new_data=data), T0)
    return dataset, shared, shared_size


def chain_of(dataset: Dataset) -> list[tuple[Multihash, models.MetadataBlock]]:
    blocks = list(dataset.iter_blocks())
    blocks.reverse()
    return blocks


def test_an_intact_dataset_is_settled_by_the_comparison_with_the_slow_looks_count(
    tmp_path: Path,
) -> None:
    dataset, _, _ = build(tmp_path, [None, None, None])
    blocks = chain_of(dataset)
    verified = verified_files(dataset.root)
    named = _named_sizes(blocks)

    assert named == ({path: verified[path] for path in named[0]}, 3)
    assert len(verified) == 4  # and the shared file, which no block names here
    assert _check_files(dataset, blocks, False, verified, named) == ([], 3)
    assert _check_files(dataset, blocks, False, verified) == ([], 3)


@pytest.mark.parametrize("sweep_from", [1, 10**9], ids=["swept", "not-swept"])
def test_two_blocks_naming_one_file_with_other_sizes_report_the_wrong_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sweep_from: int
) -> None:
    monkeypatch.setattr(content_sweep, "SWEEP_FROM", sweep_from)
    true_size = len(b"records named by several blocks")
    dataset, shared, size = build(tmp_path, [None, true_size + 1, None, true_size])
    assert size == true_size
    blocks = chain_of(dataset)
    verified = verified_files(dataset.root)
    sizes, count = named = _named_sizes(blocks)
    assert (len(sizes), count) == (3, 4)
    assert sizes[f"data/{shared}"] == true_size  # the newer block's: it alone would match

    expected = [
        f"block #3: data file {shared} has {true_size} bytes, the block says {size + 1}; "
        "its records cannot be read (ArrowInvalid)"
    ]
    problems, files = _check_files(dataset, blocks, False, verified, named)
    assert ([str(p) for p in problems], files) == (expected, 4)
    inspection = inspect_dataset(dataset)
    assert ([str(p) for p in inspection.problems], inspection.files) == (expected, 4)


def test_a_file_not_verified_is_looked_at_block_by_block(tmp_path: Path) -> None:
    dataset, _, _ = build(tmp_path, [None, None])
    blocks = chain_of(dataset)
    named = _named_sizes(blocks)
    data = blocks[-1][1].event.new_data  # type: ignore[union-attr]
    (dataset.layout.data / data.physical_hash).write_bytes(b"other bytes of batch 1")
    verified = verified_files(dataset.root)

    problems, files = _check_files(dataset, blocks, False, verified, named)

    assert files == 2
    assert [str(p) for p in problems] == [
        f"block #3: data file {data.physical_hash} has 22 bytes, the block says {data.size}; "
        "its records cannot be read (ArrowInvalid)"
    ]
