"""What a short command loads: a command's modules are imported only when it runs.

A process pays for every module it imports: Spark's Python side and the OpenLineage
client cost about a second before anything is done, and a plan or ``log`` runs in every
pull request, often by hand. Each case runs the real app in a fresh interpreter and
lists which of the heavy packages it left in ``sys.modules``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events

HEAVY = ("git", "numpy", "openlineage", "pyarrow", "pydantic", "pyspark")

PROBE = f"""
import sys
from reconciler.cli import app
try:
    app(sys.argv[1:], prog_name="reconcile")
except SystemExit as e:
    code = e.code
print(code, [m for m in {HEAVY!r} if m in sys.modules])
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> GitOpsRepo:
    """A root and a derivative whose metadata is applied (no data: no engine needed)."""
    gitops = GitOpsRepo.create(tmp_path_factory.mktemp("imports") / "repo")
    gitops.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    query = "SELECT * FROM `org.example.a`"
    gitops.write(
        "org.example.b",
        manifest("org.example.b", "Derivative", derivative_events(["org.example.a"], query)),
    )
    gitops.apply()
    return gitops


def loaded(root: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return result.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "0 []"),
        (["--version"], "0 []"),
        (["plan", "-s", "nothing.here"], "64 ['git', 'numpy', 'pyarrow', 'pydantic']"),
        (["plan"], "0 ['git', 'numpy', 'pyarrow', 'pydantic']"),
        (["log", "org.example.b"], "0 ['numpy', 'pyarrow', 'pydantic']"),
        (["verify", "--integrity"], "0 ['git', 'numpy', 'pyarrow', 'pydantic']"),
        (["lineage"], "0 ['numpy', 'pyarrow', 'pydantic']"),
        (["gc"], "0 ['git', 'numpy', 'pyarrow', 'pydantic']"),
    ],
    ids=["help", "version", "plan-usage-error", "plan", "log", "verify-integrity", "lineage", "gc"],
)
def test_a_command_that_starts_no_engine_loads_neither_spark_nor_openlineage(
    repo: GitOpsRepo, args: list[str], expected: str
) -> None:
    assert loaded(repo.root, *args) == expected


LINEAGE_PROBE = """
import sys
from pathlib import Path
from reconciler.lineage.openlineage_events import Lineage
lineage = Lineage.from_environment(Path.cwd(), {env!r})
print(lineage.enabled, "openlineage" in sys.modules)
"""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "False False"),
        ({"OPENLINEAGE_DISABLED": "true", "OPENLINEAGE_URL": "http://127.0.0.1:9"}, "False False"),
        ({"OPENLINEAGE_URL": "http://127.0.0.1:9"}, "True True"),
        ({"OPENLINEAGE__TRANSPORT__TYPE": "console"}, "True True"),
    ],
    ids=["nothing", "disabled", "url", "variables"],
)
def test_the_openlineage_client_is_imported_only_when_lineage_is_configured(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    """An apply without lineage configured pays nothing for it (about half a second)."""
    env = {"HOME": str(tmp_path), **env}  # no ~/.openlineage/openlineage.yml
    result = subprocess.run(
        [sys.executable, "-c", LINEAGE_PROBE.format(env=env)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.splitlines()[-1] == expected
