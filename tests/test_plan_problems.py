"""Every problem a plan finds is counted once and shown everywhere: the summary counts,
JSON ``problems`` (manifest path and line), the Markdown comment and the exit code agree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from typer.testing import CliRunner

from reconciler.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT, READER = "org.example.a", "org.example.b"


@pytest.fixture
def repo(tmp_path: Path, spark: Any) -> GitOpsRepo:
    """An applied root (a, b) and a derivative reading both columns (spark started first,
    so the CLI shares the tests' session)."""
    gitops = GitOpsRepo.create(tmp_path / "repo")
    shutil.copytree(REPO_ROOT / "policies", gitops.root / "policies")
    (gitops.root / "sources").mkdir()
    (gitops.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    gitops.write(ROOT, manifest(ROOT, "Root", root_events()))
    gitops.write(READER, reader("SELECT event_time, a, b FROM `org.example.a`"))
    gitops.apply()
    return gitops


def reader(query: str) -> str:
    return manifest(READER, "Derivative", derivative_events([ROOT], query))


def cli(repo: GitOpsRepo, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["-C", str(repo.root), *args])
    return result.exit_code, result.stdout


def plan_json(repo: GitOpsRepo) -> tuple[int, dict[str, Any]]:
    code, out = cli(repo, "plan", "--format", "json", "--detailed-exitcode")
    return code, json.loads(out)


def test_an_upstream_drop_that_breaks_a_downstream_query_is_one_error_naming_the_change(
    repo: GitOpsRepo,
) -> None:
    # no override: the breaking verdict is the second error, the downstream query the first
    repo.write(ROOT, manifest(ROOT, "Root", root_events(schema="[a BIGINT]")))
    (repo.root / "sources" / "a.csv").write_text("a\n1\n")  # the file as exported now
    code, document = plan_json(repo)
    assert code == 1
    assert document["problems"] == [
        {
            "message": "its query reads column `b`, which org.example.a drops in this change",
            "dataset": READER,
            "location": {"file": "datasets/org.example.b.yaml", "line": 13},
            "field": "content.metadata[0].transform.query",
            "severity": "error",
        }
    ]
    summary = document["summary"]
    assert (summary["errors"], summary["warnings"], summary["exitCode"]) == (
        2,
        0,
        {"default": 1, "detailed": 1},
    )
    _, markdown = cli(repo, "plan", "--format", "markdown")
    blocks = markdown.split("\n\n")
    assert blocks[1] == (
        "**2 errors** · **1 breaking change** (`org.example.a`) · 1 to update · 1 unchanged"
        " · 2 with pending data"
    )
    item = (
        "- `datasets/org.example.b.yaml:13` `org.example.b` field "
        "`content.metadata[0].transform.query`: its query reads column `b`, which "
        "org.example.a drops in this change"
    )
    assert blocks[blocks.index("### Problems") + 1] == item
    details = blocks.index(
        "<details><summary><code>org.example.b</code> (Derivative): unchanged</summary>"
    )
    assert blocks[details + 2] == "**Problems:**"
    assert blocks[details + 3] == item.replace(" `org.example.b` field", " field")
    _, text = cli(repo, "plan")
    assert (
        text.splitlines()[-1]
        == "Plan: 1 to update, 1 unchanged; 2 with pending data. 2 errors, 0 warnings."
    )


def test_a_typo_in_a_query_is_an_error_at_its_line_in_the_manifest(repo: GitOpsRepo) -> None:
    repo.write(READER, reader("SELECT event_time,\n  a,\n  bb\nFROM `org.example.a`"))
    code, document = plan_json(repo)
    assert code == 1
    (problem,) = document["problems"]
    assert problem["message"].startswith(
        "query check failed: `query`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] "
        "A column, variable, or function parameter with name `bb` cannot be resolved."
    )
    assert (problem["location"], problem["field"], problem["severity"]) == (
        {"file": "datasets/org.example.b.yaml", "line": 15},
        "content.metadata[0].transform.query",
        "error",
    )
    assert document["summary"]["errors"] == 1
    _, text = cli(repo, "plan")
    assert (
        text.splitlines()[-1]
        == "Plan: 1 to update, 1 unchanged; 2 with pending data. 1 error, 0 warnings."
    )


def test_a_failing_step_of_multi_step_queries_points_at_that_step(repo: GitOpsRepo) -> None:
    steps = """
    - kind: SetTransform
      inputs: [{datasetRef: org.example.a}]
      transform:
        kind: Sql
        engine: spark
        queries:
          - alias: first
            query: |
              SELECT event_time, a
              FROM `org.example.a`
          - alias: second
            query: |
              SELECT event_time,
                nope
              FROM first
          - query: SELECT * FROM second
    """
    repo.write(READER, manifest(READER, "Derivative", steps))
    code, document = plan_json(repo)
    (problem,) = document["problems"]
    assert code == 1
    assert (problem["location"], problem["field"]) == (
        {"file": "datasets/org.example.b.yaml", "line": 20},
        "content.metadata[0].transform.queries[1].query",
    )
    # the steps of ``queries`` keep their names; a single ``query`` has none (above)
    assert problem["message"].startswith(
        "query check failed: step `second`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] "
    )


def test_an_unknown_input_is_an_error_counted_once(repo: GitOpsRepo) -> None:
    repo.write(
        READER, manifest(READER, "Derivative", derivative_events(["org.example.nope"], "SELECT 1"))
    )
    code, document = plan_json(repo)
    assert code == 1
    assert [(p["message"], p["severity"]) for p in document["problems"]] == [
        ("input 'org.example.nope' of 'org.example.b' is not a dataset of this repository", "error")
    ]
    assert document["summary"]["errors"] == 1
    # At the input's own line, as its field says; a name close to a dataset's is told.
    (problem,) = document["problems"]
    assert (problem["location"], problem["field"]) == (
        {"file": "datasets/org.example.b.yaml", "line": 8, "column": 29},
        "content.metadata[0].inputs[0].datasetRef",
    )
    repo.write(
        READER, manifest(READER, "Derivative", derivative_events(["org.example.aa"], "SELECT 1"))
    )
    _, typo = plan_json(repo)
    assert [p["message"] for p in typo["problems"]] == [
        "input 'org.example.aa' of 'org.example.b' is not a dataset of this repository;"
        " did you mean 'org.example.a'?"
    ]


def test_an_input_whose_manifest_does_not_load_is_not_called_unknown(repo: GitOpsRepo) -> None:
    """A YAML error in the input's manifest made its reader say the input "is not a
    dataset of this repository", sending the author after the wrong file."""
    repo.write(ROOT, "kind: DatasetSnapshot\nversion: 1\ncontent: [\n")
    code, document = plan_json(repo)
    assert code == 1
    (broken, follow_on) = document["problems"]
    assert broken["location"]["file"] == "datasets/org.example.a.yaml"
    assert follow_on["message"] == (
        "input 'org.example.a' of 'org.example.b' is not a dataset of this repository;"
        " 1 manifest could not be read, and may define it"
    )


def test_an_input_spelled_in_other_letter_case_is_an_error_that_says_how_it_is_spelled(
    repo: GitOpsRepo,
) -> None:
    repo.write(
        READER, manifest(READER, "Derivative", derivative_events(["Org.Example.A"], "SELECT 1"))
    )
    code, document = plan_json(repo)
    assert code == 1
    assert [(p["message"], p["severity"]) for p in document["problems"]] == [
        (
            "input 'Org.Example.A' of 'org.example.b' is not a dataset of this repository;"
            " it is spelled 'org.example.a'",
            "error",
        )
    ]


def test_a_plan_that_needs_java_where_there_is_none_is_one_error(repo: GitOpsRepo) -> None:
    repo.write(READER, reader("SELECT event_time, a FROM `org.example.a`"))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    no_java = repo.root / "bin"
    no_java.mkdir()
    (no_java / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    env["PATH"] = str(no_java)
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(repo.root), "plan", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    document = json.loads(result.stdout)
    assert result.returncode == 1
    assert document["problems"] == [
        {
            "message": "1 query not analysed (org.example.b): validating queries needs Java 17: "
            "install openjdk-17-jre-headless (or set JAVA_HOME to a Java 17 installation)",
            "severity": "error",
        }
    ]
    assert (document["summary"]["errors"], document["engineStarted"]) == (1, False)
