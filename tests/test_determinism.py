"""Determinism is a rule: a query whose result changes from run to run is a plan error,
with the function named, unless the repository's policies lower it to a warning.

The engine's analysis lists the non-deterministic parts of a query (``check_query``);
the ``deterministic_queries`` policy judges them, and is in force even when no policy
file names it. ``reconcile sql`` commits nothing and so allows them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from typer.testing import CliRunner

from reconciler.cli import app
from reconciler.engine.query_check import check_query
from reconciler.inspection.sql import run_sql
from reconciler.odf.models import TransformSql
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Column, Location, Severity, Verdict
from reconciler.plan.policies import DEFAULT_DETERMINISM, PolicyError, load_policies
from reconciler.planning.compose import PlanRequest, make_plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INPUTS = {"orders": (Column("id", "bigint"), Column("doc", "string"), Column("key", "binary"))}

# (query, what the check names). Each is a query a plan must not let commit data.
NONDETERMINISTIC: dict[str, tuple[str, tuple[str, ...]]] = {
    "rand": ("SELECT id, rand() AS r FROM orders", ("rand()",)),
    "seeded rand": ("SELECT id, rand(42) AS r FROM orders", ("rand()",)),
    "random": ("SELECT random() AS r FROM orders", ("random()",)),
    "randn": ("SELECT randn() AS r FROM orders", ("randn()",)),
    "uuid": ("SELECT uuid() AS u FROM orders", ("uuid()",)),
    "shuffle": ("SELECT shuffle(array(id, 1)) AS s FROM orders", ("shuffle()",)),
    "randstr": ("SELECT randstr(5) AS s FROM orders", ("randstr()",)),
    "uniform": ("SELECT uniform(0, 10) AS u FROM orders", ("uniform()",)),
    "current_timestamp": ("SELECT current_timestamp() AS t FROM orders", ("current_timestamp()",)),
    "now": ("SELECT now() AS t FROM orders", ("now()",)),
    "current_date": ("SELECT current_date() AS d FROM orders", ("current_date()",)),
    "localtimestamp": ("SELECT localtimestamp() AS t FROM orders", ("localtimestamp()",)),
    "current_user": ("SELECT current_user() AS u FROM orders", ("current_user()",)),
    "input_file_name": ("SELECT input_file_name() AS f FROM orders", ("input_file_name()",)),
    "input_file_block_start": (
        "SELECT input_file_block_start() AS f FROM orders",
        ("input_file_block_start()",),
    ),
    "monotonically_increasing_id": (
        "SELECT monotonically_increasing_id() AS n FROM orders",
        ("monotonically_increasing_id()",),
    ),
    "spark_partition_id": (
        "SELECT spark_partition_id() AS p FROM orders",
        ("SPARK_PARTITION_ID()",),
    ),
    "aes_encrypt with a random vector": (
        "SELECT aes_encrypt(doc, key) AS e FROM orders",
        ("aes_encrypt() without an initialisation vector",),
    ),
    "TABLESAMPLE": ("SELECT id FROM orders TABLESAMPLE (10 PERCENT)", ("TABLESAMPLE",)),
    "in a WHERE clause": ("SELECT id FROM orders WHERE rand() < 0.5", ("rand()",)),
    "in a subquery": ("SELECT id, (SELECT uuid()) AS u FROM orders", ("uuid()",)),
    "in a lambda": ("SELECT transform(array(id), x -> x + rand()) AS r FROM orders", ("rand()",)),
    "in a CTE": ("WITH s AS (SELECT id, now() AS t FROM orders) SELECT * FROM s", ("now()",)),
}


def sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


@pytest.mark.parametrize(("query", "named"), NONDETERMINISTIC.values(), ids=NONDETERMINISTIC.keys())
def test_the_check_names_each_non_deterministic_function(
    spark: SparkSession, query: str, named: tuple[str, ...]
) -> None:
    check = check_query(spark, "acme.out", INPUTS, sql(query))
    assert check.ok
    assert check.nondeterministic == tuple(f"{n} in `query` (line 1)" for n in named)


def test_findings_name_their_step_and_line(spark: SparkSession) -> None:
    transform = TransformSql(
        engine="spark",
        queries=[
            {"alias": "sampled", "query": "SELECT *\nFROM orders\nTABLESAMPLE (5 PERCENT)"},
            {"query": "SELECT id,\n  uuid() AS u\nFROM sampled"},
        ],
    )
    check = check_query(spark, "acme.out", INPUTS, transform)
    assert check.nondeterministic == (
        "TABLESAMPLE in step `sampled` (line 3)",
        "uuid() in step `output` (line 2)",
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, sha2(doc, 256) AS h, first(doc) OVER (ORDER BY id) AS f FROM orders",
        "SELECT aes_encrypt(doc, key, 'GCM', 'DEFAULT', unhex('000000000000000000000000')) AS e"
        " FROM orders",
        "SELECT id, current_timezone() AS z, make_timestamp(2026, 1, 1, 0, 0, 0) AS t FROM orders",
    ],
)
def test_deterministic_queries_have_no_finding(spark: SparkSession, query: str) -> None:
    check = check_query(spark, "acme.out", INPUTS, sql(query))
    assert (check.ok, check.nondeterministic) == (True, ())


ROOT = "org.example.source"
DERIVED = "org.example.derived"


def repo_with(tmp_path: Path, query: str) -> GitOpsRepo:
    repo = GitOpsRepo.create(tmp_path)
    repo.write(ROOT, manifest(ROOT, "Root", root_events()))
    repo.write(DERIVED, manifest(DERIVED, "Derivative", derivative_events([ROOT], query)))
    return repo


def determinism_verdicts(repo: GitOpsRepo) -> tuple[list[Verdict], bool]:
    plan = make_plan(repo.config, PlanRequest())
    return [v for v in plan.verdicts if v.policy == "deterministic-queries"], plan.has_errors


def test_a_non_deterministic_transform_is_a_plan_error_by_default(
    spark: SparkSession, tmp_path: Path
) -> None:
    """At the manifest's line of the call, as a query's own errors are: it was placed at
    ``kind: Sql``, the query's line given only in the text."""
    repo = repo_with(tmp_path, "SELECT event_time, a,\n  rand() AS r\nFROM `org.example.source`")
    verdicts, has_errors = determinism_verdicts(repo)
    manifest_file = tmp_path / "datasets" / f"{DERIVED}.yaml"
    assert verdicts == [
        Verdict(
            policy="deterministic-queries",
            severity=Severity.ERROR,
            message=f"non-deterministic rand() in `query` (line 2): {DEFAULT_DETERMINISM.message}",
            dataset=DERIVED,
            location=Location(str(manifest_file), 14),
        )
    ]
    assert manifest_file.read_text().splitlines()[13].strip() == "rand() AS r"
    assert has_errors


