"""The ``reconcile`` command line: people read text, machines read JSON, exit codes tell CI.

The CLI only parses options, calls the library and renders results or errors; no
library module prints.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from . import log_view
from .config import ConfigError, RepoConfig
from .odf.manifest import LoadedSnapshot, ManifestError, load_snapshots
from .odf.repository import OdfRepository, RepositoryError

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


@app.callback(invoke_without_command=True)
def reconcile(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Option("-C", help="Run as if started in this directory (like git -C).")
    ] = Path("."),
    plan: Annotated[
        bool, typer.Option("--plan", help="Show what would change; write nothing.")
    ] = False,
) -> None:
    """Without a command: check every manifest and report each dataset's chain."""
    try:
        ctx.obj = Session(RepoConfig.load(directory))
    except ConfigError as e:
        raise _fail(f"error: {e}") from None
    if ctx.invoked_subcommand is not None:
        return
    _status(ctx.obj, plan)


def _status(session: Session, plan: bool) -> None:
    loaded: list[LoadedSnapshot] = []
    problems: list[str] = []
    for path in session.config.manifest_paths():
        try:
            loaded += load_snapshots(path)
        except ManifestError as e:
            problems += [str(i) for i in e.issues]
    if problems:
        raise _fail("\n".join(problems) + f"\n{len(problems)} problem(s) in manifests")
    existing = set(session.odf.names())
    for item in sorted(loaded, key=lambda s: s.snapshot.name):
        name = item.snapshot.name
        status = "chain present" if name in existing else "no chain yet"
        typer.echo(
            f"{name} ({item.snapshot.kind.value}): {len(item.snapshot.metadata)} events, {status}"
        )
    mode = "plan" if plan else "run"
    typer.echo(f"{len(loaded)} manifest(s) valid ({mode}: diffing and applying are not built yet)")


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
