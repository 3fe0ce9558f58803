"""The plan as a GitHub pull-request comment, folded to fit GitHub's size limit.

A reviewer should get the gist in ten seconds: a summary line that leads with errors and
breaking changes, then a narrow table (it must fit a 900-pixel page) of only the datasets
that change or fail, since a real repository has hundreds that do not; then what the
policies said and what is broken, a legended picture of what the change reaches, and the
detail of each changed dataset in a collapsed ``<details>`` section. Paths are relative
to the repository and inputs are named, never ``did:odf`` ids. GitHub refuses comments over 65,536
characters, so when the comment is too long the detail is folded, biggest first: diff
bodies become a one-line note, then whole sections become a list of names, then the graph
goes. Last, and only if the overview alone is still too long (hundreds of datasets
changed at once), its table and its lists of verdicts and problems are cut to as many
items as fit, errors first, each cut saying how many items it left out and where the
whole plan is: a comment GitHub refuses shows nothing at all. The summary line, which
counts every error, is never cut.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..wording import printable
from .model import (
    Action,
    ChangeClass,
    DatasetPlan,
    EventChange,
    Location,
    Plan,
    Problem,
    QueryCheck,
    SchemaChange,
    Severity,
)
from .render_common import (
    action_facts,
    action_phrase,
    blocked_sentence,
    breaking_datasets,
    changes_metadata,
    column_type,
    counted,
    dataset_errors,
    dataset_warnings,
    error_count,
    event_diff,
    not_planned_phrases,
    pending_count,
    problems_by_severity,
    readable,
    schema_rows,
    verdicts_by_severity,
    warning_count,
)

GITHUB_COMMENT_LIMIT = 65536
"""The most characters GitHub accepts in an issue or pull-request comment."""

_LOCAL_HINT = "run `reconcile --plan` locally"
_NAMED_AT_MOST = 50  # datasets whose omitted details the comment names
_WHOLE_PLAN = "the whole plan is the run's `plan` artifact (`reconcile show plan.json`)"
_SEPARATOR = "\n\n"  # between Markdown blocks
_END = "\n"
_SEVERITY_MARKS = {Severity.ERROR: "**error**", Severity.WARNING: "warning"}
_NODE_STYLES = {  # GitHub's own diff palette, so the graph reads like the diff
    "create": "fill:#dafbe1,stroke:#1a7f37",
    "update": "fill:#fff8c5,stroke:#9a6700",
    "recreate": "fill:#ffebe9,stroke:#9a6700,stroke-width:3px",
    "breaking": "fill:#fff8c5,stroke:#cf222e,stroke-width:3px",
    "delete": "fill:#ffebe9,stroke:#cf222e",
    "affected": "fill:#fff1e5,stroke:#bc4c00",
    "downstream": "fill:#f6f8fa,stroke:#8c959f",
}
_LEGEND = {  # what each node style means, with the emoji square nearest its colour
    "create": "🟩 created",
    "update": "🟨 updated",
    "recreate": "🟥 with a thick border: recreated (a new chain, its data recomputed)",
    "breaking": "🟨 with a thick red border: breaking change",
    "delete": "🟥 deleted",
    "affected": "🟧 downstream, reached by a schema or breaking change",
    "downstream": "⬜ downstream, not affected",
}
_NAMED_BREAKING = 3  # breaking datasets named in the summary line before "and N more"


def render_markdown(plan: Plan, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The plan as Markdown of at most ``limit`` characters, folding detail to get there.

    The overview (title, summary table, verdicts, problems) is kept whole even when it
    alone passes ``limit``: a comment that silently dropped datasets or errors would
    mislead a reviewer, whereas an over-long one fails loudly where it is posted.
    """
    plan = readable(plan)
    mentioned = {p.dataset for p in plan.problems}
    sections = [
        _section(d, plan)
        for d in plan.datasets
        if d.events
        or d.recreate
        or d.renamed_from
        or d.action is Action.DELETE
        or d.data_waiting
        or d.name in mentioned
    ]
    comment = _Comment(_overview(plan), _graph(plan), sections)
    return printable(_fit(comment, limit, lambda cap: _overview(plan, cap)))


