"""Where a manifest's source paths lead, and whether that is inside the repository.

Manifests arrive in pull requests nobody has reviewed yet, and whatever a source reads is
committed to git by the scheduled job. So a ``FilesGlob`` path or a ``file:`` URL may only
reach files that, after every symlink is followed, lie in the repository or in a folder
its configuration allows (``[tool.reconciler] source_roots``), and never in a folder of
the reconciler's own there: the chains, the data store and the cache
(``RepoConfig.reserved_folders``). A source reading another dataset's slices would be a
derivative whose SQL no sandbox sees and whose lineage no block records. The plan reports a path
that does not (``plan.confinement``) and the fetch refuses it again, because files can
change between the two (``ingest.fetch``); both use these rules, so they cannot drift.

Nothing here reads a file: paths are resolved (``realpath`` and ``stat``), never opened.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = [
    "FileUrlError",
    "Globs",
    "OutsideError",
    "SourceRoots",
    "check_written",
    "file_url_path",
    "glob_folder",
    "glob_matches",
    "glob_would_match",
]

# errno values meaning "not there (yet)": a source may be declared before its data lands.
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR})
# errno values pathlib's glob takes as "no match here" rather than an error.
_IGNORED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


class OutsideError(ValueError):
    """A source path that is not confined, or that names a file no chain can record; the
    message says why and never shows content."""


class FileUrlError(ValueError):
    """A ``file:`` URL naming a host: only the local machine's files are meant."""


@dataclass(frozen=True)
class SourceRoots:
    """The folders sources may read from: the repository and its allow-list, resolved;
    and the folders under them that no source may read, each with what it is."""

    repository: Path
    allowed: tuple[Path, ...] = ()
    reserved: tuple[tuple[Path, str], ...] = ()

    @classmethod
    def of(
        cls,
        repository: Path,
        allowed: Iterable[Path] = (),
        reserved: Iterable[tuple[Path, str]] = (),
    ) -> SourceRoots:
        """Resolve every root once, so a symlinked root compares with resolved paths."""
        return cls(
            Path(os.path.realpath(repository)),
            tuple(Path(os.path.realpath(a)) for a in allowed),
            tuple((Path(os.path.realpath(r)), what) for r, what in reserved),
        )

    def confine(self, path: Path) -> Path:
        """The real path of ``path`` if it lies under a root, and not in a ``.git`` folder
        there, else ``OutsideError``. A ``.git`` folder is the repository's own machinery:
        ``actions/checkout`` leaves the push token in ``.git/config``, and other branches'
        objects lie beside it.

        A path that does not exist yet is judged by where it would be; a symlink loop or a
        path that cannot be examined is refused, since nobody can tell where it leads.
        """
        real = Path(os.path.realpath(path))
        try:
            os.stat(real)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OutsideError("leads into a symlink loop") from None
            if e.errno not in _MISSING:
                raise OutsideError(f"cannot be examined ({e.strerror})") from None
        root = next((r for r in self.roots if real == r or r in real.parents), None)
        if root is None:
            where = "the repository and its source_roots" if self.allowed else "the repository"
            raise OutsideError(f"resolves outside {where}")
        if any(part.lower() == ".git" for part in real.relative_to(root).parts):
            raise OutsideError(
                "resolves into a .git folder, which holds git's objects and settings "
                "(a CI checkout's credentials among them), not files of the repository"
            )
        for folder, what in self.reserved:
            if real == folder or folder in real.parents:
                raise OutsideError(
                    f"resolves into {what}: no source may read it (a dataset reads"
                    " another one as a derivative's declared input)"
                )
        return real

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.repository, *self.allowed)


def check_written(written: str) -> None:
    """Refuse spellings whose meaning depends on who reads them, before any resolution.

    ``~`` is a home folder to a shell (and to tools that expand it), a backslash is a
    separator on Windows (``..\\x`` climbs there), and a NUL byte truncates a path in C:
    none of them means the same file everywhere, so none is accepted.
    """
    if "\0" in written:
        raise OutsideError("contains a NUL character")
    if "\\" in written:
        raise OutsideError("contains a backslash, which is not a path separator here (write /)")
    if written.startswith("~"):
        raise OutsideError("starts with ~, a home folder outside the repository")


