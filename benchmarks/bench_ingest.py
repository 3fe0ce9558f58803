"""Benchmark ingest: the reconciler's full pipeline against plain Spark, per merge strategy.

Why: ingest is what a scheduled reconcile spends its time on. Two questions matter:
1. What does ODF ingest (merge, offsets, system columns, one Parquet slice, physical and
   logical hashes, checkpoint, blocks) cost on top of the cheapest possible Spark job
   over the same file, ``spark.read.csv(...).write.parquet(...)`` in the same session?
   That job writes unsorted parts in parallel, while a slice is one file sorted by the
   strategy's order (event time, or the primary key for Snapshot). Two more plain-Spark
   jobs show what that shape costs by itself: the same rows written as one Parquet file
   sorted that way (``repartition(1).sortWithinPartitions(...)``), and the sort alone,
   each partition sorted in parallel and nothing written (the ``noop`` sink): a floor
   below which no ingest that sorts can go, however it writes.
2. Does a run cost what its new data costs, or what the history costs? The 1st and the
   Nth ingest of the same amount of new data are timed per strategy; kamu re-reads every
   past slice for Ledger and Snapshot, the checkpoints here should keep the ratio near 1.
   For Snapshot each round is a full snapshot of the same keys with some values changed,
   so the state stays the same size while the history grows.

   The JVM keeps warming up over the first runs, so the raw Nth/2nd ratio falls below 1
   and hides what grows with the history. ``--paired P`` measures it without that: the
   dataset as it was before the 2nd run and before the Nth (each with its new file) is
   copied, then the two runs are replayed from these copies P times each, alternately,
   in one process, and the medians are compared.

Usage: python benchmarks/bench_ingest.py [--rows 1000000] [--batch 20000] [--rounds 50]
                                         [--repeat 3] [--paired 0] [--merges ...]
(``--rounds 0`` times the full ingests only.)
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.engine.session import SparkSettings, get_spark
from reconciler.ingest.checkpoints import MIN_LAYER_ROWS
from reconciler.ingest.pull import IngestContext, pull_polling
from reconciler.odf import DatasetId, Timestamp, models
from reconciler.odf.repository import OdfRepository

SCHEMA = ["event_time TIMESTAMP", "id BIGINT", "city STRING", "value DOUBLE"]
CITIES = np.array(["Vancouver", "Seattle", "Portland", "Kelowna", "Kyiv", "Bergen"])
MERGES: dict[str, models.MergeStrategy] = {
    "Append": models.MergeStrategyAppend(),
    "Ledger": models.MergeStrategyLedger(primary_key=["id"]),
    "Snapshot": models.MergeStrategySnapshot(primary_key=["id"]),
}


ORDER = {"Append": "event_time", "Ledger": "event_time", "Snapshot": "id"}
"""The column each strategy's slice is sorted by (its offsets follow it)."""


def sorted_baselines(spark: SparkSession, csv: Path, order: str, out: Path) -> tuple[float, float]:
    """Plain Spark's time to write the CSV's rows as one Parquet file sorted by ``order``,
    the shape of a slice, and to sort every partition by it in parallel writing nothing."""
    frame = spark.read.schema(", ".join(SCHEMA)).csv(str(csv), header=True)
    start = time.perf_counter()
    frame.repartition(1).sortWithinPartitions(order).write.parquet(str(out))
    one_file = time.perf_counter() - start
    start = time.perf_counter()
    frame.sortWithinPartitions(order).write.format("noop").mode("overwrite").save()
    return one_file, time.perf_counter() - start


def write_csv(path: Path, ids: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = len(ids)
    start = np.datetime64("2024-01-01T00:00:00", "s")
    times = (start + rng.integers(0, 3600 * 24 * 365, n).astype("timedelta64[s]")).astype(str)
    cities = CITIES[rng.integers(0, len(CITIES), n)]
    values = np.round(rng.random(n) * 1000, 2)
    with open(path, "w") as f:
        f.write("event_time,id,city,value\n")
        for row in zip(times, ids, cities, values, strict=True):
            f.write(f"{row[0]}Z,{row[1]},{row[2]},{row[3]}\n")


def new_dataset(root: Path, name: str, glob: str, merge: models.MergeStrategy) -> None:
    dataset = OdfRepository(root / "odf").dataset(name)
    when = Timestamp.parse("2026-01-01T00:00:00Z")
    dataset_id, _ = DatasetId.generate()
    dataset.append_event(
        models.Seed(dataset_id=dataset_id, dataset_kind=models.DatasetKind.ROOT), when
    )
    source = models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path=glob),
        read=models.ReadStepCsv(schema=SCHEMA, header=True),
        merge=merge,
    )
    dataset.append_event(source, when)


