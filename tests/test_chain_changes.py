"""Only the reconciler writes chains: a pull request's plan lists, per dataset, what it did
under ``odf/``, and the rule ``chains-changed-in-pull-request`` fails it.

The repository is real: two root datasets ingested on Spark and committed on ``main``,
then branches that fabricate chains the way a person could (running the reconciler on
their own data, editing a data file, deleting a block) or only edit manifests; each plan
is the real CLI's, against ``--base main``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import git
import pytest
from cli_here import reconcile_here
from gitops_repo import GitOpsRepo, manifest, reconcile
from pyspark.sql import SparkSession
from test_plan_renderers import FAILED_QUERY, PLAN

from reconciler.odf import Timestamp, json_schemas
from reconciler.odf.models import MetadataBlock
from reconciler.plan.chain_changes import ChainChange, chain_changes, judge
from reconciler.plan.load_json import plan_from_dict
from reconciler.plan.model import Location, Severity, Verdict
from reconciler.plan.policies import PolicyError, PolicySet, load_policies
from reconciler.plan.render_json import plan_to_dict
from reconciler.plan.render_markdown import render_markdown
from reconciler.plan.render_text import render_text

REPO_ROOT = Path(__file__).resolve().parents[1]
A = "org.example.a"
B = "org.example.b"
RULE = (
    "only the reconciler writes chains, on the default branch after merge: change the"
    " manifests under datasets/ instead, and restore odf/ from the base branch in this"
    " pull request"
)
FABRICATED_A = f"this pull request appends 1 block (AddData), adds 1 data file and changes refs/head in the chain of {A}"
FABRICATED_B = f"this pull request deletes 1 block and changes 1 data file in the chain of {B}"
WARNING_POLICY = """\
rules:
  - id: chains-changed-in-pull-request
    severity: warning
    message: chains imported from elsewhere are reviewed by the data owners
    chain_changes: forbidden
