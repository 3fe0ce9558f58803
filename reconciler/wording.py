"""Counted nouns for messages, shared by the commands and the commit messages the git loop
writes, so both say ``1 dataset`` and ``1,212 records`` the same way; and text made safe
to show (``printable``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 dataset``, ``6 datasets``, ``1,212 records``, ``2 queries``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def close_names(name: str, candidates: Iterable[str], n: int = 1) -> list[str]:
    """The names among ``candidates`` that ``name`` most likely misspells, nearest first.

    Dataset names share long prefixes (``org.example.…``), which alone make any two of
    them look alike; so the last dotted parts must be alike too: ``org.example.order``
    may mean ``org.example.orders``, not ``org.example.d``."""
    last = name.rsplit(".", 1)[-1]
    return [
        match
        for match in difflib.get_close_matches(name, list(candidates), n=n * 4, cutoff=0.8)
        if difflib.SequenceMatcher(None, last, match.rsplit(".", 1)[-1]).ratio() >= 0.6
    ][:n]


def quoted(text: str) -> str:
    """``text`` in single quotes as the user wrote it, for a message.

    ``repr`` doubles each backslash, so a regex written ``\\d+`` was shown as ``\\\\d+``
    and no longer matched what the manifest says; control characters are still escaped,
    so a name cannot break the message's line."""
    inner = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return f"'{inner}'"


_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_CONTROLS_AND_NEWLINE = re.compile(f"{_CONTROLS.pattern[:-1]}\n]")


def printable(text: str, one_line: bool = False) -> str:
    """``text`` with the characters a terminal or a page acts on written as escapes: a
    pull request's file name with ESC cleared the reviewer's screen and printed a plan
    summary of its own, a BEL rang, BiDi overrides reorder what is shown, zero-width
    characters hide that two names differ, U+2028 breaks a line where a viewer honours
    it. Tabs stay; line breaks stay unless ``one_line``: a line of the text plan is one
    line by construction, so a line break in it came from a name and would start a
    forged line (``Plan: 0 to change``) of its own. A plan's JSON escapes them all."""
    pattern = _CONTROLS_AND_NEWLINE if one_line else _CONTROLS
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
