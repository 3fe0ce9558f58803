"""Pending data in a plan: the files a FilesGlob would ingest next, named; a glob that
matches nothing is a counted warning; other sources only *may* have new data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import git
import pytest
from gitops_repo import (
    T0,
    T1,
    GitOpsRepo,
    derivative_events,
    manifest,
    reconcile,
    root_events,
    rows,
    slices,
)
from pyspark.sql import SparkSession

from reconciler.config import RepoConfig
from reconciler.odf import models
from reconciler.odf.chain import ChainState
from reconciler.plan.builder import build_plan
from reconciler.plan.desired import load_desired
from reconciler.plan.model import Location, Pending, Problem, Severity
from reconciler.plan.pending import _where_rows_go, at_most, pending_data
from reconciler.plan.render_common import summary_sentence
from reconciler.planning.compose import PlanRequest, list_globs, make_plan

REPO_ROOT = Path(__file__).resolve().parents[1]
NAME = "org.example.a"
OVERRIDE = "# reconcile: allow-breaking-change: a is read as text from now on\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitOpsRepo:
    gitops = GitOpsRepo.create(tmp_path / "repo")
    shutil.copytree(REPO_ROOT / "policies", gitops.root / "policies")
    gitops.write(NAME, manifest(NAME, "Root", root_events()))
    (gitops.root / "sources").mkdir()
    return gitops


def files(repo: GitOpsRepo, *names: str) -> None:
    for name in names:
        (repo.root / "sources" / name).write_text("a,b\n1,x\n")


def test_a_files_glob_names_the_files_the_next_apply_would_ingest(repo: GitOpsRepo) -> None:
    files(repo, "c.csv", "a.csv", "b.csv", "notes.txt")
    plan = make_plan(repo.config, PlanRequest())
    (dataset,) = plan.datasets
    assert dataset.pending == (Pending("new-files", "3 new files: a.csv, b.csv, c.csv"),)
    assert plan.has_changes and plan.exit_code(detailed=True) == 2
    assert summary_sentence(plan) == "Plan: 1 to create; 1 with pending data. 0 errors, 0 warnings."


def test_derivatives_downstream_of_data_waiting_have_data_waiting_too(repo: GitOpsRepo) -> None:
    """The plan said "1 with pending data" and the apply after it advanced three: a
    derivative reads, in the same run, what its inputs ingest before it."""
    for name, input_ in (("org.example.b", NAME), ("org.example.c", "org.example.b")):
        events = derivative_events([input_], f"SELECT * FROM `{input_}`")
        repo.write(name, manifest(name, "Derivative", events))
    repo.apply()
    files(repo, "1.csv")
    plan = make_plan(repo.config, PlanRequest())
    assert [(d.name, d.pending) for d in plan.datasets] == [
        (NAME, (Pending("new-files", "1 new file: 1.csv"),)),
        (
            "org.example.b",
            (
                Pending(
                    "inputs-pending",
                    f"{NAME} has data waiting, which this run brings in first",
                ),
            ),
        ),
        (
            "org.example.c",
            (
                Pending(
                    "inputs-pending",
                    "org.example.b has data waiting, which this run brings in first",
                ),
            ),
        ),
    ]
    assert plan.exit_code(detailed=True) == 2


def test_past_ten_new_files_the_rest_are_counted(repo: GitOpsRepo) -> None:
    files(repo, *(f"f{i:02}.csv" for i in range(1, 13)))
    (dataset,) = make_plan(repo.config, PlanRequest()).datasets
    named = ", ".join(f"f{i:02}.csv" for i in range(1, 11))
    assert dataset.pending == (Pending("new-files", f"12 new files: {named} and 2 more"),)


def test_a_single_new_file_is_named_in_the_singular(repo: GitOpsRepo) -> None:
    files(repo, "only.csv")
    (dataset,) = make_plan(repo.config, PlanRequest()).datasets
    assert dataset.pending == (Pending("new-files", "1 new file: only.csv"),)


def test_only_files_named_after_the_last_ingested_one_are_pending(repo: GitOpsRepo) -> None:
    files(repo, "a.csv", "b.csv", "c.csv", "d.csv")
    desired = load_desired(repo.config.manifest_paths(), {})
    listings = list_globs(repo.config, desired.datasets.values())
    assert listings == {NAME: ("a.csv", "b.csv", "c.csv", "d.csv")}
    ingested = ChainState(
        last_source_state=models.SourceState(source_name="default", kind="odf/etag", value="b.csv")
    )
    ds = desired.datasets[NAME]
    assert pending_data(ds, {NAME: ingested}, listings) == (
        Pending("new-files", "2 new files: c.csv, d.csv"),
    )
    done = ChainState(
        last_source_state=models.SourceState(source_name="default", kind="odf/etag", value="d.csv")
    )
    assert pending_data(ds, {NAME: done}, listings) == ()


def test_a_glob_matching_no_file_is_a_counted_warning_naming_the_glob(repo: GitOpsRepo) -> None:
    plan = make_plan(repo.config, PlanRequest())
    assert plan.problems == (
        Problem(
            "FilesGlob path 'sources/*.csv' matches no file",
            dataset=NAME,
            location=Location(str(repo.root / "datasets" / f"{NAME}.yaml"), 8, 38),
            field="content.metadata[0].fetch.path",
            severity=Severity.WARNING,
        ),
    )
    assert plan.datasets[0].pending == ()
    assert summary_sentence(plan) == "Plan: 1 to create. 0 errors, 1 warning."
    assert (plan.exit_code(detailed=False), plan.exit_code(detailed=True)) == (0, 2)


def test_a_glob_leading_outside_is_not_listed(repo: GitOpsRepo, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("a,b\n")
    repo.write(
        NAME, manifest(NAME, "Root", root_events().replace("sources/*.csv", "../outside/*.csv"))
    )
    desired = load_desired(repo.config.manifest_paths(), {})
    assert list_globs(repo.config, desired.datasets.values()) == {}


def test_a_url_source_only_may_have_new_data_and_is_not_a_change(repo: GitOpsRepo) -> None:
    events = root_events().replace(
        '{kind: FilesGlob, path: "sources/*.csv"}', '{kind: Url, url: "https://example.org/a.csv"}'
    )
    repo.write(NAME, manifest(NAME, "Root", events))
    repo.apply()
    plan = make_plan(repo.config, PlanRequest())
    assert plan.datasets[0].pending == (Pending("polling-source", "Url source may have new data"),)
    assert plan.problems == () and plan.exit_code(detailed=True) == 0


def test_without_a_listing_a_files_glob_only_may_have_new_data(repo: GitOpsRepo) -> None:
    files(repo, "a.csv")
    plan = build_plan(load_desired(repo.config.manifest_paths(), {}), {})
    assert plan.datasets[0].pending == (
        Pending("polling-source", "FilesGlob source may have new data"),
    )


def test_a_source_file_the_pull_request_adds_or_edits_behind_the_last_ingested_is_an_error(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """A FilesGlob reads each file once, in name order: an edit to a file ingested, or a
    new file sorting before the last one ingested, would apply as "up to date" forever."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    reconcile(repo.root, T0)
    ran = repo.commit("ingested a.csv and b.csv")[:7]
    git.Repo(repo.root).git.switch("-q", "-c", "pr")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,corrected\n")
    (repo.root / "sources" / "a0.csv").write_text("a,b\n0,late\n")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    other = "org.example.copy"  # a new dataset reads every file: nothing to say
    repo.write(other, manifest(other, "Root", root_events()))
    # Before it is committed, a plan without a base sees the working tree's changes since
    # the commit of the chain's last run...
    since = f"since commit {ran} (the last to advance its chain)"
    local = [
        f"sources/a0.csv, added {since}, sorts before b.csv, the last file {NAME} ingested",
        f"sources/b.csv, modified {since}, was ingested by {NAME} already",
    ]
    found = make_plan(repo.config, PlanRequest()).problems
    assert [p.message.split(": a FilesGlob")[0] for p in found] == local
    repo.commit("a pull request")
    plan = make_plan(repo.config, PlanRequest(base_ref="main"))
    where = Location(str(repo.root / "datasets" / f"{NAME}.yaml"), 8, 38)
    rule = "a FilesGlob source reads each file once, in name order, so"
    advice = "a new file whose name sorts after b.csv"
    assert plan.problems == (
        Problem(
            f"sources/a0.csv, added by this pull request, sorts before b.csv, the last file"
            f" {NAME} ingested: {rule} it will never be ingested; put the rows in {advice}:"
            " they are appended beside the rows ingested already",
            dataset=NAME,
            location=where,
            field="content.metadata[0].fetch.path",
        ),
        Problem(
            f"sources/b.csv, modified by this pull request, was ingested by {NAME} already:"
            f" {rule} the change will never be ingested; restore the file (git restore"
            f" --source main -- sources/b.csv); put the rows in {advice}: they are appended"
            " beside the rows ingested already",
            dataset=NAME,
            location=where,
            field="content.metadata[0].fetch.path",
        ),
    )
    assert plan.exit_code(detailed=True) == 1
    mine = next(d for d in plan.datasets if d.name == NAME)
    assert mine.pending == (Pending("new-files", "1 new file: c.csv"),)
    # ...and once committed too: a local commit would otherwise apply as "up to date".
    found = make_plan(repo.config, PlanRequest()).problems
    assert [p.message.split(": a FilesGlob")[0] for p in found] == local
    # The command the error gives puts the file back as it was read.
    command = found[1].message.split("(git restore")[1].split(")")[0]
    assert command == f" --source {git.Repo(repo.root).commit(ran).hexsha[:12]} -- sources/b.csv"
    git.Repo(repo.root).git.restore(*command.split())
    assert (repo.root / "sources" / "b.csv").read_text() == "a,b\n2,y\n"
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,corrected\n")
    # What the error says is what apply does, were it not refused: outside git, where
    # nothing can be judged, only c.csv is read.
    shutil.rmtree(repo.root / ".git")
    reconcile(repo.root, T1)
    ingested = [
        rows(t, "offset", "op", "system_time", "event_time") for t in slices(repo.odf.dataset(NAME))
    ]
    assert ingested == [[(1, "x")], [(2, "y")], [(3, "z")]]  # one slice a file


