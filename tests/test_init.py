"""``reconcile init``: a data repository a team can push to GitHub as it is.

The scaffold plans and applies as written, its workflows pass the linters, its default
policies are this repository's own, and it never overwrites a file.
"""

from __future__ import annotations

import filecmp
import hashlib
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_here import reconcile_here
from gitops_repo import manifest, reconcile, rows, slices
from pyspark.sql import SparkSession
from workflow_lint import check_jsonschema, run_scripts, shellcheck

from reconciler.apply.outcome import Outcome, Status
from reconciler.config import RepoConfig
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Action
from reconciler.planning.compose import PlanRequest, make_plan
from reconciler.scaffold import (
    TEMPLATES,
    ConflictingFilesError,
    InitRefusedError,
    LinkedFolderError,
    RepositoryExistsError,
    init_repository,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SCAFFOLD = [
    ".github/workflows/plan-comment.yml",
    ".github/workflows/plan.yml",
    ".github/workflows/reconcile.yml",
    ".gitignore",
    "README.md",
    "datasets/org.example.shop.daily-sales.yaml",
    "datasets/org.example.shop.orders.yaml",
    "policies/chains.yaml",
    "policies/determinism.yaml",
    "policies/engines.yaml",
    "policies/evolution.yaml",
    "policies/manifest-shape.schema.json",
    "policies/metadata.yaml",
    "policies/naming.yaml",
    "policies/security.yaml",
    "pyproject.toml",
    "sources/orders/orders-2026-01-05.csv",
]
ORDERS = "org.example.shop.orders"
DAILY = "org.example.shop.daily-sales"


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_init_writes_the_scaffold_into_a_new_folder_and_returns_every_file_it_wrote(
    tmp_path: Path,
) -> None:
    target = tmp_path / "team-data"
    written = init_repository(target)
    assert [w.path.relative_to(target).as_posix() for w in written] == SCAFFOLD
    assert all(w.created and w.note == "" for w in written)
    assert _files(target) == SCAFFOLD


def test_init_pins_the_installed_version_in_both_workflows(tmp_path: Path) -> None:
    init_repository(tmp_path)
    install = f'pip install "odf-reconciler=={version("odf-reconciler")}"'
    for workflow in ("plan.yml", "reconcile.yml"):
        scripts = dict(run_scripts(tmp_path / ".github" / "workflows" / workflow))
        assert [s for s in scripts.values() if "pip install" in s] == [install], workflow
    assert not [f for f in SCAFFOLD if "@RECONCILER_VERSION@" in (tmp_path / f).read_text()]


def test_the_shipped_default_policies_are_this_repositorys_policies() -> None:
    shipped = TEMPLATES / "policies"
    ours = REPO_ROOT / "policies"
    names = sorted(p.name for p in ours.iterdir())
    assert sorted(p.name for p in shipped.iterdir()) == names, (
        "copy policies/ to reconciler/templates/policies/: init ships the defaults"
    )
    mismatch, errors = filecmp.cmpfiles(ours, shipped, names, shallow=False)[1:]
    assert (mismatch, errors) == ([], [])


def test_the_scaffold_plans_without_problems_and_applies_its_examples(
    tmp_path: Path, spark: SparkSession
) -> None:
    init_repository(tmp_path)
    plan = make_plan(RepoConfig.load(tmp_path), PlanRequest())
    assert [(d.name, d.action) for d in plan.datasets] == [
        (ORDERS, Action.CREATE),
        (DAILY, Action.CREATE),
    ]
    assert (plan.problems, plan.has_errors) == ((), False)

    assert reconcile(tmp_path) == [
        Outcome(ORDERS, Status.CREATED, metadata_blocks=5, data_blocks=2, rows=5),
        Outcome(DAILY, Status.CREATED, metadata_blocks=5, data_blocks=2, rows=4),
    ]
    odf = OdfRepository(tmp_path / "odf")
    for name in (ORDERS, DAILY):
        assert check_integrity(odf.dataset(name)) == [], name
    (daily,) = slices(odf.dataset(DAILY))
    assert rows(daily, "system_time") == [
        (0, 0, "2026-01-05", "coffee beans 1kg", 2, 3, "62.70"),
        (1, 0, "2026-01-05", "paper filters", 1, 5, "12.50"),
        (2, 0, "2026-01-06", "grinder", 1, 1, "89.00"),
        (3, 0, "2026-01-06", "paper filters", 1, 3, "7.50"),
    ]
    assert reconcile(tmp_path) == [
        Outcome(ORDERS, Status.UP_TO_DATE),
        Outcome(DAILY, Status.UP_TO_DATE),
    ]


def test_the_scaffolds_workflows_match_githubs_workflow_schema(tmp_path: Path) -> None:
    init_repository(tmp_path)
    result = check_jsonschema(sorted((tmp_path / ".github" / "workflows").glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "ok -- validation done\n"


def test_every_run_script_of_the_scaffolds_workflows_passes_shellcheck(tmp_path: Path) -> None:
    init_repository(tmp_path)
    scripts = {
        f"{workflow.name}:{step}": script
        for workflow in sorted((tmp_path / ".github" / "workflows").glob("*.yml"))
        for step, script in run_scripts(workflow)
    }
    assert list(scripts) == [
        "plan-comment.yml:comment/Post or update the plan comment and set the reconcile/plan status",
        "plan.yml:plan/Install the reconciler",
        "plan.yml:plan/Name the pull request in the plan artifact",
        "plan.yml:plan/Verify the changed chains",
        "plan.yml:plan/plan",
        "reconcile.yml:reconcile/Install the reconciler",
        "reconcile.yml:reconcile/Verify the chains",
        "reconcile.yml:reconcile/Apply and push the advanced chains",
        "reconcile.yml:reconcile/Collect the data store's unnamed objects",
        "reconcile.yml:reconcile/Summary",
    ]
    failures = {step: shellcheck(script).stdout for step, script in scripts.items()}
    assert {step: out for step, out in failures.items() if out} == {}


def test_git_ignores_what_the_workflows_and_runs_leave_in_the_checkout(tmp_path: Path) -> None:
    """The scheduled job's ``result.json``, saved plans, the lock, crash temporaries and
    the store's cache stay out of ``git status`` and ``git add -A``; a chain does not."""
    init_repository(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    left = ["result.json", "plan.json", "plan.md", "odf/.lock", "odf/org.x/refs/.lock"]
    left += [".pending-1a2b", "odf/org.x/.pending-1a2b", ".reconcile-cache/data/f1620"]
    kept = ["odf/org.x/refs/head", "odf/org.x/blocks/f1620", "odf/org.x/data/f1620"]
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", *left, *kept],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.stdout.splitlines() == left


def test_init_refuses_a_folder_that_already_holds_manifests_and_writes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "org.example.mine.yaml").write_text("kind: DatasetSnapshot\n")
    with pytest.raises(RepositoryExistsError) as refused:
        init_repository(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path / 'datasets'} already holds manifests: this is a reconciler repository already"
    )
    assert _files(tmp_path) == ["datasets/org.example.mine.yaml"]


def test_init_lists_every_existing_file_it_would_overwrite_and_writes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "README.md").write_text("# Ours\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "naming.yaml").write_text("ours: true\n")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "plan.yml").write_text("name: ours\n")
    (tmp_path / "RECONCILER.md").write_text("# Ours too\n")
    with pytest.raises(ConflictingFilesError) as refused:
        init_repository(tmp_path)
    conflicts = [
        tmp_path / ".github" / "workflows" / "plan.yml",
        tmp_path / "RECONCILER.md",
        tmp_path / "policies" / "naming.yaml",
    ]
    assert refused.value.conflicts == conflicts
    assert str(refused.value) == (
        f"refusing to overwrite 3 existing file(s): {conflicts[0]}, {conflicts[1]}, {conflicts[2]}"
    )
    assert isinstance(refused.value, InitRefusedError)
    assert _files(tmp_path) == [
        ".github/workflows/plan.yml",
        ".gitignore",
        "README.md",
        "RECONCILER.md",
        "policies/naming.yaml",
    ]
    assert (tmp_path / "README.md").read_text() == "# Ours\n"
    assert (tmp_path / ".gitignore").read_text() == "*.log\n"


def test_init_refuses_folders_a_symlink_leads_outside_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """``.github`` and ``sources`` linked elsewhere: the workflows and the example CSV
    were written there, then a raw ValueError stopped it, 17 files said created."""
    target, outside = tmp_path / "repo", tmp_path / "outside"
    (outside / "gh").mkdir(parents=True)
    (outside / "srcs").mkdir()
    target.mkdir()
    (target / ".github").symlink_to(outside / "gh")
    (target / "sources").symlink_to(outside / "srcs")
    (target / "inside").mkdir()
    (target / "policies").symlink_to(target / "inside")  # a link that stays is no matter
    with pytest.raises(LinkedFolderError) as refused:
        init_repository(target)
    assert str(refused.value) == (
        "refusing to write through 2 folder(s) that lead outside the repository:"
        f" {target / '.github'}, {target / 'sources'}"
    )
    assert _files(outside) == [] and _files(target / "inside") == []


def test_init_goes_into_an_existing_repository_adding_to_its_own_files(
    tmp_path: Path,
) -> None:
    """A Python project's repository: its pyproject.toml gains [tool.reconciler], its
    .gitignore the rules it lacks (once), and its README stays, the guide beside it."""
    project = '[project]\nname = "analytics"\nversion = "1.0"\n\n[tool.ruff]\nline-length = 99'
    (tmp_path / "pyproject.toml").write_text(project)  # no final newline
    (tmp_path / ".gitignore").write_text("data/\n.venv/\n__pycache__/\n")
    (tmp_path / "README.md").write_text("# Analytics\n")
    written = init_repository(tmp_path)
    updated = [(w.path.relative_to(tmp_path).as_posix(), w.note) for w in written if not w.created]
    assert updated == [
        (".gitignore", "15 rules added"),
        ("pyproject.toml", "[tool.reconciler] added"),
    ]
    created = [w.path.relative_to(tmp_path).as_posix() for w in written if w.created]
    guide = [f for f in SCAFFOLD if f not in (".gitignore", "pyproject.toml", "README.md")]
    assert created == sorted(["RECONCILER.md", *guide])
    assert (tmp_path / "README.md").read_text() == "# Analytics\n"
    assert (tmp_path / "RECONCILER.md").read_text() == (
        (TEMPLATES / "README.md")
        .read_text()
        .replace("@RECONCILER_VERSION@", version("odf-reconciler"))
    )
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(project + "\n\n# Settings of the ODF reconciler")
    config = RepoConfig.load(tmp_path)
    assert (config.datasets_dir, config.odf_dir) == (tmp_path / "datasets", tmp_path / "odf")
    ignore = (tmp_path / ".gitignore").read_text().splitlines()
    assert ignore[:4] == ["data/", ".venv/", "__pycache__/", ""]
    assert ignore[4] == "# Added by `reconcile init` (odf-reconciler):"
    assert ".venv/" not in ignore[5:] and "__pycache__/" not in ignore[5:]
    assert ignore[-1] == ".reconcile-cache/" and len(ignore) == 5 + 15
    # What it ignores is what the scaffold's own .gitignore ignores.
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    left = ["result.json", "odf/.lock", ".reconcile-cache/data/f1620", "data/x.csv"]
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", *left, "odf/org.x/blocks/f1620"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.stdout.splitlines() == left
    # A second init finds a reconciler repository and writes nothing.
    with pytest.raises(RepositoryExistsError):
        init_repository(tmp_path)


@pytest.mark.parametrize(
    ("pyproject", "error"),
    [
        (
            "[tool.reconciler]\ndatasets = 'defs'\n",
            "{path} has [tool.reconciler] already: this is a reconciler repository already",
        ),
        (
            "[project\n",
            "{path} is not valid TOML (Expected ']' at the end of a table declaration (at …)):"
            " nothing written",
        ),
        (
            "tool = {ruff = {line-length = 99}}\n",
            "{path}: [tool.reconciler] cannot be added to it (Cannot declare ('tool', 'reconciler')"
            " twice (at …)): nothing written",
        ),
    ],
    ids=["configured", "invalid", "inline-tool"],
)
def test_init_refuses_a_pyproject_it_cannot_add_to_and_writes_nothing(
    tmp_path: Path, pyproject: str, error: str
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(pyproject)
    with pytest.raises(InitRefusedError) as refused:
        init_repository(tmp_path)
    # tomllib's position of the fault, which depends on the template's length, aside
    assert re.sub(r"\(at line \d+, column \d+\)", "(at …)", str(refused.value)) == (
        error.format(path=path)
    )
    assert _files(tmp_path) == ["pyproject.toml"]
    assert path.read_text() == pyproject


def test_init_goes_into_a_folder_with_an_empty_datasets_folder_and_other_files(
    tmp_path: Path,
) -> None:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "LICENSE").write_text("Apache-2.0\n")
    assert len(init_repository(tmp_path)) == len(SCAFFOLD)
    assert _files(tmp_path) == sorted([*SCAFFOLD, "LICENSE"])


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``reconcile ARGS`` run from ``cwd``, in this process (``cli_here``): ``init`` starts
    no Spark."""
    return reconcile_here(list(args), cwd=cwd, spark=False)


GIT_INIT = "initialized a git repository on branch main: nothing is committed yet"


def _git_out(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_reconcile_init_names_each_file_it_creates_and_starts_a_git_repository(
    tmp_path: Path,
) -> None:
    """Outside a repository it wrote the files and left ``git init`` to the user: the
    scaffold is made to be pushed, planned against a ref and committed by apply."""
    result = _cli(tmp_path, "init", "team-data")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        *(f"created {f}" for f in SCAFFOLD),
        GIT_INIT,
        f"17 files created in {tmp_path / 'team-data'}: next, `reconcile plan`",
    ]
    team = tmp_path / "team-data"
    assert [f for f in _files(team) if not f.startswith(".git/")] == SCAFFOLD
    assert _git_out(team, "rev-parse", "--show-toplevel") == str(team.resolve())
    assert _git_out(team, "symbolic-ref", "HEAD") == "refs/heads/main"
    # nothing committed: the team reads the scaffold before its first commit
    assert _git_out(team, "status", "--porcelain").splitlines()[:2] == [
        "?? .github/",
        "?? .gitignore",
    ]


def test_reconcile_init_in_a_git_repository_does_not_start_another(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "trunk")
    result = _cli(tmp_path, "init", "team-data")
    assert result.returncode == 0, result.stderr
    assert GIT_INIT not in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == (
        f"17 files created in {tmp_path / 'team-data'}: next, `reconcile plan`"
    )
    assert not (tmp_path / "team-data" / ".git").exists()
    assert _git_out(tmp_path / "team-data", "rev-parse", "--show-toplevel") == str(
        tmp_path.resolve()
    )


def test_reconcile_init_names_what_it_adds_to_the_teams_own_files(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "README.md").write_text("# Ours\n")
    result = _cli(tmp_path, "init")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "created .github/workflows/plan-comment.yml",
        "created .github/workflows/plan.yml",
        "created .github/workflows/reconcile.yml",
    ]
    assert "updated .gitignore: 17 rules added" in lines
    assert "created RECONCILER.md: the scaffold's README (README.md is yours)" in lines
    assert lines[-1] == f"16 files created, 1 updated in {tmp_path}: next, `reconcile plan`"


MADE_UP = "f1620" + hashlib.sha3_256(b"<dataset>/data").hexdigest()
"""The data file name the checks look at where no dataset folder is yet."""


def test_reconcile_init_warns_of_what_the_repositorys_ignore_rules_keep_out_of_git(
    tmp_path: Path,
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("data/\n*.csv\n*.json\n")
    result = _cli(tmp_path, "init")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: git ignores policies/manifest-shape.schema.json (.gitignore:3: *.json):"
        " it will not be committed",
        "warning: git ignores sources/orders/orders-2026-01-05.csv (.gitignore:2: *.csv):"
        " it will not be committed",
        f"warning: git ignores odf/<dataset>/data/{MADE_UP} (.gitignore:1: data/): add the rule"
        " `!odf/**` below it, or the chains' files will not be committed (apply --commit"
        " refuses until then)",
    ]
    # Rules that catch none of it, in a repository: no warning.
    clean = tmp_path / "clean"
    clean.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=clean, check=True)
    (clean / ".gitignore").write_text("*.log\n")
    quiet = _cli(clean, "init")
    assert (quiet.returncode, quiet.stderr) == (0, "")


def test_reconcile_init_refuses_an_existing_file_with_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "naming.yaml").write_text("ours: true\n")
    result = _cli(tmp_path, "init")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: refusing to overwrite 1 existing file(s): {tmp_path / 'policies' / 'naming.yaml'}\n"
    )
    assert _files(tmp_path) == ["policies/naming.yaml"]  # and no git repository started


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_the_scaffolds_plan_step_run_as_github_runs_it_leaves_the_plan_for_the_upload(
    tmp_path: Path,
) -> None:
    """The plan workflow's script, run by bash from the workspace with ``pr/`` beside
    ``plan/`` (as actions/checkout lays them out): its ``--out`` paths, taken from ``-C
    pr`` as git takes them, must land in the workspace's ``plan/``, which the upload step
    takes. It once wrote into ``pr/plan/``, which did not exist: every plan failed."""
    team = tmp_path / "team"
    init_repository(team)
    (team / "datasets" / f"{DAILY}.yaml").unlink()  # a root alone: no query, no JVM
    _git(team, "init", "-q", "-b", "main")
    _git(team, "add", "-A")
    _git(team, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "team")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _git(workspace, "clone", "-q", str(team), "pr")
    scripts = dict(run_scripts(team / ".github" / "workflows" / "plan.yml"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    env |= {"BASE_REF": "main", "PR_NUMBER": "7", "GITHUB_WORKSPACE": str(workspace)}
    named = subprocess.run(
        ["bash", "-e", "-c", scripts["plan/Name the pull request in the plan artifact"]],
        cwd=workspace,
        env=env,
        check=False,
        timeout=60,
    )
    assert named.returncode == 0
    # A pull request whose chains do not verify stops before the plan: the upload still
    # finds the pull request's number, so the comment workflow can fail its status.
    assert sorted(p.name for p in (workspace / "plan").iterdir()) == ["pr-number"]

    def plan_step() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-e", "-c", scripts["plan/plan"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    result = plan_step()
    assert (result.returncode, result.stderr) == (0, "")
    plan = workspace / "plan"
    assert sorted(p.name for p in plan.iterdir()) == [
        "exit-code",
        "plan.json",
        "plan.md",
        "pr-number",
    ]
    assert (plan / "exit-code").read_text() == "2\n"
    assert (plan / "pr-number").read_text() == "7\n"
    assert '"name": "org.example.shop.orders"' in (plan / "plan.json").read_text()
    assert "org.example.shop.orders" in (plan / "plan.md").read_text()
    assert not (workspace / "pr" / "plan").exists()
    # A plan with errors is saved by no --out; the step writes it from stdout, so the
    # comment still shows the plan and its errors, not only what stderr said.
    for made in ("exit-code", "plan.json", "plan.md"):
        (plan / made).unlink()
    bad = manifest("org.example.shop.bad", "Root", "- kind: SetInfo\n  colour: red")
    (workspace / "pr" / "datasets" / "org.example.shop.bad.yaml").write_text(bad)
    failed = plan_step()
    assert (failed.returncode, failed.stderr) == (1, "")
    assert (plan / "exit-code").read_text() == "1\n"
    assert "unknown field 'colour'" in (plan / "plan.md").read_text()
    assert '"name": "org.example.shop.orders"' in (plan / "plan.json").read_text()


def test_an_out_file_in_a_folder_that_does_not_exist_is_refused_before_any_work(
    tmp_path: Path,
) -> None:
    init_repository(tmp_path / "pr")
    # refused before any work: not a JVM started (the relative paths are taken from cwd)
    result = reconcile_here(
        ["-C", "pr", "plan", "--out", "plan/plan.json"], cwd=tmp_path, spark=False
    )
    assert result.returncode == 64
    assert result.stderr.splitlines()[-1] == (
        "Error: --out plan/plan.json: folder pr/plan does not exist"
        " (a relative path is taken from -C pr)"
    )
    assert result.stdout == ""


def test_a_repositorys_own_python_packages_never_run_in_sparks_python_workers(
    tmp_path: Path,
) -> None:
    """Spark starts its Python workers as ``python -m pyspark.daemon`` in the directory
    the run started in: the repository. A ``pyspark/`` folder a pull request adds there
    would be imported instead of the real package, and run with the apply's secrets and
    push token. The workers now run with ``PYTHONSAFEPATH``: the folder is never on
    their path."""
    init_repository(tmp_path)
    marker = tmp_path.parent / f"{tmp_path.name}-ran"
    code = f"open({str(marker)!r}, 'a').write('imported\\n')\n"
    for package in ("pyspark", "pyarrow"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(code)
    result = subprocess.run(
        [_bin("reconcile"), "apply", "--yes"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert not marker.exists()
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("2 datasets: 2 created (9 records) in ")
