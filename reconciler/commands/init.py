"""``reconcile init [DIR]``: start a reconciler repository, the one command that works
outside one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import typer

from .common import fail

BRANCH = "main"
"""The first branch of a repository init starts: the scaffold's reconcile workflow runs
on pushes to main."""


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
    began, problem = _git_init(target)
    if began:
        typer.echo(f"initialized a git repository on branch {BRANCH}: nothing is committed yet")
    created = sum(file.created for file in written)
    updated = f", {len(written) - created} updated" if created < len(written) else ""
    typer.echo(f"{created} files created{updated} in {target}: next, `reconcile plan`")
    if problem is not None:
        typer.echo(f"warning: {problem}", err=True)
    for warning in _ignored(target, [file.path for file in written]):
        typer.echo(f"warning: {warning}", err=True)


def _git_init(target: Path) -> tuple[bool, str | None]:
    """Start a git repository in ``target`` unless it is in one already: the repository
    is made to be pushed, plans compare with a git ref, and ``apply --commit`` commits.
    Whether it did, and why it could not (no git: the scaffold is written all the same)."""
    try:
        inside = subprocess.run(
            ["git", "-C", str(target), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            check=False,
        )
        if inside.returncode == 0:  # a working tree, or a repository's own folder
            return False, None
        done = subprocess.run(
            ["git", "init", "-q", "-b", BRANCH, str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return False, f"git is not installed: run `git init -b {BRANCH}` in {target} once it is"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        return False, f"git init failed ({first}): run `git init -b {BRANCH}` in {target}"
    return True, None


def _ignored(target: Path, written: list[Path]) -> list[str]:
    """What the repository's own ignore rules (an existing ``.gitignore``, a global
    one) would keep out of git: files init wrote, and the chains' files to come, which
    ``apply --commit`` would then refuse to commit without. Nothing outside git."""
    from ..gitloop.gitops import GitError, chain_paths, ignored_paths, top_of

    try:
        top = top_of(target)
    except GitError:
        return []
    odf = (target.resolve() / "odf").relative_to(top).as_posix()  # the scaffold's odf_root
    paths = [path.resolve().relative_to(top).as_posix() for path in written]
    paths += chain_paths(top, odf, data_in_odf=True)
    found = ignored_paths(top, paths)
    mine = set(paths[: len(written)])
    warnings = [f"git ignores {i}: it will not be committed" for i in found if i.path in mine]
    chains = [i for i in found if i.path not in mine]
    if chains:
        warnings.append(
            f"git ignores {chains[0]}: add the rule `!odf/**` below it, or the chains' files"
            " will not be committed (apply --commit refuses until then)"
        )
    return warnings


def _shown(path: Path, target: Path) -> str:
    return str(path.relative_to(target)) if path.is_relative_to(target) else str(path)
