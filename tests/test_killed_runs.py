"""A scheduled run killed (SIGKILL, a lost machine) converges at the next run, unaided.

Real processes, a bare remote and clones. A run killed after one chain advanced but before
its commit leaves that chain valid and uncommitted: the next `apply --commit --push`
verifies it, commits it as the killed run's work, then does the rest. A run stopped
between its commit and its push leaves a local commit the remote lacks: when the remote
has moved meanwhile, the next run lets it go (the work is done again from the remote's
tip) instead of failing every hour; a person's local commit is never let go.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import git
import pytest
from gitops_repo import GitOpsRepo, manifest, root_events, rows, slices
from test_cli_apply import run
from test_cli_conventions import normal
from test_gitops_loop import CSV_A, clone, remote_with, trailers

from reconciler.odf.lock import LockHolder

A = "org.example.a"
B = "org.example.b"
WHEN = "2026-03-01T06:00:00Z"


def scheduled_run(runner: Path) -> list[str]:
    """The scheduled job's apply in ``runner``, which must succeed: its output lines,
    with times and commit shas made constant."""
    done = run(runner, "apply", "--commit", "--push", "--system-time", WHEN)
    assert done.returncode == 0, done.stdout + done.stderr
    return [re.sub(r"[0-9a-f]{12}", "SHA", line) for line in normal(done.stdout)]


def recovered_from(datasets: int) -> str:
    plural = "dataset" if datasets == 1 else "datasets"
    return f"reconcile: {datasets} {plural} recovered from a run that did not commit"


def readme_pushed(person: git.Repo) -> None:
    """Someone commits a README and pushes it to main: the remote moves."""
    (Path(str(person.working_tree_dir)) / "README.md").write_text("# Data\n")
    person.index.add(["README.md"])
    person.index.commit("README")
    person.remote("origin").push("main").raise_if_error()


class GatedServer:
    """Serves one CSV on 127.0.0.1, holding each request until ``gate`` is set;
    ``asked`` is set when a request has arrived."""

    def __init__(self, body: bytes) -> None:
        self.asked, self.gate = threading.Event(), threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.asked.set()
                server.gate.wait(120)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed while it waited

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/b.csv"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def gated() -> Iterator[GatedServer]:
    server = GatedServer(b"a,b\n10,p\n20,q\n")
    yield server
    server.gate.set()
    server.httpd.shutdown()
    server.httpd.server_close()


def remote_with_a_slow_source(tmp_path: Path, url: str) -> Path:
    """A remote whose main has A (a CSV in the repository) and B (read from ``url``)."""
    origin = remote_with(tmp_path, {A: CSV_A})
    seed = tmp_path / "seed"
    events = root_events().replace(
        'fetch: {kind: FilesGlob, path: "sources/*.csv"}', f"fetch: {{kind: Url, url: {url}}}"
    )
    GitOpsRepo(seed).write(B, manifest(B, "Root", events))
    GitOpsRepo(seed).commit("b, from a server")
    git.Repo(seed).remote("origin").push("main").raise_if_error()
    return origin


def kill_while_b_is_fetched(runner: Path, server: GatedServer) -> None:
    """Start the scheduled apply and SIGKILL it (and its JVM) once A is done and B's
    fetch is waiting on the server."""
    scheduled = ["apply", "--commit", "--push", "--system-time", WHEN]
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(runner), *scheduled],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert server.asked.wait(300), "the run never fetched B"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)
    time.sleep(0.5)  # the JVM, in the same process group, goes with it


def test_a_run_killed_before_its_commit_has_its_verified_work_committed_by_the_next(
    tmp_path: Path, gated: GatedServer
) -> None:
    origin = remote_with_a_slow_source(tmp_path, gated.url)
    runner = tmp_path / "runner"
    repo = clone(origin, runner)
    kill_while_b_is_fetched(runner, gated)
    # A is done; B has its metadata (written before its fetch), no data.
    a_head, b_head = ((runner / "odf" / n / "refs" / "head").read_text().strip() for n in (A, B))
    assert repo.git.status("--porcelain").splitlines()[0] == "?? odf/"
    assert git.Repo(origin).commit("main").summary == "b, from a server"
    work = runner / ".reconcile-cache" / "work"
    (left,) = [p.name for p in work.iterdir()]  # B's ingest folder, with its fetch in it
    assert left.startswith("odf-ingest-")

    gated.gate.set()
    lines = scheduled_run(runner)

    assert lines[0] == f"committed SHA: {recovered_from(2)}"
    assert lines[-3:] == [
        "committed SHA: reconcile: 1 dataset advanced (2 records)",
        "pushed SHA to origin/main",
        "2 datasets: 1 updated (2 records), 1 up to date in N s",
    ]
    log = list(git.Repo(origin).iter_commits("main"))
    assert [c.summary for c in log] == [
        "reconcile: 1 dataset advanced (2 records)",
        recovered_from(2),
        "b, from a server",
        "datasets",
    ]
    recovered = str(log[1].message).split("\n\n")
    assert re.fullmatch(
        r"reconcile apply \(pid \d+ on .+, since \d\d:\d\d:\d\d UTC\) ended without committing"
        r" the chains it had advanced \(killed, or its commit failed\); they verify, and are"
        r" committed as they were left:",
        recovered[1],
    )
    assert recovered[2] == f"- {A}: head {a_head}\n- {B}: head {b_head}"
    assert list(trailers(str(log[1].message))) == ["Reconcile-Run-Id", "Reconcile-Version"]
    assert sorted({f.split("/")[1] for f in log[1].stats.files}) == [A, B]
    assert sorted({f.split("/")[1] for f in log[0].stats.files}) == [B]
    assert list(work.iterdir()) == []  # the killed run's working folder is gone

    fresh = tmp_path / "fresh"
    clone(origin, fresh)
    verify = run(fresh, "verify", "--integrity")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    stored = GitOpsRepo(fresh).odf
    assert [rows(t, "system_time", "event_time") for t in slices(stored.dataset(A))] == [
        [(0, 0, 1, "x"), (1, 0, 2, "y"), (2, 0, 3, "z")]
    ]
    assert [rows(t, "system_time", "event_time") for t in slices(stored.dataset(B))] == [
        [(0, 0, 10, "p"), (1, 0, 20, "q")]
    ]


def test_a_local_commit_of_a_run_stopped_before_its_push_is_carried_onto_the_moved_remote(
    tmp_path: Path,
) -> None:
    """The remote's new commit (a README) leaves the chains alone: the earlier run's
    commit is put on top of it and pushed, not let go and its work done again."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner, person = tmp_path / "runner", tmp_path / "person"
    clone(origin, runner)
    people = clone(origin, person)
    committed = run(runner, "apply", "--commit", "--system-time", WHEN)  # not pushed
    assert committed.returncode == 0, committed.stdout + committed.stderr
    readme_pushed(people)

    again = run(runner, "apply", "--commit", "--push", "--system-time", WHEN)

    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stderr == (
        "push rejected: the remote moved; pushing again on top of origin/main (attempt 2 of 4)\n"
    )
    assert [c.summary for c in git.Repo(origin).iter_commits("main")] == [
        "reconcile: 1 dataset advanced (3 records)",
        "README",
        "datasets",
    ]
    fresh = tmp_path / "fresh"
    clone(origin, fresh)
    stored = GitOpsRepo(fresh).odf
    assert [rows(t, "system_time", "event_time") for t in slices(stored.dataset(A))] == [
        [(0, 0, 1, "x"), (1, 0, 2, "y"), (2, 0, 3, "z")]
    ]


