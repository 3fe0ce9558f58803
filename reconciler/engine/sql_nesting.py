"""How deeply a query nests its parentheses, read without Spark.

Spark's parser is recursive: a query nested a thousand parentheses deep overflows the
JVM thread's stack, and the error that comes back names neither the manifest nor the
line (``java.lang.StackOverflowError``). A query from a pull request may be written to do
just that, so the depth is measured here first, skipping what is not SQL structure
(string literals, quoted identifiers, comments), and a query deeper than any person
writes is refused at the line where it goes too deep.
"""

from __future__ import annotations

import re

from ..sql_text import structure

MAX_NESTING = 200
"""Parentheses a query may nest (Spark's parser failed from about 500 on, with 2 MiB of
thread stack); hand-written SQL stays within a few dozen."""

_PARENTHESIS = re.compile(r"[()]")


def too_deep(query: str, limit: int = MAX_NESTING) -> int | None:
    """The 1-based line where ``query`` first nests parentheses deeper than ``limit``,
    or None when it never does."""
    depth = 0
    for token in _PARENTHESIS.finditer(structure(query)):
        if token.group() == "(":
            depth += 1
            if depth > limit:
                return query.count("\n", 0, token.start()) + 1
        else:
            depth = max(depth - 1, 0)
    return None
