"""``reconcile lineage``: which datasets each dataset reads."""

from __future__ import annotations

import enum
import sys

import typer

from ..lineage.graph import lineage_graph, render_lineage
from .common import Session


class LineageFormat(enum.StrEnum):
    TEXT = "text"
    MERMAID = "mermaid"
    DOT = "dot"


def run(session: Session, output_format: LineageFormat) -> None:
    graph = lineage_graph(session.config)
    for problem in graph.problems:
        typer.echo(f"warning: {problem.message}", err=True)
    sys.stdout.write(render_lineage(graph, output_format.value))
