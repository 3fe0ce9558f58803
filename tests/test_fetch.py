"""Fetch stage: a real HTTP server, real files and real mtimes; exact states and messages."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import tomllib
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from drip_server import dripping_server

from reconciler.config import ConfigError, RepoConfig
from reconciler.env_templates import TemplateError, resolve_env
from reconciler.ingest import fetch as fetch_module
from reconciler.ingest.fetch import (
    ContainerRuntimeError,
    DownloadLimits,
    EventTimeError,
    Fetched,
    FetchError,
    SourceNotFoundError,
    SourceUnreachableError,
    UpToDate,
    fetch,
)
from reconciler.masking import Mask, referenced_secrets
from reconciler.odf import Timestamp, models

SYSTEM_TIME = Timestamp.parse("2024-05-06T07:08:09.123Z")
CSV = b"city,population\nA,1000\nB,2000\n"


def etag(value: str) -> models.SourceState:
    return models.SourceState(source_name="default", kind="odf/etag", value=value)


def last_modified(value: str) -> models.SourceState:
    return models.SourceState(source_name="default", kind="odf/last-modified", value=value)


def url_step(url: str, **kwargs: object) -> models.FetchStepUrl:
    return models.FetchStepUrl.model_validate({"url": url, **kwargs})


# --- A real HTTP server ----------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


Route = Callable[[str, Message], Reply]  # (request path with query, request headers)


class Server:
    """A ThreadingHTTPServer on 127.0.0.1 whose routes the test sets; records requests."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, Message]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers))
                route = server.routes.get(self.path.split("?")[0])
                reply = route(self.path, self.headers) if route else Reply(404, b"no route")
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (the timeout test)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def start_server() -> Iterator[Callable[[], Server]]:
    servers: list[Server] = []

    def start() -> Server:
        servers.append(Server())
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def server(start_server: Callable[[], Server]) -> Server:
    s = start_server()
    lm = "Wed, 21 Oct 2015 07:28:00 GMT"

    def etag_route(path: str, headers: Message) -> Reply:
        if headers.get("If-None-Match") == '"v1"':
            return Reply(304)
        return Reply(200, CSV, (("ETag", '"v1"'), ("Last-Modified", lm)))

    def last_modified_route(path: str, headers: Message) -> Reply:
        if headers.get("If-Modified-Since") == lm:
            return Reply(304)
        return Reply(200, CSV, (("Last-Modified", lm),))

    def secure_route(path: str, headers: Message) -> Reply:
        got = headers.get("Authorization")
        if got == "Bearer s3cr3t-t0ken":
            return Reply(200, b"secret data")
        return Reply(401, f"rejected {got}".encode())

    s.routes.update(
        {
            "/etag.csv": etag_route,
            "/last-modified.csv": last_modified_route,
            "/plain.csv": lambda path, headers: Reply(200, CSV),
            "/broken": lambda path, headers: Reply(500, f"database down for {path}".encode()),
            "/secure": secure_route,
            "/echo-auth": lambda path, headers: Reply(
                200, (headers.get("Authorization") or "(none)").encode()
            ),
            "/basic": lambda path, headers: Reply(
                200, (headers.get("Authorization") or "").encode()
            ),
        }
    )
    return s


def fetch_url(
    step: models.FetchStep,
    tmp: Path,
    prev: models.SourceState | None = None,
    env: dict[str, str] | None = None,
    limits: DownloadLimits | None = None,
) -> Fetched | UpToDate:
    return fetch(
        step,
        prev_state=prev,
        system_time=SYSTEM_TIME,
        workdir=tmp / "work",
        base_dir=tmp,
        env=env or {},
        limits=limits or DownloadLimits(),
    )


def work_files(tmp: Path) -> list[str]:
    work = tmp / "work"
    return sorted(p.name for p in work.iterdir()) if work.exists() else []


# --- HTTP ----------------------------------------------------------------------------------


def test_http_etag_becomes_the_state_and_the_body_is_streamed_to_workdir(
    server: Server, tmp_path: Path
) -> None:
    result = fetch_url(url_step(server.url("/etag.csv")), tmp_path)

    assert isinstance(result, Fetched)
    assert result.source_state == etag('"v1"')
    assert result.path.parent == tmp_path / "work"
    assert result.path.read_bytes() == CSV
    assert result.has_more is False
    assert result.origin == server.url("/etag.csv")


