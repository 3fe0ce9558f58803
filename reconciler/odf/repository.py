"""ODF datasets on a local file system, in the standard layout.

One folder per dataset: ``blocks/<hash>``, ``refs/head`` (the head hash, no newline),
``data/<physical hash>``, ``checkpoints/<physical hash>`` and ``info/`` (data and
checkpoints may live in a data store instead, ``store.py``). Every file is written to a
``.pending-*`` temporary, fsynced and renamed, so a crash never leaves a half-written
object; blocks and data are content-addressed and written before the head
moves; and the head moves by compare-and-swap under a lock (``flock`` on the ``refs``
folder itself, so no lock file is left for git to pick up), so two writers can never
lose each other's blocks. This module is the only place chains touch the disk.

A crash can still leave ``.pending-*`` temporaries and files no block reaches from the
head (a block or data file written before its head moved). A writing run removes them
first (``OdfRepository.remove_leftovers``), under the repository lock (``lock.py``), so
that no other run is writing at the time; and a failed pull or transform takes back only
what its own process wrote (``Dataset.recording``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from . import chain
from .codec import (
    DEFAULT_VERSION,
    BlockDecodeError,
    decode_block,
    decode_data_block,
    encode_block,
    peek_block,
)
from .data_step import DataBlock
from .hashing import block_hash, names_digest, physical_hash, read_whole
from .lock import LockHolder, repository_lock
from .models import AddData, AnyEvent, ExecuteTransform, MetadataBlock, Seed
from .multiformat import DatasetId, Multihash
from .names import name_problem
from .store import (
    CONCURRENT_READS,
    DataStore,
    LocalStore,
    MissingObjectError,
    folder_of,
    fsync_dir,
)
from .store_move import FolderUntilMoved
from .timestamps import Timestamp

if TYPE_CHECKING:  # typing only
    import pyarrow.parquet as pq

_STAGED = ".recreate-"  # prefix of the folder where a chain's replacement is built
_SET_ASIDE = ".replaced-"  # prefix of a replaced chain's folder, until it is deleted


class RepositoryError(Exception):
    """Base of storage errors."""


class BlockNotFoundError(RepositoryError):
    def __init__(self, dataset: Path, hash_: str) -> None:
        self.dataset, self.hash = dataset, hash_
        super().__init__(f"{dataset}: block {hash_} not found")


class BlockHashMismatchError(RepositoryError):
    """A stored block's bytes do not hash to its name: the file was altered."""

    def __init__(self, dataset: Path, expected: str, actual: str) -> None:
        self.dataset, self.expected, self.actual = dataset, expected, actual
        super().__init__(f"{dataset}: block {expected} hashes to {actual}")


class DatasetPathError(RepositoryError):
    """A dataset name that cannot be a folder of the repository: outside the grammar, or
    a symbolic link, wherever it leads. Manifests are validated long before a path
    is built; this is the last line, so that no bypassed check can write elsewhere."""

    def __init__(self, root: Path, name: str, reason: str) -> None:
        self.root, self.name, self.reason = root, name, reason
        super().__init__(f"{root}: {reason}")


CHAIN_FOLDERS = ("blocks", "refs", "data", "checkpoints", "info")
"""The folders of a dataset's folder, in the standard ODF layout."""


class LinkInChainError(RepositoryError, ValueError):
    """A file or folder of a chain is a symbolic link. The reconciler writes none, and
    one that arrives in a pull request could lead to any file of the runner (whose text
    an error would then show), so a link there is reported, never followed."""

    def __init__(self, dataset: Path, path: str) -> None:
        self.dataset, self.path = dataset, path
        super().__init__(
            f"{dataset.name}/{path} is a symbolic link: a chain holds only files the "
            "reconciler writes, and a link there is never followed"
        )


class FolderInChainError(RepositoryError, ValueError):
    """A chain file's path is a folder: a git submodule (gitlink) a pull request put
    there checks out as one. Reported by name, as a link is."""

    def __init__(self, dataset: Path, path: str) -> None:
        self.dataset, self.path = dataset, path
        super().__init__(
            f"{dataset.name}/{path} is a folder where the chain has a file (a git"
            " submodule, when git lists it with mode 160000)"
        )


