"""build_plan on real temporary repositories with real chains on disk (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import T0, GitOpsRepo, derivative_events, manifest, root_events

from reconciler.odf import Multihash, models
from reconciler.plan.builder import PlanOptions
from reconciler.plan.model import Action, ChangeClass, Column, Pending


@pytest.fixture
def repo(tmp_path: Path) -> GitOpsRepo:
    return GitOpsRepo.create(tmp_path / "repo")


def by_name(plan) -> dict:  # type: ignore[no-untyped-def]
    return {d.name: d for d in plan.datasets}


def test_a_new_manifest_plans_a_create_with_its_events_in_order(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    plan = repo.plan()
    (ds,) = plan.datasets
    assert (ds.action, ds.kind, ds.dataset_id) == (Action.CREATE, "Root", None)
    assert [e.kind for e in ds.events] == ["SetPollingSource", "SetInfo", "SetLicense"]
    assert all(e.before is None for e in ds.events)
    assert ds.events[0].after == {
        "kind": "SetPollingSource",
        "fetch": {"kind": "FilesGlob", "path": "sources/*.csv"},
        "read": {"kind": "Csv", "schema": ["a BIGINT", "b STRING"], "header": True},
        "merge": {"kind": "Append"},
    }
    assert ds.change_class is ChangeClass.COMPATIBLE
    assert ds.pending == (Pending("polling-source", "FilesGlob source may have new data"),)
    assert (plan.exit_code(detailed=True), plan.exit_code(detailed=False)) == (2, 0)


def test_an_applied_manifest_plans_as_unchanged_and_exits_zero(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    plan = repo.plan()
    (ds,) = plan.datasets
    assert (ds.action, ds.events, ds.change_class) == (Action.UNCHANGED, (), None)
    assert ds.dataset_id == str(repo.odf.dataset("org.example.a").state().dataset_id)
    assert plan.exit_code(detailed=True) == 0


@pytest.mark.parametrize(
    ("new_events", "kind", "change_class", "reason"),
    [
        (
            root_events().replace("Example data", "Better words"),
            "SetInfo",
            ChangeClass.METADATA_ONLY,
            "SetInfo changes descriptive metadata only",
        ),
        (
            root_events().replace("shortName: CC0-1.0", "shortName: CC0"),
            "SetLicense",
            ChangeClass.METADATA_ONLY,
            "SetLicense changes descriptive metadata only",
        ),
        (
            root_events(schema="[a BIGINT, b STRING, c DOUBLE]"),
            "SetPollingSource",
            ChangeClass.COMPATIBLE,
            "adds nullable columns: c",
        ),
        (
            root_events(schema="[a BIGINT]"),
            "SetPollingSource",
            ChangeClass.BREAKING,
            "drops or renames columns: b",
        ),
        (
            root_events(schema="[a INT, b STRING]"),
            "SetPollingSource",
            ChangeClass.BREAKING,
            "retypes columns: a bigint -> int",
        ),
        (
            root_events(schema="[a BIGINT, b STRING, c DOUBLE NOT NULL]"),
            "SetPollingSource",
            ChangeClass.BREAKING,
            "adds NOT NULL columns: c",
        ),
        (
            root_events(merge="{kind: Ledger, primaryKey: [a]}"),
            "SetPollingSource",
            ChangeClass.BREAKING,
            "merge strategy changes from Append to Ledger",
        ),
        (
            root_events(extra="- kind: SetVocab\n      eventTimeColumn: a"),
            "SetVocab",
            ChangeClass.COMPATIBLE,
            "sets the names of the system columns",
        ),
        (
            root_events(
                extra="- kind: SetAttachments\n      attachments: {kind: Embedded, items: [{path: README.md, content: hi}]}"
            ),
            "SetAttachments",
            ChangeClass.METADATA_ONLY,
            "SetAttachments changes descriptive metadata only",
        ),
    ],
)
def test_each_kind_of_update_is_planned_and_classified(
    repo: GitOpsRepo, new_events: str, kind: str, change_class: ChangeClass, reason: str
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.write("org.example.a", manifest("org.example.a", "Root", new_events))
    (ds,) = repo.plan().datasets
    assert ds.action is Action.UPDATE
    (event,) = ds.events
    assert (event.kind, event.change_class, ds.change_class) == (kind, change_class, change_class)
    assert reason in event.reasons
    if kind in ("SetInfo", "SetLicense", "SetPollingSource"):
        assert event.before is not None and event.before["kind"] == kind


def test_a_schema_change_lists_the_columns_before_and_after(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.write(
        "org.example.a", manifest("org.example.a", "Root", root_events(schema="[a INT, c STRING]"))
    )
    (event,) = repo.plan().datasets[0].events
    assert event.schema is not None
    assert event.schema.before == (Column("a", "bigint"), Column("b", "string"))
    assert event.schema.after == (Column("a", "int"), Column("c", "string"))
    assert (event.schema.added, event.schema.removed, event.schema.retyped) == (
        ("c",),
        ("b",),
        (("a", "bigint", "int"),),
    )


def test_a_changed_vocabulary_is_breaking(repo: GitOpsRepo) -> None:
    repo.write(
        "org.example.a",
        manifest(
            "org.example.a", "Root", root_events(extra="- kind: SetVocab\n      eventTimeColumn: a")
        ),
    )
    repo.apply()
    repo.write(
        "org.example.a",
        manifest(
            "org.example.a", "Root", root_events(extra="- kind: SetVocab\n      eventTimeColumn: b")
        ),
    )
    (event,) = repo.plan().datasets[0].events
    assert (event.kind, event.change_class) == ("SetVocab", ChangeClass.BREAKING)


def test_replacing_a_push_source_by_a_polling_source_disables_it_first(repo: GitOpsRepo) -> None:
    push = """
    - kind: AddPushSource
      sourceName: upload
      read: {kind: Csv, header: true, schema: [a BIGINT]}
      merge: {kind: Append}
    """
    repo.write("org.example.a", manifest("org.example.a", "Root", push))
    repo.apply()
    polling = root_events(schema="[a BIGINT]").split("- kind: SetInfo")[0]
    repo.write("org.example.a", manifest("org.example.a", "Root", polling))
    (ds,) = repo.plan().datasets
    assert [(e.kind, e.key) for e in ds.events] == [
        ("DisablePushSource", "AddPushSource:upload"),
        ("SetPollingSource", "SetPollingSource"),
    ]
    assert ds.events[0].after == {"kind": "DisablePushSource", "sourceName": "upload"}
    repo.apply()
    assert repo.plan().datasets[0].action is Action.UNCHANGED


def test_a_changed_query_needs_validation_and_reaches_downstream(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a"], "SELECT * FROM `org.example.a`"),
        ),
    )
    repo.write(
        "org.example.c",
        manifest(
            "org.example.c",
            "Derivative",
            derivative_events(["org.example.b"], "SELECT * FROM `org.example.b`"),
        ),
    )
    repo.apply()
    stored = repo.odf.dataset("org.example.b").state().transform
    assert (
        stored is not None
        and stored.inputs[0].dataset_ref == repo.odf.dataset("org.example.a").state().dataset_id
    )
    assert stored.inputs[0].alias == "org.example.a"
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a"], "SELECT a FROM `org.example.a`"),
        ),
    )
    plan = repo.plan()
    a, b, c = (by_name(plan)[n] for n in ("org.example.a", "org.example.b", "org.example.c"))
    assert (a.action, b.action, c.action) == (Action.UNCHANGED, Action.UPDATE, Action.UNCHANGED)
    (event,) = b.events
    assert (event.kind, event.change_class) == ("SetTransform", ChangeClass.NEEDS_VALIDATION)
    assert event.reasons == ("the query changed: the engine analyses it",)
    assert a.downstream == ("org.example.b", "org.example.c")
    assert b.downstream == ("org.example.c",)
    assert [d.name for d in plan.datasets] == ["org.example.a", "org.example.b", "org.example.c"]


def test_a_breaking_root_change_marks_all_downstream_as_affected(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a"], "SELECT * FROM `org.example.a`"),
        ),
    )
    repo.apply()
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events(schema="[a BIGINT]")))
    a = by_name(repo.plan())["org.example.a"]
    assert (a.change_class, a.downstream, a.affected_downstream) == (
        ChangeClass.BREAKING,
        ("org.example.b",),
        ("org.example.b",),
    )


def test_a_metadata_only_change_affects_no_downstream(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a"], "SELECT * FROM `org.example.a`"),
        ),
    )
    repo.apply()
    repo.write(
        "org.example.a",
        manifest("org.example.a", "Root", root_events().replace("Example data", "x")),
    )
    a = by_name(repo.plan())["org.example.a"]
    assert (a.downstream, a.affected_downstream) == (("org.example.b",), ())


def test_a_chain_without_manifest_is_orphaned_and_only_prune_plans_its_deletion(
    repo: GitOpsRepo,
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.remove("org.example.a")
    plan = repo.plan()
    (ds,) = plan.datasets
    assert (ds.action, ds.events) == (Action.ORPHANED, ())
    assert plan.exit_code(detailed=True) == 0
    pruned = repo.plan(options=PlanOptions(prune=True))
    assert pruned.datasets[0].action is Action.DELETE
    assert pruned.exit_code(detailed=True) == 2
    assert repo.odf.dataset("org.example.a").exists()


def _add_slice(repo: GitOpsRepo, name: str, start: int, end: int) -> None:
    dataset = repo.odf.dataset(name)
    state = dataset.state()
    if state.data_schema is None:
        dataset.append_event(models.SetDataSchema(schema_=b"\x00"), T0)
        state = dataset.state()
    dataset.append_event(
        models.AddData(
            prev_offset=state.last_offset,
            new_data=models.DataSlice(
                logical_hash=Multihash.sha3_256(b"%d" % end),
                physical_hash=Multihash.sha3_256(b"p%d" % end),
                offset_interval=models.OffsetInterval(start=start, end=end),
                size=10,
            ),
        ),
        T0,
    )


def test_a_derivative_with_unconsumed_input_slices_has_pending_data(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a"], "SELECT * FROM `org.example.a`"),
        ),
    )
    repo.apply()
    _add_slice(repo, "org.example.a", 0, 9)
    plan = repo.plan()
    b = by_name(plan)["org.example.b"]
    assert (b.action, b.pending) == (
        Action.UNCHANGED,
        (Pending("unconsumed-inputs", "org.example.a: offsets 0..9 not yet consumed"),),
    )
    assert plan.has_changes and plan.exit_code(detailed=True) == 2


def test_an_input_that_brought_nothing_in_the_last_run_is_still_consumed(
    repo: GitOpsRepo,
) -> None:
    """The newest ExecuteTransform says how far each input was read: an input with no
    new slice in that run has only its prev_offset there. The plan's projection reads
    that block alone, and used to report the input as never consumed, so a plan with
    --detailed-exitcode said 2 after every apply."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write("org.example.c", manifest("org.example.c", "Root", root_events()))
    query = "SELECT * FROM `org.example.a` UNION ALL SELECT * FROM `org.example.c`"
    repo.write(
        "org.example.b",
        manifest(
            "org.example.b",
            "Derivative",
            derivative_events(["org.example.a", "org.example.c"], query),
        ),
    )
    repo.apply()
    _add_slice(repo, "org.example.a", 0, 9)
    _add_slice(repo, "org.example.c", 0, 4)
    a, c = (repo.odf.dataset(n).state() for n in ("org.example.a", "org.example.c"))
    assert a.dataset_id is not None and c.dataset_id is not None
    b = repo.odf.dataset("org.example.b")
    b.append_event(models.SetDataSchema(schema_=b"\x00"), T0)
    a1, c1 = repo.odf.dataset("org.example.a").head(), repo.odf.dataset("org.example.c").head()
    _add_slice(repo, "org.example.a", 10, 19)
    a2 = repo.odf.dataset("org.example.a").head()
    runs = (
        ((None, None, a1, 9), (None, None, c1, 4), None, 0, 9),
        ((a1, 9, a2, 19), (c1, 4, None, None), 9, 10, 19),
    )
    for a_cursor, c_cursor, prev_offset, start, end in runs:
        b.append_event(
            models.ExecuteTransform(
                query_inputs=[
                    models.ExecuteTransformInput(
                        dataset_id=id_,
                        prev_block_hash=cursor[0],
                        prev_offset=cursor[1],
                        new_block_hash=cursor[2],
                        new_offset=cursor[3],
                    )
                    for id_, cursor in ((a.dataset_id, a_cursor), (c.dataset_id, c_cursor))
                ],
                prev_offset=prev_offset,
                new_data=models.DataSlice(
                    logical_hash=Multihash.sha3_256(b"%d" % end),
                    physical_hash=Multihash.sha3_256(b"b%d" % end),
                    offset_interval=models.OffsetInterval(start=start, end=end),
                    size=10,
                ),
            ),
            T0,
        )
    plan = repo.plan()
    assert by_name(plan)["org.example.b"].pending == ()
    assert {n: cursor.offset for n, cursor in b.projection().inputs.items()} == {
        a.dataset_id: 19,
        c.dataset_id: 4,
    }
    assert b.projection().inputs == b.state().inputs


