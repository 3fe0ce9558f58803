"""``--commit`` and ``--push``: the GitOps loop around an apply.

Before anything is applied the checkout is checked (``gitloop.worktree``). Then each
attempt reconciles, commits the ODF folder with a message saying what moved (the
datasets that succeeded are committed even when others failed: the exit code still says
1), and pushes. A push the remote rejected because it moved sends the run to the
remote's tip to reconcile again, up to ``--push-retries`` times, with exponential backoff
and jitter; each retry is said on stderr. When the remote's new commits left the chains
alone, the run's commits are carried onto its tip instead (``push.carry_over``) and
pushed again, nothing reconciled again: a ``reconcile push`` would ingest its file twice,
and what those commits changed (a merged manifest) is the next run's to apply.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import typer

from ..gitloop import message, push
from ..gitloop.fingerprints import reconciler_version
from ..gitloop.gitops import GitError
from ..gitloop.worktree import CommitError, RefusedError, Worktree
from ..held_signals import held_signals
from ..odf.lock import LockHolder, leave_record
from ..writer.scratch import remove_stale
from .common import EXIT_FAILED, EXIT_INTERRUPTED, Session
from .progress import Finished
from .results import RunResult


class CommitRefusedError(RuntimeError):
    """The checkout is not fit for the loop; nothing was applied. The command says so
    its own way (``apply --format json`` writes its document with the cause)."""


@contextmanager
def writing(session: Session, command: str, commit: bool) -> Iterator[LockHolder | None]:
    """Hold the repository lock for a run that writes (``apply``, ``push``): the working
    folders killed runs left go first, and the record of a run that did not commit
    (yielded, for ``converge`` to recover its work) is kept for the next ``--commit``
    run when this one does not commit."""
    with session.odf.lock(command, timeout=session.lock_timeout) as killed:
        remove_stale(session.config.work_dir)
        if killed is not None and not commit:
            leave_record(session.odf.root)
        yield killed


@dataclass
class Attempt:
    """One reconcile pass: its result document, its datasets and exit code, and the
    sha256 of the plan JSON it applied (the commit's ``Reconcile-Plan-Hash``; None for a
    ``push``, which applies no plan)."""

    result: RunResult
    finished: list[Finished]
    code: int
    plan_hash: str | None
    pushed_from: str | None = None  # a push's file (and source), said in the commit


def converge(
    session: Session,
    push_too: bool,
    retries: int,
    as_json: bool,
    reconcile: Callable[[], Attempt],
    killed: LockHolder | None = None,
) -> Attempt:
    """Reconcile, commit and (``push_too``) push until the push lands or retries run out;
    the last attempt, its code raised to 1 if its commit could not be pushed. ``killed``:
    a run that ended holding the lock without committing, whose verified work is
    committed first."""
    data_in_odf = session.config.data_store == "odf"
    try:
        tree = Worktree.open(session.config.root, session.config.odf_dir)
        if killed is not None and tree.remove_index_lock(killed.since.timestamp()):
            session.say("removed .git/index.lock, left by the git of the run that did not commit")
        names = _manifest_names(session)
        tree.check(push_too, data_in_odf, odf_changes=killed is not None, names=names)
        if killed is not None:
            _recover(session, tree, killed, as_json)
            tree.check(push_too, data_in_odf, names=names)
        upstream = push.upstream_of(tree) if push_too else None
    except (RefusedError, CommitError) as e:
        raise CommitRefusedError(f"--commit refused, nothing was applied: {e}") from None
    run_id = str(uuid.uuid4())
    attempts = retries + 1
    rng = random.Random()
    carried = False
    dropped: str | None = None  # an earlier attempt's commit, given up for the remote's
    for number in range(1, attempts + 1):
        if not carried:
            base = tree.head()
            attempt = reconcile()
            attempt.result.discarded = dropped
            written = False
            try:
                with held_signals("this run's commit is written") as kept:
                    sha = _commit_once_more_if_signalled(
                        session, tree, attempt, run_id, as_json, kept
                    )
                    written = True
            except KeyboardInterrupt:
                if not written:  # the work stays, for the next run to commit (as below)
                    leave_record(session.odf.root)
                    raise
                return _stopped_before_push(attempt, upstream is not None)
            except CommitError as e:
                # The work stays, valid and uncommitted; the lock's record stays with it,
                # so the next run commits it as it would a killed run's.
                leave_record(session.odf.root)
                attempt.result.error = (
                    f"{e}; the chains this run advanced are valid and left uncommitted in"
                    " this checkout: the next --commit run in it commits them (a CI checkout"
                    " thrown away loses them, and the next scheduled run does the work again)"
                )
                attempt.code = EXIT_FAILED
                return attempt
            if upstream is None:
                return attempt
            # Nothing new may still leave commits to push: an earlier run's, stopped
            # before its push, or this run's recovery of a killed one.
            if sha is None and not push.unpushed(tree, upstream):
                return attempt
        assert upstream is not None  # without one, the first attempt returned above
        # Stopped (the first Ctrl-C or SIGTERM): what finished is pushed, as Terraform
        # writes its state on a graceful stop; a CI checkout is thrown away after a
        # cancel, and the work with it. A stopped run is not reconciled again.
        stopped = attempt.code == EXIT_INTERRUPTED
        try:
            tip = push.push(tree, upstream, base)
            if tip is None:
                session.say(f"pushed {tree.head()[:12]} to {upstream}", err=as_json)
                return attempt
            # The remote's new commits left the chains alone: this run's commits go on
            # top of them as they are, and nothing is done again. The rebase gives them
            # new shas: the run says which, as the one it named on committing is on no
            # branch now.
            committed = tree.head()[:12]
            carried = push.carry_over(tree, tip)
            moved = f"carried {committed} onto {upstream} as {tree.head()[:12]}"
            if stopped and not carried:
                attempt.result.error = (
                    "interrupted: committed, not pushed: the remote's new commits advanced"
                    " the chains too; the next run does this run's work again"
                )
                attempt.code = EXIT_FAILED
                return attempt
            if number == attempts:
                if carried:
                    session.say(moved, err=as_json)
                break
            again = (
                f"pushing again on top of {upstream}"
                if carried
                else (f"reconciling again from {upstream}")
            )
            typer.echo(
                f"push rejected: the remote moved; {again} (attempt {number + 1} of {attempts})",
                err=True,
            )
            if carried:  # said after the rejection it answers
                session.say(moved, err=as_json)
            time.sleep(push.backoff(number, rng))
            if carried:
                base = tip
            else:
                if sha is not None:
                    subject = tree.repo.git.log("-1", "--format=%s")
                    dropped = (
                        f"attempt {number}'s commit ({sha[:12]}: {subject})"
                        " was given up: the remote's new commits had advanced the same chains,"
                        " and the run started again from them"
                    )
                push.move_to(tree, tip)
        except (push.PushError, RefusedError) as e:
            attempt.result.error = str(e)
            attempt.code = EXIT_INTERRUPTED if stopped else EXIT_FAILED
            return attempt
        except KeyboardInterrupt:
            return _stopped_before_push(attempt, True)
        if carried:
            continue
        try:
            _verify_moved(session, tree, base)
        except RefusedError as e:  # the attempt's commit is no longer the checkout's
            why = f"{e}; this attempt's work went with its commit, and nothing was pushed"
            result = RunResult(attempt.result.command, error=why)
            return Attempt(result, [], EXIT_FAILED, attempt.plan_hash)
    attempt.result.error = (
        f"push rejected {attempts} times: {upstream} kept moving; the commit was not pushed"
    )
    attempt.code = EXIT_FAILED
    return attempt


def _stopped_before_push(attempt: Attempt, pushing: bool) -> Attempt:
    """The attempt, as a stop at once (a second Ctrl-C) left it after its commit: with
    its result, so the summary and the JSON document say what was done and what not."""
    attempt.result.error = (
        "interrupted: stopped at once before the push ended, so it may not have landed;"
        " the next --commit --push run in this checkout pushes what is committed"
        if pushing
        else "interrupted: stopped at once, after its commit"
    )
    attempt.result.interrupted = True
    attempt.code = EXIT_INTERRUPTED
    return attempt


def _manifest_names(session: Session) -> list[str]:
    """The names the manifests give (those that load): the folders a run may create."""
    from ..odf.manifest import ManifestError, load_snapshots

    names: list[str] = []
    for path in session.config.scan_manifests().paths:
        with contextlib.suppress(ManifestError, OSError):
            names += [item.snapshot.name for item in load_snapshots(path)]
    return names


def _verify_moved(session: Session, tree: Worktree, base: str) -> None:
    """Check what the remote's new commits changed in the chains, before a run extends
    them: the workflow verifies the chains once, before the first attempt, and a retry
    builds on commits it never saw. Compared from where ``base`` (this run's commit
    before the attempt) and the new tip meet: a commit of this checkout the remote lacks
    (a run stopped before its push) is let go, not read as the remote's doing.
    ``RefusedError`` for the first chain they leave invalid."""
    from ..inspection.verify import changes_since, verify_change

    repo = session.odf
    try:
        since = next(iter(tree.repo.merge_base(base, tree.head())), None)
        if since is None:
            raise RefusedError(f"the remote's tip shares no history with {base[:12]}")
        changes = changes_since(repo, session.config.root, str(since))
    except GitError as e:
        raise RefusedError(f"cannot tell what the remote's new commits changed: {e}") from None
    existing = set(repo.names())  # a chain deleted or renamed away is not one to extend
    for name, change in sorted(changes.items()):
        if name not in existing:
            continue
        verdict = verify_change(repo, name, change)
        fatal = [p for p in verdict.problems if p.fatal]
        if fatal:
            raise RefusedError(
                f"the remote's new commits leave the chain of {name} invalid ({fatal[0]});"
                " nothing more was applied: only the reconciler writes chains, and this one"
                " must be repaired before any run extends it"
            )


def _recover(session: Session, tree: Worktree, killed: LockHolder, as_json: bool) -> None:
    """Commit what a run that did not commit left under the ODF folder, once it verifies.

    A run killed (SIGKILL, a lost machine) before its commit, or whose ``git commit``
    failed, leaves chains advanced in the working tree, each valid (heads move last)
    beside files no head reaches. Those are removed; the advanced chains are checked
    whole and committed as that run's work, so it is neither lost nor done twice. A
    chain that does not verify, or a change in no chain's folder, stops the run
    (``RefusedError``) for a person to see.
    """
    session.odf.remove_leftovers()
    changed = tree.odf_changes()
    if not changed:
        return
    names = _left_names(tree, killed, changed)
    heads = {name: _left_head(session, tree, killed, name) for name in names}
    trailers = message.Trailers(str(uuid.uuid4()), None, reconciler_version())
    untracked = tree.tracked_transients()
    sha = tree.commit(message.recovery_message(str(killed), heads, trailers, untracked), untracked)
    if sha is not None:
        session.say(f"committed {sha[:12]}: {message.recovery_subject(heads)}", err=as_json)


def _left_names(tree: Worktree, killed: LockHolder, changed: list[str]) -> list[str]:
    """The datasets whose folders hold the ``changed`` paths; ``RefusedError`` for a
    change in no dataset's folder (a person's file beside the chains, not a run's)."""
    from ..odf.names import name_problem

    depth = tree.odf.count("/") + 1
    parts = [path.split("/") for path in changed]
    for p in parts:
        if len(p) <= depth + 1 or name_problem(p[depth]) is not None:
            raise RefusedError(
                f"a run that did not commit ({killed}) left changes, and {'/'.join(p)} "
                "is in no dataset's folder; commit or discard it first"
            )
    return sorted({p[depth] for p in parts})


