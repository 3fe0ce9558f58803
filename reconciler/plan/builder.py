"""``build_plan``: desired manifests + committed chains -> a Plan. No side effects.

It reads nothing but what it is given and executes nothing from the manifests: no fetch,
no prepare command, no container, no secret. The one outside service it may use is the
query validator, and only for queries that are new or changed, or whose upstream schema
changed; so a plan without such changes never starts a JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..odf import models
from ..odf.chain import ChainState
from ..odf.repository import OdfRepository, RepositoryError
from .desired import DesiredDataset, DesiredState
from .diff import (
    Facets,
    classify_schema,
    creation_events,
    declared_columns,
    schema_change,
    update_events,
)
from .model import (
    Action,
    ChangeClass,
    Column,
    DatasetPlan,
    EventChange,
    Location,
    Pending,
    Plan,
    Problem,
    QueryCheck,
    Verdict,
)
from .support import ENGINE, unsupported_features

QueryValidator = Callable[[str, Mapping[str, Sequence[Column]], models.TransformSql], QueryCheck]
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
    return states, problems


@dataclass(frozen=True)
class PlanOptions:
    prune: bool = False
    base_ref: str | None = None
    changed: frozenset[str] | None = None  # dataset names whose manifests the PR touched


def build_plan(
    desired: DesiredState,
    actual: Mapping[str, ChainState],
    *,
    validator: QueryValidator | None = None,
    policies: PolicyEvaluator | None = None,
    options: PlanOptions = PlanOptions(),
    problems: Sequence[Problem] = (),
) -> Plan:
    """Diff every manifest against its chain and classify, validate and judge the result."""
    ids_to_names = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}

    def resolve(ref: str) -> str:
        name = ids_to_names.get(ref, ref)
        state = actual.get(name)
        return str(state.dataset_id) if state is not None and state.dataset_id else name

    all_problems = [*problems, *desired.problems]
    plans: dict[str, DatasetPlan] = {}
    for name, ds in desired.datasets.items():
        plans[name] = _dataset_plan(ds, actual.get(name), resolve, ids_to_names, all_problems)
    _mark_downstream(plans, desired)
    checker = _QueryChecker(desired, validator, ids_to_names)
    for name in desired.datasets:
        plans[name] = checker.check(plans[name])
    _mark_downstream(plans, desired)
    for name, state in actual.items():
        if name not in plans:
            plans[name] = _orphan(name, state, options.prune)
    for name, ds in desired.datasets.items():
        plans[name] = replace(plans[name], pending=_pending(ds, actual, plans[name]))
    if options.changed is not None:
        plans = {n: replace(p, changed_in_pr=n in options.changed) for n, p in plans.items()}
    verdicts: list[Verdict] = []
    if policies is not None:
        for name, ds in desired.datasets.items():
            verdicts += policies(ds, plans[name])
    order = [*desired.datasets, *sorted(n for n in plans if n not in desired.datasets)]
    return Plan(
        datasets=tuple(plans[n] for n in order),
        verdicts=tuple(verdicts),
        problems=tuple(all_problems),
        base_ref=options.base_ref,
        engine_started=checker.used,
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
        events = update_events(desired, Facets.of_chain(state), ids_to_names)
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
    for name in plans:
        if name in desired.datasets:
            downstream = desired.downstream(name)
            affected = downstream if _changes_schema(plans[name]) else ()
            plans[name] = replace(plans[name], downstream=downstream, affected_downstream=affected)


def _orphan(name: str, state: ChainState, prune: bool) -> DatasetPlan:
    return DatasetPlan(
        name=name,
        kind=state.kind.value if state.kind else "Root",
        action=Action.DELETE if prune else Action.ORPHANED,
        dataset_id=str(state.dataset_id) if state.dataset_id else None,
    )


def _pending(
    ds: DesiredDataset, actual: Mapping[str, ChainState], plan: DatasetPlan
) -> tuple[Pending, ...]:
    """Data apply would process: sources that may have new data, unconsumed input slices."""
    snapshot = ds.snapshot
    pending: list[Pending] = []
    for event in snapshot.metadata:
        if isinstance(event, models.SetPollingSource):
            pending = [Pending("polling-source", f"{event.fetch.kind} source may have new data")]
    state = actual.get(ds.name)
    consumed = state.inputs if state is not None else {}
    for input_name in ds.inputs:
        upstream = actual.get(input_name)
        if upstream is None or upstream.last_offset is None or upstream.dataset_id is None:
            continue
        cursor = consumed.get(upstream.dataset_id)
        done = cursor.offset if cursor is not None else None
        if done is None or done < upstream.last_offset:
            first = 0 if done is None else done + 1
            pending.append(
                Pending(
                    "unconsumed-inputs",
                    f"{input_name}: offsets {first}..{upstream.last_offset} not yet consumed",
                )
            )
    return tuple(pending)


SYSTEM_COLUMNS = (
    Column("offset", "bigint", False),
    Column("op", "int", False),
    Column("system_time", "timestamp", False),
)


def _vocab(snapshot: models.DatasetSnapshot) -> models.SetVocab:
    vocab = [e for e in snapshot.metadata if isinstance(e, models.SetVocab)]
    return vocab[-1] if vocab else models.SetVocab()


def with_system_columns(
    columns: Sequence[Column], snapshot: models.DatasetSnapshot
) -> tuple[Column, ...]:
    """The columns a dataset's slices hold: offset, op, system_time, event time, data."""
    vocab = _vocab(snapshot)
    names = {
        "offset": vocab.offset_column or "offset",
        "op": vocab.operation_type_column or "op",
        "system_time": vocab.system_time_column or "system_time",
    }
    event_time = vocab.event_time_column or "event_time"
    system = tuple(replace(c, name=names[c.name]) for c in SYSTEM_COLUMNS)
    reserved = set(names.values())
    data = [c for c in columns if c.name not in reserved]
    event = next((c for c in data if c.name == event_time), Column(event_time, "timestamp", True))
    return (*system, event, *(c for c in data if c.name != event_time))


