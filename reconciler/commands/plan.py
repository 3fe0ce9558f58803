"""``reconcile plan`` (or ``reconcile --plan``): what apply would do, written nowhere.

Most plans need no engine and appear at once. When a new or changed query must be
analysed, the plan is first drawn without the engine to count those queries, then
drawn again with Spark, after saying on stderr what it is waiting for.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import typer

from ..config import ConfigError, shown_path
from ..gitloop import fingerprints, saved_plan
from ..gitloop.gitops import GitError
from ..odf import models
from ..plan.model import ChangeClass, Column, Plan, QueryCheck, Severity
from ..plan.policies import PolicyError
from ..plan.render_common import summary_sentence
from ..plan.render_json import render_json
from ..plan.render_markdown import render_markdown
from ..plan.render_text import render_text
from ..plan.selection import plan_graph, restrict, with_inputs
from ..planning.compose import PlanRequest, make_plan
from ..wording import count
from .common import Session, fail, selection
from .options import OutputFormat, RunOptions


class _QueryCounter:
    """A validator that analyses nothing: it names the datasets whose queries would need
    the engine."""

    def __init__(self) -> None:
        self.datasets: list[str] = []

    def __call__(
        self, dataset: str, inputs: Mapping[str, Sequence[Column]], transform: models.TransformSql
    ) -> QueryCheck:
        self.datasets.append(dataset)
        return QueryCheck(dataset=dataset, ok=True)


@dataclass(frozen=True)
class Planned:
    """The whole plan (apply runs it), the part ``--select`` chose (shown and judged),
    and the chosen names (None: everything)."""

    full: Plan
    shown: Plan
    selected: frozenset[str] | None


def make(session: Session, request: PlanRequest, select: list[str] | None) -> Planned:
    """The repository's plan; Spark starts only if a query needs analysing, and only
    after the selection is known to name real datasets."""
    counter = _QueryCounter()
    try:
        taken = fingerprints.take(session.config, request.base_ref)
        plan = make_plan(session.config, request, counter)
        graph = plan_graph(plan)
        selected = selection(graph, select)
        # A selection's run reads what its datasets read as it is: queries outside both
        # are neither run nor judged, as dbt compiles only the models it builds.
        analysed = None if selected is None else with_inputs(graph, selected)
        if any(analysed is None or d in analysed for d in counter.datasets):
            needed = [d for d in _to_analyse(plan, counter) if analysed is None or d in analysed]
            queries = count(len(needed), "query", "queries")
            session.say(f"analysing {queries} on Spark…", err=True)
            with session.engine_start():
                plan = make_plan(session.config, replace(request, analysed=analysed))
        elif counter.datasets:  # only queries outside the selection: drawn without them
            plan = make_plan(session.config, replace(request, analysed=analysed), _QueryCounter())
    except PolicyError as e:
        root = session.config.root
        lines = [f"error: {each.shown(shown_path(each.file, root))}" for each in e.each()]
        raise fail("\n".join(lines)) from None
    except (GitError, ConfigError) as e:
        raise fail(f"error: {e}") from None
    plan = replace(plan, fingerprints=taken)
    shown = plan if selected is None else restrict(plan, selected)
    return Planned(plan, shown, selected)


def _to_analyse(plan: Plan, counter: _QueryCounter) -> list[str]:
    """The datasets whose queries the engine would analyse: those the counter was asked
    about, those with a query to validate, and the readers of a new schema. The counter
    gives no columns, so the plan could not ask about a reader of an unanalysed query."""
    asked = set(counter.datasets)
    asked |= {
        d.name
        for d in plan.datasets
        if any(e.change_class is ChangeClass.NEEDS_VALIDATION for e in d.events)
    }
    readers = {r for d in plan.datasets if d.name in asked for r in d.affected_downstream}
    return [d.name for d in plan.datasets if d.name in asked or d.name in readers]


def replay(session: Session, path: Path) -> tuple[Planned, str]:
    """The saved plan at ``path``, made again, and the sha256 of the file: exit 1, naming
    every difference, when anything it was made from moved or it would now do anything
    else."""
    try:
        saved = saved_plan.load(path)
    except saved_plan.SavedPlanError as e:
        raise fail(f"error: {e}") from None
    # What it was made from is compared first, before any query is analysed again: a
    # stale plan is refused in a moment rather than after the engine's start.
    try:
        moved = fingerprints.differences(
            saved.fingerprints, fingerprints.take(session.config, saved.base_ref)
        )
    except GitError as e:
        raise fail(f"error: {e}") from None
    _refuse_if_stale(path, moved)
    request = PlanRequest(base_ref=saved.base_ref, prune=saved.prune)
    full = make(session, request, None).full
    chosen = saved.selection
    shown = full if chosen is None else restrict(full, chosen)
    _refuse_if_stale(path, saved_plan.stale(saved, shown))
    planned = Planned(full, shown, chosen)
    if saved.base_ref is not None:
        planned = judged_here(session, planned, saved.prune)
    return planned, saved.digest


def judged_here(session: Session, planned: Planned, prune: bool) -> Planned:
    """``planned`` with the errors this checkout's own policies find in it added to the
    plan shown. A plan made with ``--base`` is judged by that ref's policies: a ref of
    anyone's choosing (a branch that deleted a rule), while what apply writes is this
    checkout. Apply refuses the errors as it refuses those of a plan made here."""
    # its errors alone are used: none of its queries is analysed past one (refuse_early)
    own = make(session, PlanRequest(prune=prune, refuse_early=True), None).full
    if planned.selected is not None:
        own = restrict(own, planned.selected)
    shown = planned.shown
    verdicts = [v for v in own.verdicts if v.severity is Severity.ERROR]
    problems = [p for p in own.problems if p.severity is Severity.ERROR]
    shown = replace(
        shown,
        verdicts=(*shown.verdicts, *(v for v in verdicts if v not in shown.verdicts)),
        problems=(*shown.problems, *(p for p in problems if p not in shown.problems)),
    )
    return replace(planned, shown=shown)


def _refuse_if_stale(path: Path, differences: list[str]) -> None:
    if differences:
        listed = "".join(f"\n  - {d}" for d in differences)
        raise fail(f"error: the saved plan {path} is stale; nothing was applied:{listed}")


def digest(plan: Plan) -> str:
    """The sha256 of the plan's JSON, as ``plan --format json`` writes it: what a commit's
    ``Reconcile-Plan-Hash`` names."""
    return hashlib.sha256(render(plan, OutputFormat.JSON, False).encode("utf-8")).hexdigest()


def render(plan: Plan, output_format: OutputFormat, to_terminal: bool, quiet: bool = False) -> str:
    """The plan in ``output_format``; ``quiet`` (``-q``) shortens the text to its errors
    and summary line, never a document."""
    if output_format is OutputFormat.JSON:
        return render_json(plan) + "\n"
    if output_format is OutputFormat.MARKDOWN:
        return render_markdown(plan)
    color = to_terminal and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    return render_text(plan, color=color, quiet=quiet)


def emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


def request_of(options: RunOptions) -> PlanRequest:
    """What the plan is made from among the options: an apply plans with the same."""
    return PlanRequest(base_ref=options.base, prune=options.prune)


def run(session: Session, options: RunOptions) -> None:
    """Show the plan; exit 1 on errors, 2 on changes with ``--detailed-exitcode``."""
    shown = make(session, request_of(options), options.select).shown
    if options.out is not None and shown.has_errors:
        raise _not_saved(shown, options.out)
    to_terminal = options.out is None
    emit(
        render(shown, options.output_format, to_terminal, session.quiet and to_terminal),
        options.out,
    )
    if options.out is not None and not session.quiet:
        # As ``terraform plan -out`` does: the log of the job that wrote the file says
        # what is in it, and what to do with it.
        sys.stdout.write(
            f"{summary_sentence(shown)}\n{_saved(session, options.out, options.output_format)}\n"
        )
    raise typer.Exit(shown.exit_code(options.detailed_exitcode))


def _not_saved(shown: Plan, out: Path) -> typer.Exit:
    """As ``terraform plan -out`` does, a plan with errors is saved nowhere, and a file
    of that name from before is left as it was. Its errors and summary line, which the
    file would have held, go to stderr with the error line (a CI job that quotes stderr
    shows them), and the exit is 1."""
    color = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    sys.stderr.write(render_text(shown, color=color, quiet=True))
    before = f" ({tidied(out)} from before is left as it was)" if out.exists() else ""
    return fail(f"error: no plan was saved to {tidied(out)}: it has errors{before}")


def _saved(session: Session, given: Path, output_format: OutputFormat) -> str:
    """Where the plan went and, for a saved plan, the commands that take it: each as typed
    from the current directory, so a plan made with ``-C pr`` is applied with ``-C pr``."""
    out = tidied(given)
    if output_format is not OutputFormat.JSON:
        return f"Wrote the plan to {out}."
    return (
        f"Saved the plan to {out}: `reconcile show {shlex.quote(str(out))}` shows it, and"
        f" `{_apply_command(session, given)}` applies it unless it is stale."
    )


def _apply_command(session: Session, out: Path) -> str:
    """``reconcile apply plan.json``; after ``-C pr``, ``reconcile -C pr apply
    ../plan/plan.json``: apply needs the repository, and takes a relative path from
    ``-C``'s directory (``show`` needs neither: its path is the current directory's)."""
    if session.directory == Path("."):
        return f"reconcile apply {shlex.quote(str(tidied(out)))}"
    if out.is_absolute():
        taken = os.path.normpath(out)
    else:
        taken = os.path.relpath(os.path.abspath(out), os.path.abspath(session.directory))
    return f"reconcile -C {shlex.quote(str(session.directory))} apply {shlex.quote(taken)}"


def tidied(path: Path) -> Path:
    """``path`` as a log names it: normalised, and relative to the current directory when
    inside it, else absolute. ``-C pr plan --out ../plan/plan.json`` (the plan workflow's)
    writes ``plan/plan.json``, which the log named ``pr/../plan/plan.json``."""
    absolute = Path(os.path.abspath(path))
    cwd = Path.cwd()
    return absolute.relative_to(cwd) if absolute.is_relative_to(cwd) else absolute
