"""The merge of sorted runs orders rows exactly as one sort of all of them would:
ascending, nulls first, strings byte by byte; it holds a chunk of each run at a time;
and its output comes in tables whose sizes depend on the rows alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from reconciler.writer import sorted_runs
from reconciler.writer.sorted_runs import merge_runs, mergeable, rechunked, write_runs


def _runs(tmp_path: Path, table: pa.Table, parts: int, keys: list[str], seed: int) -> list[Path]:
    """``table`` dealt at random into ``parts`` runs, each sorted by ``keys`` and written
    in batches of 1,000 rows, as Spark's tasks would."""
    deal = np.random.default_rng(seed).integers(0, parts, table.num_rows)
    order = [(k, "ascending", "at_start") for k in keys]
    paths: list[Path] = []
    for part in range(parts):
        rows = table.filter(pa.array(deal == part))
        rows = rows.take(pc.sort_indices(rows, options=pc.SortOptions(order)))
        written = write_runs(rows.to_batches(max_chunksize=1000), "out", tmp_path, f"{part:05d}")
        paths += [Path(path) for _, path, _ in written]
    return sorted(paths)


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    times = rng.integers(0, 50, n).astype("datetime64[ms]")
    return pa.table(
        {
            "t": pa.array(times, mask=rng.random(n) < 0.05),
            "s": pa.array(
                rng.choice(["a", "b", "é", "\x7f", "ab", ""], n), mask=rng.random(n) < 0.1
            ),
            "id": pa.array(np.arange(n)),
            "out": pa.array(np.zeros(n, dtype=np.int32)),
        }
    )


@pytest.mark.parametrize("parts", [1, 2, 5])
def test_the_merge_gives_the_order_of_one_sort(tmp_path: Path, parts: int, monkeypatch) -> None:
    monkeypatch.setattr(sorted_runs, "CHUNK_ROWS", 700)  # many rounds, and chunks of 1 batch
    table = _table(20_000, seed=parts)
    keys = ["t", "s", "id"]
    merged = pa.concat_tables(merge_runs(_runs(tmp_path, table, parts, keys, seed=7), keys))
    expected = table.take(
        pc.sort_indices(table, options=pc.SortOptions([(k, "ascending", "at_start") for k in keys]))
    )
    assert merged.num_rows == 20_000
    assert merged["id"].to_pylist() == expected["id"].to_pylist()
    # Nulls first, then strings byte by byte: "\x7f" before "é" (0xc3 0xa9).
    first = merged.slice(0, 5)["t"].to_pylist()
    assert first == [None] * 5
    values = [v for v in merged.filter(pc.equal(merged["t"], merged["t"][-1]))["s"].to_pylist()]
    seen = [v for i, v in enumerate(values) if v not in values[:i]]
    assert seen == [None, "", "a", "ab", "b", "\x7f", "é"]


def test_runs_are_split_by_output_and_counted(tmp_path: Path) -> None:
    batch = pa.record_batch({"out": pa.array([0, 0, 1, 1, 1, 3], pa.int32()), "v": list(range(6))})
    written = write_runs(iter([batch.slice(0, 3), batch.slice(3)]), "out", tmp_path, "00002")
    assert [(o, Path(p).name, n) for o, p, n in written] == [
        (0, "00002-0.arrow", 2),
        (1, "00002-1.arrow", 3),
        (3, "00002-3.arrow", 1),
    ]
    merged = pa.concat_tables(merge_runs([tmp_path / "00002-1.arrow"], ["v"]))
    assert merged["v"].to_pylist() == [2, 3, 4]


def test_no_runs_merge_to_nothing() -> None:
    assert list(merge_runs([], ["v"])) == []


def test_rechunked_cuts_at_fixed_row_counts() -> None:
    tables = [pa.table({"v": list(range(a, b))}) for a, b in [(0, 3), (3, 4), (4, 11), (11, 12)]]
    chunks = list(rechunked(tables, 4))
    assert [c.num_rows for c in chunks] == [4, 4, 4]
    assert pa.concat_tables(chunks)["v"].to_pylist() == list(range(12))
    assert [c.num_rows for c in rechunked([pa.table({"v": [1]})], 4)] == [1]


def test_only_keys_arrow_orders_as_spark_are_merged() -> None:
    assert mergeable([pa.int32(), pa.timestamp("us", "UTC"), pa.string(), pa.date32()])
    assert mergeable([pa.bool_(), pa.decimal128(10, 2), pa.binary()])
    assert not mergeable([pa.int64(), pa.float64()])  # NaN: last in Spark, apart in Arrow
    assert not mergeable([pa.struct([("a", pa.int8())])])
