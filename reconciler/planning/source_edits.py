"""Source files changed where a ``FilesGlob`` will never read them, found with git.

A ``FilesGlob`` reads each file once, in name order, after the last one its chain
ingested, so an edit to an ingested file, or a new file whose name sorts before the
last one, is never read, and every apply after says "up to date"
(``pending.unread_changes`` words it). Which files changed depends on a point at which
the chain's last file is known:

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

from collections.abc import Mapping
from pathlib import Path

from ..config import RepoConfig, shown_path
from ..gitloop import gitops
from ..odf import models
from ..odf.chain import ChainState
from ..odf.codec import BlockDecodeError, decode_block
from ..odf.multiformat import Multihash
from ..plan.pending import TouchedFile, TouchedSources, last_file, last_file_of

_WALK_ROUNDS = 64
"""Blocks walked back from a head to its newest ``AddData`` (a round of one ``git
cat-file`` for all datasets each); past it, a dataset is not judged: only a run of that
many metadata changes since its last ingest would get there."""


def touched_sources(
    config: RepoConfig,
    base_ref: str | None,
    matched: Mapping[str, list[Path]],
    actual: Mapping[str, ChainState],
) -> dict[str, TouchedSources]:
    """Per dataset with a chain, the files its ``FilesGlob`` matches that were added or
    modified since the point the module's docstring describes, with the chain's last
    file at that point; datasets with nothing to judge are left out."""
    chained = {
        name: paths
        for name, paths in matched.items()
        if paths and last_file(actual.get(name)) is not None
    }
    if not chained:
        return {}
    if base_ref is not None:
        points = _base_points(config, base_ref, chained, actual)
    else:
        points = _committed_points(config, list(chained), actual)
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
                touched[name] = TouchedSources(files, last, ref if base_ref else ref[:12])
    return touched


Point = tuple[str, str, str]
"""The commit (or ref) changes are counted from, the last file the chain had read by
then, and how a problem says what changed the files."""


def _base_points(
    config: RepoConfig,
    base_ref: str,
    chained: Mapping[str, list[Path]],
    actual: Mapping[str, ChainState],
) -> dict[str, Point]:
    """A pull request's files are judged against the later of two last files: its own
    chain's (the base's when it branched) and the chain's on the base's tip, which a run
    may have moved past a file the pull request adds since it branched."""
    on_tip = _last_files(config, base_ref, _heads_at(config, base_ref, list(chained)), actual)
    points: dict[str, Point] = {}
    for name in chained:
        own = last_file(actual[name])
        assert own is not None  # chained holds only chains that have ingested a file
        points[name] = (base_ref, max(own, on_tip.get(name, own)), "by this pull request")
    return points


def _committed_points(
    config: RepoConfig, names: list[str], actual: Mapping[str, ChainState]
) -> dict[str, Point]:
    """Per dataset whose head ``HEAD`` holds: the last commit that moved it, and the last
    file that head had read."""
    odf = _odf_folder(config)
    if odf is None:
        return {}
    paths = {f"{odf}/{name}/refs/head": name for name in names}
    moved = gitops.last_changes(config.root, list(paths))
    heads = {paths[path]: _parsed(content) for path, (_, content) in moved.items()}
    lasts = _last_files(config, "HEAD", {n: h for n, h in heads.items() if h is not None}, actual)
    by = "since commit {} (the last to advance its chain)"
    return {
        paths[path]: (commit, lasts[paths[path]], by.format(commit[:7]))
        for path, (commit, _) in moved.items()
        if paths[path] in lasts
    }


def _odf_folder(config: RepoConfig) -> str | None:
    """The chains' folder relative to the top of the checkout; None outside git, or for
    chains outside the checkout: no history to compare."""
    try:
        return config.odf_dir.resolve().relative_to(gitops.top_of(config.root)).as_posix()
    except (gitops.GitError, ValueError):
        return None


def _heads_at(config: RepoConfig, ref: str, names: list[str]) -> dict[str, str]:
    """The heads ``ref`` gives these datasets' chains (those it has)."""
    odf = _odf_folder(config)
    if odf is None:
        return {}
    paths = {f"{odf}/{name}/refs/head": name for name in names}
    found = gitops.files_at(config.root, ref, list(paths))
    heads = {paths[path]: _parsed(content) for path, content in found.items()}
    return {name: head for name, head in heads.items() if head is not None}


def _parsed(head: bytes) -> str | None:
    try:
        return str(Multihash.parse(head.decode("ascii").strip()))
    except (ValueError, UnicodeDecodeError):
        return None  # a head that cannot be read: the chain's own problem, not judged here


def _last_files(
    config: RepoConfig, ref: str, heads: Mapping[str, str], actual: Mapping[str, ChainState]
) -> dict[str, str]:
    """``_last_files_at``, but a head that is the working tree's chain's own is answered
    by its projection: a chain no run moved since (most of them) costs no block read."""
    same = {name for name, head in heads.items() if head == str(actual[name].head)}
    found = {name: last for name in same if (last := last_file(actual[name])) is not None}
    others = {name: head for name, head in heads.items() if name not in same}
    return found | _last_files_at(config, ref, others)


def _last_files_at(config: RepoConfig, ref: str, heads: Mapping[str, str]) -> dict[str, str]:
    """Per dataset, the last file a ``FilesGlob`` had read as of its head in ``ref``: the
    source state of the newest ``AddData`` at or before it, read from git (a run may
    have moved the working tree's chain on, or a base's tip may hold blocks this
    checkout lacks), one round of block reads for all datasets at a time."""
    odf = _odf_folder(config)
    pending = dict(heads)
    found: dict[str, str] = {}
    for _ in range(_WALK_ROUNDS):
        if odf is None or not pending:
            break
        paths = {name: f"{odf}/{name}/blocks/{head}" for name, head in pending.items()}
        blocks = gitops.files_at(config.root, ref, list(paths.values()))
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
