"""OpenLineage run events for the reconciler's ingest and transform runs.

Why: lineage tools (Marquez, DataHub, OpenMetadata, ...) cannot read ODF chains, but they
all read OpenLineage. So every ingest and transform run of a reconcile is reported as an
OpenLineage run (START, then COMPLETE or FAIL), all under one parent run for the whole
reconcile, through the ``openlineage-python`` client.

Configuration is the client's own, read from the usual places: ``openlineage.yml`` (the
file named by ``OPENLINEAGE_CONFIG``, else the working directory's, else the repository
root's, else ``~/.openlineage/openlineage.yml``), then ``OPENLINEAGE__...`` variables over
it, then ``OPENLINEAGE_URL`` (with ``OPENLINEAGE_ENDPOINT``, ``OPENLINEAGE_API_KEY``) when no
transport is configured otherwise. The repository root is searched too because
``reconcile --directory`` may run anywhere. Nothing configured, or
``OPENLINEAGE_DISABLED=true``, means no events and no client at all.

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

import datetime as dt
import importlib.metadata
import json
import logging
import os
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import attr
import git
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    OutputDatasetFacet,
    RunFacet,
    datasource_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_location_job,
    sql_job,
)
from openlineage.client.facets import FacetsConfig
from openlineage.client.utils import deep_merge_dicts
from openlineage.client.uuid import generate_new_uuid

log = logging.getLogger(__name__)

PARENT_JOB = "reconcile"
"""Job name of the one parent run that every ingest and transform run of a reconcile has."""

INTEGRATION = "ODF-RECONCILER"
"""``jobType.integration`` of every job this module reports."""

_PACKAGE = "odf-reconciler"
_MIN_SECRET_LENGTH = 8  # shorter environment values ("1", "true", "main") are not secrets
_CLOSE_TIMEOUT_S = 10.0


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


ADAPTER_VERSION = _version(_PACKAGE)
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
    """Emits a reconcile's OpenLineage events; a disabled instance emits nothing."""

    def __init__(
        self,
        client: OpenLineageClient | None,
        repository: Repository,
        secrets: Sequence[str] = (),
    ) -> None:
        self._client = client
        self.repository = repository
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._parent_run_id: str | None = None
        self._broken = False

    @classmethod
    def disabled(cls, repo_root: Path) -> Lineage:
        return cls(None, Repository(namespace=Path(repo_root).resolve().as_uri()))

    @classmethod
    def from_environment(cls, repo_root: Path, env: Mapping[str, str] | None = None) -> Lineage:
        """A client configured the standard OpenLineage way, or a disabled instance.

        ``env`` is the environment to read (``os.environ`` when None). The client is given
        the configuration through its ``config`` argument, built with its own YAML reader,
        key layout and merge, because it would otherwise read only ``os.environ`` and the
        working directory. Invalid configuration logs a warning and disables lineage: it
        must not stop a reconcile.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
            return cls.disabled(repo_root)
        config = client_config(Path(repo_root), environ)
        if config is None:
            return cls.disabled(repo_root)
        try:
            client = OpenLineageClient(config=config)
        except Exception as e:
            log.warning("OpenLineage is configured but its client cannot start: %s", e)
            return cls.disabled(repo_root)
        try:
            repository = Repository.at(Path(repo_root))
        except (git.GitError, OSError, ValueError) as e:  # a damaged .git must not stop a run
            log.warning("OpenLineage cannot read the repository's git metadata: %s", e)
            repository = Repository(namespace=Path(repo_root).resolve().as_uri())
        secrets = [v for v in environ.values() if _may_be_secret(v)]
        return cls(client, repository, secrets)

    @property
    def enabled(self) -> bool:
        return self._client is not None

    @property
    def namespace(self) -> str:
        return self.repository.namespace

    @property
    def parent_run_id(self) -> str | None:
        return self._parent_run_id

    def start_parent(self) -> None:
        """START the parent run ``reconcile``; runs started after this one name it as parent."""
        if not self.enabled:
            return
        self._parent_run_id = str(generate_new_uuid())
        self._emit(RunState.START, self._parent_run_id, self._parent_job(), [], [], {})

    def finish_parent(self, failed: bool) -> None:
        """COMPLETE (or FAIL) the parent run and close the client's transport."""
        if not self.enabled or self._parent_run_id is None:
            return
        state = RunState.FAIL if failed else RunState.COMPLETE
        self._emit(state, self._parent_run_id, self._parent_job(), [], [], {})
        self._parent_run_id = None
        self.close()

    def close(self) -> None:
        """Flush and close the transport (asynchronous transports send what they hold)."""
        if self._client is None:
            return
        try:
            self._client.close(_CLOSE_TIMEOUT_S)
        except Exception as e:
            log.warning("OpenLineage transport did not close cleanly: %s", e)

    @contextmanager
    def run(self, info: RunInfo) -> Iterator[RunHandle]:
        """START on enter; COMPLETE on a normal exit, FAIL when the body raises (re-raised)."""
        handle = RunHandle(str(generate_new_uuid()), info.output)
        if not self.enabled:
            yield handle
            return
        job = self._job(info)
        inputs = [self._input(d) for d in info.inputs]
        self._emit(
            RunState.START,
            handle.run_id,
            job,
            inputs,
            [self._output(info.output, info.output.columns)],
            {},
        )
        try:
            yield handle
        except BaseException as e:
            self._emit(
                RunState.FAIL,
                handle.run_id,
                job,
                inputs,
                [self._output(info.output, handle.output_columns)],
                {"errorMessage": self._error_facet(e)},
            )
            raise
        statistics = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=handle.row_count, size=handle.size_bytes, producer=PRODUCER
        )
        has_statistics = handle.row_count is not None or handle.size_bytes is not None
        output = self._output(
            info.output,
            handle.output_columns,
            {"outputStatistics": statistics} if has_statistics else {},
        )
        self._emit(RunState.COMPLETE, handle.run_id, job, inputs, [output], {})

    # Events and facets.

    def _emit(
        self,
        state: RunState,
        run_id: str,
        job: Job,
        inputs: list[InputDataset],
        outputs: list[OutputDataset],
        run_facets: dict[str, RunFacet],
    ) -> None:
        if self._client is None or self._broken:
            return
        facets: dict[str, RunFacet] = {"processing_engine": _processing_engine()}
        if self._parent_run_id is not None and run_id != self._parent_run_id:
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=self._parent_run_id),
                job=parent_run.Job(namespace=self.namespace, name=PARENT_JOB),
                producer=PRODUCER,
            )
        facets.update(run_facets)
        event = RunEvent(
            eventType=state,
            eventTime=dt.datetime.now(dt.UTC).isoformat(),
            run=Run(runId=run_id, facets=facets),
            job=job,
            inputs=inputs,
            outputs=outputs,
            producer=PRODUCER,
        )
        try:
            self._client.emit(event)
        except Exception as e:
            self._broken = True
            log.warning(
                "OpenLineage %s event for job %r could not be sent (%s); "
                "no more lineage events in this reconcile",
                state.value,
                job.name,
                e,
            )

    def _parent_job(self) -> Job:
        return Job(
            namespace=self.namespace,
            name=PARENT_JOB,
            facets=self._job_facets("RECONCILE", None, None),
        )

    def _job(self, info: RunInfo) -> Job:
        return Job(
            namespace=self.namespace,
            name=info.dataset,
            facets=self._job_facets(info.kind.upper(), info.sql, info.manifest_path),
        )

    def _job_facets(self, job_type: str, sql: str | None, path: str | None) -> dict[str, JobFacet]:
        facets: dict[str, JobFacet] = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH",
                integration=INTEGRATION,
                jobType=job_type,
                producer=PRODUCER,
            )
        }
        if sql is not None:
            facets["sql"] = sql_job.SQLJobFacet(query=sql, dialect="spark", producer=PRODUCER)
        repo = self.repository
        if repo.commit is not None:
            facets["sourceCodeLocation"] = source_code_location_job.SourceCodeLocationJobFacet(
                type="git",
                url=repo.namespace,
                repoUrl=repo.namespace,
                path=path,
                version=repo.commit,
                branch=repo.branch,
                tag=repo.tag,
                producer=PRODUCER,
            )
        return facets

    def _dataset_facets(self, columns: Sequence[tuple[str, str]]) -> dict[str, DatasetFacet]:
        facets: dict[str, DatasetFacet] = {
            "dataSource": datasource_dataset.DatasourceDatasetFacet(
                name=self.namespace, uri=self.namespace, producer=PRODUCER
            )
        }
        if columns:
            facets["schema"] = schema_dataset.SchemaDatasetFacet(
                fields=[
                    schema_dataset.SchemaDatasetFacetFields(name=name, type=type_)
                    for name, type_ in columns
                ],
                producer=PRODUCER,
            )
        return facets

    def _input(self, dataset: LineageDataset) -> InputDataset:
        return InputDataset(
            namespace=self.namespace,
            name=dataset.name,
            facets=self._dataset_facets(dataset.columns),
        )

    def _output(
        self,
        dataset: LineageDataset,
        columns: Sequence[tuple[str, str]],
        output_facets: dict[str, OutputDatasetFacet] | None = None,
    ) -> OutputDataset:
        return OutputDataset(
            namespace=self.namespace,
            name=dataset.name,
            facets=self._dataset_facets(columns),
            outputFacets=output_facets or {},
        )

    def _error_facet(self, error: BaseException) -> error_message_run.ErrorMessageRunFacet:
        message = "".join(traceback.format_exception_only(error)).strip()
        trace = "".join(traceback.format_exception(error)).rstrip()
        return error_message_run.ErrorMessageRunFacet(
            message=self._redact(message),
            programmingLanguage="python",
            stackTrace=self._redact(trace),
            producer=PRODUCER,
        )

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _processing_engine() -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        version=_version("pyspark"),
        name="spark",
        openlineageAdapterVersion=ADAPTER_VERSION,
        producer=PRODUCER,
    )


