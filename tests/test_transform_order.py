"""A transform's inputs are read in one partition in offset order, without a sort, and
its results do not depend on how Spark splits, spreads or shuffles the work: not even
a floating-point sum, whose value depends on the order of its additions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gitops_repo import events, rows, slices
from pyspark.sql import SparkSession
from transform_repo import PRICES, derivative, make_repo, run

from reconciler.apply.outcome import Status
from reconciler.engine.stored_rows import MOST_SCANS, rows_in_one_partition
from reconciler.inspection.verify import verify_dataset
from reconciler.odf import models
from reconciler.odf.arrow_schema import encode_arrow_schema
from reconciler.transform.one_task import session_conf

PARTITIONINGS: list[dict[str, str]] = [
    {},
    {"spark.sql.shuffle.partitions": "1", "spark.sql.leafNodeDefaultParallelism": "1"},
    {
        "spark.sql.shuffle.partitions": "7",
        "spark.sql.leafNodeDefaultParallelism": "8",
        "spark.sql.files.maxPartitionBytes": "2048",
        "spark.sql.files.openCostInBytes": "0",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    },
]
"""The test session's settings, then one core's worth of everything, then many small
splits and shuffle partitions (which adaptive execution would otherwise merge back into
one, at the size of these tests)."""


def slice_files(folder: Path, sizes: list[int]) -> tuple[list[Path], bytes]:
    """Slices of ``sizes`` rows, consecutive offsets, small row groups (so a file splits
    into many scan partitions); a later slice is larger, so reading them as one scan
    would start with it. Also their schema, as a SetDataSchema holds it."""
    files, start = [], 0
    for i, size in enumerate(sizes):
        table = pa.table({"offset": pa.array(range(start, start + size), pa.int64())})
        table = table.append_column("x", pa.array([o * 0.5 for o in table["offset"].to_pylist()]))
        path = folder / f"{i}.parquet"
        pq.write_table(table, path, row_group_size=200)
        files.append(path)
        start += size
    return files, encode_arrow_schema(table.schema)


@pytest.mark.parametrize("conf", PARTITIONINGS)
def test_inputs_are_one_partition_in_offset_order_however_the_files_split(
    tmp_path: Path, spark: SparkSession, conf: dict[str, str]
) -> None:
    files, schema = slice_files(tmp_path, [1_000, 3_000, 2_000])
    with session_conf(spark, conf):
        if "spark.sql.files.maxPartitionBytes" in conf:  # the case this test is about
            assert spark.read.parquet(str(files[1])).rdd.getNumPartitions() > 4
        whole = rows_in_one_partition(spark, schema, files, "offset")
        assert whole.rdd.getNumPartitions() == 1
        assert [r.offset for r in whole.collect()] == list(range(6_000))
        part = rows_in_one_partition(spark, schema, files[1:], "offset", (1_500, 5_499))
        assert [(r.offset, r.x) for r in part.collect()] == [
            (o, o * 0.5) for o in range(1_500, 5_500)
        ]


def test_many_slices_are_sorted_into_one_partition(tmp_path: Path, spark: SparkSession) -> None:
    """Beyond MOST_SCANS files, one scan of them all, sorted by offset."""
    sizes = [10 * (1 + i % 3) for i in range(MOST_SCANS + 1)]
    files, schema = slice_files(tmp_path, sizes)
    with session_conf(spark, PARTITIONINGS[2]):
        frame = rows_in_one_partition(spark, schema, files, "offset")
        assert frame.rdd.getNumPartitions() == 1
        assert [r.offset for r in frame.collect()] == list(range(sum(sizes)))


VALUES = [((i * 7919) % 1000 - 500) * 10.0 ** ((i * 31) % 17 - 8) for i in range(3_000)]
"""Prices from 1e-8 to 1e8 in size, of both signs: their sum depends on the order of
its additions in the last bits."""


def price_rows(values: list[float], first: int) -> str:
    """CSV rows of ``values`` on three days, with ids from ``first`` on."""
    return "".join(f"2020-01-0{1 + i % 3},p{first + i},{v!r}\n" for i, v in enumerate(values))


def test_a_floating_point_aggregate_is_the_same_however_spark_partitions_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    hashes = []
    for n, conf in enumerate(PARTITIONINGS):
        with session_conf(spark, conf):
            repo = make_repo(tmp_path / str(n))
            for k, part in enumerate((VALUES[:1_800], VALUES[1_800:]), start=1):
                csv = "day,id,price\n" + price_rows(part, 0 if k == 1 else 1_800)
                (repo.root / "prices" / f"{k}.csv").write_text(csv)
                wrote = Status.CREATED if k == 1 else Status.UPDATED
                assert run(repo, f"2026-01-0{k}T00:00:00Z")[PRICES] == (wrote, len(part))
            query = "SELECT day, count(*) AS n, sum(price) AS total, avg(price) AS mean FROM `{}`"
            derivative(repo, "org.example.sums", [PRICES], query.format(PRICES) + " GROUP BY day")
            derivative(
                repo,
                "org.example.big",
                [PRICES],
                f"SELECT day, id, price FROM `{PRICES}` WHERE price > 1",
            )
            outcome = run(repo, "2026-01-03T00:00:00Z")
            assert outcome["org.example.sums"] == (Status.CREATED, 3)
            assert outcome["org.example.big"] == (Status.CREATED, sum(v > 1 for v in VALUES))
            found = []
            for name in ("org.example.sums", "org.example.big"):
                (execute,) = [
                    e
                    for e in events(repo.odf.dataset(name))
                    if isinstance(e, models.ExecuteTransform)
                ]
                assert execute.new_data is not None
                found.append(execute.new_data.logical_hash)
            hashes.append(found)
        stored = [r for t in slices(repo.odf.dataset(PRICES)) for r in rows(t, "system_time")]
        assert [r[0] for r in stored] == list(range(len(VALUES)))  # offsets, in order
        # Each day's prices folded left to right in offset order, as one task does.
        expected = []
        for day in sorted({r[2] for r in stored}):
            prices = [r[4] for r in stored if r[2] == day]
            total = 0.0
            for price in prices:
                total += price
            expected.append((day, len(prices), total, total / len(prices)))
        (sums,) = slices(repo.odf.dataset("org.example.sums"))
        assert rows(sums, "offset", "op", "system_time") == expected
        # A filter keeps its input's order.
        (kept,) = slices(repo.odf.dataset("org.example.big"))
        assert kept.column("price").to_pylist() == [r[4] for r in stored if r[4] > 1]
        ids = repo.odf.names_by_id()
        verdict = verify_dataset(repo.odf, "org.example.sums", ids, lambda: spark)
        assert (verdict.valid, verdict.replayed) == (True, 1), verdict.problems
    assert hashes[1:] == hashes[:1] * (len(PARTITIONINGS) - 1)
