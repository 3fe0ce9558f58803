"""Patterns a manifest hands to an engine: the ``fromPath`` regex and Spark datetime formats.

A ``fromPath`` regex comes from an unreviewed pull request, and so do the file names it is
matched against: plan and apply alike compile and run it on RE2 (``manifest_regex``), which
never backtracks, so matching takes time linear in the name whatever the pattern. kamu,
whose manifests these are, runs it on Rust's ``regex`` crate, whose syntax RE2's is close
to. So a pattern must mean the same in both: one RE2 refuses is refused with RE2's error,
or, for what only backtracking engines have (lookaround, backreferences, conditionals,
atomic groups, possessive quantifiers), with the construct's name; and what RE2 accepts but
Rust refuses (``\\C``, ``\\Q…\\E``, octal escapes, a ``{`` that is not a counted
repetition, which RE2 takes as a character) is refused too, since kamu would refuse the
manifest.
"""

from __future__ import annotations

import re
from re import _parser as sre  # type: ignore[attr-defined]
from typing import Any

from ..manifest_regex import ManifestRegexError, compile_regex

_RUST = "kamu's regex engine (Rust) does not support"
_ONLY_BACKTRACKING = {
    "ASSERT": "lookahead or lookbehind",
    "ASSERT_NOT": "negative lookahead or lookbehind",
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive quantifier",
}
_MAX_REPEAT = 1000  # RE2's largest repetition count
_COUNTED = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
_OCTAL = re.compile(r"[0-7]{1,3}")

# Spark 3+ datetime patterns (sql-ref-datetime-pattern): the letters it parses with.
_SPARK_LETTERS = frozenset("GyDMLdQqahKkHmsSVzOXxZ")
_SPARK_WEEK_BASED = frozenset("YwuWec")
_SPARK_NOT_FOR_PARSING = frozenset("EF")
_SPARK_RESERVED = frozenset("#{}")


def regex_problem(pattern: str) -> str | None:
    """Why a ``fromPath`` pattern cannot be used, or None; it must also capture group 1,
    the text ingest parses as the event time. Nothing is matched here: the pattern is
    compiled by RE2 and its text scanned."""
    try:
        compiled = compile_regex(pattern)
    except ManifestRegexError as e:
        return _only_backtracking(pattern) or f"is not a valid regular expression: {e}"
    construct = _not_in_rust(pattern)
    if construct is not None:
        return construct
    if compiled.groups < 1:
        return "has no capture group: group 1 must capture the time in the file name"
    return None


def _only_backtracking(pattern: str) -> str | None:
    """For a pattern RE2 refused, the construct of backtracking engines that it uses, as
    Python's parser finds it (None when Python cannot parse it either, or finds none)."""
    try:
        parsed = sre.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    try:
        return _backtracking_construct(parsed)
    except RecursionError:
        return None


def _backtracking_construct(items: Any) -> str | None:
    for op, av in items:
        name = str(op)
        if name in _ONLY_BACKTRACKING:
            return f"uses {_ONLY_BACKTRACKING[name]}, which {_RUST}"
        children: list[Any] = []
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            children = [av[2]]
        elif name == "SUBPATTERN":
            children = [av[3]]
        elif name == "BRANCH":
            children = list(av[1])
        for child in children:
            found = _backtracking_construct(child)
            if found is not None:
                return found
    return None


def _not_in_rust(pattern: str) -> str | None:
    """The first piece of syntax RE2 accepted that kamu's engine refuses, described; None
    when there is none. A scan of the text as RE2 reads it: escapes, classes (with their
    ``[:name:]``) and counted repetitions."""
    i, in_class, end = 0, False, len(pattern)
    while i < end:
        ch = pattern[i]
        if ch == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped == "C":
                return f"uses \\C (any single byte), which {_RUST}"
            if escaped == "Q":
                return f"uses \\Q…\\E quoting, which {_RUST}: escape each character with \\"
            if escaped.isdigit():
                octal = _OCTAL.match(pattern, i + 1)
                code = octal.group() if octal else escaped
                return f"uses the octal escape \\{code}, which {_RUST}: write \\x{{…}}"
            if escaped in ("p", "P", "x") and pattern[i + 2 : i + 3] == "{":
                close = pattern.find("}", i)
                i = end if close < 0 else close + 1
            else:
                i += 2
        elif in_class:
            # ``[:alpha:]``: RE2 refuses an unknown name, so an accepted one is this close.
            close = pattern.find(":]", i + 2, i + 12) if pattern[i : i + 2] == "[:" else -1
            in_class = ch != "]"
            i = close + 2 if close >= 0 else i + 1
        elif ch == "[":
            in_class, i = True, i + 1
            i += pattern[i : i + 1] == "^"
            i += pattern[i : i + 1] == "]"
        elif ch == "{":
            counted = _COUNTED.match(pattern, i)
            if counted is None:
                return (
                    "uses { as a character, which kamu's regex engine (Rust) reads as a "
                    "counted repetition ({n}, {n,} or {n,m}): write \\{ for the character"
                )
            if any(_too_many(n) for n in counted.groups() if n):
                return (
                    f"has the repetition {counted.group()}, which is too large "
                    f"(at most {_MAX_REPEAT})"
                )
            i = counted.end()
        else:
            i += 1
    return None


def _too_many(count: str) -> bool:
    digits = count.lstrip("0")
    return len(digits) > len(str(_MAX_REPEAT)) or int(digits or "0") > _MAX_REPEAT


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
