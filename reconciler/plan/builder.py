"""``build_plan``: desired manifests + committed chains -> a Plan. No side effects.

It reads nothing but what it is given and executes nothing from the manifests: no fetch,
no prepare command, no container, no secret. The one outside service it may use is the
query validator, and only for queries that are new or changed, or whose upstream schema
changed; so a plan without such changes never starts a JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..odf import models
from ..odf.chain import ChainState
from ..odf.names import name_problem
from ..odf.repository import OdfRepository, RepositoryError
from ..transform.output_rules import output_problem
from ..wording import count
from .changelog_inputs import changelog_problems
from .desired import DesiredDataset, DesiredState, transform_inputs
from .diff import (
    Facets,
    SourceEvent,
    classify_schema,
    creation_events,
    declared_columns,
    schema_change,
    update_events,
)
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
    QueryCheck,
    Severity,
    Verdict,
)
from .pending import (
    GlobListings,
    TouchedSources,
    empty_glob_problems,
    event_time_problems,
    inputs_pending,
    pending_data,
    unread_changes,
)
from .preprocess_output import output_problems
from .query_problems import CheckedQuery, query_problem
from .recreate import HistoryReader, plan_recreates
from .source_checks import source_problems
from .support import ENGINE, unsupported_features

PREPROCESS_INPUT = "input"  # the view a preprocess query reads (ENGINE-SEMANTICS §1.8)

QueryValidator = Callable[[str, Mapping[str, Sequence[Column]], models.TransformSql], QueryCheck]


class EngineUnavailableError(RuntimeError):
    """Raised by a query validator that cannot run at all (no Java): one problem for the
    plan, naming the queries left unanalysed, rather than one failed check per query."""


PolicyEvaluator = Callable[[DesiredDataset, DatasetPlan], list[Verdict]]


def read_actual(repo: OdfRepository) -> tuple[dict[str, ChainState], list[Problem]]:
    """Every chain's projection, by dataset name; an unreadable chain is a problem.

    Projections check every block hash but not every chain rule: that is ``verify``'s
    job, and it keeps planning a large repository close to the cost of reading it."""
    states: dict[str, ChainState] = {}
    problems: list[Problem] = []
    for name in repo.names():
        try:
            states[name] = repo.dataset(name).projection()
        except (RepositoryError, ValueError) as e:
            problems.append(
                Problem(
                    f"chain cannot be read: {e}",
                    dataset=name,
                    location=Location(str(repo.root / name)),
                )
            )
    # A stray under a dataset's name (a link out of the root) is that dataset's chain,
    # unread: it is left out of the plan as an unreadable one is, not shown to be created.
    problems += [
        Problem(
            f"chain folder not read: {e.reason}",
            dataset=None if name_problem(e.name) else e.name,
            location=Location(str(repo.root)),
        )
        for e in repo.strays()
    ]
    return states, problems


@dataclass(frozen=True)
class PlanOptions:
    prune: bool = False
    base_ref: str | None = None
    changed: frozenset[str] | None = None  # dataset names whose manifests the PR touched
    stale_overrides: frozenset[str] = frozenset()
    """Datasets whose override line the base's manifest already had: it was written for
    an earlier breaking change, and allows none the pull request makes."""
    renames: Mapping[str, str] = field(default_factory=dict)
    """New name to old, for the chains apply moves to their manifest's new name
    (``renames``): ``actual`` holds them under the new name already."""
    analysed: frozenset[str] | None = None
    """The datasets whose queries may be analysed (``--select`` and what it reads), so
    a selection starts no engine for a query outside it; None: every dataset's."""
    touched_sources: Mapping[str, TouchedSources] = field(default_factory=dict)
    """Per dataset, the files of its ``FilesGlob`` the pull request added or modified,
    or without a base those changed since its chain's last committed run
    (``pending.unread_changes``)."""
    unreadable: frozenset[str] = frozenset()
    """Datasets whose chains cannot be read (``read_actual``'s problems): left out of the
    plan and their queries not analysed. Planned as if they had no chain, they showed as
    "to create" beside the error saying their chain exists. The datasets downstream of
    them are left out too (``Plan.blocked``)."""
    refuse_early: bool = False
    """An apply's plan: when it has an error before any query is analysed, none is. The
    apply refuses such a plan whatever the queries say, and analysing them started Spark
    (5 to 15 s) for a run that would apply nothing; ``reconcile plan`` analyses them."""