def test_http_etag_response_has_no_event_time_even_with_last_modified(
    server: Server, tmp_path: Path
) -> None:
    # kamu's ETag branch never reads Last-Modified (ENGINE-SEMANTICS §1.4).
    result = fetch_url(url_step(server.url("/etag.csv")), tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time is None


def test_http_previous_etag_is_sent_as_if_none_match_and_304_is_up_to_date(
    server: Server, tmp_path: Path
) -> None:
    result = fetch_url(url_step(server.url("/etag.csv")), tmp_path, prev=etag('"v1"'))

    assert result == UpToDate()
    assert server.requests[-1][1]["If-None-Match"] == '"v1"'
    assert server.requests[-1][1]["If-Modified-Since"] is None
    assert work_files(tmp_path) == []


def test_http_changed_etag_fetches_again(server: Server, tmp_path: Path) -> None:
    result = fetch_url(url_step(server.url("/etag.csv")), tmp_path, prev=etag('"v0"'))
    assert isinstance(result, Fetched)
    assert result.source_state == etag('"v1"')


def test_http_last_modified_without_etag_is_the_state_and_the_event_time(
    server: Server, tmp_path: Path
) -> None:
    result = fetch_url(url_step(server.url("/last-modified.csv")), tmp_path)

    assert isinstance(result, Fetched)
    assert result.source_state == last_modified("2015-10-21T07:28:00Z")
    assert result.source_event_time == Timestamp.parse("2015-10-21T07:28:00Z")
    assert result.path.read_bytes() == CSV


def test_http_from_metadata_is_the_same_as_unset(server: Server, tmp_path: Path) -> None:
    step = url_step(server.url("/last-modified.csv"), eventTime={"kind": "FromMetadata"})
    result = fetch_url(step, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == Timestamp.parse("2015-10-21T07:28:00Z")


def test_http_previous_last_modified_is_sent_as_rfc2822_gmt_and_304_is_up_to_date(
    server: Server, tmp_path: Path
) -> None:
    step = url_step(server.url("/last-modified.csv"))
    result = fetch_url(step, tmp_path, prev=last_modified("2015-10-21T07:28:00Z"))

    assert result == UpToDate()
    assert server.requests[-1][1]["If-Modified-Since"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert server.requests[-1][1]["If-None-Match"] is None


def test_http_from_system_time_uses_the_system_time(server: Server, tmp_path: Path) -> None:
    step = url_step(server.url("/last-modified.csv"), eventTime={"kind": "FromSystemTime"})
    result = fetch_url(step, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == SYSTEM_TIME
    assert result.source_state == last_modified("2015-10-21T07:28:00Z")


def test_http_response_without_etag_or_last_modified_has_no_state(
    server: Server, tmp_path: Path
) -> None:
    result = fetch_url(url_step(server.url("/plain.csv")), tmp_path)
    assert isinstance(result, Fetched)
    assert (result.source_state, result.source_event_time) == (None, None)
    assert result.path.read_bytes() == CSV


def test_http_unknown_previous_state_kind_sends_no_condition(
    server: Server, tmp_path: Path
) -> None:
    prev = models.SourceState(source_name="default", kind="acme/cursor", value="42")
    result = fetch_url(url_step(server.url("/etag.csv")), tmp_path, prev=prev)
    assert isinstance(result, Fetched)
    assert server.requests[-1][1]["If-None-Match"] is None


def test_http_404_is_source_not_found(server: Server, tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError) as e:
        fetch_url(url_step(server.url("/nowhere.csv")), tmp_path)
    assert str(e.value) == f"http://127.0.0.1:{server.port}/nowhere.csv: not found (HTTP 404)"
    assert work_files(tmp_path) == []


def test_http_500_is_unreachable_with_code_reason_and_body(server: Server, tmp_path: Path) -> None:
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(server.url("/broken")), tmp_path)
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/broken: HTTP 500 Internal Server Error: database down for /broken"
    )
    assert e.value.status == 500
    assert work_files(tmp_path) == []


def test_http_connection_refused_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(f"http://127.0.0.1:{port}/data.csv"), tmp_path)
    assert (
        str(e.value)
        == f"http://127.0.0.1:{port}/data.csv: cannot connect: [Errno 111] Connection refused"
    )


def test_http_timeout_is_unreachable(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow(path: str, headers: Message) -> Reply:
        time.sleep(1.0)
        return Reply(200, CSV)

    server.routes["/slow"] = slow
    monkeypatch.setattr(fetch_module, "HTTP_TIMEOUT_SECONDS", 0.2)
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(server.url("/slow")), tmp_path)
    assert str(e.value) == f"http://127.0.0.1:{server.port}/slow: timed out after 0.2 s"


@pytest.fixture
def drip() -> Iterator[str]:
    with dripping_server() as url:
        yield url


def test_a_download_past_its_time_or_size_is_cut_and_leaves_nothing(
    drip: str, server: Server, tmp_path: Path
) -> None:
    """A server sending a byte now and then held the scheduled run for ever: each read
    came within the 30 s timeout, and a read waited for a whole megabyte."""
    started = time.monotonic()
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(drip), tmp_path, limits=DownloadLimits(seconds=1))
    assert time.monotonic() - started < 5
    assert str(e.value) == (
        f"{drip}: the download took longer than 1 s, the longest one may take"
        " (max_download_seconds in [tool.reconciler])"
    )
    # Its headers a byte at a time: urllib read them for ever, before any body.
    started = time.monotonic()
    with dripping_server(headers=True) as slow, pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(slow), tmp_path, limits=DownloadLimits(seconds=1))
    assert time.monotonic() - started < 5
    assert str(e.value) == (
        f"{slow}: the download took longer than 1 s, the longest one may take"
        " (max_download_seconds in [tool.reconciler])"
    )
    server.routes["/big"] = lambda path, headers: Reply(200, b"a\n" + b"1\n" * 5000)
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(url_step(server.url("/big")), tmp_path, limits=DownloadLimits(size=1000))
    assert str(e.value) == (
        f"{server.url('/big')}: the download passed 1000 bytes, the most one may bring"
        " (max_download_size in [tool.reconciler])"
    )
    assert list((tmp_path / "work").iterdir()) == []


def test_http_from_path_is_an_event_time_error_before_any_request(
    server: Server, tmp_path: Path
) -> None:
    step = url_step(server.url("/etag.csv"), eventTime={"kind": "FromPath", "pattern": "(.*)"})
    with pytest.raises(EventTimeError) as e:
        fetch_url(step, tmp_path)
    assert str(e.value) == "Url source does not support fromPath event time source"
    assert server.requests == []