class HeadUnreadableError(RepositoryError, ValueError):
    """``refs/head`` holds no block hash (a merge conflict, a hand edit)."""


class HeadMovedError(RepositoryError):
    """Compare-and-swap of ``refs/head`` failed: another writer moved it first."""

    def __init__(self, dataset: Path, expected: str | None, actual: str | None) -> None:
        self.dataset, self.expected, self.actual = dataset, expected, actual
        super().__init__(f"{dataset}: head is {actual}, expected {expected}")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` holds either nothing or all of it, durably."""
    tmp = path.parent / f".pending-{secrets.token_hex(8)}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` (none when it is missing), their types as the listing
    gives them: no second look at each file."""
    try:
        with os.scandir(folder) as listing:
            return list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return []


@dataclass(frozen=True)
class DatasetLayout:
    """Paths of one dataset folder."""

    root: Path
    store: DataStore | None = field(default=None, compare=False)
    """Where data and checkpoint files are read from when not in the dataset folder
    (``store.py``): ``data_file`` and ``checkpoint_file`` then fetch the object into the
    store's local cache and return that path."""

    @property
    def blocks(self) -> Path:
        return self.root / "blocks"

    @property
    def refs(self) -> Path:
        return self.root / "refs"

    @property
    def head_ref(self) -> Path:
        return self.refs / "head"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def info(self) -> Path:
        return self.root / "info"

    def block(self, hash_: str) -> Path:
        return self.blocks / hash_

    def data_file(self, hash_: str) -> Path:
        """Where the data file is (in a remote store's cache once fetched), whether or
        not it exists; ``data_to_read`` for a file about to be read."""
        if self.store is not None:
            return self.store.fetch(hash_, "data")
        return self.data / hash_

    def checkpoint_file(self, hash_: str) -> Path:
        """Where the checkpoint file is, as ``data_file``."""
        if self.store is not None:
            return self.store.fetch(hash_, "checkpoint")
        return self.checkpoints / hash_

    def data_to_read(self, hash_: str) -> Path:
        """The data file, fetched from a remote store on first use, for a reader;
        ``MissingObjectError`` when the store has no such object."""
        return self._present(self.data_file(hash_), hash_, "data")

    def data_files_to_read(self, hashes: Sequence[str]) -> list[Path]:
        """``data_to_read`` of each, in order; from a remote store, a few at a time
        (``CONCURRENT_READS``), so that a reader of a long history (``sql``, a replay, a
        rebuilt checkpoint) does not wait on one round trip after another."""
        if self.store is None or len(hashes) < 2:
            return [self.data_to_read(hash_) for hash_ in hashes]
        with ThreadPoolExecutor(max_workers=CONCURRENT_READS) as pool:
            return list(pool.map(self.data_to_read, hashes))

    def checkpoint_to_read(self, hash_: str) -> Path:
        """The checkpoint file for a reader, as ``data_to_read``."""
        return self._present(self.checkpoint_file(hash_), hash_, "checkpoint")

    def _present(self, path: Path, hash_: str, kind: str) -> Path:
        if not path.is_file():
            raise MissingObjectError(
                f"{folder_of(kind)}/{hash_}, named by the chain of {self.root.name}, is not"
                f" in the data store {self._objects.shown} (`reconcile verify --integrity`"
                " lists every missing file)"
            )
        return path

    def checkpoint_footer(self, hash_: str) -> pq.FileMetaData | None:
        """A checkpoint's Parquet footer (None when it is missing), without fetching
        the rest of it from a remote store (``DataStore.footer``)."""
        return self._objects.footer(hash_, "checkpoint")

    def checkpoint_size(self, hash_: str) -> int | None:
        """A checkpoint's size in bytes (None when it is missing), without fetching it."""
        return self._objects.size(hash_, "checkpoint")

    @property
    def _objects(self) -> DataStore:
        """The store the data and checkpoint files are in: the dataset folder's own
        (``LocalStore``) unless another was given."""
        return self.store if self.store is not None else LocalStore(self.root)

    @property
    def stores(self) -> tuple[Path, Path, Path]:
        """The content-addressed folders, whose files only the chain gives a reason to exist."""
        return self.blocks, self.data, self.checkpoints


@dataclass
class Journal:
    """What one process wrote to a dataset while recording: the files it created (not
    those it found already there) and the last head it moved the chain to."""

    created: list[Path] = field(default_factory=list)
    head: Multihash | None = None


