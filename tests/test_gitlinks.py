"""Which git submodules ``gitops.gitlinks`` finds under the chains' folder: those at a
folder's place (a dataset folder, its ``data``, ``refs``), where a run writes files that
git would then never commit; a file's place inside ``blocks/``, ``data/`` or
``checkpoints/`` is left out of the listing (a hundred thousand entries), and ``verify``
reports a folder there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from reconciler.gitloop.gitops import gitlinks


def test_submodules_at_a_folders_place_are_found_and_a_files_place_is_left_to_verify(
    tmp_path: Path,
) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, check=True)
        return done.stdout.decode()

    git("init", "-q", "-b", "main")
    (tmp_path / "odf" / "a" / "blocks").mkdir(parents=True)
    (tmp_path / "odf" / "a" / "blocks" / "f1620ab").write_text("block")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "base")
    sha = git("rev-parse", "HEAD").strip()
    places = ["odf/b", "odf/a/data", "odf/a/refs", "odf/a/blocks/f1620cd", "odf/a/data2/x"]
    for place in places:
        git("update-index", "--add", "--cacheinfo", f"160000,{sha},{place}")
    assert gitlinks(tmp_path, "odf") == ["odf/a/data", "odf/a/data2/x", "odf/a/refs", "odf/b"]
