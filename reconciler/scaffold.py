"""``reconcile init``: a new data repository that plans, applies and runs in CI as it is.

The files come from ``reconciler/templates/``, which the wheel carries, so a team that
only installed the package gets the same example, default policies and workflows this
repository tests. The workflows pin the installed version, so CI runs the reconciler the
team tried locally, and upgrading it is a reviewed change like any other.

It also goes into an existing repository, which nearly always has a ``.gitignore`` and a
``README.md``, and often a ``pyproject.toml``: those three are the team's, and are added
to, never replaced. The ``.gitignore`` gains the lines it lacks, ``pyproject.toml`` gains
the ``[tool.reconciler]`` tables, and the scaffold's guide goes to ``RECONCILER.md``
beside the team's README. Any other file the scaffold would write that exists already,
a ``pyproject.toml`` that has ``[tool.reconciler]`` or is not valid TOML, or a
``datasets/`` folder with manifests, or a folder it writes into that a symlink leads
outside the target, stops it before anything is written, and the error says why.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")
DISTRIBUTION = "odf-reconciler"
VERSION_TOKEN = "@RECONCILER_VERSION@"
# Dotted names are stored as "dot-NAME": a ".gitignore" under reconciler/templates/ would
# be git's rules for this repository's own files there, and one rule for every dotted
# name (".github/" too) keeps the mapping obvious.
DOT_PREFIX = "dot-"
GUIDE = Path("RECONCILER.md")
"""Where the scaffold's README goes when the repository has its own."""
_ADDED = "# Added by `reconcile init` (odf-reconciler):"


class InitRefusedError(ValueError):
    """The target cannot take the scaffold; nothing was written."""


class RepositoryExistsError(InitRefusedError):
    """The target already has manifests: scaffolding it would mix in the examples."""

    def __init__(self, datasets_dir: Path) -> None:
        self.datasets_dir = datasets_dir
        super().__init__(
            f"{datasets_dir} already holds manifests: this is a reconciler repository already"
        )


class ConflictingFilesError(InitRefusedError):
    """Files the scaffold would write exist already, listed so the user can move them."""

    def __init__(self, conflicts: list[Path]) -> None:
        self.conflicts = conflicts
        listed = ", ".join(str(path) for path in conflicts)
        super().__init__(f"refusing to overwrite {len(conflicts)} existing file(s): {listed}")


