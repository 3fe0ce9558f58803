"""Shared test fixtures: paths to the shared golden vectors and fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# The shared SparkSession fixture lives in its own plugin module.
pytest_plugins = ["conftest_spark"]

SHARED = Path(__file__).resolve().parents[2] / "shared"
VECTORS = SHARED / "odf" / "vectors"
FIXTURE_MANIFESTS = SHARED / "fixtures" / "kamu-contrib-manifests"


def load_vectors(name: str) -> Any:
    return json.loads((VECTORS / name).read_text())


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return SHARED
