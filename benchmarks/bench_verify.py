"""``reconcile verify --integrity``: the full check against its floor, and the incremental one.

Builds one root dataset whose chain holds N blocks (mostly ``AddData``, each naming a small
data file, with ``SetInfo``/``SetLicense`` edits among them), then prints:

- the full integrity check in blocks/s, against two floors measured in the same run:
  ``hashlib.sha3_256`` over the same block bytes already in memory (the hashing floor),
  and reading plus hashing every block and data file (the I/O floor), read as the check
  reads them (``os.open``/``os.read``); and, for scale, decoding every data block from
  memory, the parser's share of the check's CPU;
- the incremental check (``--base``) after a few blocks are appended on top of a git
  commit of the whole repository, and what the same change costs as a full check;
- the driver's peak memory (``ru_maxrss``) after the checks; the chain is built in a
  child process, so the figure is the checks' own.

    python benchmarks/bench_verify.py [--blocks 100000] [--new 3] [--repeat 2]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from reconciler.inspection.verify import changes_since, verify_change
from reconciler.odf import DatasetId, Multihash, Timestamp, block_hash, encode_block, models
from reconciler.odf.codec import decode_data_block
from reconciler.odf.integrity import inspect_dataset
from reconciler.odf.repository import Dataset, DatasetLayout, OdfRepository

NAME = "org.example.bench"
T0 = Timestamp.parse("2026-01-01T00:00:00Z")


def _opening_events() -> list[models.OdfModel]:
    return [
        models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT),
        models.SetPollingSource(
            fetch=models.FetchStepUrl(url="https://example.org/data.csv"),
            read=models.ReadStepCsv(header=True, schema=["t TIMESTAMP", "v BIGINT"]),
            merge=models.MergeStrategyLedger(primary_key=["t"]),
        ),
        models.SetDataSchema(schema_=bytes(range(200))),
        models.SetVocab(event_time_column="t"),
    ]


def _data_event(layout: DatasetLayout, i: int, offset: int) -> models.AddData:
    """An AddData over a fresh 64-byte data file, which it writes."""
    content = b"%064d" % i
    physical = Multihash.sha3_256(content)
    layout.data_file(physical).write_bytes(content)
    return models.AddData(
        prev_offset=offset - 1 if offset else None,
        new_data=models.DataSlice(
            logical_hash=Multihash.sha3_256(b"l%d" % i),
            physical_hash=physical,
            offset_interval=models.OffsetInterval(start=offset, end=offset + 99),
            size=len(content),
        ),
        new_watermark=Timestamp(1_600_000_000 + i),
        new_source_state=models.SourceState(source_name="default", kind="odf/etag", value=str(i)),
    )


def build(root: Path, blocks: int) -> None:
    """Write the chain without fsync or per-block validation (setup only: the product path
    fsyncs every file, and would take minutes over 100,000 blocks)."""
    layout = DatasetLayout(root / "odf" / NAME)
    for folder in (layout.blocks, layout.refs, layout.data):
        folder.mkdir(parents=True)
    head: Multihash | None = None
    events = _opening_events()
    offset = 0
    for seq in range(blocks):
        if seq < len(events):
            event = events[seq]
        elif seq % 20 == 7:
            event = models.SetInfo(description=f"revision {seq}", keywords=["bench", str(seq)])
        elif seq % 20 == 13:
            event = models.SetLicense(
                short_name=f"L{seq}", name="License", website_url="https://example.org"
            )
        else:
            event = _data_event(layout, seq, offset)
            offset += 100
        block = models.MetadataBlock(
            system_time=T0, prev_block_hash=head, sequence_number=seq, event=event
        )
        data = encode_block(block)
        head = block_hash(data)
        layout.block(head).write_bytes(data)
    assert head is not None
    layout.head_ref.write_text(head)


def floors(root: Path) -> tuple[float, float, float]:
    """Seconds to hash every block's bytes from memory, to read and hash every file, and
    to decode every data block from memory (what the check's parser costs by itself)."""
    dataset = root / "odf" / NAME
    paths = [*(dataset / "blocks").iterdir(), *(dataset / "data").iterdir()]
    contents = [p.read_bytes() for p in (dataset / "blocks").iterdir()]
    start = time.perf_counter()
    for data in contents:
        hashlib.sha3_256(data).digest()
    hashing = time.perf_counter() - start
    start = time.perf_counter()
    for data in contents:
        decode_data_block(data, state_fields=True)
    decoding = time.perf_counter() - start
    start = time.perf_counter()
    for path in paths:  # as the check reads them: Python's file objects cost 2x more here
        fd = os.open(path, os.O_RDONLY)
        try:
            hashlib.sha3_256(os.read(fd, os.fstat(fd).st_size)).digest()
        finally:
            os.close(fd)
    io = time.perf_counter() - start
    return hashing, io, decoding


def full_check(root: Path) -> float:
    start = time.perf_counter()
    inspection = inspect_dataset(Dataset(root / "odf" / NAME))
    seconds = time.perf_counter() - start
    assert not inspection.problems, inspection.problems
    return seconds


def commit_all(root: Path) -> None:
    def git(*args: str) -> None:  # no gc: a detached one would still be writing at cleanup
        subprocess.run(["git", "-c", "gc.auto=0", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("-c", "user.name=bench", "-c", "user.email=bench@example.org", "commit", "-qm", "base")


def append(root: Path, count: int) -> None:
    """Append ``count`` data blocks through the product path (fsync and all)."""
    dataset = Dataset(root / "odf" / NAME)
    state = dataset.state()
    for i in range(count):
        offset = state.next_offset
        content = b"new %d" % i
        source = root / f"new-{i}"
        source.write_bytes(content)
        physical, size = dataset.add_file(source)
        dataset.append_event(
            models.AddData(
                prev_offset=state.last_offset,
                new_data=models.DataSlice(
                    logical_hash=Multihash.sha3_256(b"new l%d" % i),
                    physical_hash=physical,
                    offset_interval=models.OffsetInterval(start=offset, end=offset + 9),
                    size=size,
                ),
                new_watermark=Timestamp((state.watermark or T0).seconds + 1),
                new_source_state=models.SourceState(
                    source_name="default", kind="odf/etag", value=f"new {i}"
                ),
            ),
            T0,
        )
        state = dataset.state()


def incremental_check(root: Path) -> tuple[float, int]:
    start = time.perf_counter()
    repo = OdfRepository(root / "odf")
    verdicts = [verify_change(repo, n, c) for n, c in changes_since(repo, root, "HEAD").items()]
    seconds = time.perf_counter() - start
    assert [(v.dataset, v.valid) for v in verdicts] == [(NAME, True)], verdicts
    return seconds, verdicts[0].blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=3, help="blocks appended for --base")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each figure; best kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        child = multiprocessing.get_context("fork").Process(target=build, args=(root, args.blocks))
        child.start()
        child.join()
        assert child.exitcode == 0
        os.sync()  # the setup's writeback is not the check's cost
        print(f"setup: {args.blocks:,} blocks in {time.perf_counter() - start:.1f} s")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        n = args.blocks
        measured = [floors(root) for _ in range(args.repeat)]
        hashing_s, io_s, decode_s = (min(m[i] for m in measured) for i in range(3))
        full_s = min(full_check(root) for _ in range(args.repeat))
        print(f"full --integrity:        {n / full_s:>10,.0f} blocks/s  ({full_s:.2f} s)")
        print(f"floor hashlib (memory):  {n / hashing_s:>10,.0f} blocks/s  ({hashing_s:.2f} s)")
        print(f"floor read+hash files:   {n / io_s:>10,.0f} blocks/s  ({io_s:.2f} s)")
        print(f"decoding (memory):       {n / decode_s:>10,.0f} blocks/s  ({decode_s:.2f} s)")
        print(f"ratio full/hashing floor: {full_s / hashing_s:.1f}x, full/io: {full_s / io_s:.1f}x")
        commit_all(root)
        append(root, args.new)
        inc = min(incremental_check(root) for _ in range(args.repeat))
        again_s = min(full_check(root) for _ in range(args.repeat))
        print(
            f"incremental --base HEAD, {args.new} new block(s): {inc[0] * 1000:.0f} ms "
            f"({inc[1]} block(s) checked); the full check of the same: {again_s:.2f} s"
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"driver peak memory (maxrss): {peak:.0f} MiB")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
