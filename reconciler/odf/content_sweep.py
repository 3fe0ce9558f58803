"""Checking a dataset folder's content-addressed files against their own names, on two
cores.

Every block, data and checkpoint file is named by the multihash of its bytes, so
whether one is intact can be decided without the chain. A full integrity check uses
that to spread its work over two processes:

1. the block files are split into chunks, which the forked child takes from the back
   and this process from the front until they meet (``TwoEnds``), so the faster one
   does more; each hashes and parses its chunks, and the child sends its parsed blocks
   a chunk at a time (the data blocks as plain tuples, ``data_block_wire``; the few
   others as pickled models, which cost a tenth of their decoding to load), which this
   process rebuilds between two chunks of its own;
2. the child then hashes the files under ``data/`` and ``checkpoints/``, chunk by chunk
   from the back, while this process walks the chain through the parsed blocks and
   folds it, then takes the remaining chunks of files from the front; a block neither
   parsed (a damaged one) is read by the walk, which words what is wrong with it as it
   always does;
3. the check compares each file a block names with the two answers, and looks again
   only where they disagree.

The child runs only hashing and parsing code on memory it shares with its parent,
copied on write, sends its answers with ``marshal`` and leaves with ``os._exit``. If
it cannot be made or fails, its part of an answer is missing and the parent reads what
the child would have, so a failure costs time, never a finding.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import marshal
import mmap
import os
import pickle
import select
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .codec import BlockDecodeError, decode_block, decode_data_block
from .data_block_wire import from_plain, to_plain
from .data_step import DataBlock
from .hashing import names_digest, read_whole, sized_digest
from .models import MetadataBlock

SWEEP_FROM = 4096
"""Files in a folder from which they are swept in a child; below it, forking costs more
than it saves."""

CHUNK = 128
"""Block files parsed between two looks at the pipe (about 2 ms of work); the child
sends its parsed blocks a chunk at a time, so that this process rebuilds them while the
child goes on, not after it. Small enough that a chunk's objects are still in the
processor's cache when they are sent or rebuilt, and that this process waits little for
the child's last chunk: chunks of 1,024 made a full check of 100,000 blocks 0.09 s
slower."""

FILE_CHUNK = 2048
"""Data and checkpoint files hashed per chunk (a small file costs a third of a block)."""

_LENGTH = struct.Struct("<Q")
_COUNTER = struct.Struct("<q")
_PICKLE = pickle.HIGHEST_PROTOCOL
_PIPE_SIZE = 1 << 20
_END = "end"
"""The child's answer after its last chunk of blocks."""

Parsed = dict[str, DataBlock | MetadataBlock]


class TwoEnds:
    """Chunks ``0 … count-1`` shared by two processes without a lock: this one takes
    them from the front, the forked child from the back, until they meet, so each does
    as much as its speed allows, whatever the machine or its load (a fixed share left
    one process waiting for the other).

    Each side publishes the chunk it takes, in memory both share, before it looks at
    the other's. A chunk may then be taken by both (parsed twice: time lost) or, were
    a store and a load reordered across cores, by neither: its blocks are then read by
    the walk and its files by the check, as a damaged file's are. How the work splits
    never changes a finding."""

    def __init__(self, count: int) -> None:
        self.memory = mmap.mmap(-1, 2 * _COUNTER.size)  # anonymous, shared with the child
        _COUNTER.pack_into(self.memory, _COUNTER.size, count)

    def from_front(self) -> Iterator[int]:
        """This process's chunks: the next one while the child has not taken it."""
        while True:
            taken = _COUNTER.unpack_from(self.memory, 0)[0]
            _COUNTER.pack_into(self.memory, 0, taken + 1)
            if taken >= _COUNTER.unpack_from(self.memory, _COUNTER.size)[0]:
                return
            yield taken

    def from_back(self) -> Iterator[int]:
        """The child's chunks: the one before its last while this process has not taken
        a later one (a chunk both reach at once goes to both, never to neither)."""
        while True:
            taken = _COUNTER.unpack_from(self.memory, _COUNTER.size)[0] - 1
            _COUNTER.pack_into(self.memory, _COUNTER.size, taken)
            if taken < 0 or taken < _COUNTER.unpack_from(self.memory, 0)[0] - 1:
                return
            yield taken


def _chunk(items: list[str], index: int, size: int) -> list[str]:
    return items[index * size : (index + 1) * size]


