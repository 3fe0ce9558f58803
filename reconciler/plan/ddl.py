"""Read schemas written as Spark DDL column strings, parsed and type-checked without Spark.

Manifests declare read schemas as DDL strings (``event_time TIMESTAMP``,
```` `Quoted name` DATE NOT NULL ````, ``amount DECIMAL(12,2)``). The plan compares them
to classify schema changes and refuses the ones ingest could not read, and must do both
on a machine without Java. So this module is the one judge of a read schema's shape: a
type it accepts is one the ingest readers map to a Spark type (``readers.spark_schema``
parses with it), and a type it refuses is refused by the plan and by ingest with the same
message, before any data is read.

Accepted types are kamu's (BOOLEAN, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), DATE,
TIMESTAMP, STRING, VARCHAR, TEXT, ARRAY<…>) plus Spark's TINYINT, SMALLINT and
TIMESTAMP_LTZ, with Spark's aliases. Spark types the readers cannot hold (MAP, STRUCT,
BINARY, TIMESTAMP_NTZ, INTERVAL…) are parsed, so that their brackets are checked, and
then refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..odf.names import shown
from .model import Column

_ALIASES = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "real": "float",
    "bool": "boolean",
    "dec": "decimal",
    "numeric": "decimal",
    "text": "string",
}
_SCALARS = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "float",
        "double",
        "date",
        "timestamp",
        "timestamp_ltz",
        "string",
    }
)
"""Types without parameters that the readers accept, in normalized spelling."""
_SIZED = frozenset({"varchar", "char", "character"})
"""Spark's length-limited strings, read as plain strings."""
MAX_DECIMAL_PRECISION = 38
"""Spark's (and Arrow's Decimal128) largest precision."""
DEFAULT_DECIMAL = (10, 0)
"""Spark's precision and scale for a bare DECIMAL."""
MAX_NESTING = 32
"""How deep ARRAY, MAP and STRUCT may nest: deeper is no schema anyone means, and the
parser recurses once per level."""
_MAX_DIGITS = 9

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<word>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>\d+)
      | (?P<punct>[<>(),:])
      | (?P<quoted>`(?:[^`]|``)*`)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<other>\S)
    )""",
    re.VERBOSE | re.DOTALL,
)


class DdlError(ValueError):
    """A column string that is not ``name TYPE [NOT NULL] [COMMENT '…']`` with a type the
    readers accept; the message says what is wrong, in the manifest's terms."""


def parse_column(text: str) -> Column:
    """One DDL column: ``name TYPE [NOT NULL] [COMMENT '…']``, names quoted or bare."""
    name, rest = _split_name(text.strip(), text)
    if not rest:
        raise DdlError(f"column {shown(text)} has no type")
    tokens = _Tokens(rest)
    type_text = _parse_type(tokens)
    nullable = _parse_options(tokens)
    return Column(name=name, type=type_text, nullable=nullable)


def parse_columns(texts: list[str]) -> tuple[Column, ...]:
    """A whole DDL schema list; a single string holding several comma-separated columns
    (``"a INT, b STRING"``) is split too, as Spark accepts that form."""
    columns: list[Column] = []
    for text in texts:
        columns += [parse_column(part) for part in split_columns(text)]
    return tuple(columns)


def split_columns(text: str) -> list[str]:
    """The columns of one schema string, split on commas outside brackets and quotes.

    An empty string or an empty place between commas (``a INT,,b INT``, ``a INT,``) is an
    error, as it is for Spark's DDL parser."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "`\"'":
            quote = ch
        elif ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    stripped = [p.strip() for p in parts]
    if len(stripped) == 1 and not stripped[0]:
        raise DdlError("the column string is empty")
    if not all(stripped):
        raise DdlError(f"an empty column between commas in {shown(text)}")
    return stripped


def normalize_type(text: str) -> str:
    """Lower-case Spark spelling with aliases resolved (``LONG`` → ``bigint``), so that
    equal types compare equal however the manifest wrote them; a type the readers do not
    accept is a DdlError."""
    tokens = _Tokens(text)
    normalized = _parse_type(tokens)
    tokens.expect_end(f"after type {normalized!r}")
    return normalized


def _split_name(rest: str, original: str) -> tuple[str, str]:
    """The column name (unquoted) and the text after it; quotes are doubled to escape."""
    if rest[:1] in ("`", '"'):
        quote, i, name = rest[0], 1, []
        while True:
            end = rest.find(quote, i)
            if end < 0:
                raise DdlError(f"unterminated quoted name in {shown(original)}")
            name.append(rest[i:end])
            if rest[end + 1 : end + 2] != quote:
                break
            name.append(quote)
            i = end + 2
        if not "".join(name):
            raise DdlError(f"empty column name in {shown(original)}")
        return "".join(name), rest[end + 1 :].strip().removeprefix(":").strip()
    parts = rest.split(None, 1)
    if len(parts) != 2:
        raise DdlError(f"expected 'name TYPE', got {shown(original)}")
    return parts[0].removesuffix(":"), parts[1].strip()


@dataclass
class _Token:
    kind: str  # word | number | punct | quoted | string | other
    text: str


