"""The JSON form of a plan, described by ``reconciler/schemas/plan.json``, for CI and other tools.

Terraform's ``show -json`` is the model: a versioned document a machine can save and
read back without parsing text meant for people. Keys are camelCase like the ODF JSON
the events already use; optional fields are left out rather than written as null, except
an event's ``before``/``after`` and a schema's, where null means "nothing there".
"""

from __future__ import annotations

import json
from typing import Any

from .model import (
    Blocked,
    ChainFacts,
    Column,
    DatasetPlan,
    EventChange,
    Fingerprints,
    Location,
    Pending,
    Plan,
    Problem,
    QueryCheck,
    Recreate,
    SchemaChange,
    Verdict,
)
from .render_common import error_count, pending_count, relative_paths, warning_count


def render_json(plan: Plan) -> str:
    """The plan as indented JSON, keys in the order of :func:`plan_to_dict`."""
    return json.dumps(plan_to_dict(plan), indent=2, ensure_ascii=False)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The plan as plain JSON values, ``formatVersion`` first so readers can check it early.

    Paths are written relative to ``Plan.root``, which is itself left out: it names a
    folder of the machine that planned, which means nothing to the document's readers.
    """
    plan = relative_paths(plan)
    return _present(
        {
            "formatVersion": plan.format_version,
            "baseRef": plan.base_ref,
            "commit": plan.commit,
            "fingerprints": _fingerprints(plan.fingerprints) if plan.fingerprints else None,
            "selection": None if plan.selection is None else list(plan.selection),
            "unreadable": list(plan.unreadable) or None,
            "blocked": [_blocked(b) for b in plan.blocked] or None,
            "engineStarted": plan.engine_started,
            "summary": _summary(plan),
            "datasets": [_dataset(d) for d in plan.datasets],
            "verdicts": [_verdict(v) for v in plan.verdicts],
            "problems": [_problem(p) for p in plan.problems],
        }
    )


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields that are None: an absent key reads better than a row of nulls."""
    return {key: value for key, value in fields.items() if value is not None}


def _fingerprints(fingerprints: Fingerprints) -> dict[str, Any]:
    return _present(
        {
            "reconcilerVersion": fingerprints.reconciler_version,
            "baseCommit": fingerprints.base_commit,
            "settings": fingerprints.settings,
            "manifests": dict(fingerprints.manifests),
            "policies": dict(fingerprints.policies),
            "heads": dict(fingerprints.heads),
        }
    )


def _summary(plan: Plan) -> dict[str, Any]:
    return {
        "actions": plan.counts(),
        "pendingData": pending_count(plan),
        "errors": error_count(plan),
        "warnings": warning_count(plan),
        "hasChanges": plan.has_changes,
        "hasErrors": plan.has_errors,
        "exitCode": {"default": plan.exit_code(False), "detailed": plan.exit_code(True)},
    }


def _dataset(dataset: DatasetPlan) -> dict[str, Any]:
    return _present(
        {
            "name": dataset.name,
            "kind": dataset.kind,
            "action": dataset.action.value,
            "changeClass": dataset.change_class.value if dataset.change_class else None,
            "changedInPr": dataset.changed_in_pr,
            "datasetId": dataset.dataset_id,
            "manifest": _location(dataset.manifest),
            "override": dataset.override,
            "renamedFrom": dataset.renamed_from,
            "inputs": list(dataset.inputs),
            "downstream": list(dataset.downstream),
            "affectedDownstream": list(dataset.affected_downstream),
            "events": [_event(e) for e in dataset.events],
            "pending": [_pending(p) for p in dataset.pending],
            "query": _query(dataset.query) if dataset.query else None,
            "recreate": _recreate(dataset.recreate) if dataset.recreate else None,
            "chain": _chain(dataset.chain) if dataset.chain else None,
        }
    )


def _blocked(blocked: Blocked) -> dict[str, Any]:
    return {"name": blocked.name, "inputs": list(blocked.inputs)}


def _chain(chain: ChainFacts) -> dict[str, Any]:
    return {"head": chain.head, "blocks": chain.blocks, "records": chain.records}


def _recreate(recreate: Recreate) -> dict[str, Any]:
    return {
        "reason": recreate.reason,
        "replaces": recreate.replaces,
        "replacedHead": recreate.replaced_head,
        "replacedBlocks": recreate.replaced_blocks,
        "recreatedWith": list(recreate.recreated_with),
        "inputRecords": recreate.input_records,
        "estimated": list(recreate.estimated),
        "uncounted": list(recreate.uncounted),
        "files": list(recreate.files),
        "events": list(recreate.events),
    }


def _event(event: EventChange) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "kind": event.kind,
        "key": event.key,
        "changeClass": event.change_class.value,
        "reasons": list(event.reasons),
        "before": event.before,
        "after": event.after,
    }
    if event.schema is not None:
        fields["schema"] = _schema(event.schema)
    return fields


def _schema(change: SchemaChange) -> dict[str, Any]:
    return {
        "before": _columns(change.before),
        "after": _columns(change.after),
        "added": list(change.added),
        "removed": list(change.removed),
        "retyped": [{"column": c, "before": old, "after": new} for c, old, new in change.retyped],
        "nullability": [
            {"column": c, "before": old, "after": new} for c, old, new in change.nullability
        ],
    }


def _columns(columns: tuple[Column, ...] | None) -> list[dict[str, Any]] | None:
    if columns is None:
        return None
    return [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in columns]


def _pending(pending: Pending) -> dict[str, Any]:
    return {"reason": pending.reason, "detail": pending.detail}


def _query(query: QueryCheck) -> dict[str, Any]:
    return _present(
        {
            "dataset": query.dataset,
            "ok": query.ok,
            "outputSchema": _columns(query.output_schema),
            "error": query.error,
            "line": query.line,
        }
    )


def _verdict(verdict: Verdict) -> dict[str, Any]:
    return _present(
        {
            "policy": verdict.policy,
            "severity": verdict.severity.value,
            "message": verdict.message,
            "dataset": verdict.dataset,
            "location": _location(verdict.location),
        }
    )


def _problem(problem: Problem) -> dict[str, Any]:
    return _present(
        {
            "message": problem.message,
            "dataset": problem.dataset,
            "location": _location(problem.location),
            "field": problem.field,
            "severity": problem.severity.value,
        }
    )


def _location(location: Location | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return _present({"file": location.file, "line": location.line, "column": location.column})
