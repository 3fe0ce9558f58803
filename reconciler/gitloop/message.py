"""The commit message of a reconcile run: what moved for people, trailers for machines.

::

    reconcile: 2 datasets advanced (1,212 records), 1 failed

    Advanced:
    - org.example.a: 3 blocks (1 metadata), 1,200 records, offsets 0-1199, head f1620…
    - org.example.b: 1 block, 12 records, offsets 40-51, head f1620…

    Failed:
    - org.example.c: ReadError: sources/c.csv line 3: …

    Up to date: org.example.d

    Reconcile-Run-Id: 2f0c…
    Reconcile-Plan-Hash: 9b1e…
    Reconcile-Version: 0.1.0

A ``reconcile push --commit`` has a paragraph after the subject naming the file it
pushed, and no plan hash.

A dataset the run created or recreated says so first (``- org.x: recreated, 8 blocks …``):
a recreated chain has a new id, which readers outside the repository must follow.

A cause is one line. It arrives masked: the apply masks every dataset's cause (the
values of the environment variables the manifests' templates name, in every spelling,
``masking.Mask``) before it is shown, written as JSON or committed, so no secret reaches
git history even where an error message would have carried it. It names the
repository's files relative to its root (``config.shown_paths``), as the plan does: the
runner's checkout folder is no place anyone reading the history can look.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..apply.outcome import WROTE, Outcome, Status
from ..wording import count

_ALSO_COUNTED = (Status.DELETED, Status.FAILED, Status.SKIPPED)  # after "N advanced"


@dataclass(frozen=True)
class DatasetRun:
    """One dataset's outcome with what the commit records of it: its offsets and new head."""

    outcome: Outcome
    offsets: tuple[int, int] | None = None
    head: str | None = None

    @property
    def wrote(self) -> bool:
        """Whether the commit holds blocks the run wrote to its chain, which the subject
        counts as advanced: a pull that failed part way keeps the files before the
        failing one (``ingest.pull``), which the commit carries too."""
        return self.outcome.status in WROTE or bool(self.outcome.data_blocks)

    @property
    def advanced(self) -> bool:
        """Whether the commit's ``Advanced:`` paragraph names it: it wrote blocks, or
        its chain was deleted (which the subject counts apart)."""
        return self.wrote or self.outcome.status is Status.DELETED


@dataclass(frozen=True)
class Trailers:
    """The git trailers that tie a commit to its run, its plan and the reconciler."""

    run_id: str
    plan_hash: str | None  # sha256 of the plan JSON the run applied; a push has no plan
    version: str

    def lines(self) -> list[str]:
        plan = [] if self.plan_hash is None else [f"Reconcile-Plan-Hash: {self.plan_hash}"]
        return [f"Reconcile-Run-Id: {self.run_id}", *plan, f"Reconcile-Version: {self.version}"]


def commit_message(
    runs: Sequence[DatasetRun],
    trailers: Trailers,
    pushed_from: str | None = None,
    untracked: Sequence[str] = (),
) -> str:
    """The whole message: subject, the datasets by outcome, then the trailers; a
    ``reconcile push`` says which file it ingested (its name only: a path on the
    machine that pushed means nothing to the repository's readers). ``untracked`` are
    the locks and temporaries a merge had committed, which the commit takes out of git:
    a commit that changes files says which."""
    paragraphs = [subject(runs, len(untracked))]
    if pushed_from is not None:
        paragraphs.append(f"Pushed from {pushed_from}.")
    advanced = [_advanced(r) for r in runs if r.advanced]
    if advanced:
        paragraphs.append("\n".join(["Advanced:", *advanced]))
    for status, title in ((Status.FAILED, "Failed:"), (Status.SKIPPED, "Skipped:")):
        causes = [
            f"- {r.outcome.dataset}: {_first_line(r.outcome.message)}"
            for r in runs
            if r.outcome.status is status
        ]
        if causes:
            paragraphs.append("\n".join([title, *causes]))
    renamed = [
        f"- {r.outcome.renamed_from} -> {r.outcome.dataset}" for r in runs if r.outcome.renamed_from
    ]
    if renamed:
        paragraphs.append("\n".join(["Renamed:", *renamed]))
    moved = [
        f"- {r.outcome.dataset}: {count(r.outcome.moved, 'file')}" for r in runs if r.outcome.moved
    ]
    if moved:
        paragraphs.append("\n".join(["Moved into the data store:", *moved]))
    if untracked:
        paragraphs.append(_untracked(untracked))
    current = [r.outcome.dataset for r in runs if r.outcome.status is Status.UP_TO_DATE]
    if current:
        paragraphs.append("Up to date: " + ", ".join(current))
    paragraphs.append("\n".join(trailers.lines()))
    return "\n\n".join(paragraphs) + "\n"


