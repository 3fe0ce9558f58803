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

from collections.abc import Mapping

from ..odf.chain import ChainState
from ..wording import close_names
from .desired import DesiredState
from .model import Location, Problem


def find_renames(
    desired: DesiredState, actual: Mapping[str, ChainState]
) -> tuple[dict[str, str], list[Problem]]:
    """The renames to carry out, new name to old, and an error for each ``renamed-from``
    line that cannot be: the old name still has a manifest, has no chain, or is claimed
    by two manifests."""
    renames: dict[str, str] = {}
    problems: list[Problem] = []
    claimed: dict[str, str] = {}
    for ds in desired.datasets.values():
        if ds.renamed_from is None or ds.name in actual:
            continue  # no line, or the rename is done
        old, line = ds.renamed_from
        why = None
        if old in desired.datasets:
            why = f"{old!r} still has a manifest ({desired.datasets[old].location.file}):"
            why += " remove it, so its chain can move"
        elif old not in actual:
            close = close_names(old, actual)
            why = f"there is no chain {old!r} to rename" + (
                f"; did you mean {close[0]!r}?" if close else ""
            )
        elif old in claimed:
            why = f"{claimed[old]!r} is renamed from {old!r} too"
        if why is not None:
            problems.append(
                Problem(
                    f"renamed-from {old!r}: {why}",
                    dataset=ds.name,
                    location=Location(str(ds.loaded.file), line),
                    field="renamed-from",
                )
            )
            continue
        claimed[old] = ds.name
        renames[ds.name] = old
    return renames, problems


def renamed(actual: Mapping[str, ChainState], renames: Mapping[str, str]) -> dict[str, ChainState]:
    """The chains as they will be named once ``renames`` (new name to old) are done."""
    new_names = {old: new for new, old in renames.items()}
    return {new_names.get(name, name): state for name, state in actual.items()}
