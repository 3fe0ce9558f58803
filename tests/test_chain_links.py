"""A chain's files and folders are never followed through a symbolic link.

The reconciler writes no link into ``odf/``; one that arrives in a pull request could
lead to any file of the runner (``/proc/self/environ``, a credentials file), and a head
that is not a hash used to be quoted whole in the error that reported it, on the plan's
public log. Each command that reads chains (the pull request's plan, ``log``, the full
and the incremental ``verify``) reports the link and reads nothing through it; the
incremental check also sees a file the pull request turned into a link, which git lists
as a type change.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path
from typing import ClassVar

import git
import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, reconcile, root_events
from typer.testing import CliRunner

from reconciler.cli import app
from reconciler.config import RepoConfig
from reconciler.odf.json_schemas import validator
from reconciler.odf.timestamps import Timestamp
from reconciler.plan.model import Location, Problem
from reconciler.planning.linked_paths import chains_link_problem

NAME = "org.example.a"
READER = "org.example.b"
SECRET = "HXSECRET=TOPSECRET-7f3a"
LINKED = "is a symbolic link: a chain holds only files the reconciler writes, and a link there is never followed"


def cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["-C", str(root), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture
def pull_request(tmp_path: Path, spark: object) -> tuple[Path, Path]:
    """A repository with one applied, committed root dataset, pushed to a bare remote, on
    a pull request's branch; and a file outside it holding a secret."""
    return applied(tmp_path, {NAME: manifest(NAME, "Root", root_events())})


@pytest.fixture
def read_pull_request(tmp_path: Path, spark: object) -> tuple[Path, Path]:
    """``pull_request``, with a derivative (``READER``) that reads its dataset."""
    query = f"SELECT op, event_time, a, b FROM `{NAME}`"
    return applied(
        tmp_path,
        {
            NAME: manifest(NAME, "Root", root_events()),
            READER: manifest(READER, "Derivative", derivative_events([NAME], query)),
        },
    )


