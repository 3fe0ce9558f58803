"""How an apply shows its work while Spark runs, and sums it up.

On a terminal, a live table: one row per dataset with its stage (fetch, read, merge,
commit…), its records and its time. Elsewhere (CI logs), plain timestamped lines, a
START and a result per dataset, like dbt's, because a log cannot be redrawn. Both end in
the same one-line summary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from ..apply.outcome import WROTE, Outcome, Status
from ..wording import count, printable
from .common import duration

_LABELS = {
    Status.CREATED: "created",
    Status.UPDATED: "updated",
    Status.RECREATED: "recreated",
    Status.UP_TO_DATE: "up to date",
    Status.FAILED: "failed",
    Status.SKIPPED: "skipped",
    Status.DELETED: "deleted",
}
_TAGS = {Status.FAILED: "ERROR", Status.SKIPPED: "SKIP"}


@dataclass(frozen=True)
class Finished:
    """One dataset's outcome, with its time and the offsets it wrote."""

    outcome: Outcome
    seconds: float
    offsets: tuple[int, int] | None = None


def describe(outcome: Outcome) -> str:
    """``updated: 7 blocks (5 metadata), 36 records``, ``failed: ReadError: …``."""
    label = _LABELS[outcome.status]
    parts = []
    blocks = outcome.metadata_blocks + outcome.data_blocks
    if blocks:
        metadata = f" ({outcome.metadata_blocks} metadata)" if outcome.metadata_blocks else ""
        parts.append(f"{count(blocks, 'block')}{metadata}")
    if outcome.data_blocks:
        parts.append(count(outcome.rows, "record"))
    if outcome.moved:
        parts.append(f"{count(outcome.moved, 'file')} moved into the data store")
    if outcome.renamed_from:
        parts.append(f"renamed from {outcome.renamed_from}")
    detail = ", ".join(parts)
    if outcome.message:
        message = printable(outcome.message)  # it may quote a file's name, or a server
        detail = f"{detail}; {message}" if detail else message
    return f"{label}: {detail}" if detail else label


def summary(finished: Sequence[Finished], seconds: float) -> str:
    """``6 datasets: 4 updated (1,212 records), 2 up to date in 41 s``."""
    parts = []
    for status in Status:
        runs = [f for f in finished if f.outcome.status is status]
        if not runs:
            continue
        part = f"{len(runs)} {_LABELS[status]}"
        if status in WROTE:
            part += f" ({count(sum(f.outcome.rows for f in runs), 'record')})"
        elif kept := sum(f.outcome.rows for f in runs if f.outcome.data_blocks):
            # a pull that failed part way keeps the files before it, which the commit's
            # subject counts as advanced: this line must not say less
            part += f" ({count(kept, 'record')} kept)"
        parts.append(part)
    done = ", ".join(parts) or "nothing to do"
    return f"{count(len(finished), 'dataset')}: {done} in {duration(seconds)}"


def _clock() -> str:
    return datetime.now().strftime("%H:%M:%S")


class LineView:
    """``12:00:01 START org.x`` and ``12:00:03 OK    org.x updated: … in 1.9 s``.

    ``quiet`` keeps only failures; ``err`` sends the lines to stderr (when stdout carries
    a JSON document).
    """

    def __init__(self, quiet: bool, err: bool) -> None:
        self.quiet, self.err = quiet, err

    def start(self, name: str) -> None:
        if not self.quiet:
            typer.echo(f"{_clock()} START {name}", err=self.err)

    def stage(self, stage: str) -> None:
        """Stages are for the live view; a log line per stage would bury the results."""

    def finish(self, done: Finished) -> None:
        status = done.outcome.status
        if self.quiet and status not in _TAGS:
            return
        tag = _TAGS.get(status, "OK")
        # The time ends the first line: a cause of several lines (every malformed record
        # of a file) follows it, rather than the time trailing its last record.
        first, _, rest = describe(done.outcome).partition("\n")
        text = f"{first} in {duration(done.seconds)}" + (f"\n{rest}" if rest else "")
        typer.echo(f"{_clock()} {tag:<5} {done.outcome.dataset} {text}", err=self.err)

    def close(self) -> None:
        """Nothing to tear down."""


@dataclass
class _Row:
    name: str
    stage: str = "waiting"
    began: float | None = None
    done: Finished | None = None


@dataclass
class LiveView:
    """A table redrawn in place while datasets run; it stays on screen when done."""

    names: Sequence[str]
    err: bool
    rows: dict[str, _Row] = field(init=False)
    current: _Row | None = field(default=None, init=False)
    live: Live = field(init=False)

    def __post_init__(self) -> None:
        self.rows = {name: _Row(name) for name in self.names}
        console = Console(stderr=self.err)
        self.live = Live(self, console=console, refresh_per_second=4, transient=False)
        self.live.start()

    def start(self, name: str) -> None:
        self.current = self.rows.setdefault(name, _Row(name))
        self.current.stage, self.current.began = "starting", time.monotonic()

    def stage(self, stage: str) -> None:
        if self.current is not None:
            self.current.stage = stage

    def finish(self, done: Finished) -> None:
        row = self.rows.setdefault(done.outcome.dataset, _Row(done.outcome.dataset))
        row.done, self.current = done, None
        self.live.refresh()

    def close(self) -> None:
        self.live.stop()

    def __rich__(self) -> Table:
        table = Table(box=None, pad_edge=False)
        for column in ("dataset", "stage", "records", "time"):
            table.add_column(column, justify="right" if column in ("records", "time") else "left")
        for row in self.rows.values():
            table.add_row(*self._cells(row))
        return table

    @staticmethod
    def _cells(row: _Row) -> tuple[str, str, str, str]:
        if row.done is not None:
            outcome = row.done.outcome
            style = {Status.FAILED: "red", Status.SKIPPED: "yellow"}.get(outcome.status, "green")
            records = f"{outcome.rows:,}" if outcome.data_blocks else ""
            text = f"[{style}]{escape(describe(outcome))}[/]"
            return row.name, text, records, duration(row.done.seconds)
        if row.began is None:
            return row.name, "[dim]waiting[/]", "", ""
        return row.name, f"[cyan]{row.stage}…[/]", "", duration(time.monotonic() - row.began)
