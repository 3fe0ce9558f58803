"""A saved plan checks against ``plan.json`` with another tool, offline, as the README
shows: ``check-jsonschema`` with the schemas' folder as the base of their ``$id``s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gitops_repo import GitOpsRepo, manifest, root_events
from test_cli_apply import run

import reconciler


def test_a_saved_plan_is_valid_for_check_jsonschema_with_the_readmes_base_uri(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    saved = tmp_path / "plan.json"
    planned = run(repo.root, "plan", "--format", "json", "--out", str(saved))
    assert planned.returncode == 0, planned.stderr
    schemas = Path(reconciler.__file__).parent / "schemas"
    schema = ["--schemafile", str(schemas / "plan.json"), "--base-uri", f"file://{schemas}/"]
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *schema, str(saved)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (checked.returncode, checked.stdout) == (0, "ok -- validation done\n"), checked.stderr
