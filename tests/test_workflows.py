"""The GitHub workflows, this repository's and the scaffold's: they pass the two linters
(see workflow_lint.py), pin every action by commit, bound every job's time, and run on
a change to any input of a plan."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflow_lint import check_jsonschema, run_scripts, shellcheck

from reconciler.scaffold import TEMPLATES

REPO_ROOT = Path(__file__).resolve().parents[1]
OURS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
SCAFFOLDS = sorted((TEMPLATES / "dot-github" / "workflows").glob("*.yml"))
WORKFLOWS = OURS + SCAFFOLDS
PINNED = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")
USES = re.compile(r"\s*(- )?uses:")  # a step's key, not "statuses:" or a comment
# Everything a plan reads: the manifests, their sources, the policies, the settings in
# pyproject.toml, the committed chains and the workflows; here also the reconciler's
# code, which the scaffold installs as a pinned package instead.
PLAN_INPUTS = [
    "datasets/**",
    "sources/**",
    "policies/**",
    "reconciler/**",
    "pyproject.toml",
    "odf/**",
    ".github/workflows/**",
]
SCAFFOLD_INPUTS = [p for p in PLAN_INPUTS if p != "reconciler/**"]


def workflow_id(path: Path) -> str:
    return f"{'scaffold' if path in SCAFFOLDS else 'ours'}/{path.name}"


def load(path: Path) -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return document


def triggers(path: Path) -> dict[str, Any]:
    """The ``on:`` mapping (YAML 1.1 reads the bare key ``on`` as True)."""
    on: dict[str, Any] = load(path)[True]
    return on


def test_this_repository_and_the_scaffold_have_the_plan_comment_and_reconcile_workflows() -> None:
    names = ["plan-comment.yml", "plan.yml", "reconcile.yml"]
    assert ([p.name for p in OURS], [p.name for p in SCAFFOLDS]) == (names, names)


def test_the_workflows_match_githubs_workflow_schema() -> None:
    result = check_jsonschema(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "ok -- validation done\n"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=workflow_id)
def test_every_run_script_of_the_workflows_passes_shellcheck(workflow: Path) -> None:
    scripts = dict(run_scripts(workflow))
    assert scripts, workflow
    failures = {step: shellcheck(script).stdout for step, script in scripts.items()}
    assert {step: out for step, out in failures.items() if out} == {}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=workflow_id)
def test_every_action_is_pinned_by_a_full_commit_sha_with_its_version_in_a_comment(
    workflow: Path,
) -> None:
    steps = [s for job in load(workflow)["jobs"].values() for s in job["steps"] if "uses" in s]
    assert steps
    assert [s["uses"] for s in steps if not PINNED.fullmatch(s["uses"])] == []
    lines = [line for line in workflow.read_text().splitlines() if USES.match(line)]
    assert [line for line in lines if not re.search(r"@[0-9a-f]{40} # v\d", line)] == []


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=workflow_id)
def test_every_job_has_a_time_limit(workflow: Path) -> None:
    jobs = load(workflow)["jobs"]
    assert [name for name, job in jobs.items() if "timeout-minutes" not in job] == []


@pytest.mark.parametrize(
    ("workflow", "event", "inputs"),
    [
        (REPO_ROOT / ".github/workflows/reconcile.yml", "push", PLAN_INPUTS),
        (TEMPLATES / "dot-github/workflows/reconcile.yml", "push", SCAFFOLD_INPUTS),
    ],
    ids=["ours/reconcile", "scaffold/reconcile"],
)
def test_the_path_filters_cover_every_input_of_a_plan(
    workflow: Path, event: str, inputs: list[str]
) -> None:
    assert triggers(workflow)[event]["paths"] == inputs


def test_every_pull_request_is_planned_whatever_it_changes() -> None:
    """Its reconcile/plan status is the check to require: a path filter would leave a
    pull request outside it waiting for a status that never comes."""
    for workflow in (OURS[1], SCAFFOLDS[1]):
        assert triggers(workflow) == {
            "pull_request": {"types": ["opened", "synchronize", "reopened"]}
        }


def test_the_plan_runs_with_a_read_only_token_one_run_per_pull_request() -> None:
    for workflow in (OURS[1], SCAFFOLDS[1]):
        document = load(workflow)
        assert document["permissions"] == {"contents": "read"}
        assert document["concurrency"] == {
            "group": "plan-${{ github.event.pull_request.number }}",
            "cancel-in-progress": True,
        }


def test_the_comment_is_posted_by_a_workflow_run_that_never_checks_out_code() -> None:
    for workflow in (OURS[0], SCAFFOLDS[0]):
        document = load(workflow)
        assert triggers(workflow) == {
            "workflow_run": {"workflows": ["plan"], "types": ["completed"]}
        }
        assert document["permissions"] == {
            "actions": "read",
            "pull-requests": "write",
            "statuses": "write",
        }
        uses = [s["uses"] for job in document["jobs"].values() for s in job["steps"] if "uses" in s]
        assert [u.split("@")[0] for u in uses] == ["actions/download-artifact"]
        (script,) = [s for _, s in run_scripts(workflow)]
        assert "<!-- reconcile-plan -->" in script


def test_the_plan_installs_the_base_branchs_reconciler_and_plans_the_pull_request_once() -> None:
    scripts = dict(run_scripts(OURS[1]))
    assert scripts["plan/Install the base branch's reconciler"] == "pip install ./base"
    plans = [line.strip() for line in scripts["plan/plan"].splitlines() if "reconcile" in line]
    assert plans == [
        'reconcile -C pr plan --detailed-exitcode --prune --base "origin/$BASE_REF" \\',
        "reconcile -C pr show ../plan/plan.json --format markdown --out ../plan/plan.md",
    ]
    # from stdout, not --out, which saves no plan with errors: the comment shows those too
    assert "--format json > plan/plan.json 2> plan/errors.txt" in scripts["plan/plan"]


def test_a_plan_stopped_before_it_plans_leaves_its_error_for_the_comment(tmp_path: Path) -> None:
    """A setting the reconciler refuses stopped the plan before it wrote anything, and the
    comment said only that "a step before it failed (the chains … did not verify, say)"."""
    scripts = dict(run_scripts(OURS[1]))
    pr = tmp_path / "pr"
    repo = subprocess.run(["git", "init", "-q", "-b", "main", str(pr)], check=True)
    assert repo.returncode == 0
    (pr / "pyproject.toml").write_text(
        '[tool.reconciler.spark.conf]\n"spark.sql.ansi.enabled" = "false"\n'
    )
    for args in (
        ["add", "-A"],
        ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(pr), *args], check=True)
    subprocess.run(
        ["git", "-C", str(pr), "update-ref", "refs/remotes/origin/main", "HEAD"], check=True
    )
    (tmp_path / "plan").mkdir()
    env = {
        **os.environ,
        "BASE_REF": "main",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = {
        step: subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", scripts[step]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for step in ("plan/Verify the changed chains", "plan/plan")
    }
    assert done["plan/Verify the changed chains"].returncode == 0
    assert done["plan/plan"].returncode == 1
    said = (tmp_path / "plan" / "errors.txt").read_text()
    assert said == (
        "error: Spark conf spark.sql.ansi.enabled='false' is not allowed: the reconciler"
        " requires 'true'\n"
    )
    assert done["plan/plan"].stderr == said
    assert sorted(p.name for p in (tmp_path / "plan").iterdir()) == ["errors.txt", "exit-code"]
    verify = scripts["plan/Verify the changed chains"]
    assert 'reconcile -C pr verify --integrity --base "origin/$BASE_REF"' in verify


def test_reconcile_runs_one_at_a_time_and_pushes_the_chains_itself() -> None:
    for workflow in (OURS[2], SCAFFOLDS[2]):
        document = load(workflow)
        assert set(triggers(workflow)) == {"push", "schedule", "workflow_dispatch"}
        assert document["concurrency"] == {"group": "reconcile", "cancel-in-progress": False}
        assert document["permissions"] == {"contents": "write"}
        scripts = dict(run_scripts(workflow))
        assert scripts["reconcile/Verify the chains"] == (
            'if [ "$SCHEDULE" = "47 3 * * 0" ] || [ "$GITHUB_EVENT_NAME" = workflow_dispatch ]; then\n'
            "  reconcile verify --integrity\n"
            "else\n"
            "  reconcile verify --integrity --no-download\n"
            "fi\n"
        )
        assert triggers(workflow)["schedule"] == [{"cron": "17 * * * *"}, {"cron": "47 3 * * 0"}]
        assert (
            "reconcile apply --prune --commit --push --format json > result.json"
            in (scripts["reconcile/Apply and push the advanced chains"])
        )
        # gc only when the repository opts in, only on the weekly run, after the push.
        steps = [step.get("name") for step in document["jobs"]["reconcile"]["steps"]]
        gc = steps.index("Collect the data store's unnamed objects")
        assert steps[gc - 1] == "Apply and push the advanced chains"
        assert document["jobs"]["reconcile"]["steps"][gc]["if"] == (
            "${{ vars.RECONCILER_GC == 'delete' && github.event.schedule == '47 3 * * 0' }}"
        )
        assert scripts["reconcile/Collect the data store's unnamed objects"] == (
            "reconcile gc --delete"
        )
        # The whole history, without old file contents: the plan compares each FilesGlob's
        # files with the commit that last moved its chain (test_pending's partial clone).
        checkout = document["jobs"]["reconcile"]["steps"][0]
        assert checkout["uses"].startswith("actions/checkout@")
        assert checkout["with"] == {"fetch-depth": 0, "filter": "blob:none"}


# Stands in for the reconciler: answers a SIGINT as a stopped run does (exit 130), or
# ends with the given code.
FAKE_RECONCILE = """#!/bin/sh
trap 'echo "{\\"stopped\\": true}"; exit 130' INT
if [ -n "$CODE" ]; then echo '{}'; exit "$CODE"; fi
while :; do sleep 0.1; done
"""


@pytest.mark.parametrize(("code", "expected"), [("", 0), ("0", 0), ("1", 1)])
def test_the_scheduled_apply_is_asked_to_stop_before_the_job_s_limit(
    tmp_path: Path, code: str, expected: int
) -> None:
    """A backlog longer than the job's 120 minutes was cut by GitHub's cancel, whose
    SIGTERM follows its SIGINT within seconds: nothing it had done was pushed. At 100
    minutes the run is asked to stop (here at 1 s), pushes what it finished, and the
    step passes; a run that fails still fails the step."""
    script = dict(run_scripts(OURS[2]))["reconcile/Apply and push the advanced chains"]
    assert "timeout --preserve-status --signal=INT --kill-after=15m 100m \\\n" in script
    script = script.replace(" 100m ", " 1s ").replace("git config", ": git config")
    fake = tmp_path / "bin" / "reconcile"
    fake.parent.mkdir()
    fake.write_text(FAKE_RECONCILE)
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "CODE": code},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == expected, done.stderr
    stopped = code == ""
    assert (tmp_path / "result.json").read_text() == ('{"stopped": true}\n' if stopped else "{}\n")
    notice = "::notice::stopped at 100 minutes; the next run goes on from what was pushed\n"
    assert done.stdout == (notice if stopped else "")


def test_the_scaffolds_workflows_are_this_repositorys_but_for_the_pinned_package() -> None:
    for ours, scaffold in zip(OURS, SCAFFOLDS, strict=True):
        mine = {step: s for step, s in run_scripts(ours) if "pip install" not in s}
        theirs = {step: s for step, s in run_scripts(scaffold) if "pip install" not in s}
        assert mine == theirs, ours.name
        installs = [s for _, s in run_scripts(scaffold) if "pip install" in s]
        assert installs in ([], ['pip install "odf-reconciler==@RECONCILER_VERSION@"'])


def step_summary(folder: Path) -> str:
    """What the scheduled job's Summary step writes to ``$GITHUB_STEP_SUMMARY`` of the
    ``result.json`` in ``folder``, run as GitHub runs it: the loop's tests read what a
    run's causes look like there."""
    assert shutil.which("jq"), "jq is not installed: apt-get install jq (.ci/run does)"
    script = dict(run_scripts(OURS[2]))["reconcile/Summary"]
    summary = folder / "summary.md"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=folder,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return summary.read_text()


