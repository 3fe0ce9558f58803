"""OpenLineage run events, sent by the real client to a real HTTP server on 127.0.0.1
from a real git repository, and checked against the OpenLineage JSON schemas (the
server and the schemas are in ``openlineage_backend``).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import jsonschema
import pyspark
import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from openlineage_backend import CORE, FACETS, Backend, isolated_home, serve, validate
from referencing.exceptions import Unresolvable

from reconciler.lineage.openlineage_events import (
    Lineage,
    LineageDataset,
    Repository,
    RunInfo,
    public_url,
)

PRODUCER = f"urn:odf-reconciler:{importlib.metadata.version('odf-reconciler')}"
REMOTE = "https://ci-bot:s3cr3t-token-42@git.example.org/data/odf-repo.git?ref=x#frag"
NAMESPACE = "https://git.example.org/data/odf-repo.git"
JOIN_SQL = "SELECT a.id, a.v, b.w FROM `example.a` a JOIN `example.b` b ON a.id = b.id"


# The receiving end: a real HTTP server.


@pytest.fixture
def backend() -> Iterator[Backend]:
    with serve() as backend:
        yield backend


# The sending end: a real git repository with manifests, and an environment that names
# only what each test gives it.


@dataclass
class Repo:
    root: Path
    commit: str


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_home(tmp_path, monkeypatch)


def make_repo(root: Path, remote: str | None = REMOTE) -> Repo:
    repo = GitOpsRepo.create(root)
    repo.write("example.a", manifest("example.a", "Root", root_events("[id BIGINT, v STRING]")))
    repo.write("example.b", manifest("example.b", "Root", root_events("[id BIGINT, w DOUBLE]")))
    repo.write(
        "example.join",
        manifest(
            "example.join",
            "Derivative",
            derivative_events(["example.a", "example.b"], JOIN_SQL),
        ),
    )
    commit = repo.commit("datasets")
    if remote is not None:
        git.Repo(root).create_remote("origin", remote)
    return Repo(root, commit)


def http_env(home: Path, backend_url: str, **extra: str) -> dict[str, str]:
    return {
        "HOME": str(home),
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": backend_url,
        **extra,
    }


A = LineageDataset("example.a", (("id", "BIGINT"), ("v", "STRING")))
B = LineageDataset("example.b", (("id", "BIGINT"), ("w", "DOUBLE")))
JOIN = LineageDataset("example.join", (("id", "BIGINT"), ("v", "STRING"), ("w", "DOUBLE")))
INGEST_A = RunInfo("example.a", "ingest", (), A, manifest_path="datasets/example.a.yaml")
TRANSFORM_JOIN = RunInfo(
    "example.join", "transform", (A, B), JOIN, JOIN_SQL, "datasets/example.join.yaml"
)


# Expected facets, written out in full.


def facet(schema: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{FACETS}/{schema}", **fields}


def job_facets(job_type: str, commit: str, path: str | None, sql: str | None) -> dict[str, Any]:
    location = {"path": path} if path else {}
    facets = {
        "jobType": facet(
            "2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
            processingType="BATCH",
            integration="ODF-RECONCILER",
            jobType=job_type,
        ),
        "sourceCodeLocation": facet(
            "1-1-0/SourceCodeLocationJobFacet.json#/$defs/SourceCodeLocationJobFacet",
            type="git",
            url=NAMESPACE,
            repoUrl=NAMESPACE,
            **location,
            version=commit,
            branch="main",
        ),
    }
    if sql is not None:
        facets["sql"] = facet(
            "1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet", query=sql, dialect="spark"
        )
    return facets


def dataset(ds: LineageDataset, **output_facets: Any) -> dict[str, Any]:
    fields = [{"name": n, "type": t, "fields": []} for n, t in ds.columns]
    out: dict[str, Any] = {
        "namespace": NAMESPACE,
        "name": ds.name,
        "facets": {
            "dataSource": facet(
                "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
                name=NAMESPACE,
                uri=NAMESPACE,
            ),
            "schema": facet(
                "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet", fields=fields
            ),
        },
    }
    return out


def output(ds: LineageDataset, statistics: dict[str, int] | None = None) -> dict[str, Any]:
    facets = {}
    if statistics is not None:
        facets["outputStatistics"] = facet(
            "1-0-2/OutputStatisticsOutputDatasetFacet.json"
            "#/$defs/OutputStatisticsOutputDatasetFacet",
            **statistics,
        )
    return {**dataset(ds), "outputFacets": facets}


def an_input(ds: LineageDataset) -> dict[str, Any]:
    return {**dataset(ds), "inputFacets": {}}


PROCESSING_ENGINE = facet(
    "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
    version=pyspark.__version__,
    name="spark",
    openlineageAdapterVersion=importlib.metadata.version("odf-reconciler"),
)


def parent_facet(run_id: str) -> dict[str, Any]:
    return facet(
        "1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
        run={"runId": run_id, "facets": {}},
        job={"namespace": NAMESPACE, "name": "reconcile", "facets": {}},
    )


def ours(run_facets: dict[str, Any]) -> dict[str, Any]:
    """Run facets without the client's own ``tags`` facet (its version, added by the client)."""
    assert run_facets["tags"]["tags"] == [
        {
            "key": "openlineage_client_version",
            "value": importlib.metadata.version("openlineage-python"),
            "source": "OPENLINEAGE_CLIENT",
        }
    ]
    return {k: v for k, v in run_facets.items() if k != "tags"}


