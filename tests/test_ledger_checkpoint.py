"""The layered Ledger checkpoint, on real Spark: each run writes its own keys as a new
layer over committed ones, layers are merged like a binary counter, and the slices are
exactly those a checkpoint rebuilt from history gives.

``MIN_LAYER_ROWS`` (below which a layer is always merged) is lowered to 1 so that a few
rows make many layers; the policy is then the plain binary counter on row counts.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from gitops_repo import GitOpsRepo, manifest, root_events, rows, slices
from pyspark.sql import DataFrame, SparkSession
from s3_server import BUCKET, S3Server
from test_data_store import cli

from reconciler.config import RepoConfig
from reconciler.ingest import checkpoints
from reconciler.ingest.checkpoints import Layer, previous_checkpoint
from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.ingest.readers import ReadError
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset, OdfRepository

pytestmark = pytest.mark.usefixtures("spark")

WHEN = Timestamp.parse("2026-01-01T00:00:00Z")
HEADER = "event_time,id,value\n"
LEDGER = models.MergeStrategyLedger(primary_key=["id"])


@pytest.fixture(autouse=True)
def small_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "MIN_LAYER_ROWS", 1)


def ledger(root: Path) -> tuple[Dataset, Path]:
    """A new Ledger root dataset reading ``root/in/*.csv``; and that folder."""
    inbox = root / "in"
    inbox.mkdir(parents=True)
    dataset = OdfRepository(root / "odf").dataset("ledger")
    dataset_id, _ = DatasetId.generate()
    dataset.append_event(
        models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT), WHEN
    )
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path=str(inbox / "*.csv")),
        read=models.ReadStepCsv(
            schema=["event_time TIMESTAMP", "id BIGINT", "value STRING"], header=True
        ),
        merge=LEDGER,
    )
    dataset.append_event(source, WHEN)
    return dataset, inbox


def pull(spark: SparkSession, dataset: Dataset, inbox: Path, run: int, ids: list[str]) -> None:
    """Ingest one file holding ``ids`` (an empty string is a NULL key)."""
    lines = [f"2020-01-{run:02d}T00:00:00Z,{i},run {run}" for i in ids]
    (inbox / f"{run:03d}.csv").write_text(HEADER + "\n".join(lines) + "\n")
    context = IngestContext(spark=lambda: spark, base_dir=Path("/"), env={}, system_time=WHEN)
    pull_polling(dataset, context)


def layers(spark: SparkSession, dataset: Dataset) -> tuple[Layer, ...]:
    """The layers of the dataset's checkpoint, oldest first, as the next run reads them."""
    state = dataset.state()
    previous = previous_checkpoint(spark, dataset, state, LEDGER, state.vocabulary())
    assert previous is not None
    return previous.layers


def checkpoints_named(dataset: Dataset) -> list[str]:
    """The checkpoint each AddData block names, oldest first."""
    found = []
    for _, block in dataset.iter_blocks():
        if isinstance(block.event, models.AddData) and block.event.new_checkpoint is not None:
            found.append(block.event.new_checkpoint.physical_hash)
    return found[::-1]


def keys_of(layer: Layer) -> list[int | None]:
    return [row[0] for row in rows(pq.read_table(layer.path))]


def test_layers_merge_like_a_binary_counter_and_name_only_committed_checkpoints(
    spark: SparkSession, tmp_path: Path
) -> None:
    dataset, inbox = ledger(tmp_path)
    sizes = []
    for run in range(1, 9):
        pull(spark, dataset, inbox, run, [str(2 * run), str(2 * run + 1)])
        found = layers(spark, dataset)
        sizes.append([layer.rows for layer in found])
        named = checkpoints_named(dataset)
        # The top layer is this block's checkpoint; every other one an earlier block's.
        assert found[-1].hash == named[-1]
        assert {layer.hash for layer in found[:-1]} <= set(named[:-1])
        if run == 3:  # no merge: the new file holds this run's keys only
            assert keys_of(found[-1]) == [6, 7]
        if run == 4:  # merges every layer: the new file holds all keys, oldest first
            assert keys_of(found[-1]) == list(range(2, 10))
    assert sizes == [[2], [4], [4, 2], [8], [8, 2], [8, 4], [8, 4, 2], [16]]
    assert check_integrity(dataset) == []


# Each run's keys: overlaps with the last run, with the first (after merges), NULL keys
# (seen once, then dropped) and a key repeated within one file.
RUNS = [
    ["1", "2", "3"],
    ["3", "4"],
    ["5", "6"],
    ["1", "7"],
    ["", "8"],
    ["", "9", "4"],
    ["10", "10"],
    ["2", "11"],
    ["12"],
    ["13", "14", "5"],
    ["15"],
    ["1", "2", "3", "16", ""],
]


def ingest_all(
    spark: SparkSession, root: Path, before_run: Callable[[Dataset, int], None]
) -> Dataset:
    dataset, inbox = ledger(root)
    for run, ids in enumerate(RUNS, 1):
        before_run(dataset, run)
        pull(spark, dataset, inbox, run, ids)
    return dataset


def data_slices(dataset: Dataset) -> list[tuple[models.OffsetInterval, str, list[tuple]]]:
    """(offsets, logical hash, rows) of every slice, oldest first."""
    found = []
    for _, block in dataset.iter_blocks():
        event = block.event
        if isinstance(event, models.AddData) and event.new_data is not None:
            found.append((event.new_data.offset_interval, event.new_data.logical_hash))
    stored = [rows(table) for table in slices(dataset)]
    return [(*meta, data) for meta, data in zip(found[::-1], stored, strict=True)]


def test_a_layered_ledger_gives_exactly_the_slices_of_one_rebuilt_from_history(
    spark: SparkSession, tmp_path: Path
) -> None:
    def keep(dataset: Dataset, run: int) -> None:
        if run == len(RUNS):  # the last run reads several layers, some merged since
            sizes = [layer.rows for layer in layers(spark, dataset)]
            assert sizes == [12, 4, 1], sizes  # 1, 2 and 3 in the bottom one, merged twice

    def forget(dataset: Dataset, run: int) -> None:
        shutil.rmtree(dataset.layout.checkpoints, ignore_errors=True)

    def lose_a_lower_layer(dataset: Dataset, run: int) -> None:
        if run == 7:
            bottom = layers(spark, dataset)[0]
            assert bottom.hash != checkpoints_named(dataset)[-1]
            bottom.path.unlink()

    layered = data_slices(ingest_all(spark, tmp_path / "layered", keep))
    rebuilt = data_slices(ingest_all(spark, tmp_path / "rebuilt", forget))
    lost = data_slices(ingest_all(spark, tmp_path / "lost", lose_a_lower_layer))
    assert layered == rebuilt == lost
    # The first run's keys and the NULL key (seen in run 5) come back in the last run,
    # after merges: only 16 is new.
    assert [row[4:] for row in layered[-1][2]] == [(16, "run 12")]
    assert [row[4] for _, _, data in layered for row in data] == [
        1, 2, 3, 4, 5, 6, 7, None, 8, 9, 10, 10, 11, 12, 13, 14, 15, 16,
    ]  # fmt: skip


SOURCE = "day,id,qty\n"


def s3_ledger(root: Path, server: S3Server, runs: list[str]) -> Dataset:
    """A Ledger root keeping its data in the object store, applied once over one file
    per entry of ``runs`` (its keys, space-separated): one run each; then its cache
    is emptied, as in a fresh checkout."""
    repo = GitOpsRepo.create(root)
    (root / "pyproject.toml").write_text(
        f'[tool.reconciler]\ndata_store = "s3://{BUCKET}/layers"\n\n'
        f'[tool.reconciler.s3]\nendpoint_url = "{server.endpoint}"\nregion = "us-east-1"\n'
    )
    events = root_events(
        schema="[day DATE, id STRING, qty BIGINT]", merge="{kind: Ledger, primaryKey: [id]}"
    )
    repo.write("org.example.ledger", manifest("org.example.ledger", "Root", events))
    (root / "sources").mkdir()
    for n, ids in enumerate(runs, 1):
        lines = [f"2026-01-0{n},{i},{n}" for i in ids.split()]
        (root / "sources" / f"{n}.csv").write_text(SOURCE + "\n".join(lines) + "\n")
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 0, result.output
    shutil.rmtree(root / ".reconcile-cache")
    return RepoConfig.load(root).repository().dataset("org.example.ledger")


def s3_layers(dataset: Dataset) -> tuple[Layer, ...]:
    """The layers the next run starts from, found by their footers alone."""
    state = dataset.state()
    assert state.checkpoint is not None
    found = checkpoints._layers(dataset, state.checkpoint, checkpoints.tag(LEDGER) or "")
    assert found is not None
    return found


def test_a_run_fetches_every_layer_it_reads_from_the_object_store(
    spark: SparkSession,
    tmp_path: Path,
    credentials: S3Server,
) -> None:
    root = tmp_path / "repo"
    dataset = s3_ledger(root, credentials, ["a b c d", "e f", "g"])
    layers = s3_layers(dataset)
    expected = [layer.hash for layer in layers]
    assert [layer.rows for layer in layers] == [4, 2, 1]
    (root / "sources" / "5.csv").write_text(SOURCE + "2026-01-05,a,5\n2026-01-05,h,5\n")
    before = len(credentials.requests())
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-02T06:00:00Z")
    assert result.exit_code == 0, result.output
    gets = [r.split(" ", 1)[1] for r in credentials.requests()[before:] if r.startswith("GET ")]
    folder = f"/{BUCKET}/layers/checkpoints/"
    fetched = {p.split("?")[0].removeprefix(folder) for p in gets if p.startswith(folder)}
    assert set(expected) <= fetched, (expected, gets)
    assert not any(p.startswith(f"/{BUCKET}/layers/data/") for p in gets), gets
    # "a", in the bottom layer, is still known: only "h" is new.
    assert slices(dataset)[-1].column("id").to_pylist() == ["h"]
    integrity = cli(root, "verify", "--integrity")
    assert integrity.exit_code == 0, integrity.output


def test_a_run_downloads_no_layer_its_keys_cannot_meet(
    spark: SparkSession,
    tmp_path: Path,
    credentials: S3Server,
) -> None:
    """Only the footers of the layers are read from the store to prune them, so a run
    whose keys lie beyond every layer downloads none: before, every layer was fetched
    whole to read its footer, and the top one again for its size."""
    root = tmp_path / "repo"
    dataset = s3_ledger(root, credentials, ["a b c d", "e f"])
    old = [layer.hash for layer in s3_layers(dataset)]
    assert len(old) == 2
    cached = root / ".reconcile-cache" / "checkpoints"
    assert not cached.exists()  # judging the layers by their footers fetched nothing

    (root / "sources" / "3.csv").write_text(SOURCE + "2026-01-03,x,3\n")
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-02T06:00:00Z")
    assert result.exit_code == 0, result.output
    # The cache holds the one object this run wrote (kept as it was uploaded): no old one.
    layers = s3_layers(dataset)
    assert [layer.hash for layer in layers[:2]] == old
    assert [layer.rows for layer in layers] == [4, 2, 1]
    assert sorted(p.name for p in cached.iterdir()) == [layers[2].hash]
    assert slices(dataset)[-1].column("id").to_pylist() == ["x"]
    # A batch of a known key meets the bottom layer only: that one is downloaded.
    (root / "sources" / "4.csv").write_text(SOURCE + "2026-01-04,b,4\n")
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-03T06:00:00Z")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in cached.iterdir()) == sorted([old[0], layers[2].hash])
    assert len(slices(dataset)) == 3  # "b" is known: no new slice
    integrity = cli(root, "verify", "--integrity")
    assert integrity.exit_code == 0, integrity.output


def test_a_checkpoint_does_not_outlive_a_run_that_keeps_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Ledger, then Append for a run, then Ledger again: the key appended while the
    merge kept no checkpoint is still seen, because the Append run carried no stale
    checkpoint over (the next Ledger run rebuilt the keys from history)."""
    dataset, inbox = ledger(tmp_path)
    pull(spark, dataset, inbox, 1, ["1", "2"])
    source = dataset.state().polling_source
    assert source is not None
    dataset.append_event(source.model_copy(update={"merge": models.MergeStrategyAppend()}), WHEN)
    pull(spark, dataset, inbox, 2, ["3"])
    assert dataset.state().checkpoint is None
    dataset.append_event(source, WHEN)
    pull(spark, dataset, inbox, 3, ["3", "4"])
    assert [row[4] for _, _, data in data_slices(dataset) for row in data] == [1, 2, 3, 4]


# Key-range pruning: a run reads only the layers whose footers' statistics say they may
# hold one of its batch's keys.


def keyed_ledger(root: Path, merge: models.MergeStrategyLedger) -> tuple[Dataset, Path]:
    """``ledger`` with another primary key."""
    dataset, inbox = ledger(root)
    source = dataset.state().polling_source
    assert source is not None
    dataset.append_event(source.model_copy(update={"merge": merge}), WHEN)
    return dataset, inbox


def layers_read(
    spark: SparkSession,
    dataset: Dataset,
    batch: DataFrame,
    merge: models.MergeStrategyLedger = LEDGER,
) -> list[int]:
    """Which layers (their places, oldest first) the merge of ``batch`` reads."""
    state = dataset.state()
    previous = previous_checkpoint(spark, dataset, state, merge, state.vocabulary(), batch)
    assert previous is not None
    names = [layer.hash for layer in previous.layers]
    files = [file.rsplit("/", 1)[-1] for file in previous.frame.inputFiles()]
    return sorted(names.index(name) for name in files if name in names)


def ids(spark: SparkSession, *keys: int | None) -> DataFrame:
    return spark.createDataFrame([(k,) for k in keys], "id BIGINT")


def test_a_ledger_run_reads_only_the_layers_its_key_range_meets(
    spark: SparkSession, tmp_path: Path
) -> None:
    dataset, inbox = ledger(tmp_path)
    for run, keys in enumerate([["1", "2", "3", "4"], ["", "5", "6"], ["7"]], 1):
        pull(spark, dataset, inbox, run, keys)
    assert [layer.rows for layer in layers(spark, dataset)] == [4, 3, 1]
    assert layers_read(spark, dataset, ids(spark, 8, 9)) == []  # beyond every layer
    assert layers_read(spark, dataset, ids(spark, 0)) == []
    assert layers_read(spark, dataset, ids(spark)) == []
    assert layers_read(spark, dataset, ids(spark, 2, 3)) == [0]
    assert layers_read(spark, dataset, ids(spark, 5, 10)) == [1, 2]
    assert layers_read(spark, dataset, ids(spark, None, 10)) == [1]  # the one with a NULL
    assert layers_read(spark, dataset, ids(spark, None, 1)) == [0, 1]
    # Without a batch (or for a key of a type it cannot order) every layer is read.
    state = dataset.state()
    everything = previous_checkpoint(spark, dataset, state, LEDGER, state.vocabulary())
    assert everything is not None and len(everything.frame.inputFiles()) == 3
    floats = spark.createDataFrame([(8.0,)], "id DOUBLE")
    assert layers_read(spark, dataset, floats) == [0, 1, 2]


def key_range_jobs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The primary keys of each job run to find a batch's key range, as runs go on."""
    ranges: list[list[str]] = []
    real = checkpoints._batch_spans

    def spy(batch: DataFrame, primary_key: list[str]) -> list[checkpoints.Span] | None:
        ranges.append(primary_key)
        return real(batch, primary_key)

    monkeypatch.setattr(checkpoints, "_batch_spans", spy)
    return ranges


def test_a_ledger_whose_keys_do_not_grow_skips_the_key_range_job(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every stored key lies within the span of the newest ones, no batch is
    likely to miss a layer: the job that finds the batch's key range is not run."""
    dataset, inbox = ledger(tmp_path)
    for run, keys in enumerate([["5", "1", "9", "2"], ["4", "8"], ["7"]], 1):
        pull(spark, dataset, inbox, run, keys)
    ranges = key_range_jobs(monkeypatch)
    assert layers_read(spark, dataset, ids(spark, 100)) == [0, 1, 2]
    assert ranges == []


def test_a_composite_key_is_pruned_when_any_of_its_columns_misses(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A string and a timestamp (stored as milliseconds, batches in microseconds)."""
    merge = models.MergeStrategyLedger(primary_key=["value", "event_time"])
    dataset, inbox = keyed_ledger(tmp_path, merge)
    for run, count in enumerate([4, 2, 1], 1):
        pull(spark, dataset, inbox, run, [str(i) for i in range(count)])
    state = dataset.state()
    previous = previous_checkpoint(spark, dataset, state, merge, state.vocabulary())
    assert previous is not None and [layer.rows for layer in previous.layers] == [4, 2, 1]

    def read(*keys: tuple[str, int]) -> list[int]:
        at = [(value, dt.datetime(2020, 1, day, tzinfo=dt.UTC)) for value, day in keys]
        batch = spark.createDataFrame(at, "value STRING, event_time TIMESTAMP")
        return layers_read(spark, dataset, batch, merge)

    assert read(("run 2", 2)) == [1]
    assert read(("run 3", 3)) == [2]
    assert read(("run 2", 3)) == []  # run 2's string, run 3's timestamp: no layer has both
    assert read(("run 4", 4)) == []
    assert read(("run 1", 1), ("run 3", 3)) == [0, 1, 2]


# Growing keys, with a NULL key (new, then seen), a key repeated in one file, an old key
# and a NULL key after merges.
GROWING = [
    ["1", "2", "3", "4"],
    ["5", "6", ""],
    ["7", "8"],
    ["9", "10", "10"],
    ["11", ""],
    ["3", "12"],
    ["13"],
    ["", "14"],
    ["15", "16"],
]


def test_pruned_layers_give_exactly_the_slices_of_every_layer_read(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[tuple[int, int]] = []
    real = checkpoints._candidate_keys

    def counted(
        spark: SparkSession, layers: Sequence[Layer], batch: DataFrame, primary_key: list[str]
    ) -> DataFrame:
        keys = real(spark, layers, batch, primary_key)
        names = {layer.hash for layer in layers}
        files = [file.rsplit("/", 1)[-1] for file in keys.inputFiles()]
        read.append((len([name for name in files if name in names]), len(layers)))
        return keys

    def ingest(root: Path) -> list[tuple[models.OffsetInterval, str, list[tuple]]]:
        dataset, inbox = ledger(root)
        for run, keys in enumerate(GROWING, 1):
            pull(spark, dataset, inbox, run, keys)
        return data_slices(dataset)

    monkeypatch.setattr(checkpoints, "_candidate_keys", counted)
    pruned = ingest(tmp_path / "pruned")
    monkeypatch.setattr(checkpoints, "_pays", lambda groups: False)
    everything = ingest(tmp_path / "everything")
    assert pruned == everything
    # (layers read, layers), per run after the first. One layer is always read (no
    # layer lies outside the newest keys' span: nothing shows the keys grow). Past
    # that, a run reads only the layers its keys reach: none for new keys above them
    # all; the bottom one, holding the NULL, for run 8's NULL; both for run 6's old 3.
    assert read[: len(GROWING) - 1] == [
        (1, 1), (0, 2), (0, 3), (1, 1), (2, 2), (0, 2), (1, 3), (0, 2),
    ]  # fmt: skip
    assert [row[4] for _, _, data in pruned for row in data] == [
        1, 2, 3, 4, 5, 6, None, 7, 8, 9, 10, 10, 11, 12, 13, 14, 15, 16,
    ]  # fmt: skip


def test_a_malformed_row_fails_the_key_range_job_as_it_fails_the_slice_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job that finds the batch's key range is the first to meet a bad row: the
    pull fails with the read error the check gives, and commits nothing."""
    dataset, inbox = ledger(tmp_path)
    pull(spark, dataset, inbox, 1, ["1", "2"])
    pull(spark, dataset, inbox, 2, ["3"])
    ranges = key_range_jobs(monkeypatch)
    head = dataset.head()
    with pytest.raises(ReadError) as caught:
        pull(spark, dataset, inbox, 3, ["4", "x"])
    assert str(caught.value) == (
        f"{inbox / '003.csv'}: line 3: malformed record: 2020-01-03T00:00:00Z,x,run 3: "
        "column id (BIGINT): 'x' is not a valid BIGINT"
    )
    assert (ranges, dataset.head()) == ([["id"]], head)


def jobs_of(spark: SparkSession, read: Callable[[], DataFrame]) -> tuple[DataFrame, list[int]]:
    """What ``read`` gives, and the Spark jobs it ran to give it."""
    context = spark.sparkContext
    group = f"read-{id(read)}"
    context.setJobGroup(group, "a checkpoint read")
    try:
        frame = read()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return frame, list(context.statusTracker().getJobIdsForGroup(group))


def test_a_checkpoint_is_read_with_the_schema_spark_infers_without_a_job_to_infer_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The layers' footers give the schema: Spark would run a job to read one for it."""
    dataset, inbox = ledger(tmp_path)
    for run, keys in enumerate([["1", "2"], ["3"]], 1):
        pull(spark, dataset, inbox, run, keys)
    state = dataset.state()
    previous, jobs = jobs_of(
        spark, lambda: previous_checkpoint(spark, dataset, state, LEDGER, state.vocabulary())
    )
    assert previous is not None and jobs == []
    paths = [str(layer.path) for layer in previous.layers]
    inferred, inference_jobs = jobs_of(spark, lambda: spark.read.parquet(*paths))
    assert len(inference_jobs) == 1
    assert previous.frame.schema == inferred.schema
    assert sorted(r.id for r in previous.frame.collect()) == [1, 2, 3]
