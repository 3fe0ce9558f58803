"""Patterns a manifest hands to an engine: the ``fromPath`` regex and Spark datetime formats.

Each is judged by parsing it, never by running it: a regex from an unreviewed pull request
is compiled and its syntax tree inspected, but never matched against anything at plan time.

The ``fromPath`` regex runs at ingest on Python's ``re`` (a backtracking engine), while
kamu, whose manifests these are, runs it on Rust's ``regex`` crate (linear time, no
backtracking). So a pattern must mean the same in both: constructs only Python has
(lookaround, backreferences, conditionals, atomic groups, possessive quantifiers) are
refused, since kamu would refuse the manifest; and a repetition nested in a repetition,
which Rust runs in linear time but Python can take exponential time on (``(a+)+``), is
refused because a crafted file name could stall ingest. Rust syntax Python lacks (such as
``(?<name>…)`` on Python 3.11) fails Python's compile and is reported with its error.
"""

from __future__ import annotations

import re
from re import _parser as sre  # type: ignore[attr-defined]
from typing import Any

_ONLY_PYTHON = {
    "ASSERT": "lookahead or lookbehind",
    "ASSERT_NOT": "negative lookahead or lookbehind",
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive quantifier",
}
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")

# Spark 3+ datetime patterns (sql-ref-datetime-pattern): the letters it parses with.
_SPARK_LETTERS = frozenset("GyDMLdQqahKkHmsSVzOXxZ")
_SPARK_WEEK_BASED = frozenset("YwuWec")
_SPARK_NOT_FOR_PARSING = frozenset("EF")
_SPARK_RESERVED = frozenset("#{}")


def regex_problem(pattern: str) -> str | None:
    """Why a ``fromPath`` pattern cannot be used, or None; it must also capture group 1,
    the text ingest parses as the event time."""
    try:
        compiled = re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        return f"is not a valid regular expression: {e}"
    construct = _portability_problem(sre.parse(pattern), inside_repeat=False)
    if construct is not None:
        return construct
    if compiled.groups < 1:
        return "has no capture group: group 1 must capture the time in the file name"
    return None


def _portability_problem(items: Any, inside_repeat: bool) -> str | None:
    """The first construct of a parsed regex that kamu's Rust engine lacks or that makes
    Python's engine backtrack exponentially, described for the manifest's author."""
    for op, av in items:
        name = str(op)
        if name in _ONLY_PYTHON:
            return f"uses {_ONLY_PYTHON[name]}, which kamu's regex engine (Rust) does not support"
        children: list[Any] = []
        repeats = False
        if name in _REPEATS:
            low, high, sub = av
            if inside_repeat and low != high:
                return (
                    "nests a repetition inside a repetition, which can take exponential time "
                    "in Python's backtracking regex engine on a crafted file name; "
                    "write it without the nesting"
                )
            children, repeats = [sub], high > 1
        elif name == "SUBPATTERN":
            children = [av[3]]
        elif name == "BRANCH":
            children = list(av[1])
        for child in children:
            found = _portability_problem(child, inside_repeat or repeats)
            if found is not None:
                return found
    return None


def spark_datetime_problem(pattern: str) -> str | None:
    """Why Spark refuses a ``dateFormat``/``timestampFormat`` pattern when it builds its
    parser, or None. It covers the refusals that do not depend on the data: letters Spark
    does not know, week-based letters (refused since Spark 3.0), ``E`` and ``F`` (not
    usable for parsing), reserved characters and an unterminated quote."""
    quoted = False
    for ch in pattern:
        if ch == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif ch in _SPARK_WEEK_BASED:
            return f"uses the week-based letter {ch!r}, which Spark 3 and later do not support"
        elif ch in _SPARK_NOT_FOR_PARSING:
            return f"uses the letter {ch!r}, which Spark cannot parse with"
        elif ch in _SPARK_RESERVED:
            return f"uses the reserved character {ch!r}"
        elif ch.isascii() and ch.isalpha() and ch not in _SPARK_LETTERS:
            return f"uses the letter {ch!r}, which is not a Spark datetime pattern letter"
    if quoted:
        return "has an unterminated quoted text (')"
    return None
