"""Ctrl-C while Spark's JVM starts: the stop waits for the start, and no JVM outlives us.

pyspark removes the folder the JVM writes its connection file into when a Ctrl-C
interrupts its wait; the JVM then failed to write it and ran on forever, in a session of
its own that no later signal reached. A real process, a real JVM, a real SIGINT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

START = """
from pathlib import Path
from reconciler.engine.session import SparkSettings, get_spark
get_spark(SparkSettings.load(Path({root!r}), {{}}))
print("started")
"""


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_while_spark_starts_stops_once_it_has_and_leaves_no_jvm(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.reconciler]\n")
    out, err = tmp_path / "out", tmp_path / "err"  # not pipes: a stray JVM would hold them
    child = subprocess.Popen(
        [sys.executable, "-c", START.format(root=str(tmp_path))],
        stdout=out.open("w"),
        stderr=err.open("w"),
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        # the suite may run with SIGINT ignored (a background job): a user's shell does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    jvms: set[int] = set()
    deadline = time.monotonic() + 60
    while not jvms and time.monotonic() < deadline and child.poll() is None:
        jvms = _children(child.pid)  # spark-submit, which becomes the JVM
        time.sleep(0.01)
    assert jvms, "Spark's launcher never started"
    child.send_signal(signal.SIGINT)
    child.wait(timeout=120)
    gone_by = time.monotonic() + 30
    while any(_alive(pid) for pid in jvms) and time.monotonic() < gone_by:
        time.sleep(0.2)
    left = [pid for pid in jvms if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # not to leave it running past a failed test

    assert left == []
    assert out.read_text() == ""  # the start finished, and the stop came before the next line
    assert "stopping once Spark has started (a few seconds)\n" in err.read_text()
    assert err.read_text().rstrip().endswith("KeyboardInterrupt")
    assert child.returncode == -signal.SIGINT