# A reconcile's events.


def test_a_reconcile_sends_parent_and_child_start_and_complete_events_in_order(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, http_env(home, backend.url))
    assert lineage.enabled

    lineage.start_parent()
    with lineage.run(INGEST_A) as ingest:
        ingest.set_output_statistics(rows=3, size_bytes=1234)
    with lineage.run(TRANSFORM_JOIN) as transform:
        transform.set_output_statistics(rows=2, size_bytes=987)
    lineage.finish_parent(failed=False)

    assert [path for path, _ in backend.received] == ["/api/v1/lineage"] * 6
    events = backend.events
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [
        ("START", "reconcile"),
        ("START", "example.a"),
        ("COMPLETE", "example.a"),
        ("START", "example.join"),
        ("COMPLETE", "example.join"),
        ("COMPLETE", "reconcile"),
    ]
    for event in events:
        validate(event)
        assert event["producer"] == PRODUCER
        assert event["schemaURL"] == f"{CORE}#/$defs/RunEvent"
        assert event["job"]["namespace"] == NAMESPACE

    parent_id = events[0]["run"]["runId"]
    assert events[5]["run"]["runId"] == parent_id
    assert events[1]["run"]["runId"] == events[2]["run"]["runId"] == ingest.run_id
    assert events[3]["run"]["runId"] == events[4]["run"]["runId"] == transform.run_id
    assert len({parent_id, ingest.run_id, transform.run_id}) == 3

    for parent_event in (events[0], events[5]):
        assert ours(parent_event["run"]["facets"]) == {"processing_engine": PROCESSING_ENGINE}
        assert parent_event["job"]["facets"] == job_facets("RECONCILE", repo.commit, None, None)
        assert parent_event["inputs"] == parent_event["outputs"] == []

    child_run_facets = {"parent": parent_facet(parent_id), "processing_engine": PROCESSING_ENGINE}
    for child_event in events[1:5]:
        assert ours(child_event["run"]["facets"]) == child_run_facets

    ingest_job = job_facets("INGEST", repo.commit, "datasets/example.a.yaml", None)
    assert events[1]["job"]["facets"] == events[2]["job"]["facets"] == ingest_job
    assert events[1]["inputs"] == events[2]["inputs"] == []
    assert events[1]["outputs"] == [output(A)]
    assert events[2]["outputs"] == [output(A, {"rowCount": 3, "size": 1234})]

    join_job = job_facets("TRANSFORM", repo.commit, "datasets/example.join.yaml", JOIN_SQL)
    assert events[3]["job"]["facets"] == events[4]["job"]["facets"] == join_job
    assert events[3]["inputs"] == events[4]["inputs"] == [an_input(A), an_input(B)]
    assert events[3]["outputs"] == [output(JOIN)]
    assert events[4]["outputs"] == [output(JOIN, {"rowCount": 2, "size": 987})]


def test_the_output_schema_set_by_the_run_replaces_the_planned_one_on_complete(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, http_env(home, backend.url))
    written = (("id", "BIGINT"), ("v", "STRING"), ("w", "DOUBLE"), ("offset", "BIGINT"))

    with lineage.run(TRANSFORM_JOIN) as run:
        run.set_output_schema(written)

    start, complete = backend.events
    assert start["outputs"] == [output(JOIN)]
    assert complete["outputs"] == [output(LineageDataset("example.join", written))]
    assert "parent" not in start["run"]["facets"]  # no parent run was started


