"""A query reading a Snapshot's change log as if every row were new is warned about.

Found in journey 41: a join of sales to a Snapshot of stores counted a sale twice, once
with the store's old city (its correct-from row, op 2) and once with its new one (op 3),
both written with op 0; and a sale arriving in a run with no new store row was dropped,
the run saying only "updated: 1 block, 0 records". The plan now warns beside such a
query, and the run line says what the query gave from how many rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from gitops_repo import (
    GitOpsRepo,
    derivative_events,
    manifest,
    reconcile,
    root_events,
    rows,
    slices,
)

from reconciler.commands.progress import describe
from reconciler.odf import Timestamp
from reconciler.plan.model import Plan, Severity

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STORES = "org.example.stores"
SALES = "org.example.sales"
REPORT = "org.example.report"
JOIN = (
    "SELECT s.event_time, s.a AS sale, t.b AS city\n"
    f"FROM `{SALES}` AS s JOIN `{STORES}` AS t ON s.a = t.a"
)


def warning(inputs: str, column: str = "op") -> str:
    return (
        f"reads {inputs}, a change log (a row changed is two rows, its old values with"
        f" {column} 2 and its new ones with {column} 3; a row gone is one with {column} 1),"
        f" but its query never names `{column}`: every such row is read as a new one, so a"
        " join matches a changed row twice and a sum counts what was retracted. Keep"
        f" `{column} IN (0, 3)` for rows as they are now, or select `{column}` to pass the"
        " changes on (README: Transforms)"
    )


def root(repo: GitOpsRepo, name: str, merge: str, extra: str = "") -> None:
    events = root_events(merge=merge, extra=extra).replace("sources/*.csv", f"sources/{name}/*")
    repo.write(name, manifest(name, "Root", events))


def derivative(repo: GitOpsRepo, name: str, inputs: list[str], query: str) -> None:
    repo.write(name, manifest(name, "Derivative", derivative_events(inputs, query)))


def warnings(plan: Plan) -> list[tuple[str | None, str, str | None, str]]:
    return [
        (p.dataset, str(p.location), p.field, p.message)
        for p in plan.problems
        if p.severity is Severity.WARNING and "change log" in p.message
    ]


@pytest.fixture
def repo(tmp_path: Path) -> GitOpsRepo:
    repo = GitOpsRepo.create(tmp_path / "repo")
    root(repo, STORES, "{kind: Snapshot, primaryKey: [a]}")
    root(repo, SALES, "{kind: Append}")
    return repo


def test_a_join_over_a_snapshot_that_never_names_op_is_warned_at_its_transform(
    repo: GitOpsRepo,
) -> None:
    derivative(repo, REPORT, [SALES, STORES], JOIN)
    where = repo.root / "datasets" / f"{REPORT}.yaml"
    assert warnings(repo.plan()) == [
        (REPORT, f"{where}:12:16", "content.metadata[0].transform.query", warning(STORES))
    ]


@pytest.mark.parametrize(
    "query",
    [
        f"{JOIN} WHERE t.op IN (0, 3)",
        f"{JOIN} AND t.`op` <> 1",
        f"SELECT op, event_time, a, b FROM `{STORES}`",
        f"SELECT * FROM `{STORES}` WHERE a > 1",
        f"SELECT s.* FROM `{STORES}` AS s",
    ],
    ids=["filtered", "quoted", "selected", "passed-through", "passed-through-qualified"],
)
def test_a_query_naming_op_or_passing_every_column_on_is_not_warned(
    repo: GitOpsRepo, query: str
) -> None:
    derivative(repo, REPORT, [SALES, STORES], query)
    assert warnings(repo.plan()) == []


@pytest.mark.parametrize(
    "query",
    [
        f"{JOIN} -- keep op IN (0, 3)",
        f"{JOIN} WHERE t.b <> 'op'",
        f"{JOIN} WHERE t.b <> 'x' AND s.opening IS NULL",
        f"SELECT *, count(*) OVER (PARTITION BY a) AS n FROM `{STORES}`",
    ],
    ids=["in-a-comment", "in-a-string", "a-longer-name", "a-star-with-a-window"],
)
def test_op_only_in_a_comment_or_a_string_or_a_star_that_combines_rows_is_warned(
    repo: GitOpsRepo, query: str
) -> None:
    derivative(repo, REPORT, [SALES, STORES], query)
    assert [w[3] for w in warnings(repo.plan())] == [warning(STORES)]


def test_a_reader_of_a_derivative_that_passes_the_log_on_is_warned_naming_that_one(
    repo: GitOpsRepo,
) -> None:
    middle = "org.example.stores.big"
    derivative(repo, middle, [STORES], f"SELECT * FROM `{STORES}` WHERE a > 1")
    derivative(repo, REPORT, [middle], f"SELECT b, count(*) AS n FROM `{middle}` GROUP BY b")
    derivative(
        repo, "org.example.plain", [SALES], f"SELECT b, count(*) AS n FROM `{SALES}` GROUP BY b"
    )
    assert [(w[0], w[3]) for w in warnings(repo.plan())] == [(REPORT, warning(middle))]


def test_the_vocabularys_operation_column_is_the_one_named(repo: GitOpsRepo) -> None:
    root(
        repo,
        STORES,
        "{kind: Snapshot, primaryKey: [a]}",
        extra="- kind: SetVocab\n      operationTypeColumn: change",
    )
    derivative(repo, REPORT, [SALES, STORES], f"{JOIN} WHERE t.op = 0")
    assert [w[3] for w in warnings(repo.plan())] == [warning(STORES, "change")]
    derivative(repo, REPORT, [SALES, STORES], f"{JOIN} WHERE t.change IN (0, 3)")
    assert warnings(repo.plan()) == []


def test_an_unchanged_reader_is_warned_again_only_when_its_input_turns_into_a_log(
    repo: GitOpsRepo,
) -> None:
    root(repo, STORES, "{kind: Ledger, primaryKey: [a]}")
    derivative(repo, REPORT, [SALES, STORES], JOIN)
    assert warnings(repo.plan()) == []  # a Ledger's rows are all op 0
    repo.apply()
    root(repo, STORES, "{kind: Snapshot, primaryKey: [a]}")
    assert [w[3] for w in warnings(repo.plan())] == [warning(STORES)]
    repo.apply()
    assert warnings(repo.plan()) == []  # nothing changed: said once, in the change's plan


def test_a_run_whose_join_gives_no_rows_says_so_on_spark(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    """Each run joins only the rows its inputs gained in it (kamu's model): the second
    sale's store row came in the first run, so the second run's join gives nothing,
    and the line says from how many rows. The correction of store 1 (op 2 and 3) is
    matched twice by the third run's sale, as the plan's warning says it would be."""
    derivative(repo, REPORT, [SALES, STORES], JOIN)
    sources = repo.root / "sources"
    (sources / STORES).mkdir(parents=True)
    (sources / SALES).mkdir()
    (sources / STORES / "1.csv").write_text("a,b\n1,Bremen\n2,Kiel\n")
    (sources / SALES / "1.csv").write_text("a,b\n1,first\n")
    first = reconcile(repo.root, Timestamp.parse("2026-02-01T00:00:00Z"))
    (sources / SALES / "2.csv").write_text("a,b\n2,second\n")
    second = reconcile(repo.root, Timestamp.parse("2026-02-02T00:00:00Z"))
    (sources / STORES / "2.csv").write_text("a,b\n1,Hamburg\n2,Kiel\n")
    (sources / SALES / "3.csv").write_text("a,b\n1,third\n")
    third = reconcile(repo.root, Timestamp.parse("2026-02-03T00:00:00Z"))
    lines = [describe(o) for o in (*first, *second, *third) if o.dataset == REPORT]
    assert lines == [
        "created: 6 blocks (4 metadata), 1 record",
        "updated: 1 block, 0 records; the query gave no rows from 1 new input record: each"
        " run reads only the rows its inputs gained since the last one, so a JOIN matches"
        " rows that arrive in the same run (README: Transforms)",
        "updated: 1 block, 2 records",
    ]
    got = [rows(t, "system_time", "event_time") for t in slices(repo.odf.dataset(REPORT))]
    assert got == [
        [(0, 0, 1, "Bremen")],
        [(1, 0, 1, "Bremen"), (2, 0, 1, "Hamburg")],
    ]