def test_http_unsupported_scheme_is_a_fetch_error(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as e:
        fetch_url(url_step("ftp://example.org/data.zip?token=abc"), tmp_path)
    assert (
        str(e.value)
        == "ftp://example.org/data.zip: unsupported URL scheme 'ftp' (http, https and file are supported)"
    )


# --- Templates and secrets -------------------------------------------------------------------


def test_header_template_is_resolved_from_env(server: Server, tmp_path: Path) -> None:
    step = url_step(
        server.url("/secure"),
        headers=[{"name": "Authorization", "value": "Bearer ${{ env.TOKEN }}"}],
    )
    result = fetch_url(step, tmp_path, env={"TOKEN": "s3cr3t-t0ken"})

    assert isinstance(result, Fetched)
    assert result.path.read_bytes() == b"secret data"
    assert server.requests[-1][1]["Authorization"] == "Bearer s3cr3t-t0ken"


def test_unset_variable_is_a_template_error_naming_it_and_nothing_is_requested(
    server: Server, tmp_path: Path
) -> None:
    step = url_step(
        server.url("/secure"),
        headers=[{"name": "Authorization", "value": "Bearer ${{ env.TOKEN }}"}],
    )
    with pytest.raises(TemplateError) as e:
        fetch_url(step, tmp_path, env={"OTHER": "x"})
    assert str(e.value) == "environment variable TOKEN not set (needed by ${{ env.TOKEN }})"
    assert e.value.names == ("TOKEN",)
    assert server.requests == []


def test_rejected_secret_never_appears_in_the_error(server: Server, tmp_path: Path) -> None:
    # The server echoes the header it got: the message must mask it.
    step = url_step(
        server.url("/secure"),
        headers=[{"name": "Authorization", "value": "Bearer ${{ env.TOKEN }}"}],
    )
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(step, tmp_path, env={"TOKEN": "wr0ng-t0ken"})
    assert (
        str(e.value)
        == f"http://127.0.0.1:{server.port}/secure: HTTP 401 Unauthorized: rejected ***"
    )
    assert "wr0ng-t0ken" not in repr(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_url_query_secret_is_kept_out_of_origin_and_messages(
    server: Server, tmp_path: Path
) -> None:
    step = url_step(server.url("/broken") + "?key=${{ env.KEY }}&page=1")
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(step, tmp_path, env={"KEY": "k3y-v4lue"})
    assert server.requests[-1][0] == "/broken?key=k3y-v4lue&page=1"
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/broken: HTTP 500 Internal Server Error: database down for /broken?key=***&page=1"
    )
    assert e.value.origin == f"http://127.0.0.1:{server.port}/broken"


def test_url_user_info_becomes_basic_auth_and_is_not_shown(server: Server, tmp_path: Path) -> None:
    step = url_step(f"http://alice:${{{{ env.PASSWORD }}}}@127.0.0.1:{server.port}/basic")
    result = fetch_url(step, tmp_path, env={"PASSWORD": "pa55word"})

    assert isinstance(result, Fetched)
    assert result.path.read_bytes() == b"Basic " + base64.b64encode(b"alice:pa55word")
    assert result.origin == f"http://127.0.0.1:{server.port}/basic"


def test_authorization_is_dropped_on_a_redirect_to_another_origin(
    start_server: Callable[[], Server], server: Server, tmp_path: Path
) -> None:
    other = start_server()
    other.routes["/echo-auth"] = server.routes["/echo-auth"]
    server.routes["/away"] = lambda path, headers: Reply(
        302, headers=(("Location", other.url("/echo-auth")),)
    )
    server.routes["/here"] = lambda path, headers: Reply(302, headers=(("Location", "/echo-auth"),))
    headers = [{"name": "Authorization", "value": "Bearer ${{ env.TOKEN }}"}]

    away = fetch_url(
        url_step(server.url("/away"), headers=headers), tmp_path, env={"TOKEN": "s3cr3t"}
    )
    here = fetch_url(
        url_step(server.url("/here"), headers=headers), tmp_path, env={"TOKEN": "s3cr3t"}
    )

    assert isinstance(away, Fetched) and isinstance(here, Fetched)
    assert away.path.read_bytes() == b"(none)"
    assert here.path.read_bytes() == b"Bearer s3cr3t"


def test_a_redirect_is_followed_to_http_and_https_only(server: Server, tmp_path: Path) -> None:
    """urllib would follow a redirect to ftp: and send a login there; kamu's client
    follows http and https only, and so does a Url source."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        ftp = f"ftp://127.0.0.1:{listener.getsockname()[1]}/x"
        server.routes["/to-ftp"] = lambda path, headers: Reply(302, headers=(("Location", ftp),))
        with pytest.raises(SourceUnreachableError) as e:
            fetch_url(url_step(server.url("/to-ftp")), tmp_path)
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/to-ftp: HTTP 302 redirect to a ftp: URL refused"
    )


def test_a_failure_after_a_redirect_names_where_it_happened(server: Server, tmp_path: Path) -> None:
    """curl -L reports the URL that failed; a 404 at a redirect's target is not the
    source URL's own, and the target is shown without its query, secrets masked."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/gone"
    server.routes["/moved"] = lambda path, headers: Reply(
        301, headers=(("Location", "/new?key=s3cr3t"),)
    )
    server.routes["/new"] = lambda path, headers: Reply(503, b"down for s3cr3t")
    server.routes["/missing"] = lambda path, headers: Reply(302, headers=(("Location", "/x"),))
    server.routes["/dead"] = lambda path, headers: Reply(302, headers=(("Location", dead),))
    here = server.url("")
    messages = []
    for path in ("/moved", "/missing", "/dead"):
        with pytest.raises((SourceUnreachableError, SourceNotFoundError)) as e:
            step = url_step(server.url(path) + "?k=${{ env.KEY }}")
            fetch_url(step, tmp_path, env={"KEY": "s3cr3t"})
        assert e.value.origin == server.url(path)
        messages.append(str(e.value))
    assert messages == [
        f"{here}/moved (redirected to {here}/new): HTTP 503 Service Unavailable: down for ***",
        f"{here}/missing (redirected to {here}/x): not found (HTTP 404)",
        f"{here}/dead (redirected to {dead}): cannot connect: [Errno 111] Connection refused",
    ]


def test_a_secret_is_masked_percent_encoded_and_escaped_too(server: Server, tmp_path: Path) -> None:
    """A server's error page quotes the request as it received it, percent-encoded."""
    server.routes["/quoted"] = lambda path, headers: Reply(
        500, f"failed for {urllib.parse.quote(path, safe='')}".encode()
    )
    step = url_step(server.url("/quoted") + "?key=${{ env.KEY }}")
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(step, tmp_path, env={"KEY": "s3cr3t/val+ue=x"})
    assert server.requests[-1][0] == "/quoted?key=s3cr3t/val+ue=x"
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/quoted: HTTP 500 Internal Server Error: "
        "failed for %2Fquoted%3Fkey%3D***"
    )


def test_a_template_value_a_url_cannot_hold_is_percent_encoded(
    server: Server, tmp_path: Path
) -> None:
    """A value with a space or a non-ASCII letter stopped the fetch in http.client's words
    (``'ascii' codec can't encode character '\\xe9' in position 15``), a piece of the
    secret shown; kamu's URL parser percent-encodes them, and so does the fetch now."""
    server.routes["/q"] = lambda path, headers: Reply(200, b"a,b\n1,x\n")
    step = url_step(server.url("/q") + "?key=${{ env.KEY }}")
    fetched = fetch_url(step, tmp_path, env={"KEY": 'pä ss"<x>'})
    assert isinstance(fetched, Fetched)
    assert server.requests[-1][0] == "/q?key=p%C3%A4%20ss%22%3Cx%3E"