def reset_peak() -> None:
    """Start a new peak: Linux resets the high-water mark ru_maxrss reports on "5"."""
    with contextlib.suppress(OSError):  # elsewhere the peak is the process's since start
        Path("/proc/self/clear_refs").write_text("5")


def peak_mb() -> float:
    """The Python driver's peak resident memory (ru_maxrss, KiB on Linux) in MB since the
    last reset_peak(). The JVM and Spark's Python workers are other processes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> str:
    """The 1-minute load average: on a shared machine a figure is only as good as it."""
    return f"load average {os.getloadavg()[0]:.1f}"


def timed_pull(root: Path, name: str, context: IngestContext) -> tuple[float, int, float]:
    dataset = OdfRepository(root / "odf").dataset(name)
    reset_peak()
    start = time.perf_counter()
    result = pull_polling(dataset, context)
    return time.perf_counter() - start, result.rows, peak_mb()


def checkpoint_rows(root: Path, name: str) -> int:
    """How many rows the last run wrote to the dataset's checkpoint file: a Ledger run
    writing more than its own keys merged earlier layers into it."""
    dataset = OdfRepository(root / "odf").dataset(name)
    checkpoint = dataset.state().checkpoint
    assert checkpoint is not None
    return pq.read_metadata(dataset.layout.checkpoint_file(checkpoint)).num_rows


def restore(saved: Path, root: Path) -> None:
    """Put the dataset folder back as ``saved`` holds it (the source's glob names
    ``root``, so a run is replayed in place)."""
    shutil.rmtree(root)
    shutil.copytree(saved, root)


def paired(
    root: Path, label: str, context: IngestContext, saved: tuple[Path, Path], pairs: int
) -> tuple[list[float], list[float]]:
    """The 2nd and the Nth runs replayed ``pairs`` times each from ``saved`` (the
    dataset before each), alternately and in turns starting with either, so that a JVM
    still warming up and a load that comes and goes weigh on both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for pair in range(pairs):
        for which in (pair % 2, 1 - pair % 2):
            restore(saved[which], root)
            times[which].append(timed_pull(root, label, context)[0])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=50, help="0 skips the 1st vs Nth runs")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many full runs")
    parser.add_argument(
        "--paired", type=int, default=0, help="replay the 2nd and Nth runs this many times each"
    )
    parser.add_argument(
        "--merges", nargs="+", choices=list(MERGES), default=list(MERGES), help="strategies"
    )
    args = parser.parse_args()
    spark = get_spark(SparkSettings.load(Path(__file__).resolve().parents[1]))
    context = IngestContext(spark=lambda: spark, base_dir=Path("/"), env={})
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        big = work / "big" / "data.csv"
        big.parent.mkdir()
        write_csv(big, np.arange(args.rows), seed=1)
        size = big.stat().st_size / 1e6
        print(
            f"{args.rows:,} rows, {size:.1f} MB of CSV; master {spark.sparkContext.master};"
            f" load average {os.getloadavg()[0]:.1f}"
        )

        # The best of --repeat runs of each. A repeat runs the baseline and then every
        # strategy (each into a new dataset), so that a load that comes and goes on a
        # shared machine weighs on both sides of the ratios alike; the first repeat also
        # pays for warming up the JVM's code paths.
        baselines: list[float] = []
        orders = sorted({ORDER[label] for label in args.merges})
        shaped: dict[str, list[tuple[float, float]]] = {order: [] for order in orders}
        pulls: dict[str, list[tuple[float, int, float]]] = {label: [] for label in args.merges}
        for attempt in range(args.repeat):
            start = time.perf_counter()
            frame = spark.read.schema(", ".join(SCHEMA)).csv(str(big), header=True)
            frame.write.parquet(str(work / f"baseline-{attempt}.parquet"))
            baselines.append(time.perf_counter() - start)
            for order in orders:
                shaped[order].append(
                    sorted_baselines(spark, big, order, work / f"{order}-{attempt}")
                )
            for label in args.merges:
                merge = MERGES[label]
                root = work / f"full-{label}-{attempt}"
                root.mkdir()
                new_dataset(root, label, str(big), merge)
                pulls[label].append(timed_pull(root, label, context))
        baseline = min(baselines)
        rate = args.rows / baseline
        print(
            f"baseline spark.read.csv().write.parquet(): {baseline:.2f} s ({rate:,.0f} rows/s)"
            f" (runs: {', '.join(f'{s:.2f} s' for s in baselines)}); {load()}"
        )
        one_file = {order: min(s for s, _ in runs) for order, runs in shaped.items()}
        for order, runs in shaped.items():
            floor = min(f for _, f in runs)
            print(
                f"plain Spark, one Parquet file sorted by {order}: {one_file[order]:.2f} s"
                f" ({one_file[order] / baseline:.2f}x the baseline); the sort alone, in"
                f" parallel, writing nothing: {floor:.2f} s ({floor / baseline:.2f}x)"
            )
        for label, runs in pulls.items():
            seconds, rows, _ = min(runs)
            print(
                f"{label:8s} ingest: {seconds:.2f} s ({rows / seconds:,.0f} rows/s), "
                f"{seconds / baseline:.1f}x the baseline, "
                f"{seconds / one_file[ORDER[label]]:.2f}x one sorted file (runs: "
                + ", ".join(f"{s:.2f} s" for s, _, _ in runs)
                + "); driver peak RSS per run: "
                + ", ".join(f"{m:.0f} MB" for _, _, m in runs)
                + f"; {load()}"
            )

        if args.rounds == 0:
            return
        print(f"\n1st vs {args.rounds}th ingest of {args.batch:,} new rows; {load()}")
        for label in args.merges:
            merge = MERGES[label]
            root = work / f"rounds-{label}"
            (root / "in").mkdir(parents=True)
            new_dataset(root, label, str(root / "in" / "*.csv"), merge)
            times, peaks, merges, saved = [], [], [], []
            for i in range(args.rounds):
                if label == "Snapshot":
                    ids = np.arange(args.batch)  # same keys, new values: state stays the same size
                else:
                    ids = np.arange(i * args.batch, (i + 1) * args.batch)
                write_csv(root / "in" / f"batch-{i:04d}.csv", ids, seed=100 + i)
                if args.paired and i in (1, args.rounds - 1):
                    saved.append(work / f"before-{label}-{i + 1}")
                    shutil.copytree(root, saved[-1])
                seconds, _, peak = timed_pull(root, label, context)
                times.append(seconds)
                peaks.append(peak)
                if label == "Ledger" and (written := checkpoint_rows(root, label)) > MIN_LAYER_ROWS:
                    merges.append(f"{i + 1} ({written:,} keys)")
            first, second, last = times[0], times[1], times[-1]
            n = args.rounds
            print(
                f"{label:8s} 1st {first:.2f} s, 2nd {second:.2f} s, {n}th {last:.2f} s:"
                f" {n}th/1st = {last / first:.2f}, {n}th/2nd = {last / second:.2f};"
                f" driver peak RSS per run up to {max(peaks):.0f} MB; {load()}"
            )
            if n >= 20:  # a merging run costs more than others: the mean over ten runs too
                late, early = np.mean(times[-10:]), np.mean(times[1:11])
                print(
                    f"{'':8s} mean of runs {n - 9}-{n} {late:.2f} s, of runs 2-11 {early:.2f} s:"
                    f" {late / early:.2f}"
                )
            if merges:
                print(
                    f"{'':8s} runs merging layers of over {MIN_LAYER_ROWS:,} keys into their"
                    f" checkpoint: {', '.join(merges)}"
                )
            if len(saved) == 2:
                early, late = paired(root, label, context, (saved[0], saved[1]), args.paired)
                ratios = [b / a for a, b in zip(early, late, strict=True)]
                print(
                    f"{'':8s} paired, {args.paired} replays each: 2nd median"
                    f" {np.median(early):.3f} s, {n}th median {np.median(late):.3f} s:"
                    f" {np.median(late) / np.median(early):.2f} (median of the pairs' ratios"
                    f" {np.median(ratios):.2f}, quartiles {np.quantile(ratios, 0.25):.2f}-"
                    f"{np.quantile(ratios, 0.75):.2f}); {load()}"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
