"""``reconcile init [DIR]``: start a reconciler repository, the one command that works
outside one."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import fail


def run(target: Path) -> None:
    """Write the scaffold, naming each file; a refusal (say, a repository already there)
    is one ``error:`` line with exit 1."""
    from ..scaffold import InitRefusedError, init_repository

    try:
        written = init_repository(target)
    except (InitRefusedError, OSError) as e:
        raise fail(f"error: {e}") from None
    for path in written:
        typer.echo(f"created {_shown(path, target)}")
    typer.echo(f"{len(written)} files written in {target}: next, `reconcile plan`")


def _shown(path: Path, target: Path) -> str:
    return str(path.relative_to(target)) if path.is_relative_to(target) else str(path)