class Dataset:
    """One dataset's chain and files. Reads are lock-free; head moves are serialised."""

    def __init__(
        self,
        root: Path,
        manifest_version: int = DEFAULT_VERSION,
        store: DataStore | None = None,
    ) -> None:
        # A store beside git reads what the folder still holds until apply moves it there.
        self.store: DataStore = (
            LocalStore(Path(root)) if store is None else FolderUntilMoved(store, Path(root))
        )
        self.layout = DatasetLayout(Path(root), None if self.store.local else self.store)
        self.manifest_version = manifest_version
        self._state_cache: chain.ChainState | None = None
        self._journal: Journal | None = None

    @property
    def root(self) -> Path:
        return self.layout.root

    def exists(self) -> bool:
        return self.layout.head_ref.exists()

    def head(self) -> Multihash | None:
        """The head block's hash; None without one. Read without following a link
        (``LinkInChainError``); what is not a hash is shown as its first 40 characters.

        A chain whose folder (``blocks``, ``data``…) is a link has no head either: a plan
        or a run would read its blocks through the link and append there, outside the
        chain git holds (a merged pull request made ``blocks`` a link to a copy)."""
        if linked := self.linked_folders():
            raise LinkInChainError(self.root, linked[0])
        try:
            data = self._read_own("refs/head")
        except FileNotFoundError:
            return None
        text = data.decode("ascii", errors="replace").strip()
        try:
            return Multihash.parse(text)
        except ValueError:
            shown = text.splitlines()[0][:40] if text else ""
            raise HeadUnreadableError(
                f"{self.root.name}/refs/head holds no block hash: it reads {shown!r}"
            ) from None

    def linked_folders(self) -> list[str]:
        """Those of the chain's folders (``CHAIN_FOLDERS``) that are symbolic links: the
        reconciler makes none, and one could lead anywhere."""
        return [name for name in CHAIN_FOLDERS if os.path.islink(self.root / name)]

    def read_block_bytes(self, hash_: str) -> bytes:
        try:
            return self._read_own(f"blocks/{hash_}")
        except FileNotFoundError:
            raise BlockNotFoundError(self.root, hash_) from None

    def _read_own(self, relative: str) -> bytes:
        """A file of the chain's folder, never through a link (``LinkInChainError``)."""
        try:
            return read_whole(f"{self.layout.root}/{relative}")
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise LinkInChainError(self.root, relative) from None
            if e.errno == errno.EISDIR:
                raise FolderInChainError(self.root, relative) from None
            raise

    def get_block(self, hash_: str, verify: bool = True) -> MetadataBlock:
        """Read a block; with ``verify`` its bytes must hash to its name."""
        data = self._verified_bytes(hash_) if verify else self.read_block_bytes(hash_)
        return _named(hash_, decode_block, data)

    def _verified_bytes(self, hash_: str) -> bytes:
        """A block's bytes, which must hash to its name."""
        data = self.read_block_bytes(hash_)
        if not names_digest(hash_, hashlib.sha3_256(data).digest()):
            raise BlockHashMismatchError(self.root, hash_, block_hash(data))
        return data

    def iter_judged_blocks(
        self,
        head: Multihash | None = None,
        parsed: Mapping[str, MetadataBlock | DataBlock] | None = None,
    ) -> Iterator[tuple[Multihash, MetadataBlock | DataBlock]]:
        """``iter_blocks``, each block checked against its hash, with data blocks given
        as ``DataBlock`` tuples rather than models: all that a fold which only judges the
        chain needs (``chain.fold`` takes both), at a third of the cost. A block found
        in ``parsed`` (blocks already checked against their names and parsed, by
        ``content_sweep``) is not read again."""
        current = head if head is not None else self.head()
        found = parsed or {}
        while current is not None:
            block: MetadataBlock | DataBlock | None = found.get(current)
            if block is None:
                data = self._verified_bytes(current)
                block = _named(current, _judged, data)
            yield current, block
            current = block.prev_block_hash

    def iter_blocks(
        self, head: Multihash | None = None
    ) -> Iterator[tuple[Multihash, MetadataBlock]]:
        """Blocks from ``head`` (default: the current head) back to the Seed."""
        current = head if head is not None else self.head()
        while current is not None:
            block = self.get_block(current)
            yield current, block
            current = block.prev_block_hash

    def state(self) -> chain.ChainState:
        """The validated state of the chain at its current head (cached per head)."""
        head = self.head()
        if self._state_cache is not None and self._state_cache.head == head:
            return self._state_cache
        blocks = list(self.iter_judged_blocks(head))
        blocks.reverse()
        self._state_cache = chain.fold(blocks)
        return self._state_cache

    def projection(self) -> chain.ChainState:
        """The chain's current definition and data cursor, without checking its rules.

        Every block's bytes are still checked against its hash, but only the blocks that
        shape the projection are decoded: every metadata event, the newest data block,
        and older data blocks until one that added data (for the last offset). The plan
        reads chains this way; ``state()`` and verification apply every rule.
        """
        wanted: list[tuple[Multihash, MetadataBlock]] = []
        have_newest_data = have_offset = False
        current = self.head()
        while current is not None:
            data = self.read_block_bytes(current)
            actual = block_hash(data)
            if actual != current:
                raise BlockHashMismatchError(self.root, current, actual)
            kind, prev = peek_block(data)
            is_data = kind in ("AddData", "ExecuteTransform")
            if not is_data or not have_newest_data or not have_offset:
                block = _named(current, decode_block, data)
                wanted.append((current, block))
                if is_data:
                    have_newest_data = True
                    have_offset = have_offset or getattr(block.event, "new_data", None) is not None
            current = prev
        state = chain.ChainState()
        for hash_, block in reversed(wanted):
            state = state.apply(block, hash_)
        return state

    def append(self, block: MetadataBlock, expected_head: Multihash | None) -> Multihash:
        """Validate ``block`` against the chain at ``expected_head``, store it, move the head.

        Raises a ``chain.ChainRuleError`` when a rule is broken (nothing is written), or
        ``HeadMovedError`` when another writer moved the head first (the block file may
        stay behind, unreferenced, until a rollback or the next run's leftover sweep).
        """
        state = self.state()
        if state.head != expected_head:
            raise HeadMovedError(self.root, expected_head, state.head)
        chain.validate_append(state, block)
        data = encode_block(block, self.manifest_version)
        hash_ = block_hash(data)
        for folder in (self.layout.blocks, self.layout.refs):
            folder.mkdir(parents=True, exist_ok=True)
        path = self.layout.block(hash_)
        if not path.exists():
            write_atomic(path, data)
            self._created(path)
        with self._head_lock():
            actual = self.head()
            if actual != expected_head:
                raise HeadMovedError(self.root, expected_head, actual)
            write_atomic(self.layout.head_ref, hash_.encode("ascii"))
            if self._journal is not None:
                self._journal.head = hash_
        self._state_cache = state.apply(block, hash_)
        return hash_

    def append_event(
        self, event: AnyEvent, system_time: Timestamp, expected_head: Multihash | None = None
    ) -> Multihash:
        """Append one event after ``expected_head`` (default: the current head)."""
        state = self.state() if expected_head is None else None
        head = state.head if state is not None else expected_head
        seq = (state.sequence_number if state is not None else self._sequence_of(head)) + 1
        block = MetadataBlock(
            system_time=system_time, prev_block_hash=head, sequence_number=seq, event=event
        )
        return self.append(block, head)

    def create(self, seed: Seed, system_time: Timestamp) -> Multihash:
        """Start the chain with its Seed, by compare-and-swap from no head at all: a
        dataset that another run created meanwhile raises ``HeadMovedError`` rather than
        getting a second Seed."""
        block = MetadataBlock(
            system_time=system_time, prev_block_hash=None, sequence_number=0, event=seed
        )
        return self.append(block, None)

    def reset_head(self, target: Multihash | None, expected_head: Multihash | None) -> None:
        """Move the head back to ``target``, an earlier block of this chain (None: before
        the Seed), undoing a failed run's appends; by compare-and-swap, so a concurrent
        writer's blocks are never dropped. The undone blocks stay as unreferenced files."""
        with self._head_lock():
            actual = self.head()
            if actual != expected_head:
                raise HeadMovedError(self.root, expected_head, actual)
            if target is None:
                self.layout.head_ref.unlink()
                fsync_dir(self.layout.refs)
            else:
                write_atomic(self.layout.head_ref, target.encode("ascii"))
            if self._journal is not None:  # an enclosing scope rolls back from here on
                self._journal.head = target
        self._state_cache = None

    def _sequence_of(self, hash_: Multihash | None) -> int:
        return -1 if hash_ is None else self.get_block(hash_).sequence_number

    @contextlib.contextmanager
    def _head_lock(self) -> Iterator[None]:
        """Serialise head moves with ``flock`` on the ``refs`` folder: a lock file there
        would be one more file for git to pick up, and the kernel drops the lock with
        the process however it dies."""
        fd = os.open(self.layout.refs, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def recording(self) -> Iterator[Journal]:
        """Record, for the body, every file this object creates and every head it moves
        to, so that a failed run can take back exactly its own writes and nothing a
        concurrent writer added."""
        outer, self._journal = self._journal, Journal()
        try:
            yield self._journal
        finally:
            inner, self._journal = self._journal, outer
            if outer is not None:
                outer.created += inner.created
                outer.head = inner.head or outer.head

    def _created(self, path: Path) -> None:
        if self._journal is not None:
            self._journal.created.append(path)

    def referenced_files(self, head: Multihash | None = None) -> set[Path]:
        """The blocks from ``head`` (default: the current head) back to the Seed, and the
        data and checkpoint files they name: everything the chain needs."""
        files: set[Path] = set()
        for hash_, block in self.iter_blocks(head):
            files.add(self.layout.block(hash_))
            event = block.event
            if isinstance(event, AddData | ExecuteTransform):
                # The paths in the dataset folder: never a fetch from a store.
                if event.new_data is not None:
                    files.add(self.layout.data / event.new_data.physical_hash)
                if event.new_checkpoint is not None:
                    files.add(self.layout.checkpoints / event.new_checkpoint.physical_hash)
        return files

    def remove_leftovers(self) -> list[Path]:
        """Remove what a crashed run left: ``.pending-*`` temporaries, the ``refs/.lock``
        files of earlier versions, and every block, data or checkpoint file that the head
        does not reach (so a Seed written before its head moved cannot later stand next
        to a second one), and any folder inside ``blocks/``, ``data/`` or
        ``checkpoints/``, where no run writes one (a merge can carry one in). A folder
        left with no head and nothing in it goes too.

        Only safe while no other run writes: call it under the repository lock. A chain
        that cannot be read is left exactly as it is, for ``verify`` to report.
        """
        try:
            keep = self.referenced_files()
        except (RepositoryError, chain.ChainRuleError, ValueError):
            return []
        folders = [self.root, *self.layout.stores, self.layout.refs, self.layout.info]
        stores = set(self.layout.stores)
        removed = []
        for folder in folders:
            for entry in _entries(folder):
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False) and folder in stores:
                    shutil.rmtree(path)
                    removed.append(path)
                elif entry.is_file() and (
                    entry.name.startswith(".pending-")
                    or path == self.layout.refs / ".lock"
                    or (folder in stores and path not in keep)
                ):
                    path.unlink()
                    removed.append(path)
        if not self.exists():
            for folder in reversed(folders):
                with contextlib.suppress(OSError):  # not empty: someone else's files
                    folder.rmdir()
        return removed

    def add_file(
        self, source: Path, kind: str = "data", known: Multihash | None = None
    ) -> tuple[Multihash, int]:
        """Move a finished file into ``data/`` or ``checkpoints/`` under its physical hash,
        or into the data store: either way before any block names it, so a head never
        points at a missing object.

        ``known`` is the hash the file's writer computed from the bytes as it wrote them
        (the slice writer's tasks do): the file is then not read again, and it is stored
        under exactly the hash its block names."""
        hash_ = known if known is not None else physical_hash(source)
        if not self.store.local:
            size = source.stat().st_size
            self.store.put(source, hash_, kind)
            return hash_, size
        folder = self.layout.data if kind == "data" else self.layout.checkpoints
        folder.mkdir(parents=True, exist_ok=True)
        size = source.stat().st_size
        target = folder / hash_
        if target.exists():
            source.unlink()
        else:
            self._created(target)
            # Through a ``.pending-*`` name, so that a copy across file systems is never
            # seen (or left behind by a crash) half-written under the content hash.
            tmp = folder / f".pending-{secrets.token_hex(8)}"
            try:
                shutil.move(source, tmp)
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
            fsync_dir(folder)
        return hash_, size

    def discard(self) -> None:
        """Remove the whole folder of a dataset that has no chain (no head): what is left
        of a creation that was taken back (its alias, empty folders), so that the dataset
        is exactly as absent as before. A dataset with a head is never discarded."""
        if self.exists():
            raise RepositoryError(f"{self.root} has a chain: only a headless folder is discarded")
        shutil.rmtree(self.root, ignore_errors=True)

    def write_alias(self, name: str) -> None:
        """Record the dataset's name in ``info/alias`` as kamu does."""
        self.layout.info.mkdir(parents=True, exist_ok=True)
        write_atomic(self.layout.info / "alias", name.encode("utf-8"))

    def settle_alias(self) -> None:
        """Write the folder's name into an ``info/alias`` that names another dataset: what
        a crash between a rename's two steps (``OdfRepository.rename``) leaves. A chain
        without an alias file is left so: kamu does not need one."""
        path = self.layout.info / "alias"
        name = self.root.name
        if path.is_file() and path.read_bytes() != name.encode("utf-8") and self.exists():
            self.write_alias(name)


