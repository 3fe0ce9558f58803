"""A query's text with what is not SQL structure blanked out, read without Spark.

String literals, quoted identifiers and comments can hold any word or parenthesis, so
the checks that read a query's text (how deep it nests, which clauses it uses) read it
with those blanked: each character becomes a space and each line break stays, so an
offset or line in the result is the same in the query as written.
"""

from __future__ import annotations

import re

# Spark reads both '' and \' inside a string literal as a quote; an unterminated token
# runs to the end of the text.
_NOT_STRUCTURE = re.compile(
    r"""'(?:[^'\\]|\\.|'')*'?"""  # a string literal
    r"""|"(?:[^"\\]|\\.|"")*"?"""  # a double-quoted string literal
    r"|`(?:[^`]|``)*`?"  # a quoted identifier
    r"|--[^\n]*"  # a line comment
    r"|/\*.*?(?:\*/|\Z)",  # a block comment (a nested one ends early: its rest is read)
    re.DOTALL,
)


def structure(query: str) -> str:
    """``query`` with its literals, quoted names and comments blanked, lines kept."""
    return _NOT_STRUCTURE.sub(_blank, query)


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group())
