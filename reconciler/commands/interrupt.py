"""Ctrl-C during an apply: finish the dataset at hand, then stop.

A dataset's pull is all or nothing, so stopping between datasets leaves every chain valid
and loses no finished work. The first Ctrl-C asks for that stop; a second one stops at
once (the dataset at hand is rolled back by its pull). pyspark installs its own handler
when it starts, so ``restore`` puts ours back after the engine's start.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class _Stop:
    requested = False
    active = False


_stop = _Stop()


def requested() -> bool:
    """Whether Ctrl-C was pressed since ``at_boundaries`` began."""
    return _stop.requested


def _handle(signum: int, frame: FrameType | None) -> None:
    if _stop.requested:
        raise KeyboardInterrupt
    _stop.requested = True
    sys.stderr.write("stopping after the current dataset (Ctrl-C again to stop at once)\n")
    sys.stderr.flush()


@contextmanager
def at_boundaries() -> Iterator[None]:
    """While inside, Ctrl-C asks ``requested()`` to become true instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread; there is nothing to catch here
        return
    previous = signal.signal(signal.SIGINT, _handle)
    _stop.requested, _stop.active = False, True
    try:
        yield
    finally:
        _stop.active = False
        signal.signal(signal.SIGINT, previous)


def restore() -> None:
    """Put our handler back if pyspark replaced it while we were catching Ctrl-C."""
    if _stop.active and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _handle)