def test_a_refused_apply_names_the_policy_error_where_the_plan_places_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The scheduled job's summary quotes the run's error: a policy's lost its file and
    line there (``the first: org.x: deterministic-queries: …``)."""
    repo = repo_with(tmp_path, "SELECT event_time, a,\n  rand() AS r\nFROM `org.example.source`")
    refused = CliRunner().invoke(app, ["-C", str(repo.root), "apply", "--format", "json"])
    assert refused.exit_code == 1, refused.output
    assert json.loads(refused.stdout)["error"] == (
        "the plan has 1 error, so nothing was applied; the first:"
        f" datasets/{DERIVED}.yaml:14: {DERIVED}: deterministic-queries: non-deterministic"
        f" rand() in `query` (line 2): {DEFAULT_DETERMINISM.message}"
    )


def test_a_non_deterministic_step_of_queries_is_placed_at_its_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    events = derivative_events([ROOT], "x").replace(
        "        query: |\n          x\n",
        "        queries:\n"
        "          - alias: picked\n"
        "            query: |\n"
        "              SELECT event_time, a\n"
        "              FROM `org.example.source` TABLESAMPLE (50 PERCENT)\n"
        "          - query: SELECT * FROM picked\n",
    )
    repo = GitOpsRepo.create(tmp_path)
    repo.write(ROOT, manifest(ROOT, "Root", root_events()))
    repo.write(DERIVED, manifest(DERIVED, "Derivative", events))
    verdicts, _ = determinism_verdicts(repo)
    manifest_file = tmp_path / "datasets" / f"{DERIVED}.yaml"
    assert [(v.message.partition(":")[0], v.location) for v in verdicts] == [
        (
            "non-deterministic TABLESAMPLE in step `picked` (line 2)",
            Location(str(manifest_file), 16),
        )
    ]
    assert "TABLESAMPLE" in manifest_file.read_text().splitlines()[15]


def test_a_policy_may_lower_the_rule_to_a_warning(spark: SparkSession, tmp_path: Path) -> None:
    repo = repo_with(
        tmp_path, "SELECT event_time, a, current_timestamp() AS seen FROM `org.example.source`"
    )
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "determinism.yaml").write_text(
        "rules:\n"
        "  - id: clock-allowed\n"
        "    severity: warning\n"
        "    message: this dataset cannot be verified\n"
        "    deterministic_queries: required\n"
    )
    plan = make_plan(repo.config, PlanRequest())
    assert [(v.policy, v.severity, v.message) for v in plan.verdicts] == [
        (
            "clock-allowed",
            Severity.WARNING,
            "non-deterministic current_timestamp() in `query` (line 1):"
            " this dataset cannot be verified",
        )
    ]
    assert not plan.has_errors


def test_a_deterministic_transform_has_no_determinism_verdict(
    spark: SparkSession, tmp_path: Path
) -> None:
    repo = repo_with(tmp_path, "SELECT event_time, a, upper(b) AS b FROM `org.example.source`")
    assert determinism_verdicts(repo) == ([], False)


def test_the_rule_takes_only_required(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(
        "rules:\n  - id: d\n    severity: error\n    message: m\n    deterministic_queries: maybe\n"
    )
    with pytest.raises(PolicyError) as refused:
        load_policies(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path / 'd.yaml'}:5: d: deterministic_queries takes one value: required"
    )


def test_reconcile_sql_allows_non_deterministic_functions(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Ad-hoc reading commits nothing, and sampling or timing a look at the data is fair."""
    (tmp_path / "odf").mkdir()
    query = "SELECT rand(7) BETWEEN 0 AND 1 AS r, current_date() IS NOT NULL AS d"
    result = run_sql(spark, OdfRepository(tmp_path / "odf"), query)
    assert result.table.to_pylist() == [{"r": True, "d": True}]
