"""What the text, Markdown and JSON renderings of a plan share, so they never disagree.

The three renderers read the same :class:`~reconciler.plan.model.Plan`; the wording of
the summary, the symbol of each action, the lines of an event's diff and the rows of a
schema table are decided here once, and each renderer only lays them out.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import yaml

from ..config import shown_paths
from .model import (
    Action,
    Blocked,
    ChainFacts,
    ChangeClass,
    Column,
    DatasetPlan,
    EventChange,
    Location,
    Plan,
    Problem,
    Recreate,
    SchemaChange,
    Severity,
    Verdict,
)

SYMBOLS: dict[Action, str] = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.RECREATE: "±",
    Action.UNCHANGED: "=",
    Action.ORPHANED: "?",
    Action.DELETE: "-",
}
"""Terraform-like marks: one character says what apply will do to a dataset."""

_SUMMARY_PHRASES: dict[Action, str] = {
    Action.CREATE: "{:,} to create",
    Action.UPDATE: "{:,} to update",
    Action.RECREATE: "{:,} to recreate",
    Action.UNCHANGED: "{:,} unchanged",
    Action.ORPHANED: "{:,} orphaned",
    Action.DELETE: "{:,} to delete",
}

_DIFF_CONTEXT = 3  # lines of context around each change, as `diff -u` shows
_NO_WRAP = 1 << 30  # YAML line width: a reflowed paragraph would diff as many changed lines


if TYPE_CHECKING:
    _SafeDumper = yaml.SafeDumper
else:  # libyaml's emitter is some forty times faster, which tells on hundreds of queries
    _SafeDumper = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper


class _EventDumper(_SafeDumper):
    """Safe YAML, with multi-line strings as ``|`` blocks so a changed query diffs by line."""


def _represent_str(dumper: yaml.representer.SafeRepresenter, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_EventDumper.add_representer(str, _represent_str)


def event_yaml(event: dict[str, Any]) -> list[str]:
    """The lines of an event in YAML, keys in ODF order, as a manifest author writes it."""
    text = yaml.dump(
        event, Dumper=_EventDumper, sort_keys=False, allow_unicode=True, width=_NO_WRAP
    )
    return text.splitlines()


def event_symbol(event: EventChange) -> str:
    """``+`` for an event that sets something new, ``-`` for a removal, ``~`` for a change."""
    if event.before is None:
        return "+"
    return "-" if event.after is None else "~"


def event_diff(event: EventChange) -> list[str]:
    """An event's change as diff lines: a mark (``+``, ``-`` or space), a space, the YAML line.

    A new event is all ``+`` lines and a removed one all ``-`` lines; a changed one is a
    unified diff of the two YAML dumps, with ``@@`` hunk headers where context is elided.
    """
    before = event_yaml(event.before) if event.before is not None else []
    after = event_yaml(event.after) if event.after is not None else []
    if not before or not after:
        mark = "+" if after else "-"
        return [f"{mark} {line}" for line in before or after]
    diff = difflib.unified_diff(before, after, n=_DIFF_CONTEXT, lineterm="")
    return [line if line.startswith("@@") else f"{line[0]} {line[1:]}" for line in list(diff)[2:]]


def column_type(column: Column) -> str:
    """A column's type as Spark DDL spells it, with ``NOT NULL`` when it must have a value."""
    return column.type if column.nullable else f"{column.type} NOT NULL"


@dataclass(frozen=True)
class SchemaRow:
    """One column of a schema table: its mark, its type before and after ("" when absent)."""

    mark: str  # "+" added, "-" removed, "~" retyped or nullability changed, " " as it was
    column: str
    before: str
    after: str
    note: str  # "added", "removed", "retyped", "nullability", "retyped, nullability" or ""


def schema_rows(change: SchemaChange) -> list[SchemaRow]:
    """The columns after the change in their order, then the removed ones, each marked.

    Marks come from the change's own lists rather than a re-comparison, so every renderer
    shows exactly what the planner decided.
    """
    before = {c.name: column_type(c) for c in change.before or ()}
    after = {c.name: column_type(c) for c in change.after or ()}
    names = [*after, *(n for n in before if n not in after)]
    return [_schema_row(n, before.get(n, ""), after.get(n, ""), change) for n in names]


def _schema_row(name: str, before: str, after: str, change: SchemaChange) -> SchemaRow:
    notes = [
        note
        for note, names in (
            ("added", change.added),
            ("removed", change.removed),
            ("retyped", [n for n, _, _ in change.retyped]),
            ("nullability", [n for n, _, _ in change.nullability]),
        )
        if name in names
    ]
    mark = {"added": "+", "removed": "-"}.get(notes[0], "~") if notes else " "
    return SchemaRow(mark, name, before, after, ", ".join(notes))


def changes_metadata(dataset: DatasetPlan) -> bool:
    """Whether apply writes metadata blocks for (or deletes, or renames) this dataset."""
    return dataset.renamed_from is not None or dataset.action in (
        Action.CREATE,
        Action.UPDATE,
        Action.RECREATE,
        Action.DELETE,
    )


