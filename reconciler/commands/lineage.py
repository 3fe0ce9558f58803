"""``reconcile lineage``: which datasets each dataset reads."""

from __future__ import annotations

import sys

import typer

from ..lineage.graph import lineage_graph, render_lineage
from .common import Session
from .options import LineageFormat


def run(session: Session, output_format: LineageFormat) -> None:
    graph = lineage_graph(session.config)
    for problem in graph.problems:
        typer.echo(f"warning: {problem.message}", err=True)
    sys.stdout.write(render_lineage(graph, output_format.value))
