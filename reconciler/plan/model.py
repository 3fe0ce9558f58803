"""The plan as plain data: what ``reconcile --plan`` decided, for renderers and apply.

A plan is computed without side effects (``builder.build_plan``), rendered by functions
that only read it (text, Markdown, JSON), and executed by apply. Keeping it plain,
frozen data is what makes the JSON form (``reconciler/schemas/plan.json``) a faithful, versioned
copy that CI can save and a reviewer can trust.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

PLAN_FORMAT_VERSION = 1


class Action(enum.StrEnum):
    """What apply will do to a dataset's chain."""

    CREATE = "create"  # no chain yet: Seed plus the manifest's events
    UPDATE = "update"  # append the events that differ
    UNCHANGED = "unchanged"  # the chain already matches the manifest
    ORPHANED = "orphaned"  # a chain with no manifest: shown, never touched
    DELETE = "delete"  # an orphan that --prune will remove


class ChangeClass(enum.StrEnum):
    """How risky a change is, from least to most; a dataset takes its worst change's class."""

    METADATA_ONLY = "metadata-only"  # info, license, attachments
    COMPATIBLE = "compatible"  # adds nullable columns, new sources, vocabulary-neutral edits
    NEEDS_VALIDATION = "needs-validation"  # a new or changed query: the engine must analyse it
    BREAKING = "breaking"  # drops/renames/retypes a column, changes a key, strategy or vocabulary

    @property
    def rank(self) -> int:
        return list(ChangeClass).index(self)


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Location:
    """Where something was found: a file, and a 1-based line and column when known."""

    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


@dataclass(frozen=True)
class Column:
    """A column of a dataset's schema, with its type in Spark DDL spelling."""

    name: str
    type: str
    nullable: bool = True


@dataclass(frozen=True)
class SchemaChange:
    """Columns before and after a change, and what differs between them."""

    before: tuple[Column, ...] | None
    after: tuple[Column, ...] | None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    retyped: tuple[tuple[str, str, str], ...] = ()  # (column, old type, new type)
    nullability: tuple[tuple[str, bool, bool], ...] = ()  # (column, old nullable, new)


@dataclass(frozen=True)
class EventChange:
    """One event apply will append, with the value it replaces.

    ``before`` and ``after`` are the ODF JSON form of the events (camelCase, ``kind``
    tags) so renderers can show them side by side; ``before`` is None for an event
    that adds something new, ``after`` is None for nothing (disabling events carry
    their own ``after``). ``reasons`` say in words why the change has its class.
    """

    kind: str
    key: str  # unique within a dataset: "SetPollingSource", "AddPushSource:default", …
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    change_class: ChangeClass
    reasons: tuple[str, ...] = ()
    schema: SchemaChange | None = None


@dataclass(frozen=True)
class QueryCheck:
    """The engine's analysis of a new or changed query (no data is read)."""

    dataset: str
    ok: bool
    output_schema: tuple[Column, ...] | None = None
    error: str | None = None
    line: int | None = None  # line of the error within the query, when the engine says
    # what makes an accepted query's result differ between runs: "rand() in step `output`"
    nondeterministic: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A policy's judgement of one dataset (or of the whole repository when dataset is None)."""

    policy: str
    severity: Severity
    message: str
    dataset: str | None = None
    location: Location | None = None


@dataclass(frozen=True)
class Problem:
    """An error that makes the plan invalid: a bad manifest, an unknown input, a cycle…"""

    message: str
    dataset: str | None = None
    location: Location | None = None
    field: str | None = None


@dataclass(frozen=True)
class Pending:
    """Data apply would process even without metadata changes."""

    reason: str  # "polling-source" (may have new data) | "unconsumed-inputs" (certainly has)
    detail: str

    @property
    def certain(self) -> bool:
        """Input slices not yet consumed are known work; a source only *may* have data,
        and finding out would mean fetching, which a plan never does."""
        return self.reason == "unconsumed-inputs"


@dataclass(frozen=True)
class DatasetPlan:
    """Everything the plan says about one dataset."""

    name: str
    kind: str  # "Root" | "Derivative"
    action: Action
    manifest: Location | None = None
    dataset_id: str | None = None  # None for a dataset apply will create
    events: tuple[EventChange, ...] = ()
    change_class: ChangeClass | None = None  # worst class of ``events``; None if no events
    inputs: tuple[str, ...] = ()  # names of the datasets this one reads
    downstream: tuple[str, ...] = ()  # every dataset that reads this one, transitively
    affected_downstream: tuple[str, ...] = ()  # those a schema or breaking change reaches
    pending: tuple[Pending, ...] = ()
    query: QueryCheck | None = None
    changed_in_pr: bool | None = None  # set when --base was given
    override: str | None = None  # the manifest's reviewed reason for a breaking change


@dataclass(frozen=True)
class Plan:
    """The whole plan, datasets in dependency order (inputs before their readers)."""

    datasets: tuple[DatasetPlan, ...]
    verdicts: tuple[Verdict, ...] = ()
    problems: tuple[Problem, ...] = ()
    base_ref: str | None = None
    engine_started: bool = False  # whether validating queries needed the JVM
    commit: str | None = None  # the git commit (HEAD sha) whose manifests were planned
    # the repository root: renderers show the paths under it relative to it, so a plan
    # reads the same wherever it was computed (never written to JSON, being machine-local)
    root: str | None = None
    format_version: int = PLAN_FORMAT_VERSION

    @property
    def has_errors(self) -> bool:
        """Problems, a query the engine rejected, or an error-level verdict: the plan fails
        and nothing may be applied."""
        return (
            bool(self.problems)
            or any(d.query is not None and not d.query.ok for d in self.datasets)
            or any(v.severity is Severity.ERROR for v in self.verdicts)
        )

    @property
    def has_changes(self) -> bool:
        """Whether apply would certainly write something: metadata, or data from input
        slices not yet consumed (a source that *may* have new data does not count)."""
        return any(
            d.action in (Action.CREATE, Action.UPDATE, Action.DELETE)
            or any(p.certain for p in d.pending)
            for d in self.datasets
        )

    def counts(self) -> dict[str, int]:
        """How many datasets take each action, for summaries."""
        return {a.value: sum(1 for d in self.datasets if d.action is a) for a in Action}

    def exit_code(self, detailed: bool) -> int:
        """Like ``terraform plan``: 1 on errors; with ``detailed``, 2 when there are changes."""
        if self.has_errors:
            return 1
        return 2 if detailed and self.has_changes else 0
