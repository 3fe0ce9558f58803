"""Apply a plan: append its metadata blocks, then pull every root dataset in order.

Datasets are handled in the plan's dependency order. A dataset whose metadata or pull
fails is reported with its cause and its chain is left as it was; the datasets that read
it are skipped, and every unrelated dataset still runs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from .apply_metadata import apply_dataset, delete_dataset
from .ingest.pull import IngestContext, PullResult, pull_polling
from .odf import Timestamp
from .odf.multiformat import DatasetId
from .odf.repository import OdfRepository
from .plan.model import Action, Plan
from .transform.run import run_derivative


class Status(enum.StrEnum):
    UPDATED = "updated"
    UP_TO_DATE = "up-to-date"
    FAILED = "failed"
    SKIPPED = "skipped"
    DELETED = "deleted"


@dataclass(frozen=True)
class Outcome:
    """What happened to one dataset in this run."""

    dataset: str
    status: Status
    metadata_blocks: int = 0
    data_blocks: int = 0
    rows: int = 0
    message: str = ""


def describe(error: BaseException) -> str:
    """An error for the report: its type and message. Of an error raised by Spark or
    py4j only the first line is kept: the rest is the JVM's stack."""
    text = str(error).strip()
    if type(error).__module__.split(".")[0] in ("pyspark", "py4j"):
        text = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def apply_plan(
    repo: OdfRepository,
    plan: Plan,
    metadata_time: Timestamp,
    context: IngestContext,
    report: Callable[[Outcome], None] = lambda _: None,
) -> list[Outcome]:
    """Carry out ``plan``; ``report`` hears of each dataset as soon as it is done."""
    ids: dict[str, str] = {d.name: d.dataset_id for d in plan.datasets if d.dataset_id}
    failed: set[str] = set()
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        if outcome.status in (Status.FAILED, Status.SKIPPED):
            failed.add(outcome.dataset)
        outcomes.append(outcome)
        report(outcome)

    for ds in plan.datasets:
        if ds.action is Action.DELETE:
            error = delete_dataset(repo, ds)
            done(Outcome(ds.name, Status.FAILED if error else Status.DELETED, message=error or ""))
            continue
        if ds.action is Action.ORPHANED:
            continue
        broken = sorted(failed.intersection(ds.inputs))
        if broken:
            done(Outcome(ds.name, Status.SKIPPED, message=f"input {broken[0]} failed"))
            continue
        metadata = apply_dataset(repo, ds, metadata_time, ids)
        if metadata.error:
            done(Outcome(ds.name, Status.FAILED, metadata.blocks, message=metadata.error))
            continue
        done(_pull(repo, ds.name, ds.kind, metadata.blocks, context, ids))
    return outcomes


def _pull(
    repo: OdfRepository,
    name: str,
    kind: str,
    metadata_blocks: int,
    context: IngestContext,
    ids: dict[str, str],
) -> Outcome:
    dataset = repo.dataset(name)
    result: PullResult
    try:
        if kind == "Root":
            result = pull_polling(dataset, context)
        else:
            # Every input was created or pulled before its readers, so ``ids`` knows it.
            names = {DatasetId.parse(i): n for n, i in ids.items()}
            result = run_derivative(dataset, repo, names, context)
    except Exception as e:  # one dataset's failure, whatever it is, must not stop the others
        return Outcome(name, Status.FAILED, metadata_blocks, message=describe(e))
    changed = metadata_blocks or result.blocks
    return Outcome(
        name,
        Status.UPDATED if changed else Status.UP_TO_DATE,
        metadata_blocks,
        result.blocks,
        result.rows,
        result.note,
    )
