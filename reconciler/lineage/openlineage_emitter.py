"""The OpenLineage client's side of lineage: events and facets built and sent, and the
client's configuration read.

Only a reconcile that has a transport configured imports this module (see
``openlineage_events.Lineage.from_environment``): the client and its event model cost
about half a second to import, which every ``reconcile`` process would otherwise pay.
What is sent, and why, is described in ``openlineage_events``.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attr
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

from ..masking import Mask
from .openlineage_events import (
    ADAPTER_VERSION,
    INTEGRATION,
    PARENT_JOB,
    PRODUCER,
    VARIABLE_PREFIX,
    LineageDataset,
    Repository,
    RunHandle,
    RunInfo,
    log,
    version,
)

_CLOSE_TIMEOUT_S = 10.0


class Emitter:
    """Sends a reconcile's OpenLineage events through the client."""

    def __init__(
        self,
        client: OpenLineageClient,
        repository: Repository,
        secrets: Sequence[str] = (),
    ) -> None:
        self._client = client
        self.repository = repository
        self._redact = Mask(secrets)
        self._parent_run_id: str | None = None
        self._broken = False

    @property
    def namespace(self) -> str:
        return self.repository.namespace

    def start_parent(self) -> None:
        """START the parent run ``reconcile``; runs started after this one name it as parent."""
        self._parent_run_id = str(generate_new_uuid())
        self._emit(RunState.START, self._parent_run_id, self._parent_job(), [], [], {})

    def finish_parent(self, failed: bool) -> None:
        """COMPLETE (or FAIL) the parent run and close the client's transport."""
        if self._parent_run_id is None:
            return
        state = RunState.FAIL if failed else RunState.COMPLETE
        self._emit(state, self._parent_run_id, self._parent_job(), [], [], {})
        self._parent_run_id = None
        self.close()

    def close(self) -> None:
        """Flush and close the transport (asynchronous transports send what they hold)."""
        try:
            self._client.close(_CLOSE_TIMEOUT_S)
        except Exception as e:
            log.warning("OpenLineage transport did not close cleanly: %s", e)

    @contextmanager
    def run(self, info: RunInfo) -> Iterator[RunHandle]:
        """START on enter; COMPLETE on a normal exit, FAIL when the body raises (re-raised)."""
        handle = RunHandle(str(generate_new_uuid()), info.output)
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
        if self._broken:
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


def _processing_engine() -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        version=version("pyspark"),
        name="spark",
        openlineageAdapterVersion=ADAPTER_VERSION,
        producer=PRODUCER,
    )


# Configuration.


def client_config(path: Path | None, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The client configuration that ``env`` and the config file at ``path`` give, or
    None if none of them configures a transport (the client would then print events to
    the console).

    Sources, later ones winning, as the client itself merges them: the ``openlineage.yml``
    in effect (``openlineage_events.config_file``), ``OPENLINEAGE__...`` variables, then
    ``OPENLINEAGE_URL`` for an HTTP transport when no transport type is set.
    """
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


def _env_config(env: Mapping[str, str]) -> dict[str, Any]:
    """``OPENLINEAGE__A__B=value`` as ``{"a": {"b": value}}``, values parsed as JSON when
    they are JSON, as the client does; reverse-sorted so that top-level keys win."""
    prefix = VARIABLE_PREFIX
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


def start_client(config: dict[str, Any]) -> OpenLineageClient:
    """The client, given its whole configuration: left to itself, it would read only
    ``os.environ`` and the working directory."""
    return OpenLineageClient(config=config)
