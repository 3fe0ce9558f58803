"""A root's preprocess query gives the same slice (rows, offsets, logical hash) whatever
Spark conf the ingest runs under (``ingest.preprocess.preprocessed``), while a map or
filter still reads the file in parallel.

Without it, the file was read in as many partitions as it split into and the query ran
under the repository's settings: an aggregate's groups came out in an order set by the
shuffle partitions, so groups with equal event times got other offsets, and its
floating-point sums other last digits, for another split size; an aggregate over a join
with a ``VALUES`` table folded its rows in another order with broadcasts than without.
"""

from __future__ import annotations

from functools import reduce
from itertools import accumulate
from operator import add
from pathlib import Path
from typing import Any

import pytest
from gitops_repo import events, rows, slices
from pyspark.sql import SparkSession

from reconciler.ingest.preprocess import preprocess, preprocessed
from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.ingest.readers import read_data
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import Dataset, OdfRepository
from reconciler.transform.one_task import ONE_TASK_CONF, session_conf
from reconciler.transform.ordering import row_wise

WHEN = Timestamp.parse("2026-01-01T00:00:00Z")
SCHEMA = ["event_time TIMESTAMP", "city STRING", "value DOUBLE"]
READ = models.ReadStepCsv(schema=SCHEMA, header=True)
VALUES = [1e16, 1.0, -1e16, 0.1, 3.3, -7e15, 2.5e-3]
"""Their sum depends on the order of the additions: 1e16 + 1.0 is 1e16."""
CITIES = "abcd"
FACTORS = {"a": ("north", 1.5), "b": ("south", 0.5), "c": ("north", 3.0), "d": ("south", 1.0)}
ROWS = 300


def file_rows() -> list[tuple[str, str, float]]:
    """``(event_time, city, value)`` in file order: three days, a few rows of each city
    and day at the same hour, so event times repeat."""
    return [
        (f"2020-01-0{1 + i * 7 % 3}T{i % 8:02d}:00:00Z", CITIES[i * 13 % 4], VALUES[i * 5 % 7])
        for i in range(ROWS)
    ]


def day(event_time: str) -> str:
    return event_time[:10] + "T00:00:00Z"


AGGREGATE = (
    "SELECT date_trunc('DAY', event_time) AS event_time, city, sum(value) AS total,"
    " count(*) AS n\nFROM input GROUP BY 1, 2"
)
JOINED = (
    "SELECT date_trunc('DAY', i.event_time) AS event_time, c.region, sum(i.value * c.f) AS total\n"
    "FROM input AS i JOIN (VALUES "
    + ", ".join(f"('{k}', '{r}', {f}D)" for k, (r, f) in FACTORS.items())
    + ") AS c(city, region, f)\nON i.city = c.city GROUP BY 1, 2"
)
WINDOW = (
    "SELECT event_time, city, value, sum(value) OVER (PARTITION BY city\n"
    "  ORDER BY date_trunc('DAY', event_time) ROWS UNBOUNDED PRECEDING) AS running\n"
    "FROM input"
)
MAP = "SELECT event_time, upper(city) AS city, value * 2 AS v FROM input WHERE value <> 0.1"


def expected() -> dict[str, list[tuple[Any, ...]]]:
    """Each query's rows, computed here, in the order the slice stores them.

    Sums are left-to-right folds (``reduce``, ``accumulate``: plain ``+``) in file order,
    as the one task that reads the file in order computes them; over the join, a
    sort-merge join's order: city by city, each city's rows in file order. The map keeps
    the file's order among rows of equal event times; every other output is sorted by
    event time, then every column."""
    read = file_rows()
    groups: dict[tuple[str, str], list[float]] = {}
    for event_time, city, value in read:
        groups.setdefault((day(event_time), city), []).append(value)
    aggregate = sorted((*key, reduce(add, v), len(v)) for key, v in groups.items())

    regions: dict[tuple[str, str], list[float]] = {}
    for event_time, city, value in sorted(read, key=lambda r: r[1]):
        region, factor = FACTORS[city]
        regions.setdefault((day(event_time), region), []).append(value * factor)
    joined = sorted((*key, reduce(add, v)) for key, v in regions.items())

    window = []
    for city in CITIES:
        mine = sorted((r for r in read if r[1] == city), key=lambda r: day(r[0]))
        sums = accumulate(r[2] for r in mine)
        window += [(*r, s) for r, s in zip(mine, sums, strict=True)]

    mapped = [(t, c.upper(), v * 2) for t, c, v in read if v != 0.1]
    return {
        "aggregate": aggregate,
        "joined": joined,
        "window": sorted(window),
        "map": sorted(mapped, key=lambda r: r[0]),
    }


QUERIES = {"aggregate": AGGREGATE, "joined": JOINED, "window": WINDOW, "map": MAP}

SPLIT = {"spark.sql.files.maxPartitionBytes": "2048", "spark.sql.files.openCostInBytes": "0"}
"""Splits of 2 KiB: the file (about 10 KiB) is read in several partitions."""
SETTINGS: list[dict[str, str]] = [
    {},
    {**SPLIT, "spark.sql.shuffle.partitions": "1", "spark.sql.leafNodeDefaultParallelism": "1"},
    {
        **SPLIT,
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
    },
    {
        **SPLIT,
        "spark.sql.files.maxPartitionBytes": "4096",
        "spark.sql.shuffle.partitions": "7",
        "spark.sql.leafNodeDefaultParallelism": "8",
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "5",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    },
]
"""The test session's settings (the file in one split, two shuffle partitions, joins
with small tables broadcast), then small splits with one core's worth of everything; a
few shuffle partitions and no broadcast; many leaf and shuffle partitions, adaptive
execution starting shuffles at yet another count."""


