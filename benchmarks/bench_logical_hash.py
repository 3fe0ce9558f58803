"""Benchmark the arrow-digest logical hash against a plain SHA3 of the same buffers.

Why: every data slice we write needs its logical hash, so its cost bounds how fast we
can commit data. The baseline, SHA3-256 over the table's raw Arrow buffers, is the floor
for any hash that must read every byte; the ratio tells how much the per-element
preimage construction (null markers, length prefixes, bool bytes) costs on top of it.

Usage: python benchmarks/bench_logical_hash.py [--rows N] (default 1,000,000).
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.odf.arrow_digest import arrow_digest

CITIES = ["Vancouver", "Seattle", "Portland", "San Francisco", "Los Angeles", "Kelowna"]


def build_slice(rows: int, seed: int = 42) -> pa.Table:
    """A table shaped like an ODF data slice as kamu writes it, with some nulls."""
    rng = np.random.default_rng(seed)
    start_ms = 1_700_000_000_000
    event_nulls = rng.random(rows) < 0.01
    city_nulls = rng.random(rows) < 0.05
    population_nulls = rng.random(rows) < 0.02
    city_index = rng.integers(0, len(CITIES), rows)
    cities = pa.array(np.array(CITIES, dtype=object)[city_index], pa.string(), mask=city_nulls)
    return pa.table(
        {
            "offset": pa.array(np.arange(rows, dtype=np.int64)),
            "op": pa.array(np.zeros(rows, dtype=np.int32)),
            "system_time": pa.array(np.full(rows, start_ms), pa.timestamp("ms", tz="UTC")),
            "event_time": pa.array(
                start_ms - rng.integers(0, 10**9, rows),
                pa.timestamp("ms", tz="UTC"),
                mask=event_nulls,
            ),
            "city": cities,
            "population": pa.array(rng.random(rows) * 1e6, pa.float64(), mask=population_nulls),
        }
    )


def table_buffers(table: pa.Table) -> list[pa.Buffer]:
    """Every buffer of every chunk of every column (validity, offsets, data)."""
    return [
        buffer
        for column in table.columns
        for chunk in column.chunks
        for buffer in chunk.buffers()
        if buffer is not None
    ]


def raw_buffers_sha3(table: pa.Table) -> bytes:
    """Baseline: SHA3-256 streamed over the table's raw buffers, no preimage work."""
    hasher = hashlib.sha3_256()
    for buffer in table_buffers(table):
        hasher.update(buffer)
    return hasher.digest()


def best_of(runs: int, fn: Callable[[], bytes]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the table")
    parser.add_argument("--runs", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()

    table = build_slice(args.rows)
    megabytes = sum(b.size for b in table_buffers(table)) / 1e6
    print(f"table: {args.rows:,} rows, {table.num_columns} columns, {megabytes:.1f} MB of buffers")
    print(f"schema: {', '.join(f'{f.name} {f.type}' for f in table.schema)}")

    ours = best_of(args.runs, lambda: arrow_digest(table))
    baseline = best_of(args.runs, lambda: raw_buffers_sha3(table))
    for name, seconds in (("arrow_digest", ours), ("sha3 of raw buffers", baseline)):
        print(
            f"{name:>20}: {seconds * 1e3:8.1f} ms  {args.rows / seconds / 1e6:7.2f} M rows/s"
            f"  {megabytes / seconds:7.1f} MB/s  (best of {args.runs})"
        )
    print(f"{'ratio ours/baseline':>20}: {ours / baseline:.2f}x the time")
    print(f"logical hash: f9680c00120{arrow_digest(table).hex()}")


if __name__ == "__main__":
    main()