def build_plan(
    desired: DesiredState,
    actual: Mapping[str, ChainState],
    *,
    validator: QueryValidator | None = None,
    policies: PolicyEvaluator | None = None,
    options: PlanOptions = PlanOptions(),
    problems: Sequence[Problem] = (),
    listings: GlobListings | None = None,
    history: HistoryReader | None = None,
) -> Plan:
    """Diff every manifest against its chain and classify, validate and judge the result.

    ``listings`` are the files each ``FilesGlob`` matches now (``pending``); without them
    such a source only *may* have new data. Every failed query check becomes a problem
    here, so that renderers and the exit code read problems alone.
    """
    ids_to_names = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}

    def resolve(ref: str) -> str:
        name = ids_to_names.get(ref, ref)
        state = actual.get(name)
        return str(state.dataset_id) if state is not None and state.dataset_id else name

    all_problems = [*problems, *desired.problems]
    plans: dict[str, DatasetPlan] = {}
    for name, ds in desired.datasets.items():
        plans[name] = _dataset_plan(ds, actual.get(name), resolve, ids_to_names, all_problems)
        if name in options.renames:
            plans[name] = replace(plans[name], renamed_from=options.renames[name])
    _mark_downstream(plans, desired)
    blocked = _blocked(desired, plans, options.unreadable)
    left_out = options.unreadable | {b.name for b in blocked}  # planned, never shown
    analysed = options.analysed
    if left_out:  # their queries are not judged: their plans are not shown
        analysed = frozenset(desired.datasets) if analysed is None else analysed
        analysed -= left_out
    if options.refuse_early and any(p.severity is Severity.ERROR for p in all_problems):
        all_problems += _not_analysed_for_errors(plans)
        analysed = frozenset()
    checker = _QueryChecker(desired, validator, ids_to_names, all_problems, analysed)
    for name in desired.datasets:
        plans[name] = checker.check(plans[name])
    _mark_downstream(plans, desired)
    all_problems += checker.problems_found(plans)
    all_problems += changelog_problems(desired, plans, left_out)
    for name in sorted(options.stale_overrides & plans.keys()):
        override = plans[name].override
        if plans[name].change_class is ChangeClass.BREAKING and override is not None:
            all_problems.append(_stale_override(desired.datasets[name], override))
            plans[name] = replace(plans[name], override=None)
    for name, state in actual.items():
        if name not in plans:
            kept = options.prune and desired.defines(name)
            plans[name] = _orphan(name, state, options.prune and not kept)
            all_problems += [_kept_from_pruning(name, desired)] if kept else []
    unread: dict[str, list[Problem]] = {}
    for name, ds in desired.datasets.items():
        touched = options.touched_sources.get(name)
        anew = plans[name].action in (Action.CREATE, Action.RECREATE)
        if anew:
            touched = None  # a chain read again from every file: none is left unread
        pending = pending_data(ds, actual, listings, touched)
        plans[name] = replace(plans[name], pending=pending)
        all_problems += empty_glob_problems(ds, listings)
        unread[name] = unread_changes(ds, touched)
        read_after = None if anew else actual.get(name)  # None: every file is read
        all_problems += event_time_problems(ds, read_after, listings, touched)
    plans = inputs_pending(plans, desired.datasets)
    # ``history`` reads the chains of the roots recreated, to check their files are there
    plans = plan_recreates(
        plans,
        desired,
        actual,
        resolve=resolve,
        history=history,
        listings=listings,
        problems=all_problems,
        left_out=left_out,
    )
    # judged once the recreates are known: a recreated root reads every file again
    for name, problems in unread.items():
        if plans[name].action is not Action.RECREATE:
            all_problems += problems
    all_problems += [
        _renamed_and_recreated(desired.datasets[n], p.renamed_from)
        for n, p in plans.items()
        if p.renamed_from is not None and p.action is Action.RECREATE
    ]
    if options.changed is not None:
        plans = {n: replace(p, changed_in_pr=n in options.changed) for n, p in plans.items()}
    verdicts: list[Verdict] = []
    if policies is not None:
        for name, ds in desired.datasets.items():
            verdicts += policies(ds, plans[name]) if name not in left_out else []
    order = [*desired.datasets, *sorted(n for n in plans if n not in desired.datasets)]
    order = [n for n in order if n not in left_out]
    return Plan(
        datasets=tuple(plans[n] for n in order),
        verdicts=tuple(verdicts),
        problems=tuple(all_problems),
        base_ref=options.base_ref,
        engine_started=checker.used,
        unreadable=tuple(sorted(options.unreadable)),
        blocked=blocked,
    )


