"""The repository lock: one writing run at a time per ODF root, and who holds it.

``apply`` and ``push`` hold it for their whole run (plan included, so a run that waited
plans against what the previous one left); ``plan``, ``verify``, ``log`` and ``sql``
only read and never need it.

Exclusion is ``fcntl.flock`` on ``<root>/.lock``. The kernel ties that lock to the open
file and drops it when the process ends, however it ends (SIGKILL included), so a lock
is never stale: there is no "is that pid still alive?" test to race on, and taking over
a dead run's lock is the same atomic ``flock`` call as taking a free one, which exactly
one process can win. The file also holds a JSON record of the holder (host, pid, start
time, command), written once the lock is held; it exists only so that a run that cannot
get the lock can say who has it. A record left by a dead process is simply overwritten
by the next holder, and the file itself is never deleted (deleting a flock'd file lets
two processes lock two different files of the same name).

The descriptor is not inheritable (PEP 446), so a child (the Spark JVM, a ``Pipe``
command) that outlives the run never keeps the lock. Within one process the lock is
reentrant: a caller that already holds it (the CLI, around plan and apply) may call code
that takes it again (``apply_plan``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".lock"
_POLL_SECONDS = 0.1
_RECORD_BYTES = 4096  # a record is about 150 bytes
_RECORD_WAITS = 20
"""How many times (every half poll) a refused run looks for the holder's record: 1 s."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a repository lock, as its JSON record says."""

    command: str
    pid: int
    host: str
    since: dt.datetime

    def __str__(self) -> str:
        return (
            f"{self.command} (pid {self.pid} on {self.host}, "
            f"since {self.since.astimezone(dt.UTC):%H:%M:%S} UTC)"
        )

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "command": self.command,
                "pid": self.pid,
                "host": self.host,
                "since": self.since.astimezone(dt.UTC).isoformat(),
            },
            sort_keys=True,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> LockHolder | None:
        """The record, or None while it is being written (or was never written)."""
        try:
            record = json.loads(data)
            return cls(
                str(record["command"]),
                int(record["pid"]),
                str(record["host"]),
                dt.datetime.fromisoformat(record["since"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


class RepositoryLockedError(RuntimeError):
    """Another run holds the repository lock; its message names it in one line."""

    def __init__(self, root: Path, holder: LockHolder | None, timeout: float) -> None:
        self.root, self.holder, self.timeout = root, holder, timeout
        who = str(holder) if holder is not None else "another run"
        advice = (
            "retry later or pass --lock-timeout"
            if timeout <= 0
            else f"still locked after {timeout:g}s; retry later or pass a longer --lock-timeout"
        )
        super().__init__(f"{root.name}/ is locked by {who}; {advice}")


def read_holder(root: Path) -> LockHolder | None:
    """The record in ``root``'s lock file, whether or not anyone holds the lock now."""
    try:
        return LockHolder.from_json((root / LOCK_FILE).read_bytes())
    except FileNotFoundError:
        return None


_held: dict[Path, int] = {}
"""Lock files this process holds, with how many nested holds each has."""
_kept: set[Path] = set()
"""Held lock files whose record stays when they are released (``leave_record``)."""
_held_guard = threading.Lock()


def leave_record(root: Path) -> None:
    """Keep the record of ``root``'s lock, which this process holds, when it is released:
    the run ends with work it could not commit (its ``git commit`` failed), and the next
    run, finding the record, takes it for a killed run's and commits that work first."""
    with _held_guard:
        _kept.add((Path(root) / LOCK_FILE).resolve())


@contextlib.contextmanager
def repository_lock(root: Path, command: str, timeout: float = 0) -> Iterator[LockHolder | None]:
    """Hold ``root``'s lock for the body, waiting up to ``timeout`` seconds for it; the
    body gets the record of a run that did not commit its work (a clean release clears
    the record, so one still there when the lock is taken was left by a killed process,
    or kept by ``leave_record``), else None.

    Raises ``RepositoryLockedError`` naming the holder when it stays taken. Nested holds
    in one process share the outer one (and get None).
    """
    path = (Path(root) / LOCK_FILE).resolve()
    with _held_guard:
        if path in _held:
            _held[path] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield None
        finally:
            with _held_guard:
                _held[path] -= 1
        return
    fd = _acquire(path, timeout)
    try:
        died = LockHolder.from_json(os.pread(fd, _RECORD_BYTES, 0))
        holder = LockHolder(command, os.getpid(), socket.gethostname(), dt.datetime.now(dt.UTC))
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.to_json(), 0)
        with _held_guard:
            _held[path] = 1
        try:
            yield died
        finally:
            with _held_guard:
                del _held[path]
                kept = path in _kept
                _kept.discard(path)
            if not kept:  # the record goes with the lock: a reader sees no stale holder
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the flock


def _holder(root: Path) -> LockHolder | None:
    """The holder's record, waiting a moment for it: a run writes its record just after
    it takes the lock, so a run refused in between would otherwise name nobody, or the
    killed run whose record the new holder had not yet replaced (seen in CI: three runs
    racing for a dead run's lock, one refused named the dead one)."""
    for _ in range(_RECORD_WAITS):
        holder = read_holder(root)
        if holder is not None and not _dead_here(holder):
            return holder
        time.sleep(_POLL_SECONDS / 2)
    return read_holder(root)


def _dead_here(holder: LockHolder) -> bool:
    """Whether the record names a process of this machine that is no longer running (a
    record from another machine, on a shared mount, cannot be told)."""
    if holder.host != socket.gethostname():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process, alive
    return False


def _acquire(path: Path, timeout: float) -> int:
    """An open descriptor of ``path`` with the exclusive flock taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(timeout, 0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise RepositoryLockedError(path.parent, _holder(path.parent), timeout) from None
            time.sleep(_POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
