"""The contract between plan and apply: what the plan approves, apply does.

For a corpus of manifest changes on an applied repository (a root, a derivative of it and
a derivative of that), the real CLI plans, then applies. A plan without errors applies
with exit 0 and the next plan is ``unchanged`` everywhere with no pending work; a plan
with errors makes apply refuse before writing anything (the tree is byte-identical).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from typer.testing import CliRunner

from reconciler.cli import app

REPO_ROOT = Path(__file__).resolve().parents[1]
A, B, C = "org.example.a", "org.example.b", "org.example.c"
OVERRIDE = "# reconcile: allow-breaking-change: reviewed\n"
QUERY_B = "SELECT event_time, a, b FROM `org.example.a`"
QUERY_C = "SELECT event_time, a FROM `org.example.b`"
times = iter(f"2026-03-{day:02}T00:00:00Z" for day in range(1, 29))


def cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["-C", str(root), *args])
    return result.exit_code, result.stdout


def plan(root: Path) -> tuple[int, dict[str, Any]]:
    code, out = cli(root, "plan", "--format", "json", "--detailed-exitcode")
    return code, json.loads(out)


def apply(root: Path) -> int:
    return cli(root, "apply", "--yes", "--system-time", next(times))[0]


def tree(root: Path) -> dict[str, bytes]:
    """Every file of the repository but git's, by path: what "nothing written" compares."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    """The applied repository every case starts from (built once, copied per case)."""
    repo = GitOpsRepo.create(tmp_path_factory.mktemp("base") / "repo")
    shutil.copytree(REPO_ROOT / "policies", repo.root / "policies")
    (repo.root / "sources").mkdir()
    (repo.root / "sources" / "a-1.csv").write_text("a,b\n1,x\n2,y\n")
    repo.write(A, manifest(A, "Root", root_events()))
    repo.write(B, manifest(B, "Derivative", derivative_events([A], QUERY_B)))
    repo.write(C, manifest(C, "Derivative", derivative_events([B], QUERY_C)))
    assert apply(repo.root) == 0
    assert plan(repo.root)[0] == 0
    return repo.root


Change = Callable[[GitOpsRepo], None]


def root_with(
    schema: str = "[a BIGINT, b STRING]", path: str = "sources/*.csv", top: str = ""
) -> Change:
    events = root_events(schema=schema).replace("sources/*.csv", path)
    return lambda r: r.write(A, top + manifest(A, "Root", events))


def query_of(name: str, inputs: list[str], query: str, top: str = "") -> Change:
    return lambda r: r.write(
        name, top + manifest(name, "Derivative", derivative_events(inputs, query))
    )


def describe(name: str, words: str) -> Change:
    def change(r: GitOpsRepo) -> None:
        path = r.root / "datasets" / f"{name}.yaml"
        text = path.read_text()
        path.write_text(text.replace("data\n", f"{words}\n", 1).replace("Example data", words))

    return change


def new_file(name: str, text: str = "a,b\n3,z\n") -> Change:
    return lambda r: (r.root / "sources" / name).write_text(text)


def both(*changes: Change) -> Change:
    def change(r: GitOpsRepo) -> None:
        for c in changes:
            c(r)

    return change


