"""The merge cases of ``vectors/merge-cases.json``, reproduced through ``reconcile``.

Each case is turned into a real dataset: a manifest, source CSV files for each round, and
a ``reconcile`` run per round; the committed slice is then compared with the case. The
conversion is generic over the shape of a case, not over its id:

- ``prev_ledger`` + ``new_snapshot``: the previous rows are ingested as a first snapshot,
  the new snapshot as a second; the second slice must hold ``expected_output`` (a NULL
  event time there means "the fallback", which is the run's system time here). Integer
  event times (kamu's tests use years) become dates ``YYYY-01-01``.
- ``ledger_history`` + ``expected_state``: the projection a Snapshot merge starts from,
  computed by the same function the checkpoint rebuild uses.
- ``input_csv`` (+ ``read_schema_ddl``): one ingest; rows, watermark and the Parquet
  schema must be exactly as expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import load_vectors
from gitops_repo import GitOpsRepo, events, manifest, reconcile, rows, slices
from pyspark.sql import SparkSession

from reconciler.apply.outcome import Status
from reconciler.ingest.checkpoints import project
from reconciler.odf import Timestamp, models
from reconciler.odf.integrity import check_integrity

CASES = load_vectors("merge-cases.json")["cases"]
NAME = "org.example.case"
ROUND_1 = Timestamp.parse("2000-01-01T00:00:00Z")
ROUND_2 = Timestamp.parse("2000-01-02T00:00:00Z")


def _ids(shape: str) -> list[Any]:
    return [pytest.param(c, id=c["id"]) for c in CASES if shape in c]


def _is_year(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int) for v in present)


def _ddl_type(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if present and all(isinstance(v, int) for v in present):
        return "BIGINT"
    if present and all(isinstance(v, int | float) for v in present):
        return "DOUBLE"
    return "STRING"


def _csv(columns: list[str], records: list[list[Any]], event: str, years: bool) -> str:
    def cell(name: str, value: Any) -> str:
        if value is None:
            return ""
        if name == event and years:
            return f"{value:04d}-01-01"
        return str(value)

    lines = [",".join(columns)] + [
        ",".join(cell(n, v) for n, v in zip(columns, r, strict=True)) for r in records
    ]
    return "\n".join(lines) + "\n"


def _merge_yaml(merge: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in merge.items() if v is not None})


def _root(schema: list[str], merge: dict[str, Any], event: str) -> str:
    vocab = (
        f"\n    - kind: SetVocab\n      eventTimeColumn: {event}" if event != "event_time" else ""
    )
    return f"""
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/*.csv"}}
      read: {{kind: Csv, header: true, schema: {json.dumps(schema)}}}
      merge: {_merge_yaml(merge)}{vocab}
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
    """


def _repo(tmp_path: Path, events_yaml: str) -> GitOpsRepo:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(NAME, manifest(NAME, "Root", events_yaml))
    (tmp_path / "sources").mkdir()
    return repo


def _run(repo: GitOpsRepo, system_time: Timestamp) -> None:
    (result,) = reconcile(repo.root, system_time)
    assert result.status in (Status.CREATED, Status.UPDATED), result.message


@pytest.mark.parametrize("case", _ids("new_snapshot"))
def test_snapshot_case(case: dict[str, Any], tmp_path: Path, spark: SparkSession) -> None:
    merge = case["config"]["merge"]
    event = (case["config"].get("vocab") or {}).get("eventTimeColumn", "event_time")
    prev, new = case["prev_ledger"], case["new_snapshot"]
    assert all(op == 0 for op in (r[prev["columns"].index("op")] for r in prev["rows"]))
    columns = new["columns"]
    prev_rows = [[r[prev["columns"].index(c)] for c in columns] for r in prev["rows"]]
    values = {c: [r[i] for r in prev_rows + new["rows"]] for i, c in enumerate(columns)}
    years = _is_year(values[event])
    schema = [f"{c} {'DATE' if c == event and years else _ddl_type(values[c])}" for c in columns]
    repo = _repo(tmp_path, _root(schema, merge, event))
    (repo.root / "sources" / "1.csv").write_text(_csv(columns, prev_rows, event, years))
    _run(repo, ROUND_1)
    (repo.root / "sources" / "2.csv").write_text(_csv(columns, new["rows"], event, years))
    _run(repo, ROUND_2)

    ds = repo.odf.dataset(NAME)
    assert check_integrity(ds) == []
    second = slices(ds)[1]
    expected_columns = case["expected_output"]["columns"]
    fallback = "2000-01-02" if years else "2000-01-02T00:00:00Z"

    def expected(record: list[Any]) -> tuple[Any, ...]:
        out = []
        for name, value in zip(expected_columns, record, strict=True):
            if name == event:
                value = fallback if value is None else (f"{value:04d}-01-01" if years else value)
            out.append(value)
        return tuple(out)

    assert rows(second.select(expected_columns)) == [
        expected(r) for r in case["expected_output"]["rows"]
    ]
    first_offset = len(prev_rows)
    assert second["offset"].to_pylist() == list(range(first_offset, first_offset + second.num_rows))


@pytest.mark.parametrize("case", _ids("ledger_history"))
def test_state_projection_case(case: dict[str, Any], spark: SparkSession) -> None:
    history = case["ledger_history"]
    frame = spark.createDataFrame(history["rows"], history["columns"])
    vocab = models.DatasetVocabulary(event_time_column=case["config"]["eventTimeColumn"])
    state = project(frame, case["config"]["primaryKey"], vocab)
    expected_columns = [c for c in case["expected_state"]["columns"] if c != "op"]
    got = sorted(tuple(r) for r in state.select(*expected_columns).collect())
    want = sorted(
        tuple(r[case["expected_state"]["columns"].index(c)] for c in expected_columns)
        for r in case["expected_state"]["rows"]
    )
    assert got == want


def _parquet_schema(path: Path) -> str:
    """The file's Parquet schema in the notation of the vectors."""
    parts = []
    for col in pq.ParquetFile(path).schema:
        repetition = "REQUIRED" if col.max_definition_level == 0 else "OPTIONAL"
        logical = json.loads(col.logical_type.to_json()) if col.logical_type.type != "NONE" else {}
        kind = logical.get("Type", "")
        if kind == "Timestamp":
            unit = {"milliseconds": "MILLIS", "microseconds": "MICROS"}[logical["timeUnit"]]
            note = f" (TIMESTAMP({unit},{str(logical['isAdjustedToUTC']).lower()}))"
        elif kind:
            note = f" ({kind.upper()})"
        else:
            note = ""
        parts.append(f"{repetition} {col.physical_type} {col.name}{note}")
    return "; ".join(parts)


@pytest.mark.parametrize("case", _ids("input_csv"))
def test_writer_case(case: dict[str, Any], tmp_path: Path, spark: SparkSession) -> None:
    config = case["config"]
    schema = [s.strip() for s in config["read_schema_ddl"].split(",")]
    repo = _repo(tmp_path, _root(schema, config["merge"], "event_time"))
    (repo.root / "sources" / "1.csv").write_text(case["input_csv"])
    _run(repo, Timestamp.parse(config["system_time"]))

    ds = repo.odf.dataset(NAME)
    assert check_integrity(ds) == []
    (data,) = slices(ds)
    expected = case["expected_rows"]
    assert data.column_names == expected["columns"]
    assert rows(data) == [tuple(r) for r in expected["rows"]]
    (add_data,) = [e for e in events(ds) if isinstance(e, models.AddData)]
    assert add_data.new_watermark == Timestamp.parse(case["expected_new_watermark"])
    assert add_data.new_data is not None
    path = ds.layout.data_file(add_data.new_data.physical_hash)
    assert _parquet_schema(path) == case["expected_parquet_schema"]
