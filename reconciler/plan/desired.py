"""The desired state: every manifest loaded, checked, and ordered by dependency.

All problems are collected before anything else happens, so a pull request sees every
mistake in one plan rather than one per push: malformed manifests, duplicate names,
unknown inputs, cycles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..odf import models
from ..odf.gc_pause import paused_gc
from ..odf.manifest import LoadedSnapshot, ManifestError, load_snapshots
from ..odf.names import name_key
from ..wording import close_names, count, quoted
from .model import Location, Problem, Severity
from .policies import find_near_misses, find_override, find_renamed_from

NEAR_MISS = "reconcile-directive"
"""The field of the warning about a comment meant as a directive but none; a pull
request's plan makes it an error (``planning.compose``)."""


@dataclass(frozen=True)
class DesiredDataset:
    """One manifest with where it lives and the names of the datasets it reads."""

    loaded: LoadedSnapshot
    inputs: tuple[str, ...]  # resolved to dataset names where possible, else the raw ref
    override: str | None = None  # reason given for an approved breaking change
    override_line: int | None = None  # where the override comment is (1-based)
    renamed_from: tuple[tuple[str, int], ...] = ()  # each renamed-from line: old name, line

    @property
    def name(self) -> str:
        return self.loaded.snapshot.name

    @property
    def snapshot(self) -> models.DatasetSnapshot:
        return self.loaded.snapshot

    @property
    def location(self) -> Location:
        return Location(str(self.loaded.file), self.loaded.line)


@dataclass
class DesiredState:
    """Datasets by name (dependency order) and the problems found loading them."""

    datasets: dict[str, DesiredDataset] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    named: set[str] = field(default_factory=set)
    """The key (``name_key``) of every name a loaded manifest gives, also of those left
    out of ``datasets`` (a second definition, a member of a cycle)."""
    unreadable: int = 0
    """Manifest files that could not be read (refused, or failed to load): any of them
    may define any dataset, so ``--prune`` deletes nothing while there is one."""

    def defines(self, name: str) -> bool:
        """Whether ``name`` may have a manifest: a loaded one names it, or one could not
        be read. A chain for which this is false is truly orphaned."""
        return bool(self.unreadable) or name_key(name) in self.named

    def readers(self) -> dict[str, list[str]]:
        """For each dataset, the datasets that read it directly."""
        out: dict[str, list[str]] = {name: [] for name in self.datasets}
        for ds in self.datasets.values():
            for inp in ds.inputs:
                if inp in out:
                    out[inp].append(ds.name)
        return out

    def downstream(self, name: str) -> tuple[str, ...]:
        """Every dataset reading ``name``, transitively, in dependency order."""
        return _reached(name, self.readers(), self._ranks())

    def all_downstream(self) -> dict[str, tuple[str, ...]]:
        """``downstream`` of every dataset, from one readers map: asking per name would
        rebuild the map each time, quadratic in the number of datasets."""
        readers, ranks = self.readers(), self._ranks()
        return {name: _reached(name, readers, ranks) for name in self.datasets}

    def _ranks(self) -> dict[str, int]:
        """Each dataset's place in dependency order."""
        return {name: i for i, name in enumerate(self.datasets)}


