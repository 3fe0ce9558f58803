"""Two linters for GitHub Actions workflows, as the tests run them.

- ``check-jsonschema --builtin-schema vendor.github-workflows``: the workflow's shape,
  against the schema check-jsonschema vendors (no network needed).
- ``shellcheck`` on every ``run:`` script, as the bash GitHub runs it. An expression
  ``${{ … }}`` is replaced by underscores of its length first (what actionlint does):
  GitHub substitutes it before bash reads the script, and as written it is not shell.

Both are required: a missing linter fails the test that asks for it, never skips it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def check_jsonschema(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """``check-jsonschema`` of this environment (a dev dependency) on the workflows."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def run_scripts(workflow: Path) -> Iterator[tuple[str, str]]:
    """(``job/step``, script) for every ``run:`` step of the workflow."""
    document = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    for job_id, job in document["jobs"].items():
        for index, step in enumerate(job["steps"]):
            if "run" in step:
                yield f"{job_id}/{step.get('id') or step.get('name') or index}", step["run"]


def shellcheck(script: str) -> subprocess.CompletedProcess[str]:
    """shellcheck's verdict on one ``run:`` script (GitHub's default shell is bash)."""
    executable = shutil.which("shellcheck")
    assert executable is not None, (
        "shellcheck is not installed: apt-get install shellcheck (.ci/run does)"
    )
    plain = EXPRESSION.sub(lambda m: "_" * len(m.group()), script)
    return subprocess.run(
        [executable, "--shell=bash", "--format=gcc", "-"],
        input=plain,
        capture_output=True,
        text=True,
        check=False,
    )
