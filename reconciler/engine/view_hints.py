"""Spark's "table not found" errors, told in terms of the views a query may read.

A transform reads its inputs and earlier steps, and ``reconcile sql`` the datasets, all
as temporary views; there is no schema or catalog to speak of. Spark's advice ("Verify
the spelling and correctness of the schema and catalog") therefore never helps, and a
dotted dataset name left unquoted (``FROM org.example.orders``), the most common slip,
fails as "spark_catalog requires a single-part namespace", which names neither the
mistake nor its fix. Both are rewritten here, from the names the caller knows; any
other message is left as it is. Pure string work: the plan's and run's query checks
and ``reconcile sql`` share it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..wording import close_names

_IDENTIFIER = r"((?:`[^`]*`\.)*`[^`]*`)"  # Spark quotes each part: `a`.`b`
_NOT_FOUND = re.compile(r"\[TABLE_OR_VIEW_NOT_FOUND\] The table or view " + _IDENTIFIER)
_UNQUOTED = re.compile(r"\[REQUIRES_SINGLE_PART_NAMESPACE\] .* got identifier " + _IDENTIFIER)
_LISTED = 8  # names listed when none is close: more would bury the message


def with_view_hint(
    message: str,
    candidates: Sequence[str],
    reason: Callable[[str], str | None] = lambda _: None,
    *,
    listed: bool = True,
    reader: str = "this step",
) -> str:
    """``message`` saying what to do when it is a view the query could not find.

    ``candidates`` are the names the query could have meant (a transform's inputs and
    earlier steps; the repository's datasets); ``reason`` may explain a name the caller
    knows but the query could not read (a dataset with no data yet, say). With
    ``listed``, a few candidates none of which is close are named: a transform's
    inputs, which are few and all readable, as what ``reader`` (``this step``, or ``the
    query`` of a transform written with ``query:``, which has no steps) may read.
    """
    unquoted = _UNQUOTED.search(message)
    if unquoted is not None:
        return _unquoted(_joined(unquoted.group(1)))
    found = _NOT_FOUND.search(message)
    if found is None:
        return message
    table = _joined(found.group(1))
    if "`.`" in found.group(1):  # qualified: only a view's dotted name, unquoted, is ours
        known = {n.lower() for n in candidates}
        return _unquoted(table) if table.lower() in known else message
    hint = reason(table)
    close = close_names(table, candidates, n=3)
    if hint is None and close:
        hint = "did you mean " + " or ".join(f"`{n}`" for n in close) + "?"
    if hint is None and listed and 0 < len(candidates) <= _LISTED:
        hint = f"{reader} may read " + ", ".join(f"`{n}`" for n in candidates)
    return f"{found.group(0)} cannot be found: {hint}" if hint else message


def _unquoted(name: str) -> str:
    return f"a dotted name must be quoted in backticks: `{name}`"


def _joined(identifier: str) -> str:
    """```a`.`b``` as ``a.b``."""
    return ".".join(part.strip("`") for part in identifier.split("`.`"))
