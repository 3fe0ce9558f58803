"""A saved plan (``reconcile plan --format json --out plan.json``), applied exactly or not at all.

``reconcile apply plan.json`` plans again and compares: first the fingerprints (every
manifest, policy file, chain head, the version and the base commit that moved is named),
then the datasets and their events, which must equal the saved ones. Only then does it
apply, so what runs is what the reviewer read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from ..odf import json_schemas
from ..plan.load_json import load_fingerprints
from ..plan.model import Action, Fingerprints, Plan
from ..plan.render_json import plan_to_dict
from . import fingerprints


class SavedPlanError(ValueError):
    """The file is not a saved plan this reconciler can apply."""


@dataclass(frozen=True)
class SavedPlan:
    """A plan document read back from its file."""

    path: Path
    document: dict[str, Any]
    digest: str  # sha256 of the file's bytes: the Reconcile-Plan-Hash of its apply
    fingerprints: Fingerprints

    @property
    def base_ref(self) -> str | None:
        base: str | None = self.document.get("baseRef")
        return base

    @property
    def selection(self) -> frozenset[str] | None:
        """The datasets it was made of with ``--select``; None for the whole repository.
        Its datasets must then be exactly the plan of that selection: one taken out of
        the file is refused, not applied as if it had not been selected."""
        names = self.document.get("selection")
        return None if names is None else frozenset(str(n) for n in names)

    @property
    def prune(self) -> bool:
        """Whether it was planned with ``--prune``: it then deletes orphans (a plan with
        none to delete reads the same either way, and so applies the same)."""
        return any(d["action"] == Action.DELETE.value for d in self.document["datasets"])


def load(path: Path) -> SavedPlan:
    """The saved plan at ``path``; ``SavedPlanError`` when it is no plan document or was
    written without fingerprints (``--format json`` of a reconciler that had none)."""
    try:
        data = path.read_bytes()
        document = json.loads(data)
        json_schemas.validator("plan.json").validate(document)
    except OSError as e:
        raise SavedPlanError(f"cannot read the saved plan {path}: {e.strerror}") from None
    except ValueError as e:
        raise SavedPlanError(f"{path} is not a plan in JSON: {e}") from None
    except jsonschema.ValidationError as e:
        schema = "reconciler/schemas/plan.json"
        raise SavedPlanError(f"{path} is not a plan ({schema}): {e.message}") from None
    if "fingerprints" not in document:
        raise SavedPlanError(
            f"{path} has no fingerprints: save plans with `reconcile plan --format json --out`"
        )
    return SavedPlan(
        path,
        document,
        hashlib.sha256(data).hexdigest(),
        load_fingerprints(document["fingerprints"]),
    )


def stale(saved: SavedPlan, plan: Plan) -> list[str]:
    """Why the plan made now differs from the saved one: moved inputs first, then (should
    the plan differ without any of them moving) each dataset whose plan changed."""
    assert plan.fingerprints is not None, "plans are made with their fingerprints"
    found = fingerprints.differences(saved.fingerprints, plan.fingerprints)
    if found:
        return found
    before = {d["name"]: d for d in saved.document["datasets"]}
    after = {d["name"]: d for d in plan_to_dict(plan)["datasets"]}
    for name in sorted(before.keys() | after.keys()):
        if name not in after:
            found.append(f"dataset {name} is in the saved plan but not planned now")
        elif name not in before:
            found.append(f"dataset {name} is planned now but not in the saved plan")
        elif before[name] != after[name]:
            found.append(_changed(name, before[name], after[name]))
    return found


# The parts of a dataset's plan a reader can act on, as the difference names them.
_PARTS = {"action": "its action", "events": "its events", "query": "its query's analysis"}


def _changed(name: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """Which parts of a dataset's plan moved: the data waiting (a new source file is
    the usual cause) with what it was and is, the action with both values, the rest by
    name."""
    parts = []
    for key in [k for k in after if k in before] + [k for k in before if k not in after]:
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if key == "pending":
            parts.append(f"the data waiting was {_pending(was)}, is now {_pending(now)}")
        elif key == "action":
            parts.append(f"its action was {was}, is now {now}")
        else:
            parts.append(_PARTS.get(key, f"its {key}") + " changed")
    return f"the plan of dataset {name} differs from the saved one: {'; '.join(parts)}"


def _pending(entries: list[dict[str, Any]] | None) -> str:
    details = [str(e.get("detail") or e.get("reason")) for e in entries or ()]
    return repr("; ".join(details)) if details else "nothing"
