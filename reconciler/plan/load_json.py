"""A plan read back from its JSON form (``render_json``), to render it again.

CI computes a plan once, as JSON, and renders the pull-request comment from that
document (``reconcile show``): the engine's analysis of the queries runs once, and the
comment says exactly what the saved plan says. Every field ``render_json`` writes is read
back (``tests/test_plan_json_round_trip.py`` builds every plan dataclass with no field at
its default to hold both sides to that). The fields the JSON leaves out are not needed
to render a plan: the repository root (its paths are written relative to it), and a
query's failed step and non-deterministic parts, which the plan's problems and verdicts
already say in words.
"""

from __future__ import annotations

from typing import Any

from .model import (
    PLAN_FORMAT_VERSION,
    Action,
    Blocked,
    ChainFacts,
    ChangeClass,
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
    Severity,
    Verdict,
)


class PlanFormatError(ValueError):
    """The document is not a plan this version can read."""


def plan_from_dict(document: dict[str, Any]) -> Plan:
    """The plan of a document ``render_json`` wrote; refuses other format versions."""
    version = document.get("formatVersion")
    if version != PLAN_FORMAT_VERSION:
        raise PlanFormatError(
            f"plan format version {version!r} is not {PLAN_FORMAT_VERSION}, the one this"
            " reconciler reads"
        )
    try:
        return Plan(
            datasets=tuple(_dataset(d) for d in document["datasets"]),
            verdicts=tuple(_verdict(v) for v in document["verdicts"]),
            problems=tuple(_problem(p) for p in document["problems"]),
            base_ref=document.get("baseRef"),
            selection=None if "selection" not in document else tuple(document["selection"]),
            unreadable=tuple(document.get("unreadable", ())),
            blocked=tuple(
                Blocked(b["name"], tuple(b["inputs"])) for b in document.get("blocked", ())
            ),
            engine_started=document["engineStarted"],
            commit=document.get("commit"),
            fingerprints=load_fingerprints(document["fingerprints"])
            if "fingerprints" in document
            else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise PlanFormatError(f"not a plan document: {type(e).__name__}: {e}") from None


def load_fingerprints(f: dict[str, Any]) -> Fingerprints:
    """The ``fingerprints`` object of a plan document: also what a saved plan is checked
    against before it is applied (``gitloop.saved_plan``)."""
    return Fingerprints(
        reconciler_version=f["reconcilerVersion"],
        manifests=tuple(f["manifests"].items()),
        policies=tuple(f["policies"].items()),
        heads=tuple(f["heads"].items()),
        base_commit=f.get("baseCommit"),
        settings=f.get("settings"),
    )


def _dataset(d: dict[str, Any]) -> DatasetPlan:
    change_class = d.get("changeClass")
    return DatasetPlan(
        name=d["name"],
        kind=d["kind"],
        action=Action(d["action"]),
        manifest=_location(d.get("manifest")),
        dataset_id=d.get("datasetId"),
        events=tuple(_event(e) for e in d.get("events", ())),
        change_class=ChangeClass(change_class) if change_class else None,
        inputs=tuple(d.get("inputs", ())),
        downstream=tuple(d.get("downstream", ())),
        affected_downstream=tuple(d.get("affectedDownstream", ())),
        pending=tuple(Pending(p["reason"], p["detail"]) for p in d.get("pending", ())),
        query=_query(d["query"]) if "query" in d else None,
        changed_in_pr=d.get("changedInPr"),
        override=d.get("override"),
        renamed_from=d.get("renamedFrom"),
        recreate=_recreate(d["recreate"]) if "recreate" in d else None,
        chain=ChainFacts(**d["chain"]) if "chain" in d else None,
    )


def _recreate(r: dict[str, Any]) -> Recreate:
    return Recreate(
        reason=r["reason"],
        replaces=r["replaces"],
        replaced_head=r["replacedHead"],
        replaced_blocks=r["replacedBlocks"],
        recreated_with=tuple(r["recreatedWith"]),
        input_records=r["inputRecords"],
        estimated=tuple(r["estimated"]),
        uncounted=tuple(r.get("uncounted", ())),
        files=tuple(r["files"]),
        events=tuple(r["events"]),
    )


def _event(e: dict[str, Any]) -> EventChange:
    return EventChange(
        kind=e["kind"],
        key=e["key"],
        before=e["before"],
        after=e["after"],
        change_class=ChangeClass(e["changeClass"]),
        reasons=tuple(e["reasons"]),
        schema=_schema(e["schema"]) if "schema" in e else None,
    )


def _schema(s: dict[str, Any]) -> SchemaChange:
    return SchemaChange(
        before=_columns(s["before"]),
        after=_columns(s["after"]),
        added=tuple(s["added"]),
        removed=tuple(s["removed"]),
        retyped=tuple((r["column"], r["before"], r["after"]) for r in s["retyped"]),
        nullability=tuple((n["column"], n["before"], n["after"]) for n in s["nullability"]),
    )


def _columns(columns: list[dict[str, Any]] | None) -> tuple[Column, ...] | None:
    if columns is None:
        return None
    return tuple(Column(c["name"], c["type"], c["nullable"]) for c in columns)


def _query(q: dict[str, Any]) -> QueryCheck:
    return QueryCheck(
        dataset=q["dataset"],
        ok=q["ok"],
        output_schema=_columns(q.get("outputSchema")),
        error=q.get("error"),
        line=q.get("line"),
    )


def _verdict(v: dict[str, Any]) -> Verdict:
    return Verdict(
        policy=v["policy"],
        severity=Severity(v["severity"]),
        message=v["message"],
        dataset=v.get("dataset"),
        location=_location(v.get("location")),
    )


def _problem(p: dict[str, Any]) -> Problem:
    return Problem(
        message=p["message"],
        dataset=p.get("dataset"),
        location=_location(p.get("location")),
        field=p.get("field"),
        severity=Severity(p["severity"]),
    )


def _location(loc: dict[str, Any] | None) -> Location | None:
    if loc is None:
        return None
    return Location(loc["file"], loc.get("line"), loc.get("column"))
