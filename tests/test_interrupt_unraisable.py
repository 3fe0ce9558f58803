"""A second Ctrl-C that lands where Python cannot raise it (a weak reference's callback
during an import) printed "Exception ignored in … Traceback" and was dropped; it is
delivered again, to stop the run at once as a second Ctrl-C does."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace

import pytest

from reconciler.commands import interrupt


def test_a_second_ctrl_c_python_could_not_raise_is_delivered_again() -> None:
    assert threading.current_thread() is threading.main_thread()  # signals go there only
    printed: list[object] = []
    before = sys.unraisablehook
    sys.unraisablehook = printed.append
    try:
        with pytest.raises(KeyboardInterrupt), interrupt.at_boundaries():
            interrupt._handle(2, None)  # the first Ctrl-C: stop after the dataset
            assert interrupt.requested()
            # the second, swallowed inside a callback: Python hands it to the hook
            sys.unraisablehook(SimpleNamespace(exc_type=KeyboardInterrupt))
            for _ in range(10_000):  # the signal is handled at the next line of Python
                pass
        other = SimpleNamespace(exc_type=ValueError)
        with interrupt.at_boundaries():
            sys.unraisablehook(other)  # anything else still goes to the previous hook
        assert printed == [other]
    finally:
        sys.unraisablehook = before


def test_the_same_stop_sent_twice_at_once_is_one_stop() -> None:
    """GNU timeout, the workflow's time box, signals the reconciler and then its process
    group, the reconciler included: taken as a second Ctrl-C, it threw the pull at hand
    away. A second signal within a second of the first is the same stop; a later one
    stops at once."""
    with interrupt.at_boundaries():
        interrupt._handle(2, None)
        interrupt._handle(2, None)  # the echo: no KeyboardInterrupt
        assert interrupt.requested()
        interrupt._stop.at -= 1.5  # as if the first came 1.5 s ago
        with pytest.raises(KeyboardInterrupt):
            interrupt._handle(2, None)
