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
sources folder on a mounted volume) are not its doing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..config import RepoConfig
from ..gitloop import gitops
from ..plan.model import Location, Problem
from ..source_paths import glob_folder


def link_problems(config: RepoConfig, base_ref: str, globs: Mapping[str, str]) -> list[Problem]:
    """An error for each link the working tree adds or changes since ``base_ref`` at,
    above or inside the chains' folder, the policies, ``pyproject.toml`` or a folder a
    ``FilesGlob`` (``globs``: dataset name to path as written) reads."""
    restore = "restore it from the base branch"
    policies = f"where the policies that judge pull requests are; {restore}"
    folders = sorted({config.policies_dir, gitops.config_at(config, base_ref).policies_dir})
    judged = [
        (config.odf_dir, f"where the chains are, which only the reconciler writes; {restore}"),
        *((folder, policies) for folder in folders),
        (config.root / "pyproject.toml", f"the repository's settings; {restore}"),
    ]
    sources = [(glob_folder(path, config.root), name) for name, path in sorted(globs.items())]
    links = gitops.added_links(config.root, base_ref, [p for p, _ in judged + sources])
    if not links:
        return []
    top = gitops.top_of(config.root)

    def crossing(path: str, places: list[tuple[Path, str]]) -> list[str]:
        inside = ((gitops.in_checkout(top, folder), what) for folder, what in places)
        return [what for folder, what in inside if folder and gitops.crosses(path, folder)]

    problems = []
    for path, target in links:
        found = crossing(path, judged)
        if found:
            what = found[0]
        else:
            names = crossing(path, sources)
            reads = "reads its" if len(names) == 1 else "read their"
            what = f"where {', '.join(names)} {reads} source files; commit the files themselves"
        problems.append(
            Problem(
                f"this pull request makes {path} a symbolic link (to {target}): git and the"
                f" reviewer see the link, but a run reads what it leads to. It is {what}",
                location=Location(str(top / path)),
            )
        )
    return problems