def verified_files(root: Path, paths: Iterable[str] | None = None) -> dict[str, int]:
    """The ``data/<name>`` and ``checkpoints/<name>`` paths (all, or those among
    ``paths``) whose bytes hash to their name, with their sizes; anything else in those
    folders is left out."""
    verified: dict[str, int] = {}
    for path in _content_files(root) if paths is None else paths:
        size = _size_if_named_by_content(f"{root}/{path}", path.partition("/")[2])
        if size is not None:
            verified[path] = size
    return verified


def _content_files(root: Path) -> list[str]:
    return [
        f"{folder}/{name}"
        for folder in ("data", "checkpoints")
        for name in _names(f"{root}/{folder}/")
    ]


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
            block = decode_data_block(data, state_fields=True)
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
        size, digest = sized_digest(path)
    except OSError:
        return None
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
    block_names: list[str]
    """The block files to parse, split between the two processes by ``block_chunks``."""
    block_chunks: TwoEnds | None
    file_paths: list[str]
    """The data and checkpoint files to hash, split likewise by ``file_chunks``."""
    file_chunks: TwoEnds | None
    block_answers: bool
    """Whether answers of parsed blocks are still to come from the child."""

    @classmethod
    def start(
        cls, root: Path, *, files: bool = True, blocks: bool = True, threshold: int | None = None
    ) -> ContentSweep:
        """Fork the child when this machine has a second core and the folder holds
        ``threshold`` block files or more (``SWEEP_FROM`` by default), to parse blocks
        with this process if ``blocks`` are asked and to hash the data and checkpoint
        files with it if ``files`` are (not for a dataset whose files live in a data
        store: they are checked there). A block names at most two files, so the blocks
        tell whether the files are many too. Without a child nothing is parsed or hashed
        ahead: the caller reads it all."""
        limit = SWEEP_FROM if threshold is None else threshold
        names = _names(f"{root}/blocks/")
        alone = cls(root, None, None, [], None, [], None, False)
        if (os.cpu_count() or 1) < 2 or len(names) < limit or not (blocks or files):
            return alone
        names = names if blocks else []
        paths = _content_files(root) if files else []
        block_chunks, file_chunks = (
            TwoEnds(-(-len(names) // CHUNK)),
            TwoEnds(-(-len(paths) // FILE_CHUNK)),
        )
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
                for index in block_chunks.from_back():
                    parsed, others = judged_blocks(root, _chunk(names, index, CHUNK))
                    plain = [(n, to_plain(b)) for n, b in parsed.items()]
                    _send(write_end, (plain, pickle.dumps(_decoded(others), _PICKLE)))
                _send(write_end, _END)
                if files:
                    verified: dict[str, int] = {}
                    for index in file_chunks.from_back():
                        verified |= verified_files(root, _chunk(paths, index, FILE_CHUNK))
                    _send(write_end, verified)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        return cls(root, pid, read_end, names, block_chunks, paths, file_chunks, True)

    def blocks(self) -> Parsed:
        """The intact blocks by name: the chunks of block files this process takes,
        parsed, with the child's answers taken in between as they arrive (empty without
        a child; the child's part ends where it failed). Data blocks come with their
        source states as fields (``SourceStateFields``), whichever process parsed them.
        Call it once, before ``files``."""
        parsed: Parsed = {}
        if self.block_chunks is not None:
            for index in self.block_chunks.from_front():
                data, others = judged_blocks(self.root, _chunk(self.block_names, index, CHUNK))
                parsed.update(data)
                parsed.update(_decoded(others))
                while self.block_answers and self._ready():
                    self._take_blocks(parsed)
        while self.block_answers:
            self._take_blocks(parsed)
        return parsed

    def files(self) -> dict[str, int]:
        """``verified_files`` of the chunks this process takes, with the child's answer
        for the others (empty without a child; without the child's part when it failed:
        the caller checks what is not here); waits for the child to end. Call it after
        ``blocks``, if blocks were asked."""
        assert not self.block_answers or not self.block_names, "blocks() first"
        while self.block_answers:  # no blocks were asked: the child's end of them
            self._take_blocks({})
        verified: dict[str, int] = {}
        if self.file_chunks is not None and self.file_paths:
            for index in self.file_chunks.from_front():
                verified |= verified_files(self.root, _chunk(self.file_paths, index, FILE_CHUNK))
            theirs = self._receive()
            if theirs is not None:
                verified |= theirs
        self.close()
        return verified

    def _take_blocks(self, parsed: Parsed) -> None:
        answer = self._receive()
        if answer is None or answer == _END:
            self.block_answers = False
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
        self.block_answers = False
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
