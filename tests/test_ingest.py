"""Ingest of root datasets through ``reconcile`` (plan, then apply), on real Spark.

Every test builds a real git repository with manifests and source files, runs the same
``apply_plan`` the CLI runs, and then reads the committed chain and Parquet files back.
After every run the whole dataset must pass the integrity check (chain rules, block,
physical and logical hashes).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from gitops_repo import T1, GitOpsRepo, events, manifest, reconcile, root_events, rows, slices
from pyspark.sql import SparkSession

from reconciler.apply.outcome import Status
from reconciler.ingest.preprocess import BadInputSchemaError, check_columns
from reconciler.odf import Timestamp, models
from reconciler.odf.arrow_schema import decode_arrow_schema
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset

pytestmark = pytest.mark.usefixtures("spark")

NAME = "org.example.obs"
VOCAB = """
    - kind: SetVocab
      eventTimeColumn: observed_at"""


def make_repo(tmp_path: Path, events_yaml: str, name: str = NAME) -> GitOpsRepo:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(name, manifest(name, "Root", events_yaml))
    (tmp_path / "sources").mkdir()
    return repo


def source(repo: GitOpsRepo, name: str, text: str) -> None:
    (repo.root / "sources" / name).write_text(text)


def dataset(repo: GitOpsRepo, name: str = NAME) -> Dataset:
    ds = repo.odf.dataset(name)
    assert check_integrity(ds) == []
    return ds


def outcome(repo: GitOpsRepo, system_time: Timestamp | None = T1) -> tuple[Status, str, int, int]:
    (result,) = reconcile(repo.root, system_time)
    return result.status, result.message, result.data_blocks, result.rows


def data_events(ds: Dataset) -> list[models.AddData]:
    return [e for e in events(ds) if isinstance(e, models.AddData)]


def ts(text: str) -> Timestamp:
    return Timestamp.parse(text)


def state(value: str) -> models.SourceState:
    return models.SourceState(source_name="default", kind="odf/etag", value=value)


OBS = root_events(
    schema="[observed_at TIMESTAMP, station STRING, temp DOUBLE]", extra=VOCAB.strip()
)


def test_append_orders_by_event_time_and_ingests_one_file_per_iteration(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, OBS)
    source(
        repo,
        "obs-1.csv",
        "observed_at,station,temp\n2020-01-01T10:00:00Z,b,2.5\n2020-01-01T09:00:00Z,a,1.5\n",
    )
    source(repo, "obs-2.csv", "observed_at,station,temp\n2020-01-02T09:30:00.123Z,a,\n")

    assert outcome(repo) == (Status.CREATED, "", 3, 3)

    ds = dataset(repo)
    kinds = [type(e).__name__ for e in events(ds)]
    assert kinds == [
        "Seed",
        "SetPollingSource",
        "SetInfo",
        "SetLicense",
        "SetVocab",
        "SetDataSchema",
        "AddData",
        "AddData",
    ]
    schema_event = next(e for e in events(ds) if isinstance(e, models.SetDataSchema))
    assert decode_arrow_schema(schema_event.schema_) == pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("observed_at", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("station", pa.string()),
            pa.field("temp", pa.float64()),
        ]
    )
    first, second = data_events(ds)
    assert first.prev_offset is None and first.new_data is not None
    assert first.new_data.offset_interval == models.OffsetInterval(start=0, end=1)
    assert first.new_watermark == ts("2020-01-01T10:00:00Z")
    assert first.new_source_state == state("obs-1.csv")
    assert first.new_checkpoint is None
    assert second.prev_offset == 1 and second.new_data is not None
    assert second.new_data.offset_interval == models.OffsetInterval(start=2, end=2)
    assert second.new_watermark == ts("2020-01-02T09:30:00.123Z")
    assert second.new_source_state == state("obs-2.csv")
    assert [rows(t) for t in slices(ds)] == [
        [
            (0, 0, "2026-02-01T12:00:00Z", "2020-01-01T09:00:00Z", "a", 1.5),
            (1, 0, "2026-02-01T12:00:00Z", "2020-01-01T10:00:00Z", "b", 2.5),
        ],
        [(2, 0, "2026-02-01T12:00:00Z", "2020-01-02T09:30:00.123000Z", "a", None)],
    ]
    assert slices(ds)[0].schema.field("system_time").type == pa.timestamp("ms", tz="UTC")

    # Nothing new: no block, and the run says so.
    head = ds.head()
    assert outcome(repo, ts("2026-02-02T00:00:00Z")) == (Status.UP_TO_DATE, "", 0, 0)
    assert repo.odf.dataset(NAME).head() == head

    # A later file is picked up; the earlier ones are not read again.
    source(repo, "obs-3.csv", "observed_at,station,temp\n2019-12-31T00:00:00Z,c,0.5\n")
    assert outcome(repo, ts("2026-02-03T00:00:00Z")) == (Status.UPDATED, "", 1, 1)
    third = data_events(dataset(repo))[-1]
    assert third.new_data is not None
    assert third.new_data.offset_interval == models.OffsetInterval(start=3, end=3)
    # A late record does not move the watermark back.
    assert third.new_watermark == ts("2020-01-02T09:30:00.123Z")


LEDGER = root_events(
    schema="[observed_at TIMESTAMP, id STRING, amount BIGINT]",
    merge="{kind: Ledger, primaryKey: [id]}",
    extra=VOCAB.strip(),
)


def test_ledger_keeps_each_key_once_and_records_state_only_rounds(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, LEDGER)
    source(
        repo,
        "tx-1.csv",
        "observed_at,id,amount\n2020-01-02T00:00:00Z,B,20\n2020-01-01T00:00:00Z,A,10\n",
    )
    assert outcome(repo) == (Status.CREATED, "", 2, 2)  # SetDataSchema and AddData

    # Overlapping export: A again (with a changed amount, which a ledger ignores), C new.
    source(
        repo,
        "tx-2.csv",
        "observed_at,id,amount\n2020-01-01T00:00:00Z,A,99\n2020-01-03T00:00:00Z,C,30\n",
    )
    assert outcome(repo, ts("2026-02-02T00:00:00Z")) == (Status.UPDATED, "", 1, 1)

    # Only known keys: no data, but the source state moves (§1.7 case 3).
    source(repo, "tx-3.csv", "observed_at,id,amount\n2020-01-03T00:00:00Z,C,30\n")
    assert outcome(repo, ts("2026-02-03T00:00:00Z")) == (Status.UPDATED, "", 1, 0)

    ds = dataset(repo)
    first, second, third = data_events(ds)
    assert [rows(t, "system_time") for t in slices(ds)] == [
        [(0, 0, "2020-01-01T00:00:00Z", "A", 10), (1, 0, "2020-01-02T00:00:00Z", "B", 20)],
        [(2, 0, "2020-01-03T00:00:00Z", "C", 30)],
    ]
    assert first.new_checkpoint is not None and second.new_checkpoint is not None
    assert second.prev_checkpoint == first.new_checkpoint.physical_hash
    assert third.new_data is None
    assert third.prev_offset == 2
    assert third.new_checkpoint == second.new_checkpoint  # carried, not rewritten
    assert third.prev_checkpoint == second.new_checkpoint.physical_hash
    assert third.new_watermark == ts("2020-01-03T00:00:00Z")
    assert third.new_source_state == state("tx-3.csv")
    checkpoint = ds.layout.checkpoint_file(second.new_checkpoint.physical_hash)
    assert sorted(rows(pa.parquet.read_table(checkpoint))) == [("A",), ("B",), ("C",)]


SNAPSHOT = root_events(
    schema="[id STRING, name STRING, qty INT]",
    merge="{kind: Snapshot, primaryKey: [id]}",
)


def test_snapshot_emits_retractions_and_corrections_with_old_event_times(tmp_path: Path) -> None:
    events_yaml = SNAPSHOT.replace(
        'fetch: {kind: FilesGlob, path: "sources/*.csv"}',
        'fetch: {kind: FilesGlob, path: "sources/*.csv", eventTime: {kind: FromPath, pattern: "stock-(.+)\\\\.csv"}}',
    )
    repo = make_repo(tmp_path, events_yaml)
    source(repo, "stock-2020-01-01.csv", "id,name,qty\nA,apple,1\nB,bean,2\nC,corn,3\nD,date,4\n")
    source(repo, "stock-2020-01-02.csv", "id,name,qty\nB,bean,20\nC,corn,3\nD,dates,4\nE,egg,5\n")
    source(repo, "stock-2020-01-03.csv", "id,name,qty\nC,corn,3\nD,dates,4\nE,egg,5\n")
    assert outcome(repo) == (Status.CREATED, "", 1 + 3, 4 + 6 + 1)

    ds = dataset(repo)
    day1, day2, day3 = (rows(t, "system_time") for t in slices(ds))
    assert day1 == [
        (0, 0, "2020-01-01T00:00:00Z", "A", "apple", 1),
        (1, 0, "2020-01-01T00:00:00Z", "B", "bean", 2),
        (2, 0, "2020-01-01T00:00:00Z", "C", "corn", 3),
        (3, 0, "2020-01-01T00:00:00Z", "D", "date", 4),
    ]
    assert day2 == [
        (4, 1, "2020-01-01T00:00:00Z", "A", "apple", 1),
        (5, 2, "2020-01-01T00:00:00Z", "B", "bean", 2),
        (6, 3, "2020-01-02T00:00:00Z", "B", "bean", 20),
        (7, 2, "2020-01-01T00:00:00Z", "D", "date", 4),
        (8, 3, "2020-01-02T00:00:00Z", "D", "dates", 4),
        (9, 0, "2020-01-02T00:00:00Z", "E", "egg", 5),
    ]
    # Only B vanished: one retraction carrying B's latest values and event time.
    assert day3 == [(10, 1, "2020-01-02T00:00:00Z", "B", "bean", 20)]
    watermarks = [e.new_watermark for e in data_events(ds)]
    # The last slice holds only a retraction dated 2020-01-02, so the watermark stays.
    assert watermarks == [
        ts("2020-01-01T00:00:00Z"),
        ts("2020-01-02T00:00:00Z"),
        ts("2020-01-02T00:00:00Z"),
    ]


def _stored(ds: Dataset) -> set[str]:
    layout = ds.layout
    return {
        f"{d.name}/{p.name}"
        for d in (layout.blocks, layout.data, layout.checkpoints)
        if d.is_dir()
        for p in d.iterdir()
    }


def _failed_pull_leaves_nothing(repo: GitOpsRepo, expected_message: str) -> None:
    """The run fails with ``expected_message`` on the first file and, the dataset being
    new, nothing of it is written: a new dataset is created with its first data or not
    at all."""
    (result,) = reconcile(repo.root)
    assert result.status is Status.FAILED
    assert expected_message in result.message, result.message
    assert result.metadata_blocks == 0
    assert not (repo.root / "odf" / NAME).exists()


def _failed_pull_keeps_the_first_file(repo: GitOpsRepo, expected_message: str) -> None:
    """The run fails with ``expected_message`` on the second file and keeps the first: the
    dataset is created with it (its metadata, its schema and its data), as kamu keeps each
    iteration it committed."""
    (result,) = reconcile(repo.root)
    assert result.status is Status.FAILED
    assert expected_message in result.message, result.message
    assert result.message.endswith(
        "; what the files before it added is kept (1 record), and the next run starts again"
        " from this one"
    )
    assert (result.data_blocks, result.rows) == (2, 1)  # SetDataSchema, AddData
    assert [e.new_data is not None for e in data_events(dataset(repo))] == [True]


def test_a_malformed_csv_row_in_a_later_file_fails_the_pull_keeping_the_file_before(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path, OBS)
    source(repo, "obs-1.csv", "observed_at,station,temp\n2020-01-01T10:00:00Z,b,2.5\n")
    source(
        repo,
        "obs-2.csv",
        "observed_at,station,temp\n2020-01-02T00:00:00Z,a,1.0\n2020-01-02T01:00:00Z,a,warm\n",
    )
    _failed_pull_keeps_the_first_file(repo, "obs-2.csv: line 3")


def test_a_schema_change_in_a_later_file_fails_the_pull_keeping_the_file_before(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path, root_events(schema="null").replace("schema: null", "inferSchema: false")
    )
    source(repo, "a-1.csv", "a,b\n1,x\n")
    source(repo, "a-2.csv", "a,b,c\n2,y,z\n")
    _failed_pull_keeps_the_first_file(
        repo,
        "a-2.csv: the data does not match the dataset's schema (SetDataSchema): column 'c' is not in the dataset's schema",
    )
    # Once the file is fixed, a re-run ingests it, and each record is there exactly once.
    source(repo, "a-2.csv", "a,b\n2,y\n")
    assert outcome(repo) == (Status.UPDATED, "", 1, 1)
    assert [rows(t, "system_time", "event_time") for t in slices(dataset(repo))] == [
        [(0, 0, "1", "x")],
        [(1, 0, "2", "y")],
    ]


def test_a_failing_pipe_reports_its_exit_code_and_stderr(tmp_path: Path) -> None:
    events_yaml = OBS.replace(
        "      read:",
        "      prepare: [{kind: Pipe, command: [sh, -c, 'echo boom >&2; exit 3']}]\n      read:",
        1,
    )
    repo = make_repo(tmp_path, events_yaml)
    source(repo, "obs-1.csv", "observed_at,station,temp\n2020-01-01T10:00:00Z,b,2.5\n")
    _failed_pull_leaves_nothing(repo, "exited with code 3")
    (result,) = reconcile(repo.root)
    assert "boom" in result.message


def test_one_failing_dataset_does_not_stop_the_others(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, OBS)
    other = "org.example.other"
    repo.write(other, manifest(other, "Root", OBS.replace("sources/*.csv", "other/*.csv")))
    (repo.root / "other").mkdir()
    (repo.root / "other" / "o.csv").write_text(
        "observed_at,station,temp\n2020-01-01T00:00:00Z,z,9.0\n"
    )
    source(repo, "obs-1.csv", "observed_at,station,temp\nnot a time,b,2.5\n")
    results = {r.dataset: r for r in reconcile(repo.root)}
    assert results[NAME].status is Status.FAILED
    assert results[NAME].message.startswith("read failed: ReadError: ")  # a new dataset
    assert (results[other].status, results[other].rows) == (Status.CREATED, 1)
    assert [rows(t, "system_time") for t in slices(dataset(repo, other))] == [
        [(0, 0, "2020-01-01T00:00:00Z", "z", 9.0)]
    ]


class _Served:
    """What the test HTTP server answers at /data.csv, changeable between runs."""

    body = b""
    etag: str | None = None
    status = 200
    requests: ClassVar[list[dict[str, str]]] = []


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        _Served.requests.append(dict(self.headers))
        if _Served.status != 200:
            self.send_error(_Served.status)
            return
        if _Served.etag is not None and self.headers.get("If-None-Match") == _Served.etag:
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        if _Served.etag is not None:
            self.send_header("ETag", _Served.etag)
        self.send_header("Content-Length", str(len(_Served.body)))
        self.end_headers()
        self.wfile.write(_Served.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Served.requests.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def test_url_source_uses_etags_and_reports_http_errors(tmp_path: Path, server: str) -> None:
    events_yaml = OBS.replace(
        'fetch: {kind: FilesGlob, path: "sources/*.csv"}',
        f'fetch: {{kind: Url, url: "{server}/data.csv", headers: [{{name: Authorization, value: "Bearer ${{{{ env.TOKEN }}}}"}}]}}',
    )
    repo = make_repo(tmp_path, events_yaml)
    repo.allow_env(TOKEN=[f"{server}/"])
    _Served.body, _Served.etag, _Served.status = (
        b"observed_at,station,temp\n2020-01-01T00:00:00Z,a,1.0\n",
        '"v1"',
        200,
    )
    env = {"TOKEN": "s3cret"}
    (first,) = reconcile(repo.root, T1, env)
    assert (first.status, first.data_blocks, first.rows) == (Status.CREATED, 2, 1)
    assert _Served.requests[-1]["Authorization"] == "Bearer s3cret"
    assert data_events(dataset(repo))[-1].new_source_state == models.SourceState(
        source_name="default", kind="odf/etag", value='"v1"'
    )

    (same,) = reconcile(repo.root, ts("2026-02-02T00:00:00Z"), env)  # answered 304
    assert (same.status, same.data_blocks) == (Status.UP_TO_DATE, 0)
    assert _Served.requests[-1]["If-None-Match"] == '"v1"'

    _Served.body, _Served.etag = _Served.body + b"2020-01-02T00:00:00Z,b,2.0\n", '"v2"'
    (changed,) = reconcile(repo.root, ts("2026-02-03T00:00:00Z"), env)
    assert (changed.status, changed.data_blocks, changed.rows) == (Status.UPDATED, 1, 2)

    head = dataset(repo).head()
    for status, text in ((404, "SourceNotFoundError"), (500, "SourceUnreachableError")):
        _Served.status = status
        (failed,) = reconcile(repo.root, ts("2026-02-04T00:00:00Z"), env)
        assert failed.status is Status.FAILED
        assert failed.message.startswith(f"fetch failed: {text}: "), failed.message
        assert "s3cret" not in failed.message
        assert dataset(repo).head() == head


def test_a_url_without_etag_or_date_is_fetched_again_only_when_asked(
    tmp_path: Path, server: str
) -> None:
    events_yaml = OBS.replace(
        'fetch: {kind: FilesGlob, path: "sources/*.csv"}',
        f'fetch: {{kind: Url, url: "{server}/data.csv"}}',
    )
    repo = make_repo(tmp_path, events_yaml)
    _Served.body, _Served.etag, _Served.status = (
        b"observed_at,station,temp\n2020-01-01T00:00:00Z,a,1.0\n",
        None,
        200,
    )
    (first,) = reconcile(repo.root, T1)
    assert (first.status, first.rows) == (Status.CREATED, 1)
    assert data_events(dataset(repo))[-1].new_source_state is None
    fetched = len(_Served.requests)

    _Served.body += b"2020-01-02T00:00:00Z,b,2.0\n"
    (again,) = reconcile(repo.root, ts("2026-02-02T00:00:00Z"))
    assert (again.status, again.message) == (
        Status.UP_TO_DATE,
        "source is uncacheable (it gave no ETag or date)",
    )
    assert len(_Served.requests) == fetched  # not even asked

    (forced,) = reconcile(repo.root, ts("2026-02-03T00:00:00Z"), fetch_uncacheable=True)
    assert (forced.status, forced.rows) == (Status.UPDATED, 2)
    assert len(_Served.requests) == fetched + 1


def test_set_vocab_renames_every_system_column(tmp_path: Path) -> None:
    vocab = """- kind: SetVocab
      offsetColumn: seq
      operationTypeColumn: change
      systemTimeColumn: written_at
      eventTimeColumn: observed_at"""
    repo = make_repo(
        tmp_path,
        root_events(
            schema="[observed_at TIMESTAMP, id STRING, offset BIGINT]",
            merge="{kind: Snapshot, primaryKey: [id]}",
            extra=vocab,
        ),
    )
    source(repo, "1.csv", "observed_at,id,offset\n2020-01-01T00:00:00Z,a,7\n")
    source(repo, "2.csv", "observed_at,id,offset\n")
    assert outcome(repo) == (Status.CREATED, "", 3, 2)
    first, second = slices(dataset(repo))
    assert first.column_names == ["seq", "change", "written_at", "observed_at", "id", "offset"]
    assert rows(second) == [(1, 1, "2026-02-01T12:00:00Z", "2020-01-01T00:00:00Z", "a", 7)]


def test_preprocess_queries_run_over_the_input_view_in_steps(tmp_path: Path) -> None:
    preprocess = """
      preprocess:
        kind: Sql
        engine: spark
        queries:
          - alias: celsius
            query: SELECT observed_at, station, (temp_f - 32) * 5 / 9 AS temp FROM input
          - query: SELECT observed_at, upper(station) AS station, round(temp, 1) AS temp FROM celsius WHERE temp > -40"""
    events_yaml = root_events(
        schema="[observed_at TIMESTAMP, station STRING, temp_f DOUBLE]", extra=VOCAB.strip()
    ).replace(
        "      merge: {kind: Append}", preprocess.strip("\n") + "\n      merge: {kind: Append}"
    )
    repo = make_repo(tmp_path, events_yaml)
    source(
        repo,
        "1.csv",
        "observed_at,station,temp_f\n2020-01-01T00:00:00Z,a,50\n2020-01-01T01:00:00Z,b,-60\n",
    )
    assert outcome(repo) == (Status.CREATED, "", 2, 1)
    assert [rows(t, "system_time") for t in slices(dataset(repo))] == [
        [(0, 0, "2020-01-01T00:00:00Z", "A", 10.0)]
    ]


def test_default_preprocess_parses_event_time_and_renames_system_columns(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path, root_events(schema="null").replace("schema: null", "inferSchema: false")
    )
    source(
        repo,
        "1.csv",
        "event_time,offset,System_Time,v,_OFFSET\n2020-01-01T10:00:00Z,5,a,x,7\n"
        "1999-12-31T23:59:59.5Z,6,b,y,8\n",
    )
    assert outcome(repo) == (Status.CREATED, "", 2, 2)
    (data,) = slices(dataset(repo))
    # a system column's name in another case too: Spark holds them as one column; and
    # the data's own _OFFSET keeps its name, which Spark would not tell from _offset
    assert data.column_names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "__offset",
        "_System_Time",
        "v",
        "_OFFSET",
    ]
    assert rows(data, "system_time") == [
        (0, 0, "1999-12-31T23:59:59.500000Z", "6", "b", "y", "8"),
        (1, 0, "2020-01-01T10:00:00Z", "5", "a", "x", "7"),
    ]


def test_gzip_source_and_the_same_inputs_give_the_same_hashes(tmp_path: Path) -> None:
    events_yaml = OBS.replace(
        '"sources/*.csv"}', '"sources/*.csv.gz"}\n      prepare: [{kind: Decompress, format: Gzip}]'
    )
    hashes = []
    for attempt in ("a", "b"):
        repo = make_repo(tmp_path / attempt, events_yaml)
        text = b"observed_at,station,temp\n2020-01-01T00:00:00Z,a,1.0\n2020-01-01T00:00:00Z,b,2.0\n"
        (repo.root / "sources" / "1.csv.gz").write_bytes(gzip.compress(text, mtime=0))
        assert outcome(repo) == (Status.CREATED, "", 2, 2)
        (added,) = data_events(dataset(repo))
        assert added.new_data is not None
        hashes.append((added.new_data.logical_hash, added.new_data.physical_hash))
    assert hashes[0] == hashes[1]


def test_a_read_schema_column_named_like_a_system_column_in_another_case_stops_the_run(
    spark: SparkSession,
) -> None:
    """The plan refuses it; a manifest merged past the plan stops here, before writing."""
    frame = spark.createDataFrame([(1, 2)], "event_time BIGINT, Offset BIGINT")
    with pytest.raises(BadInputSchemaError) as refused:
        check_columns(frame.drop("event_time"), models.DatasetVocabulary())
    assert str(refused.value) == (
        "the data has a column 'Offset', which differs only in case from the system column"
        " 'offset' and which Spark (spark.sql.caseSensitive=false) cannot hold apart from it;"
        " rename it in the read schema or the preprocess query"
    )
