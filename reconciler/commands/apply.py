"""``reconcile apply`` (or a bare ``reconcile``): show the plan, then carry it out.

The plan is shown first (on stderr when stdout carries the JSON result); on a terminal a
plan that changes metadata is confirmed unless ``--yes``. Each dataset's progress is
shown as it runs, and the run ends with one summary line. Ctrl-C stops between datasets.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn

import typer

from ..apply.outcome import Outcome, Status
from ..apply.run import apply_plan
from ..config import shown_path, shown_paths
from ..ingest.pull import STOPPED
from ..lineage.openlineage_events import Lineage
from ..odf import Timestamp
from ..odf.lock import LockHolder, RepositoryLockedError
from ..plan.model import Action, Location, Plan, Severity
from ..wording import count
from . import interrupt, loop
from . import plan as plan_command
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    JavaNotFound,
    Session,
    duration,
    usage_error,
    written_offsets,
)
from .options import OutputFormat, RunOptions
from .progress import Finished, LineView, LiveView, summary
from .results import RunResult, any_failed, applied


class _Stop(BaseException):
    """Ctrl-C was pressed: leave the apply at this dataset boundary."""


def run(session: Session, options: RunOptions) -> None:
    """Plan, then apply (a plan alone is ``commands.plan``)."""
    if options.output_format is OutputFormat.MARKDOWN:
        raise usage_error("--format markdown is for plans: add --plan, or use text or json")
    as_json = options.output_format is OutputFormat.JSON
    # A store the run cannot use stops it first: a plan that analyses a changed query
    # starts Spark (half a minute) for a run that could write nothing anyway.
    problem = session.store_problem()
    if problem is not None:
        _stopped(session, problem, as_json)
    # A plan with errors is refused before the lock is taken, so a refused apply writes
    # nothing at all, not even the lock file. Under the lock the plan is made again only
    # if a chain moved meanwhile (a run that waited plans against what the run before it
    # wrote, never applying a plan made stale while it waited).
    first = _make(session, options)
    if first.planned.shown.has_errors:
        _show(session, options, first.planned.shown, as_json)
        refused = _refused(session, first)
        _finish(session, refused.result, [], refused.code, as_json)
    heads = _heads(session)
    try:
        with loop.writing(session, "reconcile apply", options.commit) as killed:
            attempt = _attempts(session, options, as_json, first, heads, killed)
    except (RepositoryLockedError, loop.CommitRefusedError) as e:
        _stopped(session, str(e), as_json)
    _finish(session, attempt.result, attempt.finished, attempt.code, as_json)


def _stopped(session: Session, why: str, as_json: bool) -> NoReturn:
    """End a run that stopped before its datasets, with its JSON document too: the
    scheduled job's summary reads why from it."""
    result = RunResult("apply")
    result.error = why
    _finish(session, result, [], EXIT_FAILED, as_json)


@dataclass(frozen=True)
class _Made:
    """A plan ready to apply, and the hash its commit trailer names."""

    planned: plan_command.Planned
    plan_hash: str


def _make(session: Session, options: RunOptions) -> _Made:
    """The plan of this run: made now, or the saved one checked against the repository."""
    if options.saved_plan is None:
        # refused on its errors before Spark starts to analyse a query (``refuse_early``)
        request = replace(plan_command.request_of(options), refuse_early=True)
        planned = plan_command.make(session, request, options.select)
        if options.base is not None:  # judged by a ref's policies: by the checkout's too
            planned = plan_command.judged_here(session, planned, options.prune)
        return _Made(planned, plan_command.digest(planned.shown))
    return _Made(*plan_command.replay(session, options.saved_plan))


def _heads(session: Session) -> dict[str, str | None]:
    """Every chain's head, to tell whether another run wrote since a plan was made."""
    repo = session.odf
    return {name: _head(repo.dataset(name).head()) for name in repo.names()}


def _head(head: object) -> str | None:
    return None if head is None else str(head)


def _attempts(
    session: Session,
    options: RunOptions,
    as_json: bool,
    first: _Made,
    heads: dict[str, str | None],
    killed: LockHolder | None,
) -> loop.Attempt:
    """One apply; with ``--commit``, the git loop's (committed, and pushed or retried,
    after what a ``killed`` run left is committed). ``first`` is applied as it is while
    the chains are still at ``heads``."""
    reusable = [first]

    def once() -> loop.Attempt:
        made = reusable.pop() if reusable and _heads(session) == heads else None
        reusable.clear()
        return _plan_and_apply(session, options, as_json, made or _make(session, options))

    if not options.commit:
        return once()
    return loop.converge(session, options.push, options.push_retries, as_json, once, killed)


def _show(session: Session, options: RunOptions, shown: Plan, as_json: bool) -> None:
    """The plan, to ``--out`` in the chosen format, else as text (on stderr with JSON)."""
    if options.out is not None:
        plan_command.emit(plan_command.render(shown, options.output_format, False), options.out)
    elif not session.quiet:
        text = plan_command.render(shown, OutputFormat.TEXT, not as_json)
        (sys.stderr if as_json else sys.stdout).write(text)


