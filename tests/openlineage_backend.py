"""The receiving end of OpenLineage tests: a real HTTP server on 127.0.0.1 that records
every event, the JSON schemas each event must satisfy, and an environment free of the
machine's own OpenLineage settings.

The schemas in ``tests/data/openlineage/`` carry the constraints of the official
OpenLineage schemas (the client ships none and there is no network to fetch them; their
README says where each comes from). Each keeps the official ``$id`` of the version the
client emits, so every facet's ``_schemaURL`` resolves to one of them, and a facet without
a schema here fails the test.

Formats are checked, not just annotated: ``uuid`` by jsonschema itself, ``date-time`` and
``uri`` by the checks below, because jsonschema's own need packages that are not installed
(``rfc3339-validator``, ``rfc3987``) and would otherwise be skipped silently.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

SCHEMAS = Path(__file__).parent / "data" / "openlineage"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
FACETS = "https://openlineage.io/spec/facets"


@dataclass
class Backend:
    port: int
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200  # what it answers every event with

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> list[dict[str, Any]]:
        return [event for _, event in self.received]


@contextmanager
def serve() -> Iterator[Backend]:
    """A backend listening on a free port of 127.0.0.1 until the block ends."""
    received: list[tuple[str, dict[str, Any]]] = []
    backend: Backend | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, json.loads(body)))
            self.send_response(backend.status if backend else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    backend = Backend(server.server_address[1], received)
    try:
        yield backend
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No OpenLineage settings from the machine: not from its environment, home or cwd.
    Returns the empty home folder now in ``HOME``."""
    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def _registry() -> Registry[Any]:
    resources = []
    for path in sorted(SCHEMAS.rglob("*.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


REGISTRY = _registry()
FORMATS = FormatChecker()


# RFC 3339, section 5.6: full-date "T" full-time, with a Z or numeric offset.
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"not an RFC 3339 date-time: {value}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    dt.datetime(year, month, day, hour, minute, min(second, 59))  # 60: a leap second
    offset_hour, offset_minute = match.group(8), match.group(9)
    if offset_hour is not None and (int(offset_hour) > 23 or int(offset_minute) > 59):
        raise ValueError(f"not an RFC 3339 offset: {value}")
    return True


# RFC 3986, section 3: URI = scheme ":" hier-part [ "?" query ] [ "#" fragment ].
def _chars(extra: str) -> str:
    return rf"(?:[A-Za-z0-9\-._~!$&'()*+,;={extra}]|%[0-9A-Fa-f]{{2}})*"


_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.DOTALL)
_AUTHORITY = re.compile(rf"(?:{_chars(':')}@)?(\[[^\]]*\]|{_chars('')})(?::[0-9]*)?")
_IP_FUTURE = re.compile(r"v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")
_PATH = re.compile(_chars(":@/"))
_QUERY = re.compile(_chars(":@/?"))


@FORMATS.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    match = _URI.fullmatch(value)
    if match is None:
        raise ValueError(f"not an absolute URI: {value}")
    hier, query, fragment = match.group(2), match.group(3), match.group(4)
    path = hier
    if hier.startswith("//"):
        authority, slash, rest = hier[2:].partition("/")
        path = slash + rest
        host = _AUTHORITY.fullmatch(authority)
        if host is None:
            raise ValueError(f"not a URI authority: {authority!r} in {value}")
        literal = host.group(1)
        if literal.startswith("[") and not _IP_FUTURE.fullmatch(literal[1:-1]):
            ipaddress.IPv6Address(literal[1:-1])  # raises ValueError
    parts = [(path, _PATH), (query, _QUERY), (fragment, _QUERY)]
    if any(part is not None and not pattern.fullmatch(part) for part, pattern in parts):
        raise ValueError(f"not an RFC 3986 URI: {value}")
    return True


def validate(event: dict[str, Any]) -> None:
    """The event against OpenLineage.json, then each facet against its ``_schemaURL``.

    The event is checked twice: against ``RunEvent`` first, whose errors name the failing
    field, then against the whole document, as the official schema is used (``oneOf``
    RunEvent, DatasetEvent, JobEvent, which reports only "not valid under any")."""
    for schema in ({"$ref": f"{CORE}#/$defs/RunEvent"}, {"$ref": CORE}):
        Draft202012Validator(schema, registry=REGISTRY, format_checker=FORMATS).validate(event)
    for facet in facets_of(event):
        schema = {"$ref": facet["_schemaURL"]}
        Draft202012Validator(schema, registry=REGISTRY, format_checker=FORMATS).validate(facet)


def facets_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    found = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        found += dataset.get("facets", {}).values()
        found += dataset.get("inputFacets", {}).values()
        found += dataset.get("outputFacets", {}).values()
    return found
