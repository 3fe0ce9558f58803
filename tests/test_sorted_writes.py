"""``write_sorted`` writes the file one task sorting all the rows wrote, byte for byte,
from rows sorted where they are and merged by the writer; keys Arrow does not order as
Spark does are sorted in the writing task instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)

from reconciler.commands.common import Session
from reconciler.config import RepoConfig
from reconciler.ingest import stage
from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import Dataset, OdfRepository
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
    real = slice_files.map_in_arrow

    def counted(
        frame: DataFrame, task: Callable[..., Iterator[pa.RecordBatch]], *returns: str
    ) -> DataFrame:
        calls.append(1)
        return real(frame, task, *returns)

    monkeypatch.setattr(slice_files, "map_in_arrow", counted)
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


def test_outputs_of_the_same_rows_share_one_sort(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no output column every row goes to every output (a first Snapshot's slice
    and state), each output taking the columns its schema names: in runs, the rows are
    sorted and written as runs once, and both writers merge the same runs; the files
    are the ones a single sorting task writes per output."""
    frame = _frame(spark)
    narrow = pa.schema([SCHEMA.field("k"), SCHEMA.field("t")])
    seen: list[tuple[str, int]] = []
    real_rmtree = slice_files.shutil.rmtree

    def listed(path: Path, **kwargs: Any) -> None:  # the runs, before the driver drops them
        for run in sorted(Path(path).iterdir()):
            with pa.memory_map(str(run)) as source:
                seen.append((run.name.rsplit("-", 1)[1], _rows(source)))
        real_rmtree(path, **kwargs)

    monkeypatch.setattr(slice_files.shutil, "rmtree", listed)
    outputs = [
        Output(tmp_path / "slice.parquet", SCHEMA),
        Output(tmp_path / "state.parquet", narrow),
    ]
    columns = [F.col(c) for c in SCHEMA.names]
    shared = write_sorted(frame, ["t", "k", "id"], columns, outputs)
    # 4 partitions sorted once each: runs for output 0 only, 6,000 rows in all.
    assert [name for name, _ in seen] == ["0.arrow"] * 4
    assert sum(rows for _, rows in seen) == 6000
    assert pq.read_table(outputs[1].path).column_names == ["k", "t"]

    (tmp_path / "one").mkdir()
    alone = [Output(tmp_path / "one" / o.path.name, o.schema) for o in outputs]
    single = write_sorted(frame, ["t", "k", "id"], columns, alone, in_runs=False)
    assert [(w[0].rows, w[0].physical_hash) for w in shared if w] == [
        (w[0].rows, w[0].physical_hash) for w in single if w
    ]
    assert [w[0].rows for w in single if w] == [6000, 6000]


def _rows(source: pa.MemoryMappedFile) -> int:
    return int(pa.ipc.open_file(source).read_all().num_rows)


def _csv(run: int) -> str:
    """3,000 rows: event times with ties and gaps, keys seen before from the 2nd run on,
    values that change (a Snapshot's corrections)."""
    lines = ["event_time,id,qty"]
    for i in range(3000):
        when = "" if i % 11 == 0 else f"2026-01-{1 + (i * 7) % 28:02d}T00:00:00Z"
        lines.append(f"{when},k{(i + run * 1000) % 4000},{(i * run) % 13}")
    return "\n".join(lines) + "\n"


def _added(dataset: Dataset) -> list[tuple[Any, ...]]:
    found = []
    for _, block in dataset.iter_blocks():
        event = block.event
        if isinstance(event, models.AddData):
            data, checkpoint = event.new_data, event.new_checkpoint
            found.append(
                (
                    data and (data.logical_hash, data.physical_hash, data.offset_interval),
                    checkpoint and checkpoint.physical_hash,
                    event.new_watermark,
                )
            )
    return found


