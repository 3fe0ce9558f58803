"""Symbolic links a pull request adds where the plan judges files by their paths.

The plan judges a pull request by what git says it changed: the chains under ``odf/``
(which only the reconciler writes) and the source files a chain has read. A link is
what git diffs, and what a run reads is what it leads to: a pull request copied ``odf``
to ``archive`` with one byte changed (nobody's concern: not a chain), and a second one
made ``odf`` a link to ``archive``; the plan saw no change. The same with
``sources/orders`` made a link to a copy in which an ingested record was changed. So a
link the pull request adds at, above or inside those folders, the policies' folder or
``pyproject.toml`` (both read from the base branch, where a link led the reading to the
base's copy of whatever it named) is an error. Links the base branch has already (a
sources folder on a mounted volume) are not its doing. ``verify --integrity --base``
fails the same way on a link at the chains' folder or a dataset's
(``chain_link_problems``): it read the chains through one; and the plan reads no chain
through a link at or above the chains' folder (``chains_behind_link``), nor through one
the base has already (``chains_link_problem``): a scheduled run would append there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..config import RepoConfig
from ..gitloop import gitops
from ..plan.model import Location, Problem
from ..source_paths import glob_folder

_RESTORE = "restore it from the base branch"
_CHAINS = f"where the chains are, which only the reconciler writes; {_RESTORE}"


def link_problems(config: RepoConfig, base_ref: str, globs: Mapping[str, str]) -> list[Problem]:
    """An error for each link the working tree adds or changes since ``base_ref`` at,
    above or inside the chains' folder, the policies, ``pyproject.toml`` or a folder a
    ``FilesGlob`` (``globs``: dataset name to path as written) reads."""
    top = gitops.top_of(config.root)
    policies = f"where the policies that judge pull requests are; {_RESTORE}"
    folders = sorted({config.policies_dir, gitops.config_at(config, base_ref).policies_dir})
    judged = _in_checkout(
        top,
        [
            (config.odf_dir, _CHAINS),
            *((folder, policies) for folder in folders),
            (config.root / "pyproject.toml", f"the repository's settings; {_RESTORE}"),
        ],
    )
    sources = _in_checkout(
        top, [(glob_folder(path, config.root), name) for name, path in sorted(globs.items())]
    )
    links = gitops.added_links(config.root, base_ref, [p for p, _ in judged + sources])

    def crossing(path: str, places: list[tuple[str, str]]) -> list[str]:
        return [what for folder, what in places if gitops.crosses(path, folder)]

    problems = []
    for path, target in links:
        found = crossing(path, judged)
        if found:
            what = found[0]
        else:
            names = crossing(path, sources)
            reads = "reads its" if len(names) == 1 else "read their"
            what = f"where {', '.join(names)} {reads} source files; commit the files themselves"
        problems.append(_problem(top, path, target, what))
    return problems


def chain_link_problems(config: RepoConfig, base_ref: str) -> list[Problem]:
    """The errors of ``link_problems`` for a link at or above the chains' folder, or at a
    dataset's folder in it: ``verify --base`` read the chains through it, and found the
    copy it leads to valid (or, for a dataset's folder, no chain there at all). A link
    deeper in a dataset's folder is that dataset's own check's to report."""
    top = gitops.top_of(config.root)
    links = _chain_links(config, top, base_ref, 1)
    return [_problem(top, path, target, _CHAINS) for path, target in links]


def chains_behind_link(config: RepoConfig, base_ref: str) -> bool:
    """Whether the working tree makes the chains' folder, or one above it, a link since
    ``base_ref``: every chain read there is what the link leads to, so the plan reads
    none (it said "2 unchanged" of a copy beside the link's error)."""
    return bool(_chain_links(config, gitops.top_of(config.root), base_ref, 0))


def _chain_links(config: RepoConfig, top: Path, base_ref: str, depth: int) -> list[tuple[str, str]]:
    """The links (``gitops.added_links``) at or above the chains' folder, or at most
    ``depth`` folders inside it (1: a dataset's folder); ``top``: the checkout's."""
    chains = _in_checkout(top, [(config.odf_dir, _CHAINS)])
    if not chains:
        return []
    deepest = chains[0][0].count("/") + depth
    links = gitops.added_links(config.root, base_ref, [chains[0][0]])
    return [(path, target) for path, target in links if path.count("/") <= deepest]


def chains_link_problem(config: RepoConfig) -> Problem | None:
    """The error for a chains' folder that is, or lies under, a symbolic link inside the
    repository, whoever made it (the base branch may have merged it): every chain read
    there is what the link leads to, and a run would append its blocks there, where its
    commit leaves them out. None when the chains are the repository's own folder (or
    are configured outside it, where no link of the repository is crossed)."""
    chains = Path(os.path.normpath(config.odf_dir))
    if not chains.is_relative_to(config.root):
        return None
    folder = config.root
    for part in chains.relative_to(config.root).parts:
        folder /= part
        if folder.is_symlink():
            shown = folder.relative_to(config.root).as_posix()
            under = "" if folder == chains else f" ({chains.relative_to(config.root).as_posix()})"
            return Problem(
                f"{shown} is a symbolic link (to {os.readlink(folder)}): the chains{under}"
                " must be in the repository's own tree, which only the reconciler writes;"
                " restore the folder from the commit before the link",
                location=Location(str(folder)),
            )
    return None


def _in_checkout(top: Path, places: list[tuple[Path, str]]) -> list[tuple[str, str]]:
    """Each of ``places`` (a path, and what it is) as git names the path
    (``gitops.in_checkout``), worked out once for the diff and the wording alike; those
    outside the checkout, which git has no history of, left out."""
    inside = ((gitops.in_checkout(top, path), what) for path, what in places)
    return [(path, what) for path, what in inside if path is not None]


def _problem(top: Path, path: str, target: str, what: str) -> Problem:
    """The error for the link at ``path`` (as git names it) leading to ``target``."""
    return Problem(
        f"this pull request makes {path} a symbolic link (to {target}): git and the"
        f" reviewer see the link, but a run reads what it leads to. It is {what}",
        location=Location(str(top / path)),
    )
