"""Plan-time confinement: which manifests and sources would read outside the repository.

What a source reads, the scheduled job commits to git; a pull request must not be able to
publish a file from the machine that runs it. So every ``FilesGlob`` path and ``file:``
URL must lead, symlinks followed, into the repository or a folder of its
``source_roots``, and every manifest must be a file of the datasets folder. A plan reports
each breach as a problem at the manifest's field, quoting the path as it was written.

The rules live in ``reconciler.source_paths``; fetch applies them again before reading.
Here nothing is read either: the glob's matches are listed and resolved, never opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from ..config import RefusedManifest
from ..odf import models
from ..source_paths import Globs, OutsideError, SourceRoots, file_url_path
from .desired import DesiredDataset
from .model import Location, Problem
from .policies import field_location


def manifest_problems(refused: Iterable[RefusedManifest]) -> list[Problem]:
    """A problem for each entry of the datasets folder that was not read."""
    return [Problem(f"not read: {r.reason}", location=Location(str(r.path))) for r in refused]


def source_problems(globs: Globs, manifests: Iterable[DesiredDataset]) -> list[Problem]:
    """A problem for each polling source of ``manifests`` that leads out of the roots
    of ``globs`` (relative paths start at its folder) or into one of their reserved
    folders."""
    problems: list[Problem] = []
    for ds in manifests:
        for index, fetch in _polling_fetches(ds.snapshot):
            found = _breach(fetch, globs)
            if found is not None:
                key, message = found
                path = ("content", "metadata", index, "fetch", key)
                problems.append(
                    Problem(
                        message,
                        dataset=ds.name,
                        location=field_location(ds.loaded, path),
                        field=f"content.metadata[{index}].fetch.{key}",
                    )
                )
    return problems


def _polling_fetches(snapshot: models.DatasetSnapshot) -> Iterator[tuple[int, models.FetchStep]]:
    """Every polling source's fetch step, with its event's index: a superseded source is
    appended to the chain too, so each one is judged."""
    for index, event in enumerate(snapshot.metadata):
        if isinstance(event, models.SetPollingSource):
            yield index, event.fetch


def _breach(fetch: models.FetchStep, globs: Globs) -> tuple[str, str] | None:
    """The field and the message of the fetch step's breach, if it has one."""
    if isinstance(fetch, models.FetchStepFilesGlob):
        message = _glob_breach(fetch.path, globs)
        return None if message is None else ("path", message)
    if isinstance(fetch, models.FetchStepUrl):
        message = _file_url_breach(fetch.url, globs.roots, globs.base_dir)
        return None if message is None else ("url", message)
    return None


def _glob_breach(written: str, globs: Globs) -> str | None:
    try:
        globs.matches(written)
    except OutsideError as e:
        return f"FilesGlob path {written!r} {e}"
    return None


def _file_url_breach(written: str, roots: SourceRoots, root: Path) -> str | None:
    """Only ``file:`` URLs are judged here; other schemes reach no local file."""
    what = f"Url {written!r}"
    try:
        if urlsplit(written).scheme.lower() != "file":
            return None
        roots.confine(file_url_path(written, root))
    except OutsideError as e:
        return f"{what} {e}"
    except ValueError as e:
        return f"{what}: {e}"
    return None
