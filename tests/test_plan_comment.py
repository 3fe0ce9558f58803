"""The plan-comment workflow's script, run by bash as GitHub runs it, against a stand-in
for the GitHub API.

plan-comment.yml is the one workflow a pull request cannot change (``workflow_run``
runs the default branch's copy), so what it posts and the ``reconcile/plan`` status it
sets are what a reviewer and the branch protection can trust. The pull request's own
run (plan.yml) can be rewritten by the pull request, so its artifact is data to check,
and a pull request that changes ``.github/`` gets a warning and a failed status.

GitHub cannot be reached from the tests: ``gh`` here is a small program that answers
``gh api`` from a table of responses (``--jq`` through the real ``jq``, as gh applies
it) and records every call. The script, bash and jq are the real ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_workflows import OURS, SCAFFOLDS
from workflow_lint import run_scripts

HEAD = "3f2a" * 10
REPO = "team/data"
RUN_URL = "https://github.com/team/data/actions/runs/99"
PLAN_MD = "## Plan\n\n1 dataset to update: `org.example.a`\n"

GH = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
assert args[0] == "api", args
method, jq, fields, path = "GET", None, {{}}, None
rest = iter(args[1:])
for arg in rest:
    if arg == "--method":
        method = next(rest)
    elif arg == "--jq":
        jq = next(rest)
    elif arg == "--paginate":
        pass
    elif arg in ("-f", "-F"):
        key, _, value = next(rest).partition("=")
        if arg == "-F" and value.startswith("@"):
            value = open(value[1:]).read()
        fields[key] = value
    else:
        path = arg
with open(os.environ["GH_LOG"], "a") as log:
    log.write(json.dumps({{"method": method, "path": path, "fields": fields}}) + "\\n")
if method != "GET":
    print("{{}}")
    sys.exit(0)
responses = json.load(open(os.environ["GH_RESPONSES"]))
body = json.dumps(responses[path])
if jq is None:
    print(body)
else:
    sys.exit(subprocess.run(["jq", "-r", jq], input=body, text=True).returncode)
"""


def pull_request(files: list[str], head: str = HEAD) -> dict[str, Any]:
    return {
        f"repos/{REPO}/pulls/7": {"head": {"sha": head}, "changed_files": len(files)},
        f"repos/{REPO}/pulls/7/files": [{"filename": f} for f in files],
        f"repos/{REPO}/issues/7/comments": [],
    }


