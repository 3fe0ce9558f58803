"""Spark's error messages, cut down to what a person reading a report needs.

An error raised through py4j carries the JVM's stack trace, and an analysis error the
analysed plan or the SQL echoed back; the first line says what went wrong. Spark also
ends that line with ``SQLSTATE: <code>``, which means nothing to the reader of a plan
or a run report. Every place that reports an engine error uses this one reduction, so
the same failure reads the same in ``--plan``, ``reconcile`` and ``reconcile sql``.
"""

from __future__ import annotations

import re

_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")


def first_line(text: str, fallback: str = "") -> str:
    """The first non-empty line of ``text`` without a trailing SQLSTATE; ``fallback``
    when there is none."""
    lines = text.strip().splitlines()
    return _SQLSTATE.sub("", lines[0]) if lines else fallback