class OdfRepository:
    """A folder of datasets, one subfolder per dataset name."""

    def __init__(
        self,
        root: Path,
        manifest_version: int = DEFAULT_VERSION,
        store: DataStore | None = None,
    ) -> None:
        self.root = Path(root)
        self.manifest_version = manifest_version
        self.store = store
        """The data store of every dataset (``store.py``); None: each dataset's folder."""

    def dataset(self, name: str) -> Dataset:
        """The dataset folder of ``name``; ``DatasetPathError`` if that is not a folder
        directly inside the root (every path of a dataset is built from this one)."""
        return Dataset(self.folder(name), self.manifest_version, self.store)

    def lock(
        self, command: str, timeout: float = 0
    ) -> contextlib.AbstractContextManager[LockHolder | None]:
        """The repository lock (``lock.py``), held by a writing run from plan to last
        commit; ``RepositoryLockedError`` names the holder when it stays taken. The body
        gets the record of a run that was killed holding it, if one was."""
        return repository_lock(self.root, command, timeout)

    def remove_leftovers(self) -> list[Path]:
        """Every crashed run's leftovers in every dataset folder (``Dataset.remove_leftovers``),
        and an alias a crashed rename left (``Dataset.settle_alias``); call it holding
        ``lock``. Links and folders that are no dataset's are not entered."""
        if self.store is not None:
            # before anything is written: bad credentials stop the run (the commands
            # checked the write already, before their plan)
            self.store.check(write=False)
        if not self.root.is_dir():
            return []
        removed: list[Path] = self.finish_replacements()
        for entry in sorted(self.root.iterdir()):
            if entry.is_dir() and not entry.is_symlink() and name_problem(entry.name) is None:
                dataset = self.dataset(entry.name)
                removed += dataset.remove_leftovers()
                dataset.settle_alias()
        return removed

    def staging(self, name: str) -> Dataset:
        """An empty folder beside ``name``'s where a new chain for it is built, to take its
        place with ``replace``; one left by an earlier attempt is removed first."""
        self.folder(name)  # the name's checks, before any path is built from it
        path = self.root / f"{_STAGED}{name}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return Dataset(path, self.manifest_version, self.store)

    def replace(self, name: str, staged: Dataset) -> None:
        """Put the chain built in ``staged`` (``staging``) in place of ``name``'s folder.

        Two renames: the old folder aside (``.replaced-<name>``), the new one in; then the
        old one is deleted (git keeps its history). A crash between them leaves no folder
        under the name, which ``finish_replacements`` settles by putting the old one back,
        so a crash leaves either the old chain or the whole new one.
        """
        target = self.folder(name)  # never a link
        aside = self.root / f"{_SET_ASIDE}{name}"
        shutil.rmtree(aside, ignore_errors=True)
        if target.exists():
            os.rename(target, aside)
        os.rename(staged.root, target)
        fsync_dir(self.root)
        shutil.rmtree(aside, ignore_errors=True)

    def rename(self, old: str, new: str) -> None:
        """Move ``old``'s chain to the name ``new`` (a manifest's ``renamed-from`` line):
        one rename of the folder, then its ``info/alias``. The chain itself names no
        dataset, so nothing in it changes. A crash between the two leaves the old name in
        the alias, which the next run's ``remove_leftovers`` puts right."""
        source, target = self.folder(old), self.folder(new)  # never links
        if target.exists():
            raise RepositoryError(f"cannot rename {old} to {new}: {target} exists")
        os.rename(source, target)
        fsync_dir(self.root)
        self.dataset(new).write_alias(new)

    def discard(self, staged: Dataset) -> None:
        """Remove a chain built with ``staging`` that will not replace anything."""
        shutil.rmtree(staged.root, ignore_errors=True)

    def finish_replacements(self) -> list[Path]:
        """Settle what a crash during ``replace`` left: an old chain set aside with no
        folder in its place goes back; any other set-aside or staging folder is removed.
        Call it holding ``lock``."""
        settled: list[Path] = []
        for entry in sorted(self.root.iterdir()):
            name = entry.name.removeprefix(_SET_ASIDE)
            if entry.name.startswith(_SET_ASIDE) and not (self.root / name).exists():
                os.rename(entry, self.root / name)
            elif entry.name.startswith((_STAGED, _SET_ASIDE)):
                shutil.rmtree(entry)
            else:
                continue
            settled.append(entry)
        return settled

    def folder(self, name: str) -> Path:
        """The folder of ``name`` in the root; ``DatasetPathError`` for a name outside
        the grammar or a folder that is a symbolic link."""
        problem = name_problem(name)
        if problem is not None:
            raise DatasetPathError(self.root, name, problem)
        path = self.root / name
        if path.is_symlink():
            # Followed into the root, it read another folder's chain under this name (one
            # id, two names) and a run appended to that folder; out of it, to anywhere.
            reason = (
                f"dataset folder {name!r} is a symbolic link: a chain is read and written"
                " only in its own folder, never through a link"
            )
            raise DatasetPathError(self.root, name, reason)
        return path

    def names(self) -> list[str]:
        """Names of the datasets that have a head, sorted; ``strays`` are left out."""
        return sorted(name for name, stray in self._chains() if stray is None)

    def names_by_id(self) -> dict[DatasetId, str]:
        """Every readable dataset's id and name, to name a transform's inputs (a chain
        that cannot be read is left out: its own verification reports it)."""
        names: dict[DatasetId, str] = {}
        for name in self.names():
            try:
                state = self.dataset(name).projection()
            except (RepositoryError, ValueError):
                continue
            if state.dataset_id is not None:
                names[state.dataset_id] = name
        return names

    def strays(self) -> list[DatasetPathError]:
        """Entries of the root that hold a chain, or are links, but are no dataset's
        folder (a name outside the grammar, a link out of the root), by name: reported
        and never read or written."""
        found = [stray for _, stray in self._chains() if stray is not None]
        return sorted(found, key=lambda e: e.name)

    def _chains(self) -> Iterator[tuple[str, DatasetPathError | None]]:
        """Each chain folder, or stray, with why it is a stray (None for a chain)."""
        if not self.root.is_dir():
            return
        for entry in self.root.iterdir():
            if entry.name.startswith((_STAGED, _SET_ASIDE)):
                continue  # a chain being replaced (``replace``): the lock's holder's
            has_head = (entry / "refs" / "head").exists()
            try:
                self.folder(entry.name)
            except DatasetPathError as e:
                if has_head or entry.is_symlink():
                    yield entry.name, e
            else:
                if has_head:
                    yield entry.name, None


_B = TypeVar("_B")


def _judged(data: bytes) -> MetadataBlock | DataBlock:
    """A block as a fold that only judges it takes it: a data block as tuples, its
    source state as fields."""
    return decode_data_block(data, state_fields=True) or decode_block(data)


def _named(hash_: str, decode: Callable[[bytes], _B], data: bytes) -> _B:
    """``decode(data)``, a malformed block named in the error: its bytes hash to its
    name, so someone wrote it that way, and the reader of a report must find it."""
    try:
        return decode(data)
    except BlockDecodeError as error:
        raise BlockDecodeError(f"block {hash_}: {error}") from None
