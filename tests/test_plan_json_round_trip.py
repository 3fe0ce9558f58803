"""A plan written to JSON (``render_json``) and read back (``load_json``) is the same plan.

The two modules mirror each other by hand, so a field added to the plan model could be
written but forgotten when read, or the other way round. The plan here is built from the
dataclasses' own fields, every field given a value other than its default, so a new
field takes part without this test being touched, and the round trip fails until both
sides handle it (or the field is listed below, with the reason it stays out of the JSON).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
import zlib
from typing import Any

import pytest

from reconciler.plan import model
from reconciler.plan.load_json import PlanFormatError, plan_from_dict
from reconciler.plan.model import PLAN_FORMAT_VERSION, Plan, QueryCheck
from reconciler.plan.render_json import plan_to_dict

# Fields the JSON does not hold (``reconciler/schemas/plan.json`` has no key for them):
# they come back at their default.
NOT_IN_JSON = {
    (Plan, "root"): "machine-local: the paths under it are written relative to it",
    (QueryCheck, "step"): "the plan's problem about the failed query names the step",
    (QueryCheck, "nondeterministic"): "the deterministic-queries verdicts say it in words",
}
# Fields whose default is the only value a round trip can carry.
ONLY_DEFAULT = {
    (Plan, "format_version"): "a document of another version is refused, not read",
}

Field = tuple[type, str]


def test_every_field_of_every_plan_dataclass_survives_a_round_trip() -> None:
    plan = _sample(Plan, leave=frozenset(ONLY_DEFAULT))
    document = json.loads(json.dumps(plan_to_dict(plan)))
    expected = _sample(Plan, leave=frozenset(ONLY_DEFAULT) | frozenset(NOT_IN_JSON))
    assert plan_from_dict(document) == expected


def test_the_sample_plan_reaches_every_dataclass_of_the_model() -> None:
    """A dataclass of the model that no plan holds would escape the round trip above."""
    reached: set[type] = set()
    _sample(Plan, leave=frozenset(ONLY_DEFAULT), reached=reached)
    declared = {
        value
        for value in vars(model).values()
        if dataclasses.is_dataclass(value) and value.__module__ == model.__name__
    }
    assert reached == declared


def test_a_document_of_another_format_version_is_refused() -> None:
    document = plan_to_dict(_sample(Plan, leave=frozenset(ONLY_DEFAULT)))
    document["formatVersion"] = PLAN_FORMAT_VERSION + 1
    with pytest.raises(PlanFormatError, match="plan format version 2 is not 1"):
        plan_from_dict(document)


def _sample(
    cls: type, leave: frozenset[Field], reached: set[type] | None = None, path: str = ""
) -> Any:
    """An instance of the dataclass ``cls`` with every field but those in ``leave`` set
    to a value other than its default, recursively; ``path`` says where it is held."""
    if reached is not None:
        reached.add(cls)
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if (cls, field.name) in leave:
            continue
        default = field.default if field.default is not dataclasses.MISSING else None
        where = f"{path}{cls.__name__}.{field.name}"
        value = _value(hints[field.name], where, default, leave, reached)
        assert value != field.default, f"the sample of {where} is its default"
        values[field.name] = value
    return cls(**values)


def _value(
    hint: Any, where: str, default: Any, leave: frozenset[Field], reached: set[type] | None
) -> Any:
    """A value of type ``hint`` other than ``default``, derived from ``where`` it is held
    so that two fields (or two items of a tuple) do not hold the same value, and a reader
    that mixed them up would be caught."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:  # ``X | None``: an X
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _value(inner, where, default, leave, reached)
    if origin is tuple and args[-1] is Ellipsis:  # two items, to show their order is kept
        return tuple(_value(args[0], f"{where}[{i}]", None, leave, reached) for i in (0, 1))
    if origin is tuple:
        return tuple(
            _value(arg, f"{where}[{i}]", None, leave, reached) for i, arg in enumerate(args)
        )
    if origin is dict:
        return {"at": where, "value": [1, None, {"nested": True}]}
    if dataclasses.is_dataclass(hint):
        return _sample(hint, leave, reached, f"{where}/")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(member for member in reversed(hint) if member != default)
    if hint is bool:
        return default is not True
    if hint is int:
        return zlib.crc32(where.encode())
    if hint is str:
        return where
    raise TypeError(f"no sample value for {hint} ({where}): teach _value this type")