def applied(tmp_path: Path, manifests: dict[str, str]) -> tuple[Path, Path]:
    """The pull request's repository (``pull_request``) of ``manifests``, by name."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    (repo.root / "sources").mkdir()
    (repo.root / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    for name, text in manifests.items():
        repo.write(name, text)
    repo.commit("datasets")
    assert [o.status.value for o in reconcile(repo.root)] == ["created"] * len(manifests)
    repo.commit("reconcile: datasets created")
    git.Repo.init(tmp_path / "origin.git", bare=True, initial_branch="main")
    local = git.Repo(repo.root)
    local.create_remote("origin", str(tmp_path / "origin.git")).push("main").raise_if_error()
    local.git.checkout("-b", "pr")
    outside = tmp_path / "environ"
    outside.write_text(f"PATH=/bin\0{SECRET}\0")
    return repo.root, outside


def chain(root: Path) -> Path:
    return root / "odf" / NAME


def test_a_head_linked_outside_is_reported_never_read(pull_request: tuple[Path, Path]) -> None:
    root, outside = pull_request
    (chain(root) / "refs" / "head").unlink()
    (chain(root) / "refs" / "head").symlink_to(outside)
    git.Repo(root).git.add(A=True)
    git.Repo(root).index.commit("a link")
    problem = f"{NAME}/refs/head {LINKED}"

    code, output = cli(root, "plan", "--base", "origin/main")
    assert code == 1
    assert f"  odf/{NAME}: {NAME}: chain cannot be read: {problem}" in output.splitlines()
    code, output = cli(root, "log", NAME)
    assert (code, output) == (1, f"error: {NAME}: {problem}\n")
    for args in (["--integrity"], ["--integrity", "--base", "origin/main"]):
        code, output = cli(root, "verify", *args)
        assert code == 1
        assert f"{NAME}: invalid\n  {problem}\n" in output
    for args in (["plan", "--base", "origin/main"], ["log", NAME], ["verify", "--integrity"]):
        assert SECRET not in cli(root, *args)[1]


def test_a_head_that_is_no_hash_is_shown_by_its_first_characters_only(
    pull_request: tuple[Path, Path],
) -> None:
    root, _ = pull_request
    head = chain(root) / "refs" / "head"
    head.write_text(f"<<<<<<< HEAD\n{head.read_text()}=======\n{SECRET}\n>>>>>>> other\n")
    code, output = cli(root, "verify", "--integrity")
    assert code == 1
    assert f"  {NAME}/refs/head holds no block hash: it reads '<<<<<<< HEAD'\n" in output
    assert SECRET not in output


def test_a_data_file_made_a_link_is_caught_by_the_incremental_and_the_full_check(
    pull_request: tuple[Path, Path],
) -> None:
    root, outside = pull_request
    (data,) = (chain(root) / "data").iterdir()
    data.unlink()
    data.symlink_to(outside)
    git.Repo(root).git.add(A=True)
    git.Repo(root).index.commit("a data file made a link")

    code, output = cli(root, "verify", "--integrity", "--base", "origin/main")
    assert code == 1
    assert f"{NAME}: invalid\n  {NAME}/data/{data.name} {LINKED}\n" in output
    assert "checked since origin/main: 0 blocks and 1 file in 1 dataset" in output
    code, output = cli(root, "verify", "--integrity")
    assert code == 1
    assert f"data file {data.name} is a symbolic link, which is never followed" in output


def test_a_chain_folder_made_a_link_is_not_read(pull_request: tuple[Path, Path]) -> None:
    root, outside = pull_request
    blocks = chain(root) / "blocks"
    blocks.rename(outside.parent / "blocks-copy")
    os.symlink(outside.parent / "blocks-copy", blocks)
    code, output = cli(root, "verify", "--integrity")
    assert code == 1
    assert f"{NAME}: invalid\n  {NAME}/blocks {LINKED}\n" in output


def test_a_chain_that_cannot_be_read_is_left_out_of_the_plan_not_shown_to_create(
    pull_request: tuple[Path, Path],
) -> None:
    """Planned as if it had no chain, it read "will be created" beside the error saying
    its chain exists; it is now counted apart, in every format, and no format lists it."""
    root, _ = pull_request
    head = chain(root) / "refs" / "head"
    head.write_text("garbage\n")
    problem = f"chain cannot be read: {NAME}/refs/head holds no block hash: it reads 'garbage'"

    code, output = cli(root, "plan")
    assert code == 1
    assert output.splitlines() == [
        "Problems:",
        f"  odf/{NAME}: {NAME}: {problem}",
        "",
        "Plan: 1 not planned (chain cannot be read). 1 error, 0 warnings.",
    ]
    code, output = cli(root, "plan", "--format", "json")
    document = json.loads(output)
    assert (code, document["unreadable"], document["datasets"]) == (1, [NAME], [])
    assert document["summary"]["actions"]["create"] == 0
    assert [p["message"] for p in document["problems"]] == [problem]
    code, output = cli(root, "plan", "--format", "markdown")
    assert code == 1
    assert "**1 error** · 1 not planned (chain cannot be read)" in output
    assert "will be created" not in output and "to create" not in output


def test_a_head_that_is_a_folder_is_named_not_a_crash(pull_request: tuple[Path, Path]) -> None:
    """A submodule (gitlink) put at ``refs/head`` checks out as a folder; verify said
    ``IsADirectoryError: [Errno 21] Is a directory`` without naming it."""
    root, _ = pull_request
    head = chain(root) / "refs" / "head"
    head.unlink()
    head.mkdir()
    problem = (
        f"{NAME}/refs/head is a folder where the chain has a file (a git submodule, when git"
        " lists it with mode 160000)"
    )
    for args in (["--integrity"], ["--integrity", "--base", "origin/main"]):
        code, output = cli(root, "verify", *args)
        assert code == 1
        assert f"{NAME}: invalid\n  {problem}\n" in output
    code, output = cli(root, "plan")
    assert code == 1
    assert f"  odf/{NAME}: {NAME}: chain cannot be read: {problem}" in output.splitlines()


class _Listener(http.server.BaseHTTPRequestHandler):
    """An S3 endpoint a pull request names: it answers every request with an error and
    keeps the request lines."""

    seen: ClassVar[list[str]] = []

    def _any(self) -> None:
        self.seen.append(self.requestline)
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._any()

    def do_HEAD(self) -> None:
        self._any()

    def do_PUT(self) -> None:
        self._any()

    def log_message(self, *_: object) -> None:
        pass


def test_the_incremental_check_uses_the_base_data_store_not_the_pull_requests(
    pull_request: tuple[Path, Path],
) -> None:
    """The pull request's own ``data_store`` and endpoint were used: its check (the first
    step of the plan workflow, with the runner's credentials) sent requests to a server
    the pull request chose."""
    root, _ = pull_request
    (root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    assert [o.status.value for o in reconcile(root, Timestamp.parse("2026-03-02T00:00:00Z"))] == [
        "updated"
    ]
    repo = git.Repo(root)
    committed = set(repo.git.ls_files("odf").splitlines())
    (new,) = [
        p
        for p in (chain(root) / "data").iterdir()
        if p.relative_to(root).as_posix() not in committed
    ]
    new.unlink()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (root / "pyproject.toml").write_text(
            '[tool.reconciler]\ndata_store = "s3://evil/x"\n\n[tool.reconciler.s3]\n'
            f'endpoint_url = "http://127.0.0.1:{server.server_address[1]}"\n'
        )
        repo.git.add(A=True)
        repo.index.commit("a block whose data is in a store of the pull request's choosing")
        code, output = cli(root, "verify", "--integrity", "--base", "origin/main")
    finally:
        server.shutdown()
        server.server_close()
    assert _Listener.seen == []
    assert code == 1
    assert f"data file {new.name} is missing" in output


def test_submodules_where_files_are_are_named_not_a_crash(pull_request: tuple[Path, Path]) -> None:
    """A gitlink checks out as an empty folder: at a chain's ``data`` or at
    ``pyproject.toml`` the pull request's check stopped with IsADirectoryError."""
    root, _ = pull_request
    repo = git.Repo(root)
    head = repo.head.commit.hexsha
    repo.git.rm("-r", "-q", f"odf/{NAME}/data")
    repo.git.update_index("--add", "--cacheinfo", f"160000,{head},odf/{NAME}/data")
    (chain(root) / "data").mkdir()
    repo.index.commit("the data folder a submodule")
    code, output = cli(root, "verify", "--integrity", "--base", "origin/main")
    assert code == 1
    assert (
        f"  {NAME}/data is a folder where the chain has a file (a git submodule, when git lists"
        " it with mode 160000)"
    ) in output.splitlines()
    (root / "pyproject.toml").unlink(missing_ok=True)
    (root / "pyproject.toml").mkdir()
    code, output = cli(root, "plan")
    assert (code, output) == (1, f"error: {root / 'pyproject.toml'} is not a file\n")


