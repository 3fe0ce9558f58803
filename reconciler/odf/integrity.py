"""Integrity of a stored dataset: every block and every file it references (§3.3).

The chain is re-folded with every rule and every block hash checked; then each data
slice and checkpoint named by a block must exist with the recorded size and physical
hash. When a data file's bytes differ, its logical hash decides, as in kamu:

- a root's data cannot be produced again, so its bytes are the record: any difference
  fails (the message still says whether the records changed, which tells a damaged
  copy from a falsification);
- a derivative's data can be recomputed, and Parquet is not byte-reproducible across
  writers, so a file whose records still match the logical hash is accepted, with a
  warning, because its name (the physical hash) no longer describes its bytes.

Checkpoints are compared by size and physical hash only.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from . import base_state, chain, models
from .chain import ChainRuleError
from .content_sweep import ContentSweep
from .data_step import DataBlock
from .gc_pause import paused_gc
from .hashing import block_hash, digest_fd, physical_hash
from .models import MetadataBlock
from .multiformat import ARROW0_SHA3_256, Multihash
from .repository import (
    BlockHashMismatchError,
    BlockNotFoundError,
    Dataset,
    FolderInChainError,
    LinkInChainError,
    RepositoryError,
)
from .slices import records_digest
from .store import DataStore
from .store_verify import hashes_to_its_name, intact_objects

_CHUNK = 1 << 20


@dataclass(frozen=True)
class IntegrityProblem:
    """What is wrong, and in which block (sequence number) when one is to blame."""

    message: str
    sequence_number: int | None = None
    fatal: bool = True
    """False for a warning: a derivative's data file re-encoded with the same records."""
    changed: bool = False
    """The file is there but its bytes are not those its name or block records (size or
    hash): what a git attribute that rewrites files on checkout does, which ``verify``
    then explains."""

    def __str__(self) -> str:
        where = f"block #{self.sequence_number}: " if self.sequence_number is not None else ""
        return where + self.message


@dataclass(frozen=True)
class Inspection:
    """What an inspection found, how many blocks it checked and how many data and
    checkpoint files, and the blocks themselves (oldest first) when the caller asked to
    keep them, to go on using them (none when the chain could not be read or folded)."""

    problems: list[IntegrityProblem]
    blocks: list[tuple[Multihash, MetadataBlock]]
    files: int = 0
    block_count: int = 0
    named: AbstractSet[str] = frozenset()
    """The files the chain names (``data/<hash>``, ``checkpoints/<hash>``), after a full
    inspection of a dataset whose files live in a data store outside git: what that
    store, shared by every dataset, must keep for this one (empty otherwise)."""


@dataclass(frozen=True)
class Change:
    """What changed in one dataset's folder since a base: paths relative to the folder
    (``blocks/<hash>``, ``data/<hash>``…), and the head the base had (None: the dataset
    is new)."""

    base_head: Multihash | None
    changed: frozenset[str] = frozenset()
    """Added or modified files, untracked ones included."""
    deleted: frozenset[str] = frozenset()


def check_integrity(dataset: Dataset) -> list[IntegrityProblem]:
    """Every problem found, warnings included; an empty list means the dataset is intact."""
    return inspect_dataset(dataset).problems


def inspect_dataset(
    dataset: Dataset, keep_blocks: bool = False, no_download: bool = False
) -> Inspection:
    """Check the chain, then every file its blocks name, reading each block once.

    ``no_download``: the files of a data store outside git are checked by presence and
    size only, against the store's listing (``DataStore.sizes``; files still in a dataset
    folder, waiting to move into the store, are listed with it), so the store is not
    downloaded. The blocks are still checked in full, and the default store's files, in
    the dataset folders, still hashed (they are read where they are); a run hashes every
    object it fetches anyway, and the bytes of the others wait for a full check.

    The data blocks are judged as ``DataBlock`` tuples, never built as models
    (``Dataset.iter_judged_blocks``), which is most of a long chain's cost, unless the
    caller asks to ``keep_blocks`` as models to use them after (a replay follows: a data
    store's objects are then kept in its cache as they are checked, so the replay does not
    download them again). On a long chain a forked
    child hashes the files and parses part of the blocks meanwhile (``content_sweep``).
    The cycle collector is paused until the blocks not kept are freed (``gc_pause``).
    """
    with paused_gc():
        return _inspect(dataset, keep_blocks, no_download)


