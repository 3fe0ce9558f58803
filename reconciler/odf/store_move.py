"""Moving a repository's data out of git: from the dataset folders into a data store.

A repository starts with ``data_store = "odf"`` (data and checkpoints committed with the
chains) and outgrows git; its pull request sets ``data_store`` to a folder or a bucket.
From then on the files its chains already name are still in the dataset folders, while
new ones go to the store. Two pieces make that a change the plan can show and apply can
carry out, with nothing copied by hand:

- ``FolderUntilMoved``: a store that reads an object from the dataset folder when the
  store does not have it yet, so every reader (a run, ``verify --integrity``, ``sql``)
  works before, during and after the move, and a move cut short by a crash loses nothing.
- ``move_into_store``: what apply does to each dataset it runs, under the repository
  lock: each file is checked against its name (its physical hash), stored, and only then
  removed from the folder; the run's commit then records the removals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow.parquet as pq

from .hashing import physical_hash
from .store import KINDS, DataStore, LocalStore, StoreError, folder_of


@dataclass(frozen=True)
class InFolder:
    """Data and checkpoint files still in a dataset folder, waiting to be moved."""

    files: tuple[tuple[Path, str], ...]
    """Each file and its kind (``data`` or ``checkpoint``)."""

    @property
    def size(self) -> int:
        return sum(path.stat().st_size for path, _ in self.files)


def in_folder(root: Path) -> InFolder:
    """The data and checkpoint files in the dataset folder ``root`` (a crash's
    ``.pending-*`` leftovers are not files of the chain)."""
    found = []
    for kind in KINDS:
        folder = root / folder_of(kind)
        if folder.is_dir():
            found += [
                (path, kind)
                for path in sorted(folder.iterdir())
                if path.is_file() and not path.name.startswith(".pending-")
            ]
    return InFolder(tuple(found))


class MoveStoppedError(StoreError):
    """A move that stopped part way: ``moved`` files had left the folder by then, and the
    run's commit records their removal as it does a whole move's."""

    def __init__(self, message: str, moved: int) -> None:
        super().__init__(message)
        self.moved = moved


def move_into_store(root: Path, store: DataStore) -> int:
    """Move the data and checkpoint files of the dataset folder ``root`` into ``store``;
    how many were moved. A file whose bytes do not match its name is not moved (it is
    not the object its name promises), nor anything after a file the store refuses:
    ``MoveStoppedError``, counting the files before it, the rest left for the next run
    (or ``verify --integrity``, for a file that is not its object)."""
    moved = 0
    for path, kind in in_folder(root).files:
        try:
            actual = str(physical_hash(path))
            if actual != path.name:
                raise StoreError(
                    f"{root.name}: {folder_of(kind)}/{path.name} does not match its hash"
                    f" ({actual}): it was not moved into the data store"
                    " (`reconcile verify --integrity` tells more)"
                )
            store.put(path, path.name, kind)  # keeps the file as its cached copy, or
        except (StoreError, OSError) as e:
            raise MoveStoppedError(str(e), moved) from e
        path.unlink(missing_ok=True)  # leaves it: either way it leaves the folder
        moved += 1
    for kind in KINDS:
        with contextlib.suppress(OSError):  # not empty: a leftover, swept elsewhere
            (root / folder_of(kind)).rmdir()
    return moved


class FolderUntilMoved:
    """``store`` for one dataset, reading an object from the dataset folder while the
    store does not have it (``move_into_store`` has not reached it yet). Writes go to
    ``store``."""

    local = False

    def __init__(self, store: DataStore, root: Path) -> None:
        self.store = store
        self.folder = LocalStore(root)
        self.shown = store.shown

    def check(self, write: bool = True) -> None:
        self.store.check(write)

    def put(self, source: Path, hash_: str, kind: str) -> bool:
        return self.store.put(source, hash_, kind)

    def fetch(self, hash_: str, kind: str) -> Path:
        path = self.store.fetch(hash_, kind)
        kept = self.folder.fetch(hash_, kind)
        return kept if not path.exists() and kept.is_file() else path

    def download(self, hash_: str, kind: str) -> bool | None:
        found = self.store.download(hash_, kind)
        return found if found is not None else self.folder.download(hash_, kind)

    def size(self, hash_: str, kind: str) -> int | None:
        size = self.store.size(hash_, kind)
        return size if size is not None else self.folder.size(hash_, kind)

    def sizes(self) -> dict[str, int]:
        return self.folder.sizes() | self.store.sizes()  # the store's, as ``size``

    @contextlib.contextmanager
    def open(self, hash_: str, kind: str) -> Iterator[BinaryIO]:
        with contextlib.ExitStack() as stack:
            try:
                stream = stack.enter_context(self.store.open(hash_, kind))
            except FileNotFoundError:
                stream = stack.enter_context(self.folder.open(hash_, kind))
            yield stream

    def footer(self, hash_: str, kind: str) -> pq.FileMetaData | None:
        footer = self.store.footer(hash_, kind)
        return footer if footer is not None else self.folder.footer(hash_, kind)