def test_all_problems_are_reported_at_once(repo: GitOpsRepo) -> None:
    repo.write(
        "org.example.bad",
        manifest(
            "org.example.bad", "Root", "- kind: SetInfo\n  bogus: 1\n- kind: SetLicense\n  name: x"
        ),
    )
    repo.write("org.example.dup1", manifest("org.example.dup", "Root", root_events()))
    repo.write("org.example.dup2", manifest("org.example.dup", "Root", root_events()))
    repo.write(
        "org.example.orphan-input",
        manifest(
            "org.example.orphan-input",
            "Derivative",
            derivative_events(["org.example.nowhere"], "SELECT 1"),
        ),
    )
    repo.write(
        "org.example.x",
        manifest("org.example.x", "Derivative", derivative_events(["org.example.y"], "SELECT 1")),
    )
    repo.write(
        "org.example.y",
        manifest("org.example.y", "Derivative", derivative_events(["org.example.x"], "SELECT 1")),
    )
    plan = repo.plan()
    messages = sorted(p.message for p in plan.problems)
    assert messages == [
        f"dataset 'org.example.dup' is defined twice (also in {repo.root / 'datasets' / 'org.example.dup1.yaml'}:4)",
        "dependency cycle: org.example.x -> org.example.y -> org.example.x",
        "input 'org.example.nowhere' of 'org.example.orphan-input' is not a dataset of this"
        " repository; 1 manifest could not be read, and may define it",
        "required field 'shortName' is missing",
        "required field 'websiteUrl' is missing",
        "unknown field 'bogus'; expected one of: description, keywords",
    ]
    bogus = next(p for p in plan.problems if "bogus" in p.message)
    assert (bogus.location.line, bogus.location.column, bogus.field) == (
        8,
        7,
        "content.metadata[0].bogus",
    )  # type: ignore[union-attr]
    assert plan.exit_code(detailed=True) == 1 and plan.exit_code(detailed=False) == 1


def test_a_manifest_cannot_change_the_kind_of_an_existing_chain(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.write(
        "org.example.a",
        manifest("org.example.a", "Derivative", "- kind: SetInfo\n  description: now derived"),
    )
    plan = repo.plan()
    (problem,) = plan.problems
    assert (
        problem.message
        == "the manifest says Derivative but the chain was created as Root; a dataset cannot change kind"
    )
    assert problem.field == "content.kind"


def test_base_ref_marks_what_the_pull_request_touched(repo: GitOpsRepo) -> None:
    from reconciler.gitloop.gitops import changed_paths

    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write("org.example.b", manifest("org.example.b", "Root", root_events()))
    base = repo.commit()
    repo.write(
        "org.example.b",
        manifest("org.example.b", "Root", root_events().replace("Example", "Changed")),
    )
    repo.write("org.example.c", manifest("org.example.c", "Root", root_events()))
    changed = changed_paths(repo.root, base)
    names = frozenset(p.stem for p in changed if p.suffix == ".yaml")
    plan = repo.plan(options=PlanOptions(base_ref=base, changed=names))
    assert {d.name: d.changed_in_pr for d in plan.datasets} == {
        "org.example.a": False,
        "org.example.b": True,
        "org.example.c": True,
    }
