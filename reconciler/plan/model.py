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
    RECREATE = "recreate"  # a new chain (new Seed) in the same folder, data recomputed
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
    step: str | None = None  # the step whose query failed: its alias, or "output" for the last
    # what makes an accepted query's result differ between runs: "rand() in step `daily`",
    # or "rand() in `query`" for a transform written with ``query:`` alone
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
    """Something wrong the plan found: a bad manifest, an unknown input, a cycle, a query
    the engine rejected, no engine to analyse one (errors, which make the plan fail), or
    a source that has nothing to read (a warning). Renderers count and show exactly these,
    so every problem is counted once and shown everywhere."""

    message: str
    dataset: str | None = None
    location: Location | None = None
    field: str | None = None
    severity: Severity = Severity.ERROR


@dataclass(frozen=True)
class Pending:
    """Data apply would process even without metadata changes."""

    # "polling-source" (may have new data) | "new-files" (a FilesGlob's files not yet
    # ingested) | "unconsumed-inputs" (input slices not yet consumed) | "inputs-pending"
    # (an input has data waiting, which this run brings in first) | "store-move"
    # (files in the dataset folder that apply moves into the data store beside git)
    reason: str
    detail: str

    @property
    def certain(self) -> bool:
        """Files listed and input slices not yet consumed are known work; any other
        source only *may* have data, and finding out would mean fetching, which a plan
        never does."""
        return self.reason in ("new-files", "unconsumed-inputs", "inputs-pending", "store-move")


@dataclass(frozen=True)
class ChainFacts:
    """A chain with no manifest as it stands: what a reviewer weighs before a delete."""

    head: str
    blocks: int
    records: int  # offsets written, retractions and corrections included


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
    recreate: Recreate | None = None  # set exactly when ``action`` is RECREATE
    chain: ChainFacts | None = None  # set exactly when ``action`` is ORPHANED or DELETE
    renamed_from: str | None = None  # the chain's name until apply moves it (``renames``)

    @property
    def data_waiting(self) -> bool:
        """Whether the plan saw data waiting for this dataset (:attr:`Pending.certain`),
        not only a source that *may* have new data: every ``Url`` source may, on every
        plan, so that alone says nothing about a change."""
        return any(p.certain for p in self.pending)


@dataclass(frozen=True)
class Recreate:
    """How a recreated dataset is carried out: a new chain (a fresh ``did:odf`` Seed) in
    the same folder, replacing the old one, its data recomputed from its whole history.

    ``events`` are the new chain's events after its Seed, in ODF JSON, exactly as apply
    appends them; inputs that are recreated too are named rather than given an id, which
    apply resolves to their new one. ``input_records`` is what a derivative reprocesses,
    the sum of its inputs' record counts (a root: its own count, for the files it reads
    again); a count of a dataset in ``estimated`` is its current one, an estimate since
    that dataset is recreated too.
    """

    reason: str  # the breaking change, or "reads org.x, which is recreated"
    replaces: str  # the old chain's did:odf id
    replaced_head: str  # the old chain's head block
    replaced_blocks: int
    recreated_with: tuple[str, ...] = ()  # every downstream dataset recreated in turn
    input_records: int = 0
    estimated: tuple[str, ...] = ()
    uncounted: tuple[str, ...] = ()  # inputs created in the same run: no count to give
    files: tuple[str, ...] = ()  # a root's files read again, by name
    events: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Blocked:
    """A dataset that reads a chain that cannot be read (``Plan.unreadable``), directly
    or through other datasets: not planned. Planned over the missing input, a derivative
    read "will be recreated" (its chain names an id no chain read has) with "0 input
    records", none of it true."""

    name: str
    inputs: tuple[str, ...]  # the unreadable chains it reads, in dependency order


@dataclass(frozen=True)
class Fingerprints:
    """Everything a plan was computed from, so that a saved plan is refused once any of it
    moved: the sha256 of each manifest and policy file (by path relative to the repository
    root), each chain's head (by dataset), the reconciler's version, the base ref's commit
    when the plan was compared with one, and the repository's settings."""

    reconciler_version: str
    manifests: tuple[tuple[str, str], ...] = ()
    policies: tuple[tuple[str, str], ...] = ()
    heads: tuple[tuple[str, str], ...] = ()
    base_commit: str | None = None
    settings: str | None = None
    """sha256 of ``[tool.reconciler]`` as canonical JSON (None in plans saved before it
    was taken): Spark's options, the sources' allow-list and the fetch limits apply too."""


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
    fingerprints: Fingerprints | None = None  # what a saved plan must still match to apply
    # the datasets a plan of a --select is made of (``selection.restrict``); None: all
    selection: tuple[str, ...] | None = None
    # the datasets whose chains cannot be read: left out of ``datasets``, their problems
    # say why (planned as chainless, they would read "to create")
    unreadable: tuple[str, ...] = ()
    # the datasets that read one of those, left out of ``datasets`` as well
    blocked: tuple[Blocked, ...] = ()
    format_version: int = PLAN_FORMAT_VERSION

    @property
    def has_errors(self) -> bool:
        """An error-level problem (a query the engine rejected is one) or verdict: the plan
        fails and nothing may be applied."""
        return any(p.severity is Severity.ERROR for p in self.problems) or any(
            v.severity is Severity.ERROR for v in self.verdicts
        )

    @property
    def has_changes(self) -> bool:
        """Whether apply would certainly write something: metadata, or data from input
        slices not yet consumed (a source that *may* have new data does not count)."""
        return any(
            d.action in (Action.CREATE, Action.UPDATE, Action.RECREATE, Action.DELETE)
            or d.data_waiting
            or d.renamed_from is not None
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
