"""``reconcile gc``: a data store outside git loses exactly the objects no protected
chain names, and only those old enough.

The S3 journey runs against moto's server (authentication on) through the production
client; the refs that protect objects are real branches of a real clone and of its bare
remote, which gc fetches first. The folder store shows the minimum age, read from the
files' real modification times, and a killed upload's temporary.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from gitops_repo import GitOpsRepo
from pyarrow import fs as pafs
from pyspark.sql import SparkSession
from s3_server import BUCKET, S3Server, iam_user, isolate_aws
from test_data_store import (
    CSV2,
    DERIVED,
    ROOT,
    apply,
    cli,
    make_repo,
    named_objects,
    write_settings,
)

from reconciler.config import RepoConfig
from reconciler.odf.store_fs import PROBE

DAY = 86400
HOLD_LOCK = """
import sys
from pathlib import Path
from reconciler.odf.lock import repository_lock
with repository_lock(Path(sys.argv[1]), "reconcile apply"):
    print("held", flush=True)
    sys.stdin.read()
"""


def published(root: Path) -> git.Repo:
    """``root`` committed and pushed to a new bare remote, ``origin``."""
    bare = root.parent / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    (root / ".gitignore").write_text(".reconcile-cache/\nodf/.lock\n")  # as `init` writes
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("first apply")
    repo.create_remote("origin", str(bare))
    repo.git.push("-q", "-u", "origin", "main")
    return repo


def objects_of(root: Path, name: str) -> list[str]:
    """The store paths the chain of ``name`` in the working tree names, sorted."""
    dataset = RepoConfig.load(root).repository().dataset(name)
    return sorted(
        f"{'data' if kind == 'data' else 'checkpoints'}/{hash_}"
        for kind, hash_ in named_objects(dataset)
    )


def stored(filesystem: pafs.FileSystem, base: str) -> list[str]:
    """Every file in the store under ``base``, as ``data/<hash>``…"""
    selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
    infos = filesystem.get_file_info(selector)
    return sorted(i.path.removeprefix(f"{base}/") for i in infos if i.type == pafs.FileType.File)


def test_gc_deletes_what_no_ref_names_once_the_remote_forgets_it(
    tmp_path: Path, spark: SparkSession, credentials: S3Server
) -> None:
    s3 = credentials.filesystem()
    prefix = f"{BUCKET}/gc-journey"
    root = tmp_path / "repo"
    make_repo(root, f"s3://{prefix}", credentials.endpoint)
    apply(root, "2026-01-01T06:00:00Z")
    repo = published(root)
    derived = objects_of(root, DERIVED)
    kept = objects_of(root, ROOT)
    assert len(derived) == 2 and len(kept) == 1  # the derivative's slice and checkpoint
    # A branch keeps the derivative alive on the remote; main deletes it.
    repo.git.push("-q", "origin", "main:refs/heads/report")
    (root / "datasets" / f"{DERIVED}.yaml").unlink()
    pruned = cli(root, "apply", "--yes", "--prune", "--system-time", "2026-01-02T06:00:00Z")
    assert pruned.exit_code == 0, pruned.output
    repo.git.add(A=True)
    repo.index.commit("delete the derivative")
    repo.git.push("-q", "origin", "main")
    everything = stored(s3, prefix)
    assert everything == sorted(derived + kept)

    # The remote's branch names the derivative's objects: nothing to delete.
    protected = cli(root, "gc", "--min-age", "0")
    assert protected.exit_code == 0, protected.output
    assert protected.output.splitlines() == [
        "fetched origin",
        f"data store s3://{prefix}: 3 objects named by the chains in the working tree or in"
        " the tip of every ref",
        "of those, 2 objects no chain of the working tree names: only other refs keep them"
        " (a merged branch not deleted, a replaced chain on a tag); delete such a ref (git"
        " push origin --delete BRANCH) for gc to collect them",
        "nothing to delete",
    ]

    # The branch is deleted on the remote (by someone else): this clone learns it by
    # the fetch gc makes, and the objects become unnamed, but they are young.
    git.Repo(root.parent / "remote.git").git.branch("-D", "report")
    young = cli(root, "gc")
    assert young.exit_code == 0, young.output
    assert young.output.splitlines()[1:] == [
        f"data store s3://{prefix}: 1 object named by the chains in the working tree or in"
        " the tip of every ref",
        "kept 2 objects no chain names, written less than 7d ago (--min-age): a run not"
        " pushed yet may name them",
        "nothing to delete",
    ]
    assert "origin/report" not in repo.git.branch("-r")

    # History still names them: --all-commits keeps them (a revert of the deletion).
    history = cli(
        root, "gc", "--min-age", "0", "--all-commits", "--delete", "--allow-short-min-age"
    )
    assert history.exit_code == 0, history.output
    assert history.output.splitlines()[-1] == "nothing to delete"
    assert "3 objects named" in history.output and "every commit of every ref" in history.output

    # Listed, not deleted, without --delete.
    listed = cli(root, "gc", "--min-age", "0")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[2:] == [
        "would delete 2 objects "
        f"({sum(s3.get_file_info(f'{prefix}/{p}').size for p in derived):,} bytes):",
        *(f"  {path}" for path in derived),
        "run `reconcile gc --delete --min-age 0 --allow-short-min-age` to delete them",
    ]
    assert stored(s3, prefix) == everything

    deleted = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output.splitlines()[2].startswith("deleted 2 objects (")
    assert deleted.output.splitlines()[3:] == [f"  {path}" for path in derived]
    assert stored(s3, prefix) == kept
    assert not any((root / ".reconcile-cache" / path).exists() for path in derived)
    # Every chain still has every file: verify finds nothing missing and nothing unnamed.
    verified = cli(root, "verify", "--integrity")
    assert verified.exit_code == 0, verified.output
    assert "no chain names" not in verified.output
    # The root keeps growing from the store as before.
    (root / "sources" / "2.csv").write_text(CSV2)
    apply(root, "2026-01-03T06:00:00Z")
    again = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[-1] == "nothing to delete"


def test_uncommitted_blocks_and_young_objects_are_kept_old_unnamed_ones_go(
    tmp_path: Path, spark: SparkSession
) -> None:
    root = tmp_path / "repo"
    make_repo(root, "../store")
    store = tmp_path / "store"
    apply(root, "2026-01-01T06:00:00Z")  # never committed: the working tree names them
    named = sorted(objects_of(root, ROOT) + objects_of(root, DERIVED))
    assert sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()) == named
    old = time.time() - 8 * DAY
    for path in named:
        os.utime(store / path, (old, old))
    stray_old = store / "data" / ("f1620" + "ab" * 32)
    stray_new = store / "data" / ("f1620" + "cd" * 32)
    killed_upload = store / "checkpoints" / ".pending-0123456789abcdef"
    # no hash, or a hash not spelt as the reconciler spells it: never the reconciler's
    notes = store / "data" / "README.txt"
    upper = store / "data" / ("F1620" + "AB" * 32)
    for path in (stray_old, stray_new, killed_upload, notes, upper):
        path.write_bytes(b"unnamed")
    for path in (stray_old, killed_upload, notes, upper):
        os.utime(path, (old, old))

    result = cli(root, "gc", "--delete")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"data store {store}: 3 objects named by the chains in the working tree or in the"
        " tip of every ref",
        "kept 1 object no chain names, written less than 7d ago (--min-age): a run not"
        " pushed yet may name it",
        "kept 2 files whose name is no object hash: the reconciler stores objects under"
        " their hashes only, so gc never deletes them:",
        f"  data/{upper.name}",
        "  data/README.txt",
        "deleted 2 objects (14 bytes):",
        "  checkpoints/.pending-0123456789abcdef",
        f"  data/{stray_old.name}",
    ]
    assert not stray_old.exists() and not killed_upload.exists()
    assert notes.exists() and upper.exists()
    assert stray_new.exists() and all((store / path).exists() for path in named)
    hours = cli(root, "gc", "--min-age", "1h")
    assert hours.output.splitlines()[1:] == [
        "kept 1 object no chain names, written less than 1h ago (--min-age): a run not"
        " pushed yet may name it",
        "kept 2 files whose name is no object hash: the reconciler stores objects under"
        " their hashes only, so gc never deletes them:",
        f"  data/{upper.name}",
        "  data/README.txt",
        "nothing to delete",
    ]


def test_a_ref_keeping_its_chains_in_another_folder_protects_their_objects(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The working tree's ``odf_root`` is not every ref's: a branch made before the
    chains moved names its objects from ``odf/``, and gc must not delete them."""
    root = tmp_path / "repo"
    make_repo(root, "../store")
    apply(root, "2026-01-01T06:00:00Z")
    named = sorted(objects_of(root, ROOT) + objects_of(root, DERIVED))
    (root / ".gitignore").write_text(".reconcile-cache/\nodf/.lock\nchains/.lock\n")
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("chains under odf/")
    repo.git.branch("before-the-move")
    repo.git.rm("-r", "-q", "odf")
    settings = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(settings + 'odf_root = "chains"\n')
    repo.git.add(A=True)
    repo.index.commit("chains to start again under chains/")

    result = cli(root, "gc", "--min-age", "0", "--allow-short-min-age", "--delete", "--no-fetch")

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"data store {tmp_path / 'store'}: 3 objects named by the chains in the working tree"
        " or in the tip of every ref",
        "of those, 3 objects no chain of the working tree names: only other refs keep them"
        " (a merged branch not deleted, a replaced chain on a tag); delete such a ref (git"
        " push origin --delete BRANCH) for gc to collect them",
        "nothing to delete",
    ]
    store = tmp_path / "store"
    assert sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()) == named


