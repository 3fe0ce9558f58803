"""The fetch stage of ingest: get the newest raw file of a polling source, or "up to date".

Fetch is where a polling source touches the outside world, so it is where the source state
is decided (what a later fetch compares against, to skip data it has already ingested) and
where the event-time fallback for rows without one comes from. Both follow kamu-cli, the
reference implementation, as described in ``ENGINE-SEMANTICS.md`` §1.4 and §1.7
(``src/infra/core/src/services/ingest/fetch_service/{http,file,container}.rs``), so that
a dataset ingested here resumes the same way under kamu and vice versa:

- ``Url`` with ``http``/``https``: a conditional GET (``If-None-Match`` from a previous
  ETag, ``If-Modified-Since`` from a previous last-modified); 304 is up to date; the new
  state is the response ``ETag``, else its ``Last-Modified``.
- ``Url`` with ``file``: the state is the file's mtime rounded to milliseconds.
- ``FilesGlob``: the state is the *name* of the last file ingested; one file per call, in
  ascending name order, with ``has_more`` while more remain.
- ``FilesGlob`` and ``file:`` only reach files inside ``base_dir`` (the repository) or a
  folder of ``source_roots``, symlinks followed (``reconciler.source_paths``): the plan
  checked this already, but files can change between plan and apply, and what is read
  here is committed. kamu reads any path.
- ``Container``: an OCI container writes the data to stdout and its new state to files.

Where kamu has a defect this module does the better thing, and says so where it does:
errors instead of panics, secrets kept out of every message and off the command line, the
``Authorization`` header dropped on a redirect to another origin, timestamps in file names
that keep their time of day.

The function is synchronous and returns values; nothing here prints, and nothing outside
``workdir`` is written.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import email.utils
import http.client
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from .. import container_refs, http_headers
from ..env_templates import TemplateError, resolve_env_tracked
from ..manifest_regex import ManifestRegexError, compile_regex
from ..masking import Mask
from ..odf import models
from ..odf.timestamps import Timestamp
from ..source_paths import FileUrlError, OutsideError, SourceRoots, file_url_path, glob_matches
from ..wording import quoted
from .http_deadline import POLL_SECONDS, Deadline

__all__ = [
    "ContainerRuntimeError",
    "EventTimeError",
    "FetchError",
    "Fetched",
    "SourceNotFoundError",
    "SourceOutsideError",
    "SourceUnreachableError",
    "UpToDate",
    "fetch",
]

DEFAULT_SOURCE_NAME = "default"
KIND_ETAG = "odf/etag"
KIND_LAST_MODIFIED = "odf/last-modified"

# kamu's HttpSourceConfig: a 30 s connect timeout; here it also bounds each read.
HTTP_TIMEOUT_SECONDS = 30.0
USER_AGENT = "odf-reconciler"
# kamu's SourceConfig::target_records_per_slice, passed to containers as ODF_BATCH_SIZE.
DEFAULT_BATCH_SIZE = 10_000
CONTAINER_OUT_DIR = "/opt/odf/out"
CONTAINER_RUNTIMES = ("docker", "podman")

_CHUNK = 1 << 20
_BODY_SNIPPET_CHARS = 300
_STDERR_TAIL_LINES = 20
_STDERR_TAIL_CHARS = 4000


# --- Results and errors ----------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """New data: a file to prepare and read, and what to record about the source.

    ``path`` is a file inside ``workdir``, or for ``FilesGlob`` and ``file://`` the source
    file itself (zero-copy, as kamu does); it must never be modified. ``source_event_time``
    is the fallback event time of §1.4 (``None`` means "use the system time").
    ``origin`` names the source for messages, without credentials or query strings.
    """

    path: Path
    source_state: models.SourceState | None
    source_event_time: Timestamp | None
    has_more: bool = False
    origin: str = ""


@dataclass(frozen=True)
class UpToDate:
    """The source has nothing new since the previous state: no block is to be written."""


class FetchError(Exception):
    """The fetch stage failed; the message says which source (``origin``) and why."""

    def __init__(self, message: str, *, origin: str = "") -> None:
        super().__init__(message)
        self.origin = origin


class SourceNotFoundError(FetchError):
    """HTTP 404, a missing ``file://`` file, or a glob matching nothing with no state."""


class SourceOutsideError(FetchError):
    """A ``FilesGlob`` or ``file:`` source leads outside the repository and its
    ``source_roots``; nothing of it was read."""


class SourceUnreachableError(FetchError):
    """Any other HTTP status, a refused connection, a timeout or a broken download."""

    def __init__(self, message: str, *, origin: str = "", status: int | None = None) -> None:
        super().__init__(message, origin=origin)
        self.status = status


