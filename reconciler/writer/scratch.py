"""The working folder of one run, where Spark's tasks write the files it stages.

A slice (and the sorted runs it is merged from) is written by a Spark task, and the
driver then moves it under its hash. On a cluster the task runs on another machine, so
the folder must be one every executor sees at the same path as the driver: the
repository's cache (``RepoConfig.work_dir``), on the shared mount a cluster needs for the
repository anyway. The system's temporary folder is each machine's own, so it is only
the fallback of callers with no repository (benchmarks, tests).
"""

from __future__ import annotations

import tempfile
from pathlib import Path


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