CASES: dict[str, tuple[Change, bool]] = {
    # name: (change, whether the plan has errors)
    "metadata-only on a root": (describe(A, "New words"), False),
    "metadata-only on a derivative": (describe(B, "Other words"), False),
    "metadata-only on both ends": (both(describe(A, "One"), describe(C, "Two")), False),
    "a new file only": (new_file("a-2.csv"), False),
    "two new files": (both(new_file("a-2.csv"), new_file("a-3.csv")), False),
    "compatible: a nullable column added to a root": (
        both(root_with("[a BIGINT, b STRING, c STRING]"), new_file("a-2.csv", "a,b,c\n3,z,q\n")),
        False,
    ),
    "compatible: a column added to a derivative's query": (
        query_of(B, [A], "SELECT event_time, a, b, a * 2 AS a2 FROM `org.example.a`"),
        False,
    ),
    "needs-validation: a filter added to a query": (
        query_of(B, [A], "SELECT event_time, a, b FROM `org.example.a` WHERE a > 0"),
        False,
    ),
    "needs-validation: a changed leaf query": (
        query_of(C, [B], "SELECT event_time, a + 1 AS a FROM `org.example.b`"),
        False,
    ),
    "breaking without override: a root column dropped": (root_with("[a BIGINT]"), True),
    "breaking without override: a derivative column dropped": (
        query_of(B, [A], "SELECT event_time, a FROM `org.example.a`"),
        True,
    ),
    "breaking without override: a column retyped": (root_with("[a STRING, b STRING]"), True),
    "recreate of a root with override (downstream still reads it)": (
        root_with("[a STRING, b STRING]", top=OVERRIDE),
        False,
    ),
    "recreate of a derivative with downstream, with override": (
        query_of(
            B, [A], "SELECT event_time, a, upper(b) AS b FROM `org.example.a` WHERE a > 1", OVERRIDE
        ),
        False,
    ),
    "upstream drop breaks a downstream query (override on the root)": (
        root_with("[a BIGINT]", top=OVERRIDE),
        True,
    ),
    "upstream derivative drop breaks the leaf query": (
        query_of(B, [A], "SELECT event_time, b FROM `org.example.a`", OVERRIDE),
        True,
    ),
    "a typo in a query": (query_of(B, [A], "SELECT event_time, a, bb FROM `org.example.a`"), True),
    "a syntax error in a query": (query_of(C, [B], "SELEC event_time FROM `org.example.b`"), True),
    "an unknown input": (query_of(C, ["org.example.nope"], "SELECT 1 AS x"), True),
    "a FilesGlob typo matching no file": (root_with(path="source/*.csv"), False),
    "a FilesGlob typo with a new file elsewhere": (
        both(root_with(path="sources/b-*.csv"), new_file("a-2.csv")),
        False,
    ),
    "a new root with its file": (
        lambda r: (
            new_file("n-1.csv")(r),
            r.write(
                "org.example.n",
                manifest(
                    "org.example.n",
                    "Root",
                    root_events().replace("sources/*.csv", "sources/n-*.csv"),
                ),
            ),
        ),
        False,
    ),
    "a new derivative of an existing one": (
        query_of("org.example.d", [C], "SELECT event_time, a FROM `org.example.c` WHERE a > 1"),
        False,
    ),
    "a new root awaiting its first file": (
        lambda r: r.write(
            "org.example.w",
            manifest(
                "org.example.w", "Root", root_events().replace("sources/*.csv", "later/*.csv")
            ),
        ),
        False,
    ),
    "a manifest that is not valid YAML": (lambda r: r.write(C, "kind: [unclosed\n"), True),
    "a non-deterministic query": (
        query_of(C, [B], "SELECT event_time, a, rand() AS r FROM `org.example.b`"),
        True,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_the_plan_approves_applies_and_what_it_refuses_writes_nothing(
    case: str, base: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(base, root, symlinks=True)
    change, has_errors = CASES[case]
    change(GitOpsRepo(root))
    code, document = plan(root)
    summary = document["summary"]
    assert (summary["errors"] > 0, summary["hasErrors"]) == (has_errors, has_errors), document[
        "problems"
    ]
    before = tree(root)
    applied = apply(root)
    if has_errors:
        assert (code, applied) == (1, 1)
        assert tree(root) == before
        return
    assert code in (0, 2) and applied == 0
    again_code, again = plan(root)
    assert again_code == 0
    assert {d["name"]: (d["action"], d.get("pending", [])) for d in again["datasets"]} == {
        d["name"]: ("unchanged", []) for d in again["datasets"]
    }
    assert again["summary"]["errors"] == 0


def test_a_new_dataset_whose_first_fetch_fails_is_not_created_at_all(
    base: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(base, root, symlinks=True)
    events = root_events().replace(
        '{kind: FilesGlob, path: "sources/*.csv"}', '{kind: Url, url: "file:sources/missing.csv"}'
    )
    GitOpsRepo(root).write("org.example.m", manifest("org.example.m", "Root", events))
    before = tree(root)
    code, out = cli(root, "apply", "--yes", "--system-time", next(times))
    assert code == 1
    result = [line[9:] for line in out.splitlines() if "org.example.m" in line][-1]
    assert result.rsplit(" in ", 1)[0] == (
        "ERROR org.example.m failed: fetch failed: SourceNotFoundError: "
        "sources/missing.csv: file not found"
    )
    assert tree(root) == before
    _, document = plan(root)
    actions = {d["name"]: d["action"] for d in document["datasets"]}
    assert actions["org.example.m"] == "create"