def test_a_persons_local_commit_the_remote_lacks_is_never_let_go(tmp_path: Path) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner, person = tmp_path / "runner", tmp_path / "person"
    mine = clone(origin, runner)
    people = clone(origin, person)
    (runner / "NOTES.md").write_text("local notes\n")
    mine.index.add(["NOTES.md"])
    notes = mine.index.commit("notes on the runner")
    readme_pushed(people)

    again = run(runner, "apply", "--commit", "--push", "--system-time", WHEN)

    assert again.returncode == 1, again.stdout + again.stderr
    assert again.stderr.splitlines()[-1] == (
        f"error: origin/main lacks {notes.hexsha[:12]} (notes on the runner), a commit of "
        "this checkout that is no reconcile run's (was the remote rewritten?); not "
        "discarding it"
    )
    assert mine.head.commit.parents[0] == notes  # the run's own commit, kept locally
    assert git.Repo(origin).commit("main").summary == "README"


def test_a_commit_left_unpushed_is_pushed_by_the_next_run_even_with_nothing_new(
    tmp_path: Path,
) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    mine = clone(origin, runner)
    committed = run(runner, "apply", "--commit", "--system-time", WHEN)  # not pushed
    assert committed.returncode == 0, committed.stdout + committed.stderr

    assert scheduled_run(runner)[-3:] == [
        "nothing to commit",
        "pushed SHA to origin/main",
        "1 dataset: 1 up to date in N s",
    ]
    assert git.Repo(origin).commit("main") == mine.head.commit


