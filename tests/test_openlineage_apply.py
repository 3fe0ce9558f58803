"""OpenLineage events of whole reconciles: a real git repository with a root ingested from
a CSV file and a derivative, applied in this process on Spark, reporting to a real HTTP
server on 127.0.0.1; every event is checked against the OpenLineage JSON schemas.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest
from gitops_repo import (
    T1,
    GitOpsRepo,
    derivative_events,
    events,
    manifest,
    reconcile,
    root_events,
)
from openlineage_backend import Backend, isolated_home, serve, validate
from test_cli_conventions import normal
from typer.testing import CliRunner

from reconciler.apply.outcome import Outcome, Status
from reconciler.apply.run import apply_plan
from reconciler.cli import app
from reconciler.config import RepoConfig
from reconciler.ingest.pull import IngestContext
from reconciler.lineage.openlineage_events import Lineage
from reconciler.lineage.openlineage_runs import sql_text
from reconciler.odf import Timestamp, models
from reconciler.odf.repository import OdfRepository
from reconciler.planning.compose import PlanRequest, make_plan

pytestmark = pytest.mark.usefixtures("spark")

NAMESPACE = "https://git.example.org/data/odf-repo.git"
RAW = "example.raw"
UPPER = "example.upper"
PREPROCESS = """
      preprocess:
        kind: Sql
        engine: spark
        queries:
          - alias: named
            query: SELECT id, trim(name) AS name FROM input
          - query: SELECT id, lower(name) AS name FROM named WHERE id > 0"""
PREPROCESS_SQL = (
    "CREATE OR REPLACE TEMPORARY VIEW `named` AS\n"
    "SELECT id, trim(name) AS name FROM input;\n"
    "\n"
    "SELECT id, lower(name) AS name FROM named WHERE id > 0"
)
UPPER_SQL = "SELECT event_time, id, upper(name) AS name FROM `example.raw`"
COLUMNS = [
    ("offset", "bigint"),
    ("op", "int"),
    ("system_time", "timestamp"),
    ("event_time", "timestamp"),
    ("id", "bigint"),
    ("name", "string"),
]


BOTH_COMPLETE = [
    ("START", "reconcile"),
    ("START", RAW),
    ("COMPLETE", RAW),
    ("START", UPPER),
    ("COMPLETE", UPPER),
    ("COMPLETE", "reconcile"),
]
"""The events of a reconcile in which both datasets run and succeed."""


@pytest.fixture
def backend() -> Iterator[Backend]:
    with serve() as backend:
        yield backend


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_home(tmp_path, monkeypatch)


def make_repo(root: Path, derivative_query: str = UPPER_SQL) -> tuple[GitOpsRepo, str]:
    """The root (three CSV rows, two kept by its preprocess) and one derivative, committed
    with an ``origin`` remote; returns the repository and the commit's sha."""
    repo = GitOpsRepo.create(root)
    raw = root_events("[id BIGINT, name STRING]").replace(
        "      merge: {kind: Append}", PREPROCESS.strip("\n") + "\n      merge: {kind: Append}"
    )
    repo.write(RAW, manifest(RAW, "Root", raw))
    repo.write(UPPER, manifest(UPPER, "Derivative", derivative_events([RAW], derivative_query)))
    (root / "sources").mkdir()
    (root / "sources" / "1.csv").write_text("id,name\n1, Ann \n2,Bob\n-1,nobody\n")
    sha = repo.commit("datasets")
    git.Repo(root).create_remote("origin", NAMESPACE)
    return repo, sha


def lineage_env(home: Path, backend: Backend, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "OPENLINEAGE_URL": backend.url, **extra}


def plain(facet: dict[str, Any]) -> dict[str, Any]:
    """A facet without ``_producer`` and ``_schemaURL`` (the schemas check those)."""
    return {k: v for k, v in facet.items() if k not in ("_producer", "_schemaURL")}


def columns(dataset: dict[str, Any]) -> list[tuple[str, str]] | None:
    """A dataset's schema facet as (name, type) pairs; None without one."""
    schema = dataset["facets"].get("schema")
    if schema is None:
        return None
    assert all(f["fields"] == [] for f in schema["fields"])
    return [(f["name"], f["type"]) for f in schema["fields"]]


def statistics(output: dict[str, Any]) -> dict[str, Any] | None:
    facet = output["outputFacets"].get("outputStatistics")
    return plain(facet) if facet is not None else None


def sequence(backend: Backend) -> list[tuple[str, str]]:
    return [(e["eventType"], e["job"]["name"]) for e in backend.events]


