"""Hypothesis strategies that build any ODF model from its annotations.

Deriving the strategy from the model keeps the property tests honest: a field added
to a model is generated, encoded and decoded without anyone remembering to add it here.
"""

from __future__ import annotations

import enum
import types
import typing
from functools import cache
from typing import Any

from hypothesis import strategies as st

from reconciler.odf import models
from reconciler.odf.multiformat import ARROW0_SHA3_256, DatasetId, Multihash
from reconciler.odf.timestamps import Timestamp

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
uint64 = st.integers(min_value=0, max_value=2**64 - 1)
timestamps = st.builds(
    Timestamp,
    st.integers(min_value=-62_135_596_800, max_value=253_402_300_799),  # years 1..9999
    st.integers(min_value=0, max_value=999_999_999),
)
multihashes = st.one_of(
    st.binary(min_size=32, max_size=32).map(Multihash.from_digest),
    st.binary(min_size=32, max_size=32).map(lambda d: Multihash.from_digest(d, ARROW0_SHA3_256)),
)
dataset_ids = st.binary(min_size=32, max_size=32).map(DatasetId.from_public_key)


def _for_annotation(annotation: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        base = args[0]
        if base is int:
            bounds = {m.__class__.__name__: m for m in args[1].metadata} if len(args) > 1 else {}
            low = bounds["Ge"].ge if "Ge" in bounds else None
            high = bounds["Le"].le if "Le" in bounds else None
            return st.integers(min_value=low, max_value=high)
        return _for_annotation(base)
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        inner = st.one_of(*[_for_annotation(a) for a in non_null])
        return st.one_of(st.none(), inner) if len(non_null) < len(args) else inner
    if origin is list:
        return st.lists(_for_annotation(args[0]), max_size=3)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if annotation is Multihash:
        return multihashes
    if annotation is DatasetId:
        return dataset_ids
    if annotation is Timestamp:
        return timestamps
    if annotation is str:
        return text
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(min_value=-(2**31), max_value=2**31 - 1)
    if annotation is bytes:
        return st.binary(max_size=40)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, models.OdfModel):
        return model_strategy(annotation)
    raise TypeError(f"no strategy for {annotation!r}")


@cache
def model_strategy(model: type[models.OdfModel]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(model, include_extras=True)
    fields = {name: _for_annotation(hints[name]) for name in model.model_fields}
    return st.fixed_dictionaries(fields).map(lambda values: model(**values))


def blocks_with(event: type[models.OdfModel]) -> st.SearchStrategy[models.MetadataBlock]:
    # Not st.builds: it would also fill the alias-named parameters of the signature.
    fields = {
        "system_time": timestamps,
        "prev_block_hash": st.one_of(st.none(), multihashes),
        "sequence_number": uint64,
        "event": model_strategy(event),
    }
    return st.fixed_dictionaries(fields).map(lambda values: models.MetadataBlock(**values))
