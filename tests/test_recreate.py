"""Breaking changes allowed by the override are carried out by recreating the dataset:
a new chain (a new Seed) in the same folder, its data recomputed from the whole history,
and every reader recreated in turn; the plan says so, and apply does exactly that."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gitops_repo import (
    TEST_SETTINGS,
    GitOpsRepo,
    derivative_events,
    events,
    manifest,
    reconcile,
    root_events,
    rows,
    slices,
)
from pyspark.sql import SparkSession

from reconciler.apply.outcome import Outcome, Status
from reconciler.apply.run import apply_plan
from reconciler.engine.session import get_spark
from reconciler.ingest.pull import IngestContext
from reconciler.inspection.verify import verify_dataset
from reconciler.odf import Timestamp, models
from reconciler.odf.json_schemas import validator
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Action, ChangeClass, Severity
from reconciler.plan.render_json import plan_to_dict
from reconciler.plan.render_text import render_text
from reconciler.planning.compose import PlanRequest, make_plan

A, B, C = "org.example.a", "org.example.b", "org.example.c"
OVERRIDE = "# reconcile: allow-breaking-change: b was never read downstream\n"
LATER = Timestamp.parse("2026-03-01T00:00:00Z")


def make_repo(tmp_path: Path, b_query: str, c_query: str) -> GitOpsRepo:
    """Root a over two CSV files (3 records), b reading a, c reading b; applied once."""
    repo = GitOpsRepo.create(tmp_path)
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    (tmp_path / "sources" / "2.csv").write_text("a,b\n3,z\n")
    repo.write(A, manifest(A, "Root", root_events()))
    repo.write(B, manifest(B, "Derivative", derivative_events([A], b_query)))
    repo.write(C, manifest(C, "Derivative", derivative_events([B], c_query)))
    outcomes = reconcile(tmp_path)
    assert [(o.dataset, o.status, o.rows) for o in outcomes] == [
        (A, Status.CREATED, 3),
        (B, Status.CREATED, 3),
        (C, Status.CREATED, 3),
    ]
    return repo


def chain_of(repo: GitOpsRepo, name: str) -> tuple[str, str, int]:
    """A chain's id, head and block count."""
    state = repo.odf.dataset(name).state()
    return str(state.dataset_id), str(state.head), state.sequence_number + 1


def all_rows(repo: GitOpsRepo, name: str) -> list[tuple[Any, ...]]:
    return [r for t in slices(repo.odf.dataset(name)) for r in rows(t, "system_time")]


def attachment(repo: GitOpsRepo, name: str) -> str:
    """The RECREATED.md content of a chain's SetAttachments right after its Seed."""
    seed, first, *_ = events(repo.odf.dataset(name))
    assert isinstance(seed, models.Seed) and isinstance(first, models.SetAttachments)
    (item,) = first.attachments.items
    assert item.path == "RECREATED.md"
    return item.content


