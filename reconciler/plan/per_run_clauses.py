"""The clauses of a query whose result depends on which rows arrive together.

A derivative's query sees, on each run, only the rows its inputs gained since the last
run (ODF's incremental model, as kamu runs it). A ``GROUP BY`` or ``DISTINCT`` then
groups per run, a join matches only rows that arrive in the same run, and a window sees
only the new rows: a day whose orders come in two runs gives two rows. That is what the
query means here, and a reviewer should read it so; the plan names such clauses beside
a new or changed query. Read from the text alone, outside strings, quoted names and
comments: a note, not an error, so a clause it misses or a name it mistakes costs little.
"""

from __future__ import annotations

import re

from ..odf import models
from ..sql_text import structure

_CLAUSES = (
    ("GROUP BY", re.compile(r"\bGROUP\s+BY\b", re.IGNORECASE)),
    ("DISTINCT", re.compile(r"\bDISTINCT\b", re.IGNORECASE)),
    ("JOIN", re.compile(r"\bJOIN\b", re.IGNORECASE)),
    ("a window (OVER)", re.compile(r"\bOVER\s*\(", re.IGNORECASE)),
)


def per_run_clauses(query: str) -> list[str]:
    """The clauses of ``query`` that see only one run's new rows, in a fixed order."""
    text = structure(query)
    return [name for name, pattern in _CLAUSES if pattern.search(text)]


def per_run_note(queries: list[str]) -> str | None:
    """The plan's note on a new or changed query, or None when it has no such clause."""
    found = [c for c in dict.fromkeys(c for q in queries for c in per_run_clauses(q))]
    if not found:
        return None
    return (
        f"each run reads only the rows its inputs gained since the last run, so its"
        f" {', '.join(found)} sees those rows, not the whole history (README: Transforms)"
    )


def sql_steps(event: models.SetTransform) -> list[str]:
    """The SQL of each step of the transform (none for another kind of transform)."""
    if not isinstance(event.transform, models.TransformSql):
        return []
    return [step.query for step in event.transform.normalized().queries or []]
