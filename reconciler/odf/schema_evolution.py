"""How a dataset's schema may grow: the one rule ingest and transforms both apply.

A dataset's ``SetDataSchema`` is what every reader of every slice is promised. Since
0.254 kamu accepts a new ``SetDataSchema`` that adds optional columns (ENGINE-SEMANTICS
§3.2, HEAD rules), and older slices then read those columns as null. So a slice whose
columns are the dataset's plus new nullable ones appends a new schema first: the
existing columns keep their place and the new ones go at the end, in the order the data
gives them.

Columns are matched by name, and the dataset's order is its own: a read schema or query
may list its columns in any order (a CSV source that inserted a column in the middle
needs its read schema to say so), and every slice is written in the dataset's order. A
new column inserted in the middle is therefore appended at the end, and stays there on
every later run. A column missing or retyped, or a new NOT NULL column (its older rows
have no value), stays an error: the plan calls those breaking. An existing column's
nullability is the dataset's, whatever the source now declares: the writer holds every
slice to it (a NULL in a NOT NULL column fails), which is all a reader relies on.

Pure pyarrow: callers turn their engine's columns into Arrow fields first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pyarrow as pa

from .slices import normalize_type


class IncompatibleSchemaError(ValueError):
    """Data whose columns the dataset's SetDataSchema cannot hold, even grown."""


def grown_schema(
    schema: pa.Schema,
    fields: Sequence[pa.Field],
    *,
    system: Collection[str],
    declared: bool,
    may_grow: bool = True,
    what: str = "the data",
) -> pa.Schema:
    """The schema a slice with data columns ``fields`` is written with: ``schema`` itself
    when the columns are its own (in any order), else ``schema`` with the new columns
    appended, nullable.

    ``system`` names the columns the writer adds (offset, op, system_time), which
    ``fields`` leave out. ``declared`` says whether a new field's NOT NULL is a
    declaration (a read schema's), which cannot be added, or only what the engine
    inferred for a query's output, which is stored nullable: its older rows have no
    value. ``may_grow`` false allows no new column at all. Raises IncompatibleSchemaError
    naming every difference, prefixed by ``what``.
    """
    stored = [f for f in schema if f.name not in system]
    known = {f.name: f for f in stored}
    given = {f.name: f for f in fields}
    problems = [f"column {f.name!r} is missing" for f in stored if f.name not in given]
    for f in stored:
        other = given.get(f.name)
        if other is None:
            continue
        found, expected = normalize_type(other.type), normalize_type(f.type)
        if found != expected:
            problems.append(f"column {f.name!r} is {found}, the dataset has {expected}")
    added = [f for f in fields if f.name not in known]
    for f in added:
        if not may_grow:
            problems.append(f"column {f.name!r} is not in the dataset's schema")
        elif declared and not f.nullable:
            problems.append(
                f"column {f.name!r} is not in the dataset's schema and is NOT NULL; "
                "only nullable columns can be added"
            )
    if problems:
        raise IncompatibleSchemaError(
            f"{what} does not match the dataset's schema (SetDataSchema): " + "; ".join(problems)
        )
    for f in added:
        schema = schema.append(pa.field(f.name, normalize_type(f.type), nullable=True))
    return schema
