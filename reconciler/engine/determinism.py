"""Which parts of an analysed query would give another result on another run.

ODF chains are replayed: ``verify`` re-runs every transform from the chain alone and
compares logical hashes, and a dataset's readers trust that the committed data is what
its query computes. A query that draws random numbers, reads the clock, numbers rows by
partition or samples its input commits data nobody can reproduce. The plan reports such
queries (the ``deterministic_queries`` policy decides how loudly), so this module only
tells which node or expression is to blame; the sandbox's walk over the analysed plan
asks it about every node it visits.

Spark marks most of them itself: an expression's ``deterministic`` flag is false for
``rand()``, ``uuid()``, ``shuffle()``, ``monotonically_increasing_id()``,
``spark_partition_id()``, ``input_file_name()`` and the like. The flag is inherited by
every expression above one of them, so only an expression that is non-deterministic
while its children are not is named. The clock and the caller are not flagged: Spark
folds ``current_timestamp()`` and its kin into one literal per query at optimisation,
which is deterministic *within* a run but not across runs, and ``current_user()`` is
whoever runs it; the analysed plan still holds them as their own expressions. So does
``aes_encrypt`` without an initialisation vector, which draws a random one per value.
``TABLESAMPLE`` is a ``Sample`` node of the plan, not an expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Expressions whose value depends on when or by whom the query runs (simple class names).
_RUN_DEPENDENT = frozenset(
    {
        "CurrentTimestamp",
        "Now",
        "CurrentDate",
        "LocalTimestamp",
        "CurrentTime",
        "CurrentUser",
    }
)
_AES_ENCRYPT = frozenset({"AesEncrypt", "TryAesEncrypt"})
_AES_IV_ARGUMENT = 4  # aes_encrypt(input, key, mode, padding, iv, aad)


@dataclass(frozen=True)
class Nondeterminism:
    """A function or clause that makes a query's result differ between runs, and the
    1-based line of the query it is on (when Spark kept it)."""

    what: str
    line: int | None = None


def plan_node(name: str) -> str | None:
    """What makes a plan node (by simple class name) non-deterministic, if anything."""
    return "TABLESAMPLE" if name == "Sample" else None


def expression(node: Any, name: str, children: list[Any]) -> str | None:
    """The function to name if ``node`` (a JVM expression, of simple class ``name``) is
    itself a source of non-determinism, as ``rand()``; None otherwise."""
    if name in _RUN_DEPENDENT:
        return f"{node.prettyName()}()"
    if name in _AES_ENCRYPT and _random_iv(children):
        return f"{node.prettyName()}() without an initialisation vector"
    if not node.deterministic() and all(child.deterministic() for child in children):
        return f"{node.prettyName()}()"
    return None


def _random_iv(children: list[Any]) -> bool:
    """Whether Spark draws the vector itself: no ``iv`` argument, or an empty one."""
    if len(children) <= _AES_IV_ARGUMENT:
        return True
    iv = children[_AES_IV_ARGUMENT]
    if not iv.foldable():
        return False
    value = iv.eval(None)
    return value is None or len(value) == 0