def _reached(name: str, readers: dict[str, list[str]], ranks: dict[str, int]) -> tuple[str, ...]:
    """The datasets ``readers`` lead to from ``name``, in the order of ``ranks``."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for reader in readers.get(todo.pop(), []):
            if reader not in seen:
                seen.add(reader)
                todo.append(reader)
    return tuple(sorted(seen, key=ranks.__getitem__))


def transform_inputs(snapshot: models.DatasetSnapshot) -> list[models.TransformInput]:
    """The inputs of the last SetTransform of a manifest (the one that takes effect)."""
    _, transform = set_transform(snapshot)
    return list(transform.inputs) if transform is not None else []


def set_transform(snapshot: models.DatasetSnapshot) -> tuple[int, models.SetTransform | None]:
    """The transform in force (the manifest's last ``SetTransform``) and its index among
    the events, where a finding about it points; ``(-1, None)`` when there is none."""
    found = [(i, e) for i, e in enumerate(snapshot.metadata) if isinstance(e, models.SetTransform)]
    return found[-1] if found else (-1, None)


def polling_source(snapshot: models.DatasetSnapshot) -> tuple[int, models.SetPollingSource | None]:
    """The polling source in force (the manifest's last ``SetPollingSource``) and its
    index among the events, where a problem about it points; ``(-1, None)`` when there
    is none."""
    found = [
        (i, e) for i, e in enumerate(snapshot.metadata) if isinstance(e, models.SetPollingSource)
    ]
    return found[-1] if found else (-1, None)


@dataclass(frozen=True)
class Manifests:
    """The manifests as read, before their inputs are resolved: what a plan that judges
    them twice (before and after a rename) reads once."""

    loaded: tuple[LoadedSnapshot, ...]
    problems: tuple[Problem, ...]  # each file that failed to load, at its line
    unreadable: int  # files refused by the scan or failed to load


@paused_gc()
def read_manifests(paths: Iterable[Path], refused: int = 0) -> Manifests:
    """Every manifest in ``paths``; ``refused`` counts the manifest files the scan would
    not read (``RepoConfig.scan_manifests``).

    Every manifest's YAML tree is kept (to locate findings), so the cycle collector,
    left on, would walk a growing heap of acyclic nodes: paused (``gc_pause``)."""
    loaded: list[LoadedSnapshot] = []
    problems: list[Problem] = []
    unreadable = refused
    for path in paths:
        try:
            loaded += load_snapshots(path)
        except ManifestError as e:
            unreadable += 1
            problems += [
                Problem(i.message, location=Location(str(i.file), i.line, i.column), field=i.field)
                for i in e.issues
            ]
    return Manifests(tuple(loaded), tuple(problems), unreadable)


def load_desired(
    paths: Iterable[Path], known_ids: dict[str, str], refused: int = 0
) -> DesiredState:
    """``read_manifests``, then ``resolve_desired``."""
    return resolve_desired(read_manifests(paths, refused), known_ids)


def resolve_desired(manifests: Manifests, known_ids: dict[str, str]) -> DesiredState:
    """The manifests by name, in dependency order; ``known_ids`` maps chain dataset ids
    to names so that inputs given as ``did:odf:…`` resolve to datasets too."""
    state = DesiredState(problems=list(manifests.problems), unreadable=manifests.unreadable)
    loaded = manifests.loaded
    state.named = {name_key(item.snapshot.name) for item in loaded}
    by_name = _unique_names(loaded, state)
    resolved = {
        name: _resolve_inputs(item, by_name, known_ids, state) for name, item in by_name.items()
    }
    for name in _dependency_order(resolved, by_name, state):
        item = by_name[name]
        text = Path(item.file).read_text(encoding="utf-8")
        found = find_override(text)
        override, line = found if found else (None, None)
        state.datasets[name] = DesiredDataset(
            item, tuple(resolved[name]), override, line, find_renamed_from(text)
        )
        state.problems += [
            Problem(
                f"{quoted(comment)} is no reconcile directive, so it does nothing; the"
                " directives are `# reconcile: allow-breaking-change: <reason>` and"
                " `# reconcile: renamed-from: <old name>`, in lower case, each with a value",
                dataset=name,
                location=Location(str(item.file), at),
                field=NEAR_MISS,
                severity=Severity.WARNING,
            )
            for comment, at in find_near_misses(text)
        ]
    return state


def _unique_names(
    loaded: Iterable[LoadedSnapshot], state: DesiredState
) -> dict[str, LoadedSnapshot]:
    """The manifests by name, each name once. Names are case-insensitive (spec: Aliases
    and References), so ``NY-NewYork`` after ``ny-newyork`` is the same dataset defined
    again: reported at the later manifest, naming the first, and left out."""
    first_by_key: dict[str, LoadedSnapshot] = {}
    for item in loaded:
        name = item.snapshot.name
        first = first_by_key.setdefault(name_key(name), item)
        if first is not item:
            where = f"{first.file}:{first.position('content', 'name')[0]}"
            if first.snapshot.name != name:
                where += f" as {first.snapshot.name!r}; names are case-insensitive"
            state.problems.append(
                Problem(
                    f"dataset {name!r} is defined twice (also in {where})",
                    dataset=name,
                    location=Location(str(item.file), *item.position("content", "name")),
                    field="content.name",
                )
            )
    return {item.snapshot.name: item for item in first_by_key.values()}


def _resolve_inputs(
    item: LoadedSnapshot,
    by_name: dict[str, LoadedSnapshot],
    known_ids: dict[str, str],
    state: DesiredState,
) -> list[str]:
    names = []
    events = item.snapshot.metadata
    at = max((i for i, e in enumerate(events) if isinstance(e, models.SetTransform)), default=-1)
    for j, inp in enumerate(transform_inputs(item.snapshot)):
        ref = inp.dataset_ref
        name = known_ids.get(ref, ref)
        if name not in by_name:
            path = ("content", "metadata", at, "inputs", j, "datasetRef")
            hint = _spelled_otherwise(name, by_name)
            if not hint and state.unreadable:  # the input's own manifest may be the broken one
                unread = count(state.unreadable, "manifest")
                hint = f"; {unread} could not be read, and may define it"
            state.problems.append(
                Problem(
                    f"input {ref!r} of {item.snapshot.name!r} is not a dataset of this repository"
                    + hint,
                    dataset=item.snapshot.name,
                    location=Location(str(item.file), *item.position(*path)),
                    field=f"content.metadata[{at}].inputs[{j}].datasetRef",
                )
            )
            continue
        names.append(name)
    return names


def _spelled_otherwise(name: str, by_name: dict[str, LoadedSnapshot]) -> str:
    """The hint for a reference that names a dataset in other letter case (the two are
    one dataset: names are case-insensitive, so both cannot exist, but its chain lives
    under the manifest's spelling, which the reference must use), or one close to it."""
    key = name_key(name)
    same = [other for other in by_name if name_key(other) == key]
    if same:
        return f"; it is spelled {same[0]!r}"
    close = close_names(name, by_name)
    return f"; did you mean {close[0]!r}?" if close else ""


def _dependency_order(
    resolved: dict[str, list[str]], by_name: dict[str, LoadedSnapshot], state: DesiredState
) -> list[str]:
    """Inputs before readers, ties by name; a cycle is reported and its members dropped."""
    order: list[str] = []
    done: set[str] = set()
    on_path: list[str] = []
    in_cycle: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        if name in on_path:
            cycle = [*on_path[on_path.index(name) :], name]
            if not in_cycle.intersection(cycle):
                item = by_name[name]
                state.problems.append(
                    Problem(
                        "dependency cycle: " + " -> ".join(cycle),
                        dataset=name,
                        location=Location(str(item.file), item.line),
                    )
                )
            in_cycle.update(cycle)
            return
        on_path.append(name)
        for dep in sorted(resolved[name]):
            visit(dep)
        on_path.pop()
        done.add(name)
        if name not in in_cycle:
            order.append(name)

    for name in sorted(resolved):
        visit(name)
    return [n for n in order if n not in in_cycle]