def write_file(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "1.csv"
    text = "".join(f"{t},{c},{v!r}\n" for t, c, v in file_rows())
    path.write_text("event_time,city,value\n" + text)
    return path


def root(repo: OdfRepository, name: str, inbox: Path, query: str) -> Dataset:
    """A new Append root reading ``inbox/*.csv`` through ``query``."""
    dataset = repo.dataset(name)
    dataset_id, _ = DatasetId.generate()
    seed = models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT)
    dataset.append_event(seed, WHEN)
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path=str(inbox / "*.csv")),
        read=READ,
        preprocess=models.TransformSql(engine="spark", query=query).normalized(),
        merge=models.MergeStrategyAppend(),
    )
    dataset.append_event(source, WHEN)
    return dataset


def test_a_preprocess_query_gives_the_same_slice_under_any_spark_conf(
    tmp_path: Path, spark: SparkSession
) -> None:
    wanted = expected()
    hashes: dict[str, set[str]] = {name: set() for name in QUERIES}
    context = IngestContext(spark=lambda: spark, base_dir=tmp_path, env={}, system_time=WHEN)
    for n, conf in enumerate(SETTINGS):
        inbox = tmp_path / f"in-{n}"
        write_file(inbox)
        repo = OdfRepository(tmp_path / f"odf-{n}")
        with session_conf(spark, conf):
            for name, query in QUERIES.items():
                dataset = root(repo, name, inbox, query)
                assert pull_polling(dataset, context).rows == len(wanted[name]), (conf, name)
                (added,) = [e for e in events(dataset) if isinstance(e, models.AddData)]
                assert added.new_data is not None
                hashes[name].add(str(added.new_data.logical_hash))
                (found,) = slices(dataset)
                assert rows(found, "system_time") == [
                    (offset, 0, *row) for offset, row in enumerate(wanted[name])
                ], (conf, name)
    assert {name: len(found) for name, found in hashes.items()} == dict.fromkeys(QUERIES, 1)


ROW_WISE = {
    "map": (MAP, True),
    "steps": ("SELECT * FROM input WHERE city = 'a'", True),
    "explode": ("SELECT event_time, explode(array(value, -value)) AS v FROM input", True),
    "aggregate": (AGGREGATE, False),
    "joined": (JOINED, False),
    "window": (WINDOW, False),
    "distinct": ("SELECT DISTINCT city FROM input", False),
    "limit": ("SELECT * FROM input LIMIT 5", False),
    "order": ("SELECT * FROM input ORDER BY value", False),
    "union": ("SELECT * FROM input UNION ALL SELECT * FROM input", False),
    "scalar subquery": ("SELECT value - (SELECT sum(value) FROM input) AS d FROM input", False),
    "in subquery": ("SELECT * FROM input WHERE city IN (SELECT city FROM input LIMIT 1)", False),
}


@pytest.mark.parametrize(("query", "expect"), ROW_WISE.values(), ids=ROW_WISE.keys())
def test_only_maps_and_filters_of_the_read_are_row_wise(
    tmp_path: Path, spark: SparkSession, query: str, expect: bool
) -> None:
    path = write_file(tmp_path / "in")
    transform = models.TransformSql(engine="spark", query=query)
    with read_data(spark, READ, path, tmp_path) as frame:
        assert frame is not None
        output = preprocess(spark, frame, transform, models.DatasetVocabulary(), True)
        assert row_wise(output) is expect


def test_a_map_reads_in_parallel_and_an_aggregate_in_one_task(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The query sees the file's splits when it is row-wise, else the file in one
    partition, and runs under ``ONE_TASK_CONF``; a limit there keeps the file's order
    (the one-partition read counts as an input read in order: it is not sorted)."""
    path = write_file(tmp_path / "in")
    vocab = models.DatasetVocabulary()
    mapped, aggregated, limited = (
        models.TransformSql(engine="spark", query=q)
        for q in (MAP, AGGREGATE, "SELECT * FROM input LIMIT 20")
    )
    with session_conf(spark, SPLIT), read_data(spark, READ, path, tmp_path) as frame:
        assert frame is not None
        splits = frame.rdd.getNumPartitions()
        assert splits > 1
        with preprocessed(spark, frame, None, vocab, True) as as_read:
            assert as_read is frame  # no query: nothing changes
        with preprocessed(spark, frame, mapped, vocab, True) as output:
            assert output is not None
            assert output.rdd.getNumPartitions() == splits
            assert "spark.sql.leafNodeDefaultParallelism" not in spark.conf.getAll
        with preprocessed(spark, frame, aggregated, vocab, True) as output:
            assert output is not None
            assert output.rdd.getNumPartitions() == 1
            assert {k: spark.conf.get(k) for k in ONE_TASK_CONF} == ONE_TASK_CONF
        with preprocessed(spark, frame, limited, vocab, True) as output:
            assert output is not None
            assert output.rdd.getNumPartitions() == 1
            found = [(r.event_time, r.city, r.value) for r in output.collect()]
            assert [(f"{t:%Y-%m-%dT%H:%M:%SZ}", c, v) for t, c, v in found] == file_rows()[:20]
        assert "spark.sql.leafNodeDefaultParallelism" not in spark.conf.getAll
