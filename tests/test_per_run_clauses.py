"""The plan's note on a query whose GROUP BY, DISTINCT, join or window sees only one
run's new rows: the daily-sales example gave two rows for a day that spanned two runs,
and nothing in the plan said a query means that here."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events

from reconciler.plan.per_run_clauses import per_run_clauses, per_run_note


@pytest.mark.parametrize(
    ("query", "clauses"),
    [
        ("SELECT day, count(*) FROM orders GROUP BY day", ["GROUP BY"]),
        ("select distinct product from orders", ["DISTINCT"]),
        (
            "SELECT a.k, row_number() OVER (PARTITION BY a.k ORDER BY b.t) AS n\n"
            "FROM a LEFT JOIN b ON a.k = b.k",
            ["JOIN", "a window (OVER)"],
        ),
        ("SELECT 'group by' AS x, `join` -- DISTINCT\nFROM t /* OVER ( */", []),
        ("SELECT a, b FROM orders WHERE a > 1", []),
    ],
    ids=["group-by", "distinct", "join-and-window", "in-strings-names-comments", "a-map"],
)
def test_the_clauses_that_see_one_run_are_found_outside_strings_and_comments(
    query: str, clauses: list[str]
) -> None:
    assert per_run_clauses(query) == clauses


def test_a_new_aggregating_query_carries_the_note_in_the_plan(tmp_path: Path) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    query = "SELECT event_time, b, count(*) AS n FROM `org.example.a` GROUP BY event_time, b"
    events = derivative_events(["org.example.a"], query)
    repo.write("org.example.b", manifest("org.example.b", "Derivative", events))
    (reader,) = [d for d in repo.plan().datasets if d.name == "org.example.b"]
    (transform,) = [e for e in reader.events if e.kind == "SetTransform"]
    assert transform.reasons == (
        "a new query: the engine analyses it",
        "each run reads only the rows its inputs gained since the last run, so its GROUP BY"
        " sees those rows, not the whole history (README: Transforms)",
    )
    assert per_run_note(["SELECT a FROM t"]) is None
