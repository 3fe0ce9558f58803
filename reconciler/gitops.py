"""The one place that talks to git: what a pull request changed under ``datasets/``."""

from __future__ import annotations

from pathlib import Path

import git


class GitError(RuntimeError):
    """The repository or the base ref could not be read."""


def changed_paths(repo_root: Path, base_ref: str) -> set[Path]:
    """Files that differ between ``base_ref`` and the working tree, untracked ones included.

    Paths are absolute, so callers can compare them with manifest paths directly.
    """
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        base = repo.commit(base_ref)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{repo_root} is not in a git repository: {e}") from None
    except (git.BadName, ValueError) as e:
        raise GitError(f"unknown git ref {base_ref!r}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root)
    changed: set[Path] = set()
    for diff in base.diff(None):
        for path in (diff.a_path, diff.b_path):
            if path:
                changed.add((top / path).resolve())
    changed.update((top / p).resolve() for p in repo.untracked_files)
    return changed


def export_folder(repo_root: Path, ref: str, folder: Path, target: Path) -> bool:
    """Write ``folder`` as it is at ``ref`` into ``target``; False if it did not exist there.

    Used to judge a pull request by the policies of its base branch: otherwise a change
    could relax the very rules that review it.
    """
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        tree = repo.commit(ref).tree
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.BadName, ValueError) as e:
        raise GitError(f"cannot read {ref!r} in {repo_root}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root).resolve()
    try:
        sub = tree / folder.resolve().relative_to(top).as_posix()
    except (KeyError, ValueError):
        return False
    for item in sub.traverse():
        if isinstance(item, git.Blob):
            path = target / Path(str(item.path)).relative_to(Path(str(sub.path)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(item.data_stream.read())
    return True
