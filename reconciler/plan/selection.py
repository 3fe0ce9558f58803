"""``--select``: which datasets a command works on, in dbt's graph-operator syntax.

A selector is a dataset name, optionally with ``+`` before it (and every dataset it reads,
transitively), after it (and every dataset that reads it, transitively), or both. Several
selectors, in one option value separated by spaces or commas or in repeated options,
select their union. Selection is pure: it works on a dependency graph given as each
dataset's inputs, whether that graph comes from a plan or from the lineage of the
manifests and chains, so it is tested without a repository.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from ..wording import close_names
from .model import Action, Plan, Problem

Graph = Mapping[str, Collection[str]]
"""Each dataset's name and the names of the datasets it reads."""

_SEPARATORS = re.compile(r"[\s,]+")


class SelectionError(ValueError):
    """A selector that names no dataset, or is not a selector at all."""

    def __init__(self, message: str, names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.names = names


@dataclass(frozen=True)
class Selector:
    """One selector: ``name``, ``+name``, ``name+`` or ``+name+``."""

    name: str
    upstream: bool = False
    downstream: bool = False

    @classmethod
    def parse(cls, text: str) -> Selector:
        name = text.removeprefix("+").removesuffix("+")
        if not name or "+" in name:
            raise SelectionError(
                f"not a selector: {text!r} (expected name, +name, name+ or +name+)"
            )
        return cls(name, upstream=text.startswith("+"), downstream=text.endswith("+"))


def parse_selectors(values: Iterable[str]) -> list[Selector]:
    """Every selector of the option values, in order."""
    return [Selector.parse(part) for value in values for part in _SEPARATORS.split(value) if part]


def _with_nearest(name: str, graph: Graph) -> str:
    """``org.x.ordr (did you mean org.x.order?)``: the nearest dataset name, if close."""
    close = close_names(name, graph)
    return f"{name} (did you mean {close[0]}?)" if close else name


def select(graph: Graph, selectors: Iterable[Selector]) -> frozenset[str]:
    """The union of what each selector selects; every unknown name is reported at once."""
    chosen = list(selectors)
    unknown = sorted({s.name for s in chosen if s.name not in graph})
    if unknown:
        named = [_with_nearest(name, graph) for name in unknown]
        raise SelectionError("no such dataset: " + ", ".join(named), tuple(unknown))
    readers = _readers(graph)
    selected: set[str] = set()
    for selector in chosen:
        selected.add(selector.name)
        if selector.upstream:
            selected |= _reachable(selector.name, graph)
        if selector.downstream:
            selected |= _reachable(selector.name, readers)
    return frozenset(selected)


def plan_graph(plan: Plan) -> dict[str, tuple[str, ...]]:
    """The plan's dependency graph: each planned dataset and its inputs."""
    return {d.name: d.inputs for d in plan.datasets}


def with_inputs(graph: Graph, names: Iterable[str]) -> frozenset[str]:
    """``names`` and every dataset they read, transitively: what a selection's plan
    must analyse to know the columns its queries read."""
    return frozenset(names).union(*(_reachable(name, graph) for name in names))


def _readers(graph: Graph) -> dict[str, set[str]]:
    readers: dict[str, set[str]] = {name: set() for name in graph}
    for name, inputs in graph.items():
        for source in inputs:
            readers.setdefault(source, set()).add(name)
    return readers


def _reachable(start: str, edges: Graph) -> set[str]:
    """Every dataset reached from ``start`` along ``edges`` (not ``start`` itself, unless a
    cycle leads back to it); names outside the graph (unknown inputs) are left out."""
    found: set[str] = set()
    pending = list(edges.get(start, ()))
    while pending:
        name = pending.pop()
        if name in found or name not in edges:
            continue
        found.add(name)
        pending.extend(edges[name])
    return found


def restrict(plan: Plan, names: Collection[str]) -> Plan:
    """The plan of the selected datasets only, for showing and judging a selection.

    Problems are all kept: a broken manifest makes the whole repository's plan invalid,
    as a broken model fails a dbt project whatever is selected. Verdicts about datasets
    outside the selection are dropped; repository-wide verdicts stay. A selected
    dataset that reads one with no chain yet, left out of the selection, is a problem:
    apply could not name that input (``unmet_inputs``).
    """
    return replace(
        plan,
        datasets=tuple(d for d in plan.datasets if d.name in names),
        verdicts=tuple(v for v in plan.verdicts if v.dataset is None or v.dataset in names),
        problems=plan.problems + tuple(unmet_inputs(plan, names)),
        selection=tuple(sorted(names)),
    )


def unmet_inputs(plan: Plan, names: Collection[str]) -> list[Problem]:
    """An error for each selected dataset reading a dataset the plan creates (it has no
    chain yet) that the selection leaves out."""
    created = {d.name for d in plan.datasets if d.action is Action.CREATE}
    return [
        Problem(
            f"reads {name}, which has no chain yet and is not selected: select it too"
            f" (+{d.name} selects everything {d.name} reads)",
            dataset=d.name,
            location=d.manifest,
        )
        for d in plan.datasets
        if d.name in names
        for name in d.inputs
        if name in created and name not in names
    ]
