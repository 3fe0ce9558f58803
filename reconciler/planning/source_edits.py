"""Source files changed where a ``FilesGlob`` will never read them, found with git.

A ``FilesGlob`` reads each file once, in name order, after the last one its chain
ingested, so an edit to an ingested file, or a new file whose name sorts before the
last one, is never read, and every apply after says "up to date"
(``pending.unread_changes`` words it). A deleted file the chain had read is a warning:
the chain keeps its rows, but the dataset could never be recreated. A file put back as
it was before its deletion is neither (``_without_restored``). Which files changed
depends on a point at which the chain's last file is known:

- a pull request's plan (``--base``): what it adds or modifies since it branched, against
  the later of the chain it carries (the base's when it branched: only the reconciler
  writes chains) and the chain on the base's tip, which runs may have moved past a file
  the pull request adds (two pull requests adding a day's file each, the later day
  merged and ingested first);
- otherwise, per dataset, the last commit that moved the chain's head: what the commits
  since and the working tree add or modify, against the last file the committed head had
  read. An uncommitted run's reads are not known, so files after that name are not
  judged (it may have read them before or after their edit). A chain never committed
  is not judged at all; outside git, nothing is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..config import RepoConfig, shown_path
from ..gitloop import gitops
from ..odf import models
from ..odf.chain import ChainState
from ..odf.codec import BlockDecodeError, decode_block
from ..odf.multiformat import Multihash
from ..plan.pending import TouchedFile, TouchedSources, last_file, last_file_of
from ..source_paths import glob_folder, glob_would_match

_WALK_ROUNDS = 64
"""Blocks walked back from a head to its newest ``AddData`` (a round of one ``git
cat-file`` for all datasets each); past it, a dataset is not judged: only a run of that
many metadata changes since its last ingest would get there."""


def touched_sources(
    config: RepoConfig,
    base_ref: str | None,
    globs: Mapping[str, str],
    matched: Mapping[str, list[Path]],
    actual: Mapping[str, ChainState],
) -> dict[str, TouchedSources]:
    """Per dataset with a chain, the files its ``FilesGlob`` (``globs``, as written)
    matches that were added or modified since the point the module's docstring
    describes, and those it would match that were deleted, with the chain's last file
    at that point; datasets with nothing to judge are left out."""
    chained = {  # as git names them: ``..`` in a glob's fixed part taken as written
        name: {Path(os.path.normpath(path)) for path in paths}
        for name, paths in matched.items()
        if last_file(actual.get(name)) is not None
    }
    if not chained:
        return {}
    chains = _Chains.of(config, actual)
    if base_ref is not None:
        points = chains.base_points(base_ref, list(chained))
    elif chains.odf is not None:
        points = chains.committed_points(list(chained))
    else:
        return {}  # outside git, or chains outside the checkout: no history to compare
    touched: dict[str, TouchedSources] = {}
    for ref in sorted({point.since for point in points.values()}):
        names = [name for name, point in points.items() if point.since == ref]
        # a glob's fixed folder, where files it matched may have been deleted from
        folders = sorted({glob_folder(globs[name], config.root) for name in names})
        try:
            changes = gitops.changed_files(config.root, ref, config.root, folders)
        except gitops.GitError:
            if base_ref is not None:
                raise
            continue
        statuses = sorted((config.root / path, status) for status, path in changes)
        for name in names:
            files = tuple(
                TouchedFile(shown_path(path, config.root), status)
                for path, status in statuses
                if path in chained[name]
                or (status == "deleted" and glob_would_match(globs[name], config.root, path))
            )
            files = _without_restored(config, files, points[name].last_read)
            if files:
                touched[name] = points[name]._replace(files=files)
    return touched


def _without_restored(
    config: RepoConfig, files: tuple[TouchedFile, ...], last_read: str
) -> tuple[TouchedFile, ...]:
    """``files`` but those added back as they were before a commit deleted them: the
    chain read those bytes already, and a recreate needs them there (the plan's own
    advice when it warns of a deletion). Asked of git only for added files the chain
    would not read, which are few."""
    candidates = [
        file.path
        for file in files
        if file.status == "added" and PurePosixPath(file.path).name <= last_read
    ]
    restored = gitops.restored_files(config.root, candidates) if candidates else set()
    return tuple(file for file in files if file.path not in restored)


@dataclass(frozen=True)
class _Chains:
    """The working tree's chains, and where git keeps them: ``odf`` is their folder
    relative to the top of the checkout (None outside git, or for chains outside it)."""

    root: Path
    odf: str | None
    actual: Mapping[str, ChainState]

    @classmethod
    def of(cls, config: RepoConfig, actual: Mapping[str, ChainState]) -> _Chains:
        try:
            top = gitops.top_of(config.root)
            odf: str | None = config.odf_dir.resolve().relative_to(top).as_posix()
        except (gitops.GitError, ValueError):
            odf = None
        return cls(config.root, odf, actual)

    def base_points(self, base_ref: str, names: list[str]) -> dict[str, TouchedSources]:
        """A pull request's files are judged against the later of two last files: its
        own chain's (the base's when it branched) and the chain's on the base's tip,
        which a run may have moved past a file the pull request adds since it branched."""
        on_tip = self._last_files(base_ref, self._heads_at(base_ref, names))
        points = {}
        for name in names:
            own = last_file(self.actual[name])
            assert own is not None  # touched_sources keeps only chains that read a file
            last = max(own, on_tip.get(name, own))
            points[name] = TouchedSources(
                (), last, base_ref, "by this pull request", on_tip.get(name)
            )
        return points

    def committed_points(self, names: list[str]) -> dict[str, TouchedSources]:
        """Per dataset whose head ``HEAD`` holds: the last commit that moved it, and the
        last file that head had read."""
        paths = {f"{self.odf}/{name}/refs/head": name for name in names}
        moved = gitops.last_changes(self.root, list(paths))
        heads = {paths[path]: _parsed(content) for path, (_, content) in moved.items()}
        lasts = self._last_files("HEAD", {n: h for n, h in heads.items() if h is not None})
        points = {}
        for path, (commit, _) in moved.items():
            name = paths[path]
            if name in lasts:
                by = f"since commit {commit[:7]} (the last to advance its chain)"
                points[name] = TouchedSources((), lasts[name], commit[:12], by)
        return points

    def _heads_at(self, ref: str, names: list[str]) -> dict[str, str]:
        """The heads ``ref`` gives these datasets' chains (those it has)."""
        if self.odf is None:
            return {}
        paths = {f"{self.odf}/{name}/refs/head": name for name in names}
        found = gitops.files_at(self.root, ref, list(paths))
        heads = {paths[path]: _parsed(content) for path, content in found.items()}
        return {name: head for name, head in heads.items() if head is not None}

    def _last_files(self, ref: str, heads: Mapping[str, str]) -> dict[str, str]:
        """Per dataset, the last file a ``FilesGlob`` had read as of its head in ``ref``.
        A head that is the working tree's chain's own is answered by its projection (a
        chain no run moved since: most of them); any other by the source state of the
        newest ``AddData`` at or before it, read from git (a run may have moved the
        working tree's chain on, or a base's tip may hold blocks this checkout lacks),
        one round of block reads for all datasets at a time."""
        found: dict[str, str] = {}
        pending: dict[str, str] = {}
        for name, head in heads.items():
            if head != str(self.actual[name].head):
                pending[name] = head
            elif (last := last_file(self.actual[name])) is not None:
                found[name] = last
        for _ in range(_WALK_ROUNDS):
            if self.odf is None or not pending:
                break
            paths = {name: f"{self.odf}/{name}/blocks/{head}" for name, head in pending.items()}
            blocks = gitops.files_at(self.root, ref, list(paths.values()))
            pending = {}
            for name, path in paths.items():
                try:
                    block = decode_block(blocks[path])
                except (KeyError, BlockDecodeError):
                    continue  # a block git lacks or cannot be read: not judged here
                if isinstance(block.event, models.AddData):
                    last = last_file_of(block.event.new_source_state)
                    if last is not None:
                        found[name] = last
                elif block.prev_block_hash is not None:
                    pending[name] = str(block.prev_block_hash)
        return found


def _parsed(head: bytes) -> str | None:
    try:
        return str(Multihash.parse(head.decode("ascii").strip()))
    except (ValueError, UnicodeDecodeError):
        return None  # a head that cannot be read: the chain's own problem, not judged here
