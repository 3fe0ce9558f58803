"""Renaming a dataset with a ``# reconcile: renamed-from:`` line: the chain moves, its
readers keep theirs, and nothing is recreated, deleted or read twice."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from gitops_repo import T0, T1, GitOpsRepo, derivative_events, manifest, reconcile, root_events
from gitops_repo import events as chain_events
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from reconciler.apply.outcome import Outcome, Status
from reconciler.cli import app
from reconciler.commands.progress import describe
from reconciler.gitloop.message import DatasetRun, Trailers, commit_message
from reconciler.odf import models
from reconciler.plan.model import Action, ChangeClass, Location, Problem, Severity
from reconciler.plan.render_common import summary_sentence
from reconciler.plan.render_markdown import render_markdown
from reconciler.plan.render_text import render_text
from reconciler.planning.compose import PlanRequest, make_plan

REPO_ROOT = Path(__file__).resolve().parents[1]
OLD, NEW, READER = "org.example.a", "org.example.orders", "org.example.b"


@pytest.fixture
def repo(tmp_path: Path, spark: SparkSession) -> GitOpsRepo:
    """A root and a derivative reading it, both ingested once."""
    gitops = GitOpsRepo.create(tmp_path / "repo")
    shutil.copytree(REPO_ROOT / "policies", gitops.root / "policies")
    (gitops.root / "sources").mkdir()
    (gitops.root / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    gitops.write(OLD, manifest(OLD, "Root", root_events()))
    reader = derivative_events([OLD], f"SELECT event_time, a, b FROM `{OLD}`")
    gitops.write(READER, manifest(READER, "Derivative", reader))
    outcomes = {o.dataset: o.status for o in reconcile(gitops.root, T0)}
    assert outcomes == {OLD: Status.CREATED, READER: Status.CREATED}
    return gitops


def rename(repo: GitOpsRepo, line: str = f"# reconcile: renamed-from: {OLD}\n") -> None:
    repo.remove(OLD)
    repo.write(NEW, line + manifest(NEW, "Root", root_events()))
    repo.write(
        READER,
        manifest(
            READER,
            "Derivative",
            derivative_events([NEW], "SELECT event_time, a, b FROM `org.example.orders`"),
        ),
    )


def test_a_renamed_dataset_keeps_its_chain_and_its_readers_keep_theirs(repo: GitOpsRepo) -> None:
    """Without the line, the new name was a new dataset: its files read again, the old
    chain deleted, and the reader (whose chain names the old id) recreated."""
    old_id = str(repo.odf.dataset(OLD).state().dataset_id)
    reader_head = repo.odf.dataset(READER).state().head
    rename(repo)
    plan = make_plan(repo.config, PlanRequest(prune=True))
    assert plan.problems == ()
    assert [(d.name, d.action, d.renamed_from, d.dataset_id) for d in plan.datasets] == [
        (NEW, Action.UNCHANGED, OLD, old_id),
        # its query names the new alias: a changed query, read on from where it stopped
        (READER, Action.UPDATE, None, str(repo.odf.dataset(READER).state().dataset_id)),
    ]
    assert plan.datasets[1].change_class is ChangeClass.NEEDS_VALIDATION
    assert summary_sentence(plan) == (
        "Plan: 1 to update, 1 unchanged, 1 renamed. 0 errors, 0 warnings."
    )
    assert plan.has_changes
    text = render_text(plan, color=False)
    assert f"= {NEW} (Root) unchanged (renamed from {OLD})" in text
    assert (
        f"    renamed from: {OLD}: apply moves its chain ({old_id}) to this name; the datasets"
        " that read it keep their chains"
    ) in text

    (repo.root / "sources" / "2.csv").write_text("a,b\n3,z\n")
    outcomes = {o.dataset: (o.status, o.rows) for o in reconcile(repo.root, T1)}
    assert outcomes == {NEW: (Status.UPDATED, 1), READER: (Status.UPDATED, 1)}
    assert not (repo.root / "odf" / OLD).exists()
    moved = repo.odf.dataset(NEW)
    assert str(moved.state().dataset_id) == old_id
    assert (moved.layout.info / "alias").read_text() == NEW
    # the reader's chain still names the same id, and only the new row was read
    reader = repo.odf.dataset(READER)
    assert reader.state().head != reader_head
    added = [e for e in chain_events(reader) if isinstance(e, models.ExecuteTransform)]
    assert [
        (e.new_data.offset_interval.start, e.new_data.offset_interval.end)
        for e in added
        if e.new_data
    ] == [(0, 1), (2, 2)]
    # the line may stay: once the new name has the chain, it says nothing
    again = make_plan(repo.config, PlanRequest(prune=True))
    assert (again.problems, [d.renamed_from for d in again.datasets]) == ((), [None, None])


@pytest.mark.parametrize(
    ("line", "message", "at"),
    [
        (
            "# reconcile: renamed-from: org.example.aa\n",
            "cannot rename 'org.example.aa' to 'org.example.orders': there is no chain"
            " 'org.example.aa'; did you mean 'org.example.a'?",
            1,
        ),
        (
            f"# reconcile: renamed-from: {READER}\n",
            f"cannot rename {READER!r} to {NEW!r}: {READER!r} still has a manifest"
            f" (datasets/{READER}.yaml): remove it",
            1,
        ),
        (
            f"# reconcile: renamed-from: {OLD}\n# reconcile: renamed-from: {READER}\n",
            f"cannot rename {READER!r} to {NEW!r}: a manifest has one renamed-from line;"
            " remove the others",
            2,
        ),
        (
            "# reconcile: renamed-from: **bold** [link](http://evil)\n",
            f"cannot rename '**bold** [link](http://evil)' to {NEW!r}: it is not a dataset name",
            1,
        ),
    ],
    ids=["no-such-chain", "still-defined", "two-lines", "not-a-name"],
)
def test_a_rename_that_cannot_be_carried_out_is_an_error_at_its_line(
    repo: GitOpsRepo, line: str, message: str, at: int
) -> None:
    rename(repo, line)
    plan = make_plan(repo.config, PlanRequest())
    problem = next(p for p in plan.problems if p.field == "renamed-from")
    assert problem == Problem(
        message.replace(f"datasets/{READER}.yaml", str(repo.root / "datasets" / f"{READER}.yaml")),
        dataset=NEW,
        location=Location(str(repo.root / "datasets" / f"{NEW}.yaml"), at),
        field="renamed-from",
    )
    assert plan.has_errors
    markdown = render_markdown(plan)
    assert "[link](" not in markdown and "**bold**" not in markdown


def test_a_rename_cut_short_between_folder_and_alias_is_settled_by_the_next_run(
    repo: GitOpsRepo,
) -> None:
    """The folder was moved and the crash came before ``info/alias``: the old name stayed
    in it for good, and kamu showed the dataset under the old name."""
    rename(repo)
    os.rename(repo.root / "odf" / OLD, repo.root / "odf" / NEW)  # the rename's first step
    alias = repo.root / "odf" / NEW / "info" / "alias"
    assert alias.read_text() == OLD
    outcomes = {o.dataset: o.status for o in reconcile(repo.root, T1)}
    assert outcomes == {NEW: Status.UP_TO_DATE, READER: Status.UPDATED}
    assert alias.read_text() == NEW
    assert (repo.root / "odf" / READER / "info" / "alias").read_text() == READER


def test_a_command_given_the_old_name_points_to_the_new_one(repo: GitOpsRepo) -> None:
    rename(repo)
    reconcile(repo.root, T1)
    result = CliRunner().invoke(app, ["-C", str(repo.root), "log", OLD])
    assert (result.exit_code, result.stderr) == (
        1,
        f"error: dataset {OLD!r} not found in {repo.root / 'odf'}; it was renamed to {NEW}\n",
    )


def test_a_comment_meant_as_a_directive_that_is_none_is_a_warning_at_its_line(
    repo: GitOpsRepo,
) -> None:
    """Ignored without a word, a mistyped rename became a deletion and a new dataset."""
    lines = [
        f"# Reconcile: Renamed-From: {OLD}",
        "#reconcile renamed_from x",
        "  # reconcile: allow-breaking-changes: agreed",
        "# reconcile: allow-breaking-change:",
    ]
    kept = "# reconcile this later: not a directive\n"
    rename(repo, "\n".join(lines) + "\n" + kept)
    plan = make_plan(repo.config, PlanRequest(prune=True))
    warnings = [p for p in plan.problems if p.severity is Severity.WARNING]
    assert warnings == [
        Problem(
            f"'{line.strip()}' is no reconcile directive, so it does nothing; the directives"
            " are `# reconcile: allow-breaking-change: <reason>` and"
            " `# reconcile: renamed-from: <old name>`, in lower case, each with a value",
            dataset=NEW,
            location=Location(str(repo.root / "datasets" / f"{NEW}.yaml"), at),
            field="reconcile-directive",
            severity=Severity.WARNING,
        )
        for at, line in enumerate(lines, start=1)
    ]
    assert [d.renamed_from for d in plan.datasets if d.name == NEW] == [None]
    # in a pull request it is an error: the mistyped rename there deletes a chain
    repo.commit("base")
    (repo.root / "datasets" / f"{NEW}.yaml").write_text(
        "# reconcile: renamed-from org.example.a\n" + manifest(NEW, "Root", root_events())
    )
    pull_request = make_plan(repo.config, PlanRequest(base_ref="HEAD", prune=True))
    assert [(p.severity, p.location) for p in pull_request.problems if p.dataset == NEW] == [
        (Severity.ERROR, Location(str(repo.root / "datasets" / f"{NEW}.yaml"), 1))
    ]


def test_a_rename_onto_a_name_that_has_a_chain_of_its_own_is_an_error(
    repo: GitOpsRepo,
) -> None:
    """It was ignored: the new name's chain was updated with the old one's definition,
    and the old chain deleted."""
    text = (repo.root / "datasets" / f"{READER}.yaml").read_text()
    repo.remove(OLD)
    repo.write(READER, f"# reconcile: renamed-from: {OLD}\n" + text)
    plan = make_plan(repo.config, PlanRequest(prune=True))
    (problem,) = [p for p in plan.problems if p.field == "renamed-from"]
    assert problem.message == (
        f"cannot rename {OLD!r} to {READER!r}: both have a chain: {READER!r} would be updated"
        f" and {OLD!r} deleted"
    )


def test_the_pull_request_comment_says_what_is_renamed(repo: GitOpsRepo) -> None:
    rename(repo)
    markdown = render_markdown(make_plan(repo.config, PlanRequest(prune=True)))
    assert "1 renamed" in markdown
    assert f"<code>{NEW}</code> (Root): unchanged, renamed from {OLD}" in markdown


def test_a_rename_is_told_in_the_run_line_and_the_commit_message() -> None:
    """A rename alone is a change: the commit said "no dataset advanced" and "Up to date"."""
    moved = Outcome(NEW, Status.UP_TO_DATE, renamed_from=OLD)
    assert describe(moved) == f"up to date: renamed from {OLD}"
    message = commit_message([DatasetRun(moved)], Trailers("run-1", "ab12", "0.1.0"))
    assert message == (
        "reconcile: 1 renamed\n\n"
        f"Renamed:\n- {OLD} -> {NEW}\n\n"
        f"Up to date: {NEW}\n\n"
        "Reconcile-Run-Id: run-1\nReconcile-Plan-Hash: ab12\nReconcile-Version: 0.1.0\n"
    )
