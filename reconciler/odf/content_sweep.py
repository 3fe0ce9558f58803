"""Checking a dataset folder's data and checkpoint files against their own names.

Those files are content-addressed: each is named by the multihash of its bytes, so
whether it is intact can be decided without the chain. A full integrity check uses that
to overlap the two halves of its work: while this process reads, decodes and folds the
blocks, a forked child hashes every file under ``data/`` and ``checkpoints/`` and
returns the ones whose bytes match their names, with their sizes. The check then only
compares each file a block names with that answer, and looks again (and words the
problem) only where they disagree. On two cores this hides the files' cost, which is
about a third of a full check of a long chain.

The child runs only hashing code on memory it shares with its parent, copied on write,
and leaves with ``os._exit``; if it cannot be made or fails, the answer is empty and
every file is checked in the parent, so a failure costs time, never a finding.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

from .hashing import digest_fd, names_digest

SWEEP_FROM = 4096
"""Files in a folder from which they are swept in a child; below it, forking costs more
than it saves."""


def verified_files(root: Path) -> dict[str, int]:
    """``data/<name>`` and ``checkpoints/<name>`` paths whose bytes hash to their name,
    with their sizes; anything else in those folders is left out."""
    verified: dict[str, int] = {}
    for folder in ("data", "checkpoints"):
        base = f"{root}/{folder}/"
        try:
            names = os.listdir(base)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            size = _size_if_named_by_content(base + name, name)
            if size is not None:
                verified[f"{folder}/{name}"] = size
    return verified


def _size_if_named_by_content(path: str, name: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        digest = digest_fd(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    return size if names_digest(name, digest) else None


def _file_count(root: Path) -> int:
    count = 0
    for folder in ("data", "checkpoints"):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            count += len(os.listdir(root / folder))
    return count


@dataclass
class ContentSweep:
    """``verified_files`` of a folder, computed by a forked child while the caller works."""

    root: Path
    pid: int | None
    read_end: int | None

    @classmethod
    def start(cls, root: Path, threshold: int | None = None) -> ContentSweep:
        """Fork the child when the folder holds ``threshold`` files or more and this
        machine has a second core (``threshold`` defaults to ``SWEEP_FROM``); otherwise
        the sweep yields nothing."""
        limit = SWEEP_FROM if threshold is None else threshold
        if (os.cpu_count() or 1) < 2 or _file_count(root) < limit:
            return cls(root, None, None)
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return cls(root, None, None)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return cls(root, None, None)
        if pid == 0:  # the child: sweep, send, and leave without the parent's exit hooks
            status = 1
            try:
                os.close(read_end)
                with os.fdopen(write_end, "wb") as out:
                    pickle.dump(verified_files(root), out, pickle.HIGHEST_PROTOCOL)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        return cls(root, pid, read_end)

    def result(self) -> dict[str, int]:
        """The child's answer (empty without a child, or when it failed); waits for it."""
        if self.pid is None or self.read_end is None:
            return {}
        with os.fdopen(self.read_end, "rb") as stream:
            data = stream.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = self.read_end = None
        if status != 0 or not data:
            return {}
        verified: dict[str, int] = pickle.loads(data)
        return verified
