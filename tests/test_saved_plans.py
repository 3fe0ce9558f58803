"""Saved plans: `reconcile apply plan.json` applies exactly what was reviewed, or nothing.

A plan saved with `reconcile plan --format json --out plan.json` records what it was made
from. Applying it plans again: any manifest, policy file or chain head that moved, or
another reconciler version, makes it stale, and every difference is named; exit 1 and
nothing is written. A fresh one is applied exactly, and only once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import git
import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from test_cli_apply import run

from reconciler.gitloop.fingerprints import differences
from reconciler.plan.model import Fingerprints

A = "org.example.a"
B = "org.example.b"
POLICY = """\
rules:
  - id: license-required
    severity: error
    message: every dataset needs a license
    require_events: [SetLicense]
"""


def described(description: str) -> str:
    return manifest(A, "Root", root_events().replace("Example data", description))


@pytest.fixture
def saved(tmp_path: Path) -> tuple[GitOpsRepo, Path]:
    """A repository where A has a chain and B is new, and its plan saved in plan.json."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    (repo.root / "policies").mkdir()
    (repo.root / "policies" / "metadata.yaml").write_text(POLICY)
    repo.write(A, described("Example data"))
    repo.apply()
    repo.write(A, described("Readings, corrected"))
    repo.write(B, manifest(B, "Root", root_events()))
    repo.commit("a has a chain, b is new")
    path = tmp_path / "plan.json"
    planned = run(repo.root, "plan", "--format", "json", "--out", str(path))
    assert planned.returncode == 0, planned.stderr
    return repo, path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def files(repo: GitOpsRepo) -> dict[str, bytes]:
    """Every file under odf/ but the lock, with its bytes."""
    return {
        p.relative_to(repo.root).as_posix(): p.read_bytes()
        for p in sorted(repo.config.odf_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def assert_refused(repo: GitOpsRepo, path: Path, *differences: str, alias: bool = False) -> None:
    before = files(repo)
    args = ("--apply", str(path)) if alias else ("apply", str(path))
    result = run(repo.root, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == (
        f"error: the saved plan {path} is stale; nothing was applied:\n"
        + "".join(f"  - {d}\n" for d in differences)
    )
    assert result.stdout == ""
    assert files(repo) == before


def test_a_saved_plan_records_fingerprints_of_manifests_policies_heads_and_version(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    fingerprints = json.loads(path.read_text())["fingerprints"]
    assert sorted(fingerprints) == [
        "heads",
        "manifests",
        "policies",
        "reconcilerVersion",
        "settings",
    ]
    assert fingerprints["settings"] == sha256("{}")  # no [tool.reconciler]: the defaults
    assert fingerprints["reconcilerVersion"] == "0.1.0"
    assert fingerprints["manifests"] == {
        f"datasets/{A}.yaml": sha256(described("Readings, corrected")),
        f"datasets/{B}.yaml": sha256(manifest(B, "Root", root_events())),
    }
    assert fingerprints["policies"] == {"policies/metadata.yaml": sha256(POLICY)}
    assert fingerprints["heads"] == {A: str(repo.odf.dataset(A).head())}


def test_a_saved_plan_whose_manifest_changed_is_refused(saved: tuple[GitOpsRepo, Path]) -> None:
    repo, path = saved
    repo.write(A, described("Readings, corrected twice"))
    assert_refused(repo, path, f"manifest datasets/{A}.yaml changed")


def test_a_saved_plan_is_refused_when_a_manifest_was_added(saved: tuple[GitOpsRepo, Path]) -> None:
    repo, path = saved
    repo.write("org.example.c", manifest("org.example.c", "Root", root_events()))
    assert_refused(repo, path, "manifest datasets/org.example.c.yaml added")


def test_a_saved_plan_is_refused_when_a_manifest_was_removed(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    repo.remove(B)
    assert_refused(repo, path, f"manifest datasets/{B}.yaml removed")


def test_a_saved_plan_whose_policy_file_changed_is_refused(saved: tuple[GitOpsRepo, Path]) -> None:
    repo, path = saved
    (repo.root / "policies" / "metadata.yaml").write_text(POLICY.replace("error", "warning"))
    assert_refused(repo, path, "policy file policies/metadata.yaml changed")


def test_a_saved_plan_is_refused_once_the_settings_changed(saved: tuple[GitOpsRepo, Path]) -> None:
    """Journey 38: a Spark option committed after the plan was saved (one that made the
    JVM write a file of its choosing) was applied with it; Terraform's saved plan pins
    its configuration too. The rest of pyproject.toml is not the reconciler's."""
    repo, path = saved
    pyproject = repo.root / "pyproject.toml"
    pyproject.write_text('[project]\nname = "data"\nversion = "2"\n')
    other = run(repo.root, "plan", "--format", "json", "--out", str(repo.root.parent / "o.json"))
    assert json.loads((repo.root.parent / "o.json").read_text())["fingerprints"]["settings"] == (
        sha256("{}")
    ), other.stderr
    pyproject.write_text(
        '[tool.reconciler.spark.conf]\n"spark.driver.extraJavaOptions" = "-Xlog:gc:file=/tmp/x"\n'
    )
    assert_refused(repo, path, "the settings changed: [tool.reconciler] in pyproject.toml")


def test_a_saved_plan_is_refused_when_a_chain_head_moved(saved: tuple[GitOpsRepo, Path]) -> None:
    repo, path = saved
    planned_at = str(repo.odf.dataset(A).head())
    repo.remove(B)  # only A's manifest is applied, then both are restored
    repo.apply()
    repo.write(B, manifest(B, "Root", root_events()))
    now = str(repo.odf.dataset(A).head())
    assert now != planned_at
    assert_refused(repo, path, f"chain head of {A} moved: planned at {planned_at}, now {now}")


def test_a_saved_plan_made_by_another_reconciler_version_is_refused(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    document = json.loads(path.read_text())
    document["fingerprints"]["reconcilerVersion"] = "0.0.9"
    path.write_text(json.dumps(document, indent=2))
    assert_refused(repo, path, "reconciler version 0.0.9 planned, 0.1.0 applying", alias=True)


def test_a_stale_saved_plan_names_every_difference_at_once(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    document = json.loads(path.read_text())
    document["fingerprints"]["reconcilerVersion"] = "0.0.9"
    path.write_text(json.dumps(document, indent=2))
    repo.write(A, described("Readings, corrected twice"))
    repo.remove(B)
    repo.write("org.example.c", manifest("org.example.c", "Root", root_events()))
    (repo.root / "policies" / "metadata.yaml").write_text(POLICY.replace("error", "warning"))
    assert_refused(
        repo,
        path,
        f"manifest datasets/{A}.yaml changed",
        f"manifest datasets/{B}.yaml removed",
        "manifest datasets/org.example.c.yaml added",
        "policy file policies/metadata.yaml changed",
        "reconciler version 0.0.9 planned, 0.1.0 applying",
    )


def test_a_fresh_saved_plan_is_applied_exactly_and_then_is_stale(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    a_before = str(repo.odf.dataset(A).head())
    document = json.loads(path.read_text())
    assert [
        (d["name"], d["action"], [e["kind"] for e in d["events"]]) for d in document["datasets"]
    ] == [
        (A, "update", ["SetInfo"]),
        (B, "create", ["SetPollingSource", "SetInfo", "SetLicense"]),
    ]

    applied = run(repo.root, "apply", str(path), "--system-time", "2026-03-01T00:00:00Z")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert repo.plan().counts()["unchanged"] == 2  # the chains now match the manifests
    a_after = str(repo.odf.dataset(A).head())
    b_after = str(repo.odf.dataset(B).head())
    assert_refused(
        repo,
        path,
        f"chain head of {A} moved: planned at {a_before}, now {a_after}",
        f"chain {B} created (head {b_after})",
    )


def test_a_new_source_file_makes_a_saved_plan_stale_and_says_what_waits_now(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    """No manifest moved, but A would read one more file than the reviewer was shown."""
    repo, path = saved
    (repo.root / "sources").mkdir()
    (repo.root / "sources" / "1.csv").write_text("a,b\n5,e\n")
    assert_refused(
        repo,
        path,
        *(
            f"the plan of dataset {name} differs from the saved one: the data waiting was "
            "nothing, is now '1 new file: 1.csv'"
            for name in (A, B)
        ),
    )


def test_a_dataset_taken_out_of_a_saved_plan_makes_it_stale_not_a_selection(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    """Terraform refuses a plan file that was edited; a dataset removed from the file
    used to be applied as if it had been left out by --select."""
    repo, path = saved
    document = json.loads(path.read_text())
    assert "selection" not in document
    document["datasets"] = [d for d in document["datasets"] if d["name"] != A]
    path.write_text(json.dumps(document, indent=2))
    assert_refused(repo, path, f"dataset {A} is planned now but not in the saved plan")


def test_a_saved_plan_of_a_selection_applies_that_selection_only(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    repo, path = saved
    planned = run(repo.root, "plan", "-s", B, "--format", "json", "--out", str(path))
    assert planned.returncode == 0, planned.stderr
    document = json.loads(path.read_text())
    assert (document["selection"], [d["name"] for d in document["datasets"]]) == ([B], [B])

    tampered = path.with_name("tampered.json")
    tampered.write_text(json.dumps({**document, "datasets": []}, indent=2))
    assert_refused(repo, tampered, f"dataset {B} is planned now but not in the saved plan")

    a_before = repo.odf.dataset(A).head()
    applied = run(repo.root, "apply", str(path), "--system-time", "2026-03-01T00:00:00Z")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert repo.odf.dataset(A).head() == a_before
    assert repo.odf.dataset(B).exists()
    assert [d.action.value for d in repo.plan().datasets] == ["update", "unchanged"]


def test_a_stale_saved_plan_is_refused_before_its_queries_are_analysed_again(
    tmp_path: Path,
) -> None:
    """A changed query is analysed on Spark when a plan is made; a saved plan whose
    manifests moved is refused before that (no engine start, no 'analysing' line)."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write(A, described("Example data"))
    query = f"SELECT event_time, a FROM `{A}`"
    repo.write(B, manifest(B, "Derivative", derivative_events([A], query)))
    repo.commit("a and a reader")
    path = tmp_path / "plan.json"
    planned = run(repo.root, "plan", "--format", "json", "--out", str(path))
    assert planned.returncode == 0, planned.stderr
    assert planned.stderr.startswith("analysing 1 query on Spark")
    repo.write(A, described("Readings, corrected"))
    assert_refused(repo, path, f"manifest datasets/{A}.yaml changed")


def test_a_chain_moved_to_another_name_is_told_as_a_rename() -> None:
    """It read as one chain removed and another created, both with the same head."""
    saved = Fingerprints("1", heads=(("a", "f1"), ("b", "f2"), ("c", "f3")))
    now = replace(saved, heads=(("b", "f9"), ("d", "f3"), ("e", "f4"), ("z", "f1")))
    assert differences(saved, now) == [
        "chain a renamed to z (head f1)",
        "chain head of b moved: planned at f2, now f9",
        "chain c renamed to d (head f3)",
        "chain e created (head f4)",
    ]


def test_a_plan_saved_against_a_ref_that_relaxed_a_rule_is_judged_by_this_checkout(
    saved: tuple[GitOpsRepo, Path],
) -> None:
    """``plan --base REF --out plan.json`` is judged by ``REF``'s policies, a ref anyone
    can push: one whose rule is a warning made a plan this checkout's rule forbids, and
    ``apply plan.json`` applied it. Its errors are now added to the plan, which apply
    refuses, writing nothing."""
    repo, path = saved
    git_repo = git.Repo(repo.root)
    git_repo.git.checkout("-q", "-b", "relaxed")
    (repo.root / "policies" / "metadata.yaml").write_text(
        POLICY.replace("severity: error", "severity: warning")
    )
    repo.commit("the license rule, a warning")
    git_repo.git.checkout("-q", "main")
    repo.write(B, manifest(B, "Root", root_events().split("    - kind: SetLicense")[0]))
    repo.commit("b has no license")
    own = run(repo.root, "plan")
    assert own.returncode == 1
    assert "[license-required] " in own.stdout
    planned = run(repo.root, "plan", "--base", "relaxed", "--format", "json", "--out", str(path))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    before = files(repo)

    applied = run(repo.root, "apply", str(path), "--system-time", "2026-03-01T00:00:00Z")
    assert applied.returncode == 1
    rule = f"  [license-required] datasets/{B}.yaml:1: {B}: no SetLicense event: every dataset"
    lines = applied.stdout.splitlines()
    errors = lines.index("Policy errors:")
    assert lines[errors : errors + 4] == [
        "Policy errors:",
        f"{rule} needs a license",
        "Policy warnings:",  # the saved plan's own verdict, by the relaxed rule
        f"{rule} needs a license",
    ]
    assert lines[-2] == "Plan: 1 to create, 1 to update. 1 error, 3 warnings."
    assert lines[-1].startswith("nothing applied in ")
    assert files(repo) == before
    # the same plan made by apply itself, against that ref
    direct = run(repo.root, "apply", "--base", "relaxed", "--system-time", "2026-03-01T00:00:00Z")
    assert direct.returncode == 1
    assert f"{rule} needs a license" in direct.stdout.splitlines()
    assert "Plan: 1 to create, 1 to update. 1 error, 3 warnings." in direct.stdout.splitlines()
    assert files(repo) == before