# Escaping ------------------------------------------------------------------------------


def _inline(text: str) -> str:
    """Text kept on one line of Markdown; in a table cell, also kept to its cell.

    GitHub splits table rows on ``|`` before parsing code spans, so ``\\|`` is needed
    even inside a span there (and shows as ``|``). Outside code spans, ``<`` and ``&``
    are escaped: a file name or a server's message is the pull request's text, and raw
    HTML in it (``<!--`` hides the rest of the comment) would be rendered; so are ``*``,
    ``_``, ``~``, ``[`` and ``]``, which would make it bold, struck or a link, an ``@``
    that would mention (notify) a user or team, and a bare address GitHub would link.
    """
    # A lone carriage return ends a line in CommonMark as a line feed does: a file
    # named ``a\r## Approved.csv`` would start a heading of its own.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        parts.append(_plain(text[last : span.start()]))
        parts.append(span.group().replace("\n", " ").replace("|", "\\|"))
        last = span.end()
    parts.append(_plain(text[last:]))
    return "".join(parts)


# A code span: a run of backticks, then text, then a run of the same length (CommonMark).
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


_MENTION = re.compile(r"(?<!\w)@(?=[\w-])")
_AUTOLINK = re.compile(r"(?i)(?:https?|ftp)(?=://)|www(?=\.)")


def _plain(text: str) -> str:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;")  # ``->`` stays as it is
    # Emphasis and links: a pull request's text (a manifest value in a message) must not
    # render as bold or as a link to anywhere in the comment.
    escaped = re.sub(r"([*_~\[\]])", r"\\\1", escaped)
    # A zero-width space after the ``@`` (as Renovate writes it): shown the same, and
    # GitHub notifies nobody. An address's ``@`` (after a letter) is no mention. One
    # inside ``http``, ``ftp`` and ``www`` keeps a bare address from becoming a link.
    escaped = _MENTION.sub("@&#8203;", escaped)
    escaped = _AUTOLINK.sub(lambda m: f"{m.group()[0]}&#8203;{m.group()[1:]}", escaped)
    return escaped.replace("|", "\\|").replace("\n", "<br>")


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _code(text: str) -> str:
    """A code span that survives backticks in ``text`` (CommonMark: a longer fence)."""
    # A line break would end the span's line, and the next could open an HTML block.
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fenced(lines: Iterable[str], info: str) -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    body = "\n".join(lines)
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


# Overview ------------------------------------------------------------------------------


def _overview(plan: Plan, cap: int | None = None) -> list[str]:
    """Title, summary, datasets, verdicts and problems: the blocks folded last, and then
    only by cutting the table and the lists to ``cap`` items each."""
    blocks = ["## Reconcile plan", _summary(plan)]
    context = _context(plan)
    if context:
        blocks.append(context)
    blocks += ["### Datasets", *_datasets(plan, cap)]
    if plan.verdicts:
        blocks += ["### Policy verdicts", _cut(_verdict_items(plan), cap, "verdict")]
    if plan.problems:
        blocks += ["### Problems", _cut(_problem_items(plan), cap, "problem")]
    return blocks


def _cut(items: list[str], cap: int | None, what: str) -> str:
    """The list of ``items``, the first ``cap`` of them and a last item saying how many
    more there are and where they are (None: all of them)."""
    if cap is None or len(items) <= cap:
        return "\n".join(items)
    return "\n".join([*items[:cap], f"- _{_left_out(len(items) - cap, what, cap > 0)}_"])


def _left_out(count: int, what: str, more: bool) -> str:
    left = f"and {counted(count, 'more ' + what)}" if more else counted(count, what)
    return f"{left}, left out to fit the comment: {_WHOLE_PLAN}"