def run_comment(
    tmp_path: Path,
    workflow: Path,
    responses: dict[str, Any],
    artifact: dict[str, str],
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run the workflow's comment script in ``tmp_path`` with the plan artifact's files,
    and return its result and the API calls it made."""
    assert shutil.which("jq"), "jq is not installed: apt-get install jq (.ci/run does)"
    (script,) = [s for _, s in run_scripts(workflow)]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(GH.format(python=sys.executable))
    gh.chmod(0o755)
    (tmp_path / "plan").mkdir()
    for name, text in artifact.items():
        (tmp_path / "plan" / name).write_text(text)
    (tmp_path / "responses.json").write_text(json.dumps(responses))
    log = tmp_path / "calls.jsonl"
    log.touch()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GH_RESPONSES": str(tmp_path / "responses.json"),
        "GH_LOG": str(log),
        "GH_TOKEN": "not-a-token",
        "REPO": REPO,
        "HEAD_SHA": HEAD,
        "RUN_URL": RUN_URL,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return result, calls


def writes(calls: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str]]]:
    return [(c["method"], c["path"], c["fields"]) for c in calls if c["method"] != "GET"]


def status(state: str, description: str) -> tuple[str, str, dict[str, str]]:
    return (
        "POST",
        f"repos/{REPO}/statuses/{HEAD}",
        {
            "state": state,
            "context": "reconcile/plan",
            "description": description,
            "target_url": RUN_URL,
        },
    )


WORKFLOWS = pytest.mark.parametrize("workflow", [OURS[0], SCAFFOLDS[0]], ids=["ours", "scaffold"])


@WORKFLOWS
def test_a_plan_with_changes_is_posted_and_its_status_succeeds(
    tmp_path: Path, workflow: Path
) -> None:
    responses = pull_request(["datasets/org.example.a.yaml"])
    artifact = {"pr-number": "7\n", "exit-code": "2\n", "plan.md": PLAN_MD}
    result, calls = run_comment(tmp_path, workflow, responses, artifact)
    assert result.returncode == 0, result.stderr
    body = f"<!-- reconcile-plan -->\n{PLAN_MD}"
    assert writes(calls) == [
        ("POST", f"repos/{REPO}/issues/7/comments", {"body": body}),
        status("success", "the plan has changes: read the plan comment"),
    ]
    assert (tmp_path / "summary.md").read_text() == body


@WORKFLOWS
def test_a_pull_request_that_changes_its_workflows_is_flagged_and_fails(
    tmp_path: Path, workflow: Path
) -> None:
    # A rewritten plan.yml can upload any plan and exit code it likes.
    files = ["datasets/org.example.a.yaml", ".github/workflows/plan.yml"]
    artifact = {"pr-number": "7", "exit-code": "0", "plan.md": "No changes.\n"}
    result, calls = run_comment(tmp_path, workflow, pull_request(files), artifact)
    assert result.returncode == 0, result.stderr
    body = (
        "<!-- reconcile-plan -->\n"
        "> [!CAUTION]\n"
        "> This pull request changes files under `.github/`, so the plan below ran with the\n"
        "> pull request's own workflows, not the base branch's: it proves nothing. A\n"
        "> maintainer must review these changes before anything else:\n"
        "> - .github/workflows/plan.yml\n"
        "\n"
        "No changes.\n"
    )
    assert writes(calls) == [
        ("POST", f"repos/{REPO}/issues/7/comments", {"body": body}),
        status(
            "failure",
            "changes .github/: planned by its own workflows, a maintainer must review them",
        ),
    ]


@WORKFLOWS
@pytest.mark.parametrize(
    "artifact",
    [
        {"pr-number": "7", "exit-code": "1", "plan.md": PLAN_MD},
        {"pr-number": "7", "exit-code": "0; curl evil", "plan.md": PLAN_MD},
        {"pr-number": "7", "exit-code": "0"},
        {"pr-number": "7"},  # the chains did not verify: the plan step never ran
        {  # what verify said: quoted as an indented code block, so nothing renders
            "pr-number": "7",
            "errors.txt": "org.example.a: invalid (block #3: <b>x</b> @octocat)\n",
        },
    ],
    ids=["errors", "forged-exit-code", "no-plan", "verify-failed", "verify-said"],
)
def test_a_failed_or_missing_plan_fails_the_status(
    tmp_path: Path, workflow: Path, artifact: dict[str, str]
) -> None:
    responses = pull_request(["datasets/org.example.a.yaml"])
    result, calls = run_comment(tmp_path, workflow, responses, artifact)
    assert result.returncode == 0, result.stderr
    (comment, state) = writes(calls)
    assert comment[2]["body"].startswith("<!-- reconcile-plan -->\n")
    assert state == status("failure", "the plan found errors or could not be computed")
    if "errors.txt" in artifact:
        assert comment[2]["body"] == (
            "<!-- reconcile-plan -->\nThe plan could not be computed; see"
            f" [the run]({RUN_URL}). The reconciler said:\n\n"
            "    org.example.a: invalid (block #3: <b>x</b> @octocat)\n"
        )
    elif "plan.md" not in artifact:
        assert comment[2]["body"] == (
            "<!-- reconcile-plan -->\nThe plan could not be computed: a step before it"
            f" failed; see\n[the run]({RUN_URL}).\n"
        )


@WORKFLOWS
def test_an_existing_comment_is_updated(tmp_path: Path, workflow: Path) -> None:
    responses = pull_request(["datasets/org.example.a.yaml"])
    responses[f"repos/{REPO}/issues/7/comments"] = [
        {"id": 11, "user": {"login": "someone"}, "body": "<!-- reconcile-plan -->\nforged"},
        {"id": 12, "user": {"login": "github-actions[bot]"}, "body": "looks good"},
        {
            "id": 13,
            "user": {"login": "github-actions[bot]"},
            "body": "<!-- reconcile-plan -->\nold",
        },
    ]
    artifact = {"pr-number": "7", "exit-code": "0", "plan.md": PLAN_MD}
    result, calls = run_comment(tmp_path, workflow, responses, artifact)
    assert result.returncode == 0, result.stderr
    assert writes(calls) == [
        (
            "PATCH",
            f"repos/{REPO}/issues/comments/13",
            {"body": f"<!-- reconcile-plan -->\n{PLAN_MD}"},
        ),
        status("success", "no changes"),
    ]


@WORKFLOWS
def test_a_pull_request_that_moved_on_gets_nothing(tmp_path: Path, workflow: Path) -> None:
    responses = pull_request(["datasets/org.example.a.yaml"], head="9" * 40)
    artifact = {"pr-number": "7", "exit-code": "0", "plan.md": PLAN_MD}
    result, calls = run_comment(tmp_path, workflow, responses, artifact)
    assert result.returncode == 0, result.stderr
    assert f"pull request #7 has moved past {HEAD}: not commenting" in result.stdout
    assert writes(calls) == []


@WORKFLOWS
@pytest.mark.parametrize("number", ["", "7; curl evil", "../8"], ids=["empty", "command", "path"])
def test_an_artifact_naming_no_pull_request_is_refused_without_a_call(
    tmp_path: Path, workflow: Path, number: str
) -> None:
    artifact = {"pr-number": number, "exit-code": "0", "plan.md": PLAN_MD}
    result, calls = run_comment(tmp_path, workflow, {}, artifact)
    assert result.returncode == 1
    assert result.stderr == "::error::the plan artifact names no pull request number\n"
    assert calls == []


@WORKFLOWS
def test_a_pull_request_too_large_to_list_is_treated_as_changing_its_workflows(
    tmp_path: Path, workflow: Path
) -> None:
    responses = pull_request(["datasets/org.example.a.yaml"])
    responses[f"repos/{REPO}/pulls/7"]["changed_files"] = 3001
    artifact = {"pr-number": "7", "exit-code": "0", "plan.md": PLAN_MD}
    result, calls = run_comment(tmp_path, workflow, responses, artifact)
    assert result.returncode == 0, result.stderr
    (comment, state) = writes(calls)
    assert "> - (more than 3,000 files changed: GitHub lists no more)\n" in comment[2]["body"]
    assert state[2]["state"] == "failure"
    assert f"repos/{REPO}/pulls/7/files" not in [c["path"] for c in calls]
