"""Which objects of a data store outside git may go: those no chain names any more.

A store is append-only while runs write it, so it keeps the files of every dataset
deleted or recreated since, and of every run killed between storing a file and
committing the block that names it (``verify`` reports them). ``reconcile gc`` removes
them. Git holds the chains, so which objects are still named depends on which of git's
states count; the command gathers the blocks of the states it protects (the working
tree here, the refs in ``gitloop.gitops.block_files``) and this module judges the
store's listing against the names they hold.

Being unnamed is not enough: a run of another clone stores its files before it commits
and pushes the blocks that name them, so a file written lately may be named by a commit
nobody here has yet. Only files older than a minimum age are collected (``judge``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .codec import BlockDecodeError, decode_data_block
from .multiformat import Multihash
from .store_fs import StoredObject


class UnreadableBlockError(Exception):
    """A block whose names cannot be read: it may name any object, so nothing is
    collected."""


@dataclass(frozen=True)
class Judgement:
    """A store's listing judged against the names the protected chains hold."""

    collect: list[StoredObject]
    """Unnamed and old enough: what ``gc`` deletes."""
    young: list[StoredObject]
    """Unnamed, but newer than the minimum age: kept, a run not yet pushed may name it."""
    named: int
    """How many of the store's objects some protected chain names."""
    foreign: list[StoredObject]
    """Files whose names are no hash: the reconciler never wrote them (a note someone
    left, another tool's file), so they are never its to delete."""
    elsewhere: int = 0
    """How many of the ``named`` no chain of the working tree names: only other refs
    keep them (a merged branch not deleted), which ``verify`` counts as unnamed."""


def names_in_blocks(blocks: Iterable[tuple[str, bytes]]) -> set[str]:
    """Every store path (``data/<hash>``, ``checkpoints/<hash>``) a data block among
    ``blocks`` (where each was read, its bytes) names."""
    names: set[str] = set()
    for where, data in blocks:
        try:
            block = decode_data_block(data)
        except BlockDecodeError as e:
            raise UnreadableBlockError(f"{where}: {e}") from None
        if block is None:
            continue
        step = block.step
        if step.new_data is not None:
            names.add(f"data/{step.new_data.physical_hash}")
        if step.new_checkpoint is not None:
            names.add(f"checkpoints/{step.new_checkpoint.physical_hash}")
    return names


def working_tree_blocks(odf_dir: Path) -> Iterator[tuple[str, bytes]]:
    """Every block file of every folder under ``odf_dir`` as it is on disk (blocks not
    committed yet, and the chains a crashed run left staged or set aside, included)."""
    if not odf_dir.is_dir():
        return
    for folder in sorted(odf_dir.iterdir()):
        blocks = folder / "blocks"
        if folder.is_symlink() or not blocks.is_dir():
            continue
        for path in sorted(blocks.iterdir()):
            if path.is_file() and not path.is_symlink():
                yield f"{odf_dir.name}/{folder.name}/blocks/{path.name}", path.read_bytes()


def judge(
    objects: Iterable[StoredObject],
    named: set[str],
    min_age: float,
    now: float,
    here: set[str] | None = None,
) -> Judgement:
    """Sort a store's listing: named objects stay; the others go once they are at
    least ``min_age`` seconds old (temporaries included: a killed run's half upload),
    except files whose names are no hash, which stay whatever their age. ``here``, the
    names the working tree's chains hold, counts the named objects only refs keep."""
    collect: list[StoredObject] = []
    young: list[StoredObject] = []
    foreign: list[StoredObject] = []
    kept = elsewhere = 0
    for stored in objects:
        if not stored.temporary and stored.path in named:
            kept += 1
            if here is not None and stored.path not in here:
                elsewhere += 1
        elif not stored.temporary and not _hash_named(stored.path):
            foreign.append(stored)
        elif now - stored.modified >= min_age:
            collect.append(stored)
        else:
            young.append(stored)
    return Judgement(collect, young, kept, foreign, elsewhere)


def _hash_named(path: str) -> bool:
    """Whether the file at ``path`` (``data/<name>``) is named as the reconciler names
    the objects it stores: a multihash in its canonical form."""
    name = path.rpartition("/")[2]
    try:
        return Multihash.parse(name) == name
    except ValueError:
        return False
