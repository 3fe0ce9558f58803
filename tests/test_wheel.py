"""The wheel carries everything a data repository needs.

It is built from a copy of this checkout (offline, with the setuptools of the test
environment), installed into a fresh virtual environment, and run in a data repository
that holds no reconciler code: no ``reconciler/``, no ``schemas/``, no ``policies/``.

The fresh environment has no pip and no third-party packages of its own; pyspark alone
is 457 MB, and the network reaches only the package index. A ``.pth`` file puts this
environment's site-packages after its own, as a plain path: Python processes ``.pth``
files only in site directories, so the editable install of this checkout (a ``.pth``
hook there) is not activated, and ``import reconciler`` can only find the wheel's copy,
which the tests check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASET = "org.example.readings"


@dataclass(frozen=True)
class Installation:
    """A wheel built from ``source`` and installed into the virtual environment ``venv``."""

    source: Path
    wheel: Path
    venv: Path
    site_packages: Path

    def run(self, cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
        """A command of the environment's ``bin/`` (``reconcile``, ``python``), as a user
        would run it with the environment activated: Spark on two local cores, bound to
        loopback."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env |= {
            "VIRTUAL_ENV": str(self.venv),
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "RECONCILER_SPARK_MASTER": "local[2]",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        return subprocess.run(
            [str(self.venv / "bin" / command[0]), *command[1:]],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installation:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(
        REPO_ROOT / "reconciler",
        source / "reconciler",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    dist = base / "dist"
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(source))
    (wheel,) = dist.glob("*.whl")

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    _pip("--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel))
    site_packages = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site_packages / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return Installation(source, wheel, venv, site_packages)


@pytest.fixture
def data_repo(tmp_path: Path) -> Path:
    """A data repository as a team keeps it: one root dataset over one CSV, nothing else."""
    (tmp_path / "datasets").mkdir()
    (tmp_path / "sources").mkdir()
    (tmp_path / "datasets" / f"{DATASET}.yaml").write_text(
        textwrap.dedent(
            f"""\
            kind: DatasetSnapshot
            version: 1
            content:
              name: {DATASET}
              kind: Root
              metadata:
                - kind: SetPollingSource
                  fetch: {{kind: FilesGlob, path: "sources/readings-*.csv"}}
                  read: {{kind: Csv, header: true, schema: [read_at TIMESTAMP, sensor STRING, value DOUBLE]}}
                  merge: {{kind: Append}}
                - kind: SetVocab
                  eventTimeColumn: read_at
            """
        )
    )
    (tmp_path / "sources" / "readings-1.csv").write_text(
        "read_at,sensor,value\n"
        "2026-01-01T00:00:00Z,s1,1.5\n"
        "2026-01-01T01:00:00Z,s2,2.5\n"
        "2026-01-01T02:00:00Z,s1,3.0\n"
    )
    return tmp_path


def _package_files(names: list[str]) -> set[str]:
    return {n for n in names if n.startswith("reconciler/") and not n.endswith("/")}


def test_the_wheel_holds_every_module_and_data_file_of_the_package(
    installed: Installation,
) -> None:
    in_source = {
        p.relative_to(installed.source).as_posix()
        for p in (installed.source / "reconciler").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = _package_files(wheel.namelist())
    assert in_wheel == in_source
    assert {
        "reconciler/engine/log4j2.properties",
        "reconciler/schemas/DatasetSnapshot.json",
        "reconciler/schemas/metadata-events/SetPollingSource.json",
        "reconciler/schemas/odf.fbs",
        "reconciler/templates/policies/naming.yaml",
        "reconciler/templates/policies/manifest-shape.schema.json",
        "reconciler/templates/dot-github/workflows/plan.yml",
        "reconciler/templates/dot-gitignore",
    } <= in_wheel


def test_the_installed_package_is_imported_from_the_wheel_with_its_version(
    installed: Installation, data_repo: Path
) -> None:
    result = installed.run(
        data_repo,
        "python",
        "-c",
        "import importlib.metadata, reconciler; print(reconciler.__file__); "
        "print(importlib.metadata.version('odf-reconciler'))",
    )
    assert result.returncode == 0, result.stderr
    project = tomllib.loads((installed.source / "pyproject.toml").read_text())["project"]
    assert result.stdout.splitlines() == [
        str(installed.site_packages / "reconciler" / "__init__.py"),
        project["version"],
    ]


def test_the_installed_cli_plans_and_applies_a_repository_that_holds_no_reconciler_code(
    installed: Installation, data_repo: Path
) -> None:
    assert sorted(p.name for p in data_repo.iterdir()) == ["datasets", "sources"]

    plan = installed.run(data_repo, "reconcile", "--plan", "--detailed-exitcode")
    assert plan.returncode == 2, plan.stdout + plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[0] == f"+ {DATASET} (Root, compatible) will be created"
    assert lines[-1] == "Plan: 1 to create; 1 with pending data. 0 errors, 0 warnings."

    apply = installed.run(
        data_repo, "reconcile", "--format", "json", "--system-time", "2026-01-02T00:00:00Z"
    )
    assert apply.returncode == 0, apply.stdout + apply.stderr
    result = json.loads(apply.stdout)
    for timed in (*result["datasets"], result["summary"]):
        assert timed.pop("seconds") > 0
    assert result["summary"].pop("line").startswith("1 dataset: 1 created (3 records) in ")
    assert result == {
        "formatVersion": 1,
        "command": "apply",
        "ok": True,
        "exitCode": 0,
        "interrupted": False,
        "discarded": None,
        "error": None,
        "datasets": [
            {
                "name": DATASET,
                "status": "created",
                "error": None,
                "blocks": 5,
                "metadataBlocks": 3,
                "records": 3,
                "offsets": [0, 2],
                "movedFiles": 0,
                "renamedFrom": None,
                "note": None,
            }
        ],
        "summary": {"datasets": 1, "statuses": {"created": 1}, "records": 3},
    }
    # The driver logged through the wheel's log4j2.properties: warnings and errors only.
    assert "Using Spark's default log4j profile" not in apply.stderr
    assert " INFO " not in apply.stderr

    again = installed.run(data_repo, "reconcile", "--plan", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines() == [
        f"= {DATASET} (Root) unchanged",
        "",
        "Plan: 1 unchanged. 0 errors, 0 warnings.",
    ]


def test_the_installed_reconcile_init_writes_the_scaffold_from_the_wheel(
    installed: Installation, tmp_path: Path
) -> None:
    result = installed.run(tmp_path, "reconcile", "init", "team-data")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"17 files created in {tmp_path / 'team-data'}: next, `reconcile plan`"
    )
    project = tomllib.loads((installed.source / "pyproject.toml").read_text())["project"]
    workflow = (tmp_path / "team-data" / ".github" / "workflows" / "reconcile.yml").read_text()
    assert f'pip install "odf-reconciler=={project["version"]}"' in workflow
    written = tmp_path / "team-data" / "policies"
    shipped = installed.source / "reconciler" / "templates" / "policies"
    assert _contents(written) == _contents(shipped) != {}


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}
