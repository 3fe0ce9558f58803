"""A run that stores its data outside git, killed with SIGKILL while it stores a file
and just after, leaves valid chains, and the next run finishes the work exactly once.

``test_crash_kill`` kills runs whose data lives in the dataset folders. Here the data
and checkpoint files go to a store, which a run writes before any block names the file:
a folder (``data_store = "../store"``, beside the repository), written through a temporary name and a rename, and
S3 (the test server, through the production client), where an object appears when its
upload closes. The killed process stops at a counted write, as there: a rename under
``odf/``, or the step that puts an object in place in the store (``store_watch``), so
that these windows are reached on every machine:

* the first file not yet in place (a folder store holds its complete temporary);
* that file stored, no block naming it;
* the last derivative's slice and checkpoint stored, its blocks not yet written.

After the kill every chain must pass ``verify --integrity``; the next run must reach the
uninterrupted run's heads (the same events, offsets and hashes) and leave the store
holding exactly the uninterrupted run's objects. A folder store's temporary is the one
thing that may stay: it is never read, and the next run does not remove it, since on a
folder that several clones share it could be another run's upload in progress.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo
from pyarrow import fs as pafs
from s3_server import BUCKET, S3Server, isolate_aws
from store_watch import watched_init
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
PREFIX = "crash"

# The killable reconcile of test_crash_kill, its point() also counting the store's writes.
KILLABLE_WITH_STORE = KILLABLE_RECONCILE.replace(
    "os.replace = replace\n",
    "os.replace = replace\n"
    f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    "from store_watch import watched_init\n"
    "from reconciler.odf import store_fs\n"
    "store_fs.FileSystemStore.__init__ = watched_init(point)\n",
)


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-C", str(root), *args])


@dataclass(frozen=True)
class Store:
    """Where a template keeps its data: a folder beside the chains, or a prefix of the
    S3 server's bucket."""

    kind: str
    server: S3Server | None = None

    def shown(self, root: Path) -> str:
        """The store as ``verify`` names it."""
        return str(_folder(root)) if self.server is None else f"s3://{BUCKET}/{PREFIX}"

    def settings(self) -> str:
        if self.server is None:
            return '[tool.reconciler]\ndata_store = "../store"\n'
        return (
            f'[tool.reconciler]\ndata_store = "s3://{BUCKET}/{PREFIX}"\n\n'
            f'[tool.reconciler.s3]\nendpoint_url = "{self.server.endpoint}"\n'
            'region = "us-east-1"\n'
        )

    def contents(self, root: Path) -> tuple[set[str], int]:
        """The store's objects (``data/<hash>``, ``checkpoints/<hash>``) and how many
        temporaries it holds."""
        if self.server is None:
            base, filesystem = str(_folder(root)), pafs.LocalFileSystem()
        else:
            base, filesystem = f"{BUCKET}/{PREFIX}", self.server.filesystem()
        found = filesystem.get_file_info(
            pafs.FileSelector(base, recursive=True, allow_not_found=True)
        )
        names = [f.path.removeprefix(base + "/") for f in found if f.type == pafs.FileType.File]
        temporaries = sum(1 for name in names if "/.pending-" in name)
        return {name for name in names if "/.pending-" not in name}, temporaries

    def empty(self) -> None:
        """Remove what an earlier test stored under the bucket's prefix (the folder
        store is in each test's own copy, beside its repository)."""
        if self.server is not None:
            filesystem = self.server.filesystem()
            if filesystem.get_file_info(f"{BUCKET}/{PREFIX}").type == pafs.FileType.Directory:
                filesystem.delete_dir_contents(f"{BUCKET}/{PREFIX}")


def _folder(root: Path) -> Path:
    """The folder store of the repository at ``root``: beside it, so a copy of the
    repository's parent copies both."""
    return (root.parent / "store").resolve()


def template(root: Path, store: Store) -> None:
    """test_crash_kill's data run (an Append and a Ledger root, a join, a map), storing
    its data in ``store``."""
    repo = GitOpsRepo.create(root)
    (root / "pyproject.toml").write_text(store.settings())
    if store.server is None:
        _folder(root).mkdir()  # a folder store must exist
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


