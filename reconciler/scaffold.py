"""``reconcile init``: a new data repository that plans, applies and runs in CI as it is.

The files come from ``reconciler/templates/``, which the wheel carries, so a team that
only installed the package gets the same example, default policies and workflows this
repository tests. The workflows pin the installed version, so CI runs the reconciler the
team tried locally, and upgrading it is a reviewed change like any other.

Nothing is ever overwritten: when the target already holds a reconciler repository or any
file the scaffold would write, nothing is written and the error says why.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")
DISTRIBUTION = "odf-reconciler"
VERSION_TOKEN = "@RECONCILER_VERSION@"
# Dotted names are stored as "dot-NAME": a ".gitignore" under reconciler/templates/ would
# be git's rules for this repository's own files there, and one rule for every dotted
# name (".github/" too) keeps the mapping obvious.
DOT_PREFIX = "dot-"


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


def init_repository(target: Path) -> list[Path]:
    """Write the scaffold into ``target`` (created if missing) and return the files written,
    in path order; raise an ``InitRefusedError`` subclass, writing nothing, when it would
    overwrite anything."""
    files = _template_files()
    datasets_dir = target / "datasets"
    if datasets_dir.is_dir() and any(datasets_dir.iterdir()):
        raise RepositoryExistsError(datasets_dir)
    conflicts = [
        target / relative
        for relative in files
        if (target / relative).exists() or (target / relative).is_symlink()
    ]
    if conflicts:
        raise ConflictingFilesError(conflicts)
    pinned = version(DISTRIBUTION)
    written = []
    for relative, source in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text(encoding="utf-8").replace(VERSION_TOKEN, pinned)
        # "x": a file that appeared since the check above is still not overwritten.
        with open(path, "x", encoding="utf-8", newline="") as f:
            f.write(text)
        written.append(path)
    return written


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
