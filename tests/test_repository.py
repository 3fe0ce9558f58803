"""Datasets on disk: the kamu layout, integrity on read, compare-and-swap of the head."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconciler.odf import models
from reconciler.odf.chain import fold
from reconciler.odf.codec import encode_block
from reconciler.odf.hashing import block_hash, physical_hash
from reconciler.odf.models import DatasetKind, MetadataBlock
from reconciler.odf.multiformat import DatasetId, Multihash
from reconciler.odf.repository import (
    BlockHashMismatchError,
    BlockNotFoundError,
    Dataset,
    HeadMovedError,
    OdfRepository,
)
from reconciler.odf.timestamps import Timestamp

T0 = Timestamp.parse("2020-01-01T00:00:00Z")
DESCRIPTIONS = ["first", "second", "third"]


def at(n: int) -> Timestamp:
    return Timestamp(T0.seconds + n)


def new_dataset(root: Path) -> tuple[Dataset, list[Multihash]]:
    """Seed plus three SetInfo blocks, one second apart."""
    ds = Dataset(root)
    dataset_id = DatasetId.generate()[0]
    hashes = [
        ds.append_event(models.Seed(dataset_id=dataset_id, dataset_kind=DatasetKind.ROOT), T0)
    ]
    for i, text in enumerate(DESCRIPTIONS, start=1):
        hashes.append(ds.append_event(models.SetInfo(description=text), at(i)))
    return ds, hashes


def pending_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".pending-")]


def test_blocks_are_stored_under_their_hash_as_the_exact_manifest_bytes(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    names = sorted(p.name for p in (tmp_path / "ds" / "blocks").iterdir())
    assert names == sorted(hashes)
    for hash_, block in ds.iter_blocks():
        data = (tmp_path / "ds" / "blocks" / hash_).read_bytes()
        assert data == encode_block(block, ds.manifest_version)
        assert block_hash(data) == hash_
        assert Multihash.sha3_256(data) == hash_
        assert hash_.startswith("f1620")
        assert len(hash_) == 1 + 2 * (2 + 32)


def test_refs_head_holds_the_head_hash_without_a_newline(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    raw = (tmp_path / "ds" / "refs" / "head").read_bytes()
    assert raw == hashes[-1].encode("ascii")
    assert not raw.endswith(b"\n")
    assert ds.head() == hashes[-1]
    assert ds.exists()


def test_info_alias_holds_the_dataset_name(tmp_path: Path) -> None:
    ds, _ = new_dataset(tmp_path / "ds")
    ds.write_alias("kamu/cities")
    assert (tmp_path / "ds" / "info" / "alias").read_bytes() == b"kamu/cities"
    assert pending_files(tmp_path) == []


def test_a_new_dataset_has_no_head_and_an_empty_state(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "nothing")
    assert not ds.exists()
    assert ds.head() is None
    assert list(ds.iter_blocks()) == []
    state = ds.state()
    assert state.is_empty
    assert state.sequence_number == -1


def test_iter_blocks_walks_from_the_head_back_to_the_seed(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    blocks = list(ds.iter_blocks())
    assert [h for h, _ in blocks] == hashes[::-1]
    assert [b.sequence_number for _, b in blocks] == [3, 2, 1, 0]
    assert [b.prev_block_hash for _, b in blocks] == [hashes[2], hashes[1], hashes[0], None]
    assert isinstance(blocks[-1][1].event, models.Seed)
    assert [b.event for _, b in blocks[:-1]] == [
        models.SetInfo(description=text) for text in DESCRIPTIONS[::-1]
    ]
    # From an older head, only that block and its ancestors.
    assert [h for h, _ in ds.iter_blocks(hashes[1])] == [hashes[1], hashes[0]]


def test_reopening_a_dataset_from_disk_gives_the_same_state(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    reopened = Dataset(tmp_path / "ds")
    state = reopened.state()
    assert state == ds.state()
    assert state.head == hashes[-1]
    assert state.sequence_number == 3
    assert state.info == models.SetInfo(description="third")
    assert state.system_time == at(3)
    blocks = list(reopened.iter_blocks())
    blocks.reverse()
    assert fold(blocks) == state


def test_a_flipped_byte_in_a_block_file_is_detected_on_read(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    path = tmp_path / "ds" / "blocks" / hashes[1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    actual = block_hash(bytes(data))

    with pytest.raises(BlockHashMismatchError) as caught:
        ds.get_block(hashes[1])
    assert caught.value.expected == hashes[1]
    assert caught.value.actual == actual
    assert f"block {hashes[1]} hashes to {actual}" in str(caught.value)

    # Walking the chain and folding it fail the same way, from any reader.
    with pytest.raises(BlockHashMismatchError):
        list(ds.iter_blocks())
    with pytest.raises(BlockHashMismatchError):
        Dataset(tmp_path / "ds").state()
    # The blocks after the damaged one still read fine.
    assert ds.get_block(hashes[3]).sequence_number == 3


def test_a_missing_block_file_raises_block_not_found(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    (tmp_path / "ds" / "blocks" / hashes[2]).unlink()
    with pytest.raises(BlockNotFoundError) as caught:
        list(ds.iter_blocks())
    assert caught.value.hash == hashes[2]


def test_append_with_a_stale_expected_head_raises_head_moved_and_leaves_the_head(
    tmp_path: Path,
) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    stale = hashes[2]
    block = MetadataBlock(
        system_time=at(10),
        prev_block_hash=stale,
        sequence_number=3,
        event=models.SetInfo(description="lost update"),
    )
    before = sorted(p.name for p in (tmp_path / "ds" / "blocks").iterdir())
    with pytest.raises(HeadMovedError) as caught:
        ds.append(block, stale)
    assert caught.value.expected == stale
    assert caught.value.actual == hashes[3]
    assert f"head is {hashes[3]}, expected {stale}" in str(caught.value)
    assert ds.head() == hashes[3]
    assert (tmp_path / "ds" / "refs" / "head").read_bytes() == hashes[3].encode("ascii")
    assert sorted(p.name for p in (tmp_path / "ds" / "blocks").iterdir()) == before

    # The same through append_event, and against a second handle whose cache is behind.
    other = Dataset(tmp_path / "ds")
    assert other.state().head == hashes[3]
    ds.append_event(models.SetInfo(description="fourth"), at(4))
    with pytest.raises(HeadMovedError):
        other.append_event(models.SetInfo(description="late"), at(5), expected_head=hashes[3])
    assert other.head() == ds.head() != hashes[3]


def test_append_with_an_explicit_expected_head_extends_the_chain(tmp_path: Path) -> None:
    ds, hashes = new_dataset(tmp_path / "ds")
    new = Dataset(tmp_path / "ds").append_event(
        models.SetInfo(description="fourth"), at(4), expected_head=hashes[3]
    )
    block = ds.get_block(new)
    assert block.prev_block_hash == hashes[3]
    assert block.sequence_number == 4
    assert ds.state().head == new


def test_no_pending_file_remains_after_writes(tmp_path: Path) -> None:
    ds, _ = new_dataset(tmp_path / "ds")
    ds.write_alias("cities")
    source = tmp_path / "slice.parquet"
    source.write_bytes(b"PAR1 not really parquet PAR1")
    ds.add_file(source)
    head = ds.append_event(models.SetInfo(description="x"), at(9), expected_head=ds.head())
    with pytest.raises(HeadMovedError):
        ds.append_event(
            models.SetInfo(description="y"), at(9), expected_head=ds.get_block(head).prev_block_hash
        )
    assert pending_files(tmp_path) == []


def test_add_file_names_data_and_checkpoints_by_physical_hash(tmp_path: Path) -> None:
    ds, _ = new_dataset(tmp_path / "ds")
    content = b"PAR1 some rows PAR1"
    source = tmp_path / "incoming" / "part-0.parquet"
    source.parent.mkdir()
    source.write_bytes(content)
    expected = physical_hash(source)
    assert expected == Multihash.sha3_256(content)

    hash_, size = ds.add_file(source)
    assert (hash_, size) == (expected, len(content))
    assert (tmp_path / "ds" / "data" / expected).read_bytes() == content
    assert not source.exists()

    # The same bytes again: stored once, the new source is consumed.
    source.write_bytes(content)
    assert ds.add_file(source) == (expected, len(content))
    assert not source.exists()
    assert [p.name for p in (tmp_path / "ds" / "data").iterdir()] == [expected]

    state_file = tmp_path / "incoming" / "checkpoint.tar"
    state_file.write_bytes(b"watermarks")
    cp_hash, cp_size = ds.add_file(state_file, kind="checkpoint")
    assert (cp_hash, cp_size) == (Multihash.sha3_256(b"watermarks"), 10)
    assert (tmp_path / "ds" / "checkpoints" / cp_hash).read_bytes() == b"watermarks"
    assert pending_files(tmp_path) == []


def test_a_file_its_writer_hashed_is_stored_under_that_hash_without_being_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, _ = new_dataset(tmp_path / "ds")
    content = b"PAR1 rows a Spark task wrote and hashed PAR1"
    source = tmp_path / "slice.parquet"
    source.write_bytes(content)
    known = Multihash.sha3_256(content)

    def read_again(path: object) -> Multihash:
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr("reconciler.odf.repository.physical_hash", read_again)
    assert ds.add_file(source, known=known) == (known, len(content))
    assert (tmp_path / "ds" / "data" / known).read_bytes() == content
    assert not source.exists()


def test_a_repository_lists_the_datasets_that_have_a_head(tmp_path: Path) -> None:
    repo = OdfRepository(tmp_path / "odf")
    assert repo.names() == []
    new_dataset(tmp_path / "odf" / "cities")
    new_dataset(tmp_path / "odf" / "airports")
    (tmp_path / "odf" / "half-made" / "blocks").mkdir(parents=True)
    assert repo.names() == ["airports", "cities"]
    assert repo.dataset("cities").head() == Dataset(tmp_path / "odf" / "cities").head()


# --- Concurrent writers -------------------------------------------------------------------


WRITERS = 3
EVENTS_PER_WRITER = 40


def _append_descriptions(root: str, writer: int, count: int, barrier: Any) -> int:
    """Append ``count`` SetInfo events, retrying on HeadMovedError; returns the retries."""
    ds = Dataset(Path(root))
    barrier.wait(timeout=30)
    retries = 0
    for i in range(count):
        event = models.SetInfo(description=f"writer {writer} event {i}")
        while True:
            state = ds.state()
            assert state.system_time is not None
            system_time = max(Timestamp.now(), state.system_time)
            try:
                ds.append_event(event, system_time, expected_head=state.head)
                break
            except HeadMovedError:
                retries += 1
    return retries


def _writer_process(root: str, writer: int, count: int, barrier: Any, results: Any) -> None:
    results.put((writer, _append_descriptions(root, writer, count, barrier)))


def test_concurrent_writers_in_separate_processes_lose_no_block(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    ds = Dataset(root)
    ds.append_event(
        models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=DatasetKind.ROOT), T0
    )
    ctx = multiprocessing.get_context("fork")  # real processes; fork starts fastest
    barrier = ctx.Barrier(WRITERS)
    results = ctx.Queue()
    processes = [
        ctx.Process(
            target=_writer_process, args=(str(root), w, EVENTS_PER_WRITER, barrier, results)
        )
        for w in range(WRITERS)
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0
    reported = dict(results.get(timeout=5) for _ in processes)
    assert sorted(reported) == list(range(WRITERS))

    blocks = list(Dataset(root).iter_blocks())
    assert len(blocks) == 1 + WRITERS * EVENTS_PER_WRITER
    assert [b.sequence_number for _, b in blocks] == list(range(len(blocks)))[::-1]
    descriptions = Counter(
        b.event.description or "" for _, b in blocks if isinstance(b.event, models.SetInfo)
    )
    expected = {f"writer {w} event {i}" for w in range(WRITERS) for i in range(EVENTS_PER_WRITER)}
    assert set(descriptions) == expected
    assert set(descriptions.values()) == {1}
    # Each writer's own events are in its order.
    for w in range(WRITERS):
        mine = [
            b.event.description
            for _, b in reversed(blocks)
            if isinstance(b.event, models.SetInfo)
            and (b.event.description or "").startswith(f"writer {w} ")
        ]
        assert mine == [f"writer {w} event {i}" for i in range(EVENTS_PER_WRITER)]
    blocks.reverse()
    state = fold(blocks)
    assert state.head == Dataset(root).head()
    assert state.sequence_number == WRITERS * EVENTS_PER_WRITER
    assert pending_files(root) == []


def test_the_projection_equals_the_validated_state_of_a_long_chain(tmp_path: Path) -> None:
    dataset = Dataset(tmp_path / "ds")
    t = Timestamp.parse("2026-01-01T00:00:00Z")
    dataset.append_event(
        models.Seed(
            dataset_id=DatasetId.from_public_key(bytes(32)), dataset_kind=models.DatasetKind.ROOT
        ),
        t,
    )
    dataset.append_event(models.SetInfo(description="first"), t)
    dataset.append_event(models.SetDataSchema(schema=b"\x01"), t)
    offset = 0
    for i in range(12):
        if i % 5 == 4:
            dataset.append_event(models.SetInfo(description=f"rev {i}"), t)
        new_data = None
        if i % 3 != 2:
            new_data = models.DataSlice(
                logical_hash=Multihash.sha3_256(b"l%d" % i),
                physical_hash=Multihash.sha3_256(b"p%d" % i),
                offset_interval=models.OffsetInterval(start=offset, end=offset + 4),
                size=5,
            )
        state = dataset.state()
        dataset.append_event(
            models.AddData(
                prev_offset=state.last_offset,
                prev_checkpoint=state.checkpoint,
                new_data=new_data,
                new_checkpoint=models.Checkpoint(
                    physical_hash=Multihash.sha3_256(b"c%d" % i), size=1
                ),
                new_watermark=Timestamp(1_700_000_000 + i),
                new_source_state=models.SourceState(
                    source_name="default", kind="odf/etag", value=str(i)
                ),
            ),
            t,
        )
        offset += 5 if new_data else 0
    fresh = Dataset(tmp_path / "ds")
    assert fresh.projection() == fresh.state()
    assert fresh.projection().last_offset == 39 and fresh.projection().info == models.SetInfo(
        description="rev 9"
    )


def test_the_projection_still_checks_every_block_hash(tmp_path: Path) -> None:
    dataset = Dataset(tmp_path / "ds")
    t = Timestamp.parse("2026-01-01T00:00:00Z")
    seed = dataset.append_event(
        models.Seed(
            dataset_id=DatasetId.from_public_key(bytes(32)), dataset_kind=models.DatasetKind.ROOT
        ),
        t,
    )
    dataset.append_event(models.SetInfo(description="x"), t)
    path = dataset.layout.block(seed)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BlockHashMismatchError):
        Dataset(tmp_path / "ds").projection()