def merged(root: Path, message: str) -> None:
    """Commit the working tree on the pull request's branch and merge it into main, as a
    maintainer would; then a new pull request's branch from there."""
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit(message)
    repo.remote("origin").push("pr:main").raise_if_error()
    repo.remote("origin").fetch()


def planned_with_links(root: Path, links: dict[str, str]) -> list[str]:
    """The plan's lines (exit 1) once a pull request replaced each path of ``links`` by a
    symbolic link to its value."""
    repo = git.Repo(root)
    repo.git.rm("-r", "-q", *links)
    for path, target in links.items():
        (root / path).symlink_to(target)
    repo.git.add(A=True)
    repo.index.commit("links")
    code, output = cli(root, "plan", "--base", "origin/main")
    assert code == 1, output
    return output.splitlines()


def test_chains_made_a_link_to_a_copy_merged_earlier_are_an_error(
    pull_request: tuple[Path, Path],
) -> None:
    """Journey 38: a first pull request copied odf/ to archive/ (no chain: nobody's
    concern), a second made odf a link to archive. Every diff looked through the link,
    and the plan said "2 unchanged, 0 errors" over chains any earlier pull request
    could have forged."""
    root, _ = pull_request
    git.Repo(root).git.execute(["cp", "-r", "odf", "archive"])
    merged(root, "keep a copy")
    lines = planned_with_links(root, {"odf": "archive"})
    assert (
        "  odf: this pull request makes odf a symbolic link (to archive): git and the reviewer"
        " see the link, but a run reads what it leads to. It is where the chains are, which"
        " only the reconciler writes; restore it from the base branch"
    ) in lines
    # read through the link, the chains were planned "1 unchanged" beside that error
    assert lines[-1] == "Plan: 1 not planned (chain cannot be read). 3 errors, 0 warnings."
    code, output = cli(root, "plan", "--base", "origin/main", "--format", "json")
    document = json.loads(output)
    assert (code, document["unreadable"], document["datasets"]) == (1, [NAME], [])


