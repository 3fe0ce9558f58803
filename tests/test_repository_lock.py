"""The repository lock: one writing run per ODF root, and a refusal that names the holder.

Holders are real processes (a small script that takes the lock and sleeps), so the tests
pin what the kernel does: the lock goes when its process dies, even by SIGKILL, and of
several processes racing for a dead run's lock exactly one gets it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reconciler.odf.lock import LockHolder, RepositoryLockedError, read_holder, repository_lock
from reconciler.odf.repository import OdfRepository

# Waits for the file argv[4] (a start line for racers), takes the lock of argv[1] as the
# command argv[2], says "took" and holds it argv[3] seconds; says the error when refused.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reconciler.odf.lock import RepositoryLockedError, repository_lock
    root, command, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    start = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    while start is not None and not start.exists():
        time.sleep(0.01)
    try:
        with repository_lock(root, command):
            print("took", flush=True)
            time.sleep(hold)
    except RepositoryLockedError as e:
        print(e, flush=True)
        sys.exit(1)
    """
)


def hold(root: Path, command: str, seconds: float, *start: Path) -> subprocess.Popen[str]:
    """A process holding ``root``'s lock, once it has printed "took"."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), command, str(seconds), *map(str, start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not start:
        assert process.stdout is not None
        assert process.stdout.readline() == "took\n"
    return process


def holder_line(root: Path, command: str, pid: int) -> str:
    record = read_holder(root)
    assert record is not None
    since = f"{record.since.astimezone(dt.UTC):%H:%M:%S}"
    return f"{root.name}/ is locked by {command} (pid {pid} on {socket.gethostname()}, since {since} UTC)"


def test_a_second_run_is_refused_at_once_with_one_line_naming_the_holder(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    holder = hold(root, "reconcile apply", 30)
    try:
        before = time.monotonic()
        with (
            pytest.raises(RepositoryLockedError) as refused,
            repository_lock(root, "reconcile push"),
        ):
            pass
        assert time.monotonic() - before < 1
        assert str(refused.value) == (
            holder_line(root, "reconcile apply", holder.pid)
            + "; retry later or pass --lock-timeout"
        )
        assert refused.value.holder == read_holder(root)
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_file_records_host_pid_start_time_and_command_as_json(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    with repository_lock(root, "reconcile push"):
        record = read_holder(root)
        assert record is not None
        assert (record.command, record.pid, record.host) == (
            "reconcile push",
            os.getpid(),
            socket.gethostname(),
        )
        assert before <= record.since <= dt.datetime.now(dt.UTC)
        assert LockHolder.from_json((root / ".lock").read_bytes()) == record
    # Released: the record goes with the lock, so nobody is named as holding it.
    assert (root / ".lock").read_bytes() == b""
    assert read_holder(root) is None


def test_a_run_that_waits_takes_the_lock_once_the_holder_ends(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    holder = hold(root, "reconcile apply", 1)
    before = time.monotonic()
    with repository_lock(root, "reconcile apply", timeout=60):
        waited = time.monotonic() - before
        record = read_holder(root)
        assert record is not None and record.pid == os.getpid()
    assert holder.wait() == 0
    assert 0.3 < waited < 30


def test_a_wait_that_runs_out_says_how_long_it_waited(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    holder = hold(root, "reconcile apply", 30)
    try:
        before = time.monotonic()
        with (
            pytest.raises(RepositoryLockedError) as refused,
            repository_lock(root, "reconcile apply", timeout=0.5),
        ):
            pass
        assert 0.5 <= time.monotonic() - before < 5
        assert str(refused.value) == (
            holder_line(root, "reconcile apply", holder.pid)
            + "; still locked after 0.5s; retry later or pass a longer --lock-timeout"
        )
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_killed_run_is_taken_over_at_once(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    holder = hold(root, "reconcile apply", 600)
    holder.send_signal(signal.SIGKILL)
    assert holder.wait() == -signal.SIGKILL
    # The dead run's record is still there, but its lock went with its process.
    record = read_holder(root)
    assert record is not None and record.pid == holder.pid
    with repository_lock(root, "reconcile apply"):
        record = read_holder(root)
        assert record is not None and record.pid == os.getpid()


def test_of_processes_racing_for_a_dead_runs_lock_exactly_one_gets_it(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    dead = hold(root, "reconcile apply", 600)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    start = tmp_path / "start"
    racers = [hold(root, "reconcile apply", 3, start) for _ in range(3)]
    time.sleep(1)  # every racer is waiting at the start line
    start.touch()
    outputs = {r.pid: r.communicate(timeout=60)[0] for r in racers}
    winners = [pid for pid, out in outputs.items() if out == "took\n"]
    assert len(winners) == 1, outputs
    host = re.escape(socket.gethostname())
    refused = (
        rf"odf/ is locked by reconcile apply \(pid {winners[0]} on {host}, since "
        r"\d\d:\d\d:\d\d UTC\); retry later or pass --lock-timeout\n"
    )
    for pid, out in outputs.items():
        if pid != winners[0]:
            assert re.fullmatch(refused, out), out
    assert sorted(r.returncode for r in racers) == [0, 1, 1]


def test_the_lock_is_shared_by_nested_holds_in_one_process(tmp_path: Path) -> None:
    root = tmp_path / "odf"
    with repository_lock(root, "reconcile apply"):
        with repository_lock(root, "reconcile apply"):
            pass
        # Still held after the inner hold ended: another process is refused.
        other = hold(root, "reconcile push", 0, tmp_path / "go")
        (tmp_path / "go").touch()
        assert other.communicate(timeout=60)[0].startswith("odf/ is locked by reconcile apply")
    assert read_holder(root) is None


def test_a_repository_takes_its_lock_in_its_root_folder(tmp_path: Path) -> None:
    repo = OdfRepository(tmp_path / "odf")
    with repo.lock("reconcile apply"):
        assert sorted(p.name for p in repo.root.iterdir()) == [".lock"]
        record = read_holder(repo.root)
        assert record is not None and record.command == "reconcile apply"


# Takes the flock of argv[1]'s lock file, says "locked", and writes its record only half a
# second later: the moment a new holder has the lock while a killed run's record is there.
SLOW_RECORD = textwrap.dedent(
    """
    import datetime as dt, fcntl, os, socket, sys, time
    from pathlib import Path
    from reconciler.odf.lock import LOCK_FILE, LockHolder
    fd = os.open(Path(sys.argv[1]) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(0.5)
    me = LockHolder("reconcile apply", os.getpid(), socket.gethostname(), dt.datetime.now(dt.UTC))
    os.ftruncate(fd, 0)
    os.pwrite(fd, me.to_json(), 0)
    sys.stdin.read()
    """
)


def test_a_run_refused_before_the_new_holders_record_names_it_not_the_dead_run(
    tmp_path: Path,
) -> None:
    """CI: of three runs racing for a killed run's lock, one refused named the killed
    run, whose record the winner had not yet replaced."""
    root = tmp_path / "odf"
    dead = hold(root, "reconcile apply", 600)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    record = read_holder(root)
    assert record is not None and record.pid == dead.pid
    slow = subprocess.Popen(
        [sys.executable, "-c", SLOW_RECORD, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert slow.stdout is not None and slow.stdout.readline() == "locked\n"
        with pytest.raises(RepositoryLockedError) as refused, repository_lock(root, "x"):
            pass
        assert str(refused.value) == (
            holder_line(root, "reconcile apply", slow.pid) + "; retry later or pass --lock-timeout"
        )
    finally:
        slow.kill()
        slow.wait()
