"""The lineage view: which datasets each dataset reads, as a tree, Mermaid or DOT.

Why: "what feeds this dataset?" and "what does a change here reach?" are the first
questions in a review, and a picture in the pull request answers them (GitHub renders
Mermaid; Graphviz renders DOT for larger graphs). The graph comes from the manifests,
the desired state, so a pull request shows the lineage it would create; the chains add
the datasets that exist only as chains (orphaned: their manifest is gone), so nothing
that the repository still holds is hidden. Like a plan, it reads files only: no Spark,
no git.

Inputs are the last ``SetTransform``'s, named by dataset: a ``did:odf:`` reference
resolves through the chains' dataset ids; a reference that names no dataset stays as
written and is shown as unknown (``???``), as ``kamu inspect lineage`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..config import RepoConfig
from ..odf import models
from ..odf.repository import OdfRepository
from ..plan.builder import read_actual
from ..plan.desired import load_desired, transform_inputs
from ..plan.model import Problem

LineageFormat = Literal["text", "mermaid", "dot"]


@dataclass(frozen=True)
class LineageNode:
    """One dataset and the datasets it reads."""

    name: str
    kind: models.DatasetKind
    inputs: tuple[str, ...] = ()  # dataset names; a reference naming none, as written
    orphaned: bool = False  # a chain whose manifest is gone


@dataclass(frozen=True)
class LineageGraph:
    """Every dataset of the repository by name, and what went wrong reading them."""

    nodes: Mapping[str, LineageNode]
    problems: tuple[Problem, ...] = field(default=())

    def names(self) -> list[str]:
        return sorted(self.nodes)

    def inputs_of(self, name: str) -> list[str]:
        """The distinct inputs of ``name``, sorted; none for an unknown dataset."""
        node = self.nodes.get(name)
        return sorted(set(node.inputs)) if node else []

    def edges(self) -> list[tuple[str, str]]:
        """``(input, reader)`` pairs, sorted."""
        return sorted((i, n) for n in self.nodes for i in self.inputs_of(n))

    def unknown(self) -> list[str]:
        """Inputs that name no dataset of the repository, sorted."""
        return sorted({i for n in self.nodes for i in self.inputs_of(n)} - set(self.nodes))


def lineage_graph(config: RepoConfig) -> LineageGraph:
    """The repository's lineage: manifests first, then chains that have no manifest."""
    repo = OdfRepository(config.odf_dir)
    actual, chain_problems = read_actual(repo)
    ids = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}
    desired = load_desired(config.manifest_paths(), ids)

    def resolve(refs: list[str]) -> tuple[str, ...]:
        return tuple(ids.get(ref, ref) for ref in refs)

    nodes: dict[str, LineageNode] = {}
    for name, ds in desired.datasets.items():
        refs = [i.dataset_ref for i in transform_inputs(ds.snapshot)]
        nodes[name] = LineageNode(name, ds.snapshot.kind, resolve(refs))
    for name, state in actual.items():
        if name in nodes:
            continue
        refs = [i.dataset_ref for i in state.transform.inputs] if state.transform else []
        kind = state.kind or (
            models.DatasetKind.DERIVATIVE if state.transform else models.DatasetKind.ROOT
        )
        nodes[name] = LineageNode(name, kind, resolve(refs), orphaned=True)
    return LineageGraph(
        nodes={n: nodes[n] for n in sorted(nodes)},
        problems=(*desired.problems, *chain_problems),
    )


def render_lineage(graph: LineageGraph, fmt: LineageFormat) -> str:
    """The graph as text, ending in a newline."""
    if fmt == "text":
        return render_text(graph)
    if fmt == "mermaid":
        return render_mermaid(graph)
    if fmt == "dot":
        return render_dot(graph)
    raise ValueError(f"unknown lineage format {fmt!r}")


# Text: every dataset with the tree of what it reads, like `kamu inspect lineage`.


def render_text(graph: LineageGraph) -> str:
    lines: list[str] = []
    for name in graph.names():
        lines.append(_text_label(graph, name))
        _text_inputs(graph, name, "", (name,), lines)
    return "".join(line + "\n" for line in lines)


