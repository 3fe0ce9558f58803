"""Where a GitOps repository keeps its manifests and chains, and where sources may read.

Read from ``[tool.reconciler]`` of the repository's ``pyproject.toml`` so that the
settings are versioned and reviewed with the datasets they govern.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from .source_paths import OutsideError, SourceRoots
from .wording import close_names

if TYPE_CHECKING:
    from .odf.repository import OdfRepository

MANIFEST_SUFFIXES = (".yaml", ".yml")


class ConfigError(ValueError):
    """``[tool.reconciler]`` holds a value of the wrong shape."""


@dataclass(frozen=True)
class RefusedManifest:
    """An entry under the datasets folder that is not read, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class ManifestScan:
    """The manifests to load, and the entries refused on the way (symlinks leading out)."""

    paths: tuple[Path, ...]
    refused: tuple[RefusedManifest, ...]


@dataclass(frozen=True)
class RepoConfig:
    """Resolved locations inside one GitOps repository."""

    root: Path
    datasets_dir: Path
    odf_dir: Path
    policies_dir: Path
    source_roots: tuple[Path, ...] = ()
    """Folders outside the repository that sources may read too (``source_roots``)."""
    data_store: str = "odf"
    """Where data and checkpoint files go (``data_store``): ``"odf"``, inside each dataset
    folder; a folder; or ``s3://bucket/prefix``. Blocks and refs stay under ``odf_dir``."""
    s3: tuple[tuple[str, str], ...] = ()
    """``[tool.reconciler.s3]``: ``endpoint_url`` and ``region`` (never credentials)."""
    max_decompressed_size: int = 10 * 2**30
    """The most bytes a ``Decompress`` prepare step may write (``max_decompressed_size``):
    a few hundred bytes of nested gzip expand to gigabytes, and a pull request may add
    such a file, which the scheduled run would unpack until the runner's disk is full."""
    max_download_size: int = 10 * 2**30
    """The most bytes one download of a ``Url`` source may bring (``max_download_size``):
    a server of a pull request's choosing could send without end, until the disk is full."""
    max_download_seconds: int = 3600
    """The longest one download of a ``Url`` source may take (``max_download_seconds``):
    a server sending a byte now and then answers every read in time, and held the
    scheduled run for ever."""

    @property
    def cache_dir(self) -> Path:
        """Where objects of a data store outside the repository are fetched to."""
        return self.root / ".reconcile-cache"

    @property
    def work_dir(self) -> Path:
        """Where a run's Spark tasks write the files it stages (``writer.scratch``)."""
        return self.cache_dir / "work"

    def reserved_folders(self) -> tuple[tuple[Path, str], ...]:
        """The reconciler's own folders, each with what it is, which no source may read
        (``SourceRoots.confine``): the chains (their blocks, refs and data), a data store
        that is a folder, and the cache its objects are fetched to. Through them a source
        would read another dataset's slices, the SQL sandbox and lineage bypassed."""
        reserved = [
            (self.odf_dir, f"{shown_path(self.odf_dir, self.root)}/, the chains folder"),
            (self.cache_dir, f"{shown_path(self.cache_dir, self.root)}/, the reconciler's cache"),
        ]
        if self.data_store != "odf" and not self.data_store.startswith("s3://"):
            store = (self.root / self.data_store).resolve()
            reserved.append((store, f"{shown_path(store, self.root)}/, the data store"))
        return tuple(reserved)

    def repository(self) -> OdfRepository:
        """The ODF repository with its data store (``odf/store.py``); imported here, not
        with the configuration, which every command reads, ``--help`` included."""
        from .odf.repository import OdfRepository

        if self.data_store == "odf":
            return OdfRepository(self.odf_dir)
        from .odf.store_fs import open_store

        store = open_store(self.data_store, dict(self.s3), self.root, self.cache_dir)
        return OdfRepository(self.odf_dir, store=store)

    @classmethod
    def load(cls, root: Path) -> RepoConfig:
        root = root.resolve()
        pyproject = root / "pyproject.toml"
        if pyproject.exists() and not pyproject.is_file():  # a submodule checks out as a folder
            raise ConfigError(f"{pyproject} is not a file")
        text = pyproject.read_text(encoding="utf-8") if pyproject.exists() else ""
        return cls.of_pyproject(root, text, pyproject)

    @classmethod
    def of_pyproject(cls, root: Path, text: str, origin: Path | str) -> RepoConfig:
        """The settings a ``pyproject.toml``'s ``text`` gives the repository at ``root``:
        the working tree's, or another commit's (the base branch a pull request is
        judged by)."""
        settings = _tool_settings(text, origin)
        return cls(
            root=root,
            datasets_dir=root / _str(settings, "datasets", "datasets"),
            odf_dir=root / _str(settings, "odf_root", "odf"),
            policies_dir=root / _str(settings, "policies", "policies"),
            source_roots=_source_roots(settings, root),
            data_store=_str(settings, "data_store", "odf") or "odf",
            s3=_s3(settings),
            max_decompressed_size=_size(settings, "max_decompressed_size", 10 * 2**30),
            max_download_size=_size(settings, "max_download_size", 10 * 2**30),
            max_download_seconds=_seconds(settings, "max_download_seconds", 3600),
        )

    def manifest_paths(self) -> list[Path]:
        """Every manifest to load under the datasets folder, sorted for stable output."""
        return list(self.scan_manifests().paths)

    def scan_manifests(self) -> ManifestScan:
        """Every ``*.yaml``/``*.yml`` under the datasets folder, and what was refused.

        Symlinks are where a manifest could make the reconciler read outside the
        repository, so a symlinked manifest must resolve inside the datasets folder and a
        symlinked folder inside the repository; either may also be a loop. Each folder is
        walked once (by its real path), so no arrangement of links makes the walk endless.
        """
        paths: list[Path] = []
        refused: list[RefusedManifest] = []
        if not self.datasets_dir.is_dir():
            return ManifestScan((), ())
        repository = SourceRoots.of(self.root)
        try:
            top = repository.confine(self.datasets_dir)
        except OutsideError as e:
            return ManifestScan((), (RefusedManifest(self.datasets_dir, f"the folder {e}"),))
        datasets = SourceRoots.of(top)
        for path, reason in _walk(self.datasets_dir, top, repository, datasets, {top}, (top,)):
            if reason is None:
                paths.append(path)
            else:
                refused.append(RefusedManifest(path, reason))
        return ManifestScan(tuple(sorted(paths)), tuple(refused))