def _summary(plan: Plan) -> str:
    """``**2 errors** · **1 breaking change** (`a`) · 1 to create · 3 to update``.

    Errors and breaking changes come first, in bold, and the breaking datasets are named:
    they are what a reviewer must act on. "no errors" is said rather than implied.
    """
    errors = error_count(plan)
    parts = [f"**{counted(errors, 'error')}**" if errors else "no errors"]
    if breaking := breaking_datasets(plan):
        named = ", ".join(_code(n) for n in breaking[:_NAMED_BREAKING])
        more = len(breaking) - _NAMED_BREAKING
        named += f" and {more:,} more" if more > 0 else ""
        parts.append(f"**{counted(len(breaking), 'breaking change')}** ({named})")
    if warnings := warning_count(plan):
        parts.append(counted(warnings, "warning"))
    counts = plan.counts()
    # in the text plan's order (``summary_sentence``): what must be acted on is already
    # first, in bold; the counts read the same in the comment as in the job's log
    parts += [action_phrase(a, counts[a.value]) for a in Action if counts[a.value]]
    if renamed := sum(1 for d in plan.datasets if d.renamed_from is not None):
        parts.append(f"{renamed} renamed")
    not_planned = not_planned_phrases(plan)
    parts += not_planned if not_planned or plan.datasets else ["no datasets"]
    if pending := pending_count(plan):
        parts.append(f"{pending} with pending data")
    return " · ".join(parts)


def _context(plan: Plan) -> str:
    """Which commit was planned, against which base: a bare sha, which GitHub links."""
    parts = []
    if plan.commit is not None and plan.base_ref is not None:
        parts.append(f"Commit {plan.commit}, compared with {_code(plan.base_ref)}.")
    elif plan.commit is not None:
        parts.append(f"Commit {plan.commit}.")
    elif plan.base_ref is not None:
        parts.append(f"Compared with {_code(plan.base_ref)}.")
    if plan.engine_started:
        parts.append("Changed queries were analysed by the engine.")
    return " ".join(parts)


_DATASET_HEADER = ["Dataset", "Action", "Class", "Notes"]


def _datasets(plan: Plan, cap: int | None = None) -> list[str]:
    """The table of datasets that change, fail or have data to take in, and a count of
    those left out.

    An unchanged dataset with data seen waiting is listed: a pull request that adds a
    source file changes no manifest, and the reviewer must still see which dataset takes
    it in. One whose source only *may* have new data is counted among those left out.
    Four short columns keep the table inside a 900-pixel page; the events, pending data
    and downstream names are in each dataset's details.
    """
    errors = dataset_errors(plan)
    listed: list[DatasetPlan] = []
    unlisted: list[DatasetPlan] = []
    for d in plan.datasets:  # one pass: ``not in listed`` compared plans, n² of them
        shows = (
            changes_metadata(d)
            or d.action is not Action.UNCHANGED
            or d.data_waiting
            or errors[d.name]
        )
        (listed if shows else unlisted).append(d)
    count = counted(len(unlisted), "unchanged dataset")
    if polled := sum(1 for d in unlisted if d.pending):
        count += f" ({polled} with a source that may have new data)"
    blocks = [] if listed else [f"_No dataset changes: {count}._"]
    shown = listed if cap is None else listed[:cap]
    rows = [_dataset_row(d, plan, errors[d.name]) for d in shown]
    blocks += [_table(_DATASET_HEADER, rows)] if rows else []
    if len(shown) < len(listed):
        left = _left_out(len(listed) - len(shown), "changed dataset", bool(shown))
        blocks.append(f"_{left}_")
    if unlisted and listed:
        blocks.append(f"_Not listed: {count}._")
    if plan.blocked:  # in no row: they are not planned, and their input's error says why
        items = [f"- {_inline(blocked_sentence(b, _code))}" for b in plan.blocked]
        blocks.append(_cut(items, cap, "unplanned reader"))
    return blocks


def _dataset_row(dataset: DatasetPlan, plan: Plan, errors: int) -> list[str]:
    breaking = dataset.change_class is ChangeClass.BREAKING
    change_class = dataset.change_class.value if dataset.change_class else ""
    return [
        _inline(_code(dataset.name)),
        dataset.action.value,
        f"**{change_class}**" if breaking else change_class,
        " · ".join(_notes(dataset, plan, errors)),
    ]