def _not_analysed_for_errors(plans: Mapping[str, DatasetPlan]) -> list[Problem]:
    """The warning of an apply's plan that ``refuse_early`` left unanalysed, naming the
    datasets whose new or changed queries the engine did not see; none without any."""
    names = [
        name
        for name, plan in plans.items()
        if any(e.change_class is ChangeClass.NEEDS_VALIDATION for e in plan.events)
    ]
    if not names:
        return []
    return [
        Problem(
            f"the queries of {', '.join(names)} were not analysed: the plan has errors"
            " already, so nothing is applied; `reconcile plan` analyses them",
            severity=Severity.WARNING,
        )
    ]


def _blocked(
    desired: DesiredState, plans: Mapping[str, DatasetPlan], unreadable: frozenset[str]
) -> tuple[Blocked, ...]:
    """Every dataset downstream (``plans``' ``downstream``) of a chain that cannot be
    read, with those chains, in dependency order. Planned over an input with no chain, a
    derivative whose chain names the input's id read "will be recreated" (no chain read
    has that id) with "0 input records". An unreadable one is counted as such, not here."""
    reads: dict[str, list[str]] = {}
    for name in desired.datasets:  # dependency order, so each list is in it too
        if name in unreadable:
            for reader in plans[name].downstream:
                reads.setdefault(reader, []).append(name)
    return tuple(
        Blocked(name, tuple(reads[name]))
        for name in desired.datasets
        if name in reads and name not in unreadable
    )


def _dataset_plan(
    ds: DesiredDataset,
    state: ChainState | None,
    resolve: Callable[[str], str],
    ids_to_names: Mapping[str, str],
    problems: list[Problem],
) -> DatasetPlan:
    for message, path in unsupported_features(ds.snapshot):
        problems.append(Problem(message, dataset=ds.name, location=ds.location, field=path))
    problems += source_problems(ds)
    desired = Facets.of_manifest(ds.snapshot, resolve)
    kind = ds.snapshot.kind.value
    if state is None:
        events: list[EventChange] = creation_events(desired)
        action = Action.CREATE
    else:
        if state.kind is not None and state.kind != ds.snapshot.kind:
            problems.append(
                Problem(
                    f"the manifest says {kind} but the chain was created as {state.kind.value}; "
                    "a dataset cannot change kind",
                    dataset=ds.name,
                    location=ds.location,
                    field="content.kind",
                )
            )
        declared = transform_inputs(ds.snapshot)
        events = update_events(
            desired,
            Facets.of_chain(state),
            ids_to_names,
            inputs_resolve=len(ds.inputs) == len(declared),
        )
        action = Action.UPDATE if events else Action.UNCHANGED
    return DatasetPlan(
        name=ds.name,
        kind=kind,
        action=action,
        manifest=ds.location,
        dataset_id=str(state.dataset_id) if state and state.dataset_id else None,
        events=tuple(events),
        change_class=_worst(events),
        inputs=ds.inputs,
        override=ds.override,
    )


def _worst(events: Sequence[EventChange]) -> ChangeClass | None:
    return max((e.change_class for e in events), key=lambda c: c.rank, default=None)


def _changes_schema(plan: DatasetPlan) -> bool:
    return plan.change_class is ChangeClass.BREAKING or any(
        e.schema is not None for e in plan.events
    )


