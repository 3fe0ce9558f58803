"""Load the ODF JSON Schemas kept in the repository's ``schemas/`` folder.

The schemas are hand-written from the ODF metadata reference (draft 2020-12)
and refer to each other with relative ``$ref``s resolved against their
``$id`` (``https://reconciler.local/schemas/<relative path>``). Nothing here
touches the network: every schema is read from disk and served from an
in-memory :class:`referencing.Registry`, so validation works offline and in CI.
"""

from __future__ import annotations

import datetime
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMA_DIR: Path = Path(__file__).resolve().parents[1] / "schemas"
"""The repository's ``schemas/`` folder (this file is ``reconciler/odf/...``)."""

SCHEMA_BASE_URI = "https://reconciler.local/schemas/"
"""Prefix of every schema ``$id``; the rest of the ``$id`` is the file's path."""

# RFC 3339 ``date-time``. jsonschema only checks this format when the optional
# ``rfc3339-validator`` package is installed; we keep a stdlib fallback so that
# timestamps are really checked whatever extras happen to be installed.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
    r"([Zz]|[+-](\d{2}):(\d{2}))$"
)
# RFC 3986 absolute URI, loosely: a scheme, a colon, and no whitespace. Same
# reason as above (the strict check needs the optional ``rfc3987`` package).
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")


def _is_rfc3339_date_time(instance: object) -> bool:
    """Tell whether ``instance`` is an RFC 3339 date-time (non-strings pass)."""
    if not isinstance(instance, str):
        return True
    match = _RFC3339.match(instance)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:  # 60 allows a leap second
        return False
    offset_hour, offset_minute = match.group(9), match.group(10)
    return offset_hour is None or (int(offset_hour) <= 23 and int(offset_minute) <= 59)


def _is_uri(instance: object) -> bool:
    """Tell whether ``instance`` looks like an absolute URI (non-strings pass)."""
    return not isinstance(instance, str) or _URI.match(instance) is not None


def _format_checker() -> FormatChecker:
    """Build the 2020-12 format checker, with stdlib fallbacks for missing formats.

    A fresh checker is built so that the library-wide default is never mutated.
    """
    checker = FormatChecker(Draft202012Validator.FORMAT_CHECKER.checkers.keys())
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(_is_rfc3339_date_time)
    if "uri" not in checker.checkers:
        checker.checks("uri")(_is_uri)
    return checker


def schema_files() -> list[Path]:
    """List every JSON Schema file under :data:`SCHEMA_DIR`, sorted.

    Only ``*.json`` files count: the folder may hold other artefacts (such as
    the FlatBuffers schema) that are not JSON Schemas.
    """
    return sorted(SCHEMA_DIR.rglob("*.json"))


@cache
def registry() -> Registry[Any]:
    """Return a registry of every schema file, keyed by its ``$id``.

    Cached because the files do not change while the process runs and
    reading some forty files for every validation would be wasteful.
    Raises ``ValueError`` if a file's ``$id`` does not match its path, since
    relative ``$ref``s would then resolve to the wrong document.
    """
    resources: list[tuple[str, Resource[Any]]] = []
    for path in schema_files():
        contents = json.loads(path.read_text(encoding="utf-8"))
        expected = SCHEMA_BASE_URI + path.relative_to(SCHEMA_DIR).as_posix()
        if contents.get("$id") != expected:
            raise ValueError(f"{path}: $id is {contents.get('$id')!r}, expected {expected!r}")
        resources.append((expected, DRAFT202012.create_resource(contents)))
    return Registry().with_resources(resources).crawl()


def schema_uri(name: str) -> str:
    """Map a schema name to its ``$id``.

    ``name`` is a path relative to :data:`SCHEMA_DIR`, with or without the
    ``.json`` suffix (``"MetadataBlock"``, ``"fragments/FetchStep"``), or a
    bare file stem (``"FetchStep"``) when that stem is unique.
    Raises ``KeyError`` for an unknown or ambiguous name.
    """
    relative = name if name.endswith(".json") else f"{name}.json"
    uris = [str(uri) for uri in registry()]
    direct = SCHEMA_BASE_URI + relative
    if direct in uris:
        return direct
    by_stem = [uri for uri in uris if uri.rsplit("/", 1)[-1] == relative]
    if len(by_stem) == 1:
        return by_stem[0]
    raise KeyError(f"no single schema named {name!r} (candidates: {by_stem or 'none'})")


def validator(name: str) -> Draft202012Validator:
    """Return a validator for the named schema, with format checking enabled.

    For example ``validator("DatasetSnapshot")`` checks a whole YAML manifest
    document and ``validator("MetadataBlock")`` a block in its JSON form.
    Format checking is on so that timestamps and URIs are actually checked,
    not merely annotated.
    """
    reg = registry()
    schema = reg.contents(schema_uri(name))
    return Draft202012Validator(schema, registry=reg, format_checker=_format_checker())
