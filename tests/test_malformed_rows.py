"""Malformed rows in a source file: each is reported at its line with its reason, up to
20, the rest counted; the pull then fails and the dataset keeps nothing of the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, events, manifest, reconcile, root_events

from reconciler.apply.outcome import Status
from reconciler.odf import models

pytestmark = pytest.mark.usefixtures("spark")

NAME = "org.example.obs"
OBS = root_events(
    schema="[observed_at TIMESTAMP, station STRING, temp DOUBLE]",
    extra="- kind: SetVocab\n      eventTimeColumn: observed_at",
)
HEADER = "observed_at,station,temp\n"


def _failed_run(tmp_path: Path, text: str) -> tuple[str, Path]:
    """Reconcile a new dataset over one source file ``text``; the run's error, and the
    file. No data of it may be kept (nor, as apply now has it, the dataset)."""
    repo = GitOpsRepo.create(tmp_path)
    repo.write(NAME, manifest(NAME, "Root", OBS))
    (tmp_path / "sources").mkdir()
    path = tmp_path / "sources" / "obs-1.csv"
    path.write_text(text)
    (result,) = reconcile(repo.root)
    assert result.status is Status.FAILED
    assert "ReadError: " in result.message, result.message
    ds = repo.odf.dataset(NAME)
    written = events(ds) if ds.exists() else []
    assert not any(isinstance(e, models.AddData | models.SetDataSchema) for e in written)
    # From the error on: apply may say before it at which stage the dataset failed.
    return result.message[result.message.index("ReadError: ") :], path


def test_three_malformed_rows_are_each_reported_with_their_line_and_reason(
    tmp_path: Path,
) -> None:
    text = (
        HEADER
        + "2020-01-01T00:00:00Z,a,1.0\n"
        + "2020-01-01T01:00:00Z,a,warm\n"
        + "2020-01-01T02:00:00Z,a\n"
        + "2020-01-01T03:00:00Z,a,3.0\n"
        + "yesterday,b,4.0\n"
    )
    message, path = _failed_run(tmp_path, text)
    assert message == (
        f"ReadError: {path}: line 3: malformed record: 2020-01-01T01:00:00Z,a,warm: "
        "column temp (DOUBLE): 'warm' is not a valid DOUBLE\n"
        f"{path}: line 4: malformed record: 2020-01-01T02:00:00Z,a: "
        "it has 2 fields, the schema has 3\n"
        f"{path}: line 6: malformed record: yesterday,b,4.0: "
        "column observed_at (TIMESTAMP): 'yesterday' is not a valid TIMESTAMP"
    )


def test_twenty_five_malformed_rows_report_the_first_twenty_and_count_the_other_five(
    tmp_path: Path,
) -> None:
    good = "2020-01-01T00:00:00Z,a,1.0\n"
    text = HEADER + good + "".join(f"2020-01-01T00:00:00Z,a,t{i}\n" for i in range(25)) + good
    message, path = _failed_run(tmp_path, text)
    assert message.split("\n") == [
        ("ReadError: " if i == 0 else "")
        + f"{path}: line {i + 3}: malformed record: 2020-01-01T00:00:00Z,a,t{i}: "
        f"column temp (DOUBLE): 't{i}' is not a valid DOUBLE"
        for i in range(20)
    ] + [f"{path}: and 5 more malformed records"]
