"""OpenLineage run events for the reconciler's ingest and transform runs.

Why: lineage tools (Marquez, DataHub, OpenMetadata, ...) cannot read ODF chains, but they
all read OpenLineage. So every ingest and transform run of a reconcile is reported as an
OpenLineage run (START, then COMPLETE or FAIL), all under one parent run for the whole
reconcile, through the ``openlineage-python`` client.

Configuration is the client's own, read from the places the runner controls: an
``openlineage.yml`` (the file named by ``OPENLINEAGE_CONFIG``, else
``~/.openlineage/openlineage.yml``), then ``OPENLINEAGE__...`` variables over it, then
``OPENLINEAGE_URL`` (with ``OPENLINEAGE_ENDPOINT``, ``OPENLINEAGE_API_KEY``) when no
transport is configured otherwise. Never a file of the repository: the client's first
place, the working directory's ``openlineage.yml``, is the checkout's top in a workflow,
and a file there comes from a pull request, which chose with it where every event went
(any URL, a file transport appending to any file of the runner, a transport class to
import). Such a file is left unread with a warning, and a configuration file named
inside the checkout turns lineage off. Nothing configured, or
``OPENLINEAGE_DISABLED=true``, means no events and no client at all: the client is not
even imported (``openlineage_emitter`` holds all that needs it, half a second of imports
that every ``reconcile apply`` paid before).

Naming (see the OpenLineage naming conventions):

- Namespace: the repository. The URL of its ``origin`` remote with user, password, query
  and fragment removed (an scp-like ``git@host:org/repo.git`` becomes
  ``ssh://host/org/repo.git``); without an ``origin``, the ``file://`` URI of the
  repository root.
- Jobs: one per dataset, named by the dataset; the parent job is ``reconcile``.
- Datasets: namespace = the repository namespace, name = the ODF dataset name. ODF
  datasets live inside the repository (``odf/<name>``), so the repository is their data
  source; the ``dataSource`` facet says so with name and URI both equal to the namespace.

Lineage is best effort. An event that cannot be sent is logged as a warning and the
reconcile goes on; after the first such failure the rest of this reconcile's events are
skipped, because an unreachable backend would otherwise cost every event the client's whole
retry budget. Events never carry environment values: the client's environment-variables
facet is switched off, remote URLs lose their credentials, and error messages have every
environment value of eight characters or more replaced by ``***``.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit, urlunsplit

import git

from ..gitloop import gitops

if TYPE_CHECKING:
    from .openlineage_emitter import Emitter

log = logging.getLogger(__name__)
"""Lineage's one logger, ``openlineage_emitter``'s warnings included."""

PARENT_JOB = "reconcile"
"""Job name of the one parent run that every ingest and transform run of a reconcile has."""

INTEGRATION = "ODF-RECONCILER"
"""``jobType.integration`` of every job this module reports."""

_PACKAGE = "odf-reconciler"
_MIN_SECRET_LENGTH = 8  # shorter environment values ("1", "true", "main") are not secrets
VARIABLE_PREFIX = "OPENLINEAGE__"
"""The client's prefix for configuration in variables (``OPENLINEAGE__TRANSPORT__URL``):
its ``DYNAMIC_ENV_VARS_PREFIX``, spelled here so that telling whether any is set does not
import the client."""


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


ADAPTER_VERSION = version(_PACKAGE)
PRODUCER = f"urn:{_PACKAGE}:{ADAPTER_VERSION}"
"""The ``producer`` URI of every event and facet: this package and its version."""


@dataclass(frozen=True)
class LineageDataset:
    """An ODF dataset as an OpenLineage dataset."""

    name: str  # ODF dataset name
    columns: Sequence[tuple[str, str]] = ()  # (name, type) for the schema facet


@dataclass(frozen=True)
class RunInfo:
    """What one ingest or transform run reads and writes."""

    dataset: str  # the output dataset name (= job name)
    kind: Literal["ingest", "transform"]
    inputs: Sequence[LineageDataset]
    output: LineageDataset
    sql: str | None = None
    manifest_path: str | None = None  # repo-relative path of the manifest


@dataclass(frozen=True)
class Repository:
    """The repository as OpenLineage sees it: its namespace and the checked-out commit."""

    namespace: str
    commit: str | None = None  # HEAD's sha; None outside git or before the first commit
    branch: str | None = None
    tag: str | None = None

    @classmethod
    def at(cls, root: Path) -> Repository:
        root = Path(root).resolve()
        try:
            repo = git.Repo(root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return cls(namespace=root.as_uri())
        with repo:
            return cls(
                namespace=repository_namespace(root, repo),
                commit=_head_commit(repo),
                branch=None if repo.head.is_detached else repo.active_branch.name,
                tag=_head_tag(repo),
            )


def repository_namespace(root: Path, repo: git.Repo | None = None) -> str:
    """The OpenLineage namespace of the repository at ``root`` (see the module docstring)."""
    root = Path(root).resolve()
    try:
        repo = repo or git.Repo(root)
        url = repo.remote("origin").url
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return root.as_uri()
    return public_url(url, root)


def public_url(url: str, base: Path) -> str:
    """``url`` without user, password, query or fragment; an scp-like ``user@host:path``
    becomes ``ssh://host/path`` and a local path (relative to ``base``) a ``file://`` URI."""
    if "://" not in url and ":" in url.split("/", 1)[0]:
        host, _, path = url.partition(":")  # git@github.com:org/repo.git
        url = f"ssh://{host}/{path.lstrip('/')}"
    parts = urlsplit(url)
    if not parts.scheme:
        return (base / url).resolve().as_uri()  # a local path used as a remote
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # IPv6
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _head_commit(repo: git.Repo) -> str | None:
    try:
        return repo.head.commit.hexsha
    except ValueError:  # no commit yet
        return None


