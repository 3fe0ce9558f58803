"""The Spark settings a transform runs under, whatever the repository configures.

A derivative's rows and their logical hash must be a function of its inputs, its query
and the engine version alone (§2, determinism). Each input is read in one partition in
offset order (``engine.stored_rows.rows_in_one_partition``), so a query over them runs
as one task and each operator meets its rows in one order, and a floating-point sum
(whose last bits depend on the order of its additions) is a left-to-right fold in that
order. But the order an operator emits its rows in, and so the order the next one folds
them in, still depends on settings a repository may tune for its cluster:

- the join strategy: a broadcast hash join streams one side in its own order and emits
  each row's matches from a hash table; a sort-merge join emits key by key. Spark picks
  broadcast when a side's estimated size is under ``autoBroadcastJoinThreshold``, and
  a shuffled hash join when ``preferSortMergeJoin`` is off and a side is small enough;
- adaptive execution, which re-plans joins from the sizes seen at run time (with its
  own thresholds), starts shuffles at ``coalescePartitions.initialPartitionNum``
  partitions instead of ``shuffle.partitions``, and splits skewed partitions;
- the partition count of a shuffle the query asks for (``DISTRIBUTE BY``, ``CLUSTER BY``,
  a ``REPARTITION`` hint by columns) and of the query's own leaves (``VALUES``,
  ``range``): rows spread over several partitions are gathered again by a shuffle in
  the order its blocks arrive, and an aggregate above merges one partial result per
  partition.

``ONE_TASK_CONF`` fixes each: broadcast and adaptive execution off, sort-merge joins
(the one strategy that works for any size: broadcast collects a side on the driver), and
one partition for every shuffle and leaf. ``one_task`` applies it on the shared session
for the duration of a transform only; the repository's settings stay as configured for
everything else (ingest merges, ``reconcile sql``). The cost is in joins: a sort-merge
join sorts both sides where a broadcast would only have streamed the larger one (about
a quarter of a second more for a million rows against a hundred). The rest of a
transform's plan was one task already, but for an input of more than
``engine.stored_rows.MOST_SCANS`` slices, whose sort by offset now runs as one task.

What settings cannot fix: a sort or an aggregation that runs short of memory spills to
disk, and rows with equal sort keys, or an aggregate's partial results, are then merged
in an order set by where the spills fell, which depends on the executor's memory. So
does a query's own ``REPARTITION(n)`` with a fixed ``n``: its partitions are gathered
again in the order their shuffle blocks arrive, which across executors is not fixed.
The output's order itself is fixed whatever happens (``ordering.deterministic_order``);
only floating-point values folded across such a boundary may differ in their last bits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

ONE_TASK_CONF: Mapping[str, str] = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.join.preferSortMergeJoin": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.leafNodeDefaultParallelism": "1",
}
"""Settings under which a transform's plan and its result do not depend on the
repository's Spark conf: see the module's docstring for each."""


@contextmanager
def one_task(spark: SparkSession) -> Iterator[None]:
    """``ONE_TASK_CONF`` on ``spark`` for the block: everything planned and run in it
    (Spark plans a DataFrame's execution when an action runs it) runs under them."""
    with session_conf(spark, ONE_TASK_CONF):
        yield


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """``conf`` set on ``spark`` for the block, then each key back as it was: set to its
    earlier value, or unset when it was not set (so it follows Spark's default again).

    The session is shared, so its conf is too: like the input views of a transform
    (``query_check.apply_transform``), this assumes no other query runs meanwhile."""
    before = spark.conf.getAll
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            if key in before:
                spark.conf.set(key, before[key])
            else:
                spark.conf.unset(key)
