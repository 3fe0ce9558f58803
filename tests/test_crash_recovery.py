"""A reconcile killed at any point leaves every chain valid, and the next run finishes
the work exactly once.

The crash is real: ``reconcile`` runs in its own process, which dies with ``os._exit``
(no cleanup, no ``finally``, like a SIGKILL or a lost machine) just before its k-th
block append. The process is stopped at a chosen point rather than at a random time so
that each interesting window is hit every run: half-appended metadata, a data file in
place but no block naming it, a SetDataSchema without its data, one of two files
ingested, a derivative's files without its blocks. The next ``reconcile`` must then
bring the repository to exactly the state one uninterrupted run gives: the same events,
the same records, and no file that no block names.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gitops_repo import (
    GitOpsRepo,
    derivative_events,
    events,
    manifest,
    reconcile,
    root_events,
    rows,
    slices,
)

from reconciler.apply.outcome import Status
from reconciler.odf import Timestamp, models
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset

pytestmark = pytest.mark.usefixtures("spark")

WHEN = "2026-03-01T00:00:00Z"
ROOT = "org.example.readings"
DERIVED = "org.example.scaled"

# Runs the CLI, dying just before the Dataset.append call (every block, the Seed included) numbered LIMIT + 1.
CRASHING_RECONCILE = textwrap.dedent(
    """
    import os, sys
    from reconciler.odf.repository import Dataset
    limit, calls = int(sys.argv[1]), [0]
    original = Dataset.append

    def append(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > limit:
            os._exit(137)
        return original(self, *args, **kwargs)

    Dataset.append = append
    from reconciler.cli import app
    app(sys.argv[2:], prog_name="reconcile")
    """
)


def build(root: Path) -> GitOpsRepo:
    repo = GitOpsRepo.create(root)
    repo.write(ROOT, manifest(ROOT, "Root", root_events(schema="[a BIGINT, b STRING]")))
    query = f"SELECT op, event_time, a * 10 AS a10, b FROM `{ROOT}`"
    repo.write(DERIVED, manifest(DERIVED, "Derivative", derivative_events([ROOT], query)))
    (root / "sources").mkdir()
    (root / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    (root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    repo.commit("datasets")
    return repo


def summary(ds: Dataset) -> tuple[list[str], list[list[tuple[object, ...]]]]:
    """What must not depend on a crash: the events, in order, and every record."""
    return [type(e).__name__ for e in events(ds)], [rows(t) for t in slices(ds)]


def unreferenced_files(ds: Dataset) -> list[str]:
    named = set()
    for e in events(ds):
        if isinstance(e, models.AddData | models.ExecuteTransform):
            if e.new_data is not None:
                named.add(ds.layout.data_file(e.new_data.physical_hash))
            if e.new_checkpoint is not None:
                named.add(ds.layout.checkpoint_file(e.new_checkpoint.physical_hash))
    stored = [*ds.layout.data.glob("*"), *ds.layout.checkpoints.glob("*")]
    return sorted(p.name for p in stored if p not in named)


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    repo = build(tmp_path_factory.mktemp("uninterrupted") / "repo")
    outcomes = reconcile(repo.root, Timestamp.parse(WHEN))
    assert [(o.dataset, o.status) for o in outcomes] == [
        (ROOT, Status.CREATED),
        (DERIVED, Status.CREATED),
    ]
    return {name: summary(repo.odf.dataset(name)) for name in (ROOT, DERIVED)}


def test_the_uninterrupted_run_appends_thirteen_blocks(expected: dict[str, object]) -> None:
    """The crash points below count on this order of appends."""
    assert expected[ROOT] == (
        [
            "Seed",
            "SetPollingSource",
            "SetInfo",
            "SetLicense",
            "SetDataSchema",
            "AddData",
            "AddData",
        ],
        [
            [(0, 0, WHEN, WHEN, 1, "x"), (1, 0, WHEN, WHEN, 2, "y")],
            [(2, 0, WHEN, WHEN, 3, "z")],
        ],
    )
    assert expected[DERIVED] == (
        ["Seed", "SetTransform", "SetInfo", "SetLicense", "SetDataSchema", "ExecuteTransform"],
        [[(0, 0, WHEN, WHEN, 10, "x"), (1, 0, WHEN, WHEN, 20, "y"), (2, 0, WHEN, WHEN, 30, "z")]],
    )


@pytest.mark.parametrize(
    "appends",
    [2, 4, 5, 6, 11, 12],
    ids=[
        "root-metadata-half-written",
        "root-data-file-without-blocks",
        "root-schema-without-data",
        "one-of-two-files-ingested",
        "derivative-files-without-blocks",
        "derivative-schema-without-data",
    ],
)
def test_a_killed_reconcile_is_finished_exactly_once_by_the_next(
    tmp_path: Path, expected: dict[str, object], appends: int
) -> None:
    repo = build(tmp_path / "repo")
    command = ["-C", str(repo.root), "--system-time", WHEN]
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_RECONCILE, str(appends), *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert crashed.returncode == 137, crashed.stdout + crashed.stderr
    for name in (ROOT, DERIVED):
        ds = repo.odf.dataset(name)
        if ds.exists():  # whatever the crash left is a valid chain
            assert check_integrity(ds) == [], name

    reconcile(repo.root, Timestamp.parse(WHEN))
    for name in (ROOT, DERIVED):
        ds = repo.odf.dataset(name)
        assert check_integrity(ds) == [], name
        assert summary(ds) == expected[name], name
        assert unreferenced_files(ds) == [], name
    again = reconcile(repo.root, Timestamp.parse("2026-03-02T00:00:00Z"))
    assert [o.status for o in again] == [Status.UP_TO_DATE, Status.UP_TO_DATE]