def test_a_source_folder_made_a_link_to_an_edited_copy_is_an_error(
    pull_request: tuple[Path, Path],
) -> None:
    """An ingested file edited in place is an error; edited in a copy that the glob's
    folder was made a link to, it read as deleted (a warning) and passed."""
    root, _ = pull_request
    copy = root / "copy"
    copy.mkdir()
    (copy / "1.csv").write_text("a,b\n1,x\n2,EDITED\n")
    assert (
        "  sources: this pull request makes sources a symbolic link (to copy): git and the"
        " reviewer see the link, but a run reads what it leads to. It is where"
        f" {NAME} reads its source files; commit the files themselves"
    ) in planned_with_links(root, {"sources": "copy"})


def test_policies_or_settings_made_links_are_an_error_and_judged_as_the_base_has_them(
    pull_request: tuple[Path, Path],
) -> None:
    """Journey 38: ``policies`` made a link to a folder of the pull request's own rules
    (or to one with none) was judged by those, since reading the base's ``policies``
    followed the link into the base's copy of its target; ``pyproject.toml`` made a link
    compared every setting with the defaults."""
    root, _ = pull_request
    (root / "policies").mkdir()
    (root / "policies" / "naming.yaml").write_text(
        "rules:\n  - id: names\n    severity: error\n    message: the base's rule\n"
        "    name_pattern: '^com[.]'\n"
    )
    (root / "pyproject.toml").write_text("[tool.reconciler]\nmax_download_seconds = 15\n")
    merged(root, "rules and settings")
    (root / "mine").mkdir()
    (root / "mine" / "none.yaml").write_text("policies: []\n")
    (root / "settings.toml").write_text("[tool.reconciler]\nmax_download_seconds = 3600\n")
    lines = planned_with_links(root, {"policies": "mine", "pyproject.toml": "settings.toml"})
    output = "\n".join(lines)
    for path, target, what in (
        ("policies", "mine", "where the policies that judge pull requests are"),
        ("pyproject.toml", "settings.toml", "the repository's settings"),
    ):
        assert (
            f"  {path}: this pull request makes {path} a symbolic link (to {target}): git and"
            " the reviewer see the link, but a run reads what it leads to. It is"
            f" {what}; restore it from the base branch"
        ) in lines
    assert any("deletes the policy file naming.yaml" in line for line in lines), output
    assert any("max_download_seconds rises from 15 to 3600 seconds" in line for line in lines)
    assert any(line.startswith("  [names] ") for line in lines), output  # the base's rules


CHAINS_LINKED = (
    "a symbolic link (to {target}): git and the reviewer see the link, but a run reads what it"
    " leads to. It is where the chains are, which only the reconciler writes; restore it from"
    " the base branch"
)
FOLDER_LINKED = (
    "dataset folder '{name}' is a symbolic link: a chain is read and written only in its own"
    " folder, never through a link"
)
CHAIN_RULE = (
    "only the reconciler writes chains, on the default branch after merge: change the manifests"
    " under datasets/ instead, and restore odf/ from the base branch in this pull request"
)


def copied(root: Path, folder: str, edited: bool = True) -> None:
    """A first pull request, merged: ``folder`` copied to ``copy`` (nobody's concern: not a
    chain), ``edited`` with one byte of its chain's data file changed."""
    git.Repo(root).git.execute(["cp", "-r", folder, "copy"])
    if edited:
        (data,) = (root / "copy").glob("**/data/*")
        data.write_bytes(data.read_bytes()[:-1] + b"?")
    merged(root, "keep a copy")


def section(lines: list[str], title: str) -> list[str]:
    """The lines of the plan's section ``title`` (its heading included), up to the blank."""
    start = lines.index(title)
    return lines[start : lines.index("", start)]


