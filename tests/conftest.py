"""Paths to the reference data the tests read, all inside the repository (tests/data/),
and how many workers ``-n auto`` (the suite's default, see pyproject.toml) starts.

The golden vectors and the kamu-contrib manifests are copies, so a fresh clone tests with
nothing beside it; tests/data/README.md names where each file came from.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

# The shared SparkSession fixture lives in its own plugin module; the JVMs' class archive
# in another.
pytest_plugins = ["conftest_spark", "jvm_archive", "s3_server"]

DATA = Path(__file__).resolve().parent / "data"
VECTORS = DATA / "odf-vectors"
FIXTURE_MANIFESTS = DATA / "kamu-contrib-manifests"


def load_vectors(name: str) -> Any:
    """The parsed JSON of one golden-vector file of ``tests/data/odf-vectors/``."""
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


# Each worker has a SparkSession of its own and starts JVMs of its own; on 2 cores two
# workers took 13.7 min against 22 in one process, three took 15.5 (the cores are full).
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core this process may use, at most ``MAX_WORKERS``, as
    every worker holds a JVM of a gigabyte or more."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


# The machine's own git settings (/etc/gitconfig) are no part of a test: a runner image
# that installs Git LFS system-wide turned every `filter=lfs` attribute of a test on, and
# chain files committed before the attribute then read as changed. Set before any test
# (or xdist worker) starts git, and inherited by every subprocess.
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
