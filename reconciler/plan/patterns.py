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
manifest. So is what both accept but read differently: in a character class Rust reads
``[`` as a nested class and ``&&``, ``--``, ``~~`` as set operations, where RE2 reads
characters, and ``\\<``, ``\\>`` are word boundaries to Rust (since regex 1.10) but
characters to RE2.
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
# What Rust's ``regex`` reads inside a class as an operation on the classes either side.
_CLASS_ESCAPES = frozenset("dDsSwWpP")  # escapes that stand for a class, not a character
_NOT_RANGE = ("]", "-", "")  # what after a dash in a class makes it a dash, not a range
_SET_OPERATIONS = {"&&": "intersection", "--": "difference", "~~": "symmetric difference"}

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
    """The first piece of syntax RE2 accepted that kamu's engine refuses or reads otherwise,
    described; None when there is none. A scan of the text as RE2 reads it: escapes,
    classes (with their ``[:name:]``) and counted repetitions."""
    i, end = 0, len(pattern)
    while i < end:
        ch = pattern[i]
        if ch == "\\":
            problem, i = _escape(pattern, i)
        elif ch == "[":
            problem, i = _class(pattern, i)
        elif ch == "{":
            problem, i = _counted(pattern, i)
        else:
            problem, i = None, i + 1
        if problem is not None:
            return problem
    return None


def _escape(pattern: str, i: int) -> tuple[str | None, int]:
    """The escape at ``pattern[i]`` (a backslash): what Rust reads otherwise, and its end."""
    escaped = pattern[i + 1 : i + 2]
    if escaped == "C":
        return f"uses \\C (any single byte), which {_RUST}", i
    if escaped == "Q":
        return f"uses \\Q…\\E quoting, which {_RUST}: escape each character with \\", i
    if escaped.isdigit():
        octal = _OCTAL.match(pattern, i + 1)
        code = octal.group() if octal else escaped
        return f"uses the octal escape \\{code}, which {_RUST}: write \\x{{…}}", i
    if escaped in ("<", ">"):
        return (
            f"uses \\{escaped} (a word boundary in kamu's regex engine (Rust), a literal "
            f"{escaped} in RE2): write {escaped} for the character"
        ), i
    if escaped in ("p", "P", "x") and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i)
        return None, len(pattern) if close < 0 else close + 1
    if escaped in ("p", "P"):  # ``\pL``: a one-letter class name
        return None, i + 3
    return None, i + 2


def _class(pattern: str, i: int) -> tuple[str | None, int]:
    """The character class opened at ``pattern[i]``, read as Rust's ``regex`` reads one:
    a ``[`` in it opens a nested class unless it starts a ``[:name:]``, ``&&``, ``--`` and
    ``~~`` are set operations, and leading dashes are each a dash. RE2 reads all of these
    as characters, so each is refused where the two readings differ."""
    end = len(pattern)
    i += 1
    i += pattern[i : i + 1] == "^"
    dashes = len(pattern[i:]) - len(pattern[i:].lstrip("-"))
    if dashes > 1 and pattern[i + dashes : i + dashes + 1] != "]":
        return (
            f"starts a character class with {'-' * dashes}, which kamu's regex engine (Rust) "
            "reads as dashes and RE2 as a range: write \\- for each dash"
        ), i
    i += dashes
    if not dashes and pattern[i : i + 1] == "]":
        if pattern[i + 1 : i + 2] == "-" and pattern[i + 2 : i + 3] not in ("]", ""):
            return (
                "starts a character class with ]-, which RE2 reads as a range from ] and "
                "kamu's regex engine (Rust) as the characters: write \\] and \\-"
            ), i
        i += 1
    while i < end:
        two = pattern[i : i + 2]
        if pattern[i] == "]":
            return None, i + 1
        if two in _SET_OPERATIONS:
            return (
                f"uses the class set operation {two} ({_SET_OPERATIONS[two]}), which kamu's "
                "regex engine (Rust) applies inside a character class and RE2 reads as "
                f"characters: write the class out, and \\{two[0]} for the character"
            ), i
        if two == "[:":
            # ``[:alpha:]``: RE2 refuses an unknown name, so an accepted one is this close.
            close = pattern.find(":]", i + 2, i + 12)
            if close >= 0:
                i = close + 2
                continue
        if pattern[i] == "[":
            return (
                "uses [ inside a character class, which kamu's regex engine (Rust) reads as "
                "a nested class: write \\[ for the character"
            ), i
        start = i
        problem, i = _class_character(pattern, i)
        # ``x-y`` is a range (its end a character), unless ``]`` or ``-`` follows the dash.
        if (
            problem is None
            and pattern[i : i + 1] == "-"
            and pattern[i + 1 : i + 2] not in _NOT_RANGE
        ):
            if pattern[start] == "\\" and pattern[start + 1 : start + 2] in _CLASS_ESCAPES:
                return (
                    f"uses {pattern[start:i]}- in a character class, a range from a class "
                    "that kamu's regex engine (Rust) refuses and RE2 reads as a dash: "
                    "write \\- for the dash"
                ), start
            problem, i = _class_character(pattern, i + 1)
        if problem is not None:
            return problem, i
    return None, i


def _class_character(pattern: str, i: int) -> tuple[str | None, int]:
    return _escape(pattern, i) if pattern[i] == "\\" else (None, i + 1)


def _counted(pattern: str, i: int) -> tuple[str | None, int]:
    """The counted repetition at ``pattern[i]`` (a ``{``): RE2 takes a ``{`` that is not
    one as a character, Rust refuses it; and neither counts past ``_MAX_REPEAT``."""
    counted = _COUNTED.match(pattern, i)
    if counted is None:
        return (
            "uses { as a character, which kamu's regex engine (Rust) reads as a "
            "counted repetition ({n}, {n,} or {n,m}): write \\{ for the character"
        ), i
    if any(_too_many(n) for n in counted.groups() if n):
        return (
            f"has the repetition {counted.group()}, which is too large (at most {_MAX_REPEAT})"
        ), i
    return None, counted.end()


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
