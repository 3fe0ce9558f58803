"""A chain holding a block whose bytes hash to its name but whose content is malformed.

Only someone writing blocks by hand makes one (a pull request can commit any file under
``odf/``), so ``verify`` must report it as a finding that names the block, not stop with
an ``AttributeError`` from whatever rule first reads the missing field, as it did for a
table lacking a required field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from reconciler.cli import app
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import OdfRepository

NAME = "org.example.forged"
WHEN = Timestamp.parse("2026-01-01T00:00:00Z")


def forged_chain(root: Path) -> str:
    """A Seed, then a SetPollingSource with no ``fetch``; returns the second block's hash."""
    dataset = OdfRepository(root / "odf").dataset(NAME)
    seed = models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT)
    dataset.append_event(seed, WHEN)
    source = models.SetPollingSource.model_construct(
        fetch=None, read=models.ReadStepCsv(), merge=models.MergeStrategyAppend()
    )
    return str(dataset.append_event(source, WHEN))


def test_verify_names_a_block_lacking_a_required_field(tmp_path: Path) -> None:
    forged = forged_chain(tmp_path)
    result = CliRunner().invoke(app, ["-C", str(tmp_path), "verify", "--integrity"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[:2] == [
        f"{NAME}: invalid",
        f"  block {forged}: malformed metadata block content:"
        " SetPollingSource lacks its required fetch",
    ]
    assert lines[2].startswith("1 dataset: 0 valid, 1 invalid in ")
    assert "Traceback" not in result.output


def test_log_names_the_block_too(tmp_path: Path) -> None:
    forged = forged_chain(tmp_path)
    result = CliRunner().invoke(app, ["-C", str(tmp_path), "log", NAME])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"error: {NAME}: block {forged}: malformed metadata block content:"
        " SetPollingSource lacks its required fetch"
    )
