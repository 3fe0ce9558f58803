"""This repository's own GitHub workflows pass the two linters (see workflow_lint.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow_lint import check_jsonschema, run_scripts, shellcheck

WORKFLOWS = sorted((Path(__file__).resolve().parents[1] / ".github" / "workflows").glob("*.yml"))


def test_this_repository_has_the_plan_and_reconcile_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["plan.yml", "reconcile.yml"]


def test_the_workflows_match_githubs_workflow_schema() -> None:
    result = check_jsonschema(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "ok -- validation done\n"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_run_script_of_the_workflows_passes_shellcheck(workflow: Path) -> None:
    scripts = dict(run_scripts(workflow))
    assert scripts, workflow
    failures = {step: shellcheck(script).stdout for step, script in scripts.items()}
    assert {step: out for step, out in failures.items() if out} == {}
