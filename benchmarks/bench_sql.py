"""Benchmark ``reconcile sql`` exports against plain Spark writing the same rows.

Why: an export (``--format csv|json|parquet``, every row) is how people take a dataset
out of the repository, and it must not be bounded by the driver's memory. The rows are
written by Spark's tasks (rendered there, for the text formats) and copied to the one
output file by the driver a part at a time (``inspection.sql.stream_sql``). The question
is what that costs on top of the cheapest Spark job that writes the same rows in the
same format (``df.write.csv|json|parquet`` in parallel parts, with Spark's own rendering
of values rather than the deterministic one ``reconcile sql`` promises).

Setup (timed, but not a result): a repository in a temporary folder with one root
dataset of N readings, ingested from one generated CSV through the normal reconcile
path (as ``bench_transform.py`` does), so the export reads a real chain's slice.

Then, for each format, best of 2: the baseline, then the export, in this process's
Spark session, each with the Python driver's peak resident memory (``ru_maxrss`` reset
before each; the JVM and Spark's Python workers are other processes).

Usage: python benchmarks/bench_sql.py [--rows 1000000]
Prints figures only; asserts nothing about timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_transform import (
    ROOT,
    data_files,
    peak_mb,
    reconcile,
    reset_peak,
    root_manifest,
    write_csv,
)

from reconciler.config import RepoConfig
from reconciler.engine.session import SparkSettings, get_spark
from reconciler.ingest.pull import IngestContext
from reconciler.inspection.sql import export, stream_sql
from reconciler.odf.repository import OdfRepository

FORMATS = ("csv", "json", "parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()

    spark = get_spark(SparkSettings.load(Path(__file__).resolve().parents[1]))
    work = Path(tempfile.mkdtemp(prefix="bench-sql-"))
    try:
        root = work / "repo"
        (root / "datasets").mkdir(parents=True)
        (root / "sources").mkdir()
        write_csv(root / "sources" / "readings.csv", args.rows)
        (root / "datasets" / f"{ROOT}.yaml").write_text(root_manifest())
        context = IngestContext(spark=lambda: spark, base_dir=root, env={})
        setup = reconcile(root, context)
        repo = OdfRepository(RepoConfig.load(root).odf_dir)
        files = [str(p) for p in data_files(repo, ROOT)]
        print(
            f"{setup.outcomes[0].rows:,} rows in {len(files)} slice(s) of "
            f"{sum(os.path.getsize(p) for p in files) / 1e6:.1f} MB; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        )
        query = f"SELECT * FROM `{ROOT}`"
        print(f"{'format':8} {'baseline':>10} {'export':>10} {'ratio':>6}", end="")
        print(f" {'output':>10} {'peak':>8}")
        for output_format in FORMATS:
            base = min(_baseline(spark, files, output_format, work / "base") for _ in range(2))
            runs = [_export(spark, repo, query, output_format, work) for _ in range(2)]
            seconds, size, peak = min(runs)
            print(
                f"{output_format:8} {base:9.2f}s {seconds:9.2f}s {seconds / base:5.1f}x "
                f"{size / 1e6:8.1f}MB {peak:6.0f}MB"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _baseline(spark: object, files: list[str], output_format: str, out: Path) -> float:
    """Plain Spark: read the slices, write the rows in parallel parts."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    frame = spark.read.parquet(*files)  # type: ignore[attr-defined]
    getattr(frame.write, output_format)(str(out))
    return time.perf_counter() - start


def _export(
    spark: object, repo: OdfRepository, query: str, output_format: str, work: Path
) -> tuple[float, int, float]:
    """``reconcile sql --format F --out FILE``'s work: seconds, bytes written, driver peak."""
    target = work / f"export.{output_format}"
    scratch = work / "scratch"
    scratch.mkdir(exist_ok=True)
    reset_peak()
    start = time.perf_counter()
    result = stream_sql(spark, repo, query, scratch, output_format)  # type: ignore[arg-type]
    export(result, target)
    seconds = time.perf_counter() - start
    return seconds, target.stat().st_size, peak_mb()


if __name__ == "__main__":
    main()