def action_facts(dataset: DatasetPlan) -> list[tuple[str, str]]:
    """What a reviewer must know of a recreate or of a chain with no manifest, as (label,
    text), and of a rename; nothing else, since the events say it all."""
    facts = []
    if dataset.renamed_from is not None:
        facts.append(
            (
                "renamed from",
                f"{dataset.renamed_from}: apply moves its chain ({dataset.dataset_id}) to"
                " this name; the datasets that read it keep their chains",
            )
        )
    if dataset.chain is not None:
        return [*facts, _chain_fact(dataset, dataset.chain)]
    return [*facts, *_recreate_facts(dataset)]


_DELETED_LAST = (
    "; git history keeps it (a data store outside git keeps its data until `reconcile gc"
    " --delete` collects it). Apply deletes it last, and only in a run where every other"
    " dataset succeeds (a rename's new dataset, say)"
)


def _chain_fact(dataset: DatasetPlan, chain: ChainFacts) -> tuple[str, str]:
    """``deletes``: the chain a delete removes (git history keeps it); ``chain``: the
    one an orphan keeps."""
    text = (
        f"{dataset.dataset_id} at head {chain.head} "
        f"({counted(chain.blocks, 'block')}, {counted(chain.records, 'record')})"
    )
    if dataset.action is Action.DELETE:
        return ("deletes", text + _DELETED_LAST)
    return ("chain", text)


def _recreate_facts(dataset: DatasetPlan) -> list[tuple[str, str]]:
    """Of a recreate: why, the chain it replaces, the datasets recreated with it, what it
    reprocesses, the new chain's events."""
    recreate = dataset.recreate
    if recreate is None:
        return []
    facts = [
        ("recreate", recreate.reason),
        (
            "replaces",
            f"{recreate.replaces} at head {recreate.replaced_head} "
            f"({counted(recreate.replaced_blocks, 'block')}); the new chain gets a new id",
        ),
    ]
    if recreate.recreated_with:
        facts.append(("recreated with it", ", ".join(recreate.recreated_with)))
    facts.append(("reprocesses", _reprocessed(dataset, recreate)))
    kinds = [str(e.get("kind")) for e in recreate.events]
    facts.append(("new chain", ", ".join(["Seed", *kinds])))
    return facts


def _reprocessed(dataset: DatasetPlan, recreate: Recreate) -> str:
    """``6 input records (the whole history of org.a)``, saying which counts are estimates."""
    if dataset.kind == "Root":
        files = ", ".join(recreate.files) or "none"
        text = f"{counted(len(recreate.files), 'file')} read again ({files})"
        return text + f"; about {counted(recreate.input_records, 'record')} (its current count)"
    text = f"{counted(recreate.input_records, 'input record')}"
    text += f" (the whole history of {', '.join(dataset.inputs)})" if dataset.inputs else ""
    if recreate.estimated:
        text += (
            f"; the count of {', '.join(recreate.estimated)} is its current one, an estimate,"
            " as it is recreated too"
        )
    if recreate.uncounted:
        text += (
            f"; not counted: {', '.join(recreate.uncounted)}, created in the same run, whose"
            " records are not read yet"
        )
    return text


def pending_count(plan: Plan) -> int:
    """How many datasets have data apply would process even without metadata changes."""
    return sum(1 for d in plan.datasets if d.pending)


def error_count(plan: Plan) -> int:
    """Error problems (a query the engine rejected is one) and error verdicts: everything
    that makes the plan fail (what :attr:`Plan.has_errors` checks, counted)."""
    return len(_subjects(plan, Severity.ERROR))


def dataset_errors(plan: Plan) -> Counter[str]:
    """How many errors name each dataset, planned or not: a manifest too broken to plan
    still names its dataset in its problems."""
    return Counter(name for name in _subjects(plan, Severity.ERROR) if name is not None)


def warning_count(plan: Plan) -> int:
    """Warning problems and warning verdicts: shown and counted, but the plan passes."""
    return len(_subjects(plan, Severity.WARNING))


def dataset_warnings(plan: Plan) -> Counter[str]:
    """How many warnings name each dataset."""
    return Counter(name for name in _subjects(plan, Severity.WARNING) if name is not None)


def _subjects(plan: Plan, severity: Severity) -> list[str | None]:
    """The dataset each problem or verdict of ``severity`` is about (None for the
    repository), one entry per finding: problems and verdicts are the only things counted."""
    subjects = [p.dataset for p in plan.problems if p.severity is severity]
    return subjects + [v.dataset for v in plan.verdicts if v.severity is severity]


def problems_by_severity(plan: Plan) -> list[tuple[Severity, list[Problem]]]:
    """Problems grouped errors first, in plan order within a group; empty groups left out."""
    groups = [(s, [p for p in plan.problems if p.severity is s]) for s in Severity]
    return [(severity, problems) for severity, problems in groups if problems]


def breaking_datasets(plan: Plan) -> list[str]:
    """The datasets whose change is breaking, in plan order: what a reviewer must weigh."""
    return [d.name for d in plan.datasets if d.change_class is ChangeClass.BREAKING]