class EventTimeError(FetchError):
    """The ``eventTime`` source does not fit the fetch kind, or found no time."""


class ContainerRuntimeError(FetchError):
    """No docker or podman, or the fetch container failed or broke the protocol."""

    def __init__(
        self, message: str, *, origin: str = "", exit_code: int | None = None, stderr: str = ""
    ) -> None:
        super().__init__(message, origin=origin)
        self.exit_code = exit_code
        self.stderr = stderr


@dataclass(frozen=True)
class DownloadLimits:
    """What one download of a ``Url`` source, or one run of a ``Container`` fetch, may
    take: a server or an image of a pull request's choosing could send without end (a
    full disk) or a byte now and then (each read in time, the run held for ever).
    ``max_download_size`` and ``max_download_seconds``."""

    size: int = 10 * 2**30
    seconds: int = 3600
    stop: Callable[[], bool] = lambda: False
    """True once the run is asked to stop (the first Ctrl-C or SIGTERM,
    ``commands.interrupt``). A download has written nothing yet, so it is cut at once
    (``KeyboardInterrupt``, as the second signal raises; ``http_deadline``) rather than
    finished: a slow server held a stopped run until its end, up to ``seconds``."""


# --- Entry point -----------------------------------------------------------------------


def fetch(
    step: models.FetchStep,
    *,
    prev_state: models.SourceState | None,
    system_time: Timestamp,
    workdir: Path,
    base_dir: Path,
    env: Mapping[str, str],
    source_roots: Sequence[Path] = (),
    limits: DownloadLimits = DownloadLimits(),
    reserved: Sequence[tuple[Path, str]] = (),
) -> Fetched | UpToDate:
    """Fetch what is new in the source since ``prev_state``.

    ``prev_state`` is the ``newSourceState`` of the dataset's most recent AddData (§1.7).
    ``workdir`` receives downloads (created if missing); ``base_dir`` anchors relative
    ``FilesGlob`` paths and ``file:relative/path`` URLs, and with ``source_roots`` bounds
    the files they may reach, never those under a ``reserved`` folder (the chains, the
    store, the cache: ``RepoConfig.reserved_folders``); ``env`` resolves
    ``${{ env.NAME }}`` templates and supplies container variables given without a value.
    """
    prev = _parse_state(prev_state)
    roots = SourceRoots.of(base_dir, source_roots, reserved)
    if isinstance(step, models.FetchStepUrl):
        return _fetch_url(step, prev, system_time, workdir, base_dir, roots, env, limits)
    if isinstance(step, models.FetchStepFilesGlob):
        return _fetch_files_glob(step, prev, system_time, base_dir, roots)
    if isinstance(step, models.FetchStepContainer):
        return _fetch_container(step, prev, workdir, env, limits)
    raise FetchError(f"fetch step {step.kind} is not supported (Url, FilesGlob and Container are)")


# --- Source state ------------------------------------------------------------------------

# A previous state as kamu's PollingSourceState: an ETag string or a last-modified instant.
_Prev = str | Timestamp | None


def _parse_state(state: models.SourceState | None) -> _Prev:
    """Read a stored state; unknown kinds and unparsable times count as no state, as in kamu."""
    if state is None:
        return None
    if state.kind == KIND_ETAG:
        return state.value
    if state.kind == KIND_LAST_MODIFIED:
        try:
            return Timestamp.parse(state.value)
        except ValueError:
            return None
    return None


def _etag_state(value: str) -> models.SourceState:
    return models.SourceState(source_name=DEFAULT_SOURCE_NAME, kind=KIND_ETAG, value=value)


def _last_modified_state(value: Timestamp) -> models.SourceState:
    return models.SourceState(
        source_name=DEFAULT_SOURCE_NAME, kind=KIND_LAST_MODIFIED, value=value.isoformat()
    )


# --- Url ---------------------------------------------------------------------------------


def _fetch_url(
    step: models.FetchStepUrl,
    prev: _Prev,
    system_time: Timestamp,
    workdir: Path,
    base_dir: Path,
    roots: SourceRoots,
    env: Mapping[str, str],
    limits: DownloadLimits,
) -> Fetched | UpToDate:
    url, secrets = resolve_env_tracked(step.url, env)
    scheme = urlsplit(url).scheme.lower()
    if isinstance(step.event_time, models.EventTimeSourceFromPath):
        # kamu downloads first and fails afterwards; a configuration error needs no download.
        raise EventTimeError(
            "Url source does not support fromPath event time source",
            origin=_display_url(url, secrets),
        )
    if scheme == "file":
        path = _file_url_path(step.url, url, base_dir, roots, secrets)
        return _fetch_file(path, step.event_time, prev, system_time, secrets)
    if scheme in ("http", "https"):
        url = _percent_encoded(url)
        with Deadline(limits.seconds, limits.stop) as deadline:
            return _fetch_http(
                step, url, secrets, prev, system_time, workdir, env, limits, deadline
            )
    origin = _display_url(url, secrets)
    raise FetchError(
        f"{origin}: unsupported URL scheme {scheme!r} (http, https and file are supported)",
        origin=origin,
    )


