"""The ``reconcile`` command line: people read text, machines read JSON, exit codes tell CI.

The CLI only parses options, calls the library and renders results or errors; no
library module prints.
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from . import log_view
from .apply_metadata import apply_metadata
from .config import ConfigError, RepoConfig
from .gitops import GitError
from .odf import Timestamp
from .odf.repository import OdfRepository, RepositoryError
from .plan.model import Plan
from .plan.policies import PolicyError
from .plan.render_json import render_json
from .plan.render_markdown import render_markdown
from .plan.render_text import render_text
from .planning import PlanRequest, make_plan

app = typer.Typer(
    add_completion=False,
    help="GitOps reconciler for Open Data Fabric datasets: plan, apply and verify chains.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


class LogFormat(enum.StrEnum):
    TEXT = "text"
    YAML = "yaml"
    JSON = "json"


@dataclass
class Session:
    """What every command needs: the repository's configuration."""

    config: RepoConfig

    @property
    def odf(self) -> OdfRepository:
        return OdfRepository(self.config.odf_dir)


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


class PlanFormat(enum.StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


@app.callback(invoke_without_command=True)
def reconcile(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Option("-C", help="Run as if started in this directory (like git -C).")
    ] = Path("."),
    plan: Annotated[
        bool, typer.Option("--plan", help="Show what would change; write nothing.")
    ] = False,
    output_format: Annotated[
        PlanFormat,
        typer.Option("--format", help="Plan output: text, markdown (PR comment) or json."),
    ] = PlanFormat.TEXT,
    out: Annotated[Path | None, typer.Option("--out", help="Write the plan to this file.")] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 when nothing changes, 2 on changes, 1 on errors."
        ),
    ] = False,
    base: Annotated[
        str | None,
        typer.Option("--base", help="Git ref to compare manifests with (the PR's base)."),
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Plan deletion of chains with no manifest.")
    ] = False,
    system_time: Annotated[
        str | None, typer.Option("--system-time", help="RFC 3339 system time for blocks written.")
    ] = None,
) -> None:
    """Plan (--plan) or apply: bring the chains under odf/ to the manifests under datasets/."""
    try:
        ctx.obj = Session(RepoConfig.load(directory))
        when = Timestamp.parse(system_time) if system_time else None
    except (ConfigError, ValueError) as e:
        raise _fail(f"error: {e}") from None
    if ctx.invoked_subcommand is not None:
        return
    request = PlanRequest(base_ref=base, prune=prune)
    try:
        result = make_plan(ctx.obj.config, request)
    except (GitError, PolicyError, ConfigError) as e:
        raise _fail(f"error: {e}") from None
    _emit(_render(result, output_format, out is None), out)
    if plan or result.has_errors:
        raise typer.Exit(result.exit_code(detailed_exitcode))
    _apply(ctx.obj, result, when or Timestamp.now())


def _render(result: Plan, output_format: PlanFormat, to_terminal: bool) -> str:
    if output_format is PlanFormat.JSON:
        return render_json(result) + "\n"
    if output_format is PlanFormat.MARKDOWN:
        return render_markdown(result)
    color = to_terminal and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    return render_text(result, color=color)


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


def _apply(session: Session, result: Plan, when: Timestamp) -> None:
    """Append the planned metadata blocks; ingest and transforms are not built yet."""
    outcomes = apply_metadata(session.odf, result, when)
    failed = [r for r in outcomes if r.error]
    for r in outcomes:
        if r.error:
            outcome = f"failed: {r.error}"
        else:
            outcome = "chain deleted (--prune)" if r.deleted else f"{r.blocks} block(s) appended"
        typer.echo(f"{r.dataset}: {outcome}")
    typer.echo(
        f"Applied metadata to {len(outcomes) - len(failed)} dataset(s)"
        + (f", {len(failed)} failed" if failed else "")
        + " (ingest and transforms are not built yet)"
    )
    if failed:
        raise typer.Exit(1)


@app.command()
def log(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Dataset name (its folder in the ODF repository).")],
    output: Annotated[LogFormat, typer.Option("--output", "-o")] = LogFormat.TEXT,
    limit: Annotated[int | None, typer.Option(help="Show at most this many blocks.")] = None,
) -> None:
    """Show a dataset's metadata chain, newest block first."""
    session: Session = ctx.obj
    dataset = session.odf.dataset(name)
    if not dataset.exists():
        raise _fail(f"error: dataset {name!r} not found in {session.config.odf_dir}")
    try:
        entries: list[log_view.Entry] = []
        for entry in dataset.iter_blocks():
            if limit is not None and len(entries) >= limit:
                break
            entries.append(entry)
    except (RepositoryError, ValueError) as e:
        raise _fail(f"error: {name}: {e}") from None
    renderers = {
        LogFormat.TEXT: log_view.render_text,
        LogFormat.YAML: log_view.render_yaml,
        LogFormat.JSON: log_view.render_json,
    }
    sys.stdout.write(renderers[output](entries))
    if output is LogFormat.JSON:
        sys.stdout.write("\n")


def main() -> None:
    app()
