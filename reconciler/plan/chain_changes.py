"""What a pull request did to the chains under ``odf/``, which only the reconciler writes.

``verify --integrity`` proves that blocks, data and checkpoint files agree with each
other, not where they came from: blocks made on a laptop over fabricated data agree just
as well. Chains are therefore written on the default branch by the reconciler alone, and
a pull request's plan lists, per dataset, every file of a chain it adds, changes or
deletes, judged by the rule ``chains-changed-in-pull-request`` (an error unless the base
branch's policies lower it).

Pure: the files come from git (``gitops.changed_files``) and the new blocks from disk
(``planning.compose``); this module only counts, describes and judges them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from reconciler.odf import models
from reconciler.plan.model import Location, Severity, Verdict
from reconciler.plan.policies import ChainChangesForbidden, PolicySet, Rule

if TYPE_CHECKING:
    from reconciler.gitloop.gitops import FileStatus

POLICY_ID = "chains-changed-in-pull-request"

# The content-addressed folders of a dataset, counted rather than listed file by file:
# their names are hashes, which say nothing to a reviewer.
_COUNTED = {"blocks": "block", "data": "data file", "checkpoints": "checkpoint file"}
_VERBS: dict[FileStatus, str] = {"added": "adds", "modified": "changes", "deleted": "deletes"}
_ORDER: tuple[FileStatus, ...] = ("added", "modified", "deleted")

# In force when no rule of the base branch names ``chain_changes`` (see ``judge``); the
# same words as the shipped policies/chains.yaml.
DEFAULT_CHAIN_RULE = Rule(
    id=POLICY_ID,
    severity=Severity.ERROR,
    message=(
        "only the reconciler writes chains, on the default branch after merge: change the"
        " manifests under datasets/ instead, and restore odf/ from the base branch in this"
        " pull request"
    ),
    check=ChainChangesForbidden(),
)


@dataclass(frozen=True)
class ChainChange:
    """What a pull request did to one dataset's folder (``dataset`` None: to files of the
    chains' folder that belong to no dataset), as clauses like ``changes 1 data file``."""

    dataset: str | None
    clauses: tuple[str, ...]

    def sentence(self) -> str:
        """``this pull request appends 2 blocks (2 AddData) and deletes refs/head in the
        chain of org.x``: what a reviewer reads in the verdict."""
        *rest, last = self.clauses
        listed = f"{', '.join(rest)} and {last}" if rest else last
        where = f"the chain of {self.dataset}" if self.dataset else "no dataset's folder"
        return f"this pull request {listed} in {where}"


def chain_changes(
    files: Iterable[tuple[FileStatus, PurePosixPath]],
    new_blocks: Mapping[PurePosixPath, models.MetadataBlock],
    links: frozenset[PurePosixPath] = frozenset(),
) -> list[ChainChange]:
    """Per dataset, in name order, what ``files`` (paths relative to the chains' folder) do.

    ``new_blocks`` are the added block files that could be decoded, by path: their event
    kinds, in sequence order, tell the reviewer what the pull request claims happened
    (an undecodable one is counted as ``unreadable``). ``links`` are those of ``files``
    that are symbolic links on disk: named as links, never counted as the files of their
    folder (a ``blocks`` folder made a link read "adds blocks").
    """
    by_dataset: dict[str | None, list[tuple[FileStatus, PurePosixPath]]] = {}
    for status, path in files:
        dataset = path.parts[0] if len(path.parts) > 1 else None
        inside = PurePosixPath(*path.parts[1:]) if dataset else path
        by_dataset.setdefault(dataset, []).append((status, inside))
    return [
        ChainChange(dataset, _clauses(dataset, changes, new_blocks, links))
        for dataset, changes in sorted(by_dataset.items(), key=lambda item: item[0] or "")
    ]


