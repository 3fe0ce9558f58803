"""Pending data: what apply would process for a dataset even if no metadata changed.

A plan fetches nothing, so what it can say honestly depends on the source. A
``FilesGlob`` reads local files, and the next apply ingests exactly those its glob
matches whose names come after the last file the chain ingested (its last source
state): the planner is given the glob's listing (``planning.compose.list_globs``: directory
entries, never opened) and names them. A glob matching no file at all is a warning, since
it is most often a typo that would otherwise apply as silently "up to date". A ``Url`` or
``Container`` source only *may* have new data; finding out would mean fetching. A
derivative's pending work is the input slices it has not consumed yet.

Everything here is pure: it reads only the manifest, the chains' projections and the
listing it is handed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Literal, NamedTuple

from ..ingest.fetch import EventTimeError, event_time_from_name
from ..odf import models
from ..odf.chain import ChainState
from .desired import DesiredDataset, polling_source
from .model import DatasetPlan, Location, Pending, Problem, Severity
from .patterns import regex_problem
from .policies import field_location

NAMED_FILES = 10  # file names listed before "and N more"
_ETAG = "odf/etag"  # the source-state kind in which a FilesGlob records its last file's name

GlobListings = Mapping[str, Sequence[str]]
"""Per dataset name, the names of the files its ``FilesGlob`` matches now, sorted."""


class TouchedFile(NamedTuple):
    """A file of a ``FilesGlob`` source that a pull request, or the working tree, added,
    modified or deleted."""

    path: str
    """As the repository shows it: ``sources/orders/orders-2026-01-05.csv``."""
    status: Literal["added", "modified", "deleted"]


class TouchedSources(NamedTuple):
    """The files of a dataset's ``FilesGlob`` added, modified or deleted since a point at
    which its chain had ingested every file up to ``last_read``, in name order."""

    files: tuple[TouchedFile, ...]
    last_read: str
    since: str
    """The commit or ref the changes are counted from, which still has each modified
    file as it was read: ``git restore --source <since>`` undoes the edit."""
    by: str
    """What changed the files and since when: ``by this pull request``, or ``since
    commit 1a2b3c4 (the last to advance its chain)``."""
    base_read: str | None = None
    """In a pull request, the last file the chain on the base's tip had read: a file
    the pull request adds under that very name was read before it existed here, as
    another file (deleted since), and never will be again."""


def pending_data(
    ds: DesiredDataset,
    actual: Mapping[str, ChainState],
    listings: GlobListings | None,
    touched: TouchedSources | None = None,
) -> tuple[Pending, ...]:
    """The source's pending data (if any) and the input slices not yet consumed.

    Without ``listings`` (a caller that listed nothing) a ``FilesGlob`` is only said to
    *may* have new data, like any other source. ``touched`` may know a later last file
    than the chain at hand (the base's tip, for a pull request): files up to it are not
    new, whatever the pull request's own copy of the chain says.
    """
    state = actual.get(ds.name)
    _, source = polling_source(ds.snapshot)
    pending: list[Pending] = []
    if source is not None:
        listed = _listed(source, ds.name, listings)
        if listed is None:
            pending.append(
                Pending("polling-source", f"{source.fetch.kind} source may have new data")
            )
        elif files := files_to_read(listed, state, touched):
            pending.append(Pending("new-files", _files_phrase(files)))
    return (*pending, *_unconsumed_inputs(ds, actual, state))


def empty_glob_problems(ds: DesiredDataset, listings: GlobListings | None) -> list[Problem]:
    """A warning for a ``FilesGlob`` in force that matches no file at all, at its path."""
    index, source = polling_source(ds.snapshot)
    if source is None or _listed(source, ds.name, listings) != ():
        return []
    assert isinstance(source.fetch, models.FetchStepFilesGlob)
    return [
        Problem(
            f"FilesGlob path {source.fetch.path!r} matches no file",
            dataset=ds.name,
            location=field_location(ds.loaded, ("content", "metadata", index, "fetch", "path")),
            field=f"content.metadata[{index}].fetch.path",
            severity=Severity.WARNING,
        )
    ]


def event_time_problems(
    ds: DesiredDataset,
    state: ChainState | None,
    listings: GlobListings | None,
    touched: TouchedSources | None,
) -> list[Problem]:
    """An error for each file apply would read whose name the source's ``fromPath``
    pattern cannot give an event time (``NAMED_FILES`` of them, then a count): fetch
    stops at the first, and every file after it waits, run after run, until renamed.
    ``state`` is None for a chain read again from every file (created or recreated)."""
    index, source = polling_source(ds.snapshot)
    event_time = getattr(source.fetch, "event_time", None) if source is not None else None
    if source is None or not isinstance(event_time, models.EventTimeSourceFromPath):
        return []
    if regex_problem(event_time.pattern) is not None:
        return []  # the pattern's own error (``source_checks``) says what is wrong
    listed = _listed(source, ds.name, listings) or ()
    path = ("content", "metadata", index, "fetch", "eventTime", "pattern")
    problems = []
    for name in files_to_read(listed, state, touched):
        try:
            event_time_from_name(name, event_time)
        except EventTimeError as e:
            problems.append(
                Problem(
                    f"{e}: apply would stop at this file, and read no file after it",
                    dataset=ds.name,
                    location=field_location(ds.loaded, path),
                    field=f"content.metadata[{index}].fetch.eventTime.pattern",
                )
            )
    return at_most(problems, NAMED_FILES)


def at_most(problems: list[Problem], limit: int) -> list[Problem]:
    """``problems`` as they are up to ``limit``; past it, the first ``limit`` and one more
    that counts the rest (a folder of misnamed exports need not flood the plan)."""
    if len(problems) <= limit:
        return problems
    rest = len(problems) - limit
    last = problems[limit]
    more = f"and {rest} more file{'s' if rest > 1 else ''} like these"
    return [*problems[:limit], replace(last, message=more)]


def unread_changes(ds: DesiredDataset, touched: TouchedSources | None) -> list[Problem]:
    """An error for each source file a pull request (or, in a plan without a base, the
    commits and the working tree since the chain's last committed run) added or modified
    that no apply will ever read: a ``FilesGlob`` reads files once, in name order, after
    the last one its chain ingested, so an edit to a file already ingested, or a new file
    whose name sorts before that one, is ignored and the apply says "up to date". A
    warning for each file it deleted that the chain had read (``_deleted``). (A chain
    read again from every file, created or recreated, has none: ``touched`` is then
    None.)"""
    if touched is None:
        return []
    after = touched.last_read
    index, source = polling_source(ds.snapshot)
    location = field_location(ds.loaded, ("content", "metadata", index, "fetch", "path"))
    field = f"content.metadata[{index}].fetch.path"
    problems = []
    for file in touched.files:
        name = PurePosixPath(file.path).name
        # An added file named as the last one ingested was ingested by this very chain
        # (the pull request changed the chain too, which the chain policy judges), unless
        # the base had read a file of that name: one deleted since, and added back.
        added_again = file.status == "added" and name == after == touched.base_read
        if name > after or (name == after and file.status == "added" and not added_again):
            continue
        if file.status == "deleted":
            problems.append(_deleted(ds, file, touched, location, field))
            continue
        new_file = f"a new file whose name sorts after {after}"
        rows = _where_rows_go(source.merge if source else None, new_file)
        if file.status == "modified":
            what = f"modified {touched.by}, was ingested by {ds.name} already"
            fix = "the change will never be ingested; restore the file (git restore --source"
            fix += f" {touched.since} -- {shlex.quote(file.path)}); {rows}"
        else:
            fix = f"it will never be ingested; {rows}"
            relation = "is named as" if added_again else "sorts before"
            again = " (a file of that name was read, then deleted)" if added_again else ""
            what = f"added {touched.by}, {relation} {after}, the last file {ds.name} ingested"
            what += again
        problems.append(
            Problem(
                f"{file.path}, {what}: a FilesGlob source reads each file once, in name"
                f" order, so {fix}",
                dataset=ds.name,
                location=location,
                field=field,
            )
        )
    return problems


def _deleted(
    ds: DesiredDataset,
    file: TouchedFile,
    touched: TouchedSources,
    location: Location | None,
    field: str,
) -> Problem:
    """A warning for a file the chain read that is deleted: its rows stay in the chain,
    but a recreate reads every file again and would be refused (``plan.recreate``), so
    a breaking change to the dataset could never be carried out."""
    return Problem(
        f"{file.path}, deleted {touched.by}, was ingested by {ds.name} already: its rows"
        f" stay in the chain, but {ds.name} can no longer be recreated (a recreate reads"
        " every file again), so no breaking change to it can be applied; keep the file"
        f" (git restore --source {touched.since} -- {shlex.quote(file.path)}) unless it never"
        " will be",
        dataset=ds.name,
        location=location,
        field=field,
        severity=Severity.WARNING,
    )


def _where_rows_go(merge: models.MergeStrategy | None, new_file: str) -> str:
    """Where rows that were not ingested can still go, as the merge strategy reads them:
    advice that suits an Append source would lose a Snapshot's other rows, and a Ledger
    drops a corrected row whose key it holds."""
    if isinstance(merge, models.MergeStrategySnapshot):
        return (
            f"put the whole state, corrected, in {new_file}: a Snapshot source takes each"
            " file as the state of every key, and retracts the rows a file leaves out"
        )
    if isinstance(merge, models.MergeStrategyLedger):
        return (
            f"only rows of new primary keys can still be added, in {new_file}: a Ledger"
            " keeps the first row of each key and drops any later row for it, so a"
            " correction to a row it holds cannot be ingested"
        )
    return f"put the rows in {new_file}: they are appended beside the rows ingested already"


def _listed(
    source: models.SetPollingSource, name: str, listings: GlobListings | None
) -> tuple[str, ...] | None:
    """The listed file names of a ``FilesGlob`` source; None for any other source, or
    when nothing was listed (no listings given, or a path the plan refuses to follow)."""
    if not isinstance(source.fetch, models.FetchStepFilesGlob) or listings is None:
        return None
    listed = listings.get(name)
    return None if listed is None else tuple(listed)


def files_to_read(
    listed: Sequence[str], state: ChainState | None, touched: TouchedSources | None
) -> list[str]:
    """The files the next apply would ingest: by name, those after the last one ingested
    (fetch's own rule, so the plan and the pull agree on every name)."""
    after = last_file(state)
    if touched is not None and (after is None or touched.last_read > after):
        after = touched.last_read
    return sorted({n for n in listed if after is None or n > after})


def last_file(state: ChainState | None) -> str | None:
    """The name of the last file a ``FilesGlob`` source of the chain ingested."""
    last = state.last_source_state if state is not None else None
    return last_file_of(last)


def last_file_of(source_state: models.SourceState | None) -> str | None:
    """The file name a ``FilesGlob``'s source state records; None for any other state."""
    return source_state.value if source_state is not None and source_state.kind == _ETAG else None


def _files_phrase(files: Sequence[str]) -> str:
    """``3 new files: a.csv, b.csv, c.csv``; past ``NAMED_FILES`` names, ``and N more``."""
    noun = "new file" if len(files) == 1 else "new files"
    named = ", ".join(files[:NAMED_FILES])
    more = len(files) - NAMED_FILES
    return f"{len(files)} {noun}: {named}" + (f" and {more} more" if more > 0 else "")


def inputs_pending(
    plans: Mapping[str, DatasetPlan], datasets: Mapping[str, DesiredDataset]
) -> dict[str, DatasetPlan]:
    """``plans`` with each derivative that has no data waiting of its own, but reads an
    input that has (files to ingest, slices to consume: known work, not a source that
    only *may* have data), marked as having data waiting too, however far upstream it
    is. The plan said "2 with pending data" and the apply after it "3 updated": a
    derivative advances on what its inputs ingest in the same run. ``datasets`` is in
    dependency order, so an input is marked before its readers are looked at."""
    marked = dict(plans)
    for name, ds in datasets.items():
        plan = marked.get(name)
        if plan is None or plan.data_waiting or not ds.inputs:
            continue
        waiting = [i for i in ds.inputs if i in marked and marked[i].data_waiting]
        if waiting:
            has = "has" if len(waiting) == 1 else "have"
            detail = f"{', '.join(waiting)} {has} data waiting, which this run brings in first"
            marked[name] = replace(plan, pending=(*plan.pending, Pending("inputs-pending", detail)))
    return marked


def _unconsumed_inputs(
    ds: DesiredDataset, actual: Mapping[str, ChainState], state: ChainState | None
) -> list[Pending]:
    """Each input with slices past the offset this dataset consumed up to."""
    consumed = state.inputs if state is not None else {}
    pending: list[Pending] = []
    for input_name in ds.inputs:
        upstream = actual.get(input_name)
        if upstream is None or upstream.last_offset is None or upstream.dataset_id is None:
            continue
        cursor = consumed.get(upstream.dataset_id)
        done = cursor.offset if cursor is not None else None
        if done is None or done < upstream.last_offset:
            first = 0 if done is None else done + 1
            pending.append(
                Pending(
                    "unconsumed-inputs",
                    f"{input_name}: offsets {first}..{upstream.last_offset} not yet consumed",
                )
            )
    return pending