def folder_repo(root: Path) -> GitOpsRepo:
    """A repository with a folder store and no chain: what gc needs to start."""
    repo = GitOpsRepo.create(root)
    write_settings(root, "../store", None)
    (root / "odf").mkdir()
    return repo


def test_a_block_gc_cannot_read_stops_it_and_nothing_is_deleted(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = folder_repo(root)
    stray = tmp_path / "store" / "data" / ("f1620" + "ab" * 32)
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"unnamed")
    blocks = root / "odf" / "org.example.broken" / "blocks"
    blocks.mkdir(parents=True)
    broken = blocks / ("f1620" + "00" * 32)
    broken.write_bytes(b"not a block")
    repo.commit("a broken block")
    git.Repo(root).git.branch("broken")
    broken.unlink()  # gone from main and the working tree, kept by the branch
    repo.commit("removed")
    result = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (
        f"error: odf/org.example.broken/blocks/f1620{'00' * 32}: not a metadata block"
        " manifest: unpack_from requires a buffer of at least 544501618 bytes for"
        " unpacking 4 bytes at offset 544501614 (actual buffer size is 11); nothing deleted"
    )
    assert stray.exists()


def test_gc_refuses_what_it_cannot_judge_safely(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    folder_repo(root)
    stray = tmp_path / "store" / "data" / ("f1620" + "ab" * 32)
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"unnamed")
    # A remote that cannot be fetched: the refs may be stale, so nothing is judged.
    git.Repo(root).create_remote("origin", str(tmp_path / "missing.git"))
    unreachable = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert unreachable.exit_code == 1, unreachable.output
    assert unreachable.output == (
        f"error: cannot fetch origin: fatal: '{tmp_path}/missing.git' does not appear to be"
        " a git repository; nothing deleted\n"
    )
    assert stray.exists()
    # A run of another process holding the repository's lock.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(root / "odf")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        locked = cli(
            root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age", "--no-fetch"
        )
    finally:
        holder.communicate(b"")
    assert locked.exit_code == 1, locked.output
    assert re.fullmatch(
        r"error: odf/ is locked by reconcile apply \(pid \d+ on .+, since [\d:]+ UTC\);"
        r" retry later or pass --lock-timeout; nothing deleted\n",
        locked.output,
    ), locked.output
    assert stray.exists()
    # An age gc cannot read is a usage error.
    bad = cli(root, "gc", "--min-age", "7 days")
    assert bad.exit_code == 64, bad.output
    assert "--min-age: '7 days' is not an age like 7d, 12h, 30m or 0" in bad.output
    # Deleting with an age under a day could take a running clone's stored files: it must
    # be asked for (Delta's VACUUM refuses a short retention likewise). Listing is free.
    short = cli(root, "gc", "--min-age", "23h", "--delete", "--no-fetch")
    assert short.exit_code == 64, short.output
    assert (
        "--min-age 23h is under a day: --delete would also delete what a run of another"
        " clone stored and has not pushed the blocks of yet; add --allow-short-min-age where"
        " no other clone runs (nothing deleted)"
    ) in " ".join(short.output.split())
    assert stray.exists()
    assert cli(root, "gc", "--min-age", "23h", "--no-fetch").exit_code == 0
    # A shallow clone has no history to protect with --all-commits.
    shallow = tmp_path / "shallow"
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("one")
    repo.index.commit("two")
    repo.git.push("-q", str(bare), "main")
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{bare}", str(shallow)], check=True
    )
    write_settings(shallow, "../store", None)
    history = cli(shallow, "gc", "--all-commits", "--no-fetch")
    assert history.exit_code == 1, history.output
    assert history.output.strip() == (
        "error: the clone is shallow: it lacks commits (git fetch --unshallow); nothing deleted"
    )
    # Deleting to nothing: the dataset folders keep their own files.
    write_settings(root, None, None)
    local = cli(root, "gc", "--delete")
    assert local.exit_code == 0, local.output
    assert local.output.strip() == (
        "the data store is the dataset folders (odf/): git keeps their files, and a run"
        " removes any file no block names; nothing to collect"
    )


