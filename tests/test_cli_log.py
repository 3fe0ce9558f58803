"""`reconcile log` on a real chain on disk, in every output format."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from cli_here import reconcile_here

from reconciler.inspection import log as log_view
from reconciler.odf import DatasetId, Multihash, Timestamp, models
from reconciler.odf.arrow_schema import encode_arrow_schema
from reconciler.odf.repository import OdfRepository

DID = DatasetId.from_public_key(bytes(range(32)))
DID_DAILY = DatasetId.from_public_key(bytes(range(1, 33)))
DID_GONE = DatasetId.from_public_key(bytes(range(2, 34)))
T0 = Timestamp.parse("2050-01-01T12:00:00Z")
T1 = Timestamp.parse("2050-01-02T00:00:00.5Z")
UTC_MS = pa.timestamp("ms", tz="UTC")
SCHEMA = encode_arrow_schema(
    pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", UTC_MS, nullable=False),
            pa.field("event_time", UTC_MS),
            pa.field("city", pa.string()),
            pa.field("temp", pa.decimal128(5, 1)),
        ]
    )
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dataset = OdfRepository(tmp_path / "odf").dataset("org.example.ds")
    dataset.append_event(models.Seed(dataset_id=DID, dataset_kind=models.DatasetKind.ROOT), T0)
    dataset.append_event(models.SetInfo(description="Example", keywords=["a", "b"]), T0)
    dataset.append_event(models.SetDataSchema(schema=SCHEMA), T0)
    dataset.append_event(
        models.AddData(
            new_data=models.DataSlice(
                logical_hash=Multihash.sha3_256(b"l"),
                physical_hash=Multihash.sha3_256(b"p"),
                offset_interval=models.OffsetInterval(start=0, end=9),
                size=1234,
            ),
            new_watermark=Timestamp.parse("2049-12-31T00:00:00Z"),
        ),
        T1,
    )
    return tmp_path


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``reconcile -C repo ARGS`` in this process (``cli_here``): ``log`` starts no Spark."""
    return reconcile_here(["-C", str(repo), *args], spark=False)


def test_log_text_shows_blocks_newest_first_with_data_summary(repo: Path) -> None:
    result = run(repo, "log", "org.example.ds")
    assert result.returncode == 0, result.stderr
    heads = [line for line in result.stdout.splitlines() if line.startswith("Block #")]
    assert [h.split(":")[0] for h in heads] == ["Block #3", "Block #2", "Block #1", "Block #0"]
    first = result.stdout.split("\n\n")[0].splitlines()
    assert first[1:9] == [
        "SystemTime: 2050-01-02T00:00:00.500Z",
        "Kind: AddData",
        "Offset.Start: 0",
        "Offset.End: 9",
        "NumRecords: 10",
        f"LogicalHash: {Multihash.sha3_256(b'l')}",
        f"PhysicalHash: {Multihash.sha3_256(b'p')}",
        "Size: 1234",
    ]
    assert "NewWatermark: 2049-12-31T00:00:00Z" in first
    assert f"DatasetId: {DID}" in result.stdout


def test_log_json_is_the_odf_json_form_of_each_block(repo: Path) -> None:
    result = run(repo, "log", "org.example.ds", "--output", "json")
    entries = json.loads(result.stdout)
    assert [e["block"]["sequenceNumber"] for e in entries] == [3, 2, 1, 0]
    assert entries[2]["block"]["event"] == {
        "kind": "SetInfo",
        "description": "Example",
        "keywords": ["a", "b"],
    }
    assert entries[1]["block"]["event"] == {
        "kind": "SetDataSchema",
        "schema": base64.b64encode(SCHEMA).decode(),
    }
    dataset = OdfRepository(repo / "odf").dataset("org.example.ds")
    assert entries[0]["blockHash"] == dataset.head()
    assert models.MetadataBlock.model_validate(entries[0]["block"]) == dataset.get_block(
        dataset.head()
    )


def test_log_yaml_and_limit(repo: Path) -> None:
    result = run(repo, "log", "org.example.ds", "-o", "yaml", "--limit", "2")
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["block"]["event"]["kind"] for d in docs] == ["AddData", "SetDataSchema"]


