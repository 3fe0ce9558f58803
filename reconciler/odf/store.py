"""Where a dataset's data and checkpoint files live: one small interface, several stores.

Blocks and ``refs/`` always stay in the dataset folder (in git). Data slices and
checkpoints go to a ``DataStore``, addressed by kind (``data`` or ``checkpoint``) and
physical hash, so a store is append-only: an object is written once under its hash and
never overwritten. Readers ask for a local path (``fetch``); a remote store downloads
only the objects asked for into a local cache.

- ``LocalStore`` (this module): the standard ODF layout, ``data/`` and ``checkpoints/``
  inside each dataset folder (the default, ``data_store = "odf"``).
- ``FileSystemStore`` (``store_fs.py``): any pyarrow file system, a folder elsewhere or
  an S3 bucket, shared by every dataset of the repository (content addressing makes the
  sharing safe); ``store_config.py`` builds it from ``[tool.reconciler]``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import pyarrow.parquet as pq

from .hashing import physical_hash

KINDS = ("data", "checkpoint")

CONCURRENT_READS = 8
"""Objects of a store outside the dataset folder read at once, by threads (pyarrow's
streams and ``hashlib`` release the GIL): one after the other, a long history's reads
wait on the network's round trips; more would only grow the buffers."""


class StoreError(Exception):
    """The store cannot be reached or refuses access (credentials, network, bucket).
    Its message names the store and the cause, never a secret."""


class MissingObjectError(StoreError):
    """A data or checkpoint file a chain names is not in its store: the store was moved
    or pruned by hand, or the chain was. Raised before any engine reads the path, which
    would only say that a path in the cache does not exist."""


class DataStore(Protocol):
    """Content-addressed data and checkpoint files of one dataset."""

    local: bool
    """True when the objects are the files ``fetch`` returns (nothing to download)."""
    shown: str
    """The store as messages name it (never with a secret)."""

    def check(self, write: bool = True) -> None:
        """Raise ``StoreError`` unless the store can be read and written (``write``,
        else at least read: a caller that checked the write before)."""

    def put(self, source: Path, hash_: str, kind: str) -> bool:
        """Store ``source`` under ``hash_`` (its physical hash) unless an object of the
        same size is already there; True when this call wrote it. A remote store keeps
        ``source`` as its cached copy: the caller no longer owns it. (``LocalStore``
        leaves it: ``Dataset.add_file`` moves it in place, recording what it creates.)"""

    def fetch(self, hash_: str, kind: str) -> Path:
        """A local path holding the object (downloaded on first use); a path that does
        not exist when the store has no such object."""

    def download(self, hash_: str, kind: str) -> bool | None:
        """Read the object from the store itself (a cached copy does not count) and say
        whether its bytes hash to its name: None when it is missing. A remote store keeps
        bytes that match as its cached copy, replacing any, so a reader after this check
        (a replay after ``verify``'s) does not download them again."""

    def size(self, hash_: str, kind: str) -> int | None:
        """The object's size in bytes, or None when it is missing."""

    def sizes(self) -> dict[str, int]:
        """Every object by path (``data/<hash>``, ``checkpoints/<hash>``) with its size,
        from a listing: nothing is read or downloaded (S3 lists a thousand objects a
        request). What ``verify --integrity --no-download`` compares the chains with."""

    def open(self, hash_: str, kind: str) -> contextlib.AbstractContextManager[BinaryIO]:
        """The object's bytes as a stream (``FileNotFoundError`` when it is missing)."""

    def footer(self, hash_: str, kind: str) -> pq.FileMetaData | None:
        """The Parquet footer of the object, or None when it is missing; a remote store
        reads only the footer's bytes unless the object is cached already, so a run can
        judge from a footer whether it needs the rest. Those bytes are not checked
        against the object's hash (only a whole object can be): the object is, when it
        is fetched to be read, and ``verify --integrity`` checks every one."""


def folder_of(kind: str) -> str:
    """The folder of a kind of file, in a dataset folder as in a store."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of file {kind!r}")
    return "data" if kind == "data" else "checkpoints"


class LocalStore:
    """Files inside the dataset folder: ``data/<hash>`` and ``checkpoints/<hash>``.
    ``Dataset.add_file`` moves files in place itself (atomically, journalled), so
    ``put`` here only reports whether the object is already there."""

    local = True

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.shown = f"{self.root}/"

    def path(self, hash_: str, kind: str) -> Path:
        return self.root / folder_of(kind) / hash_

    def check(self, write: bool = True) -> None:
        return None

    def put(self, source: Path, hash_: str, kind: str) -> bool:
        return False

    def fetch(self, hash_: str, kind: str) -> Path:
        return self.path(hash_, kind)

    def download(self, hash_: str, kind: str) -> bool | None:
        path = self.path(hash_, kind)
        return str(physical_hash(path)) == hash_ if path.is_file() else None

    def size(self, hash_: str, kind: str) -> int | None:
        try:
            return self.path(hash_, kind).stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            return None

    def sizes(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for kind in KINDS:
            folder = folder_of(kind)
            try:
                entries = list(os.scandir(self.root / folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    found[f"{folder}/{entry.name}"] = entry.stat().st_size
        return found

    @contextlib.contextmanager
    def open(self, hash_: str, kind: str) -> Iterator[BinaryIO]:
        path = self.path(hash_, kind)
        if path.is_dir():
            raise FileNotFoundError(path)
        with open(path, "rb", buffering=0) as f:
            yield f

    def footer(self, hash_: str, kind: str) -> pq.FileMetaData | None:
        path = self.path(hash_, kind)
        return pq.read_metadata(path) if path.is_file() else None


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` survive a crash of the machine."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
