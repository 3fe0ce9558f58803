"""The checkout a reconcile run commits from: refused unless a commit would hold only its work.

``--commit`` commits the ODF folder alone, so it refuses, before anything is applied, a
working tree where that commit would sweep in someone else's changes or leave work
half-done: uncommitted or untracked changes under the ODF folder, changes staged
elsewhere (they would ride along), a merge, rebase, cherry-pick or revert in progress,
git's index lock (a git command running, or killed), or no committer identity. With
``--push`` a rejected push moves the checkout to the
remote's tip (``push``), which would discard uncommitted changes to tracked files
anywhere, so those are refused too, as is a detached HEAD (no branch to push).

Lock files (``.lock``) and crash temporaries (``.pending-*``) under the ODF folder are
the reconciler's own bookkeeping: never committed, never counted as changes, and
removed from the index should an older version have committed them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import git

from .gitops import (
    Converted,
    attribute_source,
    attributes_unset,
    chain_paths,
    converted_paths,
    gitlinks,
    glob_escape,
    ignored_paths,
    same_bytes,
    submodule_in_chains,
)

_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
}
_SHOWN = 5
_INDEX_LOCK = "index.lock"


class RefusedError(RuntimeError):
    """The checkout is not fit for a reconcile commit; the message says why and what to do."""


class CommitError(RuntimeError):
    """``git commit`` failed; the message is git's reason."""


@dataclass(frozen=True)
class Change:
    """One entry of ``git status``: its two status letters and path (posix, from the top)."""

    index: str
    worktree: str
    path: str

    @property
    def tracked(self) -> bool:
        return self.index not in ("?", "!")  # untracked, or ignored