_NOT_IN_URLS = re.compile(r'[^\x21-\x7e]|["<>\\^`{|}]')


def _percent_encoded(url: str) -> str:
    """``url`` with what a URL cannot hold as it is (a space, a control, a non-ASCII
    letter, a quote) percent-encoded as UTF-8, as kamu's URL parser (WHATWG's) does: a
    template's value with ``é`` or a space stopped the fetch with http.client's words,
    which quoted the character, and so a piece of the secret a template had put there."""
    return _NOT_IN_URLS.sub(lambda m: quote(m.group(), safe=""), url)


def _display_url(url: str, secrets: list[str]) -> str:
    """The URL for messages: no user info, no query or fragment, templated values masked."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    shown = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return _masked(shown, secrets)


def _masked(text: str, secrets: list[str]) -> str:
    return Mask(secrets)(text)


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but never carries credentials to another origin.

    urllib copies every header to the redirect target, wherever it is; a bearer token for
    one host would be handed to any host it redirects to. Here the ``Authorization``,
    ``Cookie`` and templated headers are dropped when the scheme, host or port changes, as
    curl and requests do. It also keeps the URL the last redirect led to, so a failure
    there is reported where it happened.
    """

    def __init__(self, sensitive: frozenset[str], url: str) -> None:
        super().__init__()
        self.sensitive = sensitive
        self.last_url = url

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        scheme = urlsplit(urljoin(req.full_url, newurl)).scheme.lower()
        if scheme not in ("http", "https"):
            # urllib would follow ftp: too; a Url source is http, https or file (kamu's
            # reqwest follows http and https only), and a redirect never reaches a file.
            raise urllib.error.HTTPError(
                req.full_url, code, f"redirect to a {scheme}: URL refused", headers, fp
            )
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin_of(new.full_url) != _origin_of(req.full_url):
            for name in list(new.headers):
                if name.lower() in self.sensitive:
                    del new.headers[name]
        if new is not None:
            self.last_url = new.full_url
        return new


def _origin_of(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default_port = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or ""), parts.port or default_port


