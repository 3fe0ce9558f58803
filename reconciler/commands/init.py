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
    for file in written:
        verb = "created" if file.created else "updated"
        note = f": {file.note}" if file.note else ""
        typer.echo(f"{verb} {_shown(file.path, target)}{note}")
    created = sum(file.created for file in written)
    updated = f", {len(written) - created} updated" if created < len(written) else ""
    typer.echo(f"{created} files created{updated} in {target}: next, `reconcile plan`")


def _shown(path: Path, target: Path) -> str:
    return str(path.relative_to(target)) if path.is_relative_to(target) else str(path)