def _mark_downstream(plans: dict[str, DatasetPlan], desired: DesiredState) -> None:
    downstreams = desired.all_downstream()
    for name in plans:
        if name in desired.datasets:
            downstream = downstreams[name]
            affected = downstream if _changes_schema(plans[name]) else ()
            plans[name] = replace(plans[name], downstream=downstream, affected_downstream=affected)


def _orphan(name: str, state: ChainState, prune: bool) -> DatasetPlan:
    return DatasetPlan(
        name=name,
        kind=state.kind.value if state.kind else "Root",
        action=Action.DELETE if prune else Action.ORPHANED,
        dataset_id=str(state.dataset_id) if state.dataset_id else None,
        chain=ChainFacts(str(state.head), state.sequence_number + 1, state.next_offset),
    )


def _renamed_and_recreated(ds: DesiredDataset, old: str) -> Problem:
    """A rename and a recreate in one run: the recreate reads the history of the chain
    under its new name, which only the rename gives it. One pull request each."""
    line = ds.renamed_from[0][1] if ds.renamed_from else ds.loaded.line
    return Problem(
        f"{ds.name} is renamed from {old!r} and recreated in the same run: rename it first"
        " (a pull request with the renamed-from line alone), then make the breaking change",
        dataset=ds.name,
        location=Location(str(ds.loaded.file), line),
        field="renamed-from",
    )


def _stale_override(ds: DesiredDataset, override: str) -> Problem:
    """Why an override line in the manifest allows nothing: it approved an earlier change,
    and a reviewer reading this pull request's diff would not see it at all."""
    return Problem(
        f"the override {override!r} was already in the base branch's manifest: it allowed"
        " an earlier breaking change, not this one; give this change its own reason",
        dataset=ds.name,
        location=Location(str(ds.loaded.file), ds.override_line or ds.loaded.line),
        severity=Severity.WARNING,
    )


def _kept_from_pruning(name: str, desired: DesiredState) -> Problem:
    """Why ``--prune`` leaves a chain with no planned manifest: a broken manifest drops its
    dataset from the plan, and deleting the chain for a typo would lose it."""
    if desired.unreadable:
        why = f"{count(desired.unreadable, 'manifest')} could not be read, and may define it"
    else:
        why = "its manifest could not be planned (see its problems)"
    return Problem(f"not deleted by --prune: {why}", dataset=name, severity=Severity.WARNING)


SYSTEM_COLUMNS = (
    Column("offset", "bigint", False),
    Column("op", "int", False),
    Column("system_time", "timestamp", False),
)


def _vocabulary(snapshot: models.DatasetSnapshot) -> models.DatasetVocabulary:
    """The column names the dataset's last SetVocab gives (ODF's defaults otherwise)."""
    vocab = [e for e in snapshot.metadata if isinstance(e, models.SetVocab)]
    overrides = vocab[-1].model_dump(exclude={"kind"}, exclude_none=True) if vocab else {}
    return models.DatasetVocabulary(**overrides)


def with_system_columns(
    columns: Sequence[Column], snapshot: models.DatasetSnapshot
) -> tuple[Column, ...]:
    """The columns a dataset's slices hold: offset, op, system_time, event time, data."""
    vocab = _vocabulary(snapshot)
    names = {
        "offset": vocab.offset_column,
        "op": vocab.operation_type_column,
        "system_time": vocab.system_time_column,
    }
    event_time = vocab.event_time_column
    system = tuple(replace(c, name=names[c.name]) for c in SYSTEM_COLUMNS)
    reserved = set(names.values())
    data = [c for c in columns if c.name not in reserved]
    event = next((c for c in data if c.name == event_time), Column(event_time, "timestamp", True))
    return (*system, event, *(c for c in data if c.name != event_time))


