"""What a plan was computed from: the facts a saved plan must still match to be applied.

A plan is a function of the manifests, the policies that judged them, the chains' heads,
the repository's settings and the reconciler's code (and, for a pull request, of the
base commit). Each is
fingerprinted (sha256 of files, the head multihash of chains, the version and commit as
they are) so that ``reconcile apply PLAN`` can name every one that moved.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import tempfile
import tomllib
from pathlib import Path

from ..config import RepoConfig, shown_path
from ..odf.repository import OdfRepository, RepositoryError
from ..plan.model import Fingerprints
from . import gitops

# The files ``load_policies`` may read (rules in YAML, schemas in JSON or YAML): hashing
# only those keeps a README beside the policies from making every saved plan stale.
_POLICY_SUFFIXES = (".yaml", ".json")


def reconciler_version() -> str:
    """The installed odf-reconciler's version: a plan made by other code may differ."""
    return importlib.metadata.version("odf-reconciler")


def take(config: RepoConfig, base_ref: str | None) -> Fingerprints:
    """The fingerprints of the repository as it is now.

    Taken before planning: a change landing while the plan is computed then makes the
    saved plan look stale (refused, safe) rather than fresh (applied, wrong).
    """
    base_commit = gitops.resolve_commit(config.root, base_ref) if base_ref else None
    manifests = tuple(
        (shown_path(path, config.root), _sha256(path.read_bytes()))
        for path in config.scan_manifests().paths
    )
    odf = OdfRepository(config.odf_dir)
    heads = tuple((name, head) for name in odf.names() if (head := _head(odf, name)) is not None)
    return Fingerprints(
        reconciler_version=reconciler_version(),
        manifests=manifests,
        policies=_policies(config, base_ref),
        heads=heads,
        base_commit=base_commit,
        settings=_settings(config),
    )


def _settings(config: RepoConfig) -> str:
    """sha256 of ``[tool.reconciler]`` as JSON with sorted keys: the rest of
    ``pyproject.toml`` (a project's version, its linters) does not make a plan stale."""
    pyproject = config.root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    table = tomllib.loads(text).get("tool", {}).get("reconciler", {})
    return _sha256(json.dumps(table, sort_keys=True, default=str).encode())


def _head(odf: OdfRepository, name: str) -> str | None:
    """A chain's head as text; ``unreadable`` for one the plan reports it cannot read (a
    merge conflict in ``refs/head``, a link), which then refuses the plan anyway."""
    try:
        head = odf.dataset(name).head()
    except (RepositoryError, ValueError):
        return "unreadable"
    return None if head is None else str(head)


def differences(saved: Fingerprints, current: Fingerprints) -> list[str]:
    """Every way ``current`` differs from ``saved``, one sentence each; empty if none."""
    found = _files("manifest", saved.manifests, current.manifests)
    found += _files("policy file", saved.policies, current.policies)
    found += _heads(dict(saved.heads), dict(current.heads))
    if saved.base_commit != current.base_commit:
        found.append(
            f"the base ref moved: planned at {saved.base_commit}, now {current.base_commit}"
        )
    if saved.settings is not None and saved.settings != current.settings:
        found.append("the settings changed: [tool.reconciler] in pyproject.toml")
    if saved.reconciler_version != current.reconciler_version:
        found.append(
            f"reconciler version {saved.reconciler_version} planned, "
            f"{current.reconciler_version} applying"
        )
    return found


def _policies(config: RepoConfig, base_ref: str | None) -> tuple[tuple[str, str], ...]:
    """The policy files that judge the plan: the base branch's with ``--base`` (when it has
    any, from the folder its settings name, as ``planning.compose`` decides), named by
    their path."""
    if base_ref is not None:
        with tempfile.TemporaryDirectory() as tmp:
            folder = gitops.export_policies(config, base_ref, Path(tmp))
            if folder is not None:
                return _policy_files(Path(tmp), shown_path(folder, config.root))
    return _policy_files(config.policies_dir, shown_path(config.policies_dir, config.root))


def _policy_files(directory: Path, named_as: str) -> tuple[tuple[str, str], ...]:
    if not directory.is_dir():
        return ()
    return tuple(
        (f"{named_as}/{path.name}", _sha256(path.read_bytes()))
        for path in sorted(directory.iterdir())
        if path.is_file() and path.suffix in _POLICY_SUFFIXES
    )


def _files(
    what: str, saved: tuple[tuple[str, str], ...], current: tuple[tuple[str, str], ...]
) -> list[str]:
    before, after = dict(saved), dict(current)
    found = []
    for path in sorted(before.keys() | after.keys()):
        if path not in after:
            found.append(f"{what} {path} removed")
        elif path not in before:
            found.append(f"{what} {path} added")
        elif before[path] != after[path]:
            found.append(f"{what} {path} changed")
    return found


def _heads(saved: dict[str, str], current: dict[str, str]) -> list[str]:
    found = []
    gone = {head: name for name, head in saved.items() if name not in current}
    new = {head: name for name, head in current.items() if name not in saved}
    moved = {gone[head]: new[head] for head in gone.keys() & new.keys()}  # a rename
    for name in sorted(saved.keys() | current.keys()):
        was, now = saved.get(name), current.get(name)
        if name in moved:
            found.append(f"chain {name} renamed to {moved[name]} (head {was})")
        elif name in moved.values():
            continue
        elif now is None:
            found.append(f"chain {name} removed (its head was {was})")
        elif was is None:
            found.append(f"chain {name} created (head {now})")
        elif was != now:
            found.append(f"chain head of {name} moved: planned at {was}, now {now}")
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