def test_without_a_base_files_an_uncommitted_run_may_have_read_are_not_judged(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """Without a base, files are judged against the last file the committed head had read:
    an uncommitted run read the files after it as they were then, which git cannot tell,
    so they are left alone, while an edit to a file the committed chain read is found."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    reconcile(repo.root, T0)
    assert make_plan(repo.config, PlanRequest()).problems == ()  # a chain never committed
    ran = repo.commit("ingested a.csv")[:7]
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    reconcile(repo.root, T1)  # reads b.csv and c.csv; not committed
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,edited after the run\n")
    assert make_plan(repo.config, PlanRequest()).problems == ()
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,edited\n")
    (found,) = make_plan(repo.config, PlanRequest()).problems
    assert found.message.startswith(
        f"sources/a.csv, modified since commit {ran} (the last to advance its chain), was"
        f" ingested by {NAME} already: a FilesGlob source reads each file once"
    )
    # Outside git there is no history to compare: nothing is judged.
    shutil.rmtree(repo.root / ".git")
    assert make_plan(repo.config, PlanRequest()).problems == ()


def test_a_file_the_pull_request_adds_behind_what_the_base_ingested_since_is_an_error(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """Two pull requests add a day's file each; the later day is merged and ingested on
    the base first. The earlier day's file then sorts before the base's last file: the
    pull request's own chain (the base's when it branched) cannot tell, its base's tip
    can."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    reconcile(repo.root, T0)
    repo.commit("ingested a.csv")
    branches = git.Repo(repo.root).git
    branches.switch("-q", "-c", "pr")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    repo.commit("add b.csv")
    branches.switch("-q", "main")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    reconcile(repo.root, T1)
    repo.commit("add c.csv, merged and ingested")
    branches.switch("-q", "pr")
    plan = make_plan(repo.config, PlanRequest(base_ref="main"))
    assert plan.datasets[0].pending == ()  # not "1 new file: b.csv", as its own chain says
    (found,) = plan.problems
    assert found.message.startswith(
        f"sources/b.csv, added by this pull request, sorts before c.csv, the last file {NAME}"
        " ingested: a FilesGlob source reads each file once, in name order, so it will never"
        " be ingested; put the rows in a new file whose name sorts after c.csv"
    )