def _notes(dataset: DatasetPlan, plan: Plan, errors: int) -> list[str]:
    """Errors, warnings, reach and provenance of a listed dataset, each a few words."""
    warnings = dataset_warnings(plan)[dataset.name]
    notes = [f"**{counted(errors, 'error')}**"] if errors else []
    notes += [f"renamed from {dataset.renamed_from}"] if dataset.renamed_from else []
    notes += [counted(warnings, "warning")] if warnings else []
    if dataset.downstream:
        affected = len(dataset.affected_downstream)
        notes.append(
            f"{len(dataset.downstream)} downstream"
            + (f" ({affected} affected)" if affected else "")
        )
    if dataset.changed_in_pr is False and changes_metadata(dataset):
        notes.append("not changed in this PR")
    if dataset.data_waiting:
        notes.append("pending data")
    return notes


def _verdict_items(plan: Plan) -> list[str]:
    """One item per verdict, errors first: a list wraps to any width, where a five-column
    table broke policy names over lines on a 900-pixel page."""
    return [
        _item(
            [_SEVERITY_MARKS[severity], _code(v.policy), *_where(v.location, v.dataset)], v.message
        )
        for severity, verdicts in verdicts_by_severity(plan)
        for v in verdicts
    ]


def _problem_items(plan: Plan) -> list[str]:
    """One item per problem, errors first, then the warnings."""
    return [
        _problem_item(problem, with_dataset=True)
        for _, problems in problems_by_severity(plan)
        for problem in problems
    ]


def _problem_item(problem: Problem, with_dataset: bool) -> str:
    """A problem as a list item; a warning is marked (the section is about errors)."""
    dataset = problem.dataset if with_dataset else None
    mark = [_SEVERITY_MARKS[Severity.WARNING]] if problem.severity is Severity.WARNING else []
    return _item([*mark, *_where(problem.location, dataset, problem.field)], problem.message)


def _where(location: Location | None, dataset: str | None, field: str | None = None) -> list[str]:
    """`` `file:line:col` ``, `` `dataset` `` and ``field `path` ``, each only when known."""
    parts = [_code(str(location))] if location else []
    parts += [_code(dataset)] if dataset else []
    return parts + ([f"field {_code(field)}"] if field else [])


def _item(head: list[str], message: str) -> str:
    """A list item: what the message is about, a colon, the message."""
    prefix = " ".join(head) + ": " if head else ""
    return f"- {prefix}{_inline(message)}"


# Graph ---------------------------------------------------------------------------------


def _graph(plan: Plan) -> _Foldable | None:
    """A Mermaid graph of the changed datasets and their downstream; None if nothing changed.

    Edges go from an input to its reader, drawn only between datasets in the graph so a
    large repository stays a small picture of what this change reaches.
    """
    changed = [d for d in plan.datasets if changes_metadata(d)]
    if not changed:
        return None
    reached = {n for d in changed for n in (d.name, *d.downstream)}
    affected = {n for d in changed for n in d.affected_downstream}
    ids = {d.name: f"d{i}" for i, d in enumerate(plan.datasets) if d.name in reached}
    nodes = [d for d in plan.datasets if d.name in ids]
    lines = ["graph LR"]
    lines += [f'  {ids[d.name]}["{d.name}"]' for d in nodes]
    lines += [f"  {ids[i]} --> {ids[d.name]}" for d in nodes for i in d.inputs if i in ids]
    classes: dict[str, list[str]] = {}
    for d in nodes:
        classes.setdefault(_node_class(d, affected), []).append(ids[d.name])
    used = [c for c in _NODE_STYLES if c in classes]
    lines += [f"  classDef {c} {_NODE_STYLES[c]}" for c in used]
    lines += [f"  class {','.join(classes[c])} {c}" for c in used]
    has_edges = any(i in ids for d in nodes for i in d.inputs)
    heading = "### Affected datasets\n\n"
    return _Foldable(
        "graph",
        heading + _fenced(lines, "mermaid") + _SEPARATOR + _legend(used, has_edges),
        heading + f"_Graph of {len(nodes):,} datasets omitted to fit the comment._",
    )