@pytest.mark.parametrize("merge", ["append", "ledger", "snapshot"])
def test_an_ingest_sorted_in_runs_commits_the_blocks_one_task_did(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, merge: str
) -> None:
    strategy = {
        "append": models.MergeStrategyAppend(),
        "ledger": models.MergeStrategyLedger(primary_key=["id"]),
        "snapshot": models.MergeStrategySnapshot(primary_key=["id"]),
    }[merge]
    system_time = Timestamp.parse("2026-02-01T12:00:00Z")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16k")  # several partitions
    try:
        commits = []
        for runs_from in (stage.RUNS_FROM_BYTES, 0):  # one sorting task, then runs
            monkeypatch.setattr(stage, "RUNS_FROM_BYTES", runs_from)
            calls = _calls(monkeypatch)
            root = tmp_path / str(runs_from)
            (root / "in").mkdir(parents=True)
            dataset = OdfRepository(root / "odf").dataset("org.example.stock")
            seed = models.Seed(
                dataset_id=DatasetId.from_public_key(bytes(range(32))),
                dataset_kind=models.DatasetKind.ROOT,
            )
            dataset.append_event(seed, system_time)
            source = models.SetPollingSource(
                fetch=models.FetchStepFilesGlob(path=str(root / "in" / "*.csv")),
                read=models.ReadStepCsv(
                    schema=["event_time TIMESTAMP", "id STRING", "qty BIGINT"], header=True
                ),
                merge=strategy,
            )
            dataset.append_event(source, system_time)
            context = IngestContext(
                spark=lambda: spark, base_dir=root, env={}, system_time=system_time
            )
            for run in (1, 2):
                (root / "in" / f"{run}.csv").write_text(_csv(run))
                pull_polling(dataset, context)
            assert len(calls) == (2 if runs_from else 4)
            commits.append(_added(dataset))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert commits[0] == commits[1]
    assert len(commits[0]) == 2 and commits[0][0][0] is not None


def test_a_run_stages_its_files_in_the_repositorys_cache(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster a Spark task writes the slice on another machine: the folder must be
    one the executors share with the driver, the repository's, not the driver's /tmp."""
    config = RepoConfig.load(tmp_path)
    context = Session(config).ingest_context()
    assert context.scratch == tmp_path.resolve() / ".reconcile-cache" / "work"
    written: list[Path] = []
    real = slice_files._outcomes

    def recorded(outputs: Any, summaries: Any) -> Any:
        written.extend(output.path for output in outputs)
        return real(outputs, summaries)

    monkeypatch.setattr(slice_files, "_outcomes", recorded)
    monkeypatch.setattr(stage, "RUNS_FROM_BYTES", 0)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "1.csv").write_text(_csv(1))
    dataset = OdfRepository(tmp_path / "odf").dataset("org.example.stock")
    system_time = Timestamp.parse("2026-02-01T12:00:00Z")
    seed = models.Seed(
        dataset_id=DatasetId.from_public_key(bytes(range(32))),
        dataset_kind=models.DatasetKind.ROOT,
    )
    dataset.append_event(seed, system_time)
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path="in/*.csv"),
        read=models.ReadStepCsv(
            schema=["event_time TIMESTAMP", "id STRING", "qty BIGINT"], header=True
        ),
        merge=models.MergeStrategySnapshot(primary_key=["id"]),
    )
    dataset.append_event(source, system_time)
    context = IngestContext(
        spark=lambda: spark,
        base_dir=tmp_path,
        env={},
        system_time=system_time,
        scratch=config.work_dir,
    )
    assert pull_polling(dataset, context).rows == 3000
    assert [p.name for p in written] == ["slice.parquet", "checkpoint.parquet"]
    assert all(p.parent.parent == config.work_dir for p in written)
    assert list(config.work_dir.iterdir()) == []  # nothing left behind


def test_no_rows_at_all_write_no_file(tmp_path: Path, spark: SparkSession) -> None:
    frame = spark.createDataFrame([], "o INT, v BIGINT").repartition(2)
    schema = pa.schema([pa.field("v", pa.int64())])
    outputs = [Output(tmp_path / f"{i}.parquet", schema) for i in range(2)]
    assert write_sorted(frame, ["v"], [F.col("v")], outputs, F.col("o")) == [None, None]
    assert list(tmp_path.iterdir()) == []