def _refused(session: Session, made: _Made) -> loop.Attempt:
    """A run whose plan has errors: its result names the first, so the scheduled job's
    summary says why the whole repository stalls, not only that it does."""
    plan = made.planned.shown
    errors = [
        f"{_where(session, p.location)}{p.dataset + ': ' if p.dataset else ''}{p.message}"
        for p in plan.problems
        if p.severity is Severity.ERROR
    ]
    errors += [
        f"{_where(session, v.location)}{v.dataset + ': ' if v.dataset else ''}{v.policy}:"
        f" {v.message}"
        for v in plan.verdicts
        if v.severity is Severity.ERROR
    ]
    result = RunResult("apply")
    result.error = (
        f"the plan has {count(len(errors), 'error')}, so nothing was applied; the first:"
        f" {errors[0]}"
    )
    return loop.Attempt(result, [], EXIT_FAILED, made.plan_hash)


def _where(session: Session, location: Location | None) -> str:
    """``datasets/x.yaml:12:5: ``, as the plan places its problems."""
    if location is None:
        return ""
    line = f":{location.line}" if location.line else ""
    column = f":{location.column}" if location.line and location.column else ""
    return f"{shown_path(Path(location.file), session.config.root)}{line}{column}: "


def _plan_and_apply(
    session: Session, options: RunOptions, as_json: bool, made: _Made
) -> loop.Attempt:
    """Show the plan, confirm, then apply it with progress."""
    planned, plan_hash = made.planned, made.plan_hash
    shown = planned.shown
    _show(session, options, shown, as_json)
    if shown.has_errors:
        return _refused(session, made)
    result = RunResult("apply")
    if not _confirmed(shown, options.yes):
        result.error = "apply cancelled: nothing was written"
        return loop.Attempt(result, [], EXIT_FAILED, plan_hash)
    names = [d.name for d in shown.datasets if d.action is not Action.ORPHANED]
    finished, code = _execute(session, planned, names, result, as_json)
    return loop.Attempt(result, finished, code, plan_hash)


def _confirmed(shown: Plan, yes: bool) -> bool:
    """Ask on a terminal before changing metadata; pulling new data needs no answer, and
    a run without a terminal (CI) has nobody to ask."""
    changes = any(
        d.action in (Action.CREATE, Action.UPDATE, Action.RECREATE, Action.DELETE)
        for d in shown.datasets
    )
    if yes or not changes or not sys.stdin.isatty():
        return True
    try:
        return typer.confirm("Apply these changes?", default=False, err=True)
    except typer.Abort:  # no answer (end of input): the same as "no"
        typer.echo("", err=True)
        return False


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
    mask = session.secret_mask()

    def start(name: str) -> None:
        began[name] = time.monotonic()
        shown.start(name)

    def report(outcome: Outcome) -> None:
        cause = shown_paths(mask(outcome.message), session.config.root)
        outcome = replace(outcome, message=cause)
        started = began.get(outcome.dataset)  # a skipped dataset never starts
        seconds = 0.0 if started is None else time.monotonic() - started
        done = Finished(outcome, seconds, written_offsets(session, outcome))
        finished.append(done)
        result.datasets.append(applied(done))
        shown.finish(done)
        if interrupt.requested() and (len(finished) < len(names) or outcome.message == STOPPED):
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
        if finished:
            where = f"after {finished[-1].outcome.dataset}"
        elif began:  # the dataset at hand was cut (a download) or rolled back
            where = f"during {next(reversed(began))}, which is left as it was"
        else:
            where = "before any dataset"
        result.interrupted = True
        result.error = f"interrupted: stopped {where}; every chain is valid"
        code = EXIT_INTERRUPTED
        # The datasets the plan had that did not run (the one at hand rolled back, if a
        # second Ctrl-C stopped it) are in the result and the summary too, as skipped.
        done = {f.outcome.dataset for f in finished}
        for name in (n for n in names if n not in done):
            left = Finished(Outcome(name, Status.SKIPPED, message="not run: interrupted"), 0.0)
            finished.append(left)
            result.datasets.append(applied(left))
    except JavaNotFound as e:
        result.error = str(e)
        code = EXIT_FAILED
    finally:
        shown.close()
    if code == EXIT_OK and any_failed(finished):
        code = EXIT_FAILED
    return finished, code


def _finish(
    session: Session, result: RunResult, finished: list[Finished], code: int, as_json: bool
) -> NoReturn:
    """The summary line (always, even with ``-q``), the JSON document, the exit. A run
    stopped before any dataset says so, not that there was "nothing to do"."""
    seconds = session.elapsed()
    stopped = result.error is not None and not finished
    line = f"nothing applied in {duration(seconds)}" if stopped else summary(finished, seconds)
    if result.error is not None:
        prefix = "" if result.interrupted else "error: "
        typer.echo(prefix + result.error, err=True)
    if result.discarded is not None:  # the summary below is the last attempt's alone
        typer.echo(result.discarded, err=True)
    typer.echo(line, err=as_json)
    if as_json:
        sys.stdout.write(result.render(code, line, seconds))
    raise typer.Exit(code)
