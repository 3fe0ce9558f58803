"""Regexes a manifest supplies, compiled and run on RE2: linear time, whatever the pattern.

A manifest comes from a pull request nobody has reviewed yet, and so do the file names its
``fromPath`` pattern is matched against (the plan matches every file the next apply would
read). Python's ``re`` backtracks, so a crafted pair of pattern and name could take
exponential time: ``^(\\d{0,4})(?:1|11)*$`` against 46 ``1``s and a ``!`` ran for minutes,
and no inspection of the pattern catches every such shape. RE2 (``google-re2``) never
backtracks: a search takes time linear in the text (times the pattern's size) and
compiling stays within its memory budget, or fails. Its syntax is the one kamu's engine
(Rust's ``regex`` crate) follows; ``plan.patterns`` refuses what the two do not share.

Every pattern from a manifest goes through here, at plan and at apply alike; the project's
own fixed patterns stay on ``re``.

The text is matched as UTF-8 with ``surrogateescape``, so a file name that is not valid
UTF-8 (a byte Python decoded as a lone surrogate) is searched like any other, and a group
is given back as the very characters of the name it spans. RE2's ``\\d``, ``\\w``, ``\\s``
and ``\\b`` are ASCII-only (Python's and Rust's are Unicode); a date written in other
digits fails to parse with chrono in kamu anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2

_ERROR_CHARS = 120  # of RE2's message, which quotes the rest of the pattern from the error

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is the message it raises; not a line on stderr


class ManifestRegexError(ValueError):
    """RE2 refuses the pattern: the message is RE2's, cut and printable."""


@dataclass(frozen=True)
class RegexMatch:
    """A match of a manifest's regex in a text: its groups, by number or name."""

    _text: bytes
    _spans: tuple[tuple[int, int], ...]
    _names: dict[str, int]

    def group(self, group: int | str) -> str | None:
        """The text group ``group`` matched, or None when it took no part in the match."""
        index = self._names[group] if isinstance(group, str) else group
        start, end = self._spans[index]
        if start < 0:
            return None
        return self._text[start:end].decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class ManifestRegex:
    """A manifest's pattern, compiled by RE2."""

    pattern: str
    _compiled: Any

    @property
    def groups(self) -> int:
        """The number of capture groups, numbered from 1 by their opening parenthesis."""
        return int(self._compiled.groups)

    def search(self, text: str) -> RegexMatch | None:
        """The leftmost match anywhere in ``text`` (``re.search``'s semantics), or None."""
        encoded = text.encode("utf-8", "surrogateescape")
        found = self._compiled.search(encoded)
        if found is None:
            return None
        spans = tuple(found.span(i) for i in range(self.groups + 1))
        names = {str(k.decode("utf-8")): int(v) for k, v in self._compiled.groupindex.items()}
        return RegexMatch(encoded, spans, names)


def compile_regex(pattern: str) -> ManifestRegex:
    """``pattern`` compiled by RE2 (cached by the library); ManifestRegexError if refused."""
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise ManifestRegexError("the pattern is not valid Unicode text") from None
    try:
        return ManifestRegex(pattern, re2.compile(encoded, options=_OPTIONS))
    except re2.error as e:
        raise ManifestRegexError(_message(e)) from None


def _message(error: Exception) -> str:
    detail = error.args[0] if error.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(detail))
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "…"
