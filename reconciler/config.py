"""Where a GitOps repository keeps its manifests and chains.

Read from ``[tool.reconciler]`` of the repository's ``pyproject.toml`` so that the
settings are versioned and reviewed with the datasets they govern.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """``[tool.reconciler]`` holds a value of the wrong shape."""


@dataclass(frozen=True)
class RepoConfig:
    """Resolved locations inside one GitOps repository."""

    root: Path
    datasets_dir: Path
    odf_dir: Path
    policies_dir: Path

    @classmethod
    def load(cls, root: Path) -> RepoConfig:
        root = root.resolve()
        settings = _tool_settings(root / "pyproject.toml")
        return cls(
            root=root,
            datasets_dir=root / _str(settings, "datasets", "datasets"),
            odf_dir=root / _str(settings, "odf_root", "odf"),
            policies_dir=root / _str(settings, "policies", "policies"),
        )

    def manifest_paths(self) -> list[Path]:
        """Every ``*.yaml``/``*.yml`` under the datasets folder, sorted for stable output."""
        if not self.datasets_dir.is_dir():
            return []
        found = [*self.datasets_dir.rglob("*.yaml"), *self.datasets_dir.rglob("*.yml")]
        return sorted(p for p in found if p.is_file())


def _tool_settings(pyproject: Path) -> dict[str, Any]:
    if not pyproject.exists():
        return {}
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{pyproject}: {e}") from None
    settings = data.get("tool", {}).get("reconciler", {})
    if not isinstance(settings, dict):
        raise ConfigError(f"{pyproject}: [tool.reconciler] must be a table")
    return settings


def _str(settings: dict[str, Any], key: str, default: str) -> str:
    value = settings.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"[tool.reconciler] {key} must be a string, got {value!r}")
    return value