class Reference:
    """The uninterrupted run: its heads, its store, and its counted writes in order."""

    def __init__(self, root: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        odf, real_replace = (root / "odf").resolve(), os.replace
        self.points: list[str] = []

        def replace(src: str, dst: str) -> None:
            target = Path(dst).resolve()
            if odf in target.parents:
                self.points.append(f"before {target.relative_to(odf).parent}")
                real_replace(src, dst)
                self.points.append(f"after {target.relative_to(odf).parent}")
            else:
                real_replace(src, dst)

        with monkeypatch.context() as patched:
            patched.setattr(os, "replace", replace)
            patched.setattr(FileSystemStore, "__init__", watched_init(self.points.append))
            result = cli(root, "apply", "--yes", "--system-time", WHEN)
        assert result.exit_code == 0, result.output
        self.heads = heads(root)
        self.stored = store.contents(root)


@pytest.fixture(scope="module", params=["folder", "s3"])
def reference(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Store, Reference]]:
    """A template for each kind of store, and its uninterrupted run; for S3, the
    server's credentials in the environment, which a killed run inherits."""
    with pytest.MonkeyPatch.context() as patch:
        store = Store(request.param)
        if request.param == "s3":
            server = request.getfixturevalue("s3_server")
            patch.setenv("AWS_ACCESS_KEY_ID", server.key)
            patch.setenv("AWS_SECRET_ACCESS_KEY", server.secret)
            isolate_aws(patch)
            store = Store("s3", server)
            store.empty()
        base = tmp_path_factory.mktemp(f"store-crash-{request.param}")
        template(base / "template" / "repo", store)
        shutil.copytree(base / "template", base / "uninterrupted")
        uninterrupted = Reference(base / "uninterrupted" / "repo", store, patch)
        yield base / "template" / "repo", store, uninterrupted


def stores(count: int) -> list[str]:
    """The writes of ``count`` objects into the store: each put in place in one step."""
    return ["before store", "after store"] * count


def test_the_uninterrupted_run_stores_every_file_before_a_block_names_it(
    reference: tuple[Path, Store, Reference],
) -> None:
    """The kill points below count on this order: each dataset's files (slice, and
    checkpoint where it keeps one) are stored, then its blocks appended."""
    expected = reference[2]
    assert expected.points == [
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
    objects, temporaries = expected.stored
    assert (len(objects), temporaries) == (8, 0)
    assert sorted(o.split("/")[0] for o in objects) == ["checkpoints"] * 3 + ["data"] * 5


def kill_points(points: list[str]) -> list[int]:
    """The first file not yet in place in the store; that file stored, no block naming
    it; the map's slice and checkpoint stored, neither named by a block."""
    return [1, 2, points.index(f"before {C}/blocks")]


@pytest.mark.parametrize("which", range(3), ids=["not-in-place", "stored-no-block", "last"])
def test_a_run_killed_while_storing_is_finished_exactly_once_by_the_next(
    tmp_path: Path, reference: tuple[Path, Store, Reference], which: int
) -> None:
    template_root, store, expected = reference
    store.empty()
    point = kill_points(expected.points)[which]
    root = tmp_path / "killed" / "repo"
    shutil.copytree(template_root.parent, root.parent)
    _, stopped_at = kill_at(GitOpsRepo(root), point, tmp_path / "stopped", KILLABLE_WITH_STORE)
    assert stopped_at == expected.points[point - 1]
    # A folder store keeps the killed upload's complete temporary; S3 shows nothing
    # of an upload that did not finish.
    temporary = 1 if which == 0 and store.kind == "folder" else 0
    objects, temporaries = store.contents(root)
    assert (len(objects), temporaries) == ((0, 1, 8)[which], temporary)
    verified = cli(root, "verify", "--integrity")
    assert verified.exit_code == 0, verified.output
    # The objects stored with no block naming them yet are told of, not removed.
    unnamed = [line for line in verified.output.splitlines() if "no chain names" in line]
    assert [line.split(" (")[0] for line in unnamed] == {
        0: [],
        1: [f"data store {store.shown(root)}: 1 object"],
        2: [f"data store {store.shown(root)}: 2 objects"],  # the map's slice and checkpoint
    }[which]

    finished = cli(root, "apply", "--yes", "--system-time", WHEN)
    assert finished.exit_code == 0, finished.output
    assert heads(root) == expected.heads
    assert store.contents(root) == (expected.stored[0], temporary)
    verified = cli(root, "verify", "--integrity")
    assert (verified.exit_code, "no chain names" in verified.output) == (0, False)
    again = cli(root, "apply", "--yes", "--system-time", WHEN)
    assert again.exit_code == 0, again.output
    assert heads(root) == expected.heads  # nothing left to do: exactly once
