"""The GitOps loop on real repositories: a bare remote, clones, and the commands CI runs.

A pull request is planned against its base, merged, and a scheduled `reconcile apply
--commit --push` commits exactly the ODF folder and pushes it. Runs that race (another
run, a README commit pushed meanwhile) converge: the rejected run moves to the remote's
tip and reconciles again. A failing dataset does not hold the others back, and a dirty
odf/ is refused before anything is applied.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from gitops_repo import GitOpsRepo, manifest, root_events, rows, slices
from test_cli_apply import run
from test_cli_conventions import interrupted, normal
from test_workflows import step_summary

from reconciler.apply.outcome import Outcome, Status
from reconciler.config import shown_paths
from reconciler.gitloop.gitops import attribute_source, converted_paths
from reconciler.gitloop.message import (
    DatasetRun,
    Trailers,
    commit_message,
    recovery_message,
    subject,
)
from reconciler.gitloop.worktree import CommitError, Worktree
from reconciler.masking import referenced_secrets
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Location, Severity
from reconciler.planning.compose import PlanRequest, make_plan

A = "org.example.a"
B = "org.example.b"
WHEN = "2026-03-01T06:00:00Z"


def root(name: str, folder: str) -> str:
    return manifest(name, "Root", root_events().replace("sources/*.csv", f"sources/{folder}/*.csv"))


def remote_with(tmp_path: Path, datasets: dict[str, str]) -> Path:
    """A bare remote whose main holds a manifest and a CSV per dataset (name: CSV text)."""
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True, initial_branch="main")
    seed = GitOpsRepo.create(tmp_path / "seed")
    for i, (name, csv) in enumerate(datasets.items()):
        folder = seed.root / "sources" / f"s{i}"
        folder.mkdir(parents=True)
        (folder / "part-1.csv").write_text(csv)
        seed.write(name, root(name, f"s{i}"))
    seed.commit("datasets")
    repo = git.Repo(seed.root)
    repo.create_remote("origin", str(origin)).push("main").raise_if_error()
    return origin


def clone(origin: Path, where: Path) -> git.Repo:
    repo = git.Repo.clone_from(str(origin), where)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "reconciler")
        cw.set_value("user", "email", "reconciler@example.org")
    return repo


def reconcile_and_push(where: Path, *extra: str, process: bool = False) -> tuple[int, str, str]:
    result = run(
        where, "apply", "--commit", "--push", "--system-time", WHEN, *extra, process=process
    )
    return result.returncode, result.stdout, result.stderr


def trailers(message: str) -> dict[str, str]:
    last = message.strip().split("\n\n")[-1]
    return dict(line.split(": ", 1) for line in last.splitlines())


def odf_files(where: Path) -> list[str]:
    return sorted(
        p.relative_to(where).as_posix()
        for p in (where / "odf").rglob("*")
        if p.is_file() and p.name != ".lock"
    )


def head_of(where: Path, name: str) -> str:
    return (where / "odf" / name / "refs" / "head").read_text().strip()


def sources_pushed(tmp_path: Path, message: str, files: dict[int, str]) -> None:
    """The seed of ``remote_with`` brought up to date, then committing ``files`` (day: CSV
    text, as ``sources/s0/part-<day>.csv``, the first dataset's) and pushing them to main,
    as a person adds files to a dataset between scheduled runs."""
    seed = git.Repo(tmp_path / "seed")
    seed.remote("origin").pull("main")
    for day, text in files.items():
        (tmp_path / "seed" / "sources" / "s0" / f"part-{day}.csv").write_text(text)
    seed.git.add("sources")
    seed.index.commit(message)
    seed.remote("origin").push("main").raise_if_error()


def pushed_despite_a_failure(
    origin: Path, runner: Path, *extra: str
) -> tuple[git.Commit, str, str]:
    """The scheduled job in ``runner``, a new clone of ``origin``, where one dataset fails
    and another advances: it exits 1 and pushes what advanced. That commit, and the job's
    standard output and error."""
    clone(origin, runner)
    code, out, err = reconcile_and_push(runner, *extra)
    assert code == 1, out + err
    pushed = git.Repo(origin).commit("main")
    assert pushed.summary == "reconcile: 1 dataset advanced (3 records), 1 failed"
    return pushed, out, err


CSV_A = "a,b\n1,x\n2,y\n3,z\n"
CSV_B = "a,b\n10,p\n20,q\n"


def test_a_merged_pull_request_is_applied_on_schedule_committed_and_pushed(
    tmp_path: Path,
) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})

    # A pull request adds B; its plan is made against the base branch.
    dev = clone(origin, tmp_path / "dev")
    dev.git.checkout("-b", "add-b")
    (tmp_path / "dev" / "sources" / "s1").mkdir()
    (tmp_path / "dev" / "sources" / "s1" / "part-1.csv").write_text(CSV_B)
    (tmp_path / "dev" / "datasets" / f"{B}.yaml").write_text(root(B, "s1"))
    dev.git.add(A=True)
    dev.index.commit("add b")
    plan = run(tmp_path / "dev", "plan", "--base", "origin/main", "--detailed-exitcode")
    assert plan.returncode == 2, plan.stderr

    document = json.loads(
        run(tmp_path / "dev", "plan", "--base", "origin/main", "--format", "json").stdout
    )
    assert [(d["name"], d["action"], d["changedInPr"]) for d in document["datasets"]] == [
        (A, "create", False),
        (B, "create", True),
    ]

    # The merge.
    dev.git.checkout("main")
    dev.git.merge("--no-ff", "-m", "Merge pull request: add b", "add-b")
    dev.remote("origin").push("main").raise_if_error()

    # The scheduled run, a process of its own as the workflow starts it.
    runner = tmp_path / "runner"
    clone(origin, runner)
    planned = run(runner, "plan", "--format", "json")
    code, out, err = reconcile_and_push(runner, process=True)
    assert code == 0, out + err
    pushed = git.Repo(origin).commit("main")
    assert pushed.hexsha == git.Repo(runner).head.commit.hexsha
    assert pushed.parents[0].message == "Merge pull request: add b\n"
    sha = pushed.hexsha[:12]
    assert out.splitlines()[-3:] == [
        f"committed {sha}: reconcile: 2 datasets advanced (5 records)",
        f"pushed {sha} to origin/main",
        out.splitlines()[-1],
    ]
    run_id = trailers(str(pushed.message))["Reconcile-Run-Id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", run_id)
    assert pushed.message == (
        "reconcile: 2 datasets advanced (5 records)\n"
        "\n"
        "Advanced:\n"
        f"- {A}: created, 6 blocks (4 metadata), 3 records, offsets 0-2, head {head_of(runner, A)}\n"
        f"- {B}: created, 6 blocks (4 metadata), 2 records, offsets 0-1, head {head_of(runner, B)}\n"
        "\n"
        f"Reconcile-Run-Id: {run_id}\n"
        f"Reconcile-Plan-Hash: {hashlib.sha256(planned.stdout.encode()).hexdigest()}\n"
        "Reconcile-Version: 0.1.0\n"
    )
    committed = sorted(pushed.stats.files)
    assert committed == odf_files(runner)
    assert all(f.startswith("odf/") for f in committed)
    assert not [f for f in committed if f.endswith(".lock") or ".pending-" in f]
    assert (runner / "odf" / ".lock").exists()  # the lock stays untracked
    assert git.Repo(runner).is_dirty(untracked_files=False) is False


def assert_remote_valid_with_each_record_once(origin: Path, where: Path) -> None:
    """A fresh clone of the remote verifies, and holds each source record exactly once."""
    clone(origin, where)
    verify = run(where, "verify", "--integrity")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    fresh = GitOpsRepo(where)
    stored = [rows(t, "offset", "system_time", "event_time") for t in slices(fresh.odf.dataset(A))]
    assert stored == [[(0, 1, "x"), (0, 2, "y"), (0, 3, "z")]]


def test_a_run_whose_push_lost_the_race_moves_to_the_remote_tip_and_finds_nothing_left(
    tmp_path: Path,
) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    first, second = tmp_path / "first", tmp_path / "second"
    clone(origin, first)
    clone(origin, second)  # both start from the same tip

    code, out, err = reconcile_and_push(first)
    assert code == 0, out + err
    won = git.Repo(origin).commit("main")

    code, out, err = reconcile_and_push(second)
    assert code == 0, out + err
    lost = re.search(r"^committed ([0-9a-f]{12}): (.*)$", out, re.M)
    assert lost is not None and lost.group(2) == "reconcile: 1 dataset advanced (3 records)"
    # the summary (1 up to date) is the last attempt's: the first's work is said apart
    assert err == (
        "push rejected: the remote moved; reconciling again from origin/main (attempt 2 of 4)\n"
        f"attempt 1's commit ({lost.group(1)}: reconcile: 1 dataset advanced (3 records)) was"
        " given up: the remote's new commits had advanced the same chains, and the run"
        " started again from them\n"
    )
    assert out.splitlines()[-2] == "nothing to commit"
    assert git.Repo(origin).commit("main") == won
    assert git.Repo(second).head.commit == won
    assert [c.summary for c in git.Repo(origin).iter_commits("main")] == [
        "reconcile: 1 dataset advanced (3 records)",
        "datasets",
    ]
    assert_remote_valid_with_each_record_once(origin, tmp_path / "fresh")


def readme_pushed_after_first_commit(
    runner: Path, person: git.Repo, path: str = "README.md"
) -> None:
    """Between the first commit in ``runner`` and its push, ``person`` pushes a README (or
    another file at ``path``) to main (once): a race the run loses."""
    marker = runner.parent / f"{runner.name}.raced"
    hook = runner / ".git" / "hooks" / "post-commit"
    hook.write_text(
        "#!/bin/sh\n"
        f"[ -e {marker} ] && exit 0\n"
        f"touch {marker}\n"
        "unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX\n"
        f"cd {person.working_tree_dir} && mkdir -p $(dirname {path}) && echo '# Data' > {path}"
        f" && git add {path} && git commit -q -m 'README' && git push -q origin main\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)


def test_a_retry_does_not_extend_a_chain_the_remotes_new_commits_left_invalid(
    tmp_path: Path,
) -> None:
    """The workflow verifies the chains once, before the first attempt: a commit merged
    during the run that flips a byte of a data file was built on, pushed and exit 0."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    clone(origin, runner)
    code, out, err = reconcile_and_push(runner)
    assert code == 0, out + err
    person = clone(origin, tmp_path / "person")
    (data,) = (tmp_path / "person" / "odf" / A / "data").iterdir()
    (runner / "sources" / "s0" / "part-2.csv").write_text("a,b\n4,w\n")
    git.Repo(runner).git.add(A=True)
    git.Repo(runner).index.commit("a new file")
    git.Repo(runner).remote("origin").push("main").raise_if_error()
    person.remote("origin").pull("main")
    marker = runner.parent / "tampered"
    hook = runner / ".git" / "hooks" / "post-commit"
    relative = data.relative_to(tmp_path / "person").as_posix()
    hook.write_text(
        "#!/bin/sh\n"
        f"[ -e {marker} ] && exit 0\n"
        f"touch {marker}\n"
        "unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX\n"
        f"cd {person.working_tree_dir} && printf X | dd of={relative} bs=1 seek=40"
        " conv=notrunc 2>/dev/null && git commit -q -am 'a stray edit' && git push -q origin"
        " main\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    code, out, err = reconcile_and_push(runner)
    assert code == 1, out + err
    assert err.startswith(
        "push rejected: the remote moved; reconciling again from origin/main (attempt 2 of 4)\n"
    )
    assert f"the remote's new commits leave the chain of {A} invalid (block #" in out + err
    assert "nothing more was applied" in out + err
    assert git.Repo(origin).commit("main").summary == "a stray edit"
    # the summary does not count the set-aside attempt's datasets (they said 'updated')
    assert err.splitlines()[-1].endswith(
        "this attempt's work went with its commit, and nothing was pushed"
    )
    assert re.fullmatch(r"nothing applied in [\d.]+ s", out.splitlines()[-1])


def test_two_runs_racing_a_rename_converge_without_a_false_alarm(tmp_path: Path) -> None:
    """The run that lost the push checked the winner's commits and called the renamed-away
    chain invalid ("block … is missing"), exit 1, though the remote was fine."""
    origin = remote_with(tmp_path, {A: CSV_A})
    first = tmp_path / "first"
    clone(origin, first)
    code, out, err = reconcile_and_push(first)
    assert code == 0, out + err
    person = clone(origin, tmp_path / "person")
    renamed = "org.example.renamed"
    manifests = tmp_path / "person" / "datasets"
    (manifests / f"{A}.yaml").unlink()
    (manifests / f"{renamed}.yaml").write_text(
        f"# reconcile: renamed-from: {A}\n" + root(renamed, "s0")
    )
    person.git.add(A=True)
    person.index.commit("rename a")
    person.remote("origin").push("main").raise_if_error()
    winner, loser = tmp_path / "winner", tmp_path / "loser"
    clone(origin, winner)
    clone(origin, loser)  # both start from the merged rename
    code, out, err = reconcile_and_push(winner)
    assert code == 0, out + err
    code, out, err = reconcile_and_push(loser)
    assert code == 0, out + err
    assert err.startswith(
        "push rejected: the remote moved; reconciling again from origin/main (attempt 2 of 4)\n"
        "attempt 1's commit ("
    )
    assert len(err.splitlines()) == 2
    assert out.splitlines()[-2] == "nothing to commit"
    fresh = clone(origin, tmp_path / "fresh")
    assert sorted(p.name for p in (tmp_path / "fresh" / "odf").iterdir() if p.is_dir()) == [renamed]
    assert fresh.commit("main").summary == "reconcile: 1 renamed"


def assert_the_pushed_sha_is_said(out: str, pushed: str, carried: bool) -> None:
    """The lines before the summary name the commit the remote got. A commit carried onto
    the remote's tip is rebased: the sha it was committed as is on no branch, and the run
    said that sha alone, as if it were the one pushed."""
    committed = re.search(r"^committed ([0-9a-f]{12}): .*$", out, re.M)
    assert committed is not None, out
    assert (committed[1] == pushed) is not carried
    carry = [f"carried {committed[1]} onto origin/main as {pushed}"] if carried else []
    assert out.splitlines()[-3 - len(carry) : -1] == [
        committed[0],
        *carry,
        f"pushed {pushed} to origin/main",
    ]


def test_a_readme_commit_pushed_during_a_run_has_its_commit_carried_onto_the_new_tip(
    tmp_path: Path,
) -> None:
    """The remote's new commit leaves the chains alone: the run's commit goes on top of it
    as it is, where the run used to throw its work away and do it all again."""
    origin = remote_with(tmp_path, {A: CSV_A})
    person = clone(origin, tmp_path / "person")
    runner = tmp_path / "runner"
    clone(origin, runner)
    readme_pushed_after_first_commit(runner, person)

    code, document, out = reconcile_and_push(runner, "--format", "json")  # one stream
    assert code == 0, document + out
    # done once: the commit is pushed again as it was, nothing reconciled again
    assert [line for line in normal(out) if line.startswith("HH:MM:SS OK")] == [
        f"HH:MM:SS OK    {A} created: 6 blocks (4 metadata), 3 records in N s",
    ]
    assert [c.summary for c in git.Repo(origin).iter_commits("main")] == [
        "reconcile: 1 dataset advanced (3 records)",
        "README",
        "datasets",
    ]
    assert (runner / "README.md").read_text() == "# Data\n"
    # the carry follows the rejection it answers (it was said before it)
    pushed = git.Repo(origin).commit("main").hexsha[:12]
    assert [
        re.sub(r"\b(?!" + pushed + r")[0-9a-f]{12}\b", "SHA", line)
        for line in out.splitlines()[-5:-1]
    ] == [
        "committed SHA: reconcile: 1 dataset advanced (3 records)",
        "push rejected: the remote moved; pushing again on top of origin/main (attempt 2 of 4)",
        f"carried SHA onto origin/main as {pushed}",
        f"pushed {pushed} to origin/main",
    ]
    assert json.loads(document)["summary"]["records"] == 3
    assert_remote_valid_with_each_record_once(origin, tmp_path / "fresh")


@pytest.mark.parametrize("raced", ["", "README.md", "odf/NOTES"])
def test_a_stopped_run_pushes_the_files_it_ingested_before_the_stop(
    tmp_path: Path, raced: str
) -> None:
    """A CI runner's cancel sends SIGINT, and throws the checkout away: the commit of what
    finished was kept local ("committed, not pushed"), so a backlog longer than the job
    never landed. A stop ends a pull after the file at hand, and what is done is pushed,
    also when a README was pushed meanwhile (it was kept local then: "the remote
    moved")."""
    origin = remote_with(tmp_path, {A: CSV_A})
    sources_pushed(tmp_path, "two more files", {day: f"a,b\n{day}0,d\n" for day in (2, 3)})
    clone(origin, tmp_path / "runner")
    if raced:
        person = clone(origin, tmp_path / "person")
        readme_pushed_after_first_commit(tmp_path / "runner", person, raced)
    # To the process group, as GitHub's cancel and the workflow's ``timeout`` send it: the
    # git processes GitPython keeps went with it, and the commit died of a broken pipe.
    scheduled = ("--commit", "--push")
    done = interrupted(tmp_path / "runner", signal.SIGINT, options=scheduled, group=True)
    if raced.startswith("odf/"):  # as if another run had advanced the chains meanwhile
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines()[-1] == (
            "interrupted: committed, not pushed: the remote's new commits advanced"
            " the chains too; the next run does this run's work again"
        )
        assert git.Repo(origin).commit("main").summary == "README"
        return
    assert done.returncode == 130, done.stderr
    assert f"interrupted: stopped after {A}; every chain is valid" in done.stderr
    pushed = git.Repo(origin).commit("main")
    assert pushed.summary == "reconcile: 1 dataset advanced (3 records)"
    assert pushed.parents[0].summary == ("README" if raced else "two more files")
    assert_the_pushed_sha_is_said(done.stdout, pushed.hexsha[:12], carried=bool(raced))
    fresh = tmp_path / "fresh"
    git.Repo.clone_from(str(origin), fresh)
    assert run(fresh, "verify", "--integrity").returncode == 0
    chain = OdfRepository(fresh / "odf").dataset(A)
    assert [r[3:] for t in slices(chain) for r in rows(t, "system_time")] == [
        (1, "x"),
        (2, "y"),
        (3, "z"),
    ]


def test_a_stop_during_the_last_dataset_still_commits_and_pushes_it(tmp_path: Path) -> None:
    """A Ctrl-C to the group while the last file of the last dataset is ingested has
    nothing left to stop, but ends GitPython's ``git cat-file``: the commit was made
    only when the run counted itself stopped, and this one died of the broken pipe
    (exit 141) with its work committed and never pushed."""
    origin = remote_with(tmp_path, {A: CSV_A})
    clone(origin, tmp_path / "runner")
    done = interrupted(
        tmp_path / "runner", signal.SIGINT, options=("--commit", "--push"), group=True
    )
    assert done.returncode == 0, done.stderr
    pushed = git.Repo(origin).commit("main")
    assert pushed.hexsha == git.Repo(tmp_path / "runner").head.commit.hexsha
    assert pushed.summary == "reconcile: 1 dataset advanced (3 records)"
    assert done.stderr.splitlines() == [
        "stopping at the next safe point, keeping what is done (Ctrl-C again to stop at once)"
    ]
    said = done.stdout.splitlines()
    assert said[1:3] == [
        f"committed {pushed.hexsha[:12]}: reconcile: 1 dataset advanced (3 records)",
        f"pushed {pushed.hexsha[:12]} to origin/main",
    ]
    assert said[3].startswith("1 dataset: 1 created (3 records) in ")


def test_a_failing_dataset_exits_1_while_the_others_are_committed_and_pushed(
    tmp_path: Path,
) -> None:
    """The cause names the bad file relative to the repository, as the plan does, in the
    commit, the step summary and the log: they quoted the runner's checkout folder
    (``read failed: ReadError: /home/runner/work/repo/sources/s1/part-1.csv: …``)."""
    origin = remote_with(tmp_path, {A: CSV_A, B: "a,b\n10,p\nnot-a-number,q\n"})
    runner = tmp_path / "runner"
    pushed, out, err = pushed_despite_a_failure(origin, runner, "--format", "json")
    cause = (
        "read failed: ReadError: sources/s1/part-1.csv: line 3: malformed record:"
        " not-a-number,q: column a (BIGINT): 'not-a-number' is not a valid BIGINT"
    )
    body = str(pushed.message).split("\n\n")
    assert body[1:3] == [
        f"Advanced:\n- {A}: created, 6 blocks (4 metadata), 3 records, offsets 0-2, head {head_of(runner, A)}",
        f"Failed:\n- {B}: {cause}",
    ]
    assert sorted({f.split("/")[1] for f in pushed.stats.files}) == [A]
    assert f"HH:MM:SS ERROR {B} failed: {cause} in N s" in normal(err)
    # The workflow's summary step, on the document the job wrote.
    (tmp_path / "result.json").write_text(out)
    seconds = [d["seconds"] for d in json.loads(out)["datasets"]]
    assert step_summary(tmp_path).splitlines()[3:] == [
        f"| `{A}` | created | 6 | 3 | {seconds[0]} |  |",
        f"| `{B}` | failed | 0 | 0 | {seconds[1]} | `{cause}` |",
        "",
    ]


def test_a_bad_file_in_a_backlog_lets_the_files_before_it_land_and_the_next_run_go_on(
    tmp_path: Path,
) -> None:
    """The scheduled job commits what a failed pull kept (the files before the bad one)
    and pushes it, exit 1; mended on main, the next run takes the bad file and the rest."""
    origin = remote_with(tmp_path, {A: CSV_A})
    backlog = {2: "a,b\n4,u\nfour,v\n", 3: "a,b\n5,w\n"}
    sources_pushed(tmp_path, "two more files, the first of them bad", backlog)
    runner = tmp_path / "runner"
    pushed, _, _ = pushed_despite_a_failure(origin, runner)
    body = str(pushed.message).split("\n\n")
    assert body[1] == (
        f"Advanced:\n- {A}: 6 blocks (4 metadata), 3 records, offsets 0-2, head"
        f" {head_of(runner, A)}, then failed (below)"
    )
    assert body[2] == (
        f"Failed:\n- {A}: read failed: ReadError: sources/s0/part-2.csv: line 3:"
        " malformed record: four,v: column a (BIGINT): 'four' is not a valid BIGINT; what the"
        " files before it added is kept (3 records), and the next run starts again from this one"
    )
    sources_pushed(tmp_path, "mend the bad file", {2: "a,b\n4,u\n"})
    git.Repo(runner).remote("origin").pull("main")
    code, out, err = reconcile_and_push(runner)
    assert code == 0, out + err
    fresh = tmp_path / "fresh"
    clone(origin, fresh)
    assert run(fresh, "verify", "--integrity").returncode == 0
    chain = OdfRepository(fresh / "odf").dataset(A)
    assert [r[:1] + r[3:] for t in slices(chain) for r in rows(t, "system_time")] == [
        (0, 1, "x"),
        (1, 2, "y"),
        (2, 3, "z"),
        (3, 4, "u"),
        (4, 5, "w"),
    ]


def test_a_dirty_odf_folder_is_refused_before_anything_is_applied(tmp_path: Path) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write(A, root(A, "s0"))
    repo.apply()  # A's metadata, as an earlier run committed it
    repo.commit("a")
    head = repo.odf.dataset(A).layout.head_ref
    head.write_text(head.read_text() + "\n")  # a hand edit
    (repo.root / "odf" / "notes.txt").write_text("mine")
    repo.write(B, root(B, "s1"))
    result = run(repo.root, "apply", "--commit")
    assert result.returncode == 1
    assert result.stderr == (
        "error: --commit refused, nothing was applied: odf/ has changes no reconcile run "
        f"committed: odf/{A}/refs/head, odf/notes.txt; commit or discard them first\n"
    )
    assert re.fullmatch(r"nothing applied in [\d.]+ s\n", result.stdout)
    # The scheduled job's summary reads why from the JSON document.
    as_json = run(repo.root, "apply", "--commit", "--format", "json")
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert (document["error"], document["datasets"]) == (
        result.stderr.removeprefix("error: ").strip(),
        [],
    )
    assert repo.odf.names() == [A]


def test_push_from_a_detached_head_is_refused_before_anything_is_applied(tmp_path: Path) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = clone(origin, tmp_path / "runner")
    runner.git.checkout("--detach")
    result = run(tmp_path / "runner", "apply", "--commit", "--push")
    assert result.returncode == 1
    assert result.stderr == (
        "error: --commit refused, nothing was applied: "
        "HEAD is detached: --push needs a branch checked out\n"
    )
    assert odf_files(tmp_path / "runner") == []  # only the lock file was made


def test_an_ignore_rule_catching_chain_files_is_refused_before_anything_is_applied(
    tmp_path: Path,
) -> None:
    """A team's ``data/`` rule matches every ``odf/<dataset>/data/``: git would commit
    blocks naming data files it left out, and every other clone's chains would break."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = clone(origin, tmp_path / "runner")
    (tmp_path / "runner" / ".gitignore").write_text("*.log\ndata/\n")
    result = run(tmp_path / "runner", "apply", "--commit", "--system-time", WHEN)
    assert result.returncode == 1
    assert re.fullmatch(r"nothing applied in [\d.]+ s\n", result.stdout)
    assert result.stderr == (
        "error: --commit refused, nothing was applied: git ignores files a run must commit:"
        f" odf/{A}/data/{made_up(A, 'data')} (.gitignore:2: data/); add the rule `!odf/**`"
        " below it,"
        " or the commit would leave them out\n"
    )
    assert odf_files(tmp_path / "runner") == []
    # The rule the error gives, below the team's: the run commits every chain file.
    (tmp_path / "runner" / ".gitignore").write_text("*.log\ndata/\n!odf/**\nodf/.lock\n")
    runner.git.add(".gitignore")
    runner.index.commit("keep the chains' data in git")
    done = run(tmp_path / "runner", "apply", "--commit", "--system-time", WHEN)
    assert done.returncode == 0, done.stderr
    committed = runner.git.ls_files("odf").splitlines()
    assert committed == odf_files(tmp_path / "runner")
    assert any(f"odf/{A}/data/" in path for path in committed)


def applied_branch(tmp_path: Path, branch: str) -> git.Repo:
    """A runner's clone of a remote whose chains it applied and pushed, on a new branch:
    where a pull request's change is made."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = clone(origin, tmp_path / "runner")
    applied = run(tmp_path / "runner", "apply", "--commit", "--push", "--system-time", WHEN)
    assert applied.returncode == 0, applied.stderr
    runner.git.switch("-q", "-c", branch)
    return runner


def test_a_submodule_in_the_chains_folder_fails_the_plan_and_is_refused_by_apply(
    tmp_path: Path,
) -> None:
    """A gitlink hidden by ``.gitmodules``' ``ignore = all`` passed the plan with 0 errors
    (git's diff left it out), and a run then wrote a new chain beneath it that no commit
    carried: every run "created" it again, or a later block named data no clone had."""
    runner = applied_branch(tmp_path, "submodule")
    top = tmp_path / "runner"
    sha = runner.head.commit.hexsha
    runner.git.update_index("--add", "--cacheinfo", f"160000,{sha},odf/{B}")
    (top / ".gitmodules").write_text(
        f'[submodule "d"]\n\tpath = odf/{B}\n\turl = ./\n\tignore = all\n'
    )
    (top / "sources" / "s1").mkdir()
    (top / "sources" / "s1" / "part-1.csv").write_text(CSV_B)
    (top / "datasets" / f"{B}.yaml").write_text(root(B, "s1"))
    runner.git.add(".gitmodules", "sources", "datasets")
    runner.index.commit("a new dataset whose folder is a submodule")
    assert runner.git.diff("origin/main", "--stat", "--", "odf") == ""  # hidden from git diff
    message = (
        f"odf/{B} is a git submodule (a gitlink): git commits no file a run writes beneath"
        " it, and every clone has an empty folder there; remove it with"
        f" `git rm --cached odf/{B}` and its entry in .gitmodules"
    )
    pull_request = run(top, "plan", "--base", "origin/main", "--format", "json")
    assert pull_request.returncode == 1, pull_request.stderr
    document = json.loads(pull_request.stdout)
    assert document["problems"] == [
        {"message": message, "location": {"file": f"odf/{B}"}, "severity": "error"}
    ]
    refused = run(top, "apply", "--commit", "--system-time", WHEN)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"error: --commit refused, nothing was applied: {message}\n",
    )
    assert runner.head.commit.message == "a new dataset whose folder is a submodule"
    assert not (top / "odf" / B).exists()


def test_chain_files_stored_in_git_lfs_reach_the_remote_s_lfs_store(tmp_path: Path) -> None:
    """The push skips hooks (``--no-verify``), and with them LFS's upload: the remote
    got pointers to files no clone could fetch, and every verify after failed."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = clone(origin, tmp_path / "runner")
    top = tmp_path / "runner"
    lfs = ["git", "lfs", "install", "--local"]
    subprocess.run(lfs, cwd=top, check=True, capture_output=True)
    (top / ".gitattributes").write_text("odf/**/data/* filter=lfs diff=lfs merge=lfs -text\n")
    runner.git.add(".gitattributes")
    runner.index.commit("data files in Git LFS")
    code, _, stderr = reconcile_and_push(top)
    assert code == 0, stderr
    (data,) = (top / "odf" / A / "data").iterdir()
    pointer = runner.git.show(f"HEAD:odf/{A}/data/{data.name}")
    oid = hashlib.sha256(data.read_bytes()).hexdigest()
    assert pointer.splitlines()[:2] == [
        "version https://git-lfs.github.com/spec/v1",
        f"oid sha256:{oid}",
    ]
    stored = origin / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    assert stored.read_bytes() == data.read_bytes()
    fresh = tmp_path / "fresh"
    git.Repo.clone_from(str(origin), fresh, env={"GIT_LFS_SKIP_SMUDGE": "1"})
    subprocess.run(lfs, cwd=fresh, check=True, capture_output=True)
    subprocess.run(["git", "lfs", "pull"], cwd=fresh, check=True, capture_output=True)
    assert run(fresh, "verify", "--integrity").returncode == 0


def test_a_pull_request_putting_chains_in_lfs_changes_no_chain_file(tmp_path: Path) -> None:
    """Where LFS is set up, git read every chain file the new rule covers as modified (its
    clean filter would now give a pointer), and the plan told the reviewer the pull
    request "changes 2 blocks, changes 1 data file and changes refs/head"; their bytes
    are the base's. Merged, the next run stores its new files in LFS, and a fresh clone
    of the remote verifies."""
    runner = applied_branch(tmp_path, "lfs")
    top = tmp_path / "runner"
    lfs = ["git", "lfs", "install", "--local"]
    subprocess.run(lfs, cwd=top, check=True, capture_output=True)
    (top / ".gitattributes").write_text("odf/** filter=lfs diff=lfs merge=lfs -text\n")
    (top / ".gitignore").write_text("odf/.lock\n")  # as init writes it
    runner.git.add(".gitattributes", ".gitignore")
    runner.index.commit("chains in Git LFS")
    planned = run(top, "plan", "--base", "origin/main", "--format", "json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    document = json.loads(planned.stdout)
    assert document["problems"] == [] and document["verdicts"] == []
    (top / "sources" / "s0" / "part-2.csv").write_text("a,b\n4,w\n")
    runner.git.add("sources")
    runner.index.commit("new rows")
    runner.git.push("origin", "lfs:main")  # merged
    runner.git.switch("-q", "main")
    runner.git.pull("-q", "--ff-only", "origin", "main")
    # Touched (or checked out within the second of their commit), the chain files are
    # read again through the new clean filter, which makes git call them modified: the
    # run refused the checkout as holding "changes no reconcile run committed".
    later = time.time() + 5
    for path in (top / "odf").rglob("*"):
        if path.is_file():
            os.utime(path, (later, later))
    status = git.Repo(top).git.status("--porcelain", "odf").splitlines()
    assert status == [f" M {path}" for path in git.Repo(top).git.ls_files("odf").splitlines()]
    code, _, stderr = reconcile_and_push(top)
    assert code == 0, stderr
    origin = tmp_path / "origin.git"
    # Only the run's new files were staged: the old ones stay the blobs they were.
    changed = git.Repo(origin).git.diff("--name-status", "main~1", "main", "--", "odf")
    assert [line.split("\t")[0] for line in changed.splitlines()] == ["A", "A", "M"]
    added = git.Repo(origin).git.diff("--name-only", "main~1", "main", "--", f"odf/{A}/data")
    (data,) = added.splitlines()
    pointer = git.Repo(origin).git.show(f"main:{data}")
    oid = hashlib.sha256((top / data).read_bytes()).hexdigest()
    assert pointer.splitlines()[1] == f"oid sha256:{oid}"
    assert (origin / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).is_file()
    fresh = tmp_path / "fresh"
    git.Repo.clone_from(str(origin), fresh, env={"GIT_LFS_SKIP_SMUDGE": "1"})
    subprocess.run(lfs, cwd=fresh, check=True, capture_output=True)
    subprocess.run(["git", "lfs", "pull"], cwd=fresh, check=True, capture_output=True)
    verified = run(fresh, "verify", "--integrity")
    assert (verified.returncode, verified.stdout.splitlines()[0]) == (
        0,
        f"{A}: valid (7 blocks)",
    )


def test_an_lfs_rule_where_lfs_is_not_set_up_pushes_the_files_without_asking_git_lfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without LFS's filter configured git commits the files themselves, so there is
    nothing for LFS to upload: asking it anyway failed the push on a runner without
    git-lfs (stood in for by a ``git-lfs`` that fails, which must not be called)."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = clone(origin, tmp_path / "runner")
    top = tmp_path / "runner"
    (top / ".gitattributes").write_text("odf/**/data/* filter=lfs diff=lfs merge=lfs -text\n")
    runner.git.add(".gitattributes")
    runner.index.commit("an LFS rule, on a runner where LFS is not set up")
    tools, asked = tmp_path / "tools", tmp_path / "asked"
    tools.mkdir()
    (tools / "git-lfs").write_text(f'#!/bin/sh\necho "$@" >> {asked}\nexit 1\n')
    (tools / "git-lfs").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    code, _, stderr = reconcile_and_push(top)
    assert code == 0, stderr
    assert not asked.exists()
    (data,) = (top / "odf" / A / "data").iterdir()
    pushed = git.Repo(origin).git.show(f"main:odf/{A}/data/{data.name}", stdout_as_string=False)
    assert pushed == data.read_bytes()


def test_a_failed_push_says_git_s_reason_not_the_tail_of_its_advice(tmp_path: Path) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    clone(origin, tmp_path / "runner")
    origin.rename(tmp_path / "gone.git")
    code, _, stderr = reconcile_and_push(tmp_path / "runner")
    assert code == 1
    assert (
        f"git push to origin/main failed: fatal: '{origin}' does not appear to be a git repository"
        in stderr
    )


def test_a_committed_temporary_in_a_chain_folder_is_untracked_not_blamed_on_the_ignore_rule(
    tmp_path: Path,
) -> None:
    """A ``.pending-*`` temporary merged into a chain folder (past its failed plan) made
    every run stop with "git ignores files a run must commit", advising a rule that
    would commit the temporary; a run commits no temporary and untracks this one."""
    runner = applied_branch(tmp_path, "temporary")
    top = tmp_path / "runner"
    (top / ".gitignore").write_text("odf/.lock\n.pending-*\n")
    temporary = top / "odf" / A / "data" / ".pending-0123456789abcdef"
    temporary.write_bytes(b"half a file")
    # At the top of the chains' folder, and a folder named as a temporary in a chain's:
    # no run writes there, so none removes them; each is untracked, as .gitignore says.
    (top / "odf" / ".pending-0a").write_bytes(b"x")
    (top / "odf" / A / ".pending-0b" / "inner").mkdir(parents=True)
    (top / "odf" / A / ".pending-0b" / "inner" / "f").write_bytes(b"y")
    # A folder where only files named by hash belong, which no run writes: removed.
    (top / "odf" / A / "data" / "f1620bb").mkdir()
    (top / "odf" / A / "data" / "f1620bb" / "g").write_bytes(b"z")
    runner.git.add("--force", ".gitignore", str(temporary), "odf")
    runner.index.commit("merged past its plan: a temporary in a chain folder")
    assert len([p for p in runner.git.ls_files("odf").splitlines() if ".pending-" in p]) == 3
    applied = run(top, "apply", "--commit", "--system-time", WHEN)
    assert applied.returncode == 0, applied.stderr
    assert [p for p in runner.git.ls_files("odf").splitlines() if ".pending-" in p] == []
    assert runner.git.ls_files(f"odf/{A}/data/f1620bb") == ""
    assert not (top / "odf" / A / "data" / "f1620bb").exists()
    assert (top / "odf" / ".pending-0a").read_bytes() == b"x"  # untracked, left on disk
    assert run(top, "verify", "--integrity").returncode == 0
    message = str(runner.head.commit.message)
    assert message.startswith("reconcile: no dataset advanced, 4 temporary files untracked\n")
    untracked = message.split("\n\n")[1].splitlines()
    assert untracked == [
        "Untracked (locks and temporaries a merge had committed):",
        "- odf/.lock",
        "- odf/.pending-0a",
        f"- odf/{A}/.pending-0b/inner/f",
        f"- odf/{A}/data/.pending-0123456789abcdef",
    ]
    assert "4 temporary files untracked" in applied.stderr + applied.stdout


def test_a_pull_request_adding_an_ignore_rule_that_catches_chain_files_fails_its_plan(
    tmp_path: Path,
) -> None:
    """Merged, it would stop every scheduled ``apply --commit``; the plan says so first:
    an error with ``--base``, a warning for a local plan (a sandbox never committed)."""
    runner = applied_branch(tmp_path, "ignore-data")
    (tmp_path / "runner" / ".gitignore").write_text("*.log\ndata/\n")
    runner.git.add(".gitignore")
    runner.index.commit("ignore our data folder")
    message = (
        f"the rule 'data/' makes git ignore odf/{A}/data/{made_up(A, 'data')}, a file a run"
        " must commit;"
        " add the rule `!odf/**` below it, or apply --commit refuses to run"
    )
    pull_request = run(tmp_path / "runner", "plan", "--base", "origin/main", "--format", "json")
    assert pull_request.returncode == 1, pull_request.stderr
    assert json.loads(pull_request.stdout)["problems"] == [
        {"message": message, "location": {"file": ".gitignore", "line": 2}, "severity": "error"}
    ]
    local = run(tmp_path / "runner", "plan")
    assert local.returncode == 0, local.stderr
    assert f"  .gitignore:2: {message}" in local.stdout.splitlines()
    assert local.stdout.splitlines()[-1] == "Plan: 1 unchanged. 0 errors, 1 warning."


def test_git_attributes_that_rewrite_chain_files_fail_the_plan_and_are_refused_by_apply(
    tmp_path: Path,
) -> None:
    """``odf/** text eol=crlf`` passed every plan (it was caught only as "changes a block"
    once the damage was done): git would convert the blocks' bytes on commit, and a chain
    file's name is the hash of its bytes. ``text=auto`` and Git LFS are left alone."""
    runner = applied_branch(tmp_path, "line-endings")
    attributes = tmp_path / "runner" / ".gitattributes"
    attributes.write_text("* text=auto\nodf/**/data/** filter=lfs -text\n")
    (tmp_path / "runner" / ".gitignore").write_text("odf/.lock\n")  # as init writes it
    runner.git.add(".gitattributes", ".gitignore")
    runner.index.commit("harmless attributes")
    assert run(tmp_path / "runner", "plan", "--base", "origin/main").returncode == 0
    attributes.write_text("* text=auto\nodf/** text eol=crlf\n")
    runner.git.add(".gitattributes")
    runner.index.commit("windows line endings everywhere")
    message = (
        f"git attribute text=set on odf/{A}/blocks/{made_up(A, 'blocks')}, a file a run"
        " commits: git would"
        " rewrite its bytes on commit or checkout, and a chain file's name is the hash of its"
        " bytes. End .gitattributes with `odf/** -text -eol -filter -ident"
        " -working-tree-encoding` (`git check-attr -a` shows what sets it)"
    )
    pull_request = run(tmp_path / "runner", "plan", "--base", "origin/main", "--format", "json")
    assert pull_request.returncode == 1, pull_request.stderr
    assert json.loads(pull_request.stdout)["problems"] == [
        {"message": message, "location": {"file": ".gitattributes", "line": 2}, "severity": "error"}
    ]
    refused = run(tmp_path / "runner", "apply", "--commit", "--system-time", WHEN)
    assert refused.returncode == 1
    assert refused.stderr == (
        "error: --commit refused, nothing was applied: git would rewrite files a run commits:"
        f" text=set on odf/{A}/blocks/{made_up(A, 'blocks')} (.gitattributes:2); end"
        " .gitattributes with `odf/** -text -eol"
        " -filter -ident -working-tree-encoding`, or the commit would store blocks whose bytes"
        " no longer match their hashes\n"
    )
    attributes.write_text(
        "* text=auto\nodf/** text eol=crlf\nodf/** -text -eol -filter -ident"
        " -working-tree-encoding\n"
    )
    assert run(tmp_path / "runner", "plan").stdout.splitlines()[-1] == (
        "Plan: 1 unchanged. 0 errors, 0 warnings."
    )
    # A rule for the folder of a dataset the same pull request creates: no such folder
    # was looked at, and the new chain was committed converted.
    (tmp_path / "runner" / "sources" / "s1").mkdir()
    (tmp_path / "runner" / "sources" / "s1" / "part-1.csv").write_text(CSV_B)
    (tmp_path / "runner" / "datasets" / f"{B}.yaml").write_text(root(B, "s1"))
    attributes.write_text(f"odf/{B}/** text eol=crlf\n")
    runner.git.add(A=True)
    runner.index.commit("a new dataset, and line endings for it")
    new = run(tmp_path / "runner", "plan", "--base", "origin/main", "--format", "json")
    assert new.returncode == 1
    (problem,) = json.loads(new.stdout)["problems"]
    assert problem["message"].startswith(
        f"git attribute text=set on odf/{B}/blocks/{made_up(B, 'blocks')}"
    )
    refused = run(tmp_path / "runner", "apply", "--commit", "--system-time", WHEN)
    assert refused.returncode == 1
    assert f"text=set on odf/{B}/blocks/{made_up(B, 'blocks')}" in refused.stderr


def made_up(dataset: str, store: str) -> str:
    """The file name the checks look at in a folder they cannot list: as a run names."""
    return "f1620" + hashlib.sha3_256(f"{dataset}/{store}".encode()).hexdigest()


def test_rules_for_hash_names_are_caught_by_the_plan_and_by_the_commit(tmp_path: Path) -> None:
    """``f1620?*`` passed the plan, which looked at ``blocks/f1620`` alone: the run then
    committed heads whose blocks git had left out (every clone's chain broken, the
    runner's copy thrown away), and an attribute rule for hash names broke every
    checkout."""
    runner = clone(remote_with(tmp_path, {A: CSV_A}), tmp_path / "runner")
    runner.git.switch("-q", "-c", "hash-names")  # no chain yet: the names the manifests give
    ignore = tmp_path / "runner" / ".gitignore"
    ignore.write_text("odf/.lock\nf1620?*\n")
    runner.git.add(".gitignore")
    runner.index.commit("ignore hash-named files")
    pull_request = run(tmp_path / "runner", "plan", "--base", "origin/main", "--format", "json")
    assert pull_request.returncode == 1
    assert [p["location"] for p in json.loads(pull_request.stdout)["problems"]] == [
        {"file": ".gitignore", "line": 2}
    ]
    ignore.write_text("odf/.lock\n")
    attributes = tmp_path / "runner" / ".gitattributes"
    attributes.write_text("*[0-7] text eol=crlf\n")  # half the names of each folder
    runner.git.add(".gitignore", ".gitattributes")
    runner.index.commit("line endings for some files")
    pull_request = run(tmp_path / "runner", "plan", "--base", "origin/main", "--format", "json")
    assert pull_request.returncode == 1
    (problem,) = json.loads(pull_request.stdout)["problems"]
    assert problem["message"].startswith("git attribute text=set on odf/")


def test_the_commit_stages_files_an_ignore_rule_catches_and_refuses_rewritten_ones(
    tmp_path: Path,
) -> None:
    """What no check before the run can foresee (a rule for one hash name): the commit
    holds every file the run wrote, and never one git would convert."""
    repo = git.Repo.init(tmp_path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "reconciler")
        cw.set_value("user", "email", "reconciler@example.org")
    block = "f1620" + "ab" * 32
    folder = tmp_path / "odf" / A / "blocks"
    folder.mkdir(parents=True)
    (folder / block).write_bytes(b"\x00block\n")
    (tmp_path / ".gitignore").write_text(f"{block}\nodf/.lock\n")
    (tmp_path / "odf" / ".lock").write_text("held")
    repo.git.add(".gitignore")
    repo.index.commit("rules")
    tree = Worktree.open(tmp_path, tmp_path / "odf")
    assert tree.commit("a run", []) is not None
    assert repo.git.ls_files("odf").splitlines() == [f"odf/{A}/blocks/{block}"]
    second = "f1620" + "cd" * 32
    (folder / second).write_bytes(b"\x00other\n")
    (tmp_path / ".gitattributes").write_text(f"{second} text eol=crlf\n")
    with pytest.raises(CommitError) as refused:
        tree.commit("another run", [])
    assert str(refused.value) == (
        f"git would rewrite a file this run wrote: text=set on odf/{A}/blocks/{second}"
        " (.gitattributes:1);"
        " end .gitattributes with `odf/** -text -eol -filter -ident -working-tree-encoding`"
    )
    assert tree.staged() == []


TRAILER_LINES = "Reconcile-Run-Id: run-1\nReconcile-Plan-Hash: ab12\nReconcile-Version: 0.1.0\n"
"""The trailers of ``Trailers("run-1", "ab12", "0.1.0")``, as every message ends."""


def test_secrets_are_those_the_manifests_templates_name() -> None:
    secrets = referenced_secrets(
        ['url: "https://api.example.org/v1?key=${{ env.API_KEY }}&n=${{ env.N || 10 }}"'],
        {"API_KEY": "s3cr3t-k3y", "N": "", "HOME": "/root"},
    )
    assert secrets == {"s3cr3t-k3y"}


def test_a_commit_message_names_each_cause_in_one_line() -> None:
    runs = [
        DatasetRun(Outcome(A, Status.UPDATED, 0, 1, 12), (40, 51), "f1620aa"),
        DatasetRun(Outcome(B, Status.FAILED, message="fetch: 401 for key ***\ntrace")),
        DatasetRun(Outcome("org.example.c", Status.SKIPPED, message=f"input {B} failed")),
        DatasetRun(Outcome("org.example.d", Status.UP_TO_DATE)),
    ]
    assert commit_message(runs, Trailers("run-1", "ab12", "0.1.0")) == (
        "reconcile: 1 dataset advanced (12 records), 1 failed, 1 skipped\n"
        "\n"
        "Advanced:\n"
        f"- {A}: 1 block, 12 records, offsets 40-51, head f1620aa\n"
        "\n"
        "Failed:\n"
        f"- {B}: fetch: 401 for key ***\n"
        "\n"
        "Skipped:\n"
        f"- org.example.c: input {B} failed\n"
        "\n"
        "Up to date: org.example.d\n"
        "\n"
        f"{TRAILER_LINES}"
    )


def test_a_commit_message_says_which_datasets_were_created_or_recreated() -> None:
    """A recreated chain has a new id: the history must say so, not just "advanced"."""
    runs = [
        DatasetRun(Outcome(A, Status.CREATED, 5, 1, 3), (0, 2), "f1620aa"),
        DatasetRun(Outcome(B, Status.RECREATED, 6, 2, 8), (0, 7), "f1620bb"),
        DatasetRun(Outcome("org.example.c", Status.UPDATED, 0, 1, 1), (9, 9), "f1620cc"),
    ]
    assert commit_message(runs, Trailers("run-1", "ab12", "0.1.0")) == (
        "reconcile: 3 datasets advanced (12 records)\n"
        "\n"
        "Advanced:\n"
        f"- {A}: created, 6 blocks (5 metadata), 3 records, offsets 0-2, head f1620aa\n"
        f"- {B}: recreated, 8 blocks (6 metadata), 8 records, offsets 0-7, head f1620bb\n"
        "- org.example.c: 1 block, 1 record, offsets 9-9, head f1620cc\n"
        "\n"
        f"{TRAILER_LINES}"
    )


def test_a_commit_message_lists_the_files_a_failed_pull_kept_as_advanced() -> None:
    """A pull that fails part way keeps the files before the failing one, and the commit
    carries them: the subject must not say that no dataset advanced."""
    cause = "read failed: ReadError: sources/2.csv: …; what the files before it added is kept"
    runs = [DatasetRun(Outcome(A, Status.FAILED, 0, 2, 7, message=cause), (5, 11), "f1620aa")]
    assert commit_message(runs, Trailers("run-1", "ab12", "0.1.0")) == (
        "reconcile: 1 dataset advanced (7 records), 1 failed\n"
        "\n"
        "Advanced:\n"
        f"- {A}: 2 blocks, 7 records, offsets 5-11, head f1620aa, then failed (below)\n"
        "\n"
        "Failed:\n"
        f"- {A}: {cause}\n"
        "\n"
        f"{TRAILER_LINES}"
    )


def test_the_subject_counts_what_wrote_blocks_and_the_list_adds_deletions() -> None:
    """One property says what wrote blocks (a failed pull that kept files included), for
    the subject and the ``Advanced:`` list both; the list also names a deletion."""
    runs = {
        "created": DatasetRun(Outcome(A, Status.CREATED, 5, 1, 3)),
        "kept": DatasetRun(Outcome(B, Status.FAILED, 0, 2, 7, message="read failed")),
        "failed": DatasetRun(Outcome("org.example.c", Status.FAILED, message="x")),
        "deleted": DatasetRun(Outcome("org.example.d", Status.DELETED)),
        "current": DatasetRun(Outcome("org.example.e", Status.UP_TO_DATE)),
    }
    assert {k: (r.wrote, r.advanced) for k, r in runs.items()} == {
        "created": (True, True),
        "kept": (True, True),
        "failed": (False, False),
        "deleted": (False, True),
        "current": (False, False),
    }
    assert subject(list(runs.values())) == (
        "reconcile: 2 datasets advanced (10 records), 1 deleted, 2 failed"
    )


def test_a_cause_names_the_repositorys_files_relative_to_it_and_others_as_they_are() -> None:
    root = Path("/home/runner/work/repo")
    cause = (
        "read failed: ReadError: /home/runner/work/repo/sources/orders/2.csv: line 3; no"
        " such file: '/home/runner/work/repo/a.csv' (/home/runner/work/repo/b/c.csv,"
        " /mnt/exports/d.csv, /mnt/home/runner/work/repo/e.csv, file:/home/runner/work/repo/f,"
        " /home/runner/work/repository/g.csv)"
    )
    assert shown_paths(cause, root) == (
        "read failed: ReadError: sources/orders/2.csv: line 3; no such file: 'a.csv'"
        " (b/c.csv, /mnt/exports/d.csv, /mnt/home/runner/work/repo/e.csv,"
        " file:/home/runner/work/repo/f, /home/runner/work/repository/g.csv)"
    )


def test_a_commit_message_of_a_deletion_alone_says_so_in_its_subject() -> None:
    runs = [DatasetRun(Outcome(A, Status.DELETED)), DatasetRun(Outcome(B, Status.UP_TO_DATE))]
    assert commit_message(runs, Trailers("run-1", "ab12", "0.1.0")) == (
        f"reconcile: 1 deleted\n\nAdvanced:\n- {A}: deleted\n\nUp to date: {B}\n\n{TRAILER_LINES}"
    )
    failed = [DatasetRun(Outcome(A, Status.FAILED, message="x"))]
    assert subject(failed) == "reconcile: no dataset advanced, 1 failed"


def test_a_commit_message_says_which_files_moved_into_the_data_store() -> None:
    runs = [
        DatasetRun(Outcome(A, Status.UPDATED, 0, 1, 12, moved=1), (40, 51), "f1620aa"),
        DatasetRun(Outcome(B, Status.UP_TO_DATE, moved=3)),
    ]
    assert commit_message(runs, Trailers("run-1", "ab12", "0.1.0")) == (
        "reconcile: 1 dataset advanced (12 records), 4 files moved into the data store\n"
        "\n"
        "Advanced:\n"
        f"- {A}: 1 block, 12 records, offsets 40-51, head f1620aa\n"
        "\n"
        "Moved into the data store:\n"
        f"- {A}: 1 file\n"
        f"- {B}: 3 files\n"
        "\n"
        f"Up to date: {B}\n"
        "\n"
        f"{TRAILER_LINES}"
    )


def test_a_recovery_commit_names_the_temporaries_it_untracks() -> None:
    untracked = ["odf/.pending-0a", f"odf/{A}/.lock"]
    heads: dict[str, str | None] = {A: "f1620aa", B: None}
    assert recovery_message("run r1", heads, Trailers("run-1", None, "0.1.0"), untracked) == (
        "reconcile: 2 datasets recovered from a run that did not commit\n"
        "\n"
        "run r1 ended without committing the chains it had advanced (killed, or its commit"
        " failed); they verify, and are committed as they were left:\n"
        "\n"
        f"- {A}: head f1620aa\n"
        f"- {B}: deleted\n"
        "\n"
        "Untracked (locks and temporaries a merge had committed):\n"
        "- odf/.pending-0a\n"
        f"- odf/{A}/.lock\n"
        "\n"
        "Reconcile-Run-Id: run-1\n"
        "Reconcile-Version: 0.1.0\n"
    )


def test_a_cause_quoting_a_resolved_secret_is_masked_in_output_json_and_commit(
    tmp_path: Path,
) -> None:
    """The fetch masks what it words; a reader's error names the file it read, whose path
    here holds a templated value: it is masked wherever the run reports it."""
    secret = "drop-s3cr3t-7f3a"
    repo = GitOpsRepo.create(tmp_path / "repo")
    (repo.root / "sources" / secret).mkdir(parents=True)
    (repo.root / "sources" / secret / "a.csv").write_text("a,b\n1,x\ntwo,y\n")
    url = 'fetch: {kind: Url, url: "file:sources/${{ env.DROP }}/a.csv"}'
    repo.write(
        A,
        manifest(
            A, "Root", root_events().replace('fetch: {kind: FilesGlob, path: "sources/*.csv"}', url)
        ),
    )
    (repo.root / "sources" / "b").mkdir()
    (repo.root / "sources" / "b" / "b.csv").write_text(CSV_B)
    repo.write(B, manifest(B, "Root", root_events().replace("sources/*.csv", "sources/b/*.csv")))
    repo.allow_env(DROP=["*"])
    repo.commit("a url root, and one that advances so that the run commits")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "-C",
            str(repo.root),
            "apply",
            "--commit",
            "--format",
            "json",
            "--system-time",
            WHEN,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "DROP": secret},
    )
    assert done.returncode == 1, done.stderr
    cause = {d["name"]: d["error"] for d in json.loads(done.stdout)["datasets"]}[A]
    assert cause == (
        "read failed: ReadError: sources/***/a.csv: line 3: malformed record: "
        "two,y: column a (BIGINT): 'two' is not a valid BIGINT"
    )
    log = git.Repo(repo.root).git.log("-1", "--format=%B")
    assert f"- {A}: {cause}\n" in log
    for text in (done.stdout, done.stderr, log):
        assert secret not in text