def _fetch_http(
    step: models.FetchStepUrl,
    url: str,
    secrets: list[str],
    prev: _Prev,
    system_time: Timestamp,
    workdir: Path,
    env: Mapping[str, str],
    limits: DownloadLimits,
    deadline: Deadline,
) -> Fetched | UpToDate:
    sensitive = set(http_headers.SENSITIVE)
    headers: list[tuple[str, str]] = []
    for header in step.headers or []:
        if (problem := http_headers.name_problem(header.name)) is not None:
            raise FetchError(f"{_display_url(url, secrets)}: {problem}", origin=step.url)
        value, inserted = resolve_env_tracked(header.value, env)
        if inserted or header.name.lower() in http_headers.SENSITIVE:
            sensitive.add(header.name.lower())
            secrets = [*secrets, *inserted, value]
        # http.client would refuse it quoting the value, escaped past any masking.
        if (problem := http_headers.value_problem(header.name, value)) is not None:
            shown = _display_url(url, secrets)
            raise FetchError(f"{shown}: {problem}", origin=shown)
        headers.append((header.name, value))

    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # urllib cannot send user info itself; reqwest (kamu) turns it into Basic auth.
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        secrets = [*secrets, password, token]
        headers.append(("Authorization", f"Basic {token}"))
        url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    origin = _display_url(url, secrets)

    request = urllib.request.Request(url, method="GET")
    request.add_header("User-Agent", USER_AGENT)
    for name, value in headers:
        request.add_header(name, value)
    if isinstance(prev, str):
        request.add_header("If-None-Match", prev)
    elif isinstance(prev, Timestamp):
        request.add_header(
            "If-Modified-Since", email.utils.format_datetime(prev.to_datetime(), usegmt=True)
        )

    redirects = _RedirectHandler(frozenset(sensitive), url)

    def unreachable(message: str, status: int | None = None) -> SourceUnreachableError:
        deadline.raise_if_stopped()  # the connection was shut for the stop
        if deadline.expired:  # the connection was shut for it: that is the reason
            message = (
                f"the download took longer than {limits.seconds} s, the longest one may take"
                " (max_download_seconds in [tool.reconciler])"
            )
        where = _redirected(origin, redirects.last_url, secrets)
        return SourceUnreachableError(
            _masked(f"{where}: {message}", secrets), origin=origin, status=status
        )

    opener = urllib.request.build_opener(redirects, *deadline.handlers())
    try:
        response = opener.open(request, timeout=HTTP_TIMEOUT_SECONDS)
    except urllib.error.HTTPError as e:
        body = _body_snippet(e, secrets) if e.code not in (304, 404) else ""
        e.close()
        if e.code == 304:
            return UpToDate()
        if e.code == 404:
            where = _redirected(origin, redirects.last_url, secrets)
            raise SourceNotFoundError(f"{where}: not found (HTTP 404)", origin=origin) from None
        raise unreachable(
            f"HTTP {e.code} {e.reason}" + (f": {body}" if body else ""), e.code
        ) from None
    except urllib.error.URLError as e:
        raise unreachable(_network_failure(e.reason)) from None
    except (OSError, http.client.HTTPException) as e:
        raise unreachable(_network_failure(e)) from None

    with response:
        if response.status != 200:
            # kamu: anything but 200, 304 and 404 is "unreachable", even another 2xx.
            raise unreachable(f"HTTP {response.status} {response.reason}", response.status)
        etag = response.headers.get("ETag")
        last_modified_header = response.headers.get("Last-Modified")
        state: models.SourceState | None = None
        last_modified: Timestamp | None = None
        if etag is not None:
            if Mask(secrets)(etag) != etag:
                # The state is recorded in the chain, which is public to every reader.
                raise unreachable(
                    "the server's ETag holds a templated secret's value, which the chain"
                    " would record as the source's state; nothing was fetched"
                )
            state = _etag_state(etag)
        elif last_modified_header is not None:
            last_modified = _parse_http_date(last_modified_header, origin)
            state = _last_modified_state(last_modified)
        path = _download(response, workdir, unreachable, limits, deadline)

    event_time: Timestamp | None
    if isinstance(step.event_time, models.EventTimeSourceFromSystemTime):
        event_time = system_time
    else:
        # Unset or FromMetadata. As in kamu, Last-Modified is the event time only when it
        # is also the state, i.e. when the response has no ETag; kept for identical output.
        event_time = last_modified
    return Fetched(path, state, event_time, has_more=False, origin=origin)


def _redirected(origin: str, final: str, secrets: list[str]) -> str:
    """Where a request failed: the source's URL, and the one its redirects led to when
    that is another (a 404 at the end of a redirect is the target's, as curl -L says)."""
    shown = _display_url(final, secrets)
    return origin if shown == origin else f"{origin} (redirected to {shown})"


def _network_failure(reason: object) -> str:
    if isinstance(reason, TimeoutError):
        return f"timed out after {HTTP_TIMEOUT_SECONDS:g} s"
    return f"cannot connect: {reason}"


def _body_snippet(response: IO[bytes], secrets: list[str]) -> str:
    """The start of an error page, its white space folded. A page may echo the request:
    the secrets are masked before the folding and again after it (a secret with a run
    of spaces is folded too), and both before the cut, which could leave a part of one
    no mask would recognise."""
    try:
        raw = response.read(_BODY_SNIPPET_CHARS * 4)
    except (OSError, http.client.HTTPException):
        return ""
    mask = Mask([*secrets, *(" ".join(s.split()) for s in secrets)])
    text = mask(" ".join(mask(raw.decode("utf-8", errors="replace")).split()))
    return text[:_BODY_SNIPPET_CHARS] + ("…" if len(text) > _BODY_SNIPPET_CHARS else "")


