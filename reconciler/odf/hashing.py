"""Block, physical and logical hashes as ODF multihashes.

Blocks and files are hashed with SHA3-256 (multihash code 0x16); data slices also get a
logical hash, arrow-digest over their records (code 0x300016), which survives
re-encoding of the Parquet file and is what reproducibility is judged by.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .multiformat import ARROW0_SHA3_256, Multihash

if TYPE_CHECKING:
    import pyarrow as pa

_CHUNK = 1 << 20


_SHA3_TEXT_PREFIX = "f1620"
"""Multibase base16 of a SHA3-256 multihash: ``f``, code 0x16, length 0x20."""


def names_digest(name: str, digest: bytes) -> bool:
    """Whether ``name`` is the SHA3-256 multihash of ``digest``, compared as text: a
    full check compares every block and file with its name, and building the Multihash
    only to compare it costs more than the comparison."""
    return name == _SHA3_TEXT_PREFIX + digest.hex()


def block_hash(data: bytes) -> Multihash:
    """The hash of a block: SHA3-256 over its whole manifest buffer."""
    return Multihash.sha3_256(data)


def physical_hash(path: str | Path) -> Multihash:
    """SHA3-256 of a file's bytes, streamed so any size fits."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return Multihash.from_digest(digest_fd(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def digest_fd(fd: int, size: int) -> bytes:
    """SHA3-256 of an open file's bytes, read in pieces no larger than ``size`` (its
    ``fstat`` size) up to 1 MiB. A read allocates what it asks for, and asking 1 MiB of
    a 300-byte file costs an mmap and munmap, about 15 µs: more than the read and the
    hash together, paid for every file of a full integrity check."""
    hasher = hashlib.sha3_256()
    piece = min(max(size, 1), _CHUNK)
    while chunk := os.read(fd, piece):
        hasher.update(chunk)
    return hasher.digest()


_SMALL = 1 << 14


def read_whole(path: str | Path) -> bytes:
    """A small file's bytes (a block): one 16 KiB read covers nearly every block, and a
    read of a regular file returns less than asked only at its end, so no ``fstat`` is
    needed (one system call of four, paid per block); a larger file is read on in 1 MiB
    pieces (see ``digest_fd`` on the cost of asking more than a file holds). A link is
    not followed (``ELOOP``): this reads a chain's own files, which are never links."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        data = os.read(fd, _SMALL)
        if len(data) == _SMALL:
            pieces = [data]
            while chunk := os.read(fd, _CHUNK):
                pieces.append(chunk)
            data = b"".join(pieces)
        return data
    finally:
        os.close(fd)


def sized_digest(path: str) -> tuple[int, bytes]:
    """A file's size and SHA3-256 in the fewest system calls: a small file (any block,
    many a data file) takes an open, one 16 KiB read and a close, its size being what
    the read returned, where ``fstat`` and a read that finds the end would add two (a
    full check hashes every file of the chain); a larger one is streamed on in 1 MiB
    pieces, so any size fits. A link is not followed, as by ``read_whole``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        data = os.read(fd, _SMALL)
        hasher = hashlib.sha3_256(data)
        size = len(data)
        if size == _SMALL:
            while chunk := os.read(fd, _CHUNK):
                hasher.update(chunk)
                size += len(chunk)
        return size, hasher.digest()
    finally:
        os.close(fd)


def logical_hash(table: pa.Table) -> Multihash:
    """arrow-digest (RecordDigestV0, SHA3-256) of a table, as multihash 0x300016."""
    from .arrow_digest import arrow_digest  # pyarrow is only needed when data is hashed

    return Multihash.from_digest(arrow_digest(table), ARROW0_SHA3_256)