def test_the_attribute_line_that_wins_is_the_one_named(tmp_path: Path) -> None:
    """git's ranking: ``info/attributes``, then the nearest ``.gitattributes``, and in a
    file its last matching line; a line for other files or other values is passed over."""
    repo = git.Repo.init(tmp_path, initial_branch="main")
    path = f"odf/{A}/blocks/f1620{'ab' * 32}"
    (tmp_path / ".gitattributes").write_text("odf/** text eol=crlf\n*.csv text\n")
    nested = tmp_path / "odf" / A / ".gitattributes"
    nested.parent.mkdir(parents=True)
    nested.write_text("*.md text\nblocks/* text eol=crlf\nf1620* -text\nf1620ab* text\n")
    (found,) = converted_paths(tmp_path, [path])
    assert str(found) == f"text=set on {path}"
    assert attribute_source(tmp_path, found) == (nested, 4)
    info = Path(repo.git_dir) / "info" / "attributes"
    info.write_text("# the runner's own\n*ab text\n")
    assert attribute_source(tmp_path, found) == (info, 2)
    nested.unlink()
    info.unlink()
    (eol,) = converted_paths(tmp_path, [path])
    assert attribute_source(tmp_path, eol) == (tmp_path / ".gitattributes", 1)


def test_verify_says_when_git_attributes_rewrote_the_chain_files_it_finds_changed(
    tmp_path: Path,
) -> None:
    """Every chain of a checkout made under ``odf/** text eol=crlf`` read as tampered
    with, and nothing said that git, which holds the right bytes, converted them."""
    runner = applied_branch(tmp_path, "crlf")
    (tmp_path / "runner" / ".gitattributes").write_text("odf/** text eol=crlf\n")
    runner.git.rm("-q", "--cached", "-r", "odf")
    runner.git.checkout("HEAD", "--", "odf")  # checked out again, as a clone would be
    done = run(tmp_path / "runner", "verify", "--integrity")
    assert done.returncode == 1
    assert f"{A}: invalid" in done.stdout
    assert done.stdout.splitlines()[-2] == (
        f"hint: .gitattributes:1: git attribute text=set on odf/{A}/blocks/"
        f"{made_up(A, 'blocks')}, a file a run commits: git would rewrite its bytes on commit"
        " or checkout, and a chain file's name is the hash of its bytes. End .gitattributes"
        " with `odf/** -text -eol -filter -ident -working-tree-encoding` (`git check-attr -a`"
        " shows what sets it)"
    )


