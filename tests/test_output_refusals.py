"""Query outputs a slice cannot hold are refused by the plan, with the reason, and by the
run with the same words before it writes anything (``transform.output_rules``).

Each bad query is a derivative of its own in one repository, planned once: the plan
reports every dataset's problem at once. The same repository's chains, their metadata
appended without the plan's query check (as a plan made before these rules would have
left them), are then run, and each run refuses before its chain moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from conftest_spark import TEST_SETTINGS
from gitops_repo import T1, GitOpsRepo, derivative_events, manifest, root_events

from reconciler.apply.outcome import Status
from reconciler.apply.run import apply_plan
from reconciler.engine.session import get_spark
from reconciler.ingest.pull import IngestContext
from reconciler.plan.model import Plan, Severity
from reconciler.planning.compose import PlanRequest, make_plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = "org.types.t"
PREPROCESSED = "org.types.pre"
FINE = "org.types.fine"

NULL_WHY = (
    "Arrow's null type is not hashed by arrow-digest, and a column of no type cannot be"
    " read back as data; cast it to the type it stands for, as in CAST(NULL AS STRING) or"
    " CAST(array() AS ARRAY<STRING>)"
)
INTERVAL_WHY = (
    "an ODF slice has no interval type (Spark gives Arrow a day-time interval as a"
    " duration, which neither the chain's schema nor arrow-digest takes, and the other"
    " intervals not at all); give it as a number of one unit (seconds, days, months) or"
    " as a STRING"
)
MAP_WHY = (
    "the chain's schema cannot encode an Arrow map and arrow-digest cannot hash one; give"
    " it as a STRING (to_json) or as typed columns"
)
LISTED_STRUCT_WHY = (
    "arrow-digest hashes a STRUCT only as a column of the record, not as an item of a"
    " list; give it as a STRING (to_json) or as one array per field"
)
CASE_APART = "which Spark (spark.sql.caseSensitive=false) cannot hold apart"


@dataclass(frozen=True)
class Case:
    name: str  # the derivative's name, after ``org.types.``
    select: str  # what its query selects besides event_time
    refused: str  # the plan's query error and the run's TransformError, word for word


CASES = [
    Case(
        "void",
        "NULL AS n",
        f"column 'n' is or holds a NULL of no type (void), which a slice cannot hold: {NULL_WHY}",
    ),
    Case(
        "void-in-struct",
        "named_struct('x', NULL) AS s",
        "column 's' is or holds a NULL of no type (struct<x:void>), which a slice cannot"
        f" hold: {NULL_WHY}",
    ),
    Case(
        "empty-array",
        "array() AS a",
        "column 'a' is or holds a NULL of no type (array<void>), which a slice cannot hold:"
        f" {NULL_WHY}",
    ),
    Case(
        "day-interval",
        "INTERVAL '1' DAY AS d",
        "column 'd' is or holds an INTERVAL (interval day), which a slice cannot hold:"
        f" {INTERVAL_WHY}",
    ),
    Case(
        "month-interval",
        "INTERVAL '1' MONTH AS m",
        "column 'm' is or holds an INTERVAL (interval month), which a slice cannot hold:"
        f" {INTERVAL_WHY}",
    ),
    Case(
        "calendar-interval",
        "make_interval(0, 0, 0, 1, 2, 0, 0) AS c",
        f"column 'c' is or holds an INTERVAL (interval), which a slice cannot hold: {INTERVAL_WHY}",
    ),
    Case(
        "map",
        "map(product, 1) AS m",
        f"column 'm' is or holds a MAP (map<string,int>), which a slice cannot hold: {MAP_WHY}",
    ),
    Case(
        "map-in-array",
        "array(named_struct('tags', map(product, qty))) AS l",
        "column 'l' is or holds a MAP (array<struct<tags:map<string,bigint>>>), which a"
        f" slice cannot hold: {MAP_WHY}",
    ),
    Case(
        "struct-in-array",
        "array(named_struct('q', qty)) AS l",
        "column 'l' holds a STRUCT inside an ARRAY (array<struct<q:bigint>>), which a slice"
        f" cannot hold: {LISTED_STRUCT_WHY}",
    ),
    Case(
        "same-name",
        "product, product",
        "the query's output has the column 'product' twice, and a slice's column names must"
        " be unique; rename one of them with AS",
    ),
    Case(
        "same-name-but-case",
        "product, qty AS PRODUCT",
        f"the query's output has columns 'product' and 'PRODUCT', which differ only in case"
        f" and {CASE_APART}; rename one of them with AS",
    ),
    Case(
        "offset",
        "1 AS offset",
        "the query's output has a column 'offset', a system column's name: the writer adds"
        " that column to every slice; rename it in the query",
    ),
    Case(
        "upper-offset",
        "1 AS OFFSET",
        "the query's output has a column 'OFFSET', which differs only in case from the system"
        " column 'offset' that the writer adds to every slice, and which Spark"
        " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the query",
    ),
    Case(
        "upper-op",
        "1 AS OP",
        "the query's output has a column 'OP', which differs only in case from the system"
        " column 'op' that the writer adds to every slice, and which Spark"
        " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the query",
    ),
    Case(
        "mixed-system-time",
        "product AS System_Time",
        "the query's output has a column 'System_Time', which differs only in case from the"
        " system column 'system_time' that the writer adds to every slice, and which Spark"
        " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the query",
    ),
]

# Names like the types a slice cannot hold, as struct fields, are only names.
FINE_SELECT = "named_struct('map', qty, 'variant', product, 'void', 1) AS s, 1 AS op"

PREPROCESS = (
    "SELECT event_time, qty AS OFFSET, NULL AS n, map(product, qty) AS m,"
    " INTERVAL '2' HOUR AS h, product, product AS PRODUCT FROM input"
)


def _preprocessed_root() -> str:
    return manifest(
        PREPROCESSED,
        "Root",
        root_events(schema="[event_time TIMESTAMP, product STRING, qty BIGINT]").replace(
            "      merge:",
            f'      preprocess: {{kind: Sql, engine: spark, query: "{PREPROCESS}"}}\n      merge:',
        ),
    )


@dataclass(frozen=True)
class Planned:
    repo: GitOpsRepo
    plan: Plan


@pytest.fixture(scope="module")
def planned(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Planned:
    """The repository of every case, planned once before anything is applied."""
    repo = GitOpsRepo.create(tmp_path_factory.mktemp("refusals"))
    schema = "[event_time TIMESTAMP, product STRING, qty BIGINT]"
    repo.write(ROOT, manifest(ROOT, "Root", root_events(schema=schema)))
    for name, select in [*((f"org.types.{c.name}", c.select) for c in CASES), (FINE, FINE_SELECT)]:
        query = f"SELECT event_time, {select}\nFROM `{ROOT}`"
        repo.write(name, manifest(name, "Derivative", derivative_events([ROOT], query)))
    repo.write(PREPROCESSED, _preprocessed_root())
    (repo.root / "sources").mkdir()
    (repo.root / "sources" / "1.csv").write_text(
        "event_time,product,qty\n2026-01-01T00:00:00Z,tea,3\n"
    )
    return Planned(repo, make_plan(repo.config, PlanRequest()))


def _errors(plan: Plan, dataset: str) -> list[str]:
    return [
        p.message for p in plan.problems if p.dataset == dataset and p.severity is Severity.ERROR
    ]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_plan_refuses_an_output_a_slice_cannot_hold(planned: Planned, case: Case) -> None:
    name = f"org.types.{case.name}"
    (ds,) = [d for d in planned.plan.datasets if d.name == name]
    assert ds.query is not None
    assert (ds.query.ok, ds.query.error, ds.query.step) == (False, case.refused, "output")
    assert _errors(planned.plan, name) == [f"query check failed: {case.refused}"]


def test_names_of_those_types_inside_a_struct_are_only_names(planned: Planned) -> None:
    (ds,) = [d for d in planned.plan.datasets if d.name == FINE]
    assert ds.query is not None and ds.query.ok, ds.query
    assert _errors(planned.plan, FINE) == []
    assert _errors(planned.plan, ROOT) == []


def test_a_preprocess_output_is_held_to_the_same_rules(planned: Planned) -> None:
    assert _errors(planned.plan, PREPROCESSED) == [
        "the preprocess query gives a column `OFFSET`, which differs only in case from the"
        " system column `offset` and which Spark (spark.sql.caseSensitive=false) cannot hold"
        " apart from it; rename it in the query",
        f"the preprocess query's column 'n' is or holds a NULL of no type (void), which a"
        f" slice cannot hold: {NULL_WHY}",
        f"the preprocess query's column 'm' is or holds a MAP (map<string,bigint>), which a"
        f" slice cannot hold: {MAP_WHY}",
        "the preprocess query's column 'h' is or holds an INTERVAL (interval hour), which a"
        f" slice cannot hold: {INTERVAL_WHY}",
        f"the preprocess query's output has columns 'product' and 'PRODUCT', which differ"
        " only in case"
        f" and {CASE_APART}; rename one of them with AS",
    ]


def test_the_run_refuses_them_in_the_plan_s_words_and_writes_nothing(planned: Planned) -> None:
    """Chains appended without the query check (a plan made before these rules): the run
    refuses each output before writing, and the chain's head stays where it was."""
    repo = planned.repo
    repo.apply()  # the metadata alone, no query analysed
    names = [ROOT, FINE, PREPROCESSED, *(f"org.types.{c.name}" for c in CASES)]
    heads = {name: repo.odf.dataset(name).state().head for name in names}
    context = IngestContext(
        spark=lambda: get_spark(TEST_SETTINGS), base_dir=repo.root, env={}, system_time=T1
    )
    unchecked = repo.plan()  # no validator: nothing stands between the query and the run
    outcomes = {o.dataset: o for o in apply_plan(repo.odf, unchecked, T1, context, selected=names)}
    assert (outcomes[ROOT].status, outcomes[ROOT].rows) == (Status.UPDATED, 1)
    assert (outcomes[FINE].status, outcomes[FINE].rows) == (Status.UPDATED, 1)
    # a root's preprocess output, in the words of the plan's first error for it
    assert (outcomes[PREPROCESSED].status, outcomes[PREPROCESSED].message) == (
        Status.FAILED,
        "read failed: BadInputSchemaError: the preprocess query gives a column `OFFSET`,"
        " which differs only in case from the system column `offset` and which Spark"
        " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the query",
    )
    assert repo.odf.dataset(PREPROCESSED).state().data_schema is None
    for case in CASES:
        name = f"org.types.{case.name}"
        assert (outcomes[name].status, outcomes[name].message) == (
            Status.FAILED,
            f"transform failed: TransformError: {case.refused}",
        ), name
        dataset = repo.odf.dataset(name)
        assert dataset.state().head == heads[name], name
        assert dataset.state().data_schema is None, name