def _inspect(dataset: Dataset, keep_blocks: bool, no_download: bool) -> Inspection:
    if linked := _linked_folders(dataset):
        return Inspection(linked, [])
    by_size = no_download and not dataset.store.local
    sweep = ContentSweep.start(dataset.root, files=dataset.store.local, blocks=not keep_blocks)
    parsed: dict[str, MetadataBlock | DataBlock] = {}
    try:
        blocks: list[tuple[Multihash, MetadataBlock | DataBlock]]
        if keep_blocks:  # models wanted: read here, while the child hashes the files
            blocks = list(dataset.iter_blocks())
        else:
            parsed = sweep.blocks()
            blocks = list(dataset.iter_judged_blocks(parsed=parsed))
        blocks.reverse()
        derivative = chain.fold(blocks).kind is models.DatasetKind.DERIVATIVE
        named = _named_sizes(blocks)  # while the child still hashes files: see _check_files
        if by_size:
            verified = dataset.store.sizes()
        elif not dataset.store.local:
            verified = intact_objects(dataset.store, named[0], keep=keep_blocks)
        else:
            verified = sweep.files()
    except (ChainRuleError, RepositoryError, ValueError) as e:
        return Inspection([_chain_problem(e)], [])
    finally:
        sweep.close()
    problems, files = _check_files(dataset, blocks, derivative, verified, named, by_size)
    kept = cast(list[tuple[Multihash, MetadataBlock]], blocks) if keep_blocks else []
    count = len(blocks)
    # The chain's list goes first, so that the blocks not kept are freed with ``parsed``,
    # in the order they were parsed, which is the order they lie in memory: freed along
    # the chain instead, 100,000 of them took 0.13 s, against 0.05 s.
    del blocks
    shared = named[0].keys() if not dataset.store.local else frozenset()  # a store's only
    return Inspection(problems, kept, files, count, shared)


def inspect_change(dataset: Dataset, change: Change) -> Inspection:
    """Check only what changed since the base: the blocks appended after its head (their
    hashes, their link back to that head, and every rule against the state there), the
    files they name, and any other data, checkpoint or block file added, modified or
    deleted. A new dataset is checked in full. Old blocks are read only as far back as
    the new blocks' rules need (``base_state``); old files not at all.
    """
    if change.base_head is None:
        return inspect_dataset(dataset)
    if linked := _linked_folders(dataset):
        return Inspection(linked, [])
    try:
        new = _blocks_since(dataset, change.base_head)
        base, _ = base_state.state_at(
            change.base_head,
            base_state.needs_of(block.event for _, block in new),
            lambda hash_: dataset.get_block(hash_, verify=False),
        )
        state = base
        for hash_, block in new:
            chain.validate_append(state, block)
            state = state.apply(block, hash_)
    except (ChainRuleError, RepositoryError, ValueError) as e:
        return Inspection([_chain_problem(e)], [])
    derivative = state.kind is models.DatasetKind.DERIVATIVE
    problems, files = _check_files(dataset, new, derivative)
    seen = {f"blocks/{hash_}" for hash_, _ in new} | {
        path for _, block in new for path, _ in _named_files(block)
    }
    for path in sorted(change.changed - seen):
        found = _check_changed(dataset, path, derivative)
        if found is not None:
            files += 1
            problems += found
    for path in sorted(change.deleted):
        problems += _check_deleted(dataset, path, derivative)
    return Inspection(problems, new, files, len(new))


def _linked_folders(dataset: Dataset) -> list[IntegrityProblem]:
    """A chain whose folders are links is not read at all: they could lead anywhere."""
    return [
        IntegrityProblem(str(LinkInChainError(dataset.root, folder)))
        for folder in dataset.linked_folders()
    ]


