"""The working folder of one run, where Spark's tasks write the files it stages.

A slice (and the sorted runs it is merged from) is written by a Spark task, and the
driver then moves it under its hash. On a cluster the task runs on another machine, so
the folder must be one every executor sees at the same path as the driver: the
repository's cache (``RepoConfig.work_dir``), on the shared mount a cluster needs for the
repository anyway. The system's temporary folder is each machine's own, so it is only
the fallback of callers with no repository (benchmarks, tests).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

INGEST_PREFIX = "odf-ingest-"
TRANSFORM_PREFIX = "odf-transform-"
PUSH_PREFIX = "odf-push-"
_LOCKED = (INGEST_PREFIX, TRANSFORM_PREFIX, PUSH_PREFIX)
"""The prefixes of the working folders made only under the repository lock."""


def scratch_dir(under: Path | None, prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder beneath ``under`` (created if need be), or in the system's
    temporary folder when ``under`` is None or cannot be written (``verify`` in a
    read-only checkout, say, which local mode does not mind); removed when its ``with``
    block ends."""
    if under is not None:
        try:
            under.mkdir(parents=True, exist_ok=True)
            return tempfile.TemporaryDirectory(prefix=prefix, dir=under)
        except OSError:
            pass
    return tempfile.TemporaryDirectory(prefix=prefix)


def remove_stale(under: Path) -> int:
    """Remove the working folders killed runs left beneath ``under`` (an ingest's copy of
    its source, a transform's staged slices: gigabytes, on a runner whose clone
    persists); how many. Call it holding the repository lock: the folders it removes are
    made only under that lock, so none of them is a live run's (``sql`` and ``verify``,
    which take no lock, use other prefixes)."""
    if not under.is_dir():
        return 0
    stale = [p for p in under.iterdir() if p.is_dir() and p.name.startswith(_LOCKED)]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return len(stale)
