"""Checking a dataset folder's content-addressed files against their own names, on two
cores.

Every block, data and checkpoint file is named by the multihash of its bytes, so
whether one is intact can be decided without the chain. A full integrity check uses
that to spread its work over two processes:

1. a forked child hashes part of the block files and parses them, sending them a chunk
   at a time (the data blocks as plain tuples, ``data_block_wire``; the few others as
   pickled models, which cost a tenth of their decoding to load), while this process
   hashes and parses the rest of the block files and, between two chunks of its own,
   rebuilds what the child sent;
2. the child then hashes every file under ``data/`` and ``checkpoints/``, while this
   process walks the chain through the parsed blocks and folds it; a block neither
   parsed (a damaged one) is read by the walk, which words what is wrong with it as it
   always does;
3. the check compares each file a block names with the child's second answer, and looks
   again only where they disagree.

The child runs only hashing and parsing code on memory it shares with its parent,
copied on write, sends its answers with ``marshal`` and leaves with ``os._exit``. If
it cannot be made or fails, an answer is empty and the parent reads what the child
would have, so a failure costs time, never a finding.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import marshal
import os
import pickle
import select
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .codec import BlockDecodeError, decode_block, decode_data_block
from .data_block_wire import from_plain, to_plain
from .data_step import DataBlock
from .hashing import digest_fd, names_digest, read_whole
from .models import MetadataBlock

SWEEP_FROM = 4096
"""Files in a folder from which they are swept in a child; below it, forking costs more
than it saves."""

CHILD_SHARE = 0.5
"""The part of the block files the child hashes and parses. The parent parses the rest
and rebuilds what the child sends in about the same time, then folds the chain while
the child hashes the data files (measured on a chain of 100,000 blocks, 10% of them
metadata blocks, with one small data file per data block)."""

CHUNK = 1024
"""Block files parsed between two looks at the pipe (about 20 ms of work); the child
sends its parsed blocks a chunk at a time, so that this process rebuilds them while the
child goes on, not after it."""

_LENGTH = struct.Struct("<Q")
_PICKLE = pickle.HIGHEST_PROTOCOL
_PIPE_SIZE = 1 << 20

Parsed = dict[str, DataBlock | MetadataBlock]


def verified_files(root: Path) -> dict[str, int]:
    """``data/<name>`` and ``checkpoints/<name>`` paths whose bytes hash to their name,
    with their sizes; anything else in those folders is left out."""
    verified: dict[str, int] = {}
    for folder in ("data", "checkpoints"):
        base = f"{root}/{folder}/"
        for name in _names(base):
            size = _size_if_named_by_content(base + name, name)
            if size is not None:
                verified[f"{folder}/{name}"] = size
    return verified


def judged_blocks(
    root: Path, names: Iterable[str]
) -> tuple[dict[str, DataBlock], dict[str, bytes]]:
    """The block files among ``names`` whose bytes hash to their name: the data blocks
    parsed, the others' bytes. A damaged or unreadable file is left out: the walk along
    the chain reads it, and words what is wrong with it, as it would without the sweep."""
    base = f"{root}/blocks/"
    parsed: dict[str, DataBlock] = {}
    others: dict[str, bytes] = {}
    for name in names:
        try:
            data = read_whole(base + name)
        except OSError:
            continue
        if not names_digest(name, hashlib.sha3_256(data).digest()):
            continue
        try:
            block = decode_data_block(data)
        except BlockDecodeError:
            continue
        if block is None:
            others[name] = data
        else:
            parsed[name] = block
    return parsed, others


def _decoded(others: dict[str, bytes]) -> dict[str, MetadataBlock]:
    """Metadata blocks decoded; one that cannot be is left for the walk to word."""
    decoded: dict[str, MetadataBlock] = {}
    for name, data in others.items():
        with contextlib.suppress(BlockDecodeError):
            decoded[name] = decode_block(data)
    return decoded


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


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


@dataclass
class ContentSweep:
    """A dataset folder's files checked against their names by a forked child and this
        process together: ``start``, then ``blocks`` (if asked), then ``files``; ``close``
    ends it early."""

    root: Path
    pid: int | None
    fd: int | None
    """The read end of the pipe from the child."""
    own_blocks: list[str]
    """The block files this process parses while the child parses its share."""
    block_answers: int
    """How many answers of parsed blocks the child sends (one per ``CHUNK`` files)."""
    sweep_files: bool

    @classmethod
    def start(
        cls, root: Path, *, files: bool = True, blocks: bool = True, threshold: int | None = None
    ) -> ContentSweep:
        """Fork the child when this machine has a second core and the folder holds
        ``threshold`` block files or more (``SWEEP_FROM`` by default), to parse them if
        ``blocks`` are asked and to hash the data and checkpoint files if ``files`` are
        (not for a dataset whose files live in a data store: they are checked there). A
        block names at most two files, so the blocks tell whether the files are many
        too, without listing them here. Without a child nothing is parsed or hashed
        ahead: the caller reads it all."""
        limit = SWEEP_FROM if threshold is None else threshold
        names = _names(f"{root}/blocks/")
        alone = cls(root, None, None, [], 0, False)
        if (os.cpu_count() or 1) < 2 or len(names) < limit or not (blocks or files):
            return alone
        sweep_files = files
        if not blocks:
            names = []
        split = round(len(names) * CHILD_SHARE)
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return alone
        with contextlib.suppress(OSError):  # room for whole answers: the child rarely waits
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return alone
        if pid == 0:  # the child: sweep, send, and leave without the parent's exit hooks
            status = 1
            try:
                gc.disable()  # see gc_pause: it keeps everything it makes until it leaves
                os.close(read_end)
                for first in range(0, split, CHUNK):
                    parsed, others = judged_blocks(root, names[first : min(first + CHUNK, split)])
                    plain = [(n, to_plain(b)) for n, b in parsed.items()]
                    _send(write_end, (plain, pickle.dumps(_decoded(others), _PICKLE)))
                if sweep_files:
                    _send(write_end, verified_files(root))
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        answers = -(-split // CHUNK)
        return cls(root, pid, read_end, names[split:], answers, sweep_files)

    def blocks(self) -> Parsed:
        """The intact blocks by name: this process's share of the block files, parsed
        a chunk at a time, with the child's answers taken in between as they arrive
        (empty without a child; the child's part ends where it failed). Call it once,
        before ``files``."""
        parsed: Parsed = {}
        own, self.own_blocks = self.own_blocks, []
        for first in range(0, len(own), CHUNK):
            data, others = judged_blocks(self.root, own[first : first + CHUNK])
            parsed.update(data)
            parsed.update(_decoded(others))
            while self.block_answers and self._ready():
                self._take_blocks(parsed)
        while self.block_answers:
            self._take_blocks(parsed)
        return parsed

    def files(self) -> dict[str, int]:
        """The child's ``verified_files`` (empty without it, or when it failed); waits
        for the child to end. Call it after ``blocks``, if blocks were asked."""
        assert not self.block_answers, "blocks() first: its answers come first"
        verified = self._receive() if self.sweep_files else None
        self.close()
        return verified if verified is not None else {}

    def _take_blocks(self, parsed: Parsed) -> None:
        self.block_answers -= 1
        answer = self._receive()
        if answer is None:
            self.block_answers = 0
            return
        plain, others = answer
        parsed.update((name, from_plain(fields)) for name, fields in plain)
        parsed.update(pickle.loads(others))

    def _ready(self) -> bool:
        """Whether the child has begun to send its next answer (then it is sending it
        whole, so reading it waits only for the rest of the bytes)."""
        return self.fd is not None and bool(select.select([self.fd], [], [], 0)[0])

    def _receive(self) -> Any:
        """The child's next answer, or None when it failed (it is then ended)."""
        if self.fd is not None:
            with contextlib.suppress(OSError, EOFError, ValueError, TypeError):
                header = _read_exactly(self.fd, _LENGTH.size)
                if header is not None:
                    data = _read_exactly(self.fd, _LENGTH.unpack(header)[0])
                    if data is not None:
                        return marshal.loads(data)
        self.close()
        return None

    def close(self) -> None:
        """Close the pipe and reap the child (closing first, so that a child still
        writing an answer nobody reads is not left blocked); again, nothing."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            os.waitpid(self.pid, 0)
            self.pid = None


def _send(fd: int, answer: Any) -> None:
    data = _LENGTH.pack(len(marshaled := marshal.dumps(answer))) + marshaled
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from the pipe, or None if it ends first (the child failed)."""
    pieces = []
    while size:
        piece = os.read(fd, min(size, _PIPE_SIZE))
        if not piece:
            return None
        pieces.append(piece)
        size -= len(piece)
    return b"".join(pieces)
