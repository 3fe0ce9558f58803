"""A run that stores its data in a folder outside git, killed with SIGKILL while it
stores a file and just after, leaves valid chains, and the next run finishes the work
exactly once.

``test_crash_kill`` kills runs whose data lives in the dataset folders. Here the data
and checkpoint files go to a folder store (``data_store = "store"``), which a run writes
through a temporary name and a rename, before any block names the file. The killed
process stops at a counted write, as there: a rename under ``odf/``, or the store's
rename of a temporary into its object (counted by wrapping the store's file system), so
that these windows are reached on every machine:

* the store holding only a temporary of the file (killed before its rename);
* the file stored, no block naming it (killed after the rename);
* the last derivative's file stored, its block not yet written.

After the kill every chain must pass ``verify --integrity``; the next run must reach the
uninterrupted run's heads (the same events, offsets and hashes) and leave the store
holding exactly the uninterrupted run's files. A temporary of a killed upload is the one
thing that may stay in the store: it is never read, and it is not removed by the next
run, since on a store that several clones share it could be another run's upload in
progress.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gitops_repo import GitOpsRepo
from test_crash_kill import (
    KILLABLE_RECONCILE,
    SET_UP,
    TEMPLATE_DATASETS,
    WHEN,
    appends,
    kill_at,
    write_manifests,
)
from typer.testing import CliRunner, Result

from reconciler.cli import app
from reconciler.odf import Multihash
from reconciler.odf.repository import OdfRepository
from reconciler.odf.store_fs import FileSystemStore

pytestmark = pytest.mark.usefixtures("spark")

A, B, AB, C = TEMPLATE_DATASETS

WATCH_THE_STORE = """
from reconciler.odf import store_fs

class _Watched:
    def __init__(self, filesystem):
        self._filesystem = filesystem

    def __getattr__(self, name):
        return getattr(self._filesystem, name)

    def move(self, src, dst):
        point("before store")
        self._filesystem.move(src, dst)
        point("after store")

_store_init = store_fs.FileSystemStore.__init__
store_fs.FileSystemStore.__init__ = lambda self, filesystem, *args, **kwargs: _store_init(
    self, _Watched(filesystem), *args, **kwargs
)
"""
# The killable reconcile of test_crash_kill, its point() also counting the store's renames.
KILLABLE_WITH_STORE = KILLABLE_RECONCILE.replace(
    "os.replace = replace\n", "os.replace = replace\n" + WATCH_THE_STORE
)


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-C", str(root), *args])


def template(root: Path) -> None:
    """test_crash_kill's data run (an Append and a Ledger root, a join, a map), storing
    its data in the folder ``store`` beside the chains."""
    repo = GitOpsRepo.create(root)
    (root / "pyproject.toml").write_text('[tool.reconciler]\ndata_store = "store"\n')
    write_manifests(repo)
    repo.commit("datasets")
    repo.apply(SET_UP)  # metadata only: no data yet
    (root / "sources").mkdir()
    (root / "sources" / f"{A}-1.csv").write_text("k,v\n1,x\n2,y\n")
    (root / "sources" / f"{A}-2.csv").write_text("k,v\n3,z\n")
    (root / "sources" / f"{B}-1.csv").write_text("k,v\n1,p\n3,q\n1,r\n")
    repo.commit("data")


def heads(root: Path) -> dict[str, Multihash | None]:
    odf = OdfRepository(root / "odf")
    return {name: odf.dataset(name).head() for name in TEMPLATE_DATASETS}


def stored(root: Path) -> tuple[set[str], int]:
    """The store's objects (``data/<hash>``, ``checkpoints/<hash>``) and how many
    temporaries it holds."""
    files = [p for p in (root / "store").rglob("*") if p.is_file()]
    temporaries = sum(1 for p in files if p.name.startswith(".pending-"))
    objects = {str(p.relative_to(root / "store")) for p in files}
    return {o for o in objects if ".pending-" not in o}, temporaries


class Reference:
    """The uninterrupted run: its heads, its store, and its counted writes in order."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        odf, real_replace, real_init = (
            (root / "odf").resolve(),
            os.replace,
            FileSystemStore.__init__,
        )
        self.points: list[str] = []
        points = self.points

        def replace(src: str, dst: str) -> None:
            target = Path(dst).resolve()
            if odf in target.parents:
                where = target.relative_to(odf).parent
                points.extend([f"before {where}", f"after {where}"])
            real_replace(src, dst)

        class Watched:
            def __init__(self, filesystem: Any) -> None:
                self._filesystem = filesystem

            def __getattr__(self, name: str) -> Any:
                return getattr(self._filesystem, name)

            def move(self, src: str, dst: str) -> None:
                self._filesystem.move(src, dst)
                points.extend(["before store", "after store"])

        def init(store: FileSystemStore, filesystem: Any, *args: Any, **kwargs: Any) -> None:
            real_init(store, Watched(filesystem), *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(os, "replace", replace)
            patched.setattr(FileSystemStore, "__init__", init)
            result = cli(root, "apply", "--yes", "--system-time", WHEN)
        assert result.exit_code == 0, result.output
        self.heads = heads(root)
        self.stored = stored(root)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Reference]]:
    base = tmp_path_factory.mktemp("store-crash")
    template(base / "template")
    shutil.copytree(base / "template", base / "uninterrupted")
    with pytest.MonkeyPatch.context() as patch:
        yield base / "template", Reference(base / "uninterrupted", patch)