def test_a_source_file_the_chain_read_that_is_deleted_is_a_warning(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """The chain keeps a deleted file's rows, but a recreate reads every file again and
    would be refused, so deleting a file already read is worth a reviewer's look; one
    not read yet is not. With every file gone, the glob's folder is still searched."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    reconcile(repo.root, T0)
    ran = repo.commit("ingested a.csv and b.csv")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    repo.commit("c.csv, not ingested yet")
    git.Repo(repo.root).git.switch("-q", "-c", "pr")
    (repo.root / "sources" / "a.csv").unlink()
    (repo.root / "sources" / "c.csv").unlink()
    repo.commit("a pull request deleting a.csv and c.csv")
    plan = make_plan(repo.config, PlanRequest(base_ref="main"))
    assert plan.problems == (
        Problem(
            f"sources/a.csv, deleted by this pull request, was ingested by {NAME} already: its"
            f" rows stay in the chain, but {NAME} can no longer be recreated (a recreate reads"
            " every file again), so no breaking change to it can be applied; keep the file"
            " (git restore --source main -- sources/a.csv) unless it never will be",
            dataset=NAME,
            location=Location(str(repo.root / "datasets" / f"{NAME}.yaml"), 8, 38),
            field="content.metadata[0].fetch.path",
            severity=Severity.WARNING,
        ),
    )
    assert plan.exit_code(detailed=True) == 0
    # Without a base, against the commit of the chain's last run: every file gone.
    (repo.root / "sources" / "b.csv").unlink()
    (repo.root / "sources").rmdir()
    nothing, *found = make_plan(repo.config, PlanRequest()).problems
    assert nothing.message == "FilesGlob path 'sources/*.csv' matches no file"
    assert [(p.message.split(" already")[0], p.severity) for p in found] == [
        (
            f"sources/{name}.csv, deleted since commit {ran[:7]} (the last to advance its"
            f" chain), was ingested by {NAME}",
            Severity.WARNING,
        )
        for name in ("a", "b")
    ]
    assert f"(git restore --source {ran[:12]} -- sources/b.csv)" in found[1].message


def test_a_file_added_back_under_the_last_ingested_name_is_an_error(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """The last file read is deleted on the base, and a pull request adds a file of that
    name again: against the base it is "added", with the name of the last file read, as
    a pull request's own run would leave it, but the base read it first. It passed its
    plan and then stopped every scheduled run as "modified since" the chain's commit."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    reconcile(repo.root, T0)
    ran = repo.commit("ingested a.csv and b.csv")
    (repo.root / "sources" / "b.csv").unlink()
    repo.commit("b.csv deleted")
    git.Repo(repo.root).git.switch("-q", "-c", "pr")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n3,new\n")
    repo.commit("b.csv again, with a row more")
    plan = make_plan(repo.config, PlanRequest(base_ref="main"))
    assert [(p.message, p.severity) for p in plan.problems] == [
        (
            f"sources/b.csv, added by this pull request, is named as b.csv, the last file"
            f" {NAME} ingested (a file of that name was read, then deleted): a FilesGlob"
            " source reads each file once, in name order, so it will never be ingested; put"
            " the rows in a new file whose name sorts after b.csv: they are appended beside"
            " the rows ingested already",
            Severity.ERROR,
        )
    ]
    # What the scheduled run says once it is merged, judged since the chain's commit.
    (found,) = make_plan(repo.config, PlanRequest()).problems
    assert found.message.startswith(
        f"sources/b.csv, modified since commit {ran[:7]} (the last to advance its chain),"
    )


def test_a_file_put_back_as_it_was_read_is_no_problem_and_a_recreate_reads_it(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """The plan's advice for a deleted file is to put it back: the chain read those very
    bytes, so the file is neither "added behind the last one read" nor unread, and a
    recreate (which reads every file) is no longer refused for it."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    reconcile(repo.root, T0)
    repo.commit("ingested a.csv and b.csv")
    (repo.root / "sources" / "a.csv").unlink()
    deleted = repo.commit("a.csv deleted")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    reconcile(repo.root, T1)
    repo.commit("c.csv ingested")
    branches = git.Repo(repo.root).git
    branches.switch("-q", "-c", "pr")
    branches.restore("--source", f"{deleted}^", "--", "sources/a.csv")
    repo.commit("a.csv put back")
    assert make_plan(repo.config, PlanRequest(base_ref="main")).problems == ()
    assert make_plan(repo.config, PlanRequest()).problems == ()  # as the scheduled run
    # With other bytes, it is a file no run will read.
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,changed\n")
    repo.commit("a.csv put back changed")
    (found,) = make_plan(repo.config, PlanRequest(base_ref="main")).problems
    assert found.message.startswith(
        "sources/a.csv, added by this pull request, sorts before c.csv, the last file"
    )
    # A recreate reads every file again: the changed one too, so nothing is left unread.
    repo.write(NAME, OVERRIDE + manifest(NAME, "Root", root_events("[a STRING, b STRING]")))
    plan = make_plan(repo.config, PlanRequest(base_ref="main"))
    assert [(d.name, d.action.value) for d in plan.datasets] == [(NAME, "recreate")]
    assert plan.problems == ()


def test_a_suggested_command_quotes_a_pull_requests_file_name(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """The advice is a command a reviewer may paste into a shell, and the file's name is
    the pull request's: quoted, it is one argument whatever it holds."""
    hostile = "a;touch pwned;.csv"
    (repo.root / "sources" / hostile).write_text("a,b\n1,x\n")
    reconcile(repo.root, T0)
    repo.commit("ingested")
    git.Repo(repo.root).git.switch("-q", "-c", "pr")
    (repo.root / "sources" / hostile).unlink()
    repo.commit("deleted")
    _, found = make_plan(repo.config, PlanRequest(base_ref="main")).problems  # and no file
    command = found.message.split("(git restore")[1].split(") unless")[0]
    assert command == f" --source main -- 'sources/{hostile}'"
    subprocess.run(f"git restore{command}", shell=True, cwd=repo.root, check=True)
    assert (repo.root / "sources" / hostile).read_text() == "a,b\n1,x\n"
    assert not (repo.root / "pwned").exists()


def test_the_scheduled_runs_partial_clone_fails_on_a_file_merged_behind_the_last_one_read(
    repo: GitOpsRepo, spark: SparkSession, tmp_path: Path
) -> None:
    """The pull request adding the earlier day was planned before the later day was
    ingested, and merged after: only the scheduled run can tell. Its checkout
    (``fetch-depth: 0``, ``filter: blob:none``) has the commit that last moved the chain;
    a one-commit checkout does not, and says nothing."""
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "c.csv").write_text("a,b\n3,z\n")
    reconcile(repo.root, T0)
    ran = repo.commit("ingested a.csv and c.csv")[:7]
    (repo.root / "sources" / "b.csv").write_text("a,b\n2,y\n")
    repo.commit("merge the pull request adding b.csv, planned before c.csv was ingested")
    remote = tmp_path / "remote.git"
    git.Repo.init(remote, bare=True, initial_branch="main").git.config(
        "uploadpack.allowFilter", "true"
    )
    git.Repo(repo.root).git.push(str(remote), "HEAD:main")
    url = remote.as_uri()
    git.Repo.clone_from(url, tmp_path / "partial", multi_options=["--filter=blob:none"])
    git.Repo.clone_from(url, tmp_path / "shallow", depth=1)
    partial = make_plan(RepoConfig.load(tmp_path / "partial"), PlanRequest())
    assert [p.message.split(": a FilesGlob")[0] for p in partial.problems] == [
        f"sources/b.csv, added since commit {ran} (the last to advance its chain), sorts"
        f" before c.csv, the last file {NAME} ingested"
    ]
    shallow = make_plan(RepoConfig.load(tmp_path / "shallow"), PlanRequest())
    assert [(d.name, d.action.value) for d in shallow.datasets] == [(NAME, "unchanged")]
    assert shallow.problems == ()


@pytest.mark.parametrize(
    ("merge", "advice"),
    [
        (
            models.MergeStrategyLedger(primary_key=["a"]),
            "only rows of new primary keys can still be added, in a new file whose name sorts"
            " after b.csv: a Ledger keeps the first row of each key and drops any later row for"
            " it, so a correction to a row it holds cannot be ingested",
        ),
        (
            models.MergeStrategySnapshot(primary_key=["a"]),
            "put the whole state, corrected, in a new file whose name sorts after b.csv: a"
            " Snapshot source takes each file as the state of every key, and retracts the rows"
            " a file leaves out",
        ),
    ],
    ids=["ledger", "snapshot"],
)
def test_the_advice_for_rows_never_ingested_follows_the_merge_strategy(
    merge: models.MergeStrategy, advice: str
) -> None:
    """ "Put the changed rows in a new file" was wrong for both: a Ledger drops a corrected
    row of a key it holds, and a Snapshot file of the changed rows alone retracts the rest."""
    assert _where_rows_go(merge, "a new file whose name sorts after b.csv") == advice


def test_a_file_whose_name_gives_no_event_time_is_an_error_of_the_plan(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """``fromPath`` was checked only by apply: the plan passed, then every run stopped at
    the file, and every file after it waited."""
    events = root_events().replace(
        'path: "sources/*.csv"}',
        'path: "sources/*.csv", eventTime: {kind: FromPath, pattern: "(\\\\d{4}-\\\\d{2}-\\\\d{2})"}}',
    )
    repo.write(NAME, manifest(NAME, "Root", events))
    files(repo, "2020-01-01.csv")
    assert make_plan(repo.config, PlanRequest()).problems == ()
    reconcile(repo.root, T0)
    files(repo, "2020-01-02.csv", "2020-1-3.csv", "latest.csv")
    problems = make_plan(repo.config, PlanRequest()).problems
    assert problems == tuple(  # every such file at once, not only the first
        Problem(
            f"fromPath pattern '(\\d{{4}}-\\d{{2}}-\\d{{2}})' does not match file name"
            f" {name!r}: apply would stop at this file, and read no file after it",
            dataset=NAME,
            location=Location(str(repo.root / "datasets" / f"{NAME}.yaml"), 8, 92),
            field="content.metadata[0].fetch.eventTime.pattern",
        )
        for name in ("2020-1-3.csv", "latest.csv")
    )


def test_a_csv_header_that_names_the_schemas_columns_in_another_order_is_an_error(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """Columns are read by position: an export whose columns moved ingested each value
    under the other column's name, silently. Other names (a rename) are meant."""
    (repo.root / "sources" / "1.csv").write_text("A,B\n1,x\n")
    (repo.root / "sources" / "2.csv").write_text('"id","label"\n2,y\n')
    assert make_plan(repo.config, PlanRequest()).problems == ()
    reconcile(repo.root, T0)
    (repo.root / "sources" / "3.csv").write_text("a,b\n3,z\n")
    (repo.root / "sources" / "4.csv").write_text("b,a\nw,4\n")
    (problem,) = make_plan(repo.config, PlanRequest()).problems
    assert problem == Problem(
        "the header of 4.csv names the read schema's columns in another order (b is column 1"
        " in the file but 2 in the schema, a is column 2 in the file but 1 in the schema):"
        " CSV columns are read by position, so their values would be ingested under other"
        " columns' names. Put the schema in the file's order, or export the file in the"
        " schema's",
        dataset=NAME,
        location=Location(str(repo.root / "datasets" / f"{NAME}.yaml"), 9, 13),
        field="content.metadata[0].read.schema",
    )
    (repo.root / "sources" / "1.csv").write_text("b,a\nx,1\n")  # read already: not judged
    (repo.root / "sources" / "4.csv").write_text("a,b\n4,w\n")
    assert make_plan(repo.config, PlanRequest()).problems == ()


def test_a_csv_file_with_another_number_of_fields_than_the_schema_is_an_error(
    repo: GitOpsRepo,
) -> None:
    """A column added to the read schema, with the files already read left as they were:
    a chain read again from every file (created, or recreated under an override) refused
    every row of the old files at apply, after a plan that passed."""
    repo.write(NAME, manifest(NAME, "Root", root_events(schema="[a BIGINT, b STRING, c STRING]")))
    (repo.root / "sources" / "1.csv").write_text("a,b\n1,x\n")
    (repo.root / "sources" / "2.csv").write_text("a,b,c\n2,y,z\n")
    (problem,) = make_plan(repo.config, PlanRequest()).problems
    assert problem.message == (
        "1.csv has 2 fields in its first line but the read schema declares 3 columns: apply"
        " would refuse its rows, since a CSV row needs one field for each column"
    )
    assert problem.field == "content.metadata[0].read.schema"


def test_past_ten_files_of_one_kind_the_rest_are_counted_in_one_problem() -> None:
    found = [Problem(f"file {i}", dataset=NAME) for i in range(12)]
    assert [p.message for p in at_most(found, 10)] == [
        *(f"file {i}" for i in range(10)),
        "and 2 more files like these",
    ]
    assert at_most(found[:10], 10) == found[:10]
