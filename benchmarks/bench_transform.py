"""Benchmark derivative transforms: the reconciler's run against plain Spark on the same data.

Why: after roots, a scheduled reconcile spends its time running derivative queries. The
question is what an ODF transform (reading the input's new slice in offset order, in one
partition, running the query, putting its output in a deterministic order, having a
Spark task write it as one Parquet slice with its system columns, hashing it physically
and logically as it writes, writing the watermark checkpoint and appending blocks) costs
on top of the cheapest Spark job that runs the same SQL, over a view of the root's
Parquet data file, written with ``df.write.parquet`` in the same session.

Setup (timed, but not a result): a GitOps repository in a temporary folder with one root
dataset of N readings (event_time, station: 100 values, temperature), ingested from one
generated CSV through the normal reconcile path (plan, then apply; Append merge), so the
derivatives read a real chain with one Parquet slice.

Then two derivatives are added and reconciled together (plan, then apply, which runs
them after the root; the root has nothing new): a filter keeping about half the rows,
and an aggregation per station and day. This is done twice, with a second copy of each
derivative in a second reconcile, and the better run is reported, as for the baselines.
Each transform is timed alone by wrapping ``run_derivative`` as ``apply`` calls it; its
parts are timed by wrapping the functions it calls (see ``Probe``). A second baseline
sorts the rows by offset before the query, to show what a global sort would cost (the
transform reads them in that order from one partition, without one). Finally a reconcile
with nothing new shows the no-op cost.
Each reconcile also prints the Python driver's peak resident memory (``ru_maxrss``; the
JVM and Spark's Python workers are other processes), which the slice never enters.

The machine's load average is printed at the start and the end: on a shared machine the
figures are only as good as it is quiet.

Usage: python benchmarks/bench_transform.py [--rows 1000000]
Prints figures only; asserts nothing about timing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import reconciler.apply.run
import reconciler.transform.execute
import reconciler.transform.run
from reconciler.apply.outcome import Outcome
from reconciler.apply.run import apply_plan
from reconciler.config import RepoConfig
from reconciler.engine.session import SparkSettings, get_spark
from reconciler.ingest.pull import IngestContext
from reconciler.odf import models
from reconciler.odf.repository import OdfRepository
from reconciler.plan.builder import QueryValidator
from reconciler.planning.compose import PlanRequest, make_plan, spark_validator
from reconciler.writer import slice_files

ROOT = "bench.readings"
SCHEMA = "[event_time TIMESTAMP, station STRING, temperature DOUBLE]"
STATIONS = np.array([f"ST{i:03d}" for i in range(100)])
THRESHOLD = 10.0  # the median temperature: the filter keeps about half the rows

QUERIES = {
    "filter": f"""
SELECT event_time, station, temperature
FROM `{ROOT}`
WHERE temperature > {THRESHOLD}
""",
    "aggregate": f"""
SELECT
  date_trunc('DAY', event_time) AS event_time,
  station,
  count(*) AS readings,
  avg(temperature) AS avg_temperature,
  min(temperature) AS min_temperature,
  max(temperature) AS max_temperature
FROM `{ROOT}`
GROUP BY date_trunc('DAY', event_time), station
""",
}
RUNS = (1, 2)


def dataset_name(label: str, run: int) -> str:
    return f"bench.{label}.{run}"


LICENSE = """
- kind: SetLicense
  shortName: CC0-1.0
  name: Creative Commons Zero v1.0 Universal
  websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
