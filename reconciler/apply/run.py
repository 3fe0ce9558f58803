"""Apply a plan: append its metadata blocks, then pull every root dataset in order.

Datasets are handled in the plan's dependency order. A dataset whose metadata or pull
fails is reported with its cause and its chain is left as it was; the datasets that read
it are skipped, and every unrelated dataset still runs.

Each apply is reported as OpenLineage runs (``openlineage_events``): one parent run
``reconcile``, and a child run for every dataset that is pulled or transformed. A child
run covers the dataset's whole step: its metadata append, then its pull or transform.
Datasets with nothing new still get a run (with ``rowCount`` 0), so that a lineage
backend sees every scheduled run and can tell "ran, nothing new" from "did not run".
Skipped datasets (an input failed), deletions and orphans get none. The parent FAILs
when any dataset failed or was skipped, as the command's exit code does.

An apply holds the repository lock (``odf/lock.py``) and first sweeps away what a crashed
run left (``OdfRepository.remove_leftovers``). The CLI takes the lock before it plans, so
that a run that waited plans against what the previous one wrote; the lock is reentrant,
so ``apply_plan`` then shares it, and a caller that took none gets it here (or fails at
once with ``RepositoryLockedError`` naming the holder).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Concatenate, ParamSpec, TypeVar

from ..engine.errors import describe
from ..ingest.pull import IngestContext, PullResult, pull_polling
from ..lineage.openlineage_events import Lineage, RunHandle
from ..lineage.openlineage_runs import RunDescriber
from ..odf import Timestamp
from ..odf.multiformat import DatasetId
from ..odf.repository import Dataset, OdfRepository, RepositoryError
from ..odf.store import StoreError
from ..odf.store_move import MoveStoppedError, move_into_store
from ..plan.model import Action, DatasetPlan, Plan
from ..transform.run import run_derivative
from ..wording import count
from ..writer.commit import all_or_nothing
from .metadata import MetadataResult, append_planned, apply_dataset, delete_dataset
from .outcome import Outcome, Status
from .recreate import recreating

_NEW_CHAIN = (Action.CREATE, Action.RECREATE)
"""A new chain is built with its first pull, or not kept at all (a recreate's staging
folder is discarded, the old chain stays): a failure then kept none of its blocks."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _under_the_lock(
    apply: Callable[Concatenate[OdfRepository, _P], _R],
) -> Callable[Concatenate[OdfRepository, _P], _R]:
    """Run ``apply`` holding the repository lock, after sweeping leftovers of crashes."""

    @functools.wraps(apply)
    def locked(repo: OdfRepository, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with repo.lock("reconcile apply"):
            repo.remove_leftovers()
            return apply(repo, *args, **kwargs)

    return locked


@_under_the_lock
def apply_plan(
    repo: OdfRepository,
    plan: Plan,
    metadata_time: Timestamp,
    context: IngestContext,
    report: Callable[[Outcome], None] = lambda _: None,
    lineage: Lineage | None = None,
    *,
    start: Callable[[str], None] = lambda _: None,
    selected: Collection[str] | None = None,
) -> list[Outcome]:
    """Carry out ``plan``; ``report`` hears of each dataset as soon as it is done, and
    ``start`` when its work begins (a progress view shows it running).

    ``lineage`` receives the OpenLineage runs (see the module docstring); the default
    sends none. It is finished (and its client closed) when this returns or raises.
    ``selected`` limits the run to those datasets (``--select``); the others are left
    as they are, and their existing data is still read by selected readers.
    """
    lineage = lineage if lineage is not None else Lineage.disabled()
    describer = RunDescriber(repo)
    ids: dict[str, str] = {d.name: d.dataset_id for d in plan.datasets if d.dataset_id}
    failed: dict[str, Status] = {}  # failed or skipped, each a reason to skip its readers
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        if outcome.status in (Status.FAILED, Status.SKIPPED):
            failed[outcome.dataset] = outcome.status
        outcomes.append(outcome)
        report(outcome)

    lineage.start_parent()
    try:
        chosen = [d for d in plan.datasets if selected is None or d.name in selected]
        for ds in chosen:
            if ds.action in (Action.DELETE, Action.ORPHANED):
                continue
            broken = sorted(failed.keys() & set(ds.inputs))
            if broken:
                why = "failed" if failed[broken[0]] is Status.FAILED else "was skipped"
                done(Outcome(ds.name, Status.SKIPPED, message=f"input {broken[0]} {why}"))
                continue
            start(ds.name)
            renamed_from = None
            try:
                if ds.renamed_from is not None and not repo.dataset(ds.name).exists():
                    repo.rename(ds.renamed_from, ds.name)
                    renamed_from = ds.renamed_from
                moved = _move_into_store(repo, ds.name)
            except (StoreError, RepositoryError, OSError) as e:
                # the files moved before the stop left git: the commit must say so
                stopped = e.moved if isinstance(e, MoveStoppedError) else 0
                failure = Outcome(ds.name, Status.FAILED, message=str(e), moved=stopped)
                done(replace(failure, renamed_from=renamed_from))
                continue
            outcome = _apply_dataset(repo, ds, metadata_time, context, ids, lineage, describer)
            done(replace(outcome, moved=moved, renamed_from=renamed_from))
        # Deletions come last, and wait while anything else failed: a deletion cannot be
        # undone by a later run, and the change that removes a manifest often adds its
        # successor (a rename), whose failure must not leave neither.
        for ds in (d for d in chosen if d.action is Action.DELETE):
            if failed:
                held = count(len(failed), "dataset") + " did not succeed in this run"
                held = f"deletion held back: {held}; the next run deletes it"
                done(Outcome(ds.name, Status.SKIPPED, message=held))
                continue
            start(ds.name)
            error = delete_dataset(repo, ds)
            done(Outcome(ds.name, Status.FAILED if error else Status.DELETED, message=error or ""))
    except BaseException:
        lineage.finish_parent(failed=True)
        raise
    lineage.finish_parent(failed=bool(failed))
    return outcomes


def _move_into_store(repo: OdfRepository, name: str) -> int:
    """With a data store beside git, move the files the dataset folder still holds (it
    predates the store) into it, before the dataset's run reads or writes any."""
    if repo.store is None:
        return 0
    return move_into_store(repo.folder(name), repo.store)


class MetadataError(RuntimeError):
    """The plan's metadata could not be appended (raised to end the lineage run with FAIL)."""


@contextmanager
def _child_run(
    lineage: Lineage, describer: RunDescriber, ds: DatasetPlan
) -> Iterator[RunHandle | None]:
    """The dataset's lineage run around the body, or None (and no cost) when disabled."""
    if not lineage.enabled:
        yield None
        return
    with lineage.run(describer.describe(ds)) as run:
        yield run


@contextmanager
def _chain_of(
    repo: OdfRepository, ds: DatasetPlan, metadata_time: Timestamp, ids: dict[str, str]
) -> Iterator[tuple[Dataset, MetadataResult]]:
    """The chain the dataset's data goes into, with its planned metadata appended: for a
    RECREATE a new chain built beside the old one, which replaces it when the body
    succeeds (``apply.recreate``); else the dataset's own."""
    if ds.action is Action.RECREATE:
        with recreating(repo, ds, metadata_time, ids) as chain:
            yield chain
    elif ds.action is Action.CREATE:
        with _first_data_or_nothing(repo, ds, metadata_time, ids) as chain:
            yield chain
    else:
        yield repo.dataset(ds.name), apply_dataset(repo, ds, metadata_time, ids)


@contextmanager
def _first_data_or_nothing(
    repo: OdfRepository, ds: DatasetPlan, metadata_time: Timestamp, ids: dict[str, str]
) -> Iterator[tuple[Dataset, MetadataResult]]:
    """A new dataset is created together with its first pull or not at all.

    Its Seed and metadata are appended in the same all-or-nothing scope as the pull, so a
    pull that fails takes them back, and the folder goes too: nothing is written, and
    the next plan still shows ``create``. (A ``FilesGlob`` with no file yet is no
    failure: the dataset is created, awaiting its first file, as kamu does.)
    """
    dataset = repo.dataset(ds.name)
    try:
        with all_or_nothing(dataset):
            yield dataset, append_planned(dataset, ds, metadata_time, ids)
    except BaseException:
        if not dataset.exists():  # else another run created it: its chain stays
            ids.pop(ds.name, None)
            dataset.discard()
        raise


@dataclass
class _Stage:
    """The stage a pull or transform reached (fetch, read, …), heard from its progress
    callback, so that a failed run says which stage failed, whether it creates a chain or
    advances one."""

    forward: Callable[[str], None]
    name: str = "metadata"

    def hear(self, stage: str) -> None:
        self.name = stage
        self.forward(stage)


_WROTE_BY_ACTION = {Action.CREATE: Status.CREATED, Action.RECREATE: Status.RECREATED}
"""The status of a dataset whose planned action wrote blocks; any other is ``updated``."""


def _raised_by_a_stop(error: BaseException) -> bool:
    """Whether ``error`` came while a stop at once (a KeyboardInterrupt) was on its way
    out: the stop cut a call to Spark half way, and the clean-up after it (dropping a
    view) found py4j's connection broken ("Answer from Java side is empty"). The dataset
    was reported failed, where it was stopped; the stop goes on as a stop."""
    seen: BaseException | None = error.__context__
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return False


def _apply_dataset(
    repo: OdfRepository,
    ds: DatasetPlan,
    metadata_time: Timestamp,
    context: IngestContext,
    ids: dict[str, str],
    lineage: Lineage,
    describer: RunDescriber,
) -> Outcome:
    """Append the dataset's planned metadata, then pull or transform it, in one lineage run.

    Failures leave the run as exceptions (so that it ends with FAIL and their message)
    and are turned into the outcome here, outside it.
    """
    metadata_blocks = 0
    pulling = False
    kept = PullResult()  # what a pull that failed part way committed first, which stays
    stage = _Stage(context.progress)
    context = replace(context, progress=stage.hear)
    try:
        with _child_run(lineage, describer, ds) as run:
            with _chain_of(repo, ds, metadata_time, ids) as (dataset, metadata):
                metadata_blocks = metadata.blocks
                if metadata.error:
                    raise MetadataError(metadata.error)
                pulling = True
                result: PullResult
                if ds.kind == "Root":
                    result = pull_polling(dataset, context)
                    if result.failure is not None and ds.action is Action.RECREATE:
                        raise result.failure  # a rebuilt chain replaces the old one whole
                else:
                    # Every input was created or pulled before its readers, so ``ids``
                    # knows it.
                    names = {DatasetId.parse(i): n for n, i in ids.items()}
                    result = run_derivative(dataset, repo, names, context)
            if result.failure is not None:
                kept = result
                raise result.failure  # after the chain's scope, which would take it all back
            if run is not None:
                run.set_output_statistics(result.rows, result.size)
                run.set_output_schema(describer.columns(ds.name))
    except MetadataError as e:
        metadata_kept = 0 if ds.action in _NEW_CHAIN else metadata_blocks
        return Outcome(ds.name, Status.FAILED, metadata_kept, message=str(e))
    except Exception as e:  # one dataset's failure, whatever it is, must not stop the others
        if _raised_by_a_stop(e):
            raise KeyboardInterrupt from e
        if not pulling:
            raise  # an unexpected error while appending metadata stops the apply, as ever
        # A new chain keeps nothing, unless its pull kept the files before the failing one.
        metadata_kept = 0 if ds.action in _NEW_CHAIN and not kept.blocks else metadata_blocks
        message = f"{stage.name} failed: {describe(e)}"
        if kept.blocks:
            message += (
                f"; what the files before it added is kept ({count(kept.rows, 'record')}),"
                " and the next run starts again from this one"
            )
        return Outcome(ds.name, Status.FAILED, metadata_kept, kept.blocks, kept.rows, message)
    changed = metadata_blocks or result.blocks
    return Outcome(
        ds.name,
        _WROTE_BY_ACTION.get(ds.action, Status.UPDATED) if changed else Status.UP_TO_DATE,
        metadata_blocks,
        result.blocks,
        result.rows,
        result.note,
    )
