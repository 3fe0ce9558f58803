"""A derivative over a join, or over rows its query spreads with ``DISTRIBUTE BY``, gives
the same rows and logical hash whatever Spark conf the repository runs it under
(``transform.one_task``): its floating-point sums are each a left-to-right fold in one
fixed order, which the tests below compute in Python.

Without it, a join of small inputs was a broadcast hash join under Spark's default
threshold and a sort-merge join without broadcasts, whose rows meet the aggregate in
another order, and ``DISTRIBUTE BY`` spread the rows over ``shuffle.partitions``
partitions whose partial sums were then merged."""

from __future__ import annotations

from itertools import accumulate, count, repeat
from pathlib import Path
from typing import Any

from gitops_repo import GitOpsRepo, manifest, root_events, rows, slices
from pyspark.sql import SparkSession
from transform_repo import VOCAB, derivative, run

from reconciler.apply.outcome import Status
from reconciler.inspection.verify import verify_dataset
from reconciler.transform.one_task import ONE_TASK_CONF, one_task, session_conf

ORDERS = "org.example.orders"
RATES = "org.example.rates"
SKUS = 12
ORDERS_PER_SLICE = 150
SLICES = 3

TOTALS = (
    "SELECT o.day, count(*) AS n, sum(o.qty * r.rate) AS total, avg(o.qty * r.rate) AS mean\n"
    f"FROM `{ORDERS}` AS o JOIN `{RATES}` AS r ON o.sku = r.sku\n"
    "GROUP BY o.day"
)
"""An aggregate over a join, grouped by another column than the join's."""
RUNNING = (
    "SELECT o.day, o.sku, o.qty * r.rate AS v,\n"
    "  sum(o.qty * r.rate) OVER (PARTITION BY o.day ORDER BY o.sku\n"
    "    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,\n"
    "  row_number() OVER (PARTITION BY o.day ORDER BY o.sku) AS rn\n"
    f"FROM `{ORDERS}` AS o JOIN `{RATES}` AS r ON o.sku = r.sku"
)
"""A window over a join, its order within a day and sku left to the rows' own order."""
SPREAD = (
    f"SELECT day, sum(qty) AS total FROM (SELECT * FROM `{ORDERS}` DISTRIBUTE BY sku)\nGROUP BY day"
)
"""An aggregate over rows the query spreads over shuffle partitions itself."""

SETTINGS: list[dict[str, str]] = [
    {"spark.sql.autoBroadcastJoinThreshold": "-1"},
    {"spark.sql.shuffle.partitions": "1", "spark.sql.leafNodeDefaultParallelism": "1"},
    {
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
    },
    {
        "spark.sql.shuffle.partitions": "7",
        "spark.sql.leafNodeDefaultParallelism": "8",
        "spark.sql.files.maxPartitionBytes": "2048",
        "spark.sql.files.openCostInBytes": "0",
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "5",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    },
]
"""Settings a replay runs under, after a first run under the test session's (two shuffle
partitions, joins of inputs this small broadcast): no broadcasts; one core's worth of
everything; a few shuffle partitions; many small splits, shuffle partitions and leaf
partitions, and adaptive execution starting shuffles at yet another count."""


def value(i: int) -> float:
    """Never zero, from 1e-8 to 1e8 in size, of both signs: sums of such values depend
    on the order of their additions in the last bits."""
    return ((i * 7919) % 1000 - 499.5) * 10.0 ** ((i * 31) % 17 - 8)


def make_repo(root: Path) -> GitOpsRepo:
    """Two Append roots, orders and rates, each with ``SLICES`` slices; every slice of
    rates has one rate per sku, so each order joins ``SLICES`` rates."""
    repo = GitOpsRepo.create(root)
    for name, folder, column in ((ORDERS, "orders", "qty"), (RATES, "rates", "rate")):
        events = root_events(schema=f"[day DATE, sku STRING, {column} DOUBLE]", extra=VOCAB)
        repo.write(name, manifest(name, "Root", events.replace("sources/", f"{folder}/")))
        (root / folder).mkdir()
    for k in range(SLICES):
        first = k * ORDERS_PER_SLICE
        orders = [
            f"2020-01-0{1 + i % 3},s{(i * 5) % SKUS},{value(i)!r}\n"
            for i in range(first, first + ORDERS_PER_SLICE)
        ]
        rates = [f"2020-01-01,s{j},{value(10_000 + k * SKUS + j)!r}\n" for j in range(SKUS)]
        (root / "orders" / f"{k}.csv").write_text("day,sku,qty\n" + "".join(orders))
        (root / "rates" / f"{k}.csv").write_text("day,sku,rate\n" + "".join(rates))
        outcome = run(repo, f"2026-01-0{1 + k}T00:00:00Z")
        wrote = Status.UPDATED if k else Status.CREATED
        assert outcome[ORDERS] == (wrote, ORDERS_PER_SLICE)
        assert outcome[RATES] == (wrote, SKUS)
    return repo