def _text_inputs(
    graph: LineageGraph, name: str, prefix: str, path: tuple[str, ...], lines: list[str]
) -> None:
    inputs = graph.inputs_of(name)
    for i, child in enumerate(inputs):
        last = i == len(inputs) - 1
        label = _text_label(graph, child)
        if child in path:  # a cycle: chains cannot form one, but a broken repo might
            lines.append(f"{prefix}{'└── ' if last else '├── '}{label} (cycle)")
            continue
        lines.append(f"{prefix}{'└── ' if last else '├── '}{label}")
        _text_inputs(graph, child, prefix + ("    " if last else "│   "), (*path, child), lines)


def _text_label(graph: LineageGraph, name: str) -> str:
    node = graph.nodes.get(name)
    if node is None:
        return f"{name}: ???"
    return f"{name}: {node.kind.value}" + (" (orphaned)" if node.orphaned else "")


# Mermaid: a left-to-right flowchart, roots as rectangles, derivatives rounded.

_MERMAID_CLASSES = (
    "classDef root fill:#e0f2fe,stroke:#0369a1",
    "classDef derivative fill:#dcfce7,stroke:#15803d",
    "classDef orphaned stroke-dasharray: 5 5",
    "classDef unknown fill:#fee2e2,stroke:#b91c1c",
)
# Words a Mermaid flowchart line may start with: as node ids they would be read as syntax.
_MERMAID_KEYWORDS = frozenset(
    {"end", "graph", "flowchart", "subgraph", "style", "class", "classdef", "click"}
    | {"linkstyle", "direction", "call", "href", "default"}
)


def render_mermaid(graph: LineageGraph) -> str:
    ids = _mermaid_ids([*graph.names(), *graph.unknown()])
    lines = ["graph LR"]
    for name in graph.names():
        node = graph.nodes[name]
        label = _mermaid_text(name + (" (orphaned)" if node.orphaned else ""))
        if node.kind is models.DatasetKind.ROOT:
            lines.append(f'    {ids[name]}["{label}"]:::root')
        else:
            lines.append(f'    {ids[name]}("{label}"):::derivative')
    for ref in graph.unknown():
        lines.append(f'    {ids[ref]}["{_mermaid_text(ref)}: ???"]:::unknown')
    lines += [f"    {ids[i]} --> {ids[n]}" for i, n in graph.edges()]
    orphaned = [ids[n] for n in graph.names() if graph.nodes[n].orphaned]
    if orphaned:
        lines.append(f"    class {','.join(orphaned)} orphaned")
    lines += [f"    {c}" for c in _MERMAID_CLASSES]
    return "".join(line + "\n" for line in lines)


def _mermaid_ids(names: list[str]) -> dict[str, str]:
    """A distinct Mermaid id per name: letters, digits and ``_`` only, never a keyword."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if base.lower() in _MERMAID_KEYWORDS or not base[:1].isalpha():
            base = f"ds_{base}"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        ids[name] = candidate
        taken.add(candidate)
    return ids


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


# DOT: Graphviz, roots as boxes, derivatives as ellipses, names quoted as they are.


def render_dot(graph: LineageGraph) -> str:
    lines = ["digraph lineage {", "    rankdir=LR;", "    node [style=filled];"]
    for name in graph.names():
        node = graph.nodes[name]
        root = node.kind is models.DatasetKind.ROOT
        kind = node.kind.value + (" (orphaned)" if node.orphaned else "")
        attrs = [
            f'label="{_dot_text(name)}\\n{kind}"',
            "shape=box" if root else "shape=ellipse",
            'fillcolor="#e0f2fe"' if root else 'fillcolor="#dcfce7"',
        ]
        if node.orphaned:
            attrs.append('style="filled,dashed"')
        lines.append(f"    {_dot_id(name)} [{', '.join(attrs)}];")
    for ref in graph.unknown():
        attrs = [
            f'label="{_dot_text(ref)}\\n???"',
            "shape=box",
            'fillcolor="#fee2e2"',
            'style="filled,dotted"',
        ]
        lines.append(f"    {_dot_id(ref)} [{', '.join(attrs)}];")
    lines += [f"    {_dot_id(i)} -> {_dot_id(n)};" for i, n in graph.edges()]
    lines.append("}")
    return "".join(line + "\n" for line in lines)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_id(name: str) -> str:
    return f'"{_dot_text(name)}"'