def _left_head(session: Session, tree: Worktree, killed: LockHolder, name: str) -> str | None:
    """The head a killed run left a dataset at, once its chain verifies whole; None for
    a dataset it deleted (committed before, gone now)."""
    from ..odf.integrity import check_integrity

    folder = f"{tree.odf}/{name}"
    dataset = session.odf.dataset(name)
    head = dataset.head() if dataset.exists() else None
    tracked = tree.tracked(folder)
    if head is None and not tracked:
        raise RefusedError(
            f"a run that did not commit ({killed}) left changes, and {folder} holds no "
            "chain; commit or discard it first"
        )
    problems = [p for p in check_integrity(dataset) if p.fatal] if head is not None else []
    if problems:
        discard = f"git clean -fd {folder}"
        if tracked:
            discard = f"git checkout HEAD -- {folder} && {discard}"
        raise RefusedError(
            f"a run that did not commit ({killed}) left {folder} changed, and it does "
            f"not verify: {problems[0]}; discard it with `{discard}`"
        )
    return None if head is None else str(head)


def _commit_once_more_if_signalled(
    session: Session,
    tree: Worktree,
    attempt: Attempt,
    run_id: str,
    as_json: bool,
    kept: list[int],
) -> str | None:
    """``_commit``, and again if it failed while a stop was held: a Ctrl-C or SIGTERM to
    the process group ends the ``git`` it had running (git drops its index lock as it
    goes), and the stopped run then left its finished chains uncommitted. A signal ends
    only the processes alive when it comes, so the second try runs undisturbed."""
    try:
        return _commit(session, tree, attempt, run_id, as_json)
    except Exception:
        if not kept:
            raise
    return _commit(session, tree, attempt, run_id, as_json)


def _commit(
    session: Session, tree: Worktree, attempt: Attempt, run_id: str, as_json: bool
) -> str | None:
    """Commit what the attempt advanced; its sha, or None when nothing changed."""
    odf = session.odf
    runs = [
        message.DatasetRun(
            done.outcome,
            done.offsets,
            str(head) if (head := odf.dataset(done.outcome.dataset).head()) else None,
        )
        for done in attempt.finished
    ]
    trailers = message.Trailers(run_id, attempt.plan_hash, reconciler_version())
    tree.restart_git()  # a signal to the group since they started ended them
    untracked = tree.tracked_transients()
    text = message.commit_message(runs, trailers, attempt.pushed_from, untracked)
    sha = tree.commit(text, untracked)
    if sha is None:
        session.say("nothing to commit", err=as_json)
    else:
        session.say(f"committed {sha[:12]}: {message.subject(runs, len(untracked))}", err=as_json)
    return sha
