"""The plan for people at a terminal, shaped like ``terraform plan``.

One block per dataset in dependency order (a line for each dataset with nothing to
show), then policy verdicts, problems and a one-line summary. Every line is built with
its style and painted at the end, so ``color=False`` output holds no escape codes at all
and the layout never depends on colour.
"""

from __future__ import annotations

from ..wording import printable
from .model import Action, DatasetPlan, EventChange, Plan, QueryCheck, SchemaChange, Severity
from .render_common import (
    SYMBOLS,
    action_facts,
    blocked_sentence,
    changes_metadata,
    column_type,
    event_diff,
    event_symbol,
    problems_by_severity,
    readable,
    schema_rows,
    summary_sentence,
    verdicts_by_severity,
)

_RESET = "\x1b[0m"
_GREEN = "\x1b[32m"
_YELLOW = "\x1b[33m"
_RED = "\x1b[31m"
_CYAN = "\x1b[36m"
_DIM = "\x1b[2m"
_PLAIN = ""

Line = tuple[str, str]
"""A line of output and the ANSI style it is painted with (``_PLAIN`` for none)."""

_MARK_STYLES = {"+": _GREEN, "~": _YELLOW, "-": _RED, "@": _CYAN}
_ACTION_STYLES = {
    Action.CREATE: _GREEN,
    Action.UPDATE: _YELLOW,
    Action.RECREATE: _RED,
    Action.UNCHANGED: _DIM,
    Action.ORPHANED: _PLAIN,
    Action.DELETE: _RED,
}
_HEADLINES = {
    Action.CREATE: "will be created",
    Action.UPDATE: "will be updated",
    Action.RECREATE: "will be recreated",
    Action.UNCHANGED: "unchanged",
    Action.ORPHANED: "orphaned: no valid manifest, left untouched",
    Action.DELETE: "will be deleted",
}
_SEVERITY_STYLES = {Severity.ERROR: _RED, Severity.WARNING: _YELLOW}
_SEVERITY_HEADINGS = {Severity.ERROR: "Policy errors:", Severity.WARNING: "Policy warnings:"}
_PROBLEM_HEADINGS = {Severity.ERROR: "Problems:", Severity.WARNING: "Warnings:"}
_INDENT = "    "


def render_text(plan: Plan, color: bool, quiet: bool = False) -> str:
    """The whole plan as text, ending with a newline; ANSI colours only when ``color``.
    ``quiet`` (``-q``): only the errors and the summary line. A dataset left out for an
    input whose chain cannot be read (``Plan.blocked``) gets a line after the planned."""
    plan = readable(plan)
    blocked = [[(_YELLOW, f"! {blocked_sentence(b)}")] for b in plan.blocked]
    lines = [] if quiet else _join_datasets([*map(_dataset, plan.datasets), *blocked])
    errors_only = (Severity.ERROR,) if quiet else tuple(Severity)
    for section in (
        _verdicts(plan, errors_only),
        _problems(plan, errors_only),
        [(_PLAIN, summary_sentence(plan))],
    ):
        if section:
            lines += [(_PLAIN, ""), *section] if lines else section
    return "".join(_paint(line, color) + "\n" for line in lines)


def _paint(line: Line, color: bool) -> str:
    style, text = line[0], printable(line[1], one_line=True)
    return f"{style}{text}{_RESET}" if color and style and text else text


def _join_datasets(blocks: list[list[Line]]) -> list[Line]:
    """Blank lines around multi-line blocks, none between one-line ones, to keep lists tight."""
    lines: list[Line] = []
    previous_was_long = False
    for block in blocks:
        if lines and (previous_was_long or len(block) > 1):
            lines.append((_PLAIN, ""))
        lines += block
        previous_was_long = len(block) > 1
    return lines


def _indented(lines: list[Line], indent: str = _INDENT) -> list[Line]:
    return [(style, indent + text) for style, text in lines]


def _marked(text: str) -> Line:
    """A diff or table line, styled by its leading mark."""
    return (_MARK_STYLES.get(text[:1], _PLAIN), text)


def _dataset(dataset: DatasetPlan) -> list[Line]:
    return [(_ACTION_STYLES[dataset.action], _headline(dataset)), *_indented(_body(dataset))]