@pytest.mark.parametrize(
    ("secret", "padding"),
    [("wJalrXUtnFEMI/K7MDENGbPxRfiCYEXAMPLEKEY", 280), ("tok  en   With  spaces", 10)],
    ids=["cut-by-the-snippet", "white-space-folded"],
)
def test_an_echoed_secret_is_masked_before_the_error_page_is_cut_or_folded(
    server: Server, tmp_path: Path, secret: str, padding: int
) -> None:
    """A page that echoes a header after padding chosen so the 300-character snippet
    cuts the secret, or one whose runs of spaces the snippet folds: neither leaves any
    part of it in the message."""
    server.routes["/echo"] = lambda path, headers: Reply(
        403, ("A" * padding + " key " + headers["X-Key"]).encode()
    )
    step = url_step(server.url("/echo"), headers=[{"name": "X-Key", "value": "${{ env.KEY }}"}])
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(step, tmp_path, env={"KEY": secret})
    shown = "A" * padding + " key ***"
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/echo: HTTP 403 Forbidden: "
        + shown[:300]
        + ("…" if len(shown) > 300 else "")
    )


def test_an_etag_echoing_a_secret_is_never_recorded_as_the_state(
    server: Server, tmp_path: Path
) -> None:
    server.routes["/etag"] = lambda path, headers: Reply(
        200, b"a\n1\n", (("ETag", f'"v1-{headers["X-Key"]}"'),)
    )
    step = url_step(server.url("/etag"), headers=[{"name": "X-Key", "value": "${{ env.KEY }}"}])
    with pytest.raises(SourceUnreachableError) as e:
        fetch_url(step, tmp_path, env={"KEY": "etag-s3cret"})
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/etag: the server's ETag holds a templated secret's"
        " value, which the chain would record as the source's state; nothing was fetched"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_etag_echoing_a_query_secret_as_the_server_decoded_it_is_never_recorded(
    server: Server, tmp_path: Path
) -> None:
    """A template's value goes into the URL verbatim, so a server reads its ``+`` as a
    space, and an ETag built from what it read held the secret in no spelling masked."""
    server.routes["/q"] = lambda path, headers: Reply(
        200,
        b"a\n1\n",
        (("ETag", '"' + urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)["k"][0] + '"'),),
    )
    step = url_step(server.url("/q?k=${{ env.KEY }}"))
    with pytest.raises(SourceUnreachableError, match="the server's ETag holds a templated"):
        fetch_url(step, tmp_path, env={"KEY": "Sec/ret+Val=ue"})
    assert list(tmp_path.iterdir()) == []


def test_a_fallbacks_secret_is_referenced_as_the_first_alternatives() -> None:
    """``${{ env.A || env.B }}`` sends B's value when A is unset: B was never masked."""
    manifest = "url: http://h/?k=${{ env.UNSET || env.B }}&a=${{env.A}}&n=${{ env.N || 3 }}"
    env = {"A": "a-secret", "B": "b-secret", "N": "n-value", "UNUSED": "x"}
    assert referenced_secrets([manifest], env) == {"a-secret", "b-secret", "n-value"}


def test_a_template_spelt_with_yaml_escapes_still_names_its_secret() -> None:
    manifest = 'url: "http://h/p?\\x24{{ env.GH_PAT }}"\nb: "\\u0024{{ env.OTHER }}"\n'
    env = {"GH_PAT": "ghp_SECRET", "OTHER": "other-secret", "UNUSED": "x"}
    assert referenced_secrets([manifest], env) == {"ghp_SECRET", "other-secret"}


def test_a_header_value_with_a_line_break_is_refused_unsent_and_unquoted(
    server: Server, tmp_path: Path
) -> None:
    """http.client would refuse it quoting the value (escaped, so past plain masking)."""
    step = url_step(
        server.url("/secure"),
        headers=[{"name": "Authorization", "value": "Bearer ${{ env.TOKEN }}"}],
    )
    with pytest.raises(FetchError) as e:
        fetch_url(step, tmp_path, env={"TOKEN": "NLSECRET42\n"})
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/secure: the value of header 'Authorization' holds a "
        "line break or a NUL character, which HTTP does not allow"
    )
    assert server.requests == []


@pytest.mark.parametrize("name", ["Host", "x-forwarded-host", "Forwarded", "X-Original-URL"])
def test_a_header_that_routes_the_request_elsewhere_is_refused_unsent(
    server: Server, tmp_path: Path, name: str
) -> None:
    """``Host: evil.example`` beside a templated key: a shared front end (a CDN, an
    ingress, virtual hosts) handed the key to another site than the URL's, which the
    reviewer and the env-templates prefix had judged."""
    step = url_step(
        server.url("/secure"),
        headers=[
            {"name": name, "value": "evil.example"},
            {"name": "X-Key", "value": "${{ env.TOKEN }}"},
        ],
    )
    with pytest.raises(FetchError) as e:
        fetch_url(step, tmp_path, env={"TOKEN": "k3y"})
    assert str(e.value) == (
        f"http://127.0.0.1:{server.port}/secure: header {name!r} may send the request"
        " elsewhere than its URL (another host or path), past the review of the URL and the"
        " env-templates prefixes: write the address in the URL"
    )
    assert server.requests == []


def test_mask_covers_the_spellings_messages_carry() -> None:
    mask = Mask(["s3cr3t/val+ue=x", "NL42\n", "caf\u00e9-key"])
    assert mask("a %2Fs3cr3t%2Fval%2Bue%3Dx b") == "a %2F*** b"
    assert mask("q=s3cr3t%2Fval%2Bue%3Dx&r=s3cr3t/val%2Bue%3Dx") == "q=***&r=***"
    assert mask("form s3cr3t%2Fval%2Bue%3Dx") == "form ***"
    assert (
        mask("as a query's server reads it: s3cr3t/val ue=x") == "as a query's server reads it: ***"
    )
    assert mask("b'Bearer NL42\\n' and NL42 alone") == "b'Bearer ***' and *** alone"
    assert mask("caf\\xc3\\xa9-key caf%C3%A9-key caf\\u00e9-key café-key") == "*** *** *** ***"
    assert Mask(["", "  "])("a  b") == "a  b"


def test_resolve_env_replaces_every_template_with_optional_whitespace() -> None:
    env = {"A": "1", "B_2": "two"}
    assert resolve_env("x=${{env.A}}&y=${{ env.B_2 }}&z=${{   env.A   }}", env) == "x=1&y=two&z=1"


def test_resolve_env_leaves_text_without_templates_alone() -> None:
    assert resolve_env("https://example.org/a?b=${c}", {}) == "https://example.org/a?b=${c}"


def test_resolve_env_fallbacks_follow_kamu() -> None:
    assert resolve_env("${{ env.MISSING || env.A || 'dflt' }}", {"A": "a"}) == "a"
    assert resolve_env("${{ env.MISSING || 'dflt' }}/${{ env.MISSING || 100 }}", {}) == "dflt/100"


