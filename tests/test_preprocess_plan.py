"""The plan checks a root's preprocess query as it checks transforms: parsed, sandboxed
and analysed over the read schema (the view ``input``) before the source is committed,
and its output columns are what the datasets downstream and the merge strategy see.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gitops_repo import GitOpsRepo, derivative_events, manifest

from reconciler.plan.model import Column, Plan, Problem, QueryCheck
from reconciler.planning.compose import PlanRequest, make_plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = "org.example.readings"
DERIVED = "org.example.loud"
LICENSE = """
    - kind: SetInfo
      description: Example data
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
"""


def root(query: str, merge: str = "{kind: Append}") -> str:
    block = "\n".join("          " + line for line in query.splitlines())
    events = f"""
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/*.csv"}}
      read: {{kind: Csv, header: true, schema: [a BIGINT, b STRING]}}
      preprocess:
        kind: Sql
        engine: spark
        query: |
{block}
      merge: {merge}
{LICENSE}"""
    return manifest(ROOT, "Root", events)


def plan_of(tmp_path: Path, root_query: str, derived_query: str | None = None, **kw: str) -> Plan:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(ROOT, root(root_query, **kw))
    if derived_query is not None:
        events = derivative_events([ROOT], derived_query)
        repo.write(DERIVED, manifest(DERIVED, "Derivative", events))
    return make_plan(repo.config, PlanRequest())


def query_of(plan: Plan, name: str) -> QueryCheck | None:
    return next(d.query for d in plan.datasets if d.name == name)


def test_a_typo_in_a_preprocess_query_fails_the_plan(spark: SparkSession, tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "SELECT a,\n  bb AS b\nFROM input")
    check = query_of(plan, ROOT)
    assert check is not None
    assert (check.ok, check.line) == (False, 2)
    assert check.error is not None
    assert check.error.startswith(
        "`query`: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function"
        " parameter with name `bb` cannot be resolved."
    )
    assert plan.has_errors


def test_a_sandbox_escape_in_a_preprocess_query_fails_the_plan(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = plan_of(tmp_path, "SELECT a, xpath_string(b, 'r') AS b FROM input")
    assert query_of(plan, ROOT) == QueryCheck(
        dataset=ROOT,
        ok=False,
        error="`query`: not allowed: calls xpath_string, whose XML parser fetches external DTDs",
        line=1,
        step="output",
    )
    assert plan.has_errors


def test_a_preprocess_query_may_read_only_its_input(spark: SparkSession, tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "SELECT * FROM `org.example.loud`")
    check = query_of(plan, ROOT)
    assert check is not None and check.error is not None
    assert check.error.startswith("`query`: [TABLE_OR_VIEW_NOT_FOUND]")


def test_a_non_deterministic_preprocess_query_is_a_policy_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = plan_of(tmp_path, "SELECT a, b, uuid() AS id FROM input")
    assert [(v.policy, v.severity.value, v.message.split(":")[0]) for v in plan.verdicts] == [
        ("deterministic-queries", "error", "non-deterministic uuid() in `query` (line 1)")
    ]
    assert plan.has_errors


def test_the_preprocess_output_flows_to_a_downstream_derivative(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``shout`` exists only in the preprocess output and ``b`` only in the read schema."""
    plan = plan_of(
        tmp_path,
        "SELECT a, upper(b) AS shout FROM input",
        "SELECT event_time, a, shout FROM `org.example.readings`",
    )
    assert query_of(plan, ROOT) == QueryCheck(
        dataset=ROOT,
        ok=True,
        output_schema=(Column("a", "bigint", True), Column("shout", "string", True)),
    )
    assert query_of(plan, DERIVED) == QueryCheck(
        dataset=DERIVED,
        ok=True,
        output_schema=(
            Column("event_time", "timestamp", True),
            Column("a", "bigint", True),
            Column("shout", "string", True),
        ),
    )
    assert not plan.has_errors

    stale = plan_of(
        tmp_path / "stale",
        "SELECT a, upper(b) AS shout FROM input",
        "SELECT a, b FROM `org.example.readings`",
    )
    check = query_of(stale, DERIVED)
    assert check is not None and check.error is not None
    assert "name `b` cannot be resolved" in check.error


def test_derivatives_see_the_system_columns_of_a_preprocessed_root(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = plan_of(
        tmp_path,
        "SELECT a FROM input",
        "SELECT offset AS read_offset, op, system_time AS read_at, event_time, a"
        " FROM `org.example.readings`",
    )
    check = query_of(plan, DERIVED)
    assert check is not None and check.ok


def test_merge_keys_are_checked_against_the_preprocess_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = plan_of(
        tmp_path,
        "SELECT a AS id, b FROM input",
        merge="{kind: Snapshot, primaryKey: [a], compareColumns: [b]}",
    )
    file = str(tmp_path / "datasets" / f"{ROOT}.yaml")
    problems = [p for p in plan.problems if p.dataset == ROOT]
    assert [(p.message, p.field, str(p.location)) for p in problems] == [
        (
            "merge.primaryKey names `a`, which the preprocess query does not give;"
            " its columns are: id, b",
            "content.metadata[0].merge.primaryKey[0]",
            f"{file}:15:44",
        ),
        (
            "FilesGlob path 'sources/*.csv' matches no file",
            "content.metadata[0].fetch.path",
            f"{file}:8:38",
        ),
    ]
    assert plan.has_errors


def test_a_system_column_name_or_a_bad_event_time_in_the_output_is_a_problem(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = plan_of(tmp_path, "SELECT a AS offset, b AS event_time FROM input")
    problems = [p for p in plan.problems if p.dataset == ROOT]
    assert [(p.message, p.field) for p in problems] == [
        (
            "the preprocess query gives a column `offset`, which is a system column's name;"
            " rename it in the query",
            "content.metadata[0].preprocess",
        ),
        (
            "the preprocess query gives the event time column `event_time` as string;"
            " it must be a DATE or a TIMESTAMP",
            "content.metadata[0].preprocess",
        ),
        ("FilesGlob path 'sources/*.csv' matches no file", "content.metadata[0].fetch.path"),
    ]
    assert isinstance(problems[0], Problem)


def test_an_unchanged_preprocess_query_is_not_analysed_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(ROOT, root("SELECT a, b FROM input"))
    first = make_plan(repo.config, PlanRequest())
    assert query_of(first, ROOT) is not None
    repo.apply()
    again = make_plan(repo.config, PlanRequest())
    assert query_of(again, ROOT) is None
    repo.write(ROOT, root("SELECT a, lower(b) AS b FROM input"))
    changed = make_plan(repo.config, PlanRequest())
    assert query_of(changed, ROOT) == QueryCheck(
        dataset=ROOT,
        ok=True,
        output_schema=(Column("a", "bigint", True), Column("b", "string", True)),
    )