def _walk(
    folder: Path,
    real: Path,
    repository: SourceRoots,
    datasets: SourceRoots,
    seen: set[Path],
    ancestors: tuple[Path, ...],
) -> Iterator[tuple[Path, str | None]]:
    """Manifests under ``folder`` (whose real path is ``real``), as (path, None), and
    refused entries as (path, reason)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        yield folder, f"the folder cannot be listed ({e.strerror})"
        return
    for entry in entries:
        path = Path(entry.path)
        is_manifest = entry.name.endswith(MANIFEST_SUFFIXES)
        if not entry.is_symlink():
            if entry.is_dir(follow_symlinks=False):
                inner = real / entry.name
                if inner in seen:
                    continue
                seen.add(inner)
                yield from _walk(path, inner, repository, datasets, seen, (*ancestors, inner))
            elif is_manifest and entry.is_file(follow_symlinks=False):
                yield path, None
            elif entry.name.lower().endswith(MANIFEST_SUFFIXES):
                # datasets/Orders.YAML was passed over without a word: no dataset, no error
                yield (
                    path,
                    f"a manifest's name ends in {' or '.join(MANIFEST_SUFFIXES)}, in lower case",
                )
            continue
        try:
            target = repository.confine(path)
            mode = os.stat(target).st_mode
        except OutsideError as e:
            yield path, f"symlink {e}"
            continue
        except OSError:
            if is_manifest:
                yield path, "symlink leads to nothing"
            continue
        if stat.S_ISDIR(mode):
            if target in ancestors:
                yield path, "symlink loop: the folder contains itself"
            elif target not in seen:
                seen.add(target)
                yield from _walk(path, target, repository, datasets, seen, (*ancestors, target))
        elif is_manifest and stat.S_ISREG(mode):
            try:
                datasets.confine(path)
            except OutsideError:
                yield path, "symlink leads out of the datasets folder"
                continue
            yield path, None


def shown_path(path: Path, root: Path) -> str:
    """``path`` as messages and fingerprints name it: relative to the repository
    ``root`` when inside it, else absolute."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def shown_paths(text: str, root: PurePath) -> str:
    """``text`` (a dataset's cause) with every path it names under the repository
    ``root`` written relative to it, as ``shown_path`` writes one path. A reader's or
    the engine's error names the file it read by the path the run read it at, and the
    runner's checkout folder (``/home/runner/work/…``) means nothing in a commit message
    or a step summary, which name ``sources/orders/2.csv`` as the plan does. A path
    starts the text or follows white space, a quote or a bracket, so a path outside
    whose tail merely spells the root (``/mnt/repo/x`` for a root ``/repo``) and a
    ``file:`` URL stay as they are."""
    prefix = re.escape(root.as_posix().rstrip("/") + "/")
    return re.sub(rf"(?:^|(?<=[\s'\"`(\[<])){prefix}", "", text)