def glob_matches(written: str, roots: SourceRoots, base_dir: Path) -> list[Path]:
    """Every path the ``FilesGlob`` path ``written`` matches now, in order; each confined.

    The pattern is judged before it is expanded, so that one matching nothing yet is
    refused too; then every match, since any of them can be a symlink leading out. A
    match whose path is not UTF-8 is refused too: the chain records the file's name as
    its source state, and ODF's strings are UTF-8 (such a name stopped the plan and the
    run of every dataset with an encoding error).
    """
    pattern = _confined_pattern(written, roots, base_dir)
    matches = sorted(_expand(pattern))
    for match in matches:
        relative = os.path.relpath(match, base_dir)
        shown = match if relative.startswith("..") else relative
        try:
            roots.confine(match)
        except OutsideError as e:
            raise OutsideError(f"matches {shown}, which {e}") from None
        raw = os.fsencode(match)
        if raw.decode("utf-8", "surrogateescape") != raw.decode("utf-8", "replace"):
            escaped = os.fsencode(shown).decode("utf-8", "backslashreplace")
            raise OutsideError(
                f"matches {escaped}, whose name is not UTF-8 text, which a chain cannot"
                " record; rename it"
            )
    return matches


class Globs:
    """``glob_matches`` for one plan, each path as written expanded once: the plan's
    confinement check and its listing of each source's files ask for the same globs, and
    walking them twice was a sixth of a plan of a thousand datasets."""

    def __init__(self, roots: SourceRoots, base_dir: Path) -> None:
        self.roots = roots
        self.base_dir = base_dir
        self._found: dict[str, list[Path] | OutsideError] = {}

    def matches(self, written: str) -> list[Path]:
        """``glob_matches(written, …)``: the same paths, or the same ``OutsideError``."""
        found = self._found.get(written)
        if found is None:
            try:
                found = glob_matches(written, self.roots, self.base_dir)
            except OutsideError as e:
                found = e
            self._found[written] = found
        if isinstance(found, OutsideError):
            raise OutsideError(*found.args)
        return list(found)


def glob_folder(written: str, base_dir: Path) -> Path:
    """The folder (or, with no wildcard, the file) every match of the ``FilesGlob`` path
    ``written`` lies under: where to look for matches that are gone."""
    return Path(os.path.normpath(_split(written, base_dir)[0]))


def glob_would_match(written: str, base_dir: Path, path: Path) -> bool:
    """Whether ``glob_matches`` would give ``path`` for ``written`` were it there: a file
    git says was deleted cannot be listed. Each part as fnmatch reads it, ``**`` any
    number of folders, and no wildcard matches a hidden name (``_expand``'s rules)."""
    folder, wild = _split(written, base_dir)
    try:
        parts = path.relative_to(os.path.normpath(folder)).parts
    except ValueError:
        return False
    if wild[-1:] == ("**",):
        return False  # pathlib's last ``**`` gives folders only, never a file
    reached = {0}  # how many of path's parts the pattern's parts so far can take
    for part in _collapsed(wild):
        if part == "**":  # any run of folders whose names are not hidden
            grown: set[int] = set()
            for end in sorted(reached):
                while end not in grown:
                    grown.add(end)
                    if end == len(parts) or parts[end].startswith("."):
                        break
                    end += 1
            reached = grown
        else:
            reached = {i + 1 for i in reached if i < len(parts) and _fits(parts[i], part)}
    return len(parts) in reached


def _fits(name: str, pattern: str) -> bool:
    return (pattern.startswith(".") or not name.startswith(".")) and fnmatch.fnmatchcase(
        name, pattern
    )


def _split(written: str, base_dir: Path) -> tuple[Path, tuple[str, ...]]:
    """A ``FilesGlob`` path's fixed part, joined to ``base_dir`` (nothing resolved), and
    its parts from the first wildcard on."""
    parts = Path(written).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return base_dir.joinpath(*parts[:fixed]), parts[fixed:]


def _expand(pattern: str) -> list[Path]:
    """The paths ``pattern`` matches, as ``glob.glob`` matches them, except that ``**``
    never descends into a symlinked folder: two links to ``.`` made glob's walk
    exponential (a plan that never ended), and a link to ``/proc`` took it over the
    whole machine before any match could be judged. Its wildcards match hidden names,
    as pathlib's do, unless the name is written in the pattern, as glob's do not.

    The walk is pathlib's (``Path.glob``) with each (folder, pattern part) visited once:
    pathlib restarts the rest of the pattern from every folder each ``**`` reaches, so
    ``k`` of them cost the number of folders to the power ``k`` (minutes for seven in 25
    nested folders); here the cost is the folders times the pattern's parts."""
    if "**" not in pattern:
        return [Path(m) for m in glob.glob(pattern)]
    anchor, wild = _split(pattern, Path())
    if any("**" in part and part != "**" for part in wild):
        raise ValueError("Invalid pattern: '**' can only be an entire path component")
    return [
        match
        for match in _walk(anchor, _collapsed(wild))
        if not any(
            name.startswith(".") and name not in wild for name in match.relative_to(anchor).parts
        )
    ]


