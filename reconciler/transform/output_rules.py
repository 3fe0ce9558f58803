"""What a derivative's query output must hold to become a slice, as one rule for the plan
and the run alike.

A transform's output gets the system columns added by the writer, so it may not have
columns of their names; it must have the event time column the vocabulary names, a DATE
or a TIMESTAMP; an ``op`` column, when it has one, must be an integer; no two columns
may have one name; and no column may be or hold a type a slice cannot hold
(``column_problem``). Names are compared as Spark compares them
(``spark.sql.caseSensitive=false``): ``OFFSET`` is the ``offset`` column to every reader
of the slice. The run refuses an output that breaks a rule (``transform.execute``), and
the plan, which analyses a new or changed query, refuses the same query before it is
approved (``plan.builder``; a root's preprocess query in ``plan.preprocess_output``): a
plan that passes must not fail its apply on the shape of the output. Types are the
spelling ``engine.query_check.columns_from_schema`` gives (Spark's ``simpleString``,
struct field names quoted when they need it), which both sides have without running a
query; this module imports no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..odf import models

_TIMES = frozenset({"date", "timestamp", "timestamp_ntz"})
_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})

OutputColumns = Sequence[tuple[str, str]]
"""A query's output columns in order, each (name, Spark type); names may repeat."""


def output_problem(columns: OutputColumns, vocab: models.DatasetVocabulary) -> str | None:
    """Why an output of ``columns`` cannot be a slice of a dataset with ``vocab``, or
    None when it can."""
    op = vocab.operation_type_column
    for name, _ in columns:
        system = system_column(name, vocab)
        if system is None or name == op:
            continue  # ``op`` itself passes through: it is checked below
        if system == name:
            return (
                f"the query's output has a column {name!r}, a system column's name: the"
                " writer adds that column to every slice; rename it in the query"
            )
        return (
            f"the query's output has a column {name!r}, which differs only in case from the"
            f" system column {system!r} that the writer adds to every slice, and which Spark"
            " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the"
            " query"
        )
    clash = same_names(name for name, _ in columns)
    if clash is not None:
        return f"the query's output {clash_text(*clash)}; rename one of them with AS"
    types = dict(columns)
    event = vocab.event_time_column
    if event not in types:
        return f"the query's output has no event time column {event!r}"
    if types[event] not in _TIMES:
        return f"event time column {event!r} should be a DATE or a TIMESTAMP, not {types[event]}"
    if op in types and types[op] not in _INTEGERS:
        return f"column {op!r} must be an integer, not {types[op]}"
    return next(filter(None, (column_problem(n, t) for n, t in columns)), None)


def system_column(name: str, vocab: models.DatasetVocabulary) -> str | None:
    """The system column (of ``vocab``) that a column named ``name`` is to Spark, which
    compares names ignoring case; None when it is none of them."""
    system = (vocab.offset_column, vocab.operation_type_column, vocab.system_time_column)
    return next((s for s in system if s.lower() == name.lower()), None)


def preprocess_case_clash(name: str, system: str) -> str:
    """What the plan and the ingest run say of a preprocess output column ``name`` that
    is the system column ``system`` in another case."""
    return (
        f"the preprocess query gives a column `{name}`, which differs only in case from the"
        f" system column `{system}` and which Spark (spark.sql.caseSensitive=false) cannot"
        " hold apart from it; rename it in the query"
    )