def _parse_http_date(value: str, origin: str) -> Timestamp:
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        # kamu panics here; a clear error is better.
        raise FetchError(
            f"{origin}: invalid Last-Modified header {value!r}: expected an HTTP date",
            origin=origin,
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return Timestamp.from_datetime(parsed)


def _download(
    response: http.client.HTTPResponse,
    workdir: Path,
    unreachable: Callable[[str], SourceUnreachableError],
    limits: DownloadLimits,
    deadline: Deadline,
) -> Path:
    """Stream the body to a new file in ``workdir``, within ``limits`` (``deadline``
    shuts the connection when its time is up); a partial file never survives. Each read
    returns what one receive brought (``read1``): a full chunk's read waited for the
    whole chunk, and a stop asked for between reads waited with it."""
    workdir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="fetch-", suffix=".data", dir=workdir)
    path = Path(name)
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while True:
                try:
                    chunk = response.read1(_CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    raise unreachable(f"download interrupted: {_network_failure(e)}") from None
                if deadline.expired or deadline.stopped:
                    # The watcher shut the connection, which reads as the body's end.
                    deadline.raise_if_stopped()
                    raise unreachable("the connection was shut at the deadline")
                if not chunk:
                    break
                written += len(chunk)
                if written > limits.size:
                    raise unreachable(
                        f"the download passed {limits.size} bytes, the most one may bring"
                        " (max_download_size in [tool.reconciler])"
                    )
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


# --- Local files -------------------------------------------------------------------------


def _file_url_path(
    written: str, url: str, base_dir: Path, roots: SourceRoots, secrets: list[str]
) -> Path:
    """The confined path of ``url`` (``written`` with its templates resolved); a refusal
    names the URL as written, so no resolved secret and no content is shown."""
    try:
        path = file_url_path(url, base_dir)
        roots.confine(path)
    except FileUrlError as e:
        origin = _display_url(url, secrets)
        raise FetchError(f"{origin}: {e}", origin=origin) from None
    except OutsideError as e:
        raise SourceOutsideError(f"Url {written!r} {e}; it is not read", origin=written) from None
    return path


def _fetch_file(
    path: Path,
    event_time_source: models.EventTimeSource | None,
    prev: _Prev,
    system_time: Timestamp,
    secrets: list[str],
) -> Fetched | UpToDate:
    origin = _masked(str(path), secrets)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise SourceNotFoundError(f"{origin}: file not found", origin=origin) from None
    except OSError as e:
        raise SourceUnreachableError(f"{origin}: {e.strerror}", origin=origin) from None
    if not path.is_file():
        raise FetchError(f"{origin}: not a regular file", origin=origin)

    mtime = _round_to_millis(stat.st_mtime_ns)
    if isinstance(prev, Timestamp) and prev == mtime:
        return UpToDate()
    if isinstance(event_time_source, models.EventTimeSourceFromSystemTime):
        event_time = system_time
    else:
        event_time = mtime
    return Fetched(path, _last_modified_state(mtime), event_time, has_more=False, origin=origin)


def _round_to_millis(epoch_nanos: int) -> Timestamp:
    """chrono's ``round_subsecs(3)``: to the nearest millisecond, halves up."""
    millis = (epoch_nanos + 500_000) // 1_000_000
    return Timestamp.from_epoch_nanos(millis * 1_000_000)


def _fetch_files_glob(
    step: models.FetchStepFilesGlob,
    prev: _Prev,
    system_time: Timestamp,
    base_dir: Path,
    roots: SourceRoots,
) -> Fetched | UpToDate:
    """One new file per call, by name; the state is the name of the file returned.

    Differences from kamu, all in configuration checks made before any file is looked at:
    a non-``ByName`` order and ``fromMetadata`` are errors (kamu panics on the first and
    reports the second only once a file exists). Hidden files (dot-files) are not matched
    by ``*``, unlike Rust's glob crate: they are usually partial downloads or editor
    temporaries. Two pending files with the same name in different directories are an
    error, because a name-only state could never tell them apart (kamu silently skips one).
    Every match is confined, not only the one returned: a symlink leading out is refused
    as soon as it appears, before any file of the source is read.
    """
    if step.order not in (None, models.SourceOrdering.BY_NAME):
        raise FetchError(
            f"{step.path}: FilesGlob can only be ordered ByName, found {step.order}",
            origin=step.path,
        )
    if isinstance(step.event_time, models.EventTimeSourceFromMetadata):
        raise EventTimeError(
            "Files glob source does not support extracting event time fromMetadata, "
            "use fromPath instead",
            origin=step.path,
        )

    try:
        matches = glob_matches(step.path, roots, base_dir)
    except OutsideError as e:
        raise SourceOutsideError(
            f"FilesGlob path {step.path!r} {e}; it is not read", origin=step.path
        ) from None
    last_name = prev if isinstance(prev, str) else None
    pending = sorted(
        (p.name, p.absolute())
        for p in matches
        if p.is_file() and (last_name is None or p.name > last_name)
    )
    if not pending:
        if prev is not None:
            return UpToDate()
        # A relative path is the repository's, as the manifest wrote it: the runner's
        # checkout folder beside it meant nothing in a run's note or result.json.
        raise SourceNotFoundError(f"no files match {step.path}", origin=step.path)

    name, path = pending[0]
    twins = [str(p) for n, p in pending if n == name]
    if len(twins) > 1:
        raise FetchError(
            f"{step.path}: several files are named {name} ({', '.join(twins)}); the source "
            "state records file names only, so only one of them could ever be ingested",
            origin=step.path,
        )

    if isinstance(step.event_time, models.EventTimeSourceFromPath):
        event_time = event_time_from_name(name, step.event_time)
    else:
        event_time = system_time  # unset and FromSystemTime alike, as in kamu
    return Fetched(path, _etag_state(name), event_time, has_more=len(pending) > 1, origin=str(path))


# chrono strftime directives that Python's strptime spells differently or not at all.
_CHRONO_ALIASES = {
    "F": "%Y-%m-%d",
    "T": "%H:%M:%S",
    "R": "%H:%M",
    "D": "%m/%d/%y",
    "h": "%b",
    "e": "%d",
    ":z": "%z",
    "#z": "%z",
    ".f": ".%f",
    ".3f": ".%f",
    ".6f": ".%f",
    "3f": "%f",
    "6f": "%f",
    "%": "%%",
}
_SAME_IN_PYTHON = frozenset("YmdHMSybBaApIjz")
_DIRECTIVE = re.compile(r"%(\.?\d?f|[:#]z|.)")


def event_time_from_name(name: str, source: models.EventTimeSourceFromPath) -> Timestamp:
    """``fromPath``: the regex's group 1, found in the file name, parsed as a time.

    ``timestampFormat`` is a chrono strftime pattern (default ``%Y-%m-%d``), whatever the
    ODF schema's "SimpleDateFormat" says, because that is what kamu parses with. A time
    with a UTC offset is taken as is; one without is taken as UTC, so a date alone is its
    midnight UTC (kamu's result). kamu parses offset-less text as a date only, which loses
    a time of day written in the name; here it is kept.
    """
    try:
        regex = compile_regex(source.pattern)  # RE2: linear time on any name
    except ManifestRegexError as e:
        raise EventTimeError(f"invalid fromPath pattern {quoted(source.pattern)}: {e}") from None
    match = regex.search(name)
    if match is None:
        raise EventTimeError(
            f"fromPath pattern {quoted(source.pattern)} does not match file name {name!r}",
            origin=name,
        )
    text = match.group(1) if regex.groups >= 1 else None
    if text is None:
        raise EventTimeError(
            f"fromPath pattern {quoted(source.pattern)} has no capture group 1 matching {name!r}",
            origin=name,
        )
    fmt = source.timestamp_format or "%Y-%m-%d"
    try:
        parsed = dt.datetime.strptime(text, chrono_to_strptime(fmt))
    except ValueError as e:
        raise EventTimeError(
            f"cannot parse {text!r} (from file name {name!r}) with timestamp format {fmt!r}: {e}",
            origin=name,
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return Timestamp.from_datetime(parsed)


def chrono_to_strptime(fmt: str) -> str:
    """A chrono ``timestampFormat`` as a ``strptime`` format; EventTimeError for a
    directive it has no equivalent for (the plan calls this too, to refuse it early)."""

    def translate(match: re.Match[str]) -> str:
        directive = match.group(1)
        if directive in _CHRONO_ALIASES:
            return _CHRONO_ALIASES[directive]
        if directive in _SAME_IN_PYTHON:
            return f"%{directive}"
        raise ValueError(f"timestamp format directive %{directive} is not supported")

    try:
        return _DIRECTIVE.sub(translate, fmt)
    except ValueError as e:
        raise EventTimeError(f"timestamp format {fmt!r}: {e}") from None


# --- Container ---------------------------------------------------------------------------


def _find_container_runtime() -> str | None:
    for name in CONTAINER_RUNTIMES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def _fetch_container(
    step: models.FetchStepContainer,
    prev: _Prev,
    workdir: Path,
    env: Mapping[str, str],
    limits: DownloadLimits,
) -> Fetched | UpToDate:
    """Run the fetch image; its stdout is the data, files in ``/opt/odf/out`` the state.

    The protocol is kamu's (``container.rs``): ``ODF_ETAG`` / ``ODF_LAST_MODIFIED`` carry
    the previous state (empty when there is none), the container writes a new state to
    ``ODF_NEW_ETAG_PATH`` or ``ODF_NEW_LAST_MODIFIED_PATH`` (RFC 3339), creates
    ``ODF_NEW_HAS_MORE_DATA_PATH`` to ask for another call, and reads ``ODF_BATCH_SIZE``.
    An unchanged state with no output is "up to date"; with output it is a protocol error.

    Differences from kamu: variables reach the container through a file only this user
    can read (``--env-file``), so secrets never appear in a process listing, and the
    runtime itself keeps the runner's environment: given in its environment, a
    manifest's ``DOCKER_HOST`` sent the run, secrets and all, to a daemon of the pull
    request's choosing, and ``BASH_ENV`` ran a script in a shell-script runtime; the output
    directory is world-writable so an image that runs as a non-root user can write its
    state; ``command`` is entrypoint plus leading arguments (kamu joins it into one
    entrypoint string, which breaks any command with arguments); ``command`` is templated
    like ``args``; and a single trailing newline is stripped from the ETag file, as written
    by ``echo``.
    """
    runtime = _find_container_runtime()
    if runtime is None:
        raise ContainerRuntimeError(
            "no container runtime found: install docker or podman and put it on PATH"
        )

    secrets: list[str] = []

    def resolve(text: str) -> str:
        value, inserted = resolve_env_tracked(text, env)
        secrets.extend(inserted)
        return value

    image = resolve(step.image)
    command = [resolve(c) for c in step.command or []]
    args = [resolve(a) for a in step.args or []]
    origin = _masked(f"container {image}", secrets)
    if (problem := container_refs.image_problem(image)) is not None:
        written = "" if image == step.image else f" (written {step.image})"
        raise FetchError(_masked(problem, secrets) + written, origin=origin)

    variables: dict[str, str] = {}
    batch_size = DEFAULT_BATCH_SIZE
    for var in step.env or []:
        if var.value is None:
            host_value = env.get(var.name)
            if host_value is None:
                raise TemplateError(
                    f"environment variable {var.name} not set (passed to the container)",
                    (var.name,),
                )
            secrets.append(host_value)
            value = host_value
        else:
            value = resolve(var.value)
        if var.name == "ODF_BATCH_SIZE":
            try:
                batch_size = int(value, 10)
            except ValueError:
                batch_size = 0
            if batch_size <= 0:
                raise FetchError(
                    f"{origin}: ODF_BATCH_SIZE must be a positive integer", origin=origin
                )
            continue
        variables[var.name] = value

    variables.update(
        ODF_ETAG=prev if isinstance(prev, str) else "",
        ODF_LAST_MODIFIED=prev.isoformat() if isinstance(prev, Timestamp) else "",
        ODF_NEW_ETAG_PATH=f"{CONTAINER_OUT_DIR}/new-etag",
        ODF_NEW_LAST_MODIFIED_PATH=f"{CONTAINER_OUT_DIR}/new-last-modified",
        ODF_NEW_HAS_MORE_DATA_PATH=f"{CONTAINER_OUT_DIR}/new-has-more-data",
        ODF_BATCH_SIZE=str(batch_size),
    )

    workdir.mkdir(parents=True, exist_ok=True)
    env_file = _env_file(variables, workdir, origin)
    out_dir = Path(tempfile.mkdtemp(prefix="container-out-", dir=workdir))
    out_dir.chmod(0o777)
    fd, name = tempfile.mkstemp(prefix="fetch-", suffix=".data", dir=workdir)
    data_path = Path(name)

    container = f"odf-fetch-{uuid.uuid4().hex}"  # to stop the container, not only its client
    argv = [runtime, "run", "--rm", "--name", container]
    argv += ["--volume", f"{out_dir}:{CONTAINER_OUT_DIR}"]
    argv += ["--env-file", str(env_file)]
    if command:
        argv.append(f"--entrypoint={command[0]}")  # joined: never read as an option
    argv += ["--", image, *command[1:], *args]

    try:
        with os.fdopen(fd, "wb") as out, tempfile.TemporaryFile() as err:
            try:
                process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            except OSError as e:
                raise ContainerRuntimeError(
                    f"{origin}: cannot start {runtime}: {e.strerror}", origin=origin
                ) from None
            status = _bounded(process, [runtime, "kill", container], out.fileno(), limits, origin)
            if status != 0:
                err.seek(0)
                tail = _masked(_tail(err.read()), secrets)
                raise ContainerRuntimeError(
                    f"{origin} exited with code {status}" + (f":\n{tail}" if tail else ""),
                    origin=origin,
                    exit_code=status,
                    stderr=tail,
                )
        state, state_value = _read_container_state(out_dir, origin)
        has_more = (out_dir / "new-has-more-data").exists()
        if state is not None and state_value == prev:
            if data_path.stat().st_size != 0:
                raise ContainerRuntimeError(
                    f"{origin}: container protocol error: the source state did not change "
                    "but data was written",
                    origin=origin,
                )
            data_path.unlink()
            return UpToDate()
    except BaseException:
        data_path.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        env_file.unlink(missing_ok=True)
    return Fetched(data_path, state, None, has_more=has_more, origin=origin)


_GRACE_SECONDS = 10.0  # for the runtime's client to end once its container was killed


def _bounded(
    process: subprocess.Popen[bytes],
    kill: list[str],
    output: int,
    limits: DownloadLimits,
    origin: str,
) -> int:
    """The container's exit status, within ``limits``: a container that ran without end
    held the run until the job's own timeout (every dataset after it skipped), wrote
    without end until the disk was full, and ignored the first Ctrl-C or SIGTERM. Past
    either limit, or at that signal, the container itself is killed (``kill``: its
    client's death would leave it running), then its client; a stop raises
    ``KeyboardInterrupt``, as a cut download does."""
    end = time.monotonic() + limits.seconds
    try:
        while True:
            try:
                return process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            stopped, expired = limits.stop(), time.monotonic() >= end
            too_large = os.fstat(output).st_size > limits.size
            if stopped or expired or too_large:
                break
    except KeyboardInterrupt:  # the second signal, or the first in a run that has none
        _end_container(process, kill)
        raise
    _end_container(process, kill)
    if stopped:
        raise KeyboardInterrupt
    if expired:
        reason = (
            f"ran longer than {limits.seconds} s, the longest a fetch may take"
            " (max_download_seconds in [tool.reconciler]); it was stopped"
        )
    else:
        reason = (
            f"wrote more than {limits.size} bytes, the most a fetch may bring"
            " (max_download_size in [tool.reconciler]); it was stopped"
        )
    raise ContainerRuntimeError(f"{origin} {reason}", origin=origin)


def _end_container(process: subprocess.Popen[bytes], kill: list[str]) -> None:
    """Kill the container by name, then wait for its client (killed too if it lingers).

    A Ctrl-C or SIGTERM meanwhile (the second, or its echo from a process-group signal)
    is held until both are done, then raised: it cut ``docker kill`` short, which left
    the container running, and the run ended as if it had stopped it."""
    interrupted = False
    with contextlib.suppress(OSError):
        # In a session of its own: a second Ctrl-C reaches the whole process group, and
        # killed the killer along with us.
        killer = subprocess.Popen(
            kill, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        interrupted = _wait_out(killer)
    interrupted = _wait_out(process) or interrupted
    if interrupted:
        raise KeyboardInterrupt


def _wait_out(child: subprocess.Popen[bytes]) -> bool:
    """Wait for ``child``, killing it past ``_GRACE_SECONDS``; whether a
    ``KeyboardInterrupt`` came meanwhile (it is held, not raised)."""
    interrupted = False
    end = time.monotonic() + _GRACE_SECONDS
    while True:
        try:
            child.wait(timeout=max(0.0, end - time.monotonic()))
            return interrupted
        except subprocess.TimeoutExpired:
            child.kill()
            end = float("inf")
        except KeyboardInterrupt:
            interrupted = True


def _env_file(variables: Mapping[str, str], workdir: Path, origin: str) -> Path:
    """The container's variables as an ``--env-file`` (``NAME=value`` lines, which docker
    and podman read without quoting), readable by this user alone. A name or value that
    the format cannot hold (a line break, an ``=`` in a name) is refused, naming the
    variable and never its value."""
    lines = []
    for name, value in variables.items():
        problem = container_refs.name_problem(name) or container_refs.value_problem(name, value)
        if problem is not None:
            raise FetchError(f"{origin}: {problem}", origin=origin)
        lines.append(f"{name}={value}\n")
    fd, name = tempfile.mkstemp(prefix="container-env-", dir=workdir)  # mode 0600
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(lines)
    return Path(name)


def _read_container_state(
    out_dir: Path, origin: str
) -> tuple[models.SourceState | None, str | Timestamp | None]:
    etag_file = out_dir / "new-etag"
    last_modified_file = out_dir / "new-last-modified"
    if etag_file.exists():
        etag = etag_file.read_text(encoding="utf-8").removesuffix("\n").removesuffix("\r")
        return _etag_state(etag), etag
    if last_modified_file.exists():
        text = last_modified_file.read_text(encoding="utf-8").strip()
        try:
            last_modified = Timestamp.parse(text)
        except ValueError:
            raise ContainerRuntimeError(
                f"{origin}: container protocol error: new-last-modified holds {text!r}, "
                "not an RFC 3339 timestamp",
                origin=origin,
            ) from None
        return _last_modified_state(last_modified), last_modified
    return None, None


def _tail(raw: bytes) -> str:
    lines = raw.decode("utf-8", errors="replace").rstrip().splitlines()
    text = "\n".join(lines[-_STDERR_TAIL_LINES:])
    return text[-_STDERR_TAIL_CHARS:]