def subject(runs: Sequence[DatasetRun], untracked: int = 0) -> str:
    """``reconcile: 3 datasets advanced (1,212 records)``, then any deleted, failed,
    skipped, renamed, moved or untracked."""
    updated = [r for r in runs if r.wrote]
    parts = []
    if updated:
        records = count(sum(r.outcome.rows for r in updated), "record")
        parts.append(f"{count(len(updated), 'dataset')} advanced ({records})")
    counts = {s: sum(1 for r in runs if r.outcome.status is s) for s in _ALSO_COUNTED}
    parts += [f"{n} {status.value}" for status, n in counts.items() if n]
    if renamed := sum(1 for r in runs if r.outcome.renamed_from):
        parts.append(f"{renamed} renamed")
    if not updated and not counts[Status.DELETED] and not renamed:  # each alone is a change
        parts.insert(0, "no dataset advanced")
    if moved := sum(r.outcome.moved for r in runs):
        parts.append(f"{count(moved, 'file')} moved into the data store")
    if untracked:
        parts.append(f"{count(untracked, 'temporary file')} untracked")
    return "reconcile: " + ", ".join(parts)


def _advanced(run: DatasetRun) -> str:
    outcome = run.outcome
    if outcome.status is Status.DELETED:
        return f"- {outcome.dataset}: deleted"
    blocks = outcome.metadata_blocks + outcome.data_blocks
    metadata = f" ({outcome.metadata_blocks} metadata)" if outcome.metadata_blocks else ""
    parts = [f"{count(blocks, 'block')}{metadata}"]
    if outcome.data_blocks:
        parts.append(count(outcome.rows, "record"))
    if run.offsets is not None:
        parts.append(f"offsets {run.offsets[0]}-{run.offsets[1]}")
    parts.append(f"head {run.head}")
    if outcome.status is Status.FAILED:
        parts.append("then failed (below)")
    elif outcome.status is not Status.UPDATED:
        parts.insert(0, outcome.status.value)  # created, or recreated: a new chain
    return f"- {outcome.dataset}: {', '.join(parts)}"


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "no cause given"


def recovery_subject(heads: dict[str, str | None]) -> str:
    """``reconcile: 2 datasets recovered from a run that did not commit``."""
    return f"reconcile: {count(len(heads), 'dataset')} recovered from a run that did not commit"


def recovery_message(
    killed: str, heads: dict[str, str | None], trailers: Trailers, untracked: Sequence[str] = ()
) -> str:
    """The commit of what a killed run had written: who it was, and each chain's head
    (None: a dataset it deleted); ``untracked`` as in ``commit_message``."""
    about = (
        f"{killed} ended without committing the chains it had advanced (killed, or its"
        " commit failed); they verify, and are committed as they were left:"
    )
    chains = [
        f"- {name}: deleted" if head is None else f"- {name}: head {head}"
        for name, head in heads.items()
    ]
    paragraphs = [recovery_subject(heads), about, "\n".join(chains)]
    if untracked:
        paragraphs.append(_untracked(untracked))
    paragraphs.append("\n".join(trailers.lines()))
    return "\n\n".join(paragraphs) + "\n"


def _untracked(paths: Sequence[str]) -> str:
    title = "Untracked (locks and temporaries a merge had committed):"
    return "\n".join([title, *(f"- {path}" for path in paths)])
