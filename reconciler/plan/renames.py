"""Renaming a dataset: its chain moves to the new name, as Terraform's ``moved`` does.

A chain's identity is its Seed's ``did:odf`` id, and the name is only where its folder
is (and its ``info/alias``). A manifest whose name changed would otherwise be a new
dataset, its chain built again from scratch, with the old one deleted (``--prune``) and
every reader recreated, since their chains name the old id. The manifest says
``# reconcile: renamed-from: <old name>`` instead: the plan then judges it against the old
name's chain, as if the folder had the new name already, and apply moves the folder
before it appends anything. Readers keep their chains: a ``datasetRef`` that names the
new name resolves to the same id.

The line may stay after the rename: once the new name has a chain, it says nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from ..config import RepoConfig
from ..odf.chain import ChainState
from ..odf.manifest import ManifestError, load_snapshots
from ..odf.names import name_problem, shown
from ..wording import close_names
from .desired import DesiredState
from .model import Location, Problem
from .policies import find_renamed_from


def renamed_to(config: RepoConfig, old: str) -> str | None:
    """The name of the dataset whose manifest says it was renamed from ``old``, if one
    does: a command given the old name (``reconcile log``) points to the new one rather
    than saying only that it is not found."""
    for path in config.scan_manifests().paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if old in text and any(name == old for name, _ in find_renamed_from(text)):
            with contextlib.suppress(ManifestError):
                return load_snapshots(path)[0].snapshot.name
    return None


def find_renames(
    desired: DesiredState, actual: Mapping[str, ChainState]
) -> tuple[dict[str, str], list[Problem]]:
    """The renames to carry out, new name to old, and an error for each ``renamed-from``
    line that cannot be: more than one in a manifest, an old name that is no dataset
    name, still has a manifest, has no chain, or is claimed twice, or a new name that
    has a chain of its own while the old one still has one too."""
    renames: dict[str, str] = {}
    problems: list[Problem] = []
    claimed: dict[str, str] = {}
    for ds in desired.datasets.values():
        if not ds.renamed_from:
            continue
        old, line = ds.renamed_from[0]
        why = _conflict(ds.name, old, desired, actual, claimed)
        if len(ds.renamed_from) > 1:
            old, line = ds.renamed_from[1]
            why = "a manifest has one renamed-from line; remove the others"
        if why is None and ds.name in actual:
            continue  # the rename is done: the line says nothing
        if why is not None:
            problems.append(
                Problem(
                    f"cannot rename {shown(old)} to {ds.name!r}: {why}",
                    dataset=ds.name,
                    location=Location(str(ds.loaded.file), line),
                    field="renamed-from",
                )
            )
            continue
        claimed[old] = ds.name
        renames[ds.name] = old
    return renames, problems


def _conflict(
    new: str,
    old: str,
    desired: DesiredState,
    actual: Mapping[str, ChainState],
    claimed: Mapping[str, str],
) -> str | None:
    """Why ``old``'s chain cannot move to ``new``; None when it can (or already has)."""
    if name_problem(old) is not None:
        return "it is not a dataset name"
    if old in desired.datasets:
        return f"{old!r} still has a manifest ({desired.datasets[old].location.file}): remove it"
    if new in actual:
        if old in actual:
            return f"both have a chain: {new!r} would be updated and {old!r} deleted"
        return None
    if old not in actual:
        close = close_names(old, actual)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"there is no chain {old!r}{hint}"
    if old in claimed:
        return f"{claimed[old]!r} is renamed from it too"
    return None


def renamed(actual: Mapping[str, ChainState], renames: Mapping[str, str]) -> dict[str, ChainState]:
    """The chains as they will be named once ``renames`` (new name to old) are done."""
    new_names = {old: new for new, old in renames.items()}
    return {new_names.get(name, name): state for name, state in actual.items()}
