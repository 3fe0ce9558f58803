"""Push a reconcile commit, and when the remote moved, move to its tip to reconcile again.

Two runs, or a run and a person, may both have moved the branch since the run's checkout.
Blocks of two chains are never merged or rebased: each chain's blocks link by hash, so
two runs' blocks cannot be interleaved, and a dataset another run advanced is simply
recomputed. So when a push is rejected because the remote's new commits changed the
chains, the local reconcile commit is discarded: the run fetches, resets to the remote's
tip and lets the caller reconcile again (reconcile is idempotent: whatever the other run
already did is left to do no more). When they left the chains alone (a merged pull
request, a README edit), the run's commits are carried onto the tip instead
(``carry_over``), with nothing recomputed.

The branch pushed to is the current branch's upstream (``branch.<name>.remote`` and
``branch.<name>.merge``), else ``origin`` and the current branch's own name.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
from dataclasses import dataclass

import git

from .worktree import RefusedError, Worktree

BACKOFF_SECONDS = 1.0  # the first retry waits 0.5-1 s, the second 1-2 s, the third 2-4 s…
BACKOFF_CAP_SECONDS = 30.0


class PushError(RuntimeError):
    """The push failed for another reason than a moved remote (access, network…)."""


@dataclass(frozen=True)
class Upstream:
    remote: str
    branch: str

    def __str__(self) -> str:
        return f"{self.remote}/{self.branch}"


def upstream_of(tree: Worktree) -> Upstream:
    """Where ``--push`` pushes: the branch's tracking configuration, else ``origin`` and
    the branch's name; ``RefusedError`` without a branch or when that remote does not exist."""
    branch = tree.branch()
    if branch is None:
        raise RefusedError("HEAD is detached: --push needs a branch checked out")
    tracking = tree.repo.active_branch.tracking_branch()
    if tracking is not None:
        upstream = Upstream(tracking.remote_name, tracking.remote_head)
    else:
        upstream = Upstream("origin", branch)
    if upstream.remote not in {r.name for r in tree.repo.remotes}:
        raise RefusedError(f"there is no remote {upstream.remote!r} to push {branch} to")
    return upstream


def push(tree: Worktree, upstream: Upstream, base: str) -> str | None:
    """Push HEAD (a commit on top of ``base``) to ``upstream``: None once pushed, else the
    remote tip that moved past ``base``; ``PushError`` on any other failure."""
    _push_lfs_objects(tree, upstream, base)
    try:
        # No pre-push hooks: they are for people's pushes (a linter must not stop the
        # chains); Git LFS's, which uploads the files it stores, is done just above.
        tree.repo.git.push(
            "--quiet", "--no-verify", upstream.remote, f"HEAD:refs/heads/{upstream.branch}"
        )
        return None
    except git.GitCommandError as e:
        refusal = _reason(str(e.stderr))
    tip = _fetch(tree, upstream)
    if (
        tip is None
        or tip == base
        or tree.repo.is_ancestor(tree.repo.commit(tip), tree.repo.head.commit)
    ):
        raise PushError(f"git push to {upstream} failed: {refusal}")
    # What the remote lacks besides this run's commit. Commits of earlier runs (one
    # killed or interrupted between its commit and its push) only hold work that is
    # done again from the remote's tip, so they may go; anything else is someone's.
    theirs = [c for c in tree.repo.iter_commits(f"{tip}..{base}") if not _ours(c, tree.odf)]
    if theirs:
        raise PushError(
            f"{upstream} lacks {theirs[0].hexsha[:12]} ({theirs[0].summary!s}), a commit of "
            "this checkout that is no reconcile run's (was the remote rewritten?); not "
            "discarding it"
        )
    return tip