def _collapsed(wild: tuple[str, ...]) -> tuple[str, ...]:
    """``wild`` with each run of ``**`` parts written once: ``**/**`` reaches the same
    folders as ``**``."""
    return tuple(
        part for i, part in enumerate(wild) if not (part == "**" and wild[i - 1 : i] == ("**",))
    )


def _walk(anchor: Path, wild: tuple[str, ...]) -> list[Path]:
    """What ``anchor.glob`` gives for the parts ``wild`` (sorted), each folder listed once
    and each (folder, part) state visited once. As pathlib: ``**`` is a folder and every
    folder under it, not entering symlinked ones; ``*`` and ``?`` go through symlinks; a
    part with no wildcard is looked up, not listed; a last part matches files too."""
    if not _is_dir(str(anchor)):
        return []
    matchers: list[Callable[[str], object] | None] = [
        None if _is_literal(p) else re.compile(fnmatch.translate(p)).match for p in wild
    ]
    listings: dict[str, list[tuple[str, bool, bool]]] = {}
    found: set[str] = set()
    start = (str(anchor), 0)
    seen, todo = {start}, [start]

    def visit(folder: str, index: int) -> None:
        if (folder, index) not in seen:
            seen.add((folder, index))
            todo.append((folder, index))

    while todo:
        folder, index = todo.pop()
        if index == len(wild):
            found.add(folder)
            continue
        part, last = wild[index], index == len(wild) - 1
        if part == "**":
            visit(folder, index + 1)
            for name, _, real_dir in _listing(folder, listings):
                if real_dir:
                    visit(os.path.join(folder, name), index)
            continue
        match = matchers[index]
        if match is None:
            path = os.path.join(folder, part)
            if (_stat(path) is not None) if last else _is_dir(path):
                visit(path, index + 1)
            continue
        for name, is_dir, _ in _listing(folder, listings):
            if (last or is_dir) and match(name):
                visit(os.path.join(folder, name), index + 1)
    return sorted(Path(path) for path in found)


def _is_literal(part: str) -> bool:
    return not any(c in part for c in "*?[")  # pathlib's test for a wildcard


def _listing(
    folder: str, cache: dict[str, list[tuple[str, bool, bool]]]
) -> list[tuple[str, bool, bool]]:
    """The names in ``folder``, each with whether it is a folder (through a symlink) and
    whether it is one that is not a symlink; listed once per walk, empty if unreadable."""
    if folder not in cache:
        entries: list[tuple[str, bool, bool]] = []
        try:
            with os.scandir(folder) as listed:
                for entry in listed:
                    entries.append(
                        (entry.name, _entry_is_dir(entry, True), _entry_is_dir(entry, False))
                    )
        except OSError as e:
            if not isinstance(e, PermissionError) and e.errno not in _IGNORED:
                raise
        cache[folder] = entries
    return cache[folder]


def _entry_is_dir(entry: os.DirEntry[str], follow: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError as e:
        if isinstance(e, PermissionError) or e.errno in _IGNORED:
            return False
        raise


def _stat(path: str) -> os.stat_result | None:
    """``path``'s status through links, or None where pathlib's glob finds nothing (no
    such file, a loop, no permission, a NUL in the name)."""
    try:
        return os.stat(path)
    except OSError as e:
        if isinstance(e, PermissionError) or e.errno in _IGNORED:
            return None
        raise
    except ValueError:
        return None


def _is_dir(path: str) -> bool:
    found = _stat(path)
    return found is not None and stat.S_ISDIR(found.st_mode)


def _confined_pattern(written: str, roots: SourceRoots, base_dir: Path) -> str:
    """The absolute glob pattern of a ``FilesGlob`` path whose fixed part is confined: the
    part before the first wildcard must resolve under a root, and no ``..`` may follow a
    wildcard (what it climbs out of depends on what matches)."""
    check_written(written)
    folder, wild = _split(written, base_dir)
    if ".." in wild:
        raise OutsideError("has '..' after a wildcard, which could lead anywhere")
    roots.confine(folder)
    if os.path.isabs(written):
        return written
    return os.path.join(glob.escape(str(base_dir)), written)


def file_url_path(url: str, base_dir: Path) -> Path:
    """The path of ``file:///abs``, ``file://localhost/abs`` or ``file:relative`` (percent
    decoded, so ``%2E%2E`` is ``..``), checked by ``check_written`` but not yet confined."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise FileUrlError(
            "file URLs take no host; use file:///absolute/path or file:relative/path"
        )
    decoded = unquote(parts.path)
    check_written(decoded)
    return base_dir / decoded