def _tool_settings(text: str, origin: Path | str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{origin}: {e}") from None
    settings = data.get("tool", {}).get("reconciler", {})
    if not isinstance(settings, dict):
        raise ConfigError(f"{origin}: [tool.reconciler] must be a table")
    _known_keys(text, origin, "tool.reconciler", settings, _KEYS)
    spark = settings.get("spark", {})
    if isinstance(spark, dict):  # its values are the engine's to check (engine.session)
        _known_keys(text, origin, "tool.reconciler.spark", spark, _SPARK_KEYS)
    return settings


_KEYS = (
    "datasets",
    "odf_root",
    "policies",
    "source_roots",
    "data_store",
    "s3",
    "spark",
    "max_decompressed_size",
    "max_download_size",
    "max_download_seconds",
)
_SPARK_KEYS = ("master", "app_name", "conf", "executor_wait")


def _known_keys(
    text: str, origin: Path | str, table: str, settings: dict[str, Any], known: tuple[str, ...]
) -> None:
    """Refuse a setting nothing reads: a misspelt ``data_stor`` would otherwise leave the
    data in git, silently, where the team meant to keep it out."""
    for key in settings:
        if key in known:
            continue
        close = close_names(key, known)
        hint = f" (did you mean {close[0]}?)" if close else ""
        line = setting_line(text, table, key)
        where = f"{origin}:{line}" if line else f"{origin}"
        raise ConfigError(
            f"{where}: [{table}] has no setting {key!r}{hint}; its settings are {', '.join(known)}"
        )


def setting_line(text: str, table: str, key: str) -> int | None:
    """The line of ``text`` that sets ``key`` of ``[table]``: a ``key =`` line (bare or
    quoted) under that header, or a ``[table.key]`` header of its own; None when it is
    set another way (a dotted key, say), or not at all."""
    header = re.compile(rf"^\s*\[\s*{re.escape(table)}\s*\]")
    own = re.compile(rf"^\s*\[\s*{re.escape(table)}\.{re.escape(key)}\s*\]")
    setting = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("["):
            if own.match(line):
                return number
            inside = bool(header.match(line))
        elif inside and setting.match(line):
            return number
    return None


def _source_roots(settings: dict[str, Any], root: Path) -> tuple[Path, ...]:
    """Absolute folders; relative entries are relative to the repository root."""
    value = settings.get("source_roots", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(
            f"[tool.reconciler] source_roots must be a list of folder paths, got {value!r}"
        )
    return tuple(root / v for v in value)


_S3_KEYS = ("endpoint_url", "region")


def _s3(settings: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``[tool.reconciler.s3]``: only where the store is; credentials are refused, they
    come from the environment or the standard AWS configuration."""
    table = settings.get("s3", {})
    if not isinstance(table, dict):
        raise ConfigError("[tool.reconciler.s3] must be a table")
    unknown = sorted(set(table) - set(_S3_KEYS))
    if unknown:
        raise ConfigError(
            f"[tool.reconciler.s3] takes only {', '.join(_S3_KEYS)}, not {', '.join(unknown)}"
            " (credentials come from the environment or the AWS configuration)"
        )
    for key, value in table.items():
        if not isinstance(value, str):
            raise ConfigError(f"[tool.reconciler.s3] {key} must be a string")
    endpoint = table.get("endpoint_url", "")
    if endpoint and not re.match(r"https?://[^/]", endpoint):
        # The SDK takes a bare host for https: a local server was then met with TLS, and
        # the run failed at its first request with "SSL connect error", as the AWS CLI
        # refuses such a URL outright.
        raise ConfigError(
            f"[tool.reconciler.s3] endpoint_url {endpoint!r} must start with http:// or"
            " https://, as in http://127.0.0.1:9000 or https://s3.example.org"
        )
    return tuple(sorted(table.items()))


_SIZE = re.compile(r"\s*([0-9]+)\s*(|B|KiB|MiB|GiB|TiB)\s*")
_UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _size(settings: dict[str, Any], key: str, default: int) -> int:
    """A size in bytes, written as a whole number of bytes or with a binary unit."""
    value = settings.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    found = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if found is None or int(found.group(1)) == 0:
        raise ConfigError(
            f"[tool.reconciler] {key} must be a size above 0, in bytes or with a unit"
            f' ("512MiB", "10GiB"), got {value!r}'
        )
    return int(found.group(1)) * _UNITS[found.group(2)]


def _seconds(settings: dict[str, Any], key: str, default: int) -> int:
    value = settings.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(
            f"[tool.reconciler] {key} must be a whole number of seconds above 0, got {value!r}"
        )
    return value


def _str(settings: dict[str, Any], key: str, default: str) -> str:
    value = settings.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"[tool.reconciler] {key} must be a string, got {value!r}")
    return value