def added_blocks(files: Iterable[tuple[FileStatus, PurePosixPath]]) -> list[PurePosixPath]:
    """The added files of the datasets' ``blocks/`` folders: the blocks whose event kinds
    ``chain_changes`` names, once the caller has read them."""
    return [
        path
        for status, path in files
        if status == "added" and len(path.parts) == 3 and path.parts[1] == "blocks"
    ]


def _clauses(
    dataset: str | None,
    changes: list[tuple[FileStatus, PurePosixPath]],
    new_blocks: Mapping[PurePosixPath, models.MetadataBlock],
    links: frozenset[PurePosixPath],
) -> tuple[str, ...]:
    """Counted folders first (blocks, data, checkpoints), then every other file by path,
    then the links (``_link_clause``)."""
    linked = [p for _, p in changes if _in_chains(dataset, p) in links]
    changes = [(s, p) for s, p in changes if p not in linked]
    clauses = []
    for folder, noun in _COUNTED.items():
        for status in _ORDER:
            paths = [p for s, p in changes if s == status and _folder(p) == folder]
            if not paths:
                continue
            count = f"{len(paths)} {noun}" + ("" if len(paths) == 1 else "s")
            if folder == "blocks" and status == "added":
                full = [_in_chains(dataset, p) for p in paths]
                clauses.append(f"appends {count} ({_kinds(full, new_blocks)})")
            else:
                clauses.append(f"{_VERBS[status]} {count}")
    clauses += [f"{_VERBS[s]} {p}" for s, p in sorted(changes) if _folder(p) not in _COUNTED]
    clauses += [_link_clause(link, changes) for link in sorted(linked)]
    return tuple(clauses)


def _link_clause(link: PurePosixPath, changes: list[tuple[FileStatus, PurePosixPath]]) -> str:
    """``replaces the blocks folder with a symbolic link``: git lists a folder made a link
    as the link added beside the files it deleted (counted apart), so one with changes
    beneath it replaced a folder; any other was made a link where a file was, or none."""
    if any(link in path.parents for _, path in changes):
        return f"replaces the {link} folder with a symbolic link"
    return f"makes {link} a symbolic link"


def _in_chains(dataset: str | None, path: PurePosixPath) -> PurePosixPath:
    """A path of ``dataset``'s folder as the chains' folder names it (as the caller's
    ``new_blocks`` and ``links`` do)."""
    return PurePosixPath(dataset, path) if dataset else path


def _folder(path: PurePosixPath) -> str | None:
    """The dataset subfolder a file is in (``blocks``…); None for a file at its top."""
    return path.parts[0] if len(path.parts) > 1 else None


def _kinds(
    paths: list[PurePosixPath], new_blocks: Mapping[PurePosixPath, models.MetadataBlock]
) -> str:
    """``SetDataSchema, 2 AddData``: event kinds in sequence order, repeats counted."""
    blocks = sorted(
        (new_blocks[p] for p in paths if p in new_blocks), key=lambda b: b.sequence_number
    )
    kinds = [b.event.kind for b in blocks] + ["unreadable"] * (len(paths) - len(blocks))
    runs = [(kind, len(list(group))) for kind, group in itertools.groupby(kinds)]
    return ", ".join(kind if n == 1 else f"{n} {kind}" for kind, n in runs)


def judge(policies: PolicySet, changes: Sequence[ChainChange], odf_root: Path) -> list[Verdict]:
    """One verdict per changed dataset and rule naming ``chain_changes``; without such a
    rule, ``DEFAULT_CHAIN_RULE``: a repository may lower the rule, never forget it.

    ``policies`` must be the base branch's, so that a pull request cannot lower the rule
    that judges it.
    """
    rules = [
        p
        for p in policies.policies
        if isinstance(p, Rule) and isinstance(p.check, ChainChangesForbidden)
    ] or [DEFAULT_CHAIN_RULE]
    return [
        Verdict(
            policy=rule.id,
            severity=rule.severity,
            message=f"{change.sentence()}: {rule.message}",
            dataset=change.dataset,
            location=Location(str(odf_root / change.dataset if change.dataset else odf_root)),
        )
        for rule in rules
        for change in changes
    ]
