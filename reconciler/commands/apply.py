"""``reconcile apply`` (or a bare ``reconcile``): show the plan, then carry it out.

The plan is shown first (on stderr when stdout carries the JSON result); on a terminal a
plan that changes metadata is confirmed unless ``--yes``. Each dataset's progress is
shown as it runs, and the run ends with one summary line. Ctrl-C stops between datasets.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import typer

from ..apply import Outcome, apply_plan
from ..odf import Timestamp
from ..odf.lock import RepositoryLockedError
from ..openlineage_events import Lineage
from ..plan.model import Action, Plan
from ..planning import PlanRequest
from . import interrupt
from . import plan as plan_command
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    JavaNotFound,
    OutputFormat,
    Session,
    fail,
    usage_error,
)
from .progress import Finished, LineView, LiveView, summary
from .results import RunResult, any_failed, applied


@dataclass(frozen=True)
class RunOptions:
    """The options ``reconcile``, ``reconcile apply`` and ``reconcile plan`` share."""

    plan_only: bool = False
    output_format: OutputFormat = OutputFormat.TEXT
    out: Path | None = None
    detailed_exitcode: bool = False
    base: str | None = None
    prune: bool = False
    select: list[str] | None = None
    yes: bool = False

    def given(self) -> list[str]:
        """The options set to other than their defaults, as spelt on the command line."""
        default = RunOptions()
        return [
            flag for name, flag in _FLAGS.items() if getattr(self, name) != getattr(default, name)
        ]

    @property
    def request(self) -> PlanRequest:
        return PlanRequest(base_ref=self.base, prune=self.prune)


_FLAGS = {
    "plan_only": "--plan",
    "output_format": "--format",
    "out": "--out",
    "detailed_exitcode": "--detailed-exitcode",
    "base": "--base",
    "prune": "--prune",
    "select": "--select",
    "yes": "--yes",
}


class _Stop(BaseException):
    """Ctrl-C was pressed: leave the apply at this dataset boundary."""


def run(session: Session, options: RunOptions) -> None:
    """Plan, then apply unless ``--plan``."""
    if options.plan_only:
        plan_command.run(
            session,
            options.request,
            options.output_format,
            options.out,
            options.detailed_exitcode,
            options.select,
        )
    if options.output_format is OutputFormat.MARKDOWN:
        raise usage_error("--format markdown is for plans: add --plan, or use text or json")
    as_json = options.output_format is OutputFormat.JSON
    # The lock covers planning too: a run that waited plans again against what the run
    # before it wrote, rather than applying a plan made stale while it waited.
    try:
        with session.odf.lock("reconcile apply", timeout=session.lock_timeout):
            _plan_and_apply(session, options, as_json)
    except RepositoryLockedError as e:
        raise fail(f"error: {e}") from None


def _plan_and_apply(session: Session, options: RunOptions, as_json: bool) -> None:
    """Plan, show the plan, confirm, then apply it with progress and a summary."""
    planned = plan_command.make(session, options.request, options.select)
    shown = planned.shown
    if options.out is not None:
        plan_command.emit(plan_command.render(shown, options.output_format, False), options.out)
    elif not session.quiet:
        text = plan_command.render(shown, OutputFormat.TEXT, not as_json)
        (sys.stderr if as_json else sys.stdout).write(text)
    result = RunResult("apply")
    if shown.has_errors:
        result.error = "the plan has errors: nothing was applied"
        _finish(session, result, [], EXIT_FAILED, as_json)
    if not _confirmed(shown, options.yes):
        result.error = "apply cancelled: nothing was written"
        _finish(session, result, [], EXIT_FAILED, as_json)
    names = [d.name for d in shown.datasets if d.action is not Action.ORPHANED]
    finished, code = _execute(session, planned, names, result, as_json)
    _finish(session, result, finished, code, as_json)


def _confirmed(shown: Plan, yes: bool) -> bool:
    """Ask on a terminal before changing metadata; pulling new data needs no answer, and
    a run without a terminal (CI) has nobody to ask."""
    changes = any(d.action in (Action.CREATE, Action.UPDATE, Action.DELETE) for d in shown.datasets)
    if yes or not changes or not sys.stdin.isatty():
        return True
    return typer.confirm("Apply these changes?", default=False, err=True)


def _execute(
    session: Session,
    planned: plan_command.Planned,
    names: list[str],
    result: RunResult,
    as_json: bool,
) -> tuple[list[Finished], int]:
    """Apply the plan with a progress view; the finished datasets and the exit code."""
    terminal = (sys.stderr if as_json else sys.stdout).isatty()
    view = LiveView(names, as_json) if terminal and not session.quiet else None
    lines = LineView(session.quiet, as_json)
    shown = view or lines
    finished: list[Finished] = []
    began: dict[str, float] = {}

    def start(name: str) -> None:
        began[name] = time.monotonic()
        shown.start(name)

    def report(outcome: Outcome) -> None:
        started = began.get(outcome.dataset)  # a skipped dataset never starts
        seconds = 0.0 if started is None else time.monotonic() - started
        done = Finished(outcome, seconds, _offsets(session, outcome))
        finished.append(done)
        result.datasets.append(applied(done))
        shown.finish(done)
        if interrupt.requested() and len(finished) < len(names):
            raise _Stop

    when = session.system_time or Timestamp.now()
    lineage = Lineage.from_environment(session.config.root, os.environ)
    context = session.ingest_context(progress=shown.stage)
    code = EXIT_OK
    try:
        with interrupt.at_boundaries():
            apply_plan(
                session.odf,
                planned.full,
                when,
                context,
                report,
                lineage,
                start=start,
                selected=planned.selected,
            )
    except (_Stop, KeyboardInterrupt):
        where = f"after {finished[-1].outcome.dataset}" if finished else "before any dataset"
        result.interrupted = True
        result.error = f"interrupted: stopped {where}; every chain is valid"
        code = EXIT_INTERRUPTED
    except JavaNotFound as e:
        result.error = str(e)
        code = EXIT_FAILED
    finally:
        shown.close()
    if code == EXIT_OK and any_failed(finished):
        code = EXIT_FAILED
    return finished, code


def _offsets(session: Session, outcome: Outcome) -> tuple[int, int] | None:
    """The first and last offset the dataset's run wrote (its records are contiguous)."""
    if not outcome.rows:
        return None
    last = session.odf.dataset(outcome.dataset).projection().last_offset
    return None if last is None else (last - outcome.rows + 1, last)


def _finish(
    session: Session, result: RunResult, finished: list[Finished], code: int, as_json: bool
) -> None:
    """The summary line (always, even with ``-q``), the JSON document, the exit."""
    seconds = session.elapsed()
    line = summary(finished, seconds)
    if result.error is not None:
        prefix = "" if result.interrupted else "error: "
        typer.echo(prefix + result.error, err=True)
    typer.echo(line, err=as_json)
    if as_json:
        sys.stdout.write(result.render(code, line, seconds))
    raise typer.Exit(code)
