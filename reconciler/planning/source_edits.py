"""Source files changed where a ``FilesGlob`` will never read them, found with git.

A ``FilesGlob`` reads each file once, in name order, after the last one its chain
ingested, so an edit to an ingested file, or a new file whose name sorts before the
last one, is never read, and every apply after says "up to date"
(``pending.unread_changes`` words it). Which files changed depends on a point at which
the chain's last file is known:

- a pull request's plan (``--base``): what it adds or modifies since it branched, against
  the chain it carries, which is the base's (only the reconciler writes chains);
- otherwise, per dataset, the last commit that moved the chain's head: what the commits
  since and the working tree add or modify, against the last file the committed head had
  read. An uncommitted run's reads are not known, so files after that name are not
  judged (it may have read them before or after their edit). A chain never committed
  is not judged at all; outside git, nothing is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..config import RepoConfig, shown_path
from ..gitloop import gitops
from ..odf import models
from ..odf.chain import ChainState
from ..odf.multiformat import Multihash
from ..odf.repository import OdfRepository, RepositoryError
from ..plan.pending import TouchedFile, TouchedSources, last_file, last_file_of

_WALK_LIMIT = 10_000
"""Blocks walked back from a committed head to its newest ``AddData``; past it (a chain
of metadata only), the dataset is not judged."""


def touched_sources(
    config: RepoConfig,
    base_ref: str | None,
    matched: Mapping[str, list[Path]],
    actual: Mapping[str, ChainState],
) -> dict[str, TouchedSources]:
    """Per dataset with a chain, the files its ``FilesGlob`` matches that were added or
    modified since the point the module's docstring describes, with the chain's last
    file at that point; datasets with nothing to judge are left out."""
    chained = {name: paths for name, paths in matched.items() if paths and name in actual}
    if not chained:
        return {}
    if base_ref is not None:
        points = {
            name: (base_ref, last, "by this pull request")
            for name in chained
            if (last := last_file(actual[name])) is not None
        }
    else:
        points = _committed_points(config, list(chained))
    touched: dict[str, TouchedSources] = {}
    for ref in sorted({ref for ref, _, _ in points.values()}):
        names = [name for name, point in points.items() if point[0] == ref]
        folders = sorted({path.parent for name in names for path in chained[name]})
        try:
            changes = gitops.changed_files(config.root, ref, config.root, folders)
        except gitops.GitError:
            if base_ref is not None:
                raise
            continue
        statuses = {config.root / path: status for status, path in changes if status != "deleted"}
        for name in names:
            _, last, by = points[name]
            files = tuple(
                TouchedFile(shown_path(path, config.root), statuses[path], by)
                for path in chained[name]
                if path in statuses
            )
            if files:
                touched[name] = TouchedSources(files, last)
    return touched


def _committed_points(config: RepoConfig, names: list[str]) -> dict[str, tuple[str, str, str]]:
    """Per dataset whose head ``HEAD`` holds: the last commit that moved it, the last file
    that head had read, and how a problem says it."""
    try:
        top = gitops.top_of(config.root)
        odf = config.odf_dir.resolve().relative_to(top).as_posix()
    except (gitops.GitError, ValueError):
        return {}  # outside git, or chains outside the checkout: no history to compare
    paths = {f"{odf}/{name}/refs/head": name for name in names}
    repo = OdfRepository(config.odf_dir)
    points: dict[str, tuple[str, str, str]] = {}
    for path, (commit, content) in gitops.last_changes(top, list(paths)).items():
        name = paths[path]
        last = _last_file_at(repo, name, content)
        if last is not None:
            by = f"since commit {commit[:7]} (the last to advance its chain)"
            points[name] = (commit, last, by)
    return points


def _last_file_at(repo: OdfRepository, name: str, head: bytes) -> str | None:
    """The last file a ``FilesGlob`` had read as of ``head`` (a committed head, whose
    blocks the working tree still holds unless the chain was recreated since): the
    source state of the newest ``AddData`` at or before it."""
    try:
        current: Multihash | None = Multihash.parse(head.decode("ascii").strip())
        dataset = repo.dataset(name)
        for _ in range(_WALK_LIMIT):
            if current is None:
                return None
            block = dataset.get_block(str(current), verify=False)
            if isinstance(block.event, models.AddData):
                return last_file_of(block.event.new_source_state)
            current = block.prev_block_hash
    except (RepositoryError, ValueError, UnicodeDecodeError):
        pass  # a head or block that cannot be read: the chain's own problem, not judged here
    return None