def _headline(dataset: DatasetPlan) -> str:
    traits = [dataset.kind, *([dataset.change_class.value] if dataset.change_class else [])]
    marker = f" (renamed from {dataset.renamed_from})" if dataset.renamed_from else ""
    marker += " (changed in this PR)" if dataset.changed_in_pr else ""
    return (
        f"{SYMBOLS[dataset.action]} {dataset.name} ({', '.join(traits)}) "
        f"{_HEADLINES[dataset.action]}{marker}"
    )


def _body(dataset: DatasetPlan) -> list[Line]:
    lines = [(_PLAIN, f"override: {dataset.override}")] if dataset.override else []
    lines += [(_PLAIN, f"{label}: {text}") for label, text in action_facts(dataset)]
    for event in dataset.events:
        lines += _event(event)
    if dataset.query is not None:
        lines += _query(dataset.query)
    if dataset.downstream and changes_metadata(dataset):
        lines.append((_PLAIN, "downstream: " + _downstream(dataset)))
    lines += [(_PLAIN, f"pending data: {p.reason}: {p.detail}") for p in dataset.pending]
    return lines


def _downstream(dataset: DatasetPlan) -> str:
    affected = set(dataset.affected_downstream)
    return ", ".join(f"{n} (affected)" if n in affected else n for n in dataset.downstream)


def _event(event: EventChange) -> list[Line]:
    symbol = event_symbol(event)
    key = f" [{event.key}]" if event.key != event.kind else ""
    title = f"{symbol} {event.kind}{key} ({event.change_class.value})"
    body = [(_DIM, f"# {reason}") for reason in event.reasons]
    body += [_marked(line) for line in event_diff(event)]
    if event.schema is not None:
        body += _schema(event.schema)
    return [_marked(title), *_indented(body)]


def _schema(change: SchemaChange) -> list[Line]:
    """A column table, aligned, each row marked like a diff line."""
    rows = [(" ", "column", "before", "after", "")]
    rows += [(r.mark, r.column, r.before, r.after, r.note) for r in schema_rows(change)]
    widths = [max(len(row[i]) for row in rows) for i in (1, 2, 3)]
    table = [
        f"{mark} {name:<{widths[0]}}  {before:<{widths[1]}}  {after:<{widths[2]}}  {note}".rstrip()
        for mark, name, before, after, note in rows
    ]
    return [(_PLAIN, "schema:"), *_indented([_marked(line) for line in table], "  ")]


def _query(query: QueryCheck) -> list[Line]:
    if query.ok:
        columns = ", ".join(f"{c.name} {column_type(c)}" for c in query.output_schema or ())
        return [(_PLAIN, "query check: ok" + (f"; output columns: {columns}" if columns else ""))]
    where = f" at line {query.line}" if query.line is not None else ""
    first, *rest = (query.error or "no message from the engine").splitlines()
    return [(_RED, f"query check: failed{where}: {first}"), *_indented([(_RED, r) for r in rest])]


def _where(*parts: object) -> str:
    """Parts joined compiler-style (``file:line:col: dataset: message``), absent ones skipped."""
    return ": ".join(str(p) for p in parts if p is not None and p != "")


def _verdicts(plan: Plan, severities: tuple[Severity, ...]) -> list[Line]:
    lines: list[Line] = []
    for severity, verdicts in verdicts_by_severity(plan):
        if severity not in severities:
            continue
        style = _SEVERITY_STYLES[severity]
        lines.append((style, _SEVERITY_HEADINGS[severity]))
        lines += [
            (style, f"  [{v.policy}] " + _where(v.location, v.dataset, v.message)) for v in verdicts
        ]
    return lines


def _problems(plan: Plan, severities: tuple[Severity, ...]) -> list[Line]:
    """Error problems under ``Problems:``, then warnings under ``Warnings:``."""
    lines: list[Line] = []
    for severity, problems in problems_by_severity(plan):
        if severity not in severities:
            continue
        style = _SEVERITY_STYLES[severity]
        lines.append((style, _PROBLEM_HEADINGS[severity]))
        lines += [
            (style, "  " + _where(p.location, p.dataset, p.field, p.message)) for p in problems
        ]
    return lines