def test_wrong_credentials_are_one_error_and_nothing_is_deleted(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    root = tmp_path / "repo"
    GitOpsRepo.create(root)
    write_settings(root, f"s3://{BUCKET}/gc-denied", s3_server.endpoint)
    (root / "odf").mkdir()
    before = len(s3_server.requests())
    result = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: data store s3://{BUCKET}/gc-denied cannot be reached")
    assert "wrong-secret" not in result.output
    assert not any(r.startswith("DELETE") for r in s3_server.requests()[before:])


def test_a_store_refusing_deletes_says_how_far_gc_got(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials that may list but not delete (an IAM policy denying s3:DeleteObject):
    the first delete fails, and gc says none of its objects went."""
    key = iam_user(
        s3_server,
        "no-delete",
        [
            {"Effect": "Allow", "Action": "*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"},
        ],
    )
    prefix = f"{BUCKET}/gc-no-delete"
    s3 = s3_server.filesystem()
    strays = [f"data/f1620{c * 64}" for c in "ab"]
    for stray in strays:
        with s3.open_output_stream(f"{prefix}/{stray}") as f:
            f.write(b"unnamed")
    isolate_aws(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    root = tmp_path / "repo"
    GitOpsRepo.create(root)
    write_settings(root, f"s3://{prefix}", s3_server.endpoint)
    (root / "odf").mkdir()
    result = cli(root, "gc", "--min-age", "0", "--delete", "--allow-short-min-age")
    assert result.exit_code == 1, result.output
    key_name = f"{prefix.split('/', 1)[1]}/{strays[0]}"
    assert re.sub(r"Request ID: \w+", "Request ID: …", result.output) == (
        f"error: data store s3://{prefix} cannot delete {strays[0]}: When delete key"
        f" '{key_name}' in bucket '{BUCKET}': AWS Error ACCESS_DENIED during DeleteObject"
        " operation: Access Denied (Request ID: …) (credentials come from the environment"
        " or the AWS configuration); deleted 0 of 2 objects, the others are left for the"
        " next gc\n"
    )
    # the check's empty temporary, which these credentials could not remove either
    assert stored(s3, prefix) == [PROBE, *strays]