def _node_class(dataset: DatasetPlan, affected: set[str]) -> str:
    if dataset.change_class is ChangeClass.BREAKING and dataset.action is not Action.DELETE:
        return "breaking"
    if changes_metadata(dataset):
        return dataset.action.value
    return "affected" if dataset.name in affected else "downstream"


def _legend(classes: list[str], has_edges: bool) -> str:
    """What the styles in the graph mean (only those it uses), and which way arrows go."""
    entries = [_LEGEND[c] for c in classes]
    entries += ["arrows run from an input to the dataset that reads it"] if has_edges else []
    return "**Legend:** " + " · ".join(entries)


# Details -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Foldable:
    """A part of the comment in full and folded (a note in place of its bulk)."""

    name: str
    full: str
    folded: str


_Block = tuple[str, str]
"""A block of a details section in full and folded; most blocks read the same both ways."""


def _same(text: str) -> _Block:
    return (text, text)


def _section(dataset: DatasetPlan, plan: Plan) -> _Foldable:
    """A changed or failing dataset's ``<details>`` section; folded, its diffs are
    one-line notes (its problems are never folded)."""
    blocks = _details(dataset, [p for p in plan.problems if p.dataset == dataset.name])
    return _Foldable(
        dataset.name,
        _SEPARATOR.join(full for full, _ in blocks),
        _SEPARATOR.join(folded for _, folded in blocks),
    )


def _details(dataset: DatasetPlan, problems: list[Problem]) -> list[_Block]:
    blocks = [_same(f"<details><summary>{_details_summary(dataset)}</summary>")]
    if dataset.manifest is not None or dataset.inputs:
        blocks.append(_same(_sources(dataset)))
    if problems:
        items = "\n".join(_problem_item(p, with_dataset=False) for p in problems)
        blocks.append(_same("**Problems:**\n\n" + items))
    if dataset.override:
        blocks.append(_same(f"**Override:** {_inline(dataset.override)}"))
    if facts := action_facts(dataset):
        lines = [f"- **{label.capitalize()}:** {_inline(text)}" for label, text in facts]
        blocks.append(_same("\n".join(lines)))
    for event in dataset.events:
        blocks += _event(event)
    if dataset.query is not None:
        blocks.append(_same(_query(dataset.query)))
    if dataset.downstream:
        blocks.append(_same("**Downstream:** " + _downstream(dataset)))
    if dataset.pending:
        # A detail names files: a line break in a name is shown, never taken (as <br> it
        # still put a line of the pull request's wording in the comment).
        pending = (
            f"- {_inline(p.reason)}: {_inline(printable(p.detail, one_line=True))}"
            for p in dataset.pending
        )
        blocks.append(_same("**Pending data:**\n\n" + "\n".join(pending)))
    return [*blocks, _same("</details>")]


def _sources(dataset: DatasetPlan) -> str:
    """Where the dataset is defined and what it reads: ``**Manifest:** … · **Inputs:** …``."""
    parts = [f"**Manifest:** {_code(dataset.manifest.file)}"] if dataset.manifest else []
    if dataset.inputs:
        parts.append("**Inputs:** " + ", ".join(_code(n) for n in dataset.inputs))
    return " · ".join(parts)


def _details_summary(dataset: DatasetPlan) -> str:
    traits = [dataset.action.value]
    traits += [dataset.change_class.value] if dataset.change_class else []
    traits += [f"renamed from {html.escape(dataset.renamed_from)}"] if dataset.renamed_from else []
    traits += ["changed in this PR"] if dataset.changed_in_pr else []
    return f"<code>{html.escape(dataset.name)}</code> ({dataset.kind}): {', '.join(traits)}"


def _event(event: EventChange) -> list[_Block]:
    key = f" on {_code(event.key)}" if event.key != event.kind else ""
    blocks = [_same(f"#### {_code(event.kind)}{key} ({event.change_class.value})")]
    if event.reasons:
        blocks.append(_same("\n".join(f"- {_inline(r)}" for r in event.reasons)))
    diff = event_diff(event)
    blocks.append((_fenced(diff, "diff"), f"_diff omitted: {len(diff):,} lines; {_LOCAL_HINT}_"))
    if event.schema is not None:
        blocks.append(_same(_schema_table(event.schema)))
    return blocks


