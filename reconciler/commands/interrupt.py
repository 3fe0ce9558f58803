"""Ctrl-C (or SIGTERM) during an apply: stop at the next safe point, keeping what is done.

Safe points are between datasets and, inside a root dataset's pull, between the files
(iterations) it ingests, so every chain stays valid and no finished work is lost. The
first Ctrl-C asks for that stop; a second one stops at once (the pull at hand is rolled
back). SIGTERM, what a service manager, a container runtime or a CI runner's cancel
sends, is taken the same way, as Terraform takes it. A download or a container in
progress asks ``requested`` as it goes and is cut at the first signal
(``ingest.fetch.DownloadLimits.stop``): it has written nothing, and a slow server held
the stopping run until its end. pyspark installs its own handler when it
starts, so ``restore`` puts ours back after the engine's start.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


class _Stop:
    requested = False
    active = False
    at = 0.0  # when the first signal came (time.monotonic)


_ECHO_SECONDS = 1.0
"""A second signal this soon after the first is the same stop, sent twice: GNU timeout
(the workflow's time box) signals the reconciler, then its whole process group, which
holds the reconciler too; taken as "Ctrl-C again", it threw the pull at hand away. A
person pressing Ctrl-C again to stop at once does so later than that."""


_stop = _Stop()


def requested() -> bool:
    """Whether Ctrl-C was pressed since ``at_boundaries`` began."""
    return _stop.requested


def _handle(signum: int, frame: FrameType | None) -> None:
    if _stop.requested:
        if time.monotonic() - _stop.at < _ECHO_SECONDS:
            return
        raise KeyboardInterrupt
    _stop.requested, _stop.at = True, time.monotonic()
    again = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    sys.stderr.write(
        f"stopping at the next safe point, keeping what is done ({again} again to stop at once)\n"
    )
    sys.stderr.flush()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _unraisable(hook: Callable[[sys.UnraisableHookArgs], object]) -> Callable[..., None]:
    """``sys.unraisablehook`` for a second Ctrl-C that landed in code Python cannot raise
    from (a weak reference's callback during an import): Python printed "Exception
    ignored in" with a traceback, and dropped the stop. It is delivered again instead,
    to land in the next ordinary line; anything else goes to ``hook``."""

    def handle(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_type is KeyboardInterrupt and _stop.active:
            _stop.at = float("-inf")  # a second stop already, however soon it came
            signal.raise_signal(signal.SIGINT)
            return
        hook(unraisable)

    return handle


@contextmanager
def at_boundaries() -> Iterator[None]:
    """While inside, Ctrl-C asks ``requested()`` to become true instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread; there is nothing to catch here
        return
    previous = [signal.signal(number, _handle) for number in _SIGNALS]
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    _stop.requested, _stop.active = False, True
    try:
        yield
    finally:
        _stop.active = False
        sys.unraisablehook = hook
        for number, handler in zip(_SIGNALS, previous, strict=True):
            signal.signal(number, handler)


def restore() -> None:
    """Put our handlers back if pyspark replaced them while we were catching Ctrl-C."""
    if _stop.active and threading.current_thread() is threading.main_thread():
        for number in _SIGNALS:
            signal.signal(number, _handle)