def _chain_problem(error: Exception) -> IntegrityProblem:
    """The one problem that stops a chain from being read or folded."""
    if isinstance(error, ChainRuleError):
        return IntegrityProblem(error.message, error.sequence_number)
    if isinstance(error, BlockHashMismatchError):
        return IntegrityProblem(
            f"block {error.expected} was changed: its bytes hash to {error.actual}", changed=True
        )
    if isinstance(error, BlockNotFoundError):
        return IntegrityProblem(f"block {error.hash} is missing")
    return IntegrityProblem(str(error))


class ChainRewrittenError(RepositoryError):
    """The base head is not an ancestor of the head: the chain was rewritten, not extended."""

    def __init__(self, base_head: Multihash, head: Multihash | None) -> None:
        self.base_head, self.head = base_head, head
        super().__init__(
            f"the chain was rewritten: its head at the base, block {base_head}, "
            f"is not an ancestor of its head {head}"
        )


def _blocks_since(dataset: Dataset, base_head: Multihash) -> list[tuple[Multihash, MetadataBlock]]:
    """The blocks after ``base_head``, oldest first, each checked against its hash.

    Walks back from the head while sequence numbers stay above the base head's: a chain
    that was extended meets the base head there, and one that was rewritten cannot.
    """
    head = dataset.head()
    try:
        base_seq = dataset.get_block(base_head, verify=False).sequence_number
    except BlockNotFoundError:
        if _links_to(dataset, base_head):
            raise  # a block of the chain deleted: that is the finding
        raise ChainRewrittenError(base_head, head) from None  # put back to an older chain
    blocks: list[tuple[Multihash, MetadataBlock]] = []
    current = head
    while current != base_head:
        if current is None:
            raise ChainRewrittenError(base_head, head)
        block = dataset.get_block(current)
        if block.sequence_number <= base_seq:
            raise ChainRewrittenError(base_head, head)
        blocks.append((current, block))
        current = block.prev_block_hash
    blocks.reverse()
    return blocks


def _links_to(dataset: Dataset, target: Multihash) -> bool:
    """Whether a block of the chain names ``target`` as the one before it; a chain broken
    further back is taken to (its own missing block is then reported)."""
    try:
        return any(block.prev_block_hash == target for _, block in dataset.iter_blocks())
    except RepositoryError:
        return True


def _data_events(block: MetadataBlock) -> list[models.AddData | models.ExecuteTransform]:
    event = block.event
    return [event] if isinstance(event, models.AddData | models.ExecuteTransform) else []


def _named_files(block: MetadataBlock) -> list[tuple[str, models.DataSlice | models.Checkpoint]]:
    """The data and checkpoint files a block names, as paths in the dataset folder."""
    named: list[tuple[str, models.DataSlice | models.Checkpoint]] = []
    for event in _data_events(block):
        if event.new_data is not None:
            named.append((f"data/{event.new_data.physical_hash}", event.new_data))
        if event.new_checkpoint is not None:
            named.append(
                (f"checkpoints/{event.new_checkpoint.physical_hash}", event.new_checkpoint)
            )
    return named


NamedSizes = tuple[dict[str, int], int]
"""The files some blocks name, by path, with the sizes the blocks give them, and how many
times the blocks name a file (more than there are paths when two blocks name one)."""


def _named_sizes(blocks: Sequence[tuple[Multihash, MetadataBlock | DataBlock]]) -> NamedSizes:
    """The blocks' ``_file_sizes``, a data block's read here from its step: this runs
    in the one process that folds, over every block of the chain, and the list that
    ``named_files`` builds for each block was most of its time."""
    sizes: dict[str, int] = {}
    count = 0
    for _, block in blocks:
        if type(block) is DataBlock:
            data, checkpoint = block.step.new_data, block.step.new_checkpoint
            if data is not None:
                sizes["data/" + data.physical_hash] = data.size
                count += 1
            if checkpoint is not None:
                sizes["checkpoints/" + checkpoint.physical_hash] = checkpoint.size
                count += 1
            continue
        for path, size in _file_sizes(block):
            sizes[path] = size
            count += 1
    return sizes, count