def test_log_of_an_unknown_dataset_fails_with_its_name(repo: Path) -> None:
    result = run(repo, "log", "org.example.missing")
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f"error: dataset 'org.example.missing' not found in {repo / 'odf'}"
    )
    # A name close to a dataset's is told which one it may mean.
    typo = run(repo, "log", "org.example.dss")
    assert (typo.returncode, typo.stderr.strip()) == (
        1,
        f"error: dataset 'org.example.dss' not found in {repo / 'odf'}; did you mean"
        " org.example.ds?",
    )


def test_log_reports_a_tampered_block_instead_of_crashing(repo: Path) -> None:
    dataset = OdfRepository(repo / "odf").dataset("org.example.ds")
    path = dataset.layout.block(dataset.head())
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    result = run(repo, "log", "org.example.ds")
    assert result.returncode == 1
    assert "hashes to" in result.stderr and str(dataset.head()) in result.stderr


def test_log_text_shows_a_set_data_schema_as_one_line_per_column(repo: Path) -> None:
    result = run(repo, "log", "org.example.ds", "--limit", "2")
    schema_block = result.stdout.split("\n\n")[1]
    dataset = OdfRepository(repo / "odf").dataset("org.example.ds")
    schema_hash = next(h for h, b in dataset.iter_blocks() if b.sequence_number == 2)
    assert schema_block == (
        f"Block #2: {schema_hash}\n"
        "SystemTime: 2050-01-01T12:00:00Z\n"
        "Kind: SetDataSchema\n"
        "Schema:\n"
        "  offset: int64 not null\n"
        "  op: int32 not null\n"
        "  system_time: timestamp[ms, tz=UTC] not null\n"
        "  event_time: timestamp[ms, tz=UTC]\n"
        "  city: string\n"
        "  temp: decimal128(5, 1)\n"
    )


def test_log_yaml_carries_the_schema_columns_beside_the_raw_block(repo: Path) -> None:
    result = run(repo, "log", "org.example.ds", "-o", "yaml", "--limit", "2")
    schema_entry = list(yaml.safe_load_all(result.stdout))[1]
    assert schema_entry["block"]["event"]["schema"] == base64.b64encode(SCHEMA).decode()
    assert schema_entry["schema"] == [
        {"name": "offset", "type": "int64", "nullable": False},
        {"name": "op", "type": "int32", "nullable": False},
        {"name": "system_time", "type": "timestamp[ms, tz=UTC]", "nullable": False},
        {"name": "event_time", "type": "timestamp[ms, tz=UTC]", "nullable": True},
        {"name": "city", "type": "string", "nullable": True},
        {"name": "temp", "type": "decimal128(5, 1)", "nullable": True},
    ]


def test_log_text_keeps_undecodable_schema_bytes_and_says_why(tmp_path: Path) -> None:
    dataset = OdfRepository(tmp_path / "odf").dataset("org.example.bad")
    dataset.append_event(models.Seed(dataset_id=DID, dataset_kind=models.DatasetKind.ROOT), T0)
    dataset.append_event(models.SetDataSchema(schema=b"\x01\x02"), T0)
    entries = list(dataset.iter_blocks())[:1]
    assert log_view.render_text(entries).splitlines()[2:] == [
        "Kind: SetDataSchema",
        "Schema: AQI= (not a readable Arrow schema: malformed Arrow schema: read past the end at 0)",
    ]
    assert "schema" not in json.loads(log_view.render_json(entries))[0]


def slice_(start: int, end: int) -> models.DataSlice:
    return models.DataSlice(
        logical_hash=Multihash.sha3_256(b"l2"),
        physical_hash=Multihash.sha3_256(b"p2"),
        offset_interval=models.OffsetInterval(start=start, end=end),
        size=99,
    )