def _push_lfs_objects(tree: Worktree, upstream: Upstream, base: str) -> None:
    """Upload the Git LFS objects of the chain files this push carries, when git's
    attributes put any of them in LFS (``filter=lfs``): the commit holds only their
    pointers, and LFS uploads the files from its pre-push hook, which ``--no-verify``
    skips, so the remote got pointers to files no clone could fetch. Without such a
    file, or without LFS's filter configured (git then committed the files themselves),
    LFS is not asked: a runner without git-lfs would fail the push for nothing."""
    filters = tree.repo.git.config("--get-regexp", r"^filter\.lfs\.", with_exceptions=False)
    if not filters:  # no LFS filter here: git stored the files themselves, not pointers
        return
    tracking = f"refs/remotes/{upstream.remote}/{upstream.branch}"
    known = tree.repo.git.rev_parse("--verify", "-q", tracking, with_exceptions=False)
    since = tracking if known else base
    changed = tree.repo.git.diff(
        "--name-only", "-z", "--no-renames", "--diff-filter=AM", since, "HEAD", "--", tree.odf
    )
    paths = [p for p in changed.split("\0") if p]
    if not paths:
        return
    top = tree.repo.working_tree_dir or "."
    attributes = subprocess.run(
        ["git", "-C", top, "check-attr", "-z", "--stdin", "filter"],
        input="\0".join(paths).encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=False,
    )
    if b"lfs" not in attributes.stdout.split(b"\0")[2::3]:
        return
    try:
        tree.repo.git.lfs("push", upstream.remote, "HEAD")
    except git.GitCommandError as e:
        raise PushError(f"git lfs push to {upstream} failed: {_reason(str(e.stderr))}") from None


def _ours(commit: git.Commit, odf: str) -> bool:
    """A reconcile run's commit: one parent, its trailers, and nothing outside the ODF
    folder."""
    trailer = "\nReconcile-Run-Id: " in str(commit.message)
    paths = commit.stats.files if len(commit.parents) == 1 else {"": None}
    return trailer and all(str(p) == odf or str(p).startswith(odf + "/") for p in paths)


def unpushed(tree: Worktree, upstream: Upstream) -> bool:
    """Whether HEAD has commits the remote lacks, as far as this checkout knows (its
    remote-tracking branch; without one, assume so: the push will tell)."""
    tracking = f"refs/remotes/{upstream.remote}/{upstream.branch}"
    try:
        return int(tree.repo.git.rev_list("--count", f"{tracking}..HEAD")) > 0
    except git.GitCommandError:
        return True


def move_to(tree: Worktree, tip: str) -> None:
    """Reset the checkout to ``tip``, discarding the run's unpushed commit; only
    bookkeeping files may be uncommitted (the ODF folder was just committed)."""
    left = [c.path for c in tree.changes() if c.tracked]
    if left:
        raise RefusedError(f"cannot move to the remote's tip: uncommitted changes to {left[0]}")
    tree.repo.git.reset("--hard", "--quiet", tip)


def carry_over(tree: Worktree, tip: str) -> bool:
    """Put this checkout's unpushed commits on top of ``tip`` when the remote's new
    commits leave the ODF folder alone (a merged pull request, a README edit); whether
    it did. The chains are then as this run left them, extending the heads they had, and
    the commits apply unchanged, as if this run had pushed just before those commits: a
    README edit merged during a long run made it throw its work away and do it again,
    and a stopped run (which does no more work) pushed nothing. Not when the remote's
    commits touch the ODF folder (another run advanced the chains: a chain is
    recomputed, never merged), nor when any commit to carry is not a reconcile run's."""
    repo = tree.repo
    since = next(iter(repo.merge_base(tip, repo.head.commit)), None)
    if since is None or repo.git.diff("--name-only", since.hexsha, tip, "--", tree.odf):
        return False
    if not all(_ours(c, tree.odf) for c in repo.iter_commits(f"{since.hexsha}..HEAD")):
        return False
    try:
        repo.git.rebase("--quiet", "--no-verify", tip)
    except git.GitCommandError:
        with contextlib.suppress(git.GitCommandError):
            repo.git.rebase("--abort")
        return False
    return True


def backoff(attempt: int, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (1 for the first): exponential, with
    jitter so that two runs rejected together do not retry in step."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_SECONDS * 2 ** (attempt - 1))
    return float(ceiling / 2 + rng.uniform(0, ceiling / 2))


def _fetch(tree: Worktree, upstream: Upstream) -> str | None:
    """The remote branch's tip after a fetch; None when it cannot be fetched."""
    try:
        tree.repo.git.fetch("--quiet", upstream.remote, upstream.branch)
        return str(tree.repo.commit("FETCH_HEAD").hexsha)
    except (git.GitCommandError, ValueError, git.BadName):
        return None


def _reason(stderr: str) -> str:
    """git's reason in its ``stderr`` (as GitPython gives it): the first ``fatal:`` or
    ``error:`` line, else the last line. The last line alone was often the tail of
    advice ("and the repository exists.")."""
    lines = [
        line.strip().removeprefix("stderr:").strip().strip("'") for line in stderr.splitlines()
    ]
    lines = [line for line in lines if line]
    told = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (told or lines or ["no reason given"])[0 if told else -1]