def test_a_dataset_folder_made_a_link_is_an_error_not_a_git_failure(
    pull_request: tuple[Path, Path],
) -> None:
    """The plan asked git whether it ignored files beneath the link, and stopped with
    "error: cannot read the ignore rules: fatal: pathspec … is beyond a symbolic link"
    before the link was reported; a local plan stopped the same way."""
    root, _ = pull_request
    copied(root, f"odf/{NAME}")
    lines = planned_with_links(root, {f"odf/{NAME}": "../copy"})
    unread = f"  odf: {NAME}: chain folder not read: {FOLDER_LINKED.format(name=NAME)}"
    assert section(lines, "Problems:") == [
        "Problems:",
        unread,
        f"  odf/{NAME}: this pull request makes odf/{NAME} "
        + CHAINS_LINKED.format(target="../copy"),
    ]
    assert section(lines, "Policy errors:") == [
        "Policy errors:",
        f"  [chains-changed-in-pull-request] odf/{NAME}: {NAME}: this pull request deletes 6"
        f" blocks, deletes 1 data file, deletes info/alias and deletes refs/head in the chain"
        f" of {NAME}: {CHAIN_RULE}",
    ]
    # a chain that cannot be read is not planned: it was shown "will be created"
    assert lines[-1] == "Plan: 1 not planned (chain cannot be read). 3 errors, 0 warnings."
    code, output = cli(root, "plan")
    assert code == 1
    assert section(output.splitlines(), "Problems:") == ["Problems:", unread]
    # merged past its failed plan, the scheduled run's verify passed over it: "0 datasets"
    code, output = cli(root, "verify", "--integrity")
    assert code == 1
    assert output.splitlines()[:-1] == [
        f"{NAME}: invalid",
        f"  chain folder not read: {FOLDER_LINKED.format(name=NAME)}",
    ]
    assert output.splitlines()[-1].startswith("1 dataset: 0 valid, 1 invalid in ")


