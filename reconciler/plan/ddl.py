"""Read schemas written as Spark DDL column strings, parsed without Spark.

Manifests declare read schemas as DDL strings (``event_time TIMESTAMP``,
```` `Quoted name` DATE NOT NULL ````, ``amount DECIMAL(12,2)``). The plan compares them
to classify schema changes, and must do so on a machine without Java, so the column
name, type and nullability are parsed here; the engine remains the judge of whether a
type is valid when it reads data.
"""

from __future__ import annotations

import re

from .model import Column

_TYPE_ALIASES = {
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
_NOT_NULL = re.compile(r"\s+NOT\s+NULL\s*$", re.IGNORECASE)
_COMMENT = re.compile(r"\s+COMMENT\s+(['\"]).*\1\s*$", re.IGNORECASE | re.DOTALL)
_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")


class DdlError(ValueError):
    """A column string that cannot be split into a name and a type."""


def parse_column(text: str) -> Column:
    """One DDL column: ``name TYPE [NOT NULL] [COMMENT '…']``, names quoted or bare."""
    rest = _COMMENT.sub("", text.strip())
    nullable = _NOT_NULL.search(rest) is None
    rest = _NOT_NULL.sub("", rest)
    name, type_text = _split_name(rest, text)
    if not type_text:
        raise DdlError(f"column {text!r} has no type")
    return Column(name=name, type=normalize_type(type_text), nullable=nullable)


def parse_columns(texts: list[str]) -> tuple[Column, ...]:
    """A whole DDL schema list; a single string holding several comma-separated columns
    (``"a INT, b STRING"``) is split too, as Spark accepts that form."""
    columns: list[Column] = []
    for text in texts:
        columns += [parse_column(part) for part in _split_top_level(text)]
    return tuple(columns)


def _split_name(rest: str, original: str) -> tuple[str, str]:
    if rest[:1] in ("`", '"'):
        quote = rest[0]
        end = rest.find(quote, 1)
        if end < 0:
            raise DdlError(f"unterminated quoted name in {original!r}")
        return rest[1:end], rest[end + 1 :].strip().removeprefix(":").strip()
    parts = rest.split(None, 1)
    if len(parts) != 2:
        raise DdlError(f"expected 'name TYPE', got {original!r}")
    return parts[0].removesuffix(":"), parts[1].strip()


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside <>, () or quotes."""
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
    return [p for p in (p.strip() for p in parts) if p]


def normalize_type(text: str) -> str:
    """Lower-case Spark spelling with aliases resolved (``LONG`` → ``bigint``), so that
    equal types compare equal however the manifest wrote them."""
    compact = re.sub(r"\s+", " ", text.strip().lower())
    compact = re.sub(r"\s*([<>(),:])\s*", r"\1", compact)
    base = re.match(r"[a-z_]+", compact)
    if base is None:
        raise DdlError(f"cannot read type {text!r}")
    word = base.group(0)
    if _VARCHAR.match(compact):
        return "string"
    if word in _TYPE_ALIASES:
        compact = _TYPE_ALIASES[word] + compact[len(word) :]
    if compact == "decimal":
        return "decimal(10,0)"  # Spark's default precision and scale
    return compact