def stored(repo: GitOpsRepo, name: str) -> list[tuple[Any, ...]]:
    """A root's rows in offset order, without its system columns."""
    return [
        r for t in slices(repo.odf.dataset(name)) for r in rows(t, "offset", "op", "system_time")
    ]


def joined(orders: list[tuple[Any, ...]], rates: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``(day, sku, qty * rate)`` in the order a sort-merge join in one task emits them:
    sku by sku, each order in offset order with each of its sku's rates in offset order."""
    return [
        (day, sku, qty * rate)
        for sku in sorted({o[1] for o in orders})
        for day, order_sku, qty in orders
        if order_sku == sku
        for _, rate_sku, rate in rates
        if rate_sku == sku
    ]


def folds(pairs: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """TOTALS' and RUNNING's rows over ``pairs``, each day's values added left to right
    (``accumulate``: plain ``+``, where ``sum`` may compensate); RUNNING's in the order
    the slice stores them, sorted by every column."""
    totals, running = [], []
    for day in sorted({p[0] for p in pairs}):
        skus, values = zip(*[(sku, v) for d, sku, v in pairs if d == day], strict=True)
        sums = list(accumulate(values))
        totals.append((day, len(sums), sums[-1], sums[-1] / len(sums)))
        running += zip(repeat(day), skus, values, sums, count(1))
    return totals, sorted(running)


def test_a_float_aggregate_and_window_over_a_join_are_the_same_under_any_spark_conf(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = make_repo(tmp_path)
    both = [ORDERS, RATES]
    queries = {
        "org.example.totals": (both, TOTALS),
        "org.example.running": (both, RUNNING),
        "org.example.spread": ([ORDERS], SPREAD),
    }
    for name, (inputs, query) in queries.items():
        derivative(repo, name, inputs, query)
    outcome = run(repo, "2026-01-09T00:00:00Z")
    orders = stored(repo, ORDERS)
    pairs = joined(orders, stored(repo, RATES))
    assert outcome["org.example.totals"] == (Status.CREATED, 3)
    assert outcome["org.example.running"] == (Status.CREATED, len(pairs))
    assert outcome["org.example.spread"] == (Status.CREATED, 3)

    totals, running = folds(pairs)
    # Spread over partitions and gathered again: each day's quantities still added in
    # offset order, as the one task that reads them does.
    spread = [
        (day, list(accumulate(o[2] for o in orders if o[0] == day))[-1])
        for day in sorted({o[0] for o in orders})
    ]
    for name, expected in zip(queries, (totals, running, spread), strict=True):
        (found,) = slices(repo.odf.dataset(name))
        assert rows(found, "offset", "op", "system_time") == expected, name

    # A replay recomputes the slice and compares its offsets and logical hash.
    ids = repo.odf.names_by_id()
    for conf in SETTINGS:
        with session_conf(spark, conf):
            for name in queries:
                verdict = verify_dataset(repo.odf, name, ids, lambda: spark)
                assert (verdict.valid, verdict.replayed) == (True, 1), (conf, verdict.problems)


def test_one_task_puts_the_session_conf_back(spark: SparkSession) -> None:
    """The repository's settings hold for everything but the transform: each key is set
    back, or unset when it was not set."""
    with session_conf(spark, {"spark.sql.shuffle.partitions": "3"}):
        assert "spark.sql.leafNodeDefaultParallelism" not in spark.conf.getAll
        before = spark.conf.getAll
        with one_task(spark):
            assert {k: spark.conf.get(k) for k in ONE_TASK_CONF} == ONE_TASK_CONF
        assert spark.conf.getAll == before
