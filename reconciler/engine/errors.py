"""Spark's error messages, cut down to what a person reading a report needs.

An error raised through py4j carries the JVM's stack trace, and an analysis error the
analysed plan or the SQL echoed back; the first line says what went wrong. Spark also
ends that line with ``SQLSTATE: <code>``, which means nothing to the reader of a plan
or a run report. Nor does its advice to turn ANSI mode off "to bypass this error": the
reconciler fixes ANSI mode on (``engine.session.FIXED_CONF``, so that a bad cast fails
rather than writing NULL into a chain), and refuses a setting that turns it off, so
that advice is dropped too (Spark's other advice, such as ``try_divide``, is kept: it
works). Every place that reports an engine error uses this one reduction, so
the same failure reads the same in ``--plan``, ``reconcile`` and ``reconcile sql``.
``describe`` gives any error, engine or not, as one line for a run report.
"""

from __future__ import annotations

import re
import sys

from . import executor_watch
from .limits import RECURSION_LEVELS

_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")
# Spark's advice the reconciler does not let anyone follow, in words that can be followed:
# a query may not raise MAX RECURSION LEVEL past ``limits.RECURSION_LEVELS``.
_REWORDED = (
    (
        re.compile(
            r"Recursion level limit (\d+) reached but query has not exhausted, try increasing"
            r" it like 'WITH RECURSIVE t\(col\) MAX RECURSION LEVEL \d+'\."
        ),
        r"a recursive WITH went \1 levels deep and had not ended: a recursion may go at most"
        f" {RECURSION_LEVELS} levels deep (MAX RECURSION LEVEL can lower that, not raise it),"
        " so make it end sooner, e.g. with a WHERE on a level counter",
    ),
    (
        re.compile(
            r"Recursion row limit (\d+) reached but query has not exhausted, try setting a"
            r" larger LIMIT value when querying the CTE relation\."
        ),
        r"a recursive WITH made \1 rows and had not ended, the most a recursion may make"
        " (spark.sql.cteRecursionRowLimit): make it end sooner, e.g. with a WHERE on a level"
        " counter",
    ),
)
_ANSI_ADVICE = re.compile(
    r'\s*If necessary set "spark\.sql\.ansi\.enabled" to "false" to bypass this error\.'
)


def first_line(text: str, fallback: str = "") -> str:
    """The first non-empty line of ``text`` without a trailing SQLSTATE or the advice
    to turn ANSI mode off; ``fallback`` when there is none."""
    lines = text.strip().splitlines()
    return _reworded(_SQLSTATE.sub("", _ANSI_ADVICE.sub("", lines[0]))) if lines else fallback


def _reworded(line: str) -> str:
    for pattern, words in _REWORDED:
        line = pattern.sub(words, line)
    return line


def _is_store_error(error: BaseException) -> bool:
    """Whether ``error`` is the data store's, without importing the store (and pyarrow
    with it) into commands that never open one: if it is not loaded, it raised nothing."""
    store = sys.modules.get("reconciler.odf.store")
    return store is not None and isinstance(error, store.StoreError)


def describe(error: BaseException) -> str:
    """An error for the report: its type and message. Of an error raised by Spark or
    py4j only the first line is kept (the rest is the JVM's stack), with the deepest
    cause added when that line only says where it came from ("An exception was thrown
    from the Python worker:", "An error occurred while calling o243.collectToPython."):
    a full disk or a missing file must show without ``-v``. A job the executor watch
    cancelled is told by the watch's reason (``executor_watch``)."""
    text = str(error).strip()
    if _is_store_error(error):
        return text  # written for the user, naming the store: "StoreError" says nothing more
    if type(error).__module__.split(".")[0] in ("pyspark", "py4j"):
        cancelled = executor_watch.explains(text)
        if cancelled is not None:
            return cancelled
        first = first_line(text)
        cause = _deepest_cause(text) if _WRAPPER.search(first) else None
        text = f"{first.rstrip(':.')}: {cause}" if cause else first
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# A first line that says where an error came from, not what it is.
_WRAPPER = re.compile(r":$|^An error occurred while calling [\w.$]+\.$")
# A line naming an exception and its message: a Python traceback's last line, a JVM
# trace's head (after py4j's ": ") or one of its "Caused by:" lines.
_CAUSE = re.compile(r"^(?::\s*|Caused by:\s*)?([A-Za-z_][\w.$]*(?:Error|Exception)(?::\s.*)?)$")
_CAUSE_CHARS = 500


def _deepest_cause(text: str) -> str | None:
    """The last exception line of ``text`` after its first line, without SQLSTATE."""
    causes = [
        match[1]
        for line in text.splitlines()[1:]
        if (match := _CAUSE.match(line.strip())) is not None
    ]
    if not causes:
        return None
    cause = _reworded(_SQLSTATE.sub("", causes[-1]))
    return cause if len(cause) <= _CAUSE_CHARS else cause[: _CAUSE_CHARS - 1] + "…"
