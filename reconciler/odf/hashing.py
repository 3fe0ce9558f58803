"""Block, physical and logical hashes as ODF multihashes.

Blocks and files are hashed with SHA3-256 (multihash code 0x16); data slices also get a
logical hash, arrow-digest over their records (code 0x300016), which survives
re-encoding of the Parquet file and is what reproducibility is judged by.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from .multiformat import ARROW0_SHA3_256, Multihash

if TYPE_CHECKING:
    import pyarrow as pa

_CHUNK = 1 << 20


def block_hash(data: bytes) -> Multihash:
    """The hash of a block: SHA3-256 over its whole manifest buffer."""
    return Multihash.sha3_256(data)


def physical_hash(path: str | Path) -> Multihash:
    """SHA3-256 of a file's bytes, read in 1 MiB chunks so any size streams."""
    hasher = hashlib.sha3_256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            hasher.update(chunk)
    return Multihash.from_digest(hasher.digest())


def logical_hash(table: pa.Table) -> Multihash:
    """arrow-digest (RecordDigestV0, SHA3-256) of a table, as multihash 0x300016."""
    from .arrow_digest import arrow_digest  # pyarrow is only needed when data is hashed

    return Multihash.from_digest(arrow_digest(table), ARROW0_SHA3_256)