"""


def manifest(name: str, kind: str, events: str) -> str:
    body = textwrap.indent(textwrap.dedent(events).strip("\n") + LICENSE, "    ")
    head = f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: {kind}\n"
    return f"{head}  metadata:\n{body}"


def root_manifest() -> str:
    return manifest(
        ROOT,
        "Root",
        f"""
        - kind: SetPollingSource
          fetch: {{kind: FilesGlob, path: "sources/*.csv"}}
          read: {{kind: Csv, header: true, schema: {SCHEMA}}}
          merge: {{kind: Append}}
        - kind: SetInfo
          description: Benchmark readings
        """,
    )


def derivative_manifest(label: str, run: int) -> str:
    block = textwrap.indent(QUERIES[label].strip("\n"), "      ")
    events = f"""- kind: SetTransform
  inputs: [{{datasetRef: {ROOT}}}]
  transform:
    kind: Sql
    engine: spark
    query: |
{block}
- kind: SetInfo
  description: Benchmark {label}, copy {run}
"""
    return manifest(dataset_name(label, run), "Derivative", events)


def write_csv(path: Path, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-01T00:00:00", "s")
    offsets = np.sort(rng.integers(0, 3600 * 24 * 365, rows)).astype("timedelta64[s]")
    times = (start + offsets).astype(str)
    stations = STATIONS[rng.integers(0, len(STATIONS), rows)]
    temperatures = np.round(rng.normal(THRESHOLD, 8.0, rows), 1)
    with open(path, "w") as f:
        f.write("event_time,station,temperature\n")
        for t, s, v in zip(times, stations, temperatures, strict=True):
            f.write(f"{t}Z,{s},{v}\n")


class Probe:
    """Wall time spent in named functions while active, by wrapping the module attributes
    the reconciler calls them through. Nothing outside this process is changed, and the
    originals are put back on exit."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.current: str = ""

    def wrap(
        self, module: Any, attribute: str, label: str, starts: bool = False
    ) -> Callable[[], None]:
        """Time ``module.attribute`` under ``label``; a function that ``starts`` a run
        takes the dataset as its first argument and names the run."""
        original = getattr(module, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if starts:
                self.current = args[0].root.name  # a Dataset's folder is its name
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                key = f"{self.current}:{label}"
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start

        setattr(module, attribute, timed)
        return lambda: setattr(module, attribute, original)

    def get(self, dataset: str, label: str) -> float:
        return self.seconds.get(f"{dataset}:{label}", 0.0)

    @contextmanager
    def transforms(self) -> Iterator[None]:
        execute, run = reconciler.transform.execute, reconciler.transform.run
        undo = [
            self.wrap(reconciler.apply.run, "run_derivative", "total", starts=True),
            self.wrap(run, "next_inputs", "inputs"),
            self.wrap(run, "has_work", "has_work"),
            self.wrap(run, "stage_transform", "stage"),
            self.wrap(run, "commit", "commit"),
            self.wrap(execute, "_input_frame", "input_frame"),
            self.wrap(execute, "apply_transform", "analyse"),
            self.wrap(execute, "write_frame", "write_slice"),
            self.wrap(execute, "_write_checkpoint", "checkpoint"),
        ]
        try:
            yield
        finally:
            for restore in reversed(undo):
                restore()


def counting(validator: QueryValidator, calls: list[str]) -> QueryValidator:
    def validate(dataset: str, *args: Any) -> Any:
        calls.append(dataset)
        return validator(dataset, *args)

    return validate


@dataclass
class Reconciled:
    plan_s: float
    apply_s: float
    outcomes: list[Outcome]
    done_at: dict[str, float]
    """When each dataset was done, in seconds into apply."""
    validated: list[str]
    """The datasets whose query the plan validated."""
    peak_mb: float
    """The Python driver's peak resident memory during the reconcile."""


def reset_peak() -> None:
    """Start a new peak: Linux resets the high-water mark ru_maxrss reports on "5"."""
    with contextlib.suppress(OSError):  # elsewhere the peak is the process's since start
        Path("/proc/self/clear_refs").write_text("5")


def peak_mb() -> float:
    """The Python driver's peak resident memory (ru_maxrss, KiB on Linux) in MB since the
    last reset_peak(). The JVM and Spark's Python workers are other processes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reconcile(root: Path, context: IngestContext) -> Reconciled:
    """Plan, then apply, as ``reconcile`` does, on this process's Spark session."""
    reset_peak()
    config = RepoConfig.load(root)
    validated: list[str] = []
    start = time.perf_counter()
    plan = make_plan(config, PlanRequest(), counting(spark_validator(config), validated))
    plan_s = time.perf_counter() - start
    if plan.has_errors:
        raise SystemExit(f"plan has errors: {[str(p) for p in plan.problems]}")
    done_at: dict[str, float] = {}
    start = time.perf_counter()

    def report(outcome: Outcome) -> None:
        done_at[outcome.dataset] = time.perf_counter() - start

    now = context.now()
    outcomes = apply_plan(OdfRepository(config.odf_dir), plan, now, context, report)
    apply_s = time.perf_counter() - start
    for o in outcomes:
        if o.status.value in ("failed", "skipped"):
            raise SystemExit(f"{o.dataset} {o.status.value}: {o.message}")
    return Reconciled(plan_s, apply_s, outcomes, done_at, validated, peak_mb())


def data_files(repo: OdfRepository, name: str) -> list[Path]:
    dataset = repo.dataset(name)
    files = []
    for _, block in dataset.iter_blocks():
        event = block.event
        if isinstance(event, models.AddData | models.ExecuteTransform) and event.new_data:
            files.append(dataset.layout.data_file(event.new_data.physical_hash))
    return files[::-1]


def baselines(
    spark: Any, files: Sequence[Path], out: Path, offset: str
) -> dict[str, dict[str, tuple[float, int]]]:
    """Per query: plain ``spark.sql`` over a view of the files, the same over the rows
    sorted by offset (a global sort), and the same over the rows in one partition, in
    file order, written as one file (the shape of a slice read and written
    deterministically, without offsets, hashes or blocks), each written with
    ``df.write.parquet``; and the one-partition rows handed to a Spark Python worker
    that only counts them (``handover``): the floor of any writer that runs in Python,
    as the slice writer does to embed the chain's Arrow schema. The better of two runs;
    the rows written are counted afterwards, untimed."""
    results: dict[str, dict[str, tuple[float, int]]] = {}
    view = f"`{ROOT}`"
    for name, query in QUERIES.items():
        results[name] = {}
        for variant in ("plain", "sorted", "one", "handover"):
            times = []
            for attempt in range(2):
                target = out / f"{name}-{variant}-{attempt}.parquet"
                start = time.perf_counter()
                frame = spark.read.parquet(*[str(p) for p in files])
                if variant == "sorted":
                    frame = frame.orderBy(offset)
                elif variant in ("one", "handover"):
                    frame = frame.coalesce(1)
                frame.createOrReplaceTempView(view)
                output = spark.sql(query)
                if variant == "handover":
                    counted = slice_files.map_in_arrow(output.coalesce(1), _count_rows)
                    rows = counted.collect()[0]["rows"]
                else:
                    (output.coalesce(1) if variant == "one" else output).write.parquet(str(target))
                times.append(time.perf_counter() - start)
            if variant != "handover":
                rows = spark.read.parquet(str(target)).count()
            results[name][variant] = (min(times), rows)
        spark.catalog.dropTempView(ROOT)
    return results


def _count_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """A Python worker's task that receives the rows, as the slice writer's does, and
    only counts them (reported in the writer's own summary row)."""
    yield slice_files._summary(output=0, rows=sum(batch.num_rows for batch in batches))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.rows

    start = time.perf_counter()
    spark = get_spark(SparkSettings.load(Path(__file__).resolve().parents[1]))
    spark_s = time.perf_counter() - start
    work = Path(tempfile.mkdtemp(prefix="bench-transform-"))
    try:
        root = work / "repo"
        (root / "datasets").mkdir(parents=True)
        (root / "sources").mkdir()
        context = IngestContext(spark=lambda: spark, base_dir=root, env={})
        start = time.perf_counter()
        csv = root / "sources" / "readings.csv"
        write_csv(csv, n)
        csv_s = time.perf_counter() - start
        (root / "datasets" / f"{ROOT}.yaml").write_text(root_manifest())
        setup = reconcile(root, context)
        repo = OdfRepository(RepoConfig.load(root).odf_dir)
        files = data_files(repo, ROOT)
        conf = spark.sparkContext.getConf()
        print(
            f"{n:,} input rows; master {spark.sparkContext.master} ({os.cpu_count()} CPUs), "
            f"shuffle partitions {conf.get('spark.sql.shuffle.partitions')}, "
            f"driver {conf.get('spark.driver.host')}; load average {os.getloadavg()[0]:.1f}"
        )
        size = sum(p.stat().st_size for p in files) / 1e6
        print(
            f"setup: Spark start {spark_s:.1f} s, CSV {csv.stat().st_size / 1e6:.1f} MB written "
            f"in {csv_s:.1f} s, root reconcile {setup.plan_s + setup.apply_s:.1f} s "
            f"(plan {setup.plan_s:.2f} s, ingest {setup.apply_s:.1f} s, "
            f"{setup.outcomes[0].rows:,} rows) -> {len(files)} slice, {size:.1f} MB of Parquet; "
            f"driver peak RSS {setup.peak_mb:.0f} MB"
        )

        # Baselines first, so that the first transform is not the one paying for the
        # JVM's first compilation of these query shapes.
        offset = repo.dataset(ROOT).state().vocabulary().offset_column
        base = baselines(spark, files, work, offset)

        # Two copies of each derivative, one pair per reconcile: best of 2, as the baselines.
        # Each reconcile has its own probe: the later one also visits the earlier copies,
        # which are up to date by then.
        runs: list[Reconciled] = []
        probes: dict[str, Probe] = {}
        for run in RUNS:
            probe = Probe()
            for label in QUERIES:
                name = dataset_name(label, run)
                (root / "datasets" / f"{name}.yaml").write_text(derivative_manifest(label, run))
                probes[name] = probe
            with probe.transforms():
                runs.append(reconcile(root, context))
        noop = reconcile(root, context)

        rows_out = {o.dataset: o.rows for r in runs for o in r.outcomes}
        best = {
            label: min(
                (dataset_name(label, run) for run in RUNS), key=lambda d: probes[d].get(d, "total")
            )
            for label in QUERIES
        }
        print()
        print(
            "transform = run_derivative as apply calls it: find the new input slice in the "
            "chains,\n  read it in offset order in one partition, run the query (and sort its "
            "output when\n  the query leaves the order open, e.g. an aggregation), a Spark task "
            "writes the Parquet\n  slice with its system columns and hashes it as it "
            "writes (physical + logical),\n  writes the checkpoint, moves files, appends the "
            "ExecuteTransform (+ SetDataSchema)\n  blocks; best of 2."
        )
        print(
            "baseline  = spark.sql(query) over a view of the root's Parquet file, "
            ".write.parquet(tmp); best of 2.\n"
            "sorted    = the same over the rows sorted by offset first (a global sort); "
            "best of 2.\n"
            "one file  = the same over the rows in one partition in file order, written as "
            "one file\n  (a slice's shape, read deterministically); best of 2.\n"
            "hand-over = the one-file query's rows handed to a Spark Python worker that only "
            "counts them\n  (the floor of any writer in Python); best of 2."
        )
        print()
        header = f"{'':26s}{'seconds':>9s}{'input rows/s':>14s}{'rows out':>11s}{'x baseline':>12s}"
        print(header)
        print("-" * len(header))
        for label in QUERIES:
            plain_s, plain_rows = base[label]["plain"]
            sorted_s, sorted_rows = base[label]["sorted"]
            one_s, one_rows = base[label]["one"]
            hand_s, hand_rows = base[label]["handover"]
            lines = [
                (
                    f"{label} transform",
                    probes[best[label]].get(best[label], "total"),
                    rows_out[best[label]],
                ),
                (f"{label} baseline", plain_s, plain_rows),
                (f"{label} sorted baseline", sorted_s, sorted_rows),
                (f"{label} one-file baseline", one_s, one_rows),
                (f"{label} hand-over to Python", hand_s, hand_rows),
            ]
            for text, seconds, out in lines:
                print(
                    f"{text:26s}{seconds:9.2f}{n / seconds:14,.0f}{out:11,d}"
                    f"{seconds / plain_s:11.1f}x"
                )
        each = "; ".join(
            f"{label} " + ", ".join(f"{_total(probes, dataset_name(label, r)):.2f}" for r in RUNS)
            for label in QUERIES
        )
        print(f"transform runs (s): {each}")
        print()

        print("where the best transform run's time goes (seconds)")
        print(f"  {'':38s}" + "".join(f"{label:>11s}" for label in QUERIES))
        for text, part in PARTS:
            print(
                f"  {text:38s}"
                + "".join(f"{part(probes[best[x]], best[x]):11.2f}" for x in QUERIES)
            )
        print()

        for run, r in zip(RUNS, runs, strict=True):
            steps, last = [], 0.0
            for o in r.outcomes:
                steps.append(f"{o.dataset} {r.done_at[o.dataset] - last:.2f} s ({o.status.value})")
                last = r.done_at[o.dataset]
            print(
                f"reconcile adding copy {run} of both: plan {r.plan_s:.2f} s "
                f"({len(r.validated)} queries validated), apply {r.apply_s:.2f} s, "
                f"driver peak RSS {r.peak_mb:.0f} MB:"
            )
            print(f"  per dataset (metadata + pull/run): {', '.join(steps)}")
        blocks = sum(o.metadata_blocks + o.data_blocks for o in noop.outcomes)
        statuses = _count(o.status.value for o in noop.outcomes)
        print(
            f"no-op reconcile: {noop.plan_s + noop.apply_s:.2f} s (plan {noop.plan_s:.2f} s, "
            f"{len(noop.validated)} queries validated; apply {noop.apply_s:.2f} s): "
            f"{statuses}, {blocks} blocks appended; driver peak RSS {noop.peak_mb:.0f} MB"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _total(probes: Mapping[str, Probe], d: str) -> float:
    return probes[d].get(d, "total")


def _stage_rest(probe: Probe, d: str) -> float:
    """What ``stage_transform`` spends outside the probed parts: checking and ordering
    the output (Spark plans it), its schema, and the block."""
    parts = ("input_frame", "analyse", "write_slice", "checkpoint")
    return probe.get(d, "stage") - sum(probe.get(d, k) for k in parts)


def _run_rest(probe: Probe, d: str) -> float:
    parts = ("inputs", "has_work", "stage", "commit")
    return probe.get(d, "total") - sum(probe.get(d, k) for k in parts)


def _part(key: str) -> Callable[[Probe, str], float]:
    return lambda probe, d: probe.get(d, key)


PARTS: list[tuple[str, Callable[[Probe, str], float]]] = [
    ("find input slice (chains)", _part("inputs")),
    ("has_work", _part("has_work")),
    ("build input frame (lazy)", _part("input_frame")),
    ("analyse + sandbox query", _part("analyse")),
    ("order the output, schema, other", _stage_rest),
    ("Spark job: query, write + hash slice", _part("write_slice")),
    ("checkpoint (JSON)", _part("checkpoint")),
    ("commit: move files, append blocks", _part("commit")),
    ("other", _run_rest),
    ("total", _part("total")),
]


def _count(values: Iterable[str]) -> str:
    return ", ".join(f"{c} {k}" for k, c in sorted(Counter(values).items()))


if __name__ == "__main__":
    main()