def test_a_local_plan_warns_of_source_files_git_ignores(tmp_path: Path) -> None:
    """A team's ``*.csv`` rule: the plan listed the file as pending, no commit carried
    it, and neither the pull request nor the scheduled run ever saw it."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write(A, root(A, "s0"))
    folder = repo.root / "sources" / "s0"
    folder.mkdir(parents=True)
    (repo.root / ".gitignore").write_text("odf/.lock\n*.csv\n")
    (folder / "part-0.csv").write_text(CSV_A)
    repo.commit("datasets")
    git.Repo(repo.root).git.add("-f", "sources/s0/part-0.csv")  # tracked: not ignored
    git.Repo(repo.root).index.commit("the first file, added on purpose")
    (folder / "part-1.csv").write_text(CSV_A)
    (folder / "part-2.csv").write_text(CSV_A)
    plan = make_plan(repo.config, PlanRequest())
    assert [(p.message, p.location, p.severity) for p in plan.problems] == [
        (
            "git ignores 2 files this dataset reads (sources/s0/part-1.csv (.gitignore:2:"
            " *.csv)): no commit carries them, so neither a pull request nor the scheduled"
            " run sees them; add `!sources/s0/part-1.csv` below the rule, or move the files",
            Location(str(repo.root / ".gitignore"), 2),
            Severity.WARNING,
        )
    ]