class _Tokens:
    """The tokens of a type and its column options, read front to back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.items = [
            _Token(str(m.lastgroup), m.group(m.lastgroup or 0))
            for m in _TOKEN.finditer(text)
            if m.lastgroup
        ]
        self.at = 0

    def peek(self) -> _Token | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def next(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise DdlError(f"missing {what} at the end of {shown(self.text)}")
        self.at += 1
        return token

    def followed_by(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token.text.lower() == text:
            self.at += 1
            return True
        return False

    def expect(self, text: str, where: str) -> None:
        token = self.peek()
        if token is None:
            raise DdlError(f"missing {shown(text)} {where} in {shown(self.text)}")
        self.at += 1
        if token.text.lower() != text:
            raise DdlError(
                f"expected {shown(text)} {where}, found {shown(token.text)} in {shown(self.text)}"
            )

    def number(self, what: str) -> int:
        token = self.next(what)
        if token.kind != "number":
            raise DdlError(
                f"{what} must be a number, found {shown(token.text)} in {shown(self.text)}"
            )
        if len(token.text) > _MAX_DIGITS:
            raise DdlError(f"{what} {token.text[:_MAX_DIGITS]}… is too large in {shown(self.text)}")
        return int(token.text)

    def expect_end(self, where: str) -> None:
        token = self.peek()
        if token is not None:
            raise DdlError(f"unexpected {shown(token.text)} {where} in {shown(self.text)}")


def _parse_type(tokens: _Tokens, depth: int = 0) -> str:
    """One type in normalized spelling; nested types are parsed before being judged, so a
    bracket error is reported as such."""
    if depth > MAX_NESTING:
        raise DdlError(f"types are nested more than {MAX_NESTING} deep in {shown(tokens.text)}")
    token = tokens.next("a type")
    if token.kind != "word":
        raise DdlError(f"expected a type, found {shown(token.text)} in {shown(tokens.text)}")
    word = token.text.lower()
    if word == "array":
        tokens.expect("<", "after ARRAY")
        element = _parse_type(tokens, depth + 1)
        tokens.expect(">", "to close ARRAY<")
        return f"array<{element}>"
    if word == "map":
        tokens.expect("<", "after MAP")
        key = _parse_type(tokens, depth + 1)
        tokens.expect(",", "between the key and value types of MAP")
        value = _parse_type(tokens, depth + 1)
        tokens.expect(">", "to close MAP<")
        raise DdlError(f"type 'map<{key},{value}>' is not supported in a read schema")
    if word == "struct":
        fields = _parse_struct_fields(tokens, depth + 1)
        raise DdlError(f"type 'struct<{fields}>' is not supported in a read schema")
    if word in ("decimal", "dec", "numeric"):
        return _parse_decimal(tokens)
    if word in _SIZED:
        if tokens.accept("("):
            tokens.number(f"the length of {word.upper()}")
            tokens.expect(")", f"to close {word.upper()}(")
        return "string"
    word = _ALIASES.get(word, word)
    if word not in _SCALARS:
        raise DdlError(f"type {shown(word)} is not supported in a read schema")
    if tokens.followed_by("("):
        raise DdlError(f"type {word.upper()} takes no parameters, in {shown(tokens.text)}")
    return word


def _parse_decimal(tokens: _Tokens) -> str:
    precision, scale = DEFAULT_DECIMAL
    if tokens.accept("("):
        precision, scale = tokens.number("the precision of DECIMAL"), 0
        if tokens.accept(","):
            scale = tokens.number("the scale of DECIMAL")
        tokens.expect(")", "to close DECIMAL(")
    if not 0 < precision <= MAX_DECIMAL_PRECISION or scale > precision:
        raise DdlError(
            f"DECIMAL({precision},{scale}) is out of range: the precision must be 1 to "
            f"{MAX_DECIMAL_PRECISION} and the scale 0 to the precision"
        )
    return f"decimal({precision},{scale})"


def _parse_struct_fields(tokens: _Tokens, depth: int) -> str:
    """``<name[:] TYPE [NOT NULL] [COMMENT '…'], …>`` in normalized spelling."""
    tokens.expect("<", "after STRUCT")
    fields: list[str] = []
    while not tokens.accept(">"):
        if fields:
            tokens.expect(",", "between STRUCT fields")
        name = tokens.next("a STRUCT field name")
        if name.kind not in ("word", "quoted"):
            raise DdlError(
                f"expected a STRUCT field name, found {shown(name.text)} in {shown(tokens.text)}"
            )
        tokens.accept(":")
        fields.append(f"{name.text}:{_parse_type(tokens, depth)}")
        if tokens.accept("not"):
            tokens.expect("null", "after NOT")
        if tokens.accept("comment"):
            _comment(tokens)
    return ",".join(fields)


def _parse_options(tokens: _Tokens) -> bool:
    """``NOT NULL`` and ``COMMENT '…'`` after the type, in either order; whether the
    column is nullable."""
    nullable = True
    while tokens.peek() is not None:
        if tokens.accept("not"):
            tokens.expect("null", "after NOT")
            nullable = False
        elif tokens.accept("comment"):
            _comment(tokens)
        else:
            tokens.expect_end("after the type")
    return nullable


def _comment(tokens: _Tokens) -> None:
    token = tokens.next("a quoted comment")
    if token.kind != "string":
        raise DdlError(
            f"COMMENT must be a quoted string, found {shown(token.text)} in {shown(tokens.text)}"
        )