def test_a_killed_runs_chain_that_does_not_verify_stops_the_next_run_with_its_problem(
    tmp_path: Path,
) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    clone(origin, runner)
    applied = run(runner, "apply", "--system-time", WHEN)  # advanced, not committed
    assert applied.returncode == 0, applied.stdout + applied.stderr
    (data,) = (runner / "odf" / A / "data").iterdir()
    data.write_bytes(data.read_bytes()[:-1] + b"!")
    # What a killed holder leaves in the lock file: its record, never cleared.
    holder = LockHolder(
        "reconcile apply", 4242, "runner-7", dt.datetime(2026, 3, 1, 6, tzinfo=dt.UTC)
    )
    (runner / "odf" / ".lock").write_bytes(holder.to_json())

    again = run(runner, "apply", "--commit", "--push", "--system-time", WHEN)

    assert again.returncode == 1
    assert re.fullmatch(r"nothing applied in [\d.]+ s\n", again.stdout)
    assert again.stderr == (
        "error: --commit refused, nothing was applied: a run that did not commit "
        "(reconcile apply (pid 4242 on runner-7, since 06:00:00 UTC)) left odf/"
        f"{A} changed, and it does not verify: block #5: data file bytes do not match "
        f"physical hash {data.name}; its records cannot be read (ArrowInvalid); discard it "
        f"with `git clean -fd odf/{A}`\n"
    )
    assert git.Repo(origin).commit("main").summary == "datasets"


@pytest.mark.parametrize(
    ("stray", "why"),
    [
        ("odf/notes.txt", "odf/notes.txt is in no dataset's folder"),
        ("odf/notes/todo.txt", "odf/notes holds no chain"),
    ],
)
def test_a_change_beside_the_chains_is_not_taken_for_a_killed_runs_work(
    tmp_path: Path, stray: str, why: str
) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    clone(origin, runner)
    (runner / stray).parent.mkdir(parents=True, exist_ok=True)
    (runner / stray).write_text("a person's note\n")
    holder = LockHolder(
        "reconcile apply", 4242, "runner-7", dt.datetime(2026, 3, 1, 6, tzinfo=dt.UTC)
    )
    (runner / "odf" / ".lock").write_bytes(holder.to_json())

    again = run(runner, "apply", "--commit", "--system-time", WHEN)

    assert again.returncode == 1
    assert re.fullmatch(r"nothing applied in [\d.]+ s\n", again.stdout)
    assert again.stderr == (
        "error: --commit refused, nothing was applied: a run that did not commit "
        f"(reconcile apply (pid 4242 on runner-7, since 06:00:00 UTC)) left changes, and {why}; "
        "commit or discard it first\n"
    )
    assert (runner / stray).read_text() == "a person's note\n"