def test_resolve_env_does_not_expand_templates_inside_values() -> None:
    assert resolve_env("${{ env.A }}", {"A": "${{ env.B }}"}) == "${{ env.B }}"


def test_resolve_env_names_every_missing_alternative() -> None:
    with pytest.raises(TemplateError) as e:
        resolve_env("${{ env.X || env.Y }}", {})
    assert str(e.value) == "environment variables X, Y not set (needed by ${{ env.X || env.Y }})"


def test_resolve_env_rejects_unknown_expressions() -> None:
    with pytest.raises(TemplateError) as e:
        resolve_env("${{ secrets.TOKEN }}", {"TOKEN": "t"})
    assert str(e.value) == (
        "unsupported template expression 'secrets.TOKEN' in ${{ secrets.TOKEN }}: "
        "expected env.NAME, a number or a 'quoted string'"
    )


# --- file:// ---------------------------------------------------------------------------------


def write_file(path: Path, data: bytes, mtime_ns: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_file_url_state_and_event_time_are_the_mtime_rounded_to_millis(tmp_path: Path) -> None:
    path = write_file(tmp_path / "in" / "data.csv", CSV, 1_600_000_000_123_456_789)
    result = fetch_url(url_step(f"file://{path}"), tmp_path)

    assert result == Fetched(
        path=path,
        source_state=last_modified("2020-09-13T12:26:40.123Z"),
        source_event_time=Timestamp.parse("2020-09-13T12:26:40.123Z"),
        has_more=False,
        origin=str(path),
    )
    assert work_files(tmp_path) == []


def test_file_url_mtime_rounds_half_a_millisecond_up(tmp_path: Path) -> None:
    path = write_file(tmp_path / "data.csv", CSV, 1_600_000_000_123_500_000)
    result = fetch_url(url_step(f"file://{path}"), tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_state == last_modified("2020-09-13T12:26:40.124Z")


def test_file_url_with_unchanged_mtime_is_up_to_date(tmp_path: Path) -> None:
    path = write_file(tmp_path / "data.csv", CSV, 1_600_000_000_123_456_789)
    prev = last_modified("2020-09-13T12:26:40.123Z")
    assert fetch_url(url_step(f"file://{path}"), tmp_path, prev=prev) == UpToDate()

    os.utime(path, ns=(1_600_000_001_000_000_000,) * 2)
    result = fetch_url(url_step(f"file://{path}"), tmp_path, prev=prev)
    assert isinstance(result, Fetched)
    assert result.source_state == last_modified("2020-09-13T12:26:41Z")


def test_file_url_relative_to_base_dir(tmp_path: Path) -> None:
    path = write_file(tmp_path / "data" / "cities.csv", CSV, 1_600_000_000_000_000_000)
    result = fetch_url(url_step("file:data/cities.csv"), tmp_path)
    assert isinstance(result, Fetched)
    assert result.path == path
    assert result.path.read_bytes() == CSV


def test_file_url_from_system_time(tmp_path: Path) -> None:
    path = write_file(tmp_path / "data.csv", CSV, 1_600_000_000_000_000_000)
    result = fetch_url(url_step(f"file://{path}", eventTime={"kind": "FromSystemTime"}), tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == SYSTEM_TIME
    assert result.source_state == last_modified("2020-09-13T12:26:40Z")


def test_file_url_missing_file_is_source_not_found(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError) as e:
        fetch_url(url_step(f"file://{tmp_path}/nope.csv"), tmp_path)
    assert str(e.value) == f"{tmp_path}/nope.csv: file not found"


def test_file_url_missing_file_masks_the_templated_part(tmp_path: Path) -> None:
    step = url_step("file:exports/${{ env.EXPORT_TOKEN }}.csv")
    with pytest.raises(SourceNotFoundError) as e:
        fetch_url(step, tmp_path, env={"EXPORT_TOKEN": "tok-9f8e7d6c5b4a"})
    assert str(e.value) == f"{tmp_path}/exports/***.csv: file not found"


def test_file_url_with_a_host_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as e:
        fetch_url(url_step("file://data/cities.csv"), tmp_path)
    assert (
        str(e.value)
        == "file://data/cities.csv: file URLs take no host; use file:///absolute/path or file:relative/path"
    )


# --- FilesGlob --------------------------------------------------------------------------------


def glob_step(path: str, **kwargs: object) -> models.FetchStepFilesGlob:
    return models.FetchStepFilesGlob.model_validate({"kind": "FilesGlob", "path": path, **kwargs})


FROM_DATE = {"kind": "FromPath", "pattern": r"data-(\d+-\d+-\d+)\.csv"}


def test_files_glob_returns_one_file_per_call_in_name_order_with_has_more(tmp_path: Path) -> None:
    for day in ("03", "01", "02"):
        write_file(
            tmp_path / "in" / f"data-2020-10-{day}.csv", day.encode(), 1_600_000_000_000_000_000
        )
    write_file(tmp_path / "in" / "notes.txt", b"x", 1_600_000_000_000_000_000)
    step = glob_step("in/data-*.csv", eventTime=FROM_DATE)

    seen = []
    prev = None
    while True:
        result = fetch_url(step, tmp_path, prev=prev)
        if isinstance(result, UpToDate):
            break
        seen.append(
            (result.path.name, result.path.read_bytes(), result.source_event_time, result.has_more)
        )
        assert result.source_state is not None
        prev = result.source_state

    assert seen == [
        ("data-2020-10-01.csv", b"01", Timestamp.parse("2020-10-01T00:00:00Z"), True),
        ("data-2020-10-02.csv", b"02", Timestamp.parse("2020-10-02T00:00:00Z"), True),
        ("data-2020-10-03.csv", b"03", Timestamp.parse("2020-10-03T00:00:00Z"), False),
    ]
    assert prev == etag("data-2020-10-03.csv")
    assert work_files(tmp_path) == []


def test_files_glob_result_is_the_file_itself_with_its_name_as_state(tmp_path: Path) -> None:
    path = write_file(tmp_path / "in" / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    result = fetch_url(glob_step("in/*.csv", eventTime=FROM_DATE), tmp_path)
    assert result == Fetched(
        path=path,
        source_state=etag("data-2020-10-01.csv"),
        source_event_time=Timestamp.parse("2020-10-01T00:00:00Z"),
        has_more=False,
        origin=str(path),
    )


def test_files_glob_ignores_mtime_changes_of_ingested_files(tmp_path: Path) -> None:
    path = write_file(tmp_path / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    os.utime(path, ns=(1_700_000_000_000_000_000,) * 2)
    result = fetch_url(glob_step("data-*.csv"), tmp_path, prev=etag("data-2020-10-01.csv"))
    assert result == UpToDate()


def test_files_glob_picks_up_a_new_file_that_sorts_after_the_state(tmp_path: Path) -> None:
    write_file(tmp_path / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    write_file(
        tmp_path / "data-2020-09-30.csv", CSV, 1_600_000_000_000_000_000
    )  # late, sorts before
    write_file(tmp_path / "data-2020-10-02.csv", CSV, 1_600_000_000_000_000_000)
    result = fetch_url(glob_step("data-*.csv"), tmp_path, prev=etag("data-2020-10-01.csv"))
    assert isinstance(result, Fetched)
    assert result.source_state == etag("data-2020-10-02.csv")
    assert result.has_more is False


def test_files_glob_without_event_time_uses_the_system_time(tmp_path: Path) -> None:
    write_file(tmp_path / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    for event_time in (None, {"kind": "FromSystemTime"}):
        step = (
            glob_step("data-*.csv")
            if event_time is None
            else glob_step("data-*.csv", eventTime=event_time)
        )
        result = fetch_url(step, tmp_path)
        assert isinstance(result, Fetched)
        assert result.source_event_time == SYSTEM_TIME


def test_files_glob_absolute_pattern(tmp_path: Path) -> None:
    path = write_file(tmp_path / "abs" / "x.csv", CSV, 1_600_000_000_000_000_000)
    result = fetch(
        glob_step(f"{tmp_path}/abs/*.csv"),
        prev_state=None,
        system_time=SYSTEM_TIME,
        workdir=tmp_path / "work",
        base_dir=Path("/nonexistent"),
        env={},
        source_roots=(tmp_path / "abs",),
    )
    assert isinstance(result, Fetched)
    assert result.path == path


def test_files_glob_from_path_with_a_utc_offset(tmp_path: Path) -> None:
    write_file(tmp_path / "obs-2020-10-01T12:30:00+02:00.json", b"{}", 1_600_000_000_000_000_000)
    step = glob_step(
        "obs-*.json",
        eventTime={
            "kind": "FromPath",
            "pattern": r"obs-(.+)\.json",
            "timestampFormat": "%Y-%m-%dT%H:%M:%S%z",
        },
    )
    result = fetch_url(step, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == Timestamp.parse("2020-10-01T10:30:00Z")


def test_files_glob_from_path_keeps_a_time_of_day_without_offset_as_utc(tmp_path: Path) -> None:
    write_file(tmp_path / "dump-20201001-1745.csv", CSV, 1_600_000_000_000_000_000)
    step = glob_step(
        "dump-*.csv",
        eventTime={
            "kind": "FromPath",
            "pattern": "dump-([0-9-]+)",
            "timestampFormat": "%Y%m%d-%H%M",
        },
    )
    result = fetch_url(step, tmp_path)
    assert isinstance(result, Fetched)
    assert result.source_event_time == Timestamp.parse("2020-10-01T17:45:00Z")


def test_files_glob_from_path_no_match_is_an_event_time_error(tmp_path: Path) -> None:
    write_file(tmp_path / "data-latest.csv", CSV, 1_600_000_000_000_000_000)
    step = glob_step(
        "data-*.csv", eventTime={"kind": "FromPath", "pattern": "data-([0-9]+-[0-9]+-[0-9]+)[.]csv"}
    )
    with pytest.raises(EventTimeError) as e:
        fetch_url(step, tmp_path)
    assert (
        str(e.value)
        == "fromPath pattern 'data-([0-9]+-[0-9]+-[0-9]+)[.]csv' does not match file name 'data-latest.csv'"
    )


def test_files_glob_from_path_bad_date_is_an_event_time_error(tmp_path: Path) -> None:
    write_file(tmp_path / "data-2020-13-01.csv", CSV, 1_600_000_000_000_000_000)
    with pytest.raises(EventTimeError) as e:
        fetch_url(glob_step("data-*.csv", eventTime=FROM_DATE), tmp_path)
    assert str(e.value) == (
        "cannot parse '2020-13-01' (from file name 'data-2020-13-01.csv') with timestamp format "
        "'%Y-%m-%d': time data '2020-13-01' does not match format '%Y-%m-%d'"
    )


def test_files_glob_from_path_without_a_group_is_an_event_time_error(tmp_path: Path) -> None:
    write_file(tmp_path / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    step = glob_step("data-*.csv", eventTime={"kind": "FromPath", "pattern": "data-.*"})
    with pytest.raises(EventTimeError) as e:
        fetch_url(step, tmp_path)
    assert (
        str(e.value)
        == "fromPath pattern 'data-.*' has no capture group 1 matching 'data-2020-10-01.csv'"
    )


def test_files_glob_from_metadata_is_an_event_time_error(tmp_path: Path) -> None:
    write_file(tmp_path / "data-2020-10-01.csv", CSV, 1_600_000_000_000_000_000)
    with pytest.raises(EventTimeError) as e:
        fetch_url(glob_step("data-*.csv", eventTime={"kind": "FromMetadata"}), tmp_path)
    assert (
        str(e.value)
        == "Files glob source does not support extracting event time fromMetadata, use fromPath instead"
    )


def test_files_glob_matching_nothing_without_state_is_source_not_found(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError) as e:
        fetch_url(glob_step("data-*.csv"), tmp_path)
    assert str(e.value) == "no files match data-*.csv"


def test_files_glob_matching_nothing_new_with_state_is_up_to_date(tmp_path: Path) -> None:
    assert (
        fetch_url(glob_step("data-*.csv"), tmp_path, prev=etag("data-2020-10-01.csv")) == UpToDate()
    )


def test_files_glob_only_orders_by_name(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as e:
        fetch_url(glob_step("data-*.csv", order="ByEventTime"), tmp_path)
    assert str(e.value) == "data-*.csv: FilesGlob can only be ordered ByName, found ByEventTime"


def test_files_glob_refuses_two_pending_files_with_one_name(tmp_path: Path) -> None:
    write_file(tmp_path / "a" / "data.csv", CSV, 1_600_000_000_000_000_000)
    write_file(tmp_path / "b" / "data.csv", CSV, 1_600_000_000_000_000_000)
    with pytest.raises(FetchError) as e:
        fetch_url(glob_step("*/data.csv"), tmp_path)
    assert str(e.value) == (
        f"*/data.csv: several files are named data.csv ({tmp_path}/a/data.csv, {tmp_path}/b/data.csv); "
        "the source state records file names only, so only one of them could ever be ingested"
    )


# --- Container ----------------------------------------------------------------------------------


def container_step(**kwargs: object) -> models.FetchStepContainer:
    return models.FetchStepContainer.model_validate(
        {"kind": "Container", "image": "busybox:latest", **kwargs}
    )


def test_container_without_docker_or_podman_fails_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    # Even an unresolvable template is not looked at: the runtime check comes first.
    step = container_step(env=[{"name": "API_KEY", "value": "${{ env.MISSING }}"}])
    with pytest.raises(ContainerRuntimeError) as e:
        fetch_url(step, tmp_path)
    assert str(e.value) == "no container runtime found: install docker or podman and put it on PATH"
    assert not (tmp_path / "work").exists()


FAKE_RUNTIME = """#!/bin/sh
# Records how it was started (its environment, its arguments, the --env-file's lines),
# then answers as a container printing one CSV row.
env > "$LOG/environment"
printf '%s\\n' "$@" > "$LOG/arguments"
while [ $# -gt 0 ]; do
  if [ "$1" = --env-file ]; then cat "$2" > "$LOG/env-file"; ls -l "$2" > "$LOG/mode"; fi
  shift
done
printf 'a\\n1\\n'
"""


def fake_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """``script`` as the ``docker`` first on PATH; the folder it logs to (``$LOG``)."""
    runtime = tmp_path / "bin" / "docker"
    runtime.parent.mkdir()
    runtime.write_text(script)
    runtime.chmod(0o755)
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("PATH", f"{runtime.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("LOG", str(log))
    return log


def test_a_container_s_variables_configure_the_container_never_its_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given in the runtime's own environment, a manifest's DOCKER_HOST sent the run,
    secrets and all, to a daemon of the pull request's choosing, and BASH_ENV ran a
    script; the values now go through a file only this user reads."""
    log = fake_runtime(tmp_path, monkeypatch, FAKE_RUNTIME)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    step = container_step(
        env=[
            {"name": "DOCKER_HOST", "value": "tcp://127.0.0.1:9"},
            {"name": "BASH_ENV", "value": "/tmp/evil.sh"},
            {"name": "API_KEY", "value": "${{ env.KEY }}"},
            {"name": "PASSED"},
        ]
    )
    fetched = fetch_url(step, tmp_path, env={"KEY": "k3y", "PASSED": "p4ss"})
    assert isinstance(fetched, Fetched) and fetched.path.read_bytes() == b"a\n1\n"
    environment = (log / "environment").read_text().splitlines()
    assert [
        v for v in environment if v.split("=")[0] in ("DOCKER_HOST", "BASH_ENV", "API_KEY")
    ] == []
    arguments = (log / "arguments").read_text().splitlines()
    assert "--env" not in arguments and "k3y" not in arguments
    assert (log / "env-file").read_text().splitlines() == [
        "DOCKER_HOST=tcp://127.0.0.1:9",
        "BASH_ENV=/tmp/evil.sh",
        "API_KEY=k3y",
        "PASSED=p4ss",
        "ODF_ETAG=",
        "ODF_LAST_MODIFIED=",
        "ODF_NEW_ETAG_PATH=/opt/odf/out/new-etag",
        "ODF_NEW_LAST_MODIFIED_PATH=/opt/odf/out/new-last-modified",
        "ODF_NEW_HAS_MORE_DATA_PATH=/opt/odf/out/new-has-more-data",
        "ODF_BATCH_SIZE=10000",
    ]
    assert (log / "mode").read_text().startswith("-rw------- ")
    assert work_files(tmp_path) == [fetched.path.name]  # the file of variables is gone
    multiline = container_step(env=[{"name": "API_KEY", "value": "${{ env.KEY }}"}])
    with pytest.raises(FetchError) as e:
        fetch_url(multiline, tmp_path / "again", env={"KEY": "two\nlines"})
    assert str(e.value) == (
        "container busybox:latest: the value of API_KEY holds a line break or a NUL"
        " character, which a container's environment file cannot hold"
    )


def test_a_container_s_image_and_entrypoint_are_never_read_as_runtime_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image ``--env=AWS_SECRET_ACCESS_KEY`` was an option to docker, which copied the
    runner's secret into the container the next argument named: the image is checked
    once its templates are resolved, the options end with ``--``, and the entrypoint is
    joined to its option."""
    log = fake_runtime(tmp_path, monkeypatch, FAKE_RUNTIME)
    hostile = container_step(image="${{ env.IMAGE }}", args=["evil.example/x:1"])
    with pytest.raises(FetchError) as e:
        fetch_url(hostile, tmp_path, env={"IMAGE": "--env=AWS_SECRET_ACCESS_KEY"})
    assert str(e.value) == (
        "'***' is no container image reference: [registry[:port]/]name[:tag][@digest],"
        " its name in lower case (written ${{ env.IMAGE }})"
    )
    assert list(log.iterdir()) == []  # the runtime never ran
    step = container_step(command=["--privileged", "-c"], args=["--volume=/:/host"])
    fetched = fetch_url(step, tmp_path / "again")
    assert isinstance(fetched, Fetched)
    arguments = (log / "arguments").read_text().splitlines()
    assert arguments[:3] == ["run", "--rm", "--name"]
    assert re.fullmatch("odf-fetch-[0-9a-f]{32}", arguments[3])
    assert arguments[4] == "--volume" and arguments[5].endswith(":/opt/odf/out")
    assert arguments[6] == "--env-file"
    assert arguments[8:] == [
        "--entrypoint=--privileged",
        "--",
        "busybox:latest",
        "-c",
        "--volume=/:/host",
    ]


# A runtime whose container runs until it is killed by name (``docker kill NAME``), or
# writes without end with WRITE set; records each kill.
ENDLESS_RUNTIME = """#!/bin/sh
if [ "$1" = kill ]; then
  sleep "${KILL_DELAY:-0}"; echo "$2" >> "$LOG/killed"; kill "$(cat "$LOG/$2")"; exit 0
fi
echo $$ > "$LOG/$4"
if [ -n "$WRITE" ]; then exec yes 0123456789; fi
exec sleep 600
"""


@pytest.mark.parametrize("limit", ["seconds", "size", "stop"])
def test_a_container_is_killed_at_its_limits_and_at_the_first_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """It held the run until the job's timeout (every dataset after it skipped), could
    write until the disk was full, and a SIGTERM left it running: the container itself
    is killed by name, its client then ends."""
    log = fake_runtime(tmp_path, monkeypatch, ENDLESS_RUNTIME)
    if limit == "size":
        monkeypatch.setenv("WRITE", "1")
    began = time.monotonic()
    limits = {
        "seconds": DownloadLimits(seconds=1),
        "size": DownloadLimits(size=100_000),
        "stop": DownloadLimits(stop=lambda: time.monotonic() > began + 1),
    }[limit]
    with pytest.raises((ContainerRuntimeError, KeyboardInterrupt)) as e:
        fetch_url(container_step(), tmp_path, limits=limits)
    assert time.monotonic() - began < 8
    (name,) = (log / "killed").read_text().split()
    assert name.startswith("odf-fetch-")
    assert work_files(tmp_path) == []
    if limit == "stop":
        assert e.type is KeyboardInterrupt
        return
    reason = {
        "seconds": "ran longer than 1 s, the longest a fetch may take (max_download_seconds",
        "size": "wrote more than 100000 bytes, the most a fetch may bring (max_download_size",
    }[limit]
    assert str(e.value) == (
        f"container busybox:latest {reason} in [tool.reconciler]); it was stopped"
    )


def test_a_signal_during_the_kill_of_a_container_waits_for_the_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C (or a process-group signal's echo) while ``docker kill`` ran cut
    it short: the container went on running after the run had ended. The signal is held
    until the container is killed, then raised."""
    log = fake_runtime(tmp_path, monkeypatch, ENDLESS_RUNTIME)
    monkeypatch.setenv("KILL_DELAY", "1.5")
    began = time.monotonic()
    limits = DownloadLimits(stop=lambda: time.monotonic() > began + 1)
    second = threading.Timer(1.8, os.kill, (os.getpid(), signal.SIGINT))
    second.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fetch_url(container_step(), tmp_path, limits=limits)
    finally:
        second.cancel()
    (name,) = (log / "killed").read_text().split()
    container = int((log / name).read_text())
    state = Path(f"/proc/{container}/stat")
    assert not state.exists() or state.read_text().split()[2] == "Z"  # ended
    assert work_files(tmp_path) == []


def _docker_daemon_up() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


DOCKER = shutil.which("docker") is not None
DOCKER_UP = _docker_daemon_up()


@pytest.mark.skipif(not DOCKER or DOCKER_UP, reason="needs a docker client whose daemon is down")
def test_container_failure_reports_exit_code_and_stderr_without_secrets(tmp_path: Path) -> None:
    step = container_step(env=[{"name": "API_KEY", "value": "${{ env.KEY }}"}])
    with pytest.raises(ContainerRuntimeError) as e:
        fetch_url(step, tmp_path, env={"KEY": "k3y-v4lue"})
    assert e.value.exit_code == 125
    assert str(e.value).startswith(
        "container busybox:latest exited with code 125:\ndocker: Cannot connect to the Docker daemon"
    )
    assert "k3y-v4lue" not in repr(e.value)
    assert work_files(tmp_path) == []


def _local_image() -> str | None:
    if not DOCKER_UP:
        return None
    for image in ("busybox:latest", "alpine:latest"):
        if (
            subprocess.run(
                ["docker", "image", "inspect", image], capture_output=True, check=False
            ).returncode
            == 0
        ):
            return image
    return None


LOCAL_IMAGE = _local_image()

SCRIPT = """
if [ "$ODF_ETAG" = "v2" ]; then printf v2 > "$ODF_NEW_ETAG_PATH"; exit 0; fi
printf 'etag=%s;lm=%s;batch=%s;key=%s\\n' "$ODF_ETAG" "$ODF_LAST_MODIFIED" "$ODF_BATCH_SIZE" "$API_KEY"
echo v2 > "$ODF_NEW_ETAG_PATH"
touch "$ODF_NEW_HAS_MORE_DATA_PATH"
"""


@pytest.mark.skipif(
    LOCAL_IMAGE is None, reason="needs a running docker daemon with busybox or alpine pulled"
)
def test_container_protocol_with_a_real_container(tmp_path: Path) -> None:
    assert LOCAL_IMAGE is not None
    step = container_step(
        image=LOCAL_IMAGE,
        command=["sh", "-c"],
        args=[SCRIPT],
        env=[
            {"name": "API_KEY", "value": "${{ env.KEY }}"},
            {"name": "ODF_BATCH_SIZE", "value": "5"},
        ],
    )
    first = fetch_url(step, tmp_path, prev=last_modified("2020-01-01T00:00:00Z"), env={"KEY": "k"})
    assert isinstance(first, Fetched)
    assert first.path.read_bytes() == b"etag=;lm=2020-01-01T00:00:00Z;batch=5;key=k\n"
    assert (first.source_state, first.source_event_time, first.has_more) == (etag("v2"), None, True)

    assert fetch_url(step, tmp_path, prev=etag("v2"), env={"KEY": "k"}) == UpToDate()


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("", DownloadLimits(10 * 2**30, 3600)),
        ('max_download_size = "64MiB"\nmax_download_seconds = 90\n', DownloadLimits(2**26, 90)),
    ],
)
def test_download_limits_are_read_from_the_repository_settings(
    tmp_path: Path, text: str, limits: DownloadLimits
) -> None:
    config = RepoConfig.of_pyproject(tmp_path, "[tool.reconciler]\n" + text, "pyproject.toml")
    assert DownloadLimits(config.max_download_size, config.max_download_seconds) == limits


@pytest.mark.parametrize("value", ["0", "1.5", '"1h"', "true"])
def test_a_download_time_that_is_no_number_of_seconds_is_a_configuration_error(
    tmp_path: Path, value: str
) -> None:
    text = f"[tool.reconciler]\nmax_download_seconds = {value}\n"
    with pytest.raises(ConfigError) as refused:
        RepoConfig.of_pyproject(tmp_path, text, "pyproject.toml")
    assert str(refused.value) == (
        "[tool.reconciler] max_download_seconds must be a whole number of seconds above 0,"
        f" got {tomllib.loads('v = ' + value)['v']!r}"
    )