class _QueryChecker:
    """Validates queries lazily and only when needed, tracking each dataset's output columns."""

    def __init__(
        self,
        desired: DesiredState,
        validator: QueryValidator | None,
        ids_to_names: Mapping[str, str],
    ) -> None:
        self.desired, self.validator, self.ids_to_names = desired, validator, ids_to_names
        self.outputs: dict[str, tuple[Column, ...] | None] = {}
        self.changed_schema: set[str] = set()
        self.used = False

    def check(self, plan: DatasetPlan) -> DatasetPlan:
        ds = self.desired.datasets[plan.name]
        upstream_changed = any(i in self.changed_schema for i in ds.inputs)
        needs = (
            any(e.change_class is ChangeClass.NEEDS_VALIDATION for e in plan.events)
            or upstream_changed
        )
        if _changes_schema(plan):
            self.changed_schema.add(plan.name)
        if not needs or self.validator is None:
            return plan
        transform = _transform_of(ds.snapshot)
        if transform is None or transform.engine != ENGINE:
            return plan  # a root's preprocess is checked at ingest; other engines are problems
        inputs = {alias: self.output_of(name) for alias, name in self._aliases(ds.snapshot)}
        if any(cols is None for cols in inputs.values()):
            return plan
        check = self._validate(
            ds.name, {a: c for a, c in inputs.items() if c is not None}, transform
        )
        if not check.ok or check.output_schema is None:
            return replace(plan, query=check)
        return self._with_output_change(plan, check, ds)

    def _validate(
        self, name: str, inputs: Mapping[str, Sequence[Column]], transform: models.TransformSql
    ) -> QueryCheck:
        assert self.validator is not None
        self.used = True
        return self.validator(name, inputs, transform)

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
        if not before.ok or before.output_schema == check.output_schema:
            return replace(plan, query=check)
        change = schema_change(before.output_schema, check.output_schema)
        change_class, reasons = classify_schema(change)
        worst = max(change_class, ChangeClass.NEEDS_VALIDATION, key=lambda c: c.rank)
        updated = replace(
            event, change_class=worst, reasons=(*event.reasons, *reasons), schema=change
        )
        events = tuple(updated if e is event else e for e in plan.events)
        self.changed_schema.add(plan.name)
        return replace(plan, events=events, change_class=_worst(events), query=check)

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
                source = _source_of(ds.snapshot)
                columns = declared_columns(source)
                no_preprocess = source is not None and source.preprocess is None
                result = (
                    with_system_columns(columns, ds.snapshot) if columns and no_preprocess else None
                )
            else:
                inputs = {alias: self.output_of(n) for alias, n in self._aliases(ds.snapshot)}
                if all(c is not None for c in inputs.values()):
                    check = self._validate(
                        name, {a: c for a, c in inputs.items() if c is not None}, transform
                    )
                    if check.ok and check.output_schema is not None:
                        result = with_system_columns(check.output_schema, ds.snapshot)
        self.outputs[name] = result
        return result


def _transform_of(snapshot: models.DatasetSnapshot) -> models.TransformSql | None:
    transforms = [e for e in snapshot.metadata if isinstance(e, models.SetTransform)]
    return transforms[-1].transform if transforms else None


def _source_of(
    snapshot: models.DatasetSnapshot,
) -> models.SetPollingSource | models.AddPushSource | None:
    sources = [
        e
        for e in snapshot.metadata
        if isinstance(e, models.SetPollingSource | models.AddPushSource)
    ]
    return sources[-1] if sources else None
