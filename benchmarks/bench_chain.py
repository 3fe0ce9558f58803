"""Encode + hash and decode + verify a metadata chain of mixed block kinds.

Prints blocks/s for each direction and the ratio to plain ``hashlib.sha3_256`` over the
same bytes, measured in the same run, so figures compare across machines.

    python benchmarks/bench_chain.py [--blocks 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import time

from reconciler.odf import (
    DatasetId,
    Multihash,
    Timestamp,
    block_hash,
    decode_block,
    encode_block,
    models,
)
from reconciler.odf.chain import ChainState, validate_append


def _events(n: int) -> list[models.OdfModel]:
    """A valid root chain: sources and schema first, then mostly data with metadata edits."""
    events: list[models.OdfModel] = [
        models.Seed(
            dataset_id=DatasetId.from_public_key(bytes(32)), dataset_kind=models.DatasetKind.ROOT
        ),
        models.SetPollingSource(
            fetch=models.FetchStepUrl(url="https://example.org/data.csv"),
            read=models.ReadStepCsv(header=True, schema=["t TIMESTAMP", "v BIGINT"]),
            merge=models.MergeStrategyLedger(primary_key=["t"]),
        ),
        models.SetDataSchema(schema=bytes(range(200))),
        models.SetVocab(event_time_column="t"),
    ]
    offset = 0
    for i in range(n - len(events)):
        if i % 20 == 7:
            events.append(models.SetInfo(description=f"revision {i}", keywords=["bench", str(i)]))
        elif i % 20 == 13:
            events.append(
                models.SetLicense(
                    short_name=f"L{i}", name="License", website_url="https://example.org"
                )
            )
        else:
            events.append(
                models.AddData(
                    prev_checkpoint=Multihash.sha3_256(b"%d" % (i - 1)) if i else None,
                    prev_offset=offset - 1 if offset else None,
                    new_data=models.DataSlice(
                        logical_hash=Multihash.sha3_256(b"l%d" % i),
                        physical_hash=Multihash.sha3_256(b"p%d" % i),
                        offset_interval=models.OffsetInterval(start=offset, end=offset + 99),
                        size=4096,
                    ),
                    new_checkpoint=models.Checkpoint(
                        physical_hash=Multihash.sha3_256(b"%d" % i), size=10
                    ),
                    new_watermark=Timestamp(1_600_000_000 + i),
                    new_source_state=models.SourceState(
                        source_name="default", kind="odf/etag", value=str(i)
                    ),
                )
            )
            offset += 100
    return events


def _fix_checkpoints(events: list[models.OdfModel]) -> list[models.OdfModel]:
    """Chain each AddData's prevCheckpoint to the last checkpoint actually written."""
    fixed, last = [], None
    for event in events:
        if isinstance(event, models.AddData):
            event = event.model_copy(update={"prev_checkpoint": last})
            assert event.new_checkpoint is not None
            last = event.new_checkpoint.physical_hash
        fixed.append(event)
    return fixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=100_000)
    args = parser.parse_args()
    events = _fix_checkpoints(_events(args.blocks))
    t0 = Timestamp.parse("2020-01-01T00:00:00Z")

    start = time.perf_counter()
    encoded: list[tuple[Multihash, bytes]] = []
    prev = None
    for seq, event in enumerate(events):
        block = models.MetadataBlock(
            system_time=t0, prev_block_hash=prev, sequence_number=seq, event=event
        )
        data = encode_block(block)
        prev = block_hash(data)
        encoded.append((prev, data))
    encode_s = time.perf_counter() - start

    start = time.perf_counter()
    state = ChainState()
    for expected, data in encoded:
        if block_hash(data) != expected:
            raise SystemExit(f"hash mismatch at {expected}")
        block = decode_block(data)
        validate_append(state, block)
        state = state.apply(block, expected)
    verify_s = time.perf_counter() - start

    start = time.perf_counter()
    for _, data in encoded:
        hashlib.sha3_256(data).digest()
    baseline_s = time.perf_counter() - start

    n = len(encoded)
    total = sum(len(d) for _, d in encoded)
    kinds = sorted({type(e).__name__ for e in events})
    print(f"blocks: {n:,} ({total / n:.0f} bytes on average; kinds: {', '.join(kinds)})")
    print(f"encode + hash:            {n / encode_s:>12,.0f} blocks/s  ({encode_s:.2f} s)")
    print(f"decode + verify (rules):  {n / verify_s:>12,.0f} blocks/s  ({verify_s:.2f} s)")
    print(f"baseline hashlib.sha3_256:{n / baseline_s:>12,.0f} blocks/s  ({baseline_s:.3f} s)")
    print(
        f"ratio encode/baseline: {encode_s / baseline_s:.1f}x, "
        f"verify/baseline: {verify_s / baseline_s:.1f}x"
    )
    print(f"final chain: seq {state.sequence_number}, last offset {state.last_offset}")


if __name__ == "__main__":
    main()
