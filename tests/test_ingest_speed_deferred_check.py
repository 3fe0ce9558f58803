"""The read check deferred into the slice write (``read_data(deferred=True)``), on real
Spark: the file is parsed once, and bad input still fails the pull with the error the
eager check gives, whatever the merge would have done with the bad row, with nothing of
the file committed.

Each pull runs against a real ODF dataset with a FilesGlob polling source; the second
file of a pull holds the bad row, so the merge has a previous checkpoint to compare it
with (the case where a check riding on the merged rows would miss it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F  # noqa: N812

from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.ingest.readers import ReadError, read_data
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import Dataset, OdfRepository

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HEADER = "event_time,id,value\n"
SCHEMA = ["event_time TIMESTAMP", "id BIGINT NOT NULL", "value DOUBLE"]
WHEN = Timestamp.parse("2026-01-01T00:00:00Z")


def _dataset(
    root: Path, merge: models.MergeStrategy, preprocess: str | None = None
) -> tuple[Dataset, Path]:
    """A new root dataset reading ``root/in/*.csv`` with ``merge``; and that folder."""
    inbox = root / "in"
    inbox.mkdir()
    dataset = OdfRepository(root / "odf").dataset("bad.input")
    dataset_id, _ = DatasetId.generate()
    dataset.append_event(
        models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT), WHEN
    )
    query = (
        models.TransformSql(engine="spark", query=preprocess).normalized() if preprocess else None
    )
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path=str(inbox / "*.csv")),
        read=models.ReadStepCsv(schema=SCHEMA, header=True),
        preprocess=query,
        merge=merge,
    )
    dataset.append_event(source, WHEN)
    return dataset, inbox


def _pull(spark: SparkSession, dataset: Dataset) -> int:
    context = IngestContext(spark=lambda: spark, base_dir=Path("/"), env={}, system_time=WHEN)
    return pull_polling(dataset, context).rows


def _fails_leaving_the_chain(spark: SparkSession, dataset: Dataset) -> str:
    """Pull, which must fail with a ReadError and leave the head and the files as they
    were; returns the error."""
    head, files = dataset.head(), sorted(dataset.root.rglob("*"))
    with pytest.raises(ReadError) as caught:
        _pull(spark, dataset)
    assert (dataset.head(), sorted(dataset.root.rglob("*"))) == (head, files)
    return str(caught.value)


def test_a_malformed_row_whose_key_a_ledger_already_has_still_fails_the_pull(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The anti-join with the checkpoint's keys drops the bad row (key 1) from the slice.
    dataset, inbox = _dataset(tmp_path, models.MergeStrategyLedger(primary_key=["id"]))
    (inbox / "a.csv").write_text(HEADER + "2020-01-01T00:00:00Z,1,1.5\n")
    assert _pull(spark, dataset) == 1
    bad = inbox / "b.csv"
    bad.write_text(HEADER + "2020-01-02T00:00:00Z,2,2.5\n2020-01-02T00:00:00Z,1,warm\n")
    assert _fails_leaving_the_chain(spark, dataset) == (
        f"{bad}: line 3: malformed record: 2020-01-02T00:00:00Z,1,warm: "
        "column value (DOUBLE): 'warm' is not a valid DOUBLE"
    )


def test_a_malformed_row_that_changes_nothing_in_a_snapshot_still_fails_the_pull(
    spark: SparkSession, tmp_path: Path
) -> None:
    # An extra field: Spark keeps the row's values, equal to the state, so no change.
    dataset, inbox = _dataset(tmp_path, models.MergeStrategySnapshot(primary_key=["id"]))
    (inbox / "a.csv").write_text(HEADER + "2020-01-01T00:00:00Z,1,1.5\n")
    assert _pull(spark, dataset) == 1
    bad = inbox / "b.csv"
    bad.write_text(HEADER + "2020-01-01T00:00:00Z,1,1.5,extra\n")
    assert _fails_leaving_the_chain(spark, dataset) == (
        f"{bad}: line 2: malformed record: 2020-01-01T00:00:00Z,1,1.5,extra: "
        "it has 4 fields, the schema has 3"
    )


def test_a_null_in_a_not_null_column_fails_the_pull_as_a_read_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    dataset, inbox = _dataset(tmp_path, models.MergeStrategyAppend())
    bad = inbox / "a.csv"
    bad.write_text(HEADER + "2020-01-01T00:00:00Z,,1.5\n2020-01-01T00:00:00Z,,2.5\n")
    assert _fails_leaving_the_chain(spark, dataset) == (
        f"{bad}: column 'id' is NOT NULL but 2 records have no value"
    )


def test_with_a_preprocess_the_input_is_checked_before_the_query_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The query drops the bad row, which a check in the write would never meet.
    query = "SELECT * FROM input WHERE value > 2"
    dataset, inbox = _dataset(tmp_path, models.MergeStrategyAppend(), query)
    bad = inbox / "a.csv"
    bad.write_text(HEADER + "2020-01-01T00:00:00Z,1,warm\n2020-01-01T00:00:00Z,2,2.5\n")
    assert _fails_leaving_the_chain(spark, dataset) == (
        f"{bad}: line 2: malformed record: 2020-01-01T00:00:00Z,1,warm: "
        "column value (DOUBLE): 'warm' is not a valid DOUBLE"
    )


def test_deferred_data_is_not_cached_and_is_checked_as_it_is_computed(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "in.csv"
    path.write_text(HEADER + "2020-01-01T00:00:00Z,1,1.5\n2020-01-01T00:00:00Z,2,warm\n")
    step = models.ReadStepCsv(schema=SCHEMA, header=True)
    with (
        pytest.raises(ReadError) as caught,
        read_data(spark, step, path, tmp_path / "work", deferred=True) as frame,
    ):
        assert frame is not None
        assert frame.columns == ["event_time", "id", "value"]
        assert not frame.is_cached
        frame.collect()
    assert str(caught.value) == (
        f"{path}: line 3: malformed record: 2020-01-01T00:00:00Z,2,warm: "
        "column value (DOUBLE): 'warm' is not a valid DOUBLE"
    )


def test_a_failure_of_the_block_itself_is_raised_as_it_is(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "in.csv"
    path.write_text(HEADER + "2020-01-01T00:00:00Z,1,1.5\n")
    step = models.ReadStepCsv(schema=SCHEMA, header=True)
    with (
        pytest.raises(PySparkException, match="not the input's fault"),
        read_data(spark, step, path, tmp_path / "work", deferred=True) as frame,
    ):
        assert frame is not None
        frame.select(F.raise_error(F.lit("not the input's fault"))).collect()
