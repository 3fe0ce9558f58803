"""How large a query's plan becomes once Spark replaces each reference by what it names.

Spark's analyser substitutes a ``WITH`` query wherever its name is read, and a step of a
transform reads earlier steps as views whose plans it embeds; a query from a pull request
can read each of a chain of names twice (``c2 AS (SELECT * FROM c1 UNION ALL SELECT *
FROM c1)``, and so on), and a parsed plan of a few hundred operators then stands for
millions. Twelve such levels took the analyser 4 seconds, fourteen 12, twenty-two ran the
plan's JVM out of memory after a minute and a half, with an error that named no dataset.
So the parsed plan is measured first, each name counted as the size of what it names,
and a query beyond what any person writes is refused before analysis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..sql_text import structure
from .sandbox import node_types, scala_seq

MAX_INLINED = 20_000
"""Operators a step may come to with every reference replaced (twelve doubling levels of
``WITH``, about four seconds of analysis here); hand-written queries stay in the hundreds."""


_WITH = re.compile(r"\bwith\b", re.IGNORECASE)


def step_size(plan: Any, jvm: Any, query: str, views: Mapping[str, int]) -> tuple[int, bool]:
    """``inlined_size`` of a step, and whether it was measured: only a step with a
    ``WITH`` or naming an earlier step (``views``) can stand for more than its text, and
    measuring costs a JVM round trip per node (a second for 1,700 of them). Any other
    step is as large as its text, taken as its word count."""
    lowered = query.lower()
    if _WITH.search(structure(query)) or any(name.lower() in lowered for name in views):
        return inlined_size(plan, jvm, views), True
    return len(query.split()), False


def inlined_size(plan: Any, jvm: Any, views: Mapping[str, int], limit: int = MAX_INLINED) -> int:
    """The operators and expressions of a parsed query (a JVM ``LogicalPlan``) with each
    ``WITH`` name and each view of ``views`` (name: its own inlined size) counted as
    what it names; counting stops once past ``limit``. A name defined twice counts as
    its latest definition: an estimate, exact for the doubling that matters."""
    types = node_types(jvm)
    sizes = {name.lower(): size for name, size in views.items()}

    def count(root: Any) -> int:
        total, stack = 0, [root]
        while stack and total <= limit:
            node = stack.pop()
            kind, kinds = types.of(node)
            total += 1
            if kind == "UnresolvedWith":
                for pair in scala_seq(node.cteRelations()):
                    sizes[str(pair._1()).lower()] = count(pair._2())
                stack.extend(scala_seq(node.children()))
            elif kind == "UnresolvedRelation":
                parts = [str(part) for part in scala_seq(node.multipartIdentifier())]
                total += sizes.get(parts[0].lower(), 0) if len(parts) == 1 else 0
            else:
                stack.extend(scala_seq(node.children()))
                if "plan" in kinds:
                    stack.extend(scala_seq(node.innerChildren()))
                    stack.extend(scala_seq(node.expressions()))
        return total

    return count(plan)
