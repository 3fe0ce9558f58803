"""``write_sorted`` writes the file one task sorting all the rows wrote, byte for byte,
from rows sorted where they are and merged by the writer; keys Arrow does not order as
Spark does are sorted in the writing task instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)

from reconciler.odf.schema_evolution import IncompatibleSchemaError
from reconciler.writer import slice_files
from reconciler.writer.slice_files import Output, sorted_by_output, write_partitions, write_sorted

SCHEMA = pa.schema(
    [
        pa.field("t", pa.timestamp("us", "UTC")),
        pa.field("k", pa.string()),
        pa.field("x", pa.float64()),
    ]
)


def _frame(spark: SparkSession) -> DataFrame:
    """6,000 rows in 4 partitions: times with nulls and ties, keys with bytes above 0x7f,
    and a unique id to make the order total."""
    return spark.range(0, 6000, 1, 4).select(
        F.when(F.col("id") % 7 == 0, None)
        .otherwise(F.timestamp_seconds(F.col("id") % 50))
        .alias("t"),
        F.element_at(
            F.array(*[F.lit(s) for s in ["b", "é", "a", "\x7f"]]), (F.col("id") % 4 + 1).cast("int")
        ).alias("k"),
        (F.col("id") * 1.5).alias("x"),
        F.col("id"),
    )


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = slice_files._map_in_arrow

    def counted(
        frame: DataFrame, task: Callable[..., Iterator[pa.RecordBatch]], *returns: str
    ) -> DataFrame:
        calls.append(1)
        return real(frame, task, *returns)

    monkeypatch.setattr(slice_files, "_map_in_arrow", counted)
    return calls


@pytest.mark.parametrize("order", [["t", "k", "id"], ["x", "id"]])
def test_the_file_is_the_one_a_single_sorting_task_wrote(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, order: list[str]
) -> None:
    frame = _frame(spark)
    calls = _calls(monkeypatch)
    merged = write_sorted(
        frame, order, [F.col(c) for c in SCHEMA.names], [Output(tmp_path / "a.parquet", SCHEMA)]
    )[0]
    # Timestamps and strings are merged from runs (two steps); a double is not.
    assert len(calls) == (2 if order[0] == "t" else 1)
    assert not (tmp_path / "a.parquet.runs").exists()
    one = sorted_by_output(
        frame.withColumn("o", F.lit(0)), F.col("o"), 1, [F.col(c).asc_nulls_first() for c in order]
    )
    single = write_partitions(one, [Output(tmp_path / "b.parquet", SCHEMA)])[0]
    assert merged is not None and single is not None
    assert merged[0].rows == single[0].rows == 6000
    assert merged[0].physical_hash == single[0].physical_hash
    assert merged[0].logical_hash == single[0].logical_hash
    rows = pq.read_table(tmp_path / "a.parquet")
    if order[0] == "t":  # nulls first, then the keys byte by byte: "\x7f" before "é"
        assert rows.slice(0, 858)["t"].null_count == 858
        keys = rows.slice(0, 858)["k"].to_pylist()
        assert [k for i, k in enumerate(keys) if k not in keys[:i]] == ["a", "b", "\x7f", "é"]


def test_outputs_are_split_and_a_failing_one_leaves_no_file(
    tmp_path: Path, spark: SparkSession
) -> None:
    frame = spark.createDataFrame(
        [(1, 3), (0, 2), (1, 1), (0, None)], "o INT, v BIGINT"
    ).repartition(3)
    nullable = pa.schema([pa.field("v", pa.int64())])
    outputs = [Output(tmp_path / f"{i}.parquet", nullable) for i in range(3)]
    written = write_sorted(frame, ["v"], [F.col("v")], outputs, F.col("o"))
    assert [w[0].rows if w else None for w in written] == [2, 2, None]
    assert [pq.read_table(o.path)["v"].to_pylist() for o in outputs[:2]] == [[None, 2], [1, 3]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.parquet", "1.parquet"]

    required = pa.schema([pa.field("v", pa.int64(), nullable=False)])
    (tmp_path / "f").mkdir()
    failing = [
        Output(tmp_path / "f" / "0.parquet", required),
        Output(tmp_path / "f" / "1.parquet", nullable),
    ]
    with pytest.raises(IncompatibleSchemaError, match="column 'v' is NOT NULL but 1 row"):
        write_sorted(frame, ["v"], [F.col("v")], failing, F.col("o"))
    assert list((tmp_path / "f").iterdir()) == []