def _head_tag(repo: git.Repo) -> str | None:
    sha = _head_commit(repo)
    if sha is None:
        return None
    tags = sorted(t.name for t in repo.tags if t.commit.hexsha == sha)
    return tags[0] if tags else None


class RunHandle:
    """The run in progress: its id, and what the body learned about the output."""

    def __init__(self, run_id: str, output: LineageDataset) -> None:
        self.run_id = run_id
        self.output_columns: Sequence[tuple[str, str]] = output.columns
        self.row_count: int | None = None
        self.size_bytes: int | None = None

    def set_output_statistics(self, rows: int, size_bytes: int) -> None:
        """Rows and bytes written by this run, reported as ``outputStatistics`` on COMPLETE."""
        self.row_count = rows
        self.size_bytes = size_bytes

    def set_output_schema(self, columns: Sequence[tuple[str, str]]) -> None:
        """The output's schema as written, reported on COMPLETE instead of the planned one."""
        self.output_columns = tuple(columns)


class Lineage:
    """Emits a reconcile's OpenLineage events; a disabled instance emits nothing and
    never imports the client."""

    def __init__(self, emitter: Emitter | None) -> None:
        self._emitter = emitter

    @classmethod
    def disabled(cls) -> Lineage:
        return cls(None)

    @classmethod
    def from_environment(cls, repo_root: Path, env: Mapping[str, str] | None = None) -> Lineage:
        """A client configured the standard OpenLineage way, or a disabled instance.

        ``env`` is the environment to read (``os.environ`` when None). The client is given
        the configuration through its ``config`` argument, built with its own YAML reader,
        key layout and merge, because it would otherwise read only ``os.environ`` and the
        working directory. Invalid configuration logs a warning and disables lineage: it
        must not stop a reconcile. Where no source of configuration exists at all (no
        file, no ``OPENLINEAGE_URL`` or ``OPENLINEAGE__...`` variable), the client is not
        even imported.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
            return cls.disabled()
        checkout = _checkout(Path(repo_root))
        for unread in dict.fromkeys((Path.cwd() / _FILE, Path(repo_root) / _FILE)):
            if unread.is_file() and unread.resolve().is_relative_to(checkout):
                log.warning(
                    "%s is not read: a pull request can change it, and with it where"
                    " lineage goes; name a file outside the checkout in OPENLINEAGE_CONFIG",
                    unread,
                )
        path = config_file(environ)
        if path is not None and path.resolve().is_relative_to(checkout):
            log.warning(
                "OpenLineage is off: its configuration %s is inside the checkout, where a"
                " pull request can change it; keep it outside",
                path,
            )
            return cls.disabled()
        has_variables = any(key.startswith(VARIABLE_PREFIX) for key in environ)
        if not (path or has_variables or environ.get("OPENLINEAGE_URL")):
            return cls.disabled()
        from .openlineage_emitter import Emitter, client_config, start_client

        config = client_config(path, environ)
        if config is None:
            return cls.disabled()
        try:
            client = start_client(config)
        except Exception as e:
            log.warning("OpenLineage is configured but its client cannot start: %s", e)
            return cls.disabled()
        try:
            repository = Repository.at(Path(repo_root))
        except (git.GitError, OSError, ValueError) as e:  # a damaged .git must not stop a run
            log.warning("OpenLineage cannot read the repository's git metadata: %s", e)
            repository = Repository(namespace=Path(repo_root).resolve().as_uri())
        secrets = [v for v in environ.values() if _may_be_secret(v)]
        return cls(Emitter(client, repository, secrets))

    @property
    def enabled(self) -> bool:
        return self._emitter is not None

    @property
    def repository(self) -> Repository | None:
        """The repository as the events name it; None when disabled."""
        return None if self._emitter is None else self._emitter.repository

    def start_parent(self) -> None:
        """START the parent run ``reconcile``; runs started after this one name it as parent."""
        if self._emitter is not None:
            self._emitter.start_parent()

    def finish_parent(self, failed: bool) -> None:
        """COMPLETE (or FAIL) the parent run and close the client's transport."""
        if self._emitter is not None:
            self._emitter.finish_parent(failed)

    @contextmanager
    def run(self, info: RunInfo) -> Iterator[RunHandle]:
        """START on enter; COMPLETE on a normal exit, FAIL when the body raises (re-raised)."""
        if self._emitter is None:
            yield RunHandle(str(uuid.uuid4()), info.output)
            return
        with self._emitter.run(info) as handle:
            yield handle


def _checkout(repo_root: Path) -> Path:
    """The top of the git checkout holding the repository (its root outside git): all of
    it a pull request can write."""
    try:
        return gitops.top_of(repo_root)
    except gitops.GitError:
        return repo_root.resolve()


def _may_be_secret(value: str) -> bool:
    """Environment values worth redacting: long enough, and not a path or a path list."""
    if len(value) < _MIN_SECRET_LENGTH or value.startswith(("/", "~")):
        return False
    return not all(p.startswith("/") for p in value.split(os.pathsep) if p)


_FILE = "openlineage.yml"


def config_file(env: Mapping[str, str]) -> Path | None:
    """The ``openlineage.yml`` in effect: ``OPENLINEAGE_CONFIG``'s, else
    ``~/.openlineage/openlineage.yml`` (the client's order, without its first place, the
    working directory: see the module's docstring)."""
    candidates = [
        env.get("OPENLINEAGE_CONFIG"),
        Path(env.get("HOME") or Path.home()) / ".openlineage" / _FILE,
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.R_OK):
            return Path(candidate)
    return None