def _check_files(
    dataset: Dataset,
    blocks: Sequence[tuple[Multihash, MetadataBlock | DataBlock]],
    derivative: bool,
    verified: dict[str, int] | None = None,
    named: NamedSizes | None = None,
    by_size: bool = False,
) -> tuple[list[IntegrityProblem], int]:
    """Every data and checkpoint file the blocks name, and how many there were. A file
    in ``verified`` with the size the block gives needs no second look; any other is
    checked here, against the block's model, which also words the problem (``by_size``:
    ``verified`` is the store's listing, so a file not in it with that size is missing
    or has another size, and nothing is read).

    With the blocks' ``named`` files, gathered while the sweep's child still hashed
    files, an intact dataset is settled by one comparison of two dicts: looking the
    files up block by block once the child was done cost a full check of 100,000
    blocks 0.18 s, with the second core idle. Anything else (a file not verified, or
    named twice) is looked at block by block, as without them."""
    verified = verified or {}
    if named is not None:
        sizes, count = named
        if len(sizes) == count and sizes.items() <= verified.items():
            return [], count
    problems: list[IntegrityProblem] = []
    files = 0
    for hash_, block in blocks:
        for path, size in _file_sizes(block):
            files += 1
            if verified.get(path) == size:
                continue
            model = block
            if isinstance(model, DataBlock):  # read again as a model: only a damaged file
                model = dataset.get_block(hash_, verify=False)
            described = dict(_named_files(model))[path]
            seq = block.sequence_number
            problem: IntegrityProblem | None
            if by_size:
                what = "data" if path.startswith("data/") else "checkpoint"
                problem = _size_problem(what, described, seq, verified.get(path))
            else:
                problem = _check_named(dataset, path, described, seq, derivative)
            if problem is not None:
                problems.append(problem)
    return problems, files


def _file_sizes(block: MetadataBlock | DataBlock) -> list[tuple[str, int]]:
    if isinstance(block, DataBlock):
        return block.step.named_files()
    return [(path, described.size) for path, described in _named_files(block)]


def _check_named(
    dataset: Dataset,
    path: str,
    described: models.DataSlice | models.Checkpoint,
    seq: int,
    derivative: bool,
) -> IntegrityProblem | None:
    """One file against the block that names it (size, physical hash, and for a data
    file whose bytes differ, its records against the logical hash)."""
    what = "data" if path.startswith("data/") else "checkpoint"
    if not dataset.store.local:
        return _check_stored(dataset.store, described, what, seq, derivative)
    full = dataset.root / path
    problem = _check_file(full, described.size, described.physical_hash, what)
    if problem is None:
        return None
    changed = full.is_file() and not full.is_symlink()
    if isinstance(described, models.DataSlice) and changed:
        same_records, explained = _check_logical(full, described)
        fatal = not (same_records and derivative)
        return IntegrityProblem(f"{problem}; {explained}", seq, fatal, changed)
    return IntegrityProblem(problem, seq, changed=changed)


def _size_problem(
    what: str,
    described: models.DataSlice | models.Checkpoint,
    seq: int,
    stored: int | None,
) -> IntegrityProblem:
    """An object of a data store that is missing (``stored`` None) or does not have the
    size its block records."""
    hash_ = described.physical_hash
    if stored is None:
        return IntegrityProblem(f"{what} file {hash_} is missing from the data store", seq)
    return IntegrityProblem(
        f"{what} file {hash_} has {stored} bytes, the block says {described.size}", seq
    )