class _QueryChecker:
    """Validates queries lazily and only when needed, tracking each dataset's output columns.

    A derivative's query is analysed over its inputs' columns; a root's preprocess query
    over its read schema, as the view ``input`` (ENGINE-SEMANTICS §1.8), exactly as
    ingest will run it, so that nothing ingest would refuse reaches the chain. Problems
    of a preprocess output (a merge key it lacks) go to ``problems``.
    """

    def __init__(
        self,
        desired: DesiredState,
        validator: QueryValidator | None,
        ids_to_names: Mapping[str, str],
        problems: list[Problem],
        analysed: frozenset[str] | None = None,
    ) -> None:
        self.desired, self.validator, self.ids_to_names = desired, validator, ids_to_names
        self.problems = problems
        self.analysed = analysed
        self.outputs: dict[str, tuple[Column, ...] | None] = {}
        self.changed_schema: set[str] = set()
        self.used = False
        self.checked: dict[str, CheckedQuery] = {}  # which query each dataset's check read
        self.unavailable: str | None = None  # why the engine could not run, once it failed
        self.unanalysed: list[str] = []  # datasets whose queries it could not analyse

    def check(self, plan: DatasetPlan) -> DatasetPlan:
        ds = self.desired.datasets[plan.name]
        transform = _transform_of(ds.snapshot)
        upstream_changed = any(i in self.changed_schema for i in ds.inputs)
        preprocess_changed = transform is None and _preprocess_changed(plan, ds.snapshot)
        # A derivative's event time column must be in its query's output: a new SetVocab
        # is checked against the query as a new query is (the run would refuse it).
        vocab_changed = transform is not None and any(e.kind == "SetVocab" for e in plan.events)
        needs = (
            any(e.change_class is ChangeClass.NEEDS_VALIDATION for e in plan.events)
            or upstream_changed
            or preprocess_changed
            or vocab_changed
        )
        if _changes_schema(plan) or preprocess_changed:
            self.changed_schema.add(plan.name)
        if not needs or self.validator is None:
            return plan
        if self.analysed is not None and plan.name not in self.analysed:
            return plan  # outside the selection: neither run nor judged
        if transform is None:
            return self._check_preprocess(plan, ds)
        if transform.engine != ENGINE:
            return plan  # other engines are problems of their own
        aliases = self._aliases(ds.snapshot)
        inputs = {alias: self.output_of(name) for alias, name in aliases}
        if any(cols is None for cols in inputs.values()):
            self._not_analysed(ds, [name for alias, name in aliases if inputs[alias] is None])
            return plan
        check = self._validate(
            ds.name, {a: c for a, c in inputs.items() if c is not None}, transform
        )
        if check is None:
            return plan
        self.checked[ds.name] = CheckedQuery(_transform_index(ds.snapshot), "transform")
        if not check.ok or check.output_schema is None:
            return replace(plan, query=check)
        columns = [(c.name, c.type) for c in check.output_schema]
        refused = output_problem(columns, _vocabulary(ds.snapshot))
        if refused is not None:  # what the run would refuse: its output, not the query
            return replace(plan, query=replace(check, ok=False, error=refused, step="output"))
        return self._with_output_change(plan, check, ds)

    def _not_analysed(self, ds: DesiredDataset, unknown: Sequence[str]) -> None:
        """A warning that a query due for analysis was not analysed, because an input's
        query failed its own check: the reviewer learns that more may be broken (dbt
        skips a model whose upstream failed, and says so)."""
        if self.unavailable is not None and ds.name not in self.unanalysed:
            self.unanalysed.append(ds.name)  # its input's query was not analysed either
        failed = sorted({name for name in unknown if name in self.checked})
        if failed:
            self.problems.append(
                Problem(
                    f"its query was not analysed: {', '.join(failed)} failed its own query"
                    " check, so its output is unknown; fix that first",
                    dataset=ds.name,
                    location=Location(str(ds.loaded.file)),
                    severity=Severity.WARNING,
                )
            )

    def _validate(
        self, name: str, inputs: Mapping[str, Sequence[Column]], transform: models.TransformSql
    ) -> QueryCheck | None:
        """The validator's check, or None once the engine is known to be unavailable
        (the query is then listed among those left unanalysed)."""
        assert self.validator is not None
        if self.unavailable is None:
            try:
                check = self.validator(name, inputs, transform)
            except EngineUnavailableError as e:
                self.unavailable = str(e)
            else:
                self.used = True
                return check
        if name not in self.unanalysed:
            self.unanalysed.append(name)
        return None

    def problems_found(self, plans: Mapping[str, DatasetPlan]) -> list[Problem]:
        """A problem for each dataset whose query check failed, at the query's line, and
        one for an engine that could not run, naming the queries it left unanalysed."""
        found = [
            query_problem(self.desired.datasets[name], plans, checked)
            for name, checked in self.checked.items()
            if (check := plans[name].query) is not None and not check.ok
        ]
        if self.unavailable is not None:
            names = ", ".join(self.unanalysed)
            count = len(self.unanalysed)
            found.append(
                Problem(
                    f"{count} {'query' if count == 1 else 'queries'} not analysed "
                    f"({names}): {self.unavailable}"
                )
            )
        return found

    def _with_output_change(
        self, plan: DatasetPlan, check: QueryCheck, ds: DesiredDataset
    ) -> DatasetPlan:
        assert check.output_schema is not None
        self.outputs[plan.name] = with_system_columns(check.output_schema, ds.snapshot)
        event = next((e for e in plan.events if e.kind == "SetTransform"), None)
        if event is None or event.before is None:
            return replace(plan, query=check)
        old = models.SetTransform.model_validate(event.before)
        old_inputs = {
            i.alias or i.dataset_ref: self.output_of(
                self.ids_to_names.get(i.dataset_ref, i.dataset_ref)
            )
            for i in old.inputs
        }
        if any(v is None for v in old_inputs.values()):
            return replace(plan, query=check)
        before = self._validate(
            plan.name, {a: c for a, c in old_inputs.items() if c is not None}, old.transform
        )
        if before is None or not before.ok:
            return replace(plan, query=check)
        return self._output_changed(plan, event, before.output_schema, check)

    def _output_changed(
        self,
        plan: DatasetPlan,
        event: EventChange,
        before: tuple[Column, ...] | None,
        check: QueryCheck,
    ) -> DatasetPlan:
        """``plan`` with ``event`` classed by how the query's output columns change from
        ``before``: what apply would refuse (a dropped or retyped column) is breaking."""
        if before == check.output_schema:
            return replace(plan, query=check)
        change = schema_change(before, check.output_schema)
        change_class, reasons = classify_schema(change)
        worst = max(change_class, ChangeClass.NEEDS_VALIDATION, key=lambda c: c.rank)
        updated = replace(
            event, change_class=worst, reasons=(*event.reasons, *reasons), schema=change
        )
        events = tuple(updated if e is event else e for e in plan.events)
        self.changed_schema.add(plan.name)
        return replace(plan, events=events, change_class=_worst(events), query=check)

    def _check_preprocess(self, plan: DatasetPlan, ds: DesiredDataset) -> DatasetPlan:
        """Analyse every preprocess query of the root's sources over its read schema.

        The first query refused is the dataset's query check; otherwise the check of the
        source whose output the dataset holds (the last), with what is non-deterministic
        in any of them, and the problems of each output against its merge strategy.
        """
        checks = [
            (index, source, check)
            for index, source in _preprocessed_sources(ds.snapshot)
            if (check := self._preprocess(ds.name, source)) is not None
        ]
        if not checks:
            return plan
        failed = next(((i, check) for i, _, check in checks if not check.ok), None)
        if failed is not None:
            self.checked[ds.name] = CheckedQuery(failed[0], "preprocess")
            return replace(plan, query=failed[1])
        for index, source, check in checks:
            self.problems += output_problems(ds.loaded, index, source, check.output_schema or ())
        last = checks[-1][2]
        found = tuple(what for _, _, check in checks for what in check.nondeterministic)
        checked = replace(last, nondeterministic=found)
        return self._preprocess_output_change(plan, ds.name, checked)

    def _preprocess_output_change(
        self, plan: DatasetPlan, name: str, check: QueryCheck
    ) -> DatasetPlan:
        """Compare the new preprocess output with what the replaced source made (its own
        preprocess output, or its read schema), so a preprocess that drops or retypes a
        column is breaking in the plan rather than an IncompatibleSchemaError at apply."""
        event = next((e for e in plan.events if e.kind == "SetPollingSource"), None)
        if event is None or event.before is None:
            return replace(plan, query=check)
        old = models.SetPollingSource.model_validate(event.before)
        if old.preprocess is None:
            before = declared_columns(old)
        else:
            previous = self._preprocess(name, old)
            before = previous.output_schema if previous is not None and previous.ok else None
        if before is None:
            return replace(plan, query=check)
        return self._output_changed(plan, event, before, check)

    def _preprocess(self, name: str, source: SourceEvent) -> QueryCheck | None:
        """The check of ``source``'s preprocess query, or None when it cannot be made:
        no read schema (the columns are known only from the data) or another engine."""
        columns = declared_columns(source)
        if source.preprocess is None or columns is None or source.preprocess.engine != ENGINE:
            return None
        return self._validate(name, {PREPROCESS_INPUT: columns}, source.preprocess)

    def _aliases(self, snapshot: models.DatasetSnapshot) -> list[tuple[str, str]]:
        """(alias, dataset name) of each input of the manifest's transform."""
        transforms = [e for e in snapshot.metadata if isinstance(e, models.SetTransform)]
        inputs = transforms[-1].inputs if transforms else []
        return [
            (i.alias or i.dataset_ref, self.ids_to_names.get(i.dataset_ref, i.dataset_ref))
            for i in inputs
        ]

    def output_of(self, name: str) -> tuple[Column, ...] | None:
        """A dataset's slice columns as declared, validating its query if it has one."""
        if name in self.outputs:
            return self.outputs[name]
        ds = self.desired.datasets.get(name)
        result: tuple[Column, ...] | None = None
        if ds is not None:
            transform = _transform_of(ds.snapshot)
            if transform is not None and transform.engine != ENGINE:
                result = None
            elif transform is None:
                result = self._root_output(name, ds.snapshot)
            else:
                inputs = {alias: self.output_of(n) for alias, n in self._aliases(ds.snapshot)}
                if all(c is not None for c in inputs.values()):
                    check = self._validate(
                        name, {a: c for a, c in inputs.items() if c is not None}, transform
                    )
                    if check is not None and check.ok and check.output_schema is not None:
                        result = with_system_columns(check.output_schema, ds.snapshot)
        self.outputs[name] = result
        return result

    def _root_output(
        self, name: str, snapshot: models.DatasetSnapshot
    ) -> tuple[Column, ...] | None:
        """A root's slice columns: its read schema, or what its preprocess makes of it."""
        source = _source_of(snapshot)
        if source is None:
            return None
        if source.preprocess is None:
            columns = declared_columns(source)
            return with_system_columns(columns, snapshot) if columns else None
        check = self._preprocess(name, source)
        if check is None or not check.ok or check.output_schema is None:
            return None
        return with_system_columns(check.output_schema, snapshot)