def test_the_run_summary_is_one_table_row_per_dataset(tmp_path: Path) -> None:
    """A cause of several lines (a reader's every malformed record) is its first line in
    the table, as in the commit message: a line break would end GitHub's table there.
    It is data (a row, a file name), so it is a code span: HTML, links and mentions in it
    were rendered."""
    (tmp_path / "result.json").write_text(
        json.dumps(
            {
                "datasets": [
                    {
                        "name": "org.x",
                        "status": "updated",
                        "blocks": 2,
                        "records": 9,
                        "seconds": 1.5,
                    },
                    {
                        "name": "org.y",
                        "status": "failed",
                        "seconds": 0.4,
                        "error": "ReadError: y.csv: line 3: a | b\ny.csv: line 4: c",
                    },
                    {
                        "name": "org.z",
                        "status": "failed",
                        "seconds": 0.1,
                        "error": "row '@octocat <img src=x> [x](https://e.example) **b** `c`'",
                    },
                ],
                "error": "push rejected: <b>x</b>\nsecond line",
                "discarded": "attempt 1's commit (abc: reconcile: 1 dataset advanced) was given up",
            }
        )
    )
    assert step_summary(tmp_path) == (
        "## Reconcile\n"
        "| Dataset | Status | Blocks | Records | Seconds | Error |\n"
        "|---|---|---:|---:|---:|---|\n"
        "| `org.x` | updated | 2 | 9 | 1.5 |  |\n"
        "| `org.y` | failed |  |  | 0.4 | `ReadError: y.csv: line 3: a \\| b` |\n"
        "| `org.z` | failed |  |  | 0.1 |"
        " `row '@octocat <img src=x> [x](https://e.example) **b** 'c''` |\n"
        "\n"
        "**Stopped:** `push rejected: <b>x</b>`\n"
        "**Given up:** `attempt 1's commit (abc: reconcile: 1 dataset advanced) was given up`\n"
    )
