"""Paths to the reference data the tests read, all inside the repository (tests/data/).

The golden vectors and the kamu-contrib manifests are copies, so a fresh clone tests with
nothing beside it; tests/data/README.md names where each file came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The shared SparkSession fixture lives in its own plugin module; the JVMs' class archive
# in another.
pytest_plugins = ["conftest_spark", "jvm_archive"]

DATA = Path(__file__).resolve().parent / "data"
VECTORS = DATA / "odf-vectors"
FIXTURE_MANIFESTS = DATA / "kamu-contrib-manifests"


def load_vectors(name: str) -> Any:
    """The parsed JSON of one golden-vector file of ``tests/data/odf-vectors/``."""
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))