def test_a_blocks_folder_made_a_link_is_an_error_not_a_git_failure(
    pull_request: tuple[Path, Path],
) -> None:
    """The same git failure, one folder deeper: asked about the blocks beneath the link.
    Merged past its failed plan, the scheduled run planned "1 unchanged" and would have
    appended its blocks through the link, into ``copy/``, which its commit leaves out."""
    root, _ = pull_request
    copied(root, f"odf/{NAME}/blocks", edited=False)
    lines = planned_with_links(root, {f"odf/{NAME}/blocks": "../../copy"})
    unread = f"  odf/{NAME}: {NAME}: chain cannot be read: {NAME}/blocks {LINKED}"
    assert section(lines, "Problems:") == [
        "Problems:",
        unread,
        f"  odf/{NAME}/blocks: this pull request makes odf/{NAME}/blocks "
        + CHAINS_LINKED.format(target="../../copy"),
    ]
    # the link itself read "adds blocks", as if the pull request had added some
    assert section(lines, "Policy errors:") == [
        "Policy errors:",
        f"  [chains-changed-in-pull-request] odf/{NAME}: {NAME}: this pull request deletes 6"
        f" blocks and replaces the blocks folder with a symbolic link in the chain of {NAME}:"
        f" {CHAIN_RULE}",
    ]
    merged(root, "links")
    (root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    copy = sorted(path.name for path in (root / "copy").iterdir())
    for args in (["plan"], ["apply", "--yes"]):
        code, output = cli(root, *args)
        assert code == 1, output
        assert section(output.splitlines(), "Problems:") == ["Problems:", unread]
    assert sorted(path.name for path in (root / "copy").iterdir()) == copy


@pytest.mark.parametrize(("folder", "target"), [("odf", "copy"), (f"odf/{NAME}", "../copy")])
def test_the_incremental_check_fails_on_chains_made_a_link(
    pull_request: tuple[Path, Path], folder: str, target: str
) -> None:
    """``verify --integrity --base`` read the chains through the link, and found the copy
    it leads to valid (``odf``: a copy with its hashes made anew passes as well) or no
    chain at all (a dataset's folder), and passed."""
    root, _ = pull_request
    copied(root, folder, edited=False)
    planned_with_links(root, {folder: target})
    code, output = cli(root, "verify", "--integrity", "--base", "origin/main")
    expected = f"error: this pull request makes {folder} {CHAINS_LINKED.format(target=target)}\n"
    assert (code, output) == (1, expected)


def test_the_incremental_check_fails_on_a_dataset_folder_link_the_pull_request_retargets(
    pull_request: tuple[Path, Path],
) -> None:
    """Journey 40: a link the base has already is not the pull request's doing, but a new
    target is: what the chains are read from changed."""
    root, _ = pull_request
    for copy in ("a", "b"):
        git.Repo(root).git.execute(["cp", "-r", str(chain(root)), copy])
    git.Repo(root).git.rm("-r", "-q", f"odf/{NAME}")
    chain(root).symlink_to("../a")
    merged(root, "the chain moved out, behind a link")
    chain(root).unlink()
    chain(root).symlink_to("../b")
    git.Repo(root).git.add(A=True)
    git.Repo(root).index.commit("a link retargeted")
    code, output = cli(root, "verify", "--integrity", "--base", "origin/main")
    expected = f"odf/{NAME} {CHAINS_LINKED.format(target='../b')}"
    assert (code, output) == (1, f"error: this pull request makes {expected}\n")


def test_the_chains_verdict_on_a_linked_chains_folder_lists_no_dot(
    pull_request: tuple[Path, Path],
) -> None:
    """The link itself read "this pull request adds . and deletes .lock in no dataset's
    folder" beside the link's own error: what git deleted is listed, not the link."""
    root, _ = pull_request
    copied(root, "odf")
    assert section(planned_with_links(root, {"odf": "copy"}), "Policy errors:") == [
        "Policy errors:",
        "  [chains-changed-in-pull-request] odf: this pull request deletes .lock in no"
        f" dataset's folder: {CHAIN_RULE}",
        f"  [chains-changed-in-pull-request] odf/{NAME}: {NAME}: this pull request deletes 6"
        f" blocks, deletes 1 data file, deletes info/alias and deletes refs/head in the chain"
        f" of {NAME}: {CHAIN_RULE}",
    ]


def tree(root: Path) -> dict[str, str]:
    """Every file and link under ``root`` but ``.git``, with its text or its link's
    target: what a refused run must leave as it found it."""
    found = {}
    for path in sorted(root.rglob("*")):
        if ".git" in path.relative_to(root).parts or (path.is_dir() and not path.is_symlink()):
            continue
        text = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_text("latin-1")
        found[path.relative_to(root).as_posix()] = text
    return found


def test_a_reader_of_a_chain_that_cannot_be_read_is_not_planned(
    read_pull_request: tuple[Path, Path],
) -> None:
    """Its input's chain unread, the reader was planned over an input with no chain: "will
    be recreated: its chain reads did:odf:…, which no chain has any more (an input was
    recreated)", reprocessing "0 input records", none of it true."""
    root, _ = read_pull_request
    copied(root, f"odf/{NAME}")
    lines = planned_with_links(root, {f"odf/{NAME}": "../copy"})
    not_planned = f"! {READER} not planned: it reads {NAME}, whose chain cannot be read"
    headline = (
        "Plan: 1 not planned (chain cannot be read), 1 not planned (reads a chain that cannot"
        " be read). {}, 0 warnings."
    )
    assert (lines[:2], lines[-1]) == ([not_planned, ""], headline.format("3 errors"))
    assert not any("recreate" in line for line in lines), lines
    unread = f"  odf: {NAME}: chain folder not read: {FOLDER_LINKED.format(name=NAME)}"
    code, output = cli(root, "plan")
    expected = [not_planned, "", "Problems:", unread, "", headline.format("1 error")]
    assert (code, output.splitlines()) == (1, expected)
    code, output = cli(root, "plan", "--format", "json")
    document = json.loads(output)
    validator("plan.json").validate(document)
    assert (code, document["unreadable"], document["datasets"], document["verdicts"]) == (
        1,
        [NAME],
        [],
        [],
    )
    assert document["blocked"] == [{"name": READER, "inputs": [NAME]}]
    code, output = cli(root, "plan", "--format", "markdown")
    assert code == 1
    assert (
        f"- `{READER}` not planned: it reads `{NAME}`, whose chain cannot be read"
        in output.splitlines()
    )
    before = tree(root)
    code, output = cli(root, "apply", "--yes")
    assert code == 1
    assert not_planned in output.splitlines()
    assert tree(root) == before


CHAINS_OWN_TREE = (
    "{link} is a symbolic link (to {target}): the chains{under} must be in the repository's"
    " own tree, which only the reconciler writes; restore the folder from the commit before"
    " the link"
)


def test_chains_made_a_link_in_a_merged_pull_request_are_neither_planned_nor_applied(
    pull_request: tuple[Path, Path],
) -> None:
    """Merged past its failed plan, ``odf`` a link to a copy: the scheduled run (no base)
    read the chains through it, planned "1 to update" and would have appended the new
    file's blocks into ``copy/``, which its commit leaves out. The base has the link too,
    so a later pull request's plan said nothing of it either."""
    root, _ = pull_request
    copied(root, "odf", edited=False)
    git.Repo(root).git.rm("-r", "-q", "odf")
    (root / "odf").symlink_to("copy")
    merged(root, "the chains a link")
    (root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    error = CHAINS_OWN_TREE.format(link="odf", target="copy", under="")
    expected = [
        "Problems:",
        f"  odf: {error}",
        "",
        "Plan: 1 not planned (chain cannot be read). 1 error, 0 warnings.",
    ]
    before = tree(root)
    for args in (["plan"], ["plan", "--base", "origin/main"]):
        code, output = cli(root, *args)
        assert (code, output.splitlines()) == (1, expected)
    code, output = cli(root, "apply", "--yes")
    assert code == 1
    assert (
        f"error: the plan has 1 error, so nothing was applied; the first: odf: {error}"
        in output.splitlines()
    )
    assert tree(root) == before


def test_chains_under_a_linked_folder_are_refused_naming_the_link(tmp_path: Path) -> None:
    (tmp_path / "real" / "odf").mkdir(parents=True)
    (tmp_path / "store").symlink_to("real")
    (tmp_path / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "store/odf"\n')
    config = RepoConfig.load(tmp_path)
    message = CHAINS_OWN_TREE.format(link="store", target="real", under=" (store/odf)")
    assert chains_link_problem(config) == Problem(
        message, location=Location(str(config.root / "store"))
    )
    (tmp_path / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "real/odf"\n')
    assert chains_link_problem(RepoConfig.load(tmp_path)) is None


def test_a_dataset_folder_linked_to_another_in_the_chains_folder_is_not_read(
    pull_request: tuple[Path, Path],
) -> None:
    """``odf/org.example.a`` a link to ``org.example.z``, a copy of its chain: both were
    read as chains, one id under two names, and a run appended the new file's blocks to
    the copy's folder through the link."""
    root, _ = pull_request
    copy = "org.example.z"
    git.Repo(root).git.execute(["cp", "-r", f"odf/{NAME}", f"odf/{copy}"])
    git.Repo(root).git.rm("-r", "-q", f"odf/{NAME}")
    chain(root).symlink_to(copy)
    merged(root, "a dataset folder linked to another")
    (root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    unread = f"chain folder not read: {FOLDER_LINKED.format(name=NAME)}"
    before = tree(root)
    code, output = cli(root, "plan")
    assert code == 1
    assert section(output.splitlines(), "Problems:") == ["Problems:", f"  odf: {NAME}: {unread}"]
    assert output.splitlines()[-1] == (
        "Plan: 1 orphaned, 1 not planned (chain cannot be read). 1 error, 0 warnings."
    )
    code, output = cli(root, "apply", "--yes")
    assert code == 1
    refused = (
        f"error: the plan has 1 error, so nothing was applied; the first: odf: {NAME}: {unread}"
    )
    assert refused in output.splitlines()
    assert tree(root) == before
    code, output = cli(root, "verify", "--integrity")
    assert code == 1
    assert output.splitlines()[:3] == [
        f"{NAME}: invalid",
        f"  {unread}",
        f"{copy}: valid (6 blocks)",
    ]


@pytest.mark.parametrize("args", [(), ("--integrity",), ("--integrity", "--no-download")])
def test_the_full_check_fails_on_chains_behind_a_link_whoever_made_it(
    pull_request: tuple[Path, Path], args: tuple[str, ...]
) -> None:
    """Journey 41: with ``odf`` a link to a copy (merged past its failed plan, or made on
    the runner), the plan read no chain but ``verify`` read the copy, found it valid,
    and the scheduled job went on to its apply."""
    root, _ = pull_request
    (root / "odf").rename(root.parent / "elsewhere")
    (root / "odf").symlink_to(root.parent / "elsewhere")
    code, output = cli(root, "verify", *args)
    assert (code, output) == (
        1,
        f"error: odf is a symbolic link (to {root.parent / 'elsewhere'}): the chains must be"
        " in the repository's own tree, which only the reconciler writes; restore the"
        " folder from the commit before the link\n",
    )