def _schema_table(change: SchemaChange) -> str:
    rows = [
        [
            _inline(_code(r.column)),
            _inline(_code(r.before)) if r.before else "",
            _inline(_code(r.after)) if r.after else "",
            r.note,
        ]
        for r in schema_rows(change)
    ]
    return _table(["Column", "Before", "After", "Change"], rows)


def _query(query: QueryCheck) -> str:
    if query.ok:
        columns = ", ".join(_code(f"{c.name} {column_type(c)}") for c in query.output_schema or ())
        return "**Query check:** ok" + (f"; output columns: {columns}." if columns else ".")
    where = f" at line {query.line}" if query.line is not None else ""
    error = (query.error or "no message from the engine").splitlines()
    return f"**Query check:** failed{where}:\n\n" + _fenced(error, "text")


def _downstream(dataset: DatasetPlan) -> str:
    affected = set(dataset.affected_downstream)
    return ", ".join(
        _code(n) + (" (affected)" if n in affected else "") for n in dataset.downstream
    )


# Folding ---------------------------------------------------------------------------------


@dataclass
class _Comment:
    """The comment's parts and how far each is folded; :meth:`blocks` lays them out."""

    overview: list[str]
    graph: _Foldable | None
    sections: list[_Foldable]
    folded: set[int] = field(default_factory=set)
    dropped: set[int] = field(default_factory=set)
    graph_folded: bool = False

    def blocks(self) -> list[str]:
        blocks = list(self.overview)
        if self.graph is not None:
            blocks.append(self.graph.folded if self.graph_folded else self.graph.full)
        if self.sections:
            blocks.append("### Changes")
        for i, section in enumerate(self.sections):
            if i not in self.dropped:
                blocks.append(section.folded if i in self.folded else section.full)
        if self.dropped:
            # Named up to a bound: 5,000 of them alone passed GitHub's limit.
            dropped = sorted(self.dropped)
            names = ", ".join(_code(self.sections[i].name) for i in dropped[:_NAMED_AT_MOST])
            more = len(dropped) - _NAMED_AT_MOST
            names += f" and {counted(more, 'more dataset')}" if more > 0 else ""
            blocks.append(f"_Details omitted to fit the comment; {_LOCAL_HINT}: {names}._")
        return blocks

    def size(self) -> int:
        """The length of :meth:`render`, without joining the blocks into one string."""
        blocks = self.blocks()
        return sum(map(len, blocks)) + len(_SEPARATOR) * (len(blocks) - 1) + len(_END)

    def render(self) -> str:
        return _SEPARATOR.join(self.blocks()) + _END


def _fit(comment: _Comment, limit: int, overview: Callable[[int], list[str]]) -> str:
    """Fold the comment's detail, largest sections first, until it fits in ``limit``.

    First each section's diffs give way to notes, then whole sections to a list of
    names, then the graph, and last the overview's table and lists are cut to the most
    items each that fit (``overview(cap)``); each step is taken only while the comment
    is too long.
    """
    by_size = sorted(range(len(comment.sections)), key=lambda i: -len(comment.sections[i].full))
    for stage in (comment.folded, comment.dropped):
        if comment.size() <= limit:
            return comment.render()
        # The fewest of the largest that make it fit, found by halving: one at a time,
        # each measuring the whole comment, took 93 s for 5,000 datasets.
        low, high = 1, len(by_size)
        while low < high:
            middle = (low + high) // 2
            stage.clear()
            stage.update(by_size[:middle])
            low, high = (low, middle) if comment.size() <= limit else (middle + 1, high)
        stage.clear()
        stage.update(by_size[:low])
    comment.graph_folded = comment.size() > limit
    if comment.size() > limit:
        low, high = 0, len(comment.overview) + sum(b.count("\n") for b in comment.overview)
        while low < high:  # the largest cap that fits (a cap of 0 keeps only the notes)
            middle = (low + high + 1) // 2
            comment.overview = overview(middle)
            low, high = (middle, high) if comment.size() <= limit else (low, middle - 1)
        comment.overview = overview(low)
    return comment.render()
