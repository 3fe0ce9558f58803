"""Which of a data store's objects are intact: listed with their size, and bytes that hash
to their name.

The full ``verify --integrity`` of a store outside git reads every object the chains
name. One at a time, each cost a HEAD for its size and a GET, with the network idle
while the previous one hashed; here the sizes come from one listing (a thousand objects
a request on S3) and the objects are read by a few threads at once (pyarrow's streams
and ``hashlib`` both release the GIL on large buffers). Only what is not intact goes
back to the block-by-block check, which words the problem.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor

from .multiformat import Multihash
from .store import CONCURRENT_READS, DataStore

_CHUNK = 1 << 20


def intact_objects(store: DataStore, named: dict[str, int], keep: bool = False) -> dict[str, int]:
    """The paths among ``named`` (``data/<hash>`` or ``checkpoints/<hash>``, with the size
    their block records) whose object is listed with that size and hashes to its name.
    ``keep``: the objects read are kept in the store's cache (``DataStore.download``),
    for a replay that reads them next; otherwise a full check of a large store would
    copy all of it to the local disk."""
    listed = store.sizes()
    candidates = [path for path, size in named.items() if listed.get(path) == size]
    with ThreadPoolExecutor(max_workers=CONCURRENT_READS) as pool:
        intact = list(pool.map(lambda path: _intact(store, path, keep), candidates))
    return {path: named[path] for path, ok in zip(candidates, intact, strict=True) if ok}


def unnamed_objects(store: DataStore, named: Iterable[AbstractSet[str]]) -> dict[str, int]:
    """The store's objects (path: size, from its listing) that none of the chains whose
    ``named`` paths are given names: every chain of the repository, or the answer means
    nothing. They are never read. A run killed after storing a file leaves one when its
    next run writes another (a new system time gives other bytes); a deleted or
    recreated dataset leaves its files. Another clone's run may also have stored one for
    a block it has not pushed yet, so being unnamed here does not make an object safe
    to delete."""
    kept: set[str] = set().union(*named)
    return {path: size for path, size in store.sizes().items() if path not in kept}


def _intact(store: DataStore, path: str, keep: bool) -> bool:
    folder, _, hash_ = path.partition("/")
    kind = "data" if folder == "data" else "checkpoint"
    return bool(store.download(hash_, kind)) if keep else hashes_to_its_name(store, hash_, kind)


def hashes_to_its_name(store: DataStore, hash_: str, kind: str) -> bool:
    """Whether the object's bytes, streamed from the store (never a cached copy), hash
    to its name; False when it is missing."""
    hasher = hashlib.sha3_256()
    try:
        with store.open(hash_, kind) as stream:
            while chunk := stream.read(_CHUNK):
                hasher.update(chunk)
    except FileNotFoundError:  # gone since the listing: the check names it
        return False
    return Multihash.from_digest(hasher.digest()) == hash_