def derivative(repo: Path) -> list[log_view.Entry]:
    """A derivative of ``org.example.ds`` and of a dataset no longer in the repository,
    with two transform runs, its blocks newest first."""
    odf = OdfRepository(repo / "odf")
    source_head = odf.dataset("org.example.ds").head()
    dataset = odf.dataset("org.example.ds.daily")
    seed = models.Seed(dataset_id=DID_DAILY, dataset_kind=models.DatasetKind.DERIVATIVE)
    dataset.append_event(seed, T0)
    inputs = [
        models.TransformInput(dataset_ref=DID, alias="ds"),
        models.TransformInput(dataset_ref=DID_GONE, alias="gone"),
    ]
    query = models.SqlQueryStep(query="SELECT * FROM ds JOIN gone USING (city)")
    sql = models.TransformSql(engine="spark", queries=[query])
    dataset.append_event(models.SetTransform(inputs=inputs, transform=sql), T0)
    dataset.append_event(models.SetDataSchema(schema=SCHEMA), T0)
    first_run = [
        models.ExecuteTransformInput(dataset_id=DID, new_block_hash=source_head, new_offset=9),
        models.ExecuteTransformInput(dataset_id=DID_GONE, new_block_hash=source_head, new_offset=3),
    ]
    dataset.append_event(models.ExecuteTransform(query_inputs=first_run, new_data=slice_(0, 4)), T0)
    source_next = odf.dataset("org.example.ds").append_event(models.SetInfo(), T1)
    second_run = [
        models.ExecuteTransformInput(
            dataset_id=DID,
            prev_block_hash=source_head,
            new_block_hash=source_next,
            prev_offset=9,
            new_offset=14,
        ),
        models.ExecuteTransformInput(
            dataset_id=DID_GONE, prev_block_hash=source_head, prev_offset=3
        ),
    ]
    dataset.append_event(
        models.ExecuteTransform(query_inputs=second_run, prev_offset=4, new_data=slice_(5, 7)), T0
    )
    return list(dataset.iter_blocks())


def test_log_text_names_each_transform_input_next_to_its_id(repo: Path) -> None:
    entries = derivative(repo)
    source = OdfRepository(repo / "odf").dataset("org.example.ds")
    source_next, source_head = (h for h, _ in list(source.iter_blocks())[:2])
    names = OdfRepository(repo / "odf").names_by_id()
    text = log_view.render_text([entries[0], entries[3]], names)
    assert text == (
        f"Block #4: {entries[0][0]}\n"
        "SystemTime: 2050-01-01T12:00:00Z\n"
        "Kind: ExecuteTransform\n"
        "Offset.Start: 5\n"
        "Offset.End: 7\n"
        "NumRecords: 3\n"
        f"LogicalHash: {Multihash.sha3_256(b'l2')}\n"
        f"PhysicalHash: {Multihash.sha3_256(b'p2')}\n"
        "Size: 99\n"
        "QueryInputs:\n"
        f"  - DatasetId: {DID}\n"
        "    Name: org.example.ds\n"
        f"    PrevBlockHash: {source_head}\n"
        f"    NewBlockHash: {source_next}\n"
        "    PrevOffset: 9\n"
        "    NewOffset: 14\n"
        "    NumRecords: 5\n"
        f"  - DatasetId: {DID_GONE}\n"
        f"    PrevBlockHash: {source_head}\n"
        "    PrevOffset: 3\n"
        "PrevOffset: 4\n"
        "\n"
        f"Block #1: {entries[3][0]}\n"
        "SystemTime: 2050-01-01T12:00:00Z\n"
        "Kind: SetTransform\n"
        "Inputs:\n"
        f"  - DatasetRef: {DID}\n"
        "    Name: org.example.ds\n"
        "    Alias: ds\n"
        f"  - DatasetRef: {DID_GONE}\n"
        "    Alias: gone\n"
        "Transform:\n"
        "  Kind: Sql\n"
        "  Engine: spark\n"
        "  Queries:\n"
        "    - Query: SELECT * FROM ds JOIN gone USING (city)\n"
    )


def test_log_json_and_yaml_map_the_known_input_ids_to_names_beside_the_block(
    repo: Path,
) -> None:
    entries = derivative(repo)
    names = OdfRepository(repo / "odf").names_by_id()
    from_json = json.loads(log_view.render_json(entries, names))
    from_yaml = list(yaml.safe_load_all(log_view.render_yaml(entries, names)))
    for documents in (from_json, from_yaml):
        assert [d.get("datasetNames") for d in documents] == [
            {DID: "org.example.ds"},
            {DID: "org.example.ds"},
            None,
            {DID: "org.example.ds"},
            None,
        ]
        assert documents[0]["block"]["event"]["queryInputs"][0]["datasetId"] == DID