def test_a_failing_run_sends_fail_with_the_error_and_the_error_still_propagates(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    secret = "tok-9f8e7d6c5b4a"
    env = http_env(home, backend.url, ACME_API_KEY=secret)
    lineage = Lineage.from_environment(repo.root, env)

    lineage.start_parent()
    with pytest.raises(RuntimeError, match=secret), lineage.run(TRANSFORM_JOIN):
        raise RuntimeError(f"GET https://api.example.org/prices?key={secret} answered 500")
    lineage.finish_parent(failed=True)

    events = backend.events
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [
        ("START", "reconcile"),
        ("START", "example.join"),
        ("FAIL", "example.join"),
        ("FAIL", "reconcile"),
    ]
    for event in events:
        validate(event)
    fail = events[2]
    error = fail["run"]["facets"]["errorMessage"]
    assert (
        error["_schemaURL"]
        == f"{FACETS}/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
    )
    assert (
        error["message"] == "RuntimeError: GET https://api.example.org/prices?key=*** answered 500"
    )
    assert error["programmingLanguage"] == "python"
    assert error["stackTrace"].startswith("Traceback (most recent call last):\n")
    assert error["stackTrace"].endswith(
        "RuntimeError: GET https://api.example.org/prices?key=*** answered 500"
    )
    assert fail["run"]["facets"]["parent"] == parent_facet(events[0]["run"]["runId"])
    assert fail["inputs"] == [an_input(A), an_input(B)]
    assert fail["outputs"] == [output(JOIN)]
    assert "errorMessage" not in events[3]["run"]["facets"]
    assert secret not in json.dumps(events)


def test_no_event_carries_credentials_of_the_remote_or_environment_values(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = http_env(home, backend.url, OPENLINEAGE__TRANSPORT__TIMEOUT="7")
    lineage = Lineage.from_environment(repo.root, env)

    lineage.start_parent()
    with lineage.run(TRANSFORM_JOIN):
        pass
    lineage.finish_parent(failed=False)

    sent = json.dumps(backend.events)
    assert "s3cr3t-token-42" not in sent and "ci-bot" not in sent and "frag" not in sent
    assert {k for k, v in env.items() if len(v) >= 8} == {"HOME", "OPENLINEAGE__TRANSPORT__URL"}
    for name, value in env.items():
        if len(value) >= 8:
            assert value not in sent, name


# Configuration: the client's own sources, and nothing configured means nothing sent.


@pytest.mark.parametrize("way", ["env-vars", "OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "home-file"])
def test_each_standard_configuration_source_turns_events_on(
    way: str, tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    config = f"transport:\n  type: http\n  url: {backend.url}\n"
    env = {"HOME": str(home)}
    if way == "env-vars":
        env = http_env(home, backend.url)
    elif way == "OPENLINEAGE_URL":
        env["OPENLINEAGE_URL"] = backend.url
    elif way == "OPENLINEAGE_CONFIG":
        (tmp_path / "elsewhere.yml").write_text(config)
        env["OPENLINEAGE_CONFIG"] = str(tmp_path / "elsewhere.yml")
    else:
        (home / ".openlineage").mkdir()
        (home / ".openlineage" / "openlineage.yml").write_text(config)

    lineage = Lineage.from_environment(repo.root, env)
    lineage.start_parent()
    lineage.finish_parent(failed=False)

    assert lineage.enabled
    assert [(p, e["eventType"]) for p, e in backend.received] == [
        ("/api/v1/lineage", "START"),
        ("/api/v1/lineage", "COMPLETE"),
    ]


@pytest.mark.parametrize("where", ["working-directory", "repository-root", "named-inside"])
def test_no_file_of_the_checkout_configures_lineage(
    where: str,
    tmp_path: Path,
    home: Path,
    backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pull request adding ``openlineage.yml`` chose where the scheduled run's events
    went: any URL, or a file transport appending the events (their SQL quoted from the
    manifests) to any file of the runner."""
    repo = make_repo(tmp_path / "repo")
    victim = tmp_path / "outside" / "bashrc"
    victim.parent.mkdir()
    config = (
        "transport:\n  type: composite\n  transports:\n"
        f"    - {{type: http, url: '{backend.url}'}}\n"
        f"    - {{type: file, log_file_path: '{victim}', append: true}}\n"
    )
    env = {"HOME": str(home)}
    if where == "working-directory":
        (repo.root / "datasets").mkdir(exist_ok=True)
        (repo.root / "datasets" / "openlineage.yml").write_text(config)
        monkeypatch.chdir(repo.root / "datasets")
        shown = repo.root / "datasets" / "openlineage.yml"
    elif where == "repository-root":
        (repo.root / "openlineage.yml").write_text(config)
        monkeypatch.chdir(repo.root)
        shown = repo.root / "openlineage.yml"
    else:
        (repo.root / "lineage.yml").write_text(config)
        env["OPENLINEAGE_CONFIG"] = str(repo.root / "lineage.yml")
    with caplog.at_level("WARNING", logger="reconciler.lineage.openlineage_events"):
        lineage = Lineage.from_environment(repo.root, env)
    lineage.start_parent()
    lineage.finish_parent(failed=False)

    assert (lineage.enabled, backend.received, victim.exists()) == (False, [], False)
    if where == "named-inside":
        assert caplog.messages == [
            f"OpenLineage is off: its configuration {repo.root / 'lineage.yml'} is inside the"
            " checkout, where a pull request can change it; keep it outside"
        ]
    else:
        assert caplog.messages == [
            f"{shown} is not read: a pull request can change it, and with it where lineage"
            " goes; name a file outside the checkout in OPENLINEAGE_CONFIG"
        ]


def test_environment_variables_override_the_config_file(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "openlineage.yml").write_text(
        f"transport:\n  type: http\n  url: http://127.0.0.1:{closed_port()}\n  endpoint: file\n"
    )
    env = {
        "HOME": str(home),
        "OPENLINEAGE_CONFIG": str(tmp_path / "openlineage.yml"),
        "OPENLINEAGE__TRANSPORT__URL": backend.url,
    }

    lineage = Lineage.from_environment(repo.root, env)
    lineage.start_parent()

    assert [p for p, _ in backend.received] == ["/file"]


def test_nothing_configured_means_disabled_and_no_request(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, {"HOME": str(home)})

    lineage.start_parent()
    with lineage.run(TRANSFORM_JOIN) as run:
        run.set_output_statistics(rows=1, size_bytes=1)
    with pytest.raises(ValueError, match="still raised"), lineage.run(INGEST_A):
        raise ValueError("still raised")
    lineage.finish_parent(failed=True)

    assert lineage.enabled is False
    assert backend.received == []


def test_a_config_file_without_a_transport_configures_nothing(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "openlineage.yml").write_text("facets:\n  environment_variables: [HOME]\n")
    env = {"HOME": str(home), "OPENLINEAGE_CONFIG": str(tmp_path / "openlineage.yml")}

    lineage = Lineage.from_environment(repo.root, env)

    assert lineage.enabled is False


def test_openlineage_disabled_wins_over_any_configuration(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = http_env(home, backend.url, OPENLINEAGE_DISABLED="true")

    lineage = Lineage.from_environment(repo.root, env)
    lineage.start_parent()
    with lineage.run(TRANSFORM_JOIN):
        pass
    lineage.finish_parent(failed=False)

    assert lineage.enabled is False
    assert backend.received == []


def test_an_invalid_configuration_disables_lineage_with_a_warning(
    tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {"HOME": str(home), "OPENLINEAGE__TRANSPORT__TYPE": "http"}  # http without a url

    with caplog.at_level(logging.WARNING, logger="reconciler.lineage.openlineage_events"):
        lineage = Lineage.from_environment(repo.root, env)

    assert lineage.enabled is False
    assert [r.getMessage() for r in ours_logged(caplog)] == [
        "OpenLineage is configured but its client cannot start: `url` key not passed to HttpConfig"
    ]


# Failures to send never fail the reconcile.


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_backend_logs_one_warning_and_never_raises(
    tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = http_env(
        home, f"http://127.0.0.1:{closed_port()}", OPENLINEAGE__TRANSPORT__RETRY='{"total": 0}'
    )
    lineage = Lineage.from_environment(repo.root, env)
    ran = []

    with caplog.at_level(logging.WARNING, logger="reconciler.lineage.openlineage_events"):
        lineage.start_parent()
        with lineage.run(TRANSFORM_JOIN) as run:
            run.set_output_statistics(rows=2, size_bytes=10)
            ran.append(run.run_id)
        with pytest.raises(KeyError), lineage.run(INGEST_A):
            raise KeyError("the body's own error still propagates")
        lineage.finish_parent(failed=True)

    assert lineage.enabled and len(ran) == 1
    messages = [r.getMessage() for r in ours_logged(caplog)]
    assert len(messages) == 1
    assert messages[0].startswith("OpenLineage START event for job 'reconcile' could not be sent (")
    assert messages[0].endswith("); no more lineage events in this reconcile")


def test_a_backend_that_rejects_an_event_costs_the_rest_of_the_events_not_the_run(
    tmp_path: Path, home: Path, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    repo = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, http_env(home, backend.url))
    backend.status = 400

    with caplog.at_level(logging.WARNING, logger="reconciler.lineage.openlineage_events"):
        lineage.start_parent()
        with lineage.run(INGEST_A) as run:
            run.set_output_statistics(rows=1, size_bytes=2)
        lineage.finish_parent(failed=False)

    assert [(e["eventType"], e["job"]["name"]) for e in backend.events] == [("START", "reconcile")]
    assert [r.getMessage().split(" (")[0] for r in ours_logged(caplog)] == [
        "OpenLineage START event for job 'reconcile' could not be sent"
    ]


def ours_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "reconciler.lineage.openlineage_events"]


# Namespaces.


@pytest.mark.parametrize(
    ("remote", "namespace"),
    [
        ("https://user:pass@github.com/org/repo.git", "https://github.com/org/repo.git"),
        (
            "https://token@gitlab.example.org:8443/g/r.git?private_token=x#y",
            "https://gitlab.example.org:8443/g/r.git",
        ),
        ("git@github.com:org/repo.git", "ssh://github.com/org/repo.git"),
        (
            "ssh://git@host.example.org:2222/srv/repo.git",
            "ssh://host.example.org:2222/srv/repo.git",
        ),
        ("/srv/git/repo.git", "file:///srv/git/repo.git"),
        ("../upstream.git", "file:///base/upstream.git"),
    ],
)
def test_remote_urls_become_namespaces_without_credentials(remote: str, namespace: str) -> None:
    assert public_url(remote, Path("/base/repo")) == namespace


def test_without_an_origin_the_namespace_is_the_file_uri_of_the_repository_root(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo", remote=None)
    lineage = Lineage.from_environment(repo.root, http_env(home, backend.url))

    with lineage.run(INGEST_A):
        pass

    namespace = repo.root.resolve().as_uri()
    assert namespace.startswith("file:///")
    assert lineage.repository == Repository(namespace, repo.commit, "main")
    for event in backend.events:
        validate(event)
        assert event["job"]["namespace"] == namespace
        assert event["outputs"][0]["namespace"] == namespace
        location = event["job"]["facets"]["sourceCodeLocation"]
        assert (location["url"], location["version"]) == (namespace, repo.commit)


def test_outside_git_there_is_no_source_code_location(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    lineage = Lineage.from_environment(root, http_env(home, backend.url))

    with lineage.run(INGEST_A):
        pass

    assert lineage.repository == Repository(root.resolve().as_uri())
    for event in backend.events:
        validate(event)
        assert set(event["job"]["facets"]) == {"jobType"}


# The schemas are not vacuous.


def test_the_schemas_reject_a_broken_event_and_a_facet_of_unknown_version(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, http_env(home, backend.url))
    lineage.start_parent()
    with lineage.run(TRANSFORM_JOIN):
        pass
    event = backend.events[1]
    validate(event)

    no_run_id = json.loads(json.dumps(event))
    del no_run_id["run"]["runId"]
    with pytest.raises(jsonschema.ValidationError, match="'runId' is a required property"):
        validate(no_run_id)

    bad_uuid = json.loads(json.dumps(event))
    bad_uuid["run"]["facets"]["parent"]["run"]["runId"] = "not-a-uuid"
    with pytest.raises(jsonschema.ValidationError, match="is not a 'uuid'"):
        validate(bad_uuid)

    no_query = json.loads(json.dumps(event))
    del no_query["job"]["facets"]["sql"]["query"]
    with pytest.raises(jsonschema.ValidationError, match="'query' is a required property"):
        validate(no_query)

    unknown = json.loads(json.dumps(event))
    unknown["job"]["facets"]["sql"]["_schemaURL"] = (
        f"{FACETS}/9-9-9/SQLJobFacet.json#/$defs/SQLJobFacet"
    )
    with pytest.raises(Unresolvable):
        validate(unknown)


def test_the_variable_prefix_is_the_clients() -> None:
    """``Lineage.from_environment`` tells whether any variable configures the client
    without importing it, so it spells the client's prefix itself: the same one."""
    from openlineage.client import OpenLineageClient

    from reconciler.lineage.openlineage_events import VARIABLE_PREFIX

    assert VARIABLE_PREFIX == OpenLineageClient.DYNAMIC_ENV_VARS_PREFIX == "OPENLINEAGE__"
