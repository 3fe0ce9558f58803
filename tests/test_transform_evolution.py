"""Transforms over time: multi-step queries, a query changed mid-history, and results
that do not depend on how Spark partitioned the work."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, events, manifest, rows, slices
from pyspark.sql import SparkSession
from transform_repo import PRICES, STOCK, VOCAB, derivative, make_repo, run, ts

from reconciler.apply.outcome import Status
from reconciler.inspection.verify import verify_dataset
from reconciler.odf import models

MULTI_STEP = f"""
    - kind: SetTransform
      inputs: [{{datasetRef: {STOCK}, alias: stock}}, {{datasetRef: {PRICES}, alias: prices}}]
      transform:
        kind: Sql
        engine: spark
        queries:
          - alias: priced
            query: SELECT s.day, s.id, s.qty * p.price AS value FROM stock s JOIN prices p ON s.id = p.id
          - query: SELECT day, count(*) AS items, sum(value) AS total FROM priced GROUP BY day
    {VOCAB}
"""


def write_days(repo: GitOpsRepo, n: int, stock: str, prices: str) -> None:
    (repo.root / "stock" / f"{n}.csv").write_text("day,id,qty\n" + stock)
    (repo.root / "prices" / f"{n}.csv").write_text("day,id,price\n" + prices)


def test_a_multi_step_query_is_normalized_and_runs_its_steps_in_order(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(tmp_path)
    repo.write("org.example.totals", manifest("org.example.totals", "Derivative", MULTI_STEP))
    write_days(
        repo,
        1,
        "2020-01-01,a,2\n2020-01-01,b,3\n2020-01-02,c,1\n",
        "2020-01-01,a,1.5\n2020-01-01,b,2.0\n2020-01-02,c,1.5\n",
    )
    assert run(repo, "2026-01-01T00:00:00Z")["org.example.totals"] == (Status.CREATED, 2)

    totals = repo.odf.dataset("org.example.totals")
    (set_transform,) = [e for e in events(totals) if isinstance(e, models.SetTransform)]
    assert set_transform.transform.query is None
    assert [(q.alias, q.query) for q in set_transform.transform.queries or []] == [
        (
            "priced",
            "SELECT s.day, s.id, s.qty * p.price AS value FROM stock s JOIN prices p ON s.id = p.id",
        ),
        (None, "SELECT day, count(*) AS items, sum(value) AS total FROM priced GROUP BY day"),
    ]
    ids = repo.odf.names_by_id()
    assert [i.dataset_ref for i in set_transform.inputs] == [
        str(repo.odf.dataset(STOCK).state().dataset_id),
        str(repo.odf.dataset(PRICES).state().dataset_id),
    ]
    assert [i.alias for i in set_transform.inputs] == ["stock", "prices"]
    (table,) = slices(totals)
    assert rows(table, "system_time") == [
        (0, 0, "2020-01-01", 2, 9.0),
        (1, 0, "2020-01-02", 1, 1.5),
    ]
    assert verify_dataset(repo.odf, "org.example.totals", ids, lambda: spark).replayed == 1


def test_a_changed_query_continues_from_where_the_old_one_stopped(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(tmp_path)
    name = "org.example.scaled"
    derivative(repo, name, [STOCK], "SELECT day, id, qty * 10 AS qty_x FROM `org.example.stock`")
    (repo.root / "stock" / "1.csv").write_text("day,id,qty\n2020-01-01,a,1\n2020-01-01,b,2\n")
    assert run(repo, "2026-01-01T00:00:00Z")[name] == (Status.CREATED, 2)

    derivative(repo, name, [STOCK], "SELECT day, id, qty * 100 AS qty_x FROM `org.example.stock`")
    plan = repo.plan()
    (change,) = [d for d in plan.datasets if d.name == name]
    assert change.action.value == "update"
    (repo.root / "stock" / "2.csv").write_text(
        "day,id,qty\n2020-01-01,a,1\n2020-01-01,b,2\n2020-01-02,c,5\n"
    )
    assert run(repo, "2026-01-02T00:00:00Z")[name] == (Status.UPDATED, 1)

    scaled = repo.odf.dataset(name)
    kinds = [type(e).__name__ for e in events(scaled)][-3:]
    assert kinds == ["ExecuteTransform", "SetTransform", "ExecuteTransform"]
    first, second = [e for e in events(scaled) if isinstance(e, models.ExecuteTransform)]
    assert [(q.prev_offset, q.new_offset) for q in first.query_inputs] == [(None, 1)]
    # The new query reads only what the old one had not consumed: offset 2, product c.
    assert [(q.prev_offset, q.new_offset) for q in second.query_inputs] == [(1, 2)]
    assert [rows(t, "system_time") for t in slices(scaled)] == [
        [(0, 0, "2020-01-01", "a", 10), (1, 0, "2020-01-01", "b", 20)],
        [(2, 0, "2020-01-02", "c", 500)],
    ]
    # Each run replays with the query that was in force when it ran.
    verdict = verify_dataset(repo.odf, name, repo.odf.names_by_id(), lambda: spark)
    assert (verdict.valid, verdict.replayed) == (True, 2), verdict.problems


JOIN = (
    "SELECT s.day, s.id, s.qty, p.price FROM `org.example.stock` AS s "
    "JOIN `org.example.prices` AS p ON s.id = p.id"
)
AGGREGATE = "SELECT day, id, sum(qty) AS qty FROM `org.example.joined` GROUP BY day, id"


def build(root: Path) -> GitOpsRepo:
    repo = make_repo(root)
    derivative(repo, "org.example.joined", [STOCK, PRICES], JOIN)
    derivative(repo, "org.example.summed", ["org.example.joined"], AGGREGATE)
    ids = "qwertyuiopasdfghjklz"
    write_days(
        repo,
        1,
        "".join(f"2020-01-0{1 + i % 3},{c},{i}\n" for i, c in enumerate(ids)),
        "".join(f"2020-01-0{1 + i % 3},{c},{i / 4}\n" for i, c in enumerate(reversed(ids))),
    )
    assert run(repo, "2026-01-01T00:00:00Z")["org.example.summed"][0] is Status.CREATED
    return repo


def data_hashes(repo: GitOpsRepo, name: str) -> list[tuple[str, int, int]]:
    found = []
    for e in events(repo.odf.dataset(name)):
        if isinstance(e, models.ExecuteTransform) and e.new_data is not None:
            interval = e.new_data.offset_interval
            found.append((e.new_data.logical_hash, interval.start, interval.end))
    return found


def test_joins_and_aggregations_give_the_same_hashes_however_spark_partitions_them(
    tmp_path: Path, spark: SparkSession
) -> None:
    first = build(tmp_path / "first")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        second = build(tmp_path / "second")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)

    for name in ("org.example.joined", "org.example.summed"):
        assert data_hashes(first, name) == data_hashes(second, name), name
    # Without an ORDER BY, a join's rows come in event time order, then by column.
    (joined,) = slices(first.odf.dataset("org.example.joined"))
    keys = [(r[2], r[3]) for r in rows(joined, "system_time")]
    assert keys == sorted(keys)
    assert len(keys) == 20
    # A query's own ORDER BY decides, even against event time.
    derivative(
        first,
        "org.example.ordered",
        [STOCK],
        "SELECT day, id, qty FROM `org.example.stock` ORDER BY qty DESC",
    )
    assert run(first, "2026-01-02T00:00:00Z")["org.example.ordered"] == (Status.CREATED, 20)
    (ordered,) = slices(first.odf.dataset("org.example.ordered"))
    assert [r[4] for r in rows(ordered, "system_time")] == list(range(19, -1, -1))


@pytest.mark.parametrize("partitions", ["1", "5"])
def test_verify_replays_a_run_made_with_other_shuffle_partitions(
    tmp_path: Path, spark: SparkSession, partitions: str
) -> None:
    repo = build(tmp_path)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    try:
        ids = repo.odf.names_by_id()
        verdicts = [
            verify_dataset(repo.odf, n, ids, lambda: spark)
            for n in ("org.example.joined", "org.example.summed")
        ]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert [(v.valid, v.replayed, v.problems) for v in verdicts] == [(True, 1, []), (True, 1, [])]
    assert (
        ts("2020-01-03T00:00:00Z")
        == events(repo.odf.dataset("org.example.summed"))[-1].new_watermark
    )


def test_a_derivative_that_stops_reading_an_input_is_a_breaking_change(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Pointed at another input (a renamed one is a new dataset), it read the new
    input's whole history beside the old one's already in its output: every row twice,
    and classed only needs-validation. It is breaking now, so only a recreate does it."""
    repo = make_repo(tmp_path)
    name = "org.example.ids"
    derivative(repo, name, [STOCK], "SELECT day, id FROM `org.example.stock`")
    (repo.root / "stock" / "1.csv").write_text("day,id,qty\n2020-01-01,a,1\n")
    assert run(repo, "2026-01-01T00:00:00Z")[name] == (Status.CREATED, 1)

    derivative(repo, name, [PRICES], "SELECT day, id FROM `org.example.prices`")
    (change,) = [d for d in repo.plan().datasets if d.name == name]
    assert change.change_class.value == "breaking"
    (transform,) = [e for e in change.events if e.kind == "SetTransform"]
    assert transform.reasons == (
        "stops reading org.example.stock, whose data this dataset holds already: only a"
        " recreate makes its data the new inputs' alone",
    )
    derivative(repo, name, [STOCK, PRICES], JOIN)
    (added,) = [d for d in repo.plan().datasets if d.name == name]
    assert added.change_class.value == "needs-validation"
