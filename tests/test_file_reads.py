"""Reading and hashing files with reads sized to the file (``odf.hashing``): every size
around the read sizes gives the file's exact bytes and SHA3-256."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from reconciler.odf.hashing import digest_fd, names_digest, physical_hash, read_whole
from reconciler.odf.multiformat import Multihash

SIZES = [0, 1, 300, (1 << 14) - 1, 1 << 14, (1 << 14) + 1, (1 << 20) + 1, 3 * (1 << 20) + 7]


@pytest.mark.parametrize("size", SIZES)
def test_whole_files_and_their_hashes_are_exact_at_every_size(tmp_path: Path, size: int) -> None:
    content = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(content)
    expected = hashlib.sha3_256(content).digest()

    assert read_whole(path) == content
    assert read_whole(str(path)) == content
    assert physical_hash(path) == Multihash.from_digest(expected)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert digest_fd(fd, size) == expected
    finally:
        os.close(fd)
    assert names_digest(Multihash.from_digest(expected), expected)
    other = hashlib.sha3_256(content + b"x").digest()  # never the content itself
    assert not names_digest(Multihash.from_digest(expected), other)


def test_a_file_that_grew_after_its_size_was_taken_is_hashed_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * 10)
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(path, "ab") as more:
            more.write(b"b" * 5)
        assert digest_fd(fd, 10) == hashlib.sha3_256(b"a" * 10 + b"b" * 5).digest()
    finally:
        os.close(fd)
