"""Ctrl-C and SIGTERM held back over a few seconds that must not be cut.

Two places need it. Spark's start: pyspark removes the folder its JVM writes a
connection file into when a Ctrl-C interrupts its wait; the JVM then fails to write it,
its main thread dies, and its gateway thread keeps it alive in a session of its own that
no later signal reaches, so every Ctrl-C during a start left a JVM running for good.
And a run's commit: a second Ctrl-C (stop at once) landing in ``git commit`` left the
finished chains uncommitted, which a CI checkout then throws away. Held, a stop comes
a moment later, and as it would have come.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held_signals(until: str) -> Iterator[list[int]]:
    """Inside, a Ctrl-C or SIGTERM is said (``stopping once {until}``) and kept in the
    list it gives (a signal to the process group has ended the children alive then, so
    what they did may need doing again); on the way out the first one kept is raised
    again, to whatever handler is then in force."""
    kept: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield kept  # signals reach only the main thread
        return

    def keep(signum: int, frame: object) -> None:
        if not kept:
            sys.stderr.write(f"stopping once {until}\n")
            sys.stderr.flush()
        kept.append(signum)

    previous = {number: signal.signal(number, keep) for number in _HELD}
    try:
        yield kept
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if kept:
            signal.raise_signal(kept[0])
