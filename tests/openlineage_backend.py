"""The receiving end of OpenLineage tests: a real HTTP server on 127.0.0.1 that records
every event, the JSON schemas each event must satisfy, and an environment free of the
machine's own OpenLineage settings.

The schemas in ``tests/data/openlineage/`` are subsets written for these tests (the
client ships none and there is no network to fetch the official files): they keep the
official ``$id`` of each version the client emits, so every facet's ``_schemaURL``
resolves to one of them, and a facet without a schema here fails the test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if isinstance(value, str):
        parsed = dt.datetime.fromisoformat(value)
        if "T" not in value or parsed.tzinfo is None:
            raise ValueError(f"not an RFC 3339 date-time with offset: {value}")
    return True


@FORMATS.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    if isinstance(value, str) and not urlsplit(value).scheme:
        raise ValueError(f"not an absolute URI: {value}")
    return True


def validate(event: dict[str, Any]) -> None:
    """The event against OpenLineage.json, then each facet against its ``_schemaURL``."""
    Draft202012Validator({"$ref": CORE}, registry=REGISTRY, format_checker=FORMATS).validate(event)
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
