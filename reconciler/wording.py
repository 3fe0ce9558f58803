"""Counted nouns for messages, shared by the commands and the commit messages the git loop
writes, so both say ``1 dataset`` and ``1,212 records`` the same way."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 dataset``, ``6 datasets``, ``1,212 records``, ``2 queries``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
