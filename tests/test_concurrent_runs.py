"""Several runs on one working tree: none undoes another's work.

Three real ``reconcile`` processes are started together on a repository with two roots
and two derivatives to fill. With the default lock timeout (0) one applies and the two
others back off at once, each saying who holds the lock, with exit code 1; with a lock
timeout the two others wait, plan again against what the first wrote, and find nothing
to do. Either way the chains are exactly those of a single run: no block or record lost
or duplicated.

Below the lock, a failed run's rollback takes back only its own writes: it moves the head
back only from the head it wrote itself, and removes only files it created; when another
writer moved the head, the failure says so and the other's blocks and files stay.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, reconcile
from test_crash_kill import TEMPLATE_DATASETS, WHEN, template

from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset
from reconciler.writer.commit import ConcurrentRunError, all_or_nothing

AT = Timestamp.parse(WHEN)


@pytest.fixture(scope="module")
def repositories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A template with data to ingest, and the heads one uninterrupted run gives it."""
    base = tmp_path_factory.mktemp("concurrent")
    template(base / "template", with_data=True)
    shutil.copytree(base / "template", base / "single")
    reconcile(base / "single", AT)
    single = GitOpsRepo(base / "single").odf
    return base / "template", {n: single.dataset(n).head() for n in TEMPLATE_DATASETS}


def run_three(root: Path, *options: str) -> list[tuple[int, subprocess.CompletedProcess[str]]]:
    """Three ``reconcile`` processes started together on ``root``; their pids and results."""
    command = [sys.executable, "-m", "reconciler", "-C", str(root), "--system-time", WHEN]
    processes = [
        subprocess.Popen([*command, *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    results = []
    for p in processes:
        out, err = p.communicate(timeout=600)
        done = subprocess.CompletedProcess(p.args, p.returncode, out.decode(), err.decode())
        results.append((p.pid, done))
    return results


def assert_as_one_run(root: Path, heads: dict[str, object]) -> None:
    odf = GitOpsRepo(root).odf
    for name, head in heads.items():
        ds = odf.dataset(name)
        assert check_integrity(ds) == [], name
        assert ds.head() == head, name
    assert sorted(p.name for p in odf.root.rglob(".pending-*")) == []


def test_of_three_runs_started_together_one_applies_and_two_back_off_naming_it(
    tmp_path: Path, repositories: tuple[Path, dict[str, object]]
) -> None:
    template_root, heads = repositories
    root = tmp_path / "repo"
    shutil.copytree(template_root, root)
    results = dict(run_three(root))
    assert sorted(r.returncode for r in results.values()) == [0, 1, 1], [
        r.stderr for r in results.values()
    ]
    pid, winner = next((p, r) for p, r in results.items() if r.returncode == 0)
    assert "updated" in winner.stdout + winner.stderr
    refused = re.compile(
        rf"odf/ is locked by reconcile apply \(pid {pid} on "
        rf"{re.escape(socket.gethostname())}, since \d\d:\d\d:\d\d UTC\); "
        r"retry later or pass --lock-timeout"
    )
    for loser in (r for r in results.values() if r is not winner):
        assert "updated" not in loser.stdout + loser.stderr
        assert refused.search(loser.stderr), loser.stderr
    assert_as_one_run(root, heads)


def test_three_runs_with_a_lock_timeout_wait_and_the_later_ones_find_nothing_to_do(
    tmp_path: Path, repositories: tuple[Path, dict[str, object]]
) -> None:
    template_root, heads = repositories
    root = tmp_path / "repo"
    shutil.copytree(template_root, root)
    results = [r for _, r in run_three(root, "--lock-timeout", "600")]
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    # One applied; the two that waited planned again and had nothing left to do.
    assert sorted("updated" in r.stdout + r.stderr for r in results) == [False, False, True]
    assert_as_one_run(root, heads)


def seeded(root: Path) -> Dataset:
    ds = Dataset(root)
    dataset_id, _ = DatasetId.generate()
    ds.create(models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT), AT)
    return ds


def test_a_failed_run_whose_head_another_run_moved_keeps_the_others_work(
    tmp_path: Path,
) -> None:
    ours = seeded(tmp_path / "ds")
    start = ours.head()
    theirs = Dataset(tmp_path / "ds")
    (tmp_path / "ours.bin").write_bytes(b"ours")
    (tmp_path / "theirs.bin").write_bytes(b"theirs")
    with pytest.raises(ConcurrentRunError) as failed, all_or_nothing(ours):
        our_file, _ = ours.add_file(tmp_path / "ours.bin")
        their_file, _ = theirs.add_file(tmp_path / "theirs.bin")
        their_head = theirs.append_event(models.SetInfo(description="theirs"), AT)
        ours.append_event(models.SetInfo(description="ours"), AT, expected_head=start)
    assert str(failed.value) == "another run advanced ds; nothing of this run was kept"
    assert ours.head() == their_head
    assert not ours.layout.data_file(our_file).exists()
    assert ours.layout.data_file(their_file).read_bytes() == b"theirs"
    assert check_integrity(ours) == []


def test_a_failed_run_removes_only_the_files_it_created_and_moves_its_head_back(
    tmp_path: Path,
) -> None:
    ours = seeded(tmp_path / "ds")
    start = ours.head()
    (tmp_path / "before.bin").write_bytes(b"shared")
    found, _ = Dataset(tmp_path / "ds").add_file(tmp_path / "before.bin")
    (tmp_path / "same.bin").write_bytes(b"shared")
    (tmp_path / "new.bin").write_bytes(b"new")
    blocks_before = sorted(ours.layout.blocks.iterdir())
    with pytest.raises(RuntimeError, match=r"^boom$"), all_or_nothing(ours):
        assert ours.add_file(tmp_path / "same.bin")[0] == found
        created, _ = ours.add_file(tmp_path / "new.bin")
        ours.append_event(models.SetInfo(description="ours"), AT)
        raise RuntimeError("boom")
    assert ours.head() == start
    assert sorted(ours.layout.blocks.iterdir()) == blocks_before
    assert ours.layout.data_file(found).read_bytes() == b"shared"  # not this run's file
    assert not ours.layout.data_file(created).exists()