def _transform_index(snapshot: models.DatasetSnapshot) -> int:
    """The position of the manifest's last SetTransform (the one in force)."""
    return max(i for i, e in enumerate(snapshot.metadata) if isinstance(e, models.SetTransform))


def _transform_of(snapshot: models.DatasetSnapshot) -> models.TransformSql | None:
    transforms = [e for e in snapshot.metadata if isinstance(e, models.SetTransform)]
    return transforms[-1].transform if transforms else None


def _source_of(snapshot: models.DatasetSnapshot) -> SourceEvent | None:
    sources = [e for e in snapshot.metadata if isinstance(e, SourceEvent)]
    return sources[-1] if sources else None


def _preprocessed_sources(snapshot: models.DatasetSnapshot) -> list[tuple[int, SourceEvent]]:
    """The sources with a preprocess query, with their position among the events."""
    return [
        (index, event)
        for index, event in enumerate(snapshot.metadata)
        if isinstance(event, SourceEvent) and event.preprocess is not None
    ]


def _preprocess_changed(plan: DatasetPlan, snapshot: models.DatasetSnapshot) -> bool:
    """Whether a source with a preprocess query is new, or its query, read step or merge
    strategy changed, so that the query and its output must be checked again."""
    if not _preprocessed_sources(snapshot):
        return False
    return any(
        e.kind in _SOURCE_KINDS
        and e.after is not None
        and (e.before is None or any(e.before.get(k) != e.after.get(k) for k in _QUERY_FACETS))
        for e in plan.events
    )


_SOURCE_KINDS = frozenset({"SetPollingSource", "AddPushSource"})
_QUERY_FACETS = ("preprocess", "read", "merge")