def same_names(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of ``names`` that are one name to Spark (equal ignoring case)."""
    seen: dict[str, str] = {}
    for name in names:
        first = seen.get(name.lower())
        if first is not None:
            return first, name
        seen[name.lower()] = name
    return None


def clash_text(first: str, second: str) -> str:
    """What ``same_names`` found, as the end of a sentence about an output: ``has the
    column 'a' twice, ...`` or ``has columns 'a' and 'A', which differ only in case, ...``."""
    if first == second:
        return f"has the column {first!r} twice, and a slice's column names must be unique"
    return (
        f"has columns {first!r} and {second!r}, which differ only in case and which Spark"
        " (spark.sql.caseSensitive=false) cannot hold apart"
    )


def column_problem(name: str, type_: str) -> str | None:
    """Why a column of Spark type ``type_`` cannot be in a slice (a transform's output or
    a root's preprocess output alike), or None when it can.

    Each rule looks through the whole type, nested fields and items included, and the
    first that matches is the reason given, so that a MAP inside an ARRAY of STRUCTs is
    named a MAP."""
    tree = _parse(type_)
    for rule in _RULES:
        if any(rule.matches(node, under_array) for node, under_array in _walk(tree)):
            return f"column {name!r} {rule.what} ({type_}), which a slice cannot hold: {rule.why}"
    return None


@dataclass(frozen=True)
class _Type:
    """A parsed type: ``struct``, ``array`` or ``map`` and their member types, or an
    atomic type's spelling (``bigint``, ``decimal(12,2)``, ``interval day``)."""

    head: str
    members: tuple[_Type, ...] = ()


@dataclass(frozen=True)
class _Rule:
    what: str
    why: str
    matches: Callable[[_Type, bool], bool]  # (a node, whether an ARRAY holds it)


_RULES = (
    _Rule(
        "is or holds a VARIANT",
        "its Arrow form carries field metadata that the chain's schema cannot encode; give"
        " it as a STRING (to_json) or as typed columns",
        lambda t, _: t.head == "variant",
    ),
    _Rule(
        "is or holds a NULL of no type",
        "Arrow's null type is not hashed by arrow-digest, and a column of no type cannot be"
        " read back as data; cast it to the type it stands for, as in CAST(NULL AS STRING)"
        " or CAST(array() AS ARRAY<STRING>)",
        lambda t, _: t.head == "void",
    ),
    _Rule(
        "is or holds an INTERVAL",
        "an ODF slice has no interval type (Spark gives Arrow a day-time interval as a"
        " duration, which neither the chain's schema nor arrow-digest takes, and the other"
        " intervals not at all); give it as a number of one unit (seconds, days, months)"
        " or as a STRING",
        lambda t, _: t.head == "interval" or t.head.startswith("interval "),
    ),
    _Rule(
        "is or holds a MAP",
        "the chain's schema cannot encode an Arrow map and arrow-digest cannot hash one;"
        " give it as a STRING (to_json) or as typed columns",
        lambda t, _: t.head == "map",
    ),
    _Rule(
        "holds a STRUCT inside an ARRAY",
        "arrow-digest hashes a STRUCT only as a column of the record, not as an item of a"
        " list; give it as a STRING (to_json) or as one array per field",
        lambda t, under_array: t.head == "struct" and under_array,
    ),
)


def _walk(node: _Type, under_array: bool = False) -> Iterator[tuple[_Type, bool]]:
    """Every node of a parsed type, each with whether an ARRAY (at any depth) holds it."""
    yield node, under_array
    inner = under_array or node.head == "array"
    for member in node.members:
        yield from _walk(member, inner)


def _parse(text: str) -> _Type:
    """The type ``text`` as a tree; the whole text as one atomic type if it is not in the
    spelling this module reads (no Spark type is)."""
    parser = _Parser(text)
    try:
        parsed = parser.type()
    except ValueError:
        return _Type(text.strip().lower())
    return parsed if parser.at_end() else _Type(text.strip().lower())


class _Parser:
    """Reads ``struct<name:type,...>``, ``array<type>``, ``map<type,type>`` and atomic
    types; a struct field's name is plain or in backquotes (a doubled one inside)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos == len(self.text)

    def type(self) -> _Type:
        for head in ("struct", "array", "map"):
            if self.text.startswith(f"{head}<", self.pos):
                self.pos += len(head) + 1
                members = self._struct() if head == "struct" else self._members(head)
                self._expect(">")
                return _Type(head, members)
        return _Type(self._atom())

    def _members(self, head: str) -> tuple[_Type, ...]:
        first = self.type()
        if head == "array":
            return (first,)
        self._expect(",")
        return first, self.type()

    def _struct(self) -> tuple[_Type, ...]:
        fields: list[_Type] = []
        while not self.text.startswith(">", self.pos):
            if fields:
                self._expect(",")
            self._name()
            self._expect(":")
            fields.append(self.type())
        return tuple(fields)

    def _name(self) -> None:
        if not self.text.startswith("`", self.pos):
            end = self.text.find(":", self.pos)
            if end < 0:
                raise ValueError("a struct field without a type")
            self.pos = end
            return
        self.pos += 1
        while True:
            end = self.text.find("`", self.pos)
            if end < 0:
                raise ValueError("an unclosed backquote")
            self.pos = end + 1
            if not self.text.startswith("`", self.pos):
                return
            self.pos += 1  # a doubled backquote stands for one

    def _atom(self) -> str:
        depth = 0
        start = self.pos
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in ",>" and depth == 0:
                break
            depth += {"(": 1, ")": -1}.get(char, 0)
            self.pos += 1
        atom = self.text[start : self.pos].strip().lower()
        if not atom:
            raise ValueError("an empty type")
        return atom

    def _expect(self, char: str) -> None:
        if not self.text.startswith(char, self.pos):
            raise ValueError(f"expected {char!r} at {self.pos}")
        self.pos += 1