def _check_stored(
    store: DataStore,
    described: models.DataSlice | models.Checkpoint,
    what: str,
    seq: int,
    derivative: bool,
) -> IntegrityProblem | None:
    """``_check_named`` for an object of a data store outside the dataset folder: its
    size, then its bytes streamed through the hash (never its cached copy)."""
    hash_ = described.physical_hash
    kind = "data" if what == "data" else "checkpoint"
    actual_size = store.size(hash_, kind)
    if actual_size is None:
        return _size_problem(what, described, seq, None)
    if actual_size != described.size:
        message = _size_problem(what, described, seq, actual_size).message
    elif hashes_to_its_name(store, hash_, kind):
        return None
    else:
        message = f"{what} file bytes do not match physical hash {hash_}"
    if not isinstance(described, models.DataSlice):
        return IntegrityProblem(message, seq, changed=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / hash_
        with store.open(hash_, kind) as stream, open(copy, "wb") as out:
            shutil.copyfileobj(stream, out, _CHUNK)
        same_records, explained = _check_logical(copy, described)
    return IntegrityProblem(f"{message}; {explained}", seq, not (same_records and derivative), True)


def _check_changed(dataset: Dataset, path: str, derivative: bool) -> list[IntegrityProblem] | None:
    """A block, data or checkpoint file changed in place or added with no new block naming
    it: its bytes must hash to its name. None for files that are none of these."""
    folder, _, name = path.partition("/")
    full = dataset.root / path
    if os.path.islink(full):
        return [IntegrityProblem(str(LinkInChainError(dataset.root, path)))]
    if full.is_dir():  # a git submodule checks out as a folder
        return [IntegrityProblem(str(FolderInChainError(dataset.root, path)))]
    if folder == "blocks" and "/" not in name:
        actual = block_hash(full.read_bytes())
        if actual == name:
            return []
        return [
            IntegrityProblem(f"block {name} was changed: its bytes hash to {actual}", changed=True)
        ]
    if folder not in ("data", "checkpoints") or "/" in name:
        return None
    if physical_hash(full) == name:
        return []
    return _against_naming_block(dataset, path, derivative)


def _check_deleted(dataset: Dataset, path: str, derivative: bool) -> list[IntegrityProblem]:
    """A data or checkpoint file deleted since the base is a problem if a block names it.
    A deleted block is caught where the new blocks need it (``state_at``)."""
    folder, _, name = path.partition("/")
    if folder not in ("data", "checkpoints") or "/" in name:
        return []
    return _against_naming_block(dataset, path, derivative)


def _against_naming_block(dataset: Dataset, path: str, derivative: bool) -> list[IntegrityProblem]:
    """Judge a file by the block that names it, as the full check would; a file no block
    names is no part of the dataset (a leftover), so it is not judged. Walks the chain
    back until the block is found: only a damaged or deleted file costs this."""
    for _, block in dataset.iter_blocks():
        for named, described in _named_files(block):
            if named == path:
                problem = _check_named(dataset, path, described, block.sequence_number, derivative)
                return [problem] if problem is not None else []
    return []


def _check_file(path: Path, size: int, expected: str, what: str) -> str | None:
    """Size, then physical hash; one open, one ``fstat`` and one read (a full check does
    this for every file of the chain, so the system calls count)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, IsADirectoryError):
        return f"{what} file {path.name} is missing"
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        return f"{what} file {path.name} is a symbolic link, which is never followed"
    try:
        actual_size = os.fstat(fd).st_size
        if actual_size != size:
            return f"{what} file {path.name} has {actual_size} bytes, the block says {size}"
        digest = digest_fd(fd, size)
    finally:
        os.close(fd)
    if Multihash.from_digest(digest) != expected:
        return f"{what} file bytes do not match physical hash {expected}"
    return None


def _check_logical(path: Path, data: models.DataSlice) -> tuple[bool, str]:
    """Whether the file's records match the block's logical hash, and what to say."""
    try:
        actual = Multihash.from_digest(records_digest(path), ARROW0_SHA3_256)
    except Exception as e:  # an unreadable file is a finding, not a crash of the check
        return False, f"its records cannot be read ({type(e).__name__})"
    if actual != data.logical_hash:
        return False, f"its records do not match logical hash {data.logical_hash} either"
    return True, "its records still match the logical hash"
