"""A Snapshot run writes its slice and its checkpoint in one Spark query, from one pass
over the merge, with no cache; the files are the very ones the two queries before
wrote (one for the slice, then one sorting the state again for the checkpoint).

Also the engine's side of it: ``write_partitions`` writes partition ``i`` as output
``i``, one task each, and keeps all of them or none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)

from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import Dataset, OdfRepository
from reconciler.odf.schema_evolution import IncompatibleSchemaError
from reconciler.writer import slice_files
from reconciler.writer.slice_files import Output, sorted_by_output, write_partitions

SYSTEM_TIME = Timestamp.parse("2026-02-01T12:00:00Z")
HEADER = "event_time,id,qty\n"
# Each file is a full snapshot: a NULL key and an event time left for the system time to
# fill; then one key changed, one gone, one new; the same again (nothing changes); an
# empty snapshot (every key retracted: an empty state); one key again.
FILES = [
    HEADER + "2026-01-01T00:00:00Z,b,2\n,a,1\n2026-01-03T00:00:00Z,,7\n2026-01-04T00:00:00Z,c,3\n",
    HEADER + "2026-01-05T00:00:00Z,a,10\n2026-01-04T00:00:00Z,c,3\n2026-01-06T00:00:00Z,d,4\n"
    "2026-01-03T00:00:00Z,,7\n",
    HEADER + "2026-01-05T00:00:00Z,a,10\n2026-01-04T00:00:00Z,c,3\n2026-01-06T00:00:00Z,d,4\n"
    "2026-01-03T00:00:00Z,,7\n",
    HEADER,
    HEADER + "2026-01-07T00:00:00Z,e,5\n",
]
# What the two-query writer committed for FILES, block by block: the slice (logical
# hash, physical hash, first and last offset, size) and the checkpoint (hash, size).
TWO_QUERIES = [
    (
        (
            "f9680c00120059619c006755ce682ef38c8ae925f440699a963191cf4da7ff085cb4cd0f519",
            "f1620a199fdc9a38499a659aef25a9248745fa8d8bb28cdaab746d4dd8168ca2d0b48",
            0,
            3,
            1801,
        ),
        ("f16206b9a51158681e664a38efa16664ffc64baca4199f054f7b3aabb29faa275e9c5", 1235),
    ),
    (
        (
            "f9680c00120fd9562ab44f3e7a33c01290f46fa83f9a19410a1a070b6187f3ae741ce9c44d3",
            "f1620224798f1f4f7f8bfca19463bcb77f145359f5fd960986a00ec0e7ef2a499d68e",
            4,
            7,
            1821,
        ),
        ("f16202868392cdbb2025485862c7eaab5644ba35d78f2ebe90313253b02bb463817cb", 1235),
    ),
    (None, ("f16202868392cdbb2025485862c7eaab5644ba35d78f2ebe90313253b02bb463817cb", 1235)),
    (
        (
            "f9680c0012054001ef0b64d7f6eac4687615cc68108b62b9c32f48874101f09d32f961e3e75",
            "f1620b75d6fd988d8b90f5583ef4c906248d5d865292b23507f18207a42cf849c4de8",
            8,
            11,
            1803,
        ),
        ("f16202c1cf2bcb42de83c4596eac85b91295469cf92a18e73ce8edacf87400d78f914", 823),
    ),
    (
        (
            "f9680c001201edacdd292aec2b85361d29d7b23cf5c98e0350ae6c2961ce3390bb488305667",
            "f1620f1ea13f7f39023dd730fadf8d763db80e3009140bc47422342ef2a4963655399",
            12,
            12,
            1735,
        ),
        ("f1620e2d29587fd212e6a337d99fe89ceedaae96f63b061301ee06b7e8c5bc0fc2911", 1185),
    ),
]


def _snapshot_dataset(root: Path) -> Dataset:
    dataset = OdfRepository(root / "odf").dataset("org.example.stock")
    dataset_id = DatasetId.from_public_key(bytes(range(32)))
    seed = models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT)
    dataset.append_event(seed, SYSTEM_TIME)
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path=str(root / "in" / "*.csv")),
        read=models.ReadStepCsv(
            schema=["event_time TIMESTAMP", "id STRING", "qty BIGINT"], header=True
        ),
        merge=models.MergeStrategySnapshot(primary_key=["id"]),
    )
    dataset.append_event(source, SYSTEM_TIME)
    return dataset


def _committed(event: models.AddData) -> tuple[Any, Any]:
    data, checkpoint = event.new_data, event.new_checkpoint
    assert checkpoint is not None
    sliced = None
    if data is not None:
        interval = data.offset_interval
        sliced = (data.logical_hash, data.physical_hash, interval.start, interval.end, data.size)
    return sliced, (checkpoint.physical_hash, checkpoint.size)


def test_a_snapshot_run_writes_both_files_in_one_query_as_two_queries_did(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries: list[int] = []
    real = slice_files.map_in_arrow

    def counted(
        frame: DataFrame, task: Callable[..., Iterator[pa.RecordBatch]], *returns: str
    ) -> DataFrame:
        queries[-1] += 1
        return real(frame, task, *returns)

    monkeypatch.setattr(slice_files, "map_in_arrow", counted)
    (tmp_path / "in").mkdir()
    dataset = _snapshot_dataset(tmp_path)
    context = IngestContext(spark=lambda: spark, base_dir=tmp_path, env={}, system_time=SYSTEM_TIME)
    tracker = spark.sparkContext.statusTracker()
    jobs = []
    for i, text in enumerate(FILES):
        (tmp_path / "in" / f"stock-{i}.csv").write_text(text)
        queries.append(0)
        before = set(tracker.getJobIdsForGroup(None))
        pull_polling(dataset, context)
        jobs.append(len(set(tracker.getJobIdsForGroup(None)) - before))

    adds = [b.event for _, b in dataset.iter_blocks() if isinstance(b.event, models.AddData)]
    assert [_committed(e) for e in reversed(adds)] == TWO_QUERIES
    assert queries == [1, 1, 1, 1, 1]
    # The first run's query is two stages, each a Spark job under adaptive execution:
    # reading the CSV (shuffled by output), then writing the two files, one task each.
    # Before, caching the frame and sorting the state again for the checkpoint took 5.
    assert jobs[0] == 2
    # The states of the 2nd, 4th (empty) and 5th runs: by key, nulls first, a row that
    # did not change keeping its old event time.
    states = [
        pq.read_table(dataset.layout.checkpoint_file(TWO_QUERIES[i][1][0])).to_pylist()
        for i in (1, 3, 4)
    ]
    assert [[(r["id"], r["qty"], r["event_time"].isoformat()) for r in s] for s in states] == [
        [
            (None, 7, "2026-01-03T00:00:00+00:00"),
            ("a", 10, "2026-01-05T00:00:00+00:00"),
            ("c", 3, "2026-01-04T00:00:00+00:00"),
            ("d", 4, "2026-01-06T00:00:00+00:00"),
        ],
        [],
        [("e", 5, "2026-01-07T00:00:00+00:00")],
    ]


def _outputs(tmp_path: Path, *schemas: pa.Schema) -> list[Output]:
    return [Output(tmp_path / f"out-{i}.parquet", s) for i, s in enumerate(schemas)]


def _by_output(spark: SparkSession, rows: list[tuple[int, int | None]]) -> DataFrame:
    frame = spark.createDataFrame(rows, "o INT, v BIGINT")
    return sorted_by_output(frame, F.col("o"), 2, [F.col("v").asc_nulls_first()])


def test_each_partition_is_written_as_its_output_by_one_query(
    tmp_path: Path, spark: SparkSession
) -> None:
    frame = _by_output(spark, [(1, 3), (0, 2), (1, 1), (0, 4)])
    schema = pa.schema([pa.field("v", pa.int64())])
    outputs = _outputs(tmp_path, schema, schema)
    written = write_partitions(frame, outputs)
    assert [w[0].rows if w else None for w in written] == [2, 2]
    assert [pq.read_table(o.path)["v"].to_pylist() for o in outputs] == [[2, 4], [1, 3]]
    # An output whose partition holds no rows gets no file.
    (tmp_path / "e").mkdir()
    empty = write_partitions(_by_output(spark, [(1, 5)]), _outputs(tmp_path / "e", schema, schema))
    assert empty[0] is None and empty[1] is not None
    assert not (tmp_path / "e" / "out-0.parquet").exists()


def test_one_output_failing_leaves_no_file_of_any(tmp_path: Path, spark: SparkSession) -> None:
    frame = _by_output(spark, [(0, 1), (1, None), (1, 2), (0, 3)])
    nullable = pa.schema([pa.field("v", pa.int64())])
    required = pa.schema([pa.field("v", pa.int64(), nullable=False)])
    outputs = _outputs(tmp_path, nullable, required)
    with pytest.raises(IncompatibleSchemaError) as caught:
        write_partitions(frame, outputs)
    assert str(caught.value) == "column 'v' is NOT NULL but 1 row(s) have no value"
    assert list(tmp_path.iterdir()) == []

    narrow = pa.schema([pa.field("v", pa.int8())])
    big = _by_output(spark, [(0, 1), (1, 1000)])
    with pytest.raises(pa.ArrowInvalid, match="1000"):
        write_partitions(big, _outputs(tmp_path, nullable, narrow))
    assert list(tmp_path.iterdir()) == []