def stores(count: int) -> list[str]:
    """The writes of ``count`` files into the store: each a temporary renamed."""
    return ["before store", "after store"] * count


def test_the_uninterrupted_run_stores_every_file_before_a_block_names_it(
    reference: tuple[Path, Reference],
) -> None:
    """The kill points below count on this order: each dataset's files (slice, and
    checkpoint where it keeps one) are stored, then its blocks appended."""
    assert reference[1].points == [
        *stores(1),
        *appends(A, 2),  # the first slice's schema, then its AddData
        *stores(1),
        *appends(A, 1),
        *stores(2),  # the Ledger's slice and its checkpoint
        *appends(B, 2),
        *stores(2),  # the join's slice and its checkpoint
        *appends(AB, 2),
        *stores(2),
        *appends(C, 2),
    ]
    objects, temporaries = reference[1].stored
    assert (len(objects), temporaries) == (8, 0)
    assert sorted(o.split("/")[0] for o in objects) == ["checkpoints"] * 3 + ["data"] * 5


def kill_points(points: list[str]) -> list[int]:
    """The first file still a temporary in the store; that file stored, no block
    naming it; the map's slice and checkpoint stored, neither named by a block."""
    last_block = points.index(f"before {C}/blocks")
    return [1, 2, last_block]


@pytest.mark.parametrize("which", range(3), ids=["upload-temporary", "stored-no-block", "last"])
def test_a_run_killed_while_storing_is_finished_exactly_once_by_the_next(
    tmp_path: Path, reference: tuple[Path, Reference], which: int
) -> None:
    template_root, expected = reference
    point = kill_points(expected.points)[which]
    root = tmp_path / "killed"
    shutil.copytree(template_root, root)
    _, stopped_at = kill_at(GitOpsRepo(root), point, tmp_path / "stopped", KILLABLE_WITH_STORE)
    assert stopped_at == expected.points[point - 1]
    objects, temporaries = stored(root)
    assert temporaries == (1 if which == 0 else 0)
    assert len(objects) == (0, 1, 8)[which]  # the killed run stored these, no more
    verified = cli(root, "verify", "--integrity")
    assert verified.exit_code == 0, verified.output

    finished = cli(root, "apply", "--yes", "--system-time", WHEN)
    assert finished.exit_code == 0, finished.output
    assert heads(root) == expected.heads
    assert stored(root) == (expected.stored[0], temporaries)
    verified = cli(root, "verify", "--integrity")
    assert verified.exit_code == 0, verified.output
    again = cli(root, "apply", "--yes", "--system-time", WHEN)
    assert again.exit_code == 0, again.output
    assert heads(root) == expected.heads  # nothing left to do: exactly once