def counted(count: int, noun: str) -> str:
    """``1 error``, ``2 errors``: a count with its noun, plural when it is not one."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def action_phrase(action: Action, count: int) -> str:
    """``3 to update``, ``40 unchanged``: how summaries say how many take an action."""
    return _SUMMARY_PHRASES[action].format(count)


def not_planned_phrases(plan: Plan) -> list[str]:
    """``1 not planned (chain cannot be read)``, ``1 not planned (reads a chain that
    cannot be read)`` (``Plan.unreadable``, ``Plan.blocked``), each when it counts any:
    the datasets the summaries cannot count under any action, worded alike as left out
    for one reason."""
    phrases = []
    if plan.unreadable:
        phrases.append(f"{len(plan.unreadable):,} not planned (chain cannot be read)")
    if plan.blocked:
        phrases.append(f"{len(plan.blocked):,} not planned (reads a chain that cannot be read)")
    return phrases


def blocked_sentence(blocked: Blocked, name: Callable[[str], str] = str) -> str:
    """``org.y not planned: it reads org.x, whose chain cannot be read``: the one line a
    dataset left out of the plan for its input gets (the input's error says why that
    cannot be read). ``name`` writes a dataset's name (a code span in Markdown)."""
    chains = "chain cannot" if len(blocked.inputs) == 1 else "chains cannot"
    inputs = ", ".join(map(name, blocked.inputs))
    return f"{name(blocked.name)} not planned: it reads {inputs}, whose {chains} be read"


def summary_sentence(plan: Plan) -> str:
    """``Plan: 2 to create, 1 unchanged; 1 with pending data. 1 error, 0 warnings.``

    Actions no dataset takes are left out so the sentence stays short; errors and
    warnings are always counted, so "0 errors" is said rather than implied.
    """
    counts = plan.counts()
    actions = [action_phrase(a, counts[a.value]) for a in Action if counts[a.value]]
    if renamed := sum(1 for d in plan.datasets if d.renamed_from is not None):
        actions.append(f"{renamed} renamed")
    actions += not_planned_phrases(plan)
    sentence = "Plan: " + (", ".join(actions) or "no datasets")
    if pending := pending_count(plan):
        sentence += f"; {pending} with pending data"
    return (
        f"{sentence}. {counted(error_count(plan), 'error')}, "
        f"{counted(warning_count(plan), 'warning')}."
    )


def verdicts_by_severity(plan: Plan) -> list[tuple[Severity, list[Verdict]]]:
    """Verdicts grouped errors first, in plan order within a group; empty groups left out."""
    groups = [(s, [v for v in plan.verdicts if v.severity is s]) for s in Severity]
    return [(severity, verdicts) for severity, verdicts in groups if verdicts]


# Readability -----------------------------------------------------------------------------


def relative_paths(plan: Plan) -> Plan:
    """The plan with every file under ``plan.root`` named relative to it.

    A plan computed in CI would otherwise show the runner's checkout folder in every
    path; relative paths are also what GitHub needs to point at a file in a pull request.
    Paths outside the root, and every path when the root is unknown, are kept as given.
    A message naming a file under the root (a duplicate's other manifest, a policy file)
    names it relative to the root too.
    """
    if plan.root is None:
        return plan
    root = PurePath(plan.root)

    def relative(location: Location | None) -> Location | None:
        if location is None:
            return None
        path = PurePath(location.file)
        if not path.is_relative_to(root):
            return location
        return dataclasses.replace(location, file=path.relative_to(root).as_posix() or ".")

    return dataclasses.replace(
        plan,
        datasets=tuple(
            dataclasses.replace(d, manifest=relative(d.manifest)) for d in plan.datasets
        ),
        verdicts=tuple(
            dataclasses.replace(
                v, location=relative(v.location), message=shown_paths(v.message, root)
            )
            for v in plan.verdicts
        ),
        problems=tuple(
            dataclasses.replace(
                p, location=relative(p.location), message=shown_paths(p.message, root)
            )
            for p in plan.problems
        ),
    )


def named_inputs(plan: Plan) -> Plan:
    """The plan with each ``datasetRef`` in its events' before and after that is a known
    dataset's ``did:odf`` id replaced by that dataset's name.

    Chains store inputs by id and manifests by name, so a diff of the two would show every
    input as changed, and an id tells a reviewer nothing. Unknown ids stay ids.
    """
    names = {d.dataset_id: d.name for d in plan.datasets if d.dataset_id is not None}

    def named(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: names.get(v, v) if k == "datasetRef" and isinstance(v, str) else named(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [named(item) for item in value]
        return value

    def event(change: EventChange) -> EventChange:
        return dataclasses.replace(change, before=named(change.before), after=named(change.after))

    return dataclasses.replace(
        plan,
        datasets=tuple(
            dataclasses.replace(d, events=tuple(event(e) for e in d.events)) for d in plan.datasets
        ),
    )


def readable(plan: Plan) -> Plan:
    """The plan as people should read it: relative paths, inputs by name."""
    return named_inputs(relative_paths(plan))