class LinkedFolderError(InitRefusedError):
    """Folders the scaffold writes into lead outside the target through a symlink: the
    workflows and examples would land elsewhere, a half-written scaffold behind them."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders
        listed = ", ".join(str(path) for path in folders)
        super().__init__(
            f"refusing to write through {len(folders)} folder(s) that lead outside"
            f" the repository: {listed}"
        )


@dataclass(frozen=True)
class Written:
    """One file ``init`` wrote: created, or one of the team's it added to (``note`` says
    what)."""

    path: Path
    created: bool
    note: str = ""


def init_repository(target: Path) -> list[Written]:
    """Write the scaffold into ``target`` (created if missing) and return the files written,
    in path order; raise an ``InitRefusedError`` subclass, writing nothing, when it would
    overwrite anything."""
    datasets_dir = target / "datasets"
    if datasets_dir.is_dir() and any(datasets_dir.iterdir()):
        raise RepositoryExistsError(datasets_dir)
    pinned = version(DISTRIBUTION)
    texts = {
        relative: source.read_text(encoding="utf-8").replace(VERSION_TOKEN, pinned)
        for relative, source in _template_files().items()
    }
    if _exists(target / "README.md"):
        texts[GUIDE] = texts.pop(Path("README.md"))
    additions: dict[Path, tuple[str, str]] = {}
    conflicts = []
    for relative, text in sorted(texts.items()):
        path = target / relative
        if not _exists(path):
            continue
        addition = _addition(path, relative, text)
        if addition is None:
            conflicts.append(path)
        else:
            additions[relative] = addition
    if conflicts:
        raise ConflictingFilesError(conflicts)
    top = target.resolve()
    outside = sorted(
        {
            folder
            for relative in texts
            for folder in (target / relative).parents
            if folder.is_relative_to(target) and not folder.resolve().is_relative_to(top)
        }
    )
    if outside:
        raise LinkedFolderError([f for f in outside if f.parent not in outside])
    written = []
    for relative, text in sorted(texts.items()):
        path = target / relative
        if relative in additions:
            merged, note = additions[relative]
            if merged:
                _replace(path, merged)
                written.append(Written(path, False, note))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        # "x": a file that appeared since the check above is still not overwritten.
        with open(path, "x", encoding="utf-8", newline="") as f:
            f.write(text)
        note = "the scaffold's README (README.md is yours)" if relative == GUIDE else ""
        written.append(Written(path, True, note))
    return written


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _addition(path: Path, relative: Path, text: str) -> tuple[str, str] | None:
    """The team's own file with the scaffold's part added, and what was added (an empty
    text: nothing to add); None when the file is not one to add to, a conflict."""
    if path.is_symlink() or not path.is_file():
        return None
    if relative == Path(".gitignore"):
        return _gitignore(path.read_text(encoding="utf-8"), text)
    if relative == Path("pyproject.toml"):
        return _pyproject(path, path.read_text(encoding="utf-8"), text)
    return None


def _gitignore(ours: str, scaffold: str) -> tuple[str, str]:
    """The team's ``.gitignore`` with the scaffold's rules it lacks, after a comment."""
    have = {line.strip() for line in ours.splitlines()}
    missing = [
        line
        for line in scaffold.splitlines()
        if line.strip() and not line.startswith("#") and line.strip() not in have
    ]
    if not missing:
        return "", ""
    separator = "" if not ours or ours.endswith("\n") else "\n"
    merged = ours + separator + "\n".join(["", _ADDED, *missing]) + "\n"
    return merged, f"{len(missing)} rule{'s' if len(missing) != 1 else ''} added"


def _pyproject(path: Path, ours: str, scaffold: str) -> tuple[str, str]:
    """The team's ``pyproject.toml`` with the ``[tool.reconciler]`` tables appended;
    refused when it has them already, or is not valid TOML (appending to it would hide
    why)."""
    try:
        document = tomllib.loads(ours)
    except tomllib.TOMLDecodeError as e:
        raise InitRefusedError(f"{path} is not valid TOML ({e}): nothing written") from None
    if "reconciler" in document.get("tool", {}):
        raise InitRefusedError(
            f"{path} has [tool.reconciler] already: this is a reconciler repository already"
        )
    separator = "" if not ours or ours.endswith("\n") else "\n"
    merged = ours + separator + "\n" + scaffold
    try:
        tomllib.loads(merged)
    except tomllib.TOMLDecodeError as e:  # an inline `tool = {…}` table cannot take more
        raise InitRefusedError(
            f"{path}: [tool.reconciler] cannot be added to it ({e}): nothing written"
        ) from None
    return merged, "[tool.reconciler] added"


def _replace(path: Path, text: str) -> None:
    """Write ``text`` over the team's file through a temporary: a crash leaves the old
    file or the new one, and its permissions stay."""
    tmp = path.with_name(f".{path.name}.reconcile-init")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def _template_files() -> dict[Path, Path]:
    """Each template file by the path it takes in a repository, sorted by that path."""
    files = {
        _target_path(source.relative_to(TEMPLATES)): source
        for source in TEMPLATES.rglob("*")
        if source.is_file()
    }
    return dict(sorted(files.items()))


def _target_path(relative: Path) -> Path:
    """``dot-github/workflows/plan.yml`` becomes ``.github/workflows/plan.yml``."""
    return Path(
        *(
            "." + part.removeprefix(DOT_PREFIX) if part.startswith(DOT_PREFIX) else part
            for part in relative.parts
        )
    )