def location(path: str | None, commit: str) -> dict[str, Any]:
    found = {"type": "git", "url": NAMESPACE, "repoUrl": NAMESPACE, "version": commit}
    return {**found, "branch": "main", **({"path": path} if path else {})}


def slice_sizes(repo: GitOpsRepo, name: str) -> list[int]:
    """Sizes of the dataset's data files, as its chain records them."""
    return [
        e.new_data.size
        for e in events(repo.odf.dataset(name))
        if isinstance(e, models.AddData | models.ExecuteTransform) and e.new_data is not None
    ]


def by_name(outcomes: list[Outcome]) -> dict[str, tuple[Status, int]]:
    return {o.dataset: (o.status, o.rows) for o in outcomes}


def test_a_reconcile_is_one_parent_run_with_a_child_run_per_dataset(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo, sha = make_repo(tmp_path / "repo")
    lineage = Lineage.from_environment(repo.root, lineage_env(home, backend))

    outcomes = reconcile(repo.root, lineage=lineage)

    assert by_name(outcomes) == {RAW: (Status.CREATED, 2), UPPER: (Status.CREATED, 2)}
    assert sequence(backend) == BOTH_COMPLETE
    sent = backend.events
    for event in sent:
        validate(event)
        assert event["job"]["namespace"] == NAMESPACE
    parent, raw_start, raw_complete, upper_start, upper_complete, parent_end = sent

    parent_id = parent["run"]["runId"]
    assert parent_end["run"]["runId"] == parent_id
    assert "parent" not in parent["run"]["facets"]
    assert plain(parent["job"]["facets"]["sourceCodeLocation"]) == location(None, sha)
    for child in sent[1:5]:
        assert plain(child["run"]["facets"]["parent"]) == {
            "run": {"runId": parent_id, "facets": {}},
            "job": {"namespace": NAMESPACE, "name": "reconcile", "facets": {}},
        }
        assert "errorMessage" not in child["run"]["facets"]
    assert raw_start["run"]["runId"] == raw_complete["run"]["runId"]
    assert upper_start["run"]["runId"] == upper_complete["run"]["runId"]
    assert len({parent_id, raw_start["run"]["runId"], upper_start["run"]["runId"]}) == 3

    # The root: no inputs, its preprocess as SQL, its manifest at the commit.
    for event in (raw_start, raw_complete):
        assert event["inputs"] == []
        assert plain(event["job"]["facets"]["jobType"])["jobType"] == "INGEST"
        assert plain(event["job"]["facets"]["sql"]) == {"query": PREPROCESS_SQL, "dialect": "spark"}
        assert plain(event["job"]["facets"]["sourceCodeLocation"]) == location(
            "datasets/example.raw.yaml", sha
        )
        assert [o["name"] for o in event["outputs"]] == [RAW]
    assert columns(raw_start["outputs"][0]) is None  # no SetDataSchema before the first slice
    assert statistics(raw_start["outputs"][0]) is None
    assert columns(raw_complete["outputs"][0]) == COLUMNS
    assert statistics(raw_complete["outputs"][0]) == {
        "rowCount": 2,
        "size": slice_sizes(repo, RAW)[0],
    }

    # The derivative: the root as input with its schema, its query, its own manifest.
    for event in (upper_start, upper_complete):
        assert [(i["name"], columns(i)) for i in event["inputs"]] == [(RAW, COLUMNS)]
        assert plain(event["job"]["facets"]["jobType"])["jobType"] == "TRANSFORM"
        assert plain(event["job"]["facets"]["sql"]) == {"query": UPPER_SQL, "dialect": "spark"}
        assert plain(event["job"]["facets"]["sourceCodeLocation"]) == location(
            "datasets/example.upper.yaml", sha
        )
    assert columns(upper_start["outputs"][0]) is None
    assert columns(upper_complete["outputs"][0]) == COLUMNS
    assert statistics(upper_complete["outputs"][0]) == {
        "rowCount": 2,
        "size": slice_sizes(repo, UPPER)[0],
    }
    assert slice_sizes(repo, RAW)[0] > 0 and slice_sizes(repo, UPPER)[0] > 0


def test_a_reconcile_with_nothing_new_still_reports_every_dataset_run_with_zero_rows(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo, _ = make_repo(tmp_path / "repo")
    reconcile(repo.root, lineage=Lineage.from_environment(repo.root, lineage_env(home, backend)))
    first_parent = backend.events[0]["run"]["runId"]
    backend.received.clear()

    lineage = Lineage.from_environment(repo.root, lineage_env(home, backend))
    outcomes = reconcile(repo.root, Timestamp.parse("2026-02-02T00:00:00Z"), lineage=lineage)

    assert by_name(outcomes) == {RAW: (Status.UP_TO_DATE, 0), UPPER: (Status.UP_TO_DATE, 0)}
    assert sequence(backend) == BOTH_COMPLETE
    sent = backend.events
    for event in sent:
        validate(event)
    assert sent[0]["run"]["runId"] != first_parent
    for start, complete in ((sent[1], sent[2]), (sent[3], sent[4])):
        assert columns(start["outputs"][0]) == columns(complete["outputs"][0]) == COLUMNS
        assert statistics(complete["outputs"][0]) == {"rowCount": 0, "size": 0}
    assert [(i["name"], columns(i)) for i in sent[3]["inputs"]] == [(RAW, COLUMNS)]


def test_failed_runs_send_fail_with_their_error_skipped_ones_nothing_and_the_parent_fails(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    secret = "tok-9f8e7d6c5b4a"
    repo, _ = make_repo(
        tmp_path / "repo", "SELECT event_time, id, CAST(name AS INT) AS n FROM `example.raw`"
    )
    remote = root_events("[id BIGINT]").replace(
        '{kind: FilesGlob, path: "sources/*.csv"}',
        '{kind: Url, url: "file:missing/${{ env.ACME_API_KEY }}.csv"}',
    )
    repo.write("example.remote", manifest("example.remote", "Root", remote))
    repo.allow_env(ACME_API_KEY=["*"])
    reader = derivative_events(["example.remote"], "SELECT event_time, id FROM `example.remote`")
    repo.write("example.reader", manifest("example.reader", "Derivative", reader))
    repo.commit("more datasets")
    env = lineage_env(home, backend, ACME_API_KEY=secret)

    outcomes = reconcile(repo.root, env=env, lineage=Lineage.from_environment(repo.root, env))

    assert [(o.dataset, o.status) for o in outcomes] == [
        (RAW, Status.CREATED),
        ("example.remote", Status.FAILED),
        ("example.reader", Status.SKIPPED),
        (UPPER, Status.FAILED),
    ]
    assert sequence(backend) == [
        ("START", "reconcile"),
        ("START", RAW),
        ("COMPLETE", RAW),
        ("START", "example.remote"),
        ("FAIL", "example.remote"),
        ("START", UPPER),
        ("FAIL", UPPER),
        ("FAIL", "reconcile"),
    ]
    sent = backend.events
    for event in sent:
        validate(event)
    parent_id = sent[0]["run"]["runId"]
    assert sent[-1]["run"]["runId"] == parent_id
    assert "errorMessage" not in sent[-1]["run"]["facets"]

    remote_error = plain(sent[4]["run"]["facets"]["errorMessage"])
    assert remote_error["message"] == (
        f"reconciler.ingest.fetch.SourceNotFoundError: {repo.root}/missing/***.csv: file not found"
    )
    assert remote_error["programmingLanguage"] == "python"
    assert remote_error["stackTrace"].startswith("Traceback (most recent call last):\n")
    assert remote_error["stackTrace"].endswith(remote_error["message"])
    assert sent[4]["inputs"] == []
    assert [(o["name"], columns(o), statistics(o)) for o in sent[4]["outputs"]] == [
        ("example.remote", None, None)
    ]

    upper_error = plain(sent[6]["run"]["facets"]["errorMessage"])
    upper_outcome = next(o for o in outcomes if o.dataset == UPPER)
    # a new dataset's failure says which stage failed
    failed = "transform failed: "
    assert upper_outcome.message.startswith(failed + "NumberFormatException: [CAST_INVALID_INPUT] ")
    # The report drops Spark's SQLSTATE; lineage keeps it for the machines that read it.
    assert upper_error["message"].splitlines()[0] == (
        "pyspark.errors.exceptions.captured."
        + upper_outcome.message.removeprefix(failed)
        + " SQLSTATE: 22018"
    )
    assert sent[6]["run"]["runId"] == sent[5]["run"]["runId"]
    assert sent[6]["run"]["facets"]["parent"]["run"]["runId"] == parent_id
    assert [(i["name"], columns(i)) for i in sent[6]["inputs"]] == [(RAW, COLUMNS)]
    assert [(o["name"], columns(o), statistics(o)) for o in sent[6]["outputs"]] == [
        (UPPER, None, None)
    ]
    assert secret not in json.dumps(sent)


def test_a_failed_metadata_append_sends_fail(tmp_path: Path, home: Path, backend: Backend) -> None:
    """Another reconcile creates the datasets between this one's plan and its apply."""
    repo, _ = make_repo(tmp_path / "repo")
    config = RepoConfig.load(repo.root)
    plan = make_plan(config, PlanRequest())
    repo.apply()
    context = IngestContext(
        spark=lambda: pytest.fail("no data is read"), base_dir=repo.root, env={}
    )
    lineage = Lineage.from_environment(repo.root, lineage_env(home, backend))

    outcomes = apply_plan(OdfRepository(config.odf_dir), plan, T1, context, lineage=lineage)

    assert [(o.dataset, o.status, o.message) for o in outcomes] == [
        # the creation is one compare-and-swap from "no chain": it finds the other's head
        (RAW, Status.FAILED, f"another run advanced {RAW}; nothing of this run was kept"),
        (UPPER, Status.SKIPPED, f"input {RAW} failed"),
    ]
    assert sequence(backend) == [
        ("START", "reconcile"),
        ("START", RAW),
        ("FAIL", RAW),
        ("FAIL", "reconcile"),
    ]
    for event in backend.events:
        validate(event)
    error = plain(backend.events[2]["run"]["facets"]["errorMessage"])
    assert error["message"] == (
        f"reconciler.apply.run.MetadataError: another run advanced {RAW}; nothing of this run was kept"
    )
    # The run is described before its metadata, from the plan's events.
    assert plain(backend.events[2]["job"]["facets"]["sql"])["query"] == PREPROCESS_SQL


def test_without_configuration_there_is_no_client_and_no_event(
    tmp_path: Path, home: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = make_repo(tmp_path / "repo")
    monkeypatch.setenv("OPENLINEAGE_URL", backend.url)  # read by neither call below
    lineage = Lineage.from_environment(repo.root, {})

    assert lineage.enabled is False
    first = reconcile(repo.root, lineage=lineage)
    (repo.root / "sources" / "2.csv").write_text("id,name\n3,Cy\n")
    second = reconcile(repo.root, Timestamp.parse("2026-02-02T00:00:00Z"))  # the default

    assert by_name(first) == {RAW: (Status.CREATED, 2), UPPER: (Status.CREATED, 2)}
    assert by_name(second) == {RAW: (Status.UPDATED, 1), UPPER: (Status.UPDATED, 1)}
    assert backend.received == []


def test_the_cli_reports_an_apply_and_nothing_for_a_plan(
    tmp_path: Path, home: Path, backend: Backend
) -> None:
    repo, _ = make_repo(tmp_path / "repo")
    repo.remove(UPPER)  # a root only: the CLI's own wiring is what this test is about
    sha = repo.commit("only the root")
    runner = CliRunner()
    env = {"OPENLINEAGE_URL": backend.url}
    args = ["-C", str(repo.root), "--system-time", "2026-02-01T12:00:00Z"]

    planned = runner.invoke(app, [*args, "--plan"], env=env)
    assert planned.exit_code == 0, planned.output
    assert backend.received == []

    applied = runner.invoke(app, args, env=env)
    assert applied.exit_code == 0, applied.output
    assert normal(applied.output)[-2:] == [
        f"HH:MM:SS OK    {RAW} created: 6 blocks (4 metadata), 2 records in N s",
        "1 dataset: 1 created (2 records) in N s",
    ]
    assert sequence(backend) == [
        ("START", "reconcile"),
        ("START", RAW),
        ("COMPLETE", RAW),
        ("COMPLETE", "reconcile"),
    ]
    for event in backend.events:
        validate(event)
        assert plain(event["job"]["facets"]["sourceCodeLocation"])["version"] == sha
    assert statistics(backend.events[2]["outputs"][0]) == {
        "rowCount": 2,
        "size": slice_sizes(repo, RAW)[0],
    }


def test_multi_step_queries_are_one_script_of_views_then_the_output_query() -> None:
    steps = [
        models.SqlQueryStep(alias="a.b", query="SELECT 1 AS x;\n"),
        models.SqlQueryStep(alias="c`d", query="  SELECT x FROM `a.b`"),
        models.SqlQueryStep(query="SELECT * FROM `c``d`\n"),
    ]
    assert sql_text(models.TransformSql(engine="spark", queries=steps)) == (
        "CREATE OR REPLACE TEMPORARY VIEW `a.b` AS\nSELECT 1 AS x;\n\n"
        "CREATE OR REPLACE TEMPORARY VIEW `c``d` AS\nSELECT x FROM `a.b`;\n\n"
        "SELECT * FROM `c``d`"
    )
    single = models.TransformSql(engine="spark", query="SELECT 1\n")
    assert sql_text(single) == "SELECT 1"