def _may_be_secret(value: str) -> bool:
    """Environment values worth redacting: long enough, and not a path or a path list."""
    if len(value) < _MIN_SECRET_LENGTH or value.startswith(("/", "~")):
        return False
    return not all(p.startswith("/") for p in value.split(os.pathsep) if p)


# Configuration.


def client_config(repo_root: Path, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The client configuration that ``env`` and the config files give, or None if none
    of them configures a transport (the client would then print events to the console).

    Sources, later ones winning, as the client itself merges them: the first
    ``openlineage.yml`` found (see :func:`config_file`), ``OPENLINEAGE__...`` variables,
    then ``OPENLINEAGE_URL`` for an HTTP transport when no transport type is set.
    """
    path = config_file(repo_root, env)
    from_file = OpenLineageClient._get_config_file_content(str(path)) if path else {}
    config = deep_merge_dicts(from_file, _env_config(env))
    transport = config.get("transport")
    if not (isinstance(transport, dict) and transport.get("type")):
        url = env.get("OPENLINEAGE_URL")
        if not url:
            return None
        http: dict[str, Any] = {
            "type": "http",
            "url": url,
            "endpoint": env.get("OPENLINEAGE_ENDPOINT", "api/v1/lineage"),
        }
        if api_key := env.get("OPENLINEAGE_API_KEY"):
            http["auth"] = {"type": "api_key", "apiKey": api_key}
        config["transport"] = http
    return deep_merge_dicts(config, _forced_config())


def config_file(repo_root: Path, env: Mapping[str, str]) -> Path | None:
    """The ``openlineage.yml`` in effect: ``OPENLINEAGE_CONFIG``'s, the working directory's,
    the repository root's, then ``~/.openlineage/openlineage.yml`` (the client's order,
    with the repository root added before the home folder)."""
    candidates = [
        env.get("OPENLINEAGE_CONFIG"),
        Path.cwd() / "openlineage.yml",
        Path(repo_root) / "openlineage.yml",
        Path(env.get("HOME") or Path.home()) / ".openlineage" / "openlineage.yml",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.R_OK):
            return Path(candidate)
    return None


def _env_config(env: Mapping[str, str]) -> dict[str, Any]:
    """``OPENLINEAGE__A__B=value`` as ``{"a": {"b": value}}``, values parsed as JSON when
    they are JSON, as the client does; reverse-sorted so that top-level keys win."""
    prefix = OpenLineageClient.DYNAMIC_ENV_VARS_PREFIX
    config: dict[str, Any] = {}
    for key, raw in sorted(((k, v) for k, v in env.items() if k.startswith(prefix)), reverse=True):
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        OpenLineageClient._insert_into_config(config, key[len(prefix) :].split("__"), value)
    return config


def _forced_config() -> dict[str, Any]:
    """Settings that keep environment values and raw remote URLs out of every event."""
    known = attr.fields_dict(FacetsConfig)
    facets: dict[str, Any] = {}
    if "environment_variables" in known:
        facets["environment_variables"] = []
    if "source_code_location" in known:
        facets["source_code_location"] = {"disabled": True}
    return {"facets": facets} if facets else {}