def test_a_run_whose_git_commit_fails_leaves_its_work_for_the_next_run_to_commit(
    tmp_path: Path,
) -> None:
    """git refuses the first commit (a reference-transaction hook stands in for a full
    disk: --no-verify does not skip it). The run says so and keeps the lock's record;
    the next run commits the work as it would a killed run's, and pushes it."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    mine = clone(origin, runner)
    hook = runner / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = prepared ] && [ ! -e {tmp_path}/refused ] || exit 0\n'
        f"touch {tmp_path}/refused\n"
        "echo 'the disk is full' >&2\n"
        "exit 1\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)

    failed = run(runner, "apply", "--commit", "--push", "--system-time", WHEN)

    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stderr.splitlines()[-1] == (
        "error: git commit failed: the disk is full; the chains this run advanced are valid"
        " and left uncommitted in this checkout: the next --commit run in it commits them (a"
        " CI checkout thrown away loses them, and the next scheduled run does the work again)"
    )
    assert (runner / "odf" / ".lock").read_bytes() != b""  # the record stays
    assert git.Repo(origin).commit("main").summary == "datasets"

    lines = scheduled_run(runner)

    assert lines[0] == f"committed SHA: {recovered_from(1)}"
    assert lines[-3:] == [
        "nothing to commit",
        "pushed SHA to origin/main",
        "1 dataset: 1 up to date in N s",
    ]
    assert git.Repo(origin).commit("main") == mine.head.commit
    assert (runner / "odf" / ".lock").read_bytes() == b""


def test_gits_index_lock_is_refused_unless_a_killed_run_made_it(tmp_path: Path) -> None:
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    clone(origin, runner)
    index_lock = runner / ".git" / "index.lock"
    index_lock.write_bytes(b"")

    refused = run(runner, "apply", "--commit", "--system-time", WHEN)

    assert refused.returncode == 1
    assert refused.stderr == (
        f"error: --commit refused, nothing was applied: {index_lock} exists: a git command"
        " is running in this checkout, or one was killed; remove the file once no git"
        " command runs\n"
    )
    assert index_lock.exists()

    # Made after a run that did not commit began: that run's git, killed with it.
    applied = run(runner, "apply", "--system-time", WHEN)  # advanced, not committed
    assert applied.returncode == 0, applied.stdout + applied.stderr
    began = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    (runner / "odf" / ".lock").write_bytes(
        LockHolder("reconcile apply", 4242, "r", began).to_json()
    )
    index_lock.write_bytes(b"")

    recovered = run(runner, "apply", "--commit", "--system-time", WHEN)

    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert not index_lock.exists()
    lines = [re.sub(r"[0-9a-f]{12}", "SHA", line) for line in normal(recovered.stdout)]
    assert lines[:2] == [
        "removed .git/index.lock, left by the git of the run that did not commit",
        f"committed SHA: {recovered_from(1)}",
    ]


def test_a_run_without_commit_leaves_a_killed_runs_record_for_the_next_commit_run(
    tmp_path: Path,
) -> None:
    """Someone runs a plain apply on the runner after a kill: the record of a run that
    did not commit must outlive it, or the next scheduled run refuses the work."""
    origin = remote_with(tmp_path, {A: CSV_A})
    runner = tmp_path / "runner"
    clone(origin, runner)
    applied = run(runner, "apply", "--system-time", WHEN)  # advanced, not committed
    assert applied.returncode == 0, applied.stdout + applied.stderr
    began = dt.datetime(2026, 3, 1, 6, tzinfo=dt.UTC)
    (runner / "odf" / ".lock").write_bytes(
        LockHolder("reconcile apply", 4242, "r", began).to_json()
    )

    by_hand = run(runner, "apply", "--system-time", WHEN)

    assert by_hand.returncode == 0, by_hand.stdout + by_hand.stderr
    assert (runner / "odf" / ".lock").read_bytes() != b""
    assert scheduled_run(runner)[0] == f"committed SHA: {recovered_from(1)}"
    assert git.Repo(origin).commit("main").summary == recovered_from(1)