"""


def root(name: str, folder: str, description: str = "Example data") -> str:
    """A root dataset reading ``sources/<folder>/*.csv``, one file per run."""
    return manifest(
        name,
        "Root",
        f"""
        - kind: SetPollingSource
          fetch: {{kind: FilesGlob, path: "sources/{folder}/*.csv"}}
          read: {{kind: Csv, header: true, schema: [a BIGINT, b STRING]}}
          merge: {{kind: Append}}
        - kind: SetInfo
          description: {description}
        - kind: SetLicense
          shortName: CC0-1.0
          name: Creative Commons Zero v1.0 Universal
          websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
        """,
    )


def source(repo: GitOpsRepo, path: str, text: str) -> None:
    file = repo.root / "sources" / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


@pytest.fixture(scope="module")
def main_repo(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    """``main``: A and B ingested once each, chains committed, as the reconciler leaves it."""
    repo = GitOpsRepo.create(tmp_path_factory.mktemp("chains") / "repo")
    shutil.copytree(REPO_ROOT / "policies", repo.root / "policies")
    repo.write(A, root(A, "a"))
    repo.write(B, root(B, "b"))
    source(repo, "a/1.csv", "a,b\n1,x\n")
    source(repo, "b/1.csv", "a,b\n2,y\n")
    reconcile(repo.root)
    repo.commit("reconcile: advance chains")
    return repo.root


@pytest.fixture
def repo(main_repo: Path, tmp_path: Path) -> GitOpsRepo:
    """A copy of ``main`` (history included) that a test may branch and change."""
    shutil.copytree(main_repo, tmp_path / "repo", symlinks=True)
    return GitOpsRepo(tmp_path / "repo")


def branch(repo: GitOpsRepo, name: str) -> None:
    git.Repo(repo.root).git.checkout("-b", name)


def switch(repo: GitOpsRepo, name: str) -> None:
    git.Repo(repo.root).git.checkout(name)


def fabricate(repo: GitOpsRepo) -> None:
    """What was seen: chains written outside the reconciler's job, committed on a branch.

    A gets a block made by a local run over a made-up file; B gets a data file edited
    by hand and its newest block deleted.
    """
    branch(repo, "fabricated")
    source(repo, "a/2.csv", "a,b\n99,made up\n")
    reconcile(repo.root)
    b = repo.odf.dataset(B)
    (data,) = sorted(b.layout.data.iterdir())
    data.write_bytes(data.read_bytes().replace(b"y", b"z"))
    b.layout.block(b.head()).unlink()
    repo.commit("add data")


def plan(repo: GitOpsRepo, *args: str) -> subprocess.CompletedProcess[str]:
    """``reconcile plan --base main ARGS`` in this process (``cli_here``)."""
    return reconcile_here(["-C", str(repo.root), "plan", "--base", "main", *args])


def plan_json(repo: GitOpsRepo) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = plan(repo, "--format", "json")
    assert "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    json_schemas.validator("plan.json").validate(document)
    return result.returncode, document


def chain_verdicts(document: dict) -> list[dict]:  # type: ignore[type-arg]
    return [v for v in document["verdicts"] if v["policy"] == "chains-changed-in-pull-request"]


def chain_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "[chains-changed-in-pull-request]" in line]


def test_a_pull_request_that_writes_chains_fails_its_text_plan_with_what_it_did_per_dataset(
    repo: GitOpsRepo,
) -> None:
    fabricate(repo)
    result = plan(repo)
    assert result.returncode == 1, result.stderr
    assert chain_lines(result.stdout) == [
        f"  [chains-changed-in-pull-request] odf/{A}: {A}: {FABRICATED_A}: {RULE}",
        f"  [chains-changed-in-pull-request] odf/{B}: {B}: {FABRICATED_B}: {RULE}",
    ]
    errors = result.stdout.split("Policy errors:\n")[1]
    assert errors.startswith(chain_lines(result.stdout)[0])


def test_a_pull_request_that_writes_chains_fails_its_json_plan_with_what_it_did_per_dataset(
    repo: GitOpsRepo,
) -> None:
    fabricate(repo)
    code, document = plan_json(repo)
    assert code == 1
    assert document["summary"]["hasErrors"] is True
    assert chain_verdicts(document) == [
        {
            "policy": "chains-changed-in-pull-request",
            "severity": "error",
            "message": f"{FABRICATED_A}: {RULE}",
            "dataset": A,
            "location": {"file": f"odf/{A}"},
        },
        {
            "policy": "chains-changed-in-pull-request",
            "severity": "error",
            "message": f"{FABRICATED_B}: {RULE}",
            "dataset": B,
            "location": {"file": f"odf/{B}"},
        },
    ]


def test_a_pull_request_that_changes_only_manifests_has_no_chain_verdict(
    repo: GitOpsRepo,
) -> None:
    branch(repo, "describe")
    repo.write(A, root(A, "a", description="Readings of a"))
    repo.commit("describe a")
    code, document = plan_json(repo)
    assert code == 0
    assert chain_verdicts(document) == []
    assert [(d["name"], d["action"], d["changedInPr"]) for d in document["datasets"]] == [
        (A, "update", True),
        (B, "unchanged", False),
    ]


def test_chains_the_base_gained_after_the_branch_point_are_not_the_pull_requests(
    repo: GitOpsRepo,
) -> None:
    branch(repo, "describe")
    repo.write(A, root(A, "a", description="Readings of a"))
    repo.commit("describe a")
    switch(repo, "main")  # meanwhile the reconciler advances B's chain on main
    repo.write(B, root(B, "b", description="Readings of b"))
    repo.apply(system_time=Timestamp.parse("2026-03-01T00:00:00Z"))
    repo.commit("reconcile: advance chains")
    switch(repo, "describe")
    code, document = plan_json(repo)
    assert (code, chain_verdicts(document)) == (0, [])


def test_uncommitted_chain_files_count_as_the_pull_requests_too(repo: GitOpsRepo) -> None:
    branch(repo, "local-run")
    source(repo, "a/2.csv", "a,b\n99,made up\n")
    reconcile(repo.root)
    code, document = plan_json(repo)
    assert code == 1
    assert [v["message"] for v in chain_verdicts(document)] == [f"{FABRICATED_A}: {RULE}"]


def test_the_base_branchs_policies_can_lower_the_rule_to_a_warning(repo: GitOpsRepo) -> None:
    fabricate(repo)
    switch(repo, "main")
    (repo.root / "policies" / "chains.yaml").write_text(WARNING_POLICY)
    repo.commit("policies: chains imported from elsewhere are reviewed, not refused")
    switch(repo, "fabricated")
    code, document = plan_json(repo)
    message = "chains imported from elsewhere are reviewed by the data owners"
    assert [(v["severity"], v["message"]) for v in chain_verdicts(document)] == [
        ("warning", f"{FABRICATED_A}: {message}"),
        ("warning", f"{FABRICATED_B}: {message}"),
    ]
    # B's deleted block still makes its chain unreadable: that is a problem of its own
    assert code == 1
    assert [p["dataset"] for p in document["problems"]] == [B]


def test_a_pull_request_cannot_lower_the_rule_that_judges_it(repo: GitOpsRepo) -> None:
    fabricate(repo)
    (repo.root / "policies" / "chains.yaml").write_text(WARNING_POLICY)
    repo.commit("policies: let my chains through")
    code, document = plan_json(repo)
    assert code == 1
    assert [(v["severity"], v["message"]) for v in chain_verdicts(document)] == [
        ("error", f"{FABRICATED_A}: {RULE}"),
        ("error", f"{FABRICATED_B}: {RULE}"),
    ]


def test_a_base_without_policies_still_refuses_chains_written_in_a_pull_request(
    repo: GitOpsRepo,
) -> None:
    shutil.rmtree(repo.root / "policies")
    repo.commit("no policies yet")
    fabricate(repo)
    (repo.root / "policies").mkdir()
    (repo.root / "policies" / "chains.yaml").write_text(WARNING_POLICY)
    repo.commit("policies: let my chains through")
    code, document = plan_json(repo)
    assert code == 1
    assert [v["severity"] for v in chain_verdicts(document)] == ["error", "error"]


# --- The listing, on its own ----------------------------------------------------------------


def block(sequence_number: int, kind: str) -> MetadataBlock:
    events = {
        "SetInfo": {"kind": "SetInfo", "description": "x"},
        "AddData": {"kind": "AddData", "newWatermark": "2026-01-01T00:00:00Z"},
    }
    return MetadataBlock.model_validate(
        {
            "systemTime": "2026-01-01T00:00:00Z",
            "prevBlockHash": "f1620" + "0" * 64,
            "sequenceNumber": sequence_number,
            "event": events[kind],
        }
    )


def test_new_blocks_are_named_by_event_kind_in_sequence_order_with_repeats_counted() -> None:
    files = [("added", PurePosixPath(f"{A}/blocks/{h}")) for h in ("h1", "h2", "h3", "h4")]
    files.append(("modified", PurePosixPath(f"{A}/refs/head")))
    new_blocks = {
        PurePosixPath(f"{A}/blocks/h1"): block(7, "AddData"),
        PurePosixPath(f"{A}/blocks/h2"): block(5, "SetInfo"),
        PurePosixPath(f"{A}/blocks/h3"): block(6, "AddData"),
    }
    assert chain_changes(files, new_blocks) == [
        ChainChange(A, ("appends 4 blocks (SetInfo, 2 AddData, unreadable)", "changes refs/head"))
    ]


def test_every_kind_of_chain_file_is_listed_counted_by_folder_then_by_path() -> None:
    files = [
        ("deleted", PurePosixPath(f"{B}/checkpoints/c1")),
        ("added", PurePosixPath(f"{B}/checkpoints/c2")),
        ("modified", PurePosixPath(f"{B}/blocks/b1")),
        ("deleted", PurePosixPath(f"{B}/blocks/b2")),
        ("deleted", PurePosixPath(f"{B}/blocks/b3")),
        ("added", PurePosixPath(f"{B}/data/d1")),
        ("added", PurePosixPath(f"{B}/data/d2")),
        ("modified", PurePosixPath(f"{B}/info/summary")),
        ("added", PurePosixPath(f"{A}/refs/head")),
        ("added", PurePosixPath("README.md")),
    ]
    assert [c.sentence() for c in chain_changes(files, {})] == [
        "this pull request adds README.md in no dataset's folder",
        f"this pull request adds refs/head in the chain of {A}",
        "this pull request changes 1 block, deletes 2 blocks, adds 2 data files,"
        " adds 1 checkpoint file, deletes 1 checkpoint file and changes info/summary"
        f" in the chain of {B}",
    ]


def test_links_are_named_as_links_not_counted_as_the_files_of_their_folder() -> None:
    """git lists a folder made a link as the link added beside the files it deleted: a
    ``blocks`` folder made one read "deletes 2 blocks and adds blocks"."""
    files = [
        ("added", PurePosixPath(f"{A}/blocks")),
        ("deleted", PurePosixPath(f"{A}/blocks/b1")),
        ("deleted", PurePosixPath(f"{A}/blocks/b2")),
        ("modified", PurePosixPath(f"{A}/data/d1")),
        ("modified", PurePosixPath(f"{A}/refs/head")),
    ]
    links = frozenset(PurePosixPath(f"{A}/{p}") for p in ("blocks", "data/d1"))
    assert [c.sentence() for c in chain_changes(files, {}, links)] == [
        "this pull request deletes 2 blocks, changes refs/head, replaces the blocks folder"
        f" with a symbolic link and makes data/d1 a symbolic link in the chain of {A}"
    ]


def test_each_changed_chain_gets_a_verdict_of_the_default_rule_when_no_policy_names_it() -> None:
    changes = [ChainChange(A, ("changes refs/head",)), ChainChange(None, ("adds README.md",))]
    assert judge(PolicySet(), changes, Path("/r/odf")) == [
        Verdict(
            policy="chains-changed-in-pull-request",
            severity=Severity.ERROR,
            message=f"this pull request changes refs/head in the chain of {A}: {RULE}",
            dataset=A,
            location=Location(f"/r/odf/{A}"),
        ),
        Verdict(
            policy="chains-changed-in-pull-request",
            severity=Severity.ERROR,
            message=f"this pull request adds README.md in no dataset's folder: {RULE}",
            dataset=None,
            location=Location("/r/odf"),
        ),
    ]


def test_a_chain_changes_rule_takes_only_the_value_forbidden(tmp_path: Path) -> None:
    (tmp_path / "chains.yaml").write_text(WARNING_POLICY.replace("forbidden", "allowed"))
    with pytest.raises(PolicyError) as error:
        load_policies(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'chains.yaml'}:5: chains-changed-in-pull-request:"
        " chain_changes takes one value: forbidden"
    )


# --- The comment CI renders from the one saved plan -------------------------------------------


@pytest.mark.parametrize("output_format", ["markdown", "text"])
def test_show_renders_a_saved_json_plan_exactly_as_the_plan_itself(
    repo: GitOpsRepo, tmp_path: Path, output_format: str
) -> None:
    fabricate(repo)
    saved = tmp_path / "plan.json"
    # a plan with errors is saved by no --out (as terraform plan -out saves none): the
    # plan workflow writes the document from stdout, so the comment shows its errors
    refused = plan(repo, "--format", "json", "--out", str(saved))
    assert (refused.returncode, refused.stdout, saved.exists()) == (1, "", False)
    assert refused.stderr.splitlines()[-1] == (
        f"error: no plan was saved to {saved}: it has errors"
    )
    written = plan(repo, "--format", "json")
    assert written.returncode == 1
    saved.write_text(written.stdout)
    direct = plan(repo, "--format", output_format)
    # where a reviewer downloaded the plan artifact: no repository needed
    elsewhere = tmp_path / "downloads"
    elsewhere.mkdir()
    shown = reconcile_here(["show", str(saved), "--format", output_format], cwd=elsewhere)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == direct.stdout
    assert (
        chain_lines(shown.stdout)
        if output_format == "text"
        else "chains-changed-in-pull-request" in shown.stdout
    )


def test_a_plan_read_back_from_its_json_renders_the_same_in_every_format() -> None:
    failed = dataclasses.replace(PLAN.datasets[0], query=FAILED_QUERY)
    for original in (PLAN, dataclasses.replace(PLAN, datasets=(failed, *PLAN.datasets[1:]))):
        document = plan_to_dict(original)
        read_back = plan_from_dict(json.loads(json.dumps(document)))
        assert plan_to_dict(read_back) == document
        assert render_markdown(read_back) == render_markdown(original)
        assert render_text(read_back, color=False) == render_text(original, color=False)
