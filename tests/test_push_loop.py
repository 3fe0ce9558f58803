"""`reconcile push --commit --push`: a pushed file joins the GitOps loop as an apply does.

Real CLI processes, a bare remote and clones. A push that loses a race to another commit
moves to the remote's tip and pushes the file again there, so its records land exactly
once; a dirty checkout is refused before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import git
from gitops_repo import GitOpsRepo, manifest, rows, slices
from test_cli_apply import PUSH, run
from test_cli_conventions import normal
from test_gitops_loop import clone, readme_pushed_after_first_commit, trailers

P = "org.example.pushed"
RECORDS = (
    '{"event_time": "2026-01-01T10:00:00Z", "sensor": "s1", "value": 1.5}\n'
    '{"event_time": "2026-01-01T09:00:00Z", "sensor": "s2", "value": 2.5}\n'
)


def remote_with_chain(tmp_path: Path) -> Path:
    """A bare remote whose main holds a push-source dataset and its chain, made and pushed
    by a scheduled apply."""
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True, initial_branch="main")
    seed = GitOpsRepo.create(tmp_path / "seed")
    seed.write(P, manifest(P, "Root", PUSH))
    seed.commit("datasets")
    git.Repo(seed.root).create_remote("origin", str(origin)).push("main").raise_if_error()
    runner = tmp_path / "runner"
    clone(origin, runner)
    made = run(runner, "--system-time", "2026-03-01T00:00:00Z", "apply", "--commit", "--push")
    assert made.returncode == 0, made.stdout + made.stderr
    return origin


def push_records(where: Path, *extra: str, stdin: str = RECORDS) -> tuple[int, str, str]:
    pushed = run(
        where, "--system-time", "2026-03-02T00:00:00Z", "push", P, "-", *extra, stdin=stdin
    )
    return pushed.returncode, pushed.stdout, pushed.stderr


def test_a_push_that_loses_a_race_is_pushed_again_from_the_remote_tip_and_lands_once(
    tmp_path: Path,
) -> None:
    """The remote's new commit (a README) leaves the chains alone: the commit goes on top
    of it as it is. Ingesting the file again there would have been the other way; both
    land each record once."""
    origin = remote_with_chain(tmp_path)
    person = clone(origin, tmp_path / "person")
    pusher = tmp_path / "pusher"
    clone(origin, pusher)
    readme_pushed_after_first_commit(pusher, person)

    code, out, err = push_records(pusher, "--commit", "--push")

    assert code == 0, out + err
    assert err == (
        "push rejected: the remote moved; pushing again on top of origin/main (attempt 2 of 4)\n"
    )
    pushed = git.Repo(origin).commit("main")
    assert [re.sub(r"[0-9a-f]{12}", "SHA", line) for line in normal(out)] == [
        f"{P}: updated: 2 blocks, 2 records in N s",
        "committed SHA: reconcile: 1 dataset advanced (2 records)",
        "carried SHA onto origin/main as SHA",
        "pushed SHA to origin/main",
    ]
    assert re.search(
        rf"^carried [0-9a-f]{{12}} onto origin/main as {pushed.hexsha[:12]}$", out, re.M
    )
    assert re.search(rf"^pushed {pushed.hexsha[:12]} to origin/main$", out, re.M)
    assert [c.summary for c in git.Repo(origin).iter_commits("main")] == [
        "reconcile: 1 dataset advanced (2 records)",
        "README",
        "reconcile: 1 dataset advanced (0 records)",
        "datasets",
    ]
    paragraphs = str(pushed.message).split("\n\n")
    head = (pusher / "odf" / P / "refs" / "head").read_text().strip()
    assert paragraphs[1:3] == [
        "Pushed from standard input.",
        f"Advanced:\n- {P}: 2 blocks, 2 records, offsets 0-1, head {head}",
    ]
    assert list(trailers(str(pushed.message))) == ["Reconcile-Run-Id", "Reconcile-Version"]
    assert sorted({f.split("/")[0] for f in pushed.stats.files}) == ["odf"]

    fresh = tmp_path / "fresh"
    clone(origin, fresh)
    verify = run(fresh, "verify", "--integrity")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    (data,) = slices(GitOpsRepo(fresh).odf.dataset(P))
    assert rows(data, "system_time") == [
        (0, 0, "2026-01-01T09:00:00Z", "s2", 2.5),
        (1, 0, "2026-01-01T10:00:00Z", "s1", 1.5),
    ]


def test_a_push_with_commit_is_refused_on_a_dirty_checkout_and_a_failed_one_commits_nothing(
    tmp_path: Path,
) -> None:
    origin = remote_with_chain(tmp_path)
    pusher = tmp_path / "pusher"
    repo = clone(origin, pusher)
    tip = repo.head.commit

    alone = run(pusher, "push", P, "-", "--push", stdin=RECORDS)
    assert (alone.returncode, alone.stderr.splitlines()[-1]) == (
        64,
        "Error: --push pushes the commit of --commit: add --commit",
    )

    stray = pusher / "odf" / P / "stray.txt"
    stray.write_text("hand-made\n")
    code, out, err = push_records(pusher, "--commit")
    assert (code, out) == (1, "")
    assert err == (
        f"error: --commit refused, nothing was applied: odf/ has changes no reconcile run "
        f"committed: odf/{P}/stray.txt; commit or discard them first\n"
    )
    stray.unlink()

    code, out, err = push_records(pusher, "--commit", "--push", stdin="{not json\n")
    assert (code, out) == (1, "nothing to commit\n")
    assert err.splitlines()[-1] == (
        f"error: {P}: ReadError: standard input: line 1: malformed record: {{not json: "
        "not valid JSON (Expecting property name enclosed in double quotes at char 1)"
    )
    assert repo.head.commit == tip and git.Repo(origin).commit("main") == tip
    assert repo.git.status("--porcelain", "--untracked-files=all") == "?? odf/.lock"
