"""`reconcile log` on a real chain on disk, in every output format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reconciler.odf import DatasetId, Multihash, Timestamp, models
from reconciler.odf.repository import OdfRepository

DID = DatasetId.from_public_key(bytes(range(32)))
T0 = Timestamp.parse("2050-01-01T12:00:00Z")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dataset = OdfRepository(tmp_path / "odf").dataset("org.example.ds")
    dataset.append_event(models.Seed(dataset_id=DID, dataset_kind=models.DatasetKind.ROOT), T0)
    dataset.append_event(models.SetInfo(description="Example", keywords=["a", "b"]), T0)
    dataset.append_event(models.SetDataSchema(schema=b"\x01\x02"), T0)
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
        Timestamp.parse("2050-01-02T00:00:00.5Z"),
    )
    return tmp_path


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=False,
    )


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
    assert entries[1]["block"]["event"] == {"kind": "SetDataSchema", "schema": "AQI="}
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


def test_log_reports_a_tampered_block_instead_of_crashing(repo: Path) -> None:
    dataset = OdfRepository(repo / "odf").dataset("org.example.ds")
    path = dataset.layout.block(dataset.head())
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    result = run(repo, "log", "org.example.ds")
    assert result.returncode == 1
    assert "hashes to" in result.stderr and str(dataset.head()) in result.stderr