@dataclass(frozen=True)
class Worktree:
    """A git checkout and the ODF folder inside it that reconcile commits."""

    repo: git.Repo
    odf: str  # the ODF folder, relative to the top of the checkout (posix)

    @classmethod
    def open(cls, root: Path, odf_dir: Path) -> Worktree:
        try:
            repo = git.Repo(root, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise RefusedError(f"{root} is not in a git repository: --commit needs one") from None
        top = Path(repo.working_tree_dir or root).resolve()
        try:
            odf = odf_dir.resolve().relative_to(top).as_posix()
        except ValueError:
            raise RefusedError(f"the ODF folder {odf_dir} is outside the checkout {top}") from None
        return cls(repo, odf)

    def head(self) -> str:
        return str(self.repo.head.commit.hexsha)

    def restart_git(self) -> None:
        """Drop GitPython's long-lived ``git cat-file`` processes; new ones start when
        needed. A Ctrl-C, or ``timeout``'s SIGINT, goes to the whole process group and
        ends them too: the stopped run's commit then failed on a broken pipe, exit 141,
        and what it had finished was never pushed. A run restarts them before it
        commits, whatever its outcome: a Ctrl-C during its last dataset stops nothing,
        since nothing is left to stop, but still ends them."""
        self.repo.git.clear_cache()

    def branch(self) -> str | None:
        """The branch checked out; None on a detached HEAD."""
        return None if self.repo.head.is_detached else self.repo.active_branch.name

    def check(
        self,
        push: bool,
        data_in_odf: bool = True,
        odf_changes: bool = False,
        names: Iterable[str] = (),
    ) -> None:
        """Refuse (``RefusedError``) a checkout the run's commit or push would harm;
        ``data_in_odf``: the data and checkpoint files are committed with the chains;
        ``odf_changes``: changes under the ODF folder are let through (a killed run's
        work, which the loop verifies and commits first); ``names``: the datasets the
        manifests define, whose folders the run may create (an ignore rule or attribute
        may name one)."""
        git_dir = Path(self.repo.git_dir)
        for marker, what in _IN_PROGRESS.items():
            if (git_dir / marker).exists():
                raise RefusedError(f"{what} is in progress: finish or abort it first")
        if (git_dir / _INDEX_LOCK).exists():
            raise RefusedError(
                f"{git_dir / _INDEX_LOCK} exists: a git command is running in this checkout, "
                "or one was killed; remove the file once no git command runs"
            )
        if push and self.branch() is None:
            raise RefusedError("HEAD is detached: --push needs a branch checked out")
        try:
            self.repo.git.var("GIT_COMMITTER_IDENT")
        except git.GitCommandError:
            identity = "git has no committer identity: set user.name and user.email"
            raise RefusedError(identity) from None
        top = Path(self.repo.working_tree_dir or ".")
        if submodules := gitlinks(top, self.odf):
            raise RefusedError(submodule_in_chains(submodules[0]))
        chain_files = chain_paths(top, self.odf, data_in_odf, names)
        ignored = ignored_paths(top, chain_files)
        if ignored:
            raise RefusedError(
                f"git ignores files a run must commit: {ignored[0]}; add the rule"
                f" `!{self.odf}/**` below it, or the commit would leave them out"
            )
        converted = converted_paths(top, chain_files)
        if converted:
            raise RefusedError(
                f"git would rewrite files a run commits: {_sourced(top, converted[0])}; end"
                f" .gitattributes with {attributes_unset(self.odf)}, or the commit would"
                " store blocks whose bytes no longer match their hashes"
            )
        changes = self._unfiltered([c for c in self.changes() if not self._transient(c.path)])
        under = [c.path for c in changes if self._under_odf(c.path)]
        if under and not odf_changes:
            raise RefusedError(
                f"{self.odf}/ has changes no reconcile run committed: {_listed(under)}; "
                "commit or discard them first"
            )
        staged = [
            c.path
            for c in changes
            if c.tracked and c.index != " " and not (odf_changes and self._under_odf(c.path))
        ]
        if staged:
            listed = _listed(staged)
            raise RefusedError(f"changes are staged that the commit would include: {listed}")
        modified = [c.path for c in changes if c.tracked and not self._under_odf(c.path)]
        if push and modified:
            raise RefusedError(
                "tracked files have uncommitted changes, which moving to the remote's tip "
                f"after a rejected push would discard: {_listed(modified)}"
            )

    def changes(self, ignored_under_odf: bool = False) -> list[Change]:
        """``git status`` of the whole checkout, untracked files one by one; with
        ``ignored_under_odf``, of the ODF folder only, with the files git ignores too."""
        scope = ["--ignored", "--", self.odf] if ignored_under_odf else []
        out = self.repo.git.status("--porcelain=v1", "-z", "--untracked-files=all", *scope)
        entries = iter(out.split("\0"))
        changes = []
        for entry in entries:
            if not entry:
                continue
            change = Change(entry[0], entry[1], entry[3:])
            if "R" in entry[:2] or "C" in entry[:2]:
                next(entries, None)  # the path it was renamed or copied from
            changes.append(change)
        return changes

    def commit(self, message: str, unstage: list[str]) -> str | None:
        """Stage the ODF folder (and nothing else) and commit it, taking ``unstage`` out
        of git (``tracked_transients``, which the message names); the new commit's sha, or
        None when nothing under it changed. ``CommitError`` with git's reason if git
        refuses (its index locked, a full disk), or when git's attributes would rewrite a
        file the run wrote (nothing is staged then).

        Files an ignore rule catches are staged too (``--force``): ``check`` refuses the
        rules it can foresee, but a rule may catch only some hash names (``f1620?*``),
        and a commit without them would hold heads whose blocks no clone has."""
        ours = self._unfiltered(
            [c for c in self.changes(ignored_under_odf=True) if self._under_odf(c.path)]
        )
        stage = [c.path for c in ours if not self._transient(c.path)]
        top = Path(self.repo.working_tree_dir or ".")
        written = [c.path for c in ours if c.worktree != "D" and not self._transient(c.path)]
        converted = converted_paths(top, written)
        if converted:
            raise CommitError(
                f"git would rewrite a file this run wrote: {_sourced(top, converted[0])}; end"
                f" .gitattributes with {attributes_unset(self.odf)}"
            )
        try:
            if stage:
                self._with_paths(["add", "--all", "--force"], stage)
            if unstage:
                self._with_paths(["rm", "--cached", "--quiet"], unstage)
            if not self.staged():
                return None
            # No pre-commit or commit-msg hooks: they are for people's changes, and a data
            # repository's linters must not stop the chains from being committed.
            self.repo.git.commit("--quiet", "--no-verify", "-m", message)
        except git.GitCommandError as e:
            reasons = [line.strip() for line in str(e.stderr).splitlines() if line.strip()]
            reason = reasons[0].removeprefix("stderr: ").strip("'") if reasons else str(e)
            raise CommitError(f"git commit failed: {reason}") from None
        return self.head()

    def remove_index_lock(self, since: float) -> bool:
        """Remove git's index lock if it was made at ``since`` (a timestamp) or later:
        the lock of a ``git`` a killed run started, which nothing will remove."""
        lock = Path(self.repo.git_dir) / _INDEX_LOCK
        try:
            if lock.stat().st_mtime < since:
                return False
            lock.unlink()
            return True
        except FileNotFoundError:
            return False

    def _with_paths(self, command: list[str], paths: list[str]) -> None:
        """Run a git command on many paths (a run may write thousands of files): through
        a file, as no command line is long enough for them all."""
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".paths") as listing:
            listing.write("\0".join(paths))
            listing.flush()
            self.repo.git.execute(
                ["git", *command, f"--pathspec-from-file={listing.name}", "--pathspec-file-nul"]
            )

    def odf_changes(self) -> list[str]:
        """The changed paths under the ODF folder, bookkeeping files left out."""
        return [
            c.path
            for c in self.changes()
            if self._under_odf(c.path) and not self._transient(c.path)
        ]

    def tracked(self, path: str) -> bool:
        """Whether HEAD has anything at ``path`` (a file, or a folder with files)."""
        return bool(self.repo.git.ls_tree("--name-only", "HEAD", "--", path))

    def staged(self) -> list[str]:
        return [p for p in self.repo.git.diff("--cached", "--name-only", "-z").split("\0") if p]

    def _unfiltered(self, changes: list[Change]) -> list[Change]:
        """``changes`` without the chain files git reads as modified only through the
        clean filter its attributes name now (``gitops.same_bytes``): once a pull request
        adds ``odf/** filter=lfs``, every committed chain file git looks at again (a
        touch, a checkout within the second of its commit) would be stored as a pointer,
        and a run refused the checkout as holding changes no run committed."""
        modified = [
            c.path
            for c in changes
            if c.index == " " and c.worktree == "M" and self._under_odf(c.path)
        ]
        if not modified:
            return changes
        top = Path(self.repo.working_tree_dir or ".")
        same = same_bytes(self.repo, top, "HEAD", modified)
        return [c for c in changes if c.path not in same]

    def _under_odf(self, path: str) -> bool:
        return path == self.odf or path.startswith(self.odf + "/")

    def _transient(self, path: str) -> bool:
        """A lock or a temporary under the ODF folder, or a file inside a folder named as
        a temporary: ``.gitignore``'s ``.pending-*`` leaves out such a folder whole."""
        if not self._under_odf(path):
            return False
        *folders, name = path[len(self.odf) + 1 :].split("/")
        return name == ".lock" or any(p.startswith(".pending-") for p in (*folders, name))

    def tracked_transients(self) -> list[str]:
        """The locks and temporaries under the ODF folder that the index holds, wherever
        they sit (at the folder's top, or a temporary's folder in a chain): a merge can
        carry them in, and unchanged they are in no ``git status``. Git's own glob
        matching over the index: no listing of every block file."""
        top = glob_escape(self.odf)
        patterns = [f"{top}/**/.lock", f"{top}/**/.pending-*", f"{top}/**/.pending-*/**"]
        out = self.repo.git.ls_files("-z", "--", *(f":(glob){p}" for p in patterns))
        return [p for p in dict.fromkeys(out.split("\0")) if p and self._transient(p)]


def _sourced(top: Path, found: Converted) -> str:
    """``found``, with the attributes file and line that set it when they can be told."""
    source = attribute_source(top, found)
    if source is None:
        return str(found)
    file, line = source
    shown = file.relative_to(top).as_posix() if file.is_relative_to(top) else str(file)
    return f"{found} ({shown}:{line})"


def _listed(paths: list[str]) -> str:
    more = len(paths) - _SHOWN
    shown = ", ".join(paths[:_SHOWN])
    return f"{shown} and {more} more" if more > 0 else shown