def test_a_derivative_whose_query_drops_a_column_is_recreated_with_its_readers(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(
        tmp_path,
        "SELECT event_time, a, b FROM `org.example.a`",
        "SELECT event_time, a FROM `org.example.b`",
    )
    b_id, b_head, _ = chain_of(repo, B)
    c_id, c_head, _ = chain_of(repo, C)
    new_b = manifest(
        B, "Derivative", derivative_events([A], "SELECT event_time, a FROM `org.example.a`")
    )
    repo.write(B, OVERRIDE + new_b)

    plan = make_plan(repo.config, PlanRequest())
    text = render_text(plan, color=False)
    b_reason = (
        "breaking change to SetTransform (the query changed: the engine analyses it; "
        "drops or renames columns: b)"
    )
    assert text.split("\n\n")[1].splitlines()[:7] == [
        f"± {B} (Derivative, breaking) will be recreated",
        "    override: b was never read downstream",
        f"    recreate: {b_reason}",
        f"    replaces: {b_id} at head {b_head} (6 blocks); the new chain gets a new id",
        f"    recreated with it: {C}",
        f"    reprocesses: 3 input records (the whole history of {A})",
        "    new chain: Seed, SetAttachments, SetTransform, SetInfo, SetLicense",
    ]
    assert text.split("\n\n")[2].splitlines() == [
        f"± {C} (Derivative) will be recreated",
        f"    recreate: reads {B}, which is recreated",
        f"    replaces: {c_id} at head {c_head} (6 blocks); the new chain gets a new id",
        f"    reprocesses: 3 input records (the whole history of {B}); the count of {B} is"
        " its current one, an estimate, as it is recreated too",
        "    new chain: Seed, SetAttachments, SetTransform, SetInfo, SetLicense",
        "    query check: ok; output columns: event_time timestamp, a bigint",
    ]
    assert text.endswith("Plan: 2 to recreate, 1 unchanged. 0 errors, 0 warnings.\n")
    document = plan_to_dict(plan)
    b_json, c_json = document["datasets"][1]["recreate"], document["datasets"][2]["recreate"]
    b_note = (
        "# Recreated\n\n"
        f"This chain replaces {b_id} at head {b_head} (6 blocks), because: {b_reason}.\n\n"
        "Override: b was never read downstream\n\n"
        "The replaced chain is in the repository's git history.\n"
    )
    assert {k: v for k, v in b_json.items() if k != "events"} == {
        "reason": b_reason,
        "replaces": b_id,
        "replacedHead": b_head,
        "replacedBlocks": 6,
        "recreatedWith": [C],
        "inputRecords": 3,
        "estimated": [],
        "uncounted": [],
        "files": [],
    }
    assert b_json["events"][0] == {
        "kind": "SetAttachments",
        "attachments": {"kind": "Embedded", "items": [{"path": "RECREATED.md", "content": b_note}]},
    }
    assert [e["kind"] for e in b_json["events"]] == [
        "SetAttachments",
        "SetTransform",
        "SetInfo",
        "SetLicense",
    ]
    assert b_json["events"][1]["inputs"] == [{"datasetRef": chain_of(repo, A)[0], "alias": A}]
    assert c_json["events"][1]["inputs"] == [{"datasetRef": B, "alias": B}]  # new id: in apply
    assert (c_json["inputRecords"], c_json["estimated"]) == (3, [B])
    assert document["summary"]["actions"]["recreate"] == 2
    assert list(validator("plan.json").iter_errors(document)) == []
    assert document["summary"]["errors"] == 0

    outcomes = reconcile(tmp_path, LATER)
    assert [(o.dataset, o.status, o.metadata_blocks, o.data_blocks, o.rows) for o in outcomes] == [
        (A, Status.UP_TO_DATE, 0, 0, 0),
        (B, Status.RECREATED, 5, 2, 3),
        (C, Status.RECREATED, 5, 2, 3),
    ]
    new_b_id, _, _ = chain_of(repo, B)
    new_c_id, _, _ = chain_of(repo, C)
    assert new_b_id != b_id and new_c_id != c_id
    assert all_rows(repo, B) == [
        (0, 0, "2026-02-01T12:00:00Z", 1),
        (1, 0, "2026-02-01T12:00:00Z", 2),
        (2, 0, "2026-02-01T12:00:00Z", 3),
    ]
    assert all_rows(repo, C) == all_rows(repo, B)
    assert attachment(repo, B) == b_note
    assert attachment(repo, C) == (
        "# Recreated\n\n"
        f"This chain replaces {c_id} at head {c_head} (6 blocks), because: reads {B}, "
        "which is recreated.\n\n"
        "The replaced chain is in the repository's git history.\n"
    )
    (c_transform,) = [e for e in events(repo.odf.dataset(C)) if isinstance(e, models.SetTransform)]
    assert [i.dataset_ref for i in c_transform.inputs] == [new_b_id]
    assert sorted(p.name for p in repo.odf.root.iterdir()) == [".lock", A, B, C]  # no staging
    names = repo.odf.names_by_id()
    for name in (B, C):
        verdict = verify_dataset(repo.odf, name, names, lambda: spark)
        assert (verdict.problems, verdict.replayed) == ([], 1)

    again = make_plan(repo.config, PlanRequest())
    assert [(d.name, d.action, d.pending) for d in again.datasets] == [
        (A, Action.UNCHANGED, ()),
        (B, Action.UNCHANGED, ()),
        (C, Action.UNCHANGED, ()),
    ]
    assert not again.has_changes and not again.has_errors


def write_root(repo: GitOpsRepo, schema: str, override: bool) -> None:
    text = manifest(A, "Root", root_events(schema=schema))
    repo.write(A, (OVERRIDE if override else "") + text)


def test_a_root_whose_read_schema_breaks_is_recreated_from_all_its_files(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(
        tmp_path,
        "SELECT event_time, b FROM `org.example.a`",
        "SELECT event_time, b FROM `org.example.b`",
    )
    a_id, a_head, _ = chain_of(repo, A)
    write_root(repo, "[a STRING, b STRING]", override=True)

    plan = make_plan(repo.config, PlanRequest())
    a = plan.datasets[0]
    assert a.action is Action.RECREATE and a.recreate is not None
    assert (a.recreate.reason, a.recreate.replaces, a.recreate.replaced_head) == (
        "breaking change to SetPollingSource (retypes columns: a bigint -> string)",
        a_id,
        a_head,
    )
    assert (a.recreate.files, a.recreate.input_records, a.recreate.estimated) == (
        ("1.csv", "2.csv"),
        3,
        (A,),
    )
    assert a.recreate.recreated_with == (B, C)
    assert [d.action for d in plan.datasets] == [Action.RECREATE] * 3
    assert (
        "    reprocesses: 2 files read again (1.csv, 2.csv); about 3 records (its current count)"
        in (render_text(plan, color=False).splitlines())
    )
    assert not plan.has_errors

    outcomes = reconcile(tmp_path, LATER)
    assert [(o.dataset, o.status, o.rows) for o in outcomes] == [
        (A, Status.RECREATED, 3),
        (B, Status.RECREATED, 3),
        (C, Status.RECREATED, 3),
    ]
    assert chain_of(repo, A)[0] != a_id
    assert all_rows(repo, A) == [
        (0, 0, "2026-03-01T00:00:00Z", "1", "x"),
        (1, 0, "2026-03-01T00:00:00Z", "2", "y"),
        (2, 0, "2026-03-01T00:00:00Z", "3", "z"),
    ]
    assert [r[3] for r in all_rows(repo, C)] == ["x", "y", "z"]
    assert not make_plan(repo.config, PlanRequest()).has_changes


def test_a_new_derivative_of_a_root_recreated_in_the_same_run_reads_the_new_chain(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Planned with the input's old id, the new dataset failed at apply ("input did:odf:…
    is not in the repository") after a plan that passed: the id is the new chain's."""
    repo = make_repo(
        tmp_path,
        "SELECT event_time, b FROM `org.example.a`",
        "SELECT event_time, b FROM `org.example.b`",
    )
    write_root(repo, "[a STRING, b STRING]", override=True)
    new = "org.example.d"
    repo.write(
        new,
        manifest(
            new, "Derivative", derivative_events([A], "SELECT event_time, a FROM `org.example.a`")
        ),
    )
    plan = make_plan(repo.config, PlanRequest())
    assert not plan.has_errors, plan.problems
    (d,) = [p for p in plan.datasets if p.name == new]
    (transform,) = [e for e in d.events if e.kind == "SetTransform"]
    assert transform.after is not None
    assert [i["datasetRef"] for i in transform.after["inputs"]] == [A]  # named, not the old id
    outcomes = reconcile(tmp_path, LATER)
    assert [(o.dataset, o.status, o.rows) for o in outcomes] == [
        (A, Status.RECREATED, 3),
        (B, Status.RECREATED, 3),
        (C, Status.RECREATED, 3),
        (new, Status.CREATED, 3),
    ]
    (set_transform,) = [
        e for e in events(repo.odf.dataset(new)) if isinstance(e, models.SetTransform)
    ]
    assert [str(i.dataset_ref) for i in set_transform.inputs] == [chain_of(repo, A)[0]]
    assert [r[3] for r in all_rows(repo, new)] == ["1", "2", "3"]


def test_a_derivative_repointed_at_a_new_input_says_its_records_are_not_counted(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The plan said it reprocessed "0 input records" of an input created in the same
    run, which then read 3."""
    repo = make_repo(
        tmp_path,
        "SELECT event_time, b FROM `org.example.a`",
        "SELECT event_time, b FROM `org.example.b`",
    )
    e = "org.example.e"
    repo.write(e, manifest(e, "Root", root_events()))
    query = "SELECT event_time, b FROM `org.example.e`"
    repo.write(B, OVERRIDE + manifest(B, "Derivative", derivative_events([e], query)))
    plan = make_plan(repo.config, PlanRequest())
    assert not plan.has_errors, plan.problems
    (b,) = [d for d in plan.datasets if d.name == B]
    assert b.action is Action.RECREATE and b.recreate is not None
    assert (b.recreate.input_records, b.recreate.uncounted) == (0, (e,))
    assert (
        f"    reprocesses: 0 input records (the whole history of {e}); not counted: {e},"
        " created in the same run, whose records are not read yet"
    ) in render_text(plan, color=False).splitlines()
    assert plan_to_dict(plan)["datasets"][2]["recreate"]["uncounted"] == [e]


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` but git's own, by path, with its bytes' hash."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_a_root_whose_earlier_files_are_gone_cannot_be_recreated_and_apply_writes_nothing(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(
        tmp_path,
        "SELECT event_time, b FROM `org.example.a`",
        "SELECT event_time, b FROM `org.example.b`",
    )
    (tmp_path / "sources" / "1.csv").unlink()
    write_root(repo, "[a STRING, b STRING]", override=True)
    before = tree(tmp_path)

    plan = make_plan(repo.config, PlanRequest())
    (problem,) = plan.problems
    assert (problem.dataset, problem.field, problem.severity, problem.message) == (
        A,
        "content.metadata[0].fetch",
        Severity.ERROR,
        "cannot be recreated: files it ingested are gone: 1.csv (sources/*.csv now matches:"
        " 2.csv); git keeps them: `git log --diff-filter=D --name-only -- 'sources/*.csv'`"
        " names the commit that deleted each, and `git restore --source <commit>^ -- <file>`"
        " brings it back",
    )
    assert plan.has_errors and plan_to_dict(plan)["summary"]["errors"] == 1

    applied = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(tmp_path), "apply", "--yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert applied.returncode == 1
    assert "cannot be recreated: files it ingested are gone: 1.csv" in applied.stdout
    assert tree(tmp_path) == before


def test_without_the_override_a_breaking_change_stays_a_policy_error(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(
        tmp_path,
        "SELECT event_time, b FROM `org.example.a`",
        "SELECT event_time, b FROM `org.example.b`",
    )
    (tmp_path / "policies").mkdir()
    shutil.copy(Path(__file__).parents[1] / "policies" / "evolution.yaml", tmp_path / "policies")
    write_root(repo, "[a STRING, b STRING]", override=False)

    plan = make_plan(repo.config, PlanRequest())
    assert [(d.name, d.action, d.recreate) for d in plan.datasets] == [
        (A, Action.UPDATE, None),
        (B, Action.UNCHANGED, None),
        (C, Action.UNCHANGED, None),
    ]
    assert [(v.policy, v.severity, v.dataset) for v in plan.verdicts] == [
        ("breaking-change-override", Severity.ERROR, A)
    ]
    assert plan.exit_code(detailed=False) == 1


class _StoppedError(Exception):
    """Raised by a run's report once its first dataset is done: a run that stopped there."""


def test_readers_left_behind_by_a_stopped_recreate_are_recreated_without_a_new_override(
    tmp_path: Path, spark: SparkSession
) -> None:
    """A run stopped after recreating a but before its readers: b's chain reads a's old
    id, which no chain has. The next plan judged b's input "replaced", a breaking change
    its unchanged manifest had no override for, and every later run stopped on it."""
    repo = make_repo(
        tmp_path,
        "SELECT event_time, a FROM `org.example.a`",
        "SELECT event_time, a FROM `org.example.b`",
    )
    (tmp_path / "policies").mkdir()
    shutil.copy(Path(__file__).parents[1] / "policies" / "evolution.yaml", tmp_path / "policies")
    write_root(repo, "[a STRING, b STRING]", override=True)
    plan = make_plan(repo.config, PlanRequest())
    assert [d.action for d in plan.datasets] == [Action.RECREATE] * 3 and not plan.has_errors
    context = IngestContext(
        spark=lambda: get_spark(TEST_SETTINGS), base_dir=tmp_path, env={}, system_time=LATER
    )

    def report(outcome: Outcome) -> None:
        if outcome.dataset == A:
            raise _StoppedError

    with pytest.raises(_StoppedError):
        apply_plan(OdfRepository(repo.config.odf_dir), plan, LATER, context, report)
    again = make_plan(repo.config, PlanRequest())
    assert [(d.name, d.action) for d in again.datasets] == [
        (A, Action.UNCHANGED),
        (B, Action.RECREATE),
        (C, Action.RECREATE),
    ]
    b = again.datasets[1]
    assert b.recreate is not None and b.recreate.reason.startswith("its chain reads did:odf:")
    assert b.change_class is not ChangeClass.BREAKING
    assert (again.verdicts, again.problems) == ((), ())
    outcomes = reconcile(tmp_path, LATER)
    assert [(o.dataset, o.status, o.rows) for o in outcomes] == [
        (A, Status.UP_TO_DATE, 0),
        (B, Status.RECREATED, 3),
        (C, Status.RECREATED, 3),
    ]
    assert [r[3] for r in all_rows(repo, C)] == ["1", "2", "3"]


def test_a_crash_between_the_two_renames_of_a_replacement_leaves_the_old_chain(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(A, manifest(A, "Root", root_events()))
    repo.apply()
    odf = repo.odf
    old = tree(odf.root)
    staged = odf.staging(A)
    staged.create(models.Seed(dataset_id=chain_of(repo, A)[0], dataset_kind="Root"), LATER)
    (odf.root / A).rename(odf.root / f".replaced-{A}")  # the first rename, then the crash

    assert odf.names() == [] and odf.strays() == []
    settled = odf.remove_leftovers()
    assert sorted(p.name for p in settled) == [f".recreate-{A}", f".replaced-{A}"]
    assert tree(odf.root) == old


def test_a_recreate_that_fails_keeps_the_old_chain_and_reports_no_blocks(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Retyping the text column ``b`` as BIGINT makes every record of the old files
    malformed, which the plan cannot see (it reads no values). The new chain is discarded
    with its staging folder, so its outcome counts no blocks (it said "6 blocks (6
    metadata)")."""
    repo = make_repo(
        tmp_path,
        "SELECT event_time, a FROM `org.example.a`",
        "SELECT event_time, a FROM `org.example.b`",
    )
    before = {name: chain_of(repo, name) for name in (A, B, C)}
    write_root(repo, "[a BIGINT, b BIGINT]", override=True)
    outcomes = reconcile(tmp_path, LATER)
    assert [(o.dataset, o.status, o.metadata_blocks, o.data_blocks) for o in outcomes] == [
        (A, Status.FAILED, 0, 0),
        (B, Status.SKIPPED, 0, 0),
        (C, Status.SKIPPED, 0, 0),
    ]
    assert outcomes[0].message.startswith("read failed: ReadError: ")
    assert [o.message for o in outcomes[1:]] == [f"input {A} failed", f"input {B} was skipped"]
    assert {name: chain_of(repo, name) for name in (A, B, C)} == before
