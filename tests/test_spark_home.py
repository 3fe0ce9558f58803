"""Spark's launcher is the installed pyspark's, wherever the command is run from.

pyspark looks for Spark's home in the working directory's parent before the installed
package when ``SPARK_HOME`` is unset: a repository holding ``bin/spark-submit`` and a
``jars/`` folder, with the command run from one of its folders (``datasets/``, as a
reviewer might with ``-C ..``), had the repository's script started with the runner's
environment. The command runs in a fresh interpreter, since the engine starts once per
process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo

SECRET = "J32-SPARK-HOME-SECRET"


@pytest.mark.parametrize("spark_home", [None, ""], ids=["unset", "empty"])
def test_a_repository_spark_submit_is_never_started(tmp_path: Path, spark_home: str | None) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    marker = tmp_path / "ran"
    script = repo.root / "bin" / "spark-submit"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "ran with $HOSTILE_SECRET" > {marker}\nexit 1\n')
    script.chmod(0o755)
    (repo.root / "jars").mkdir()
    (repo.root / "jars" / ".keep").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    env["HOSTILE_SECRET"] = SECRET
    if spark_home is not None:  # a workflow's `SPARK_HOME: ${{ vars.X }}`, X unset
        env["SPARK_HOME"] = spark_home

    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", "..", "sql", "SELECT 1 AS one"],
        cwd=repo.root / "datasets",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert not marker.exists()
    assert (result.returncode, result.stdout) == (0, "one\n---\n  1\n(1 row)\n")
