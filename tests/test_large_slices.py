"""A slice larger than the driver's memory: Spark writes it, the driver only streams it.

``reconcile`` runs as a subprocess that ingests one generated CSV into a root dataset and
runs a transform over it. The Python driver's peak resident memory (``ru_maxrss`` of the
driver process itself: the JVM and Spark's Python workers are other processes) must stay
well below the slice's size as Arrow, which collecting the slice into the driver would
exceed on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events

from reconciler.odf import models
from reconciler.odf.arrow_digest import RecordDigest, arrow_digest
from reconciler.odf.arrow_schema import decode_arrow_schema, encode_arrow_schema
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset

ROOT = "org.example.large"
DERIVED = "org.example.large.mapped"
ROWS = 1_000_000
PAYLOAD = 280  # characters of text per row: the slice is about 300 MB as Arrow

# Runs the CLI in this interpreter and records the process's own peak RSS (KiB on
# Linux) in the file named by the first argument, however the CLI exits.
WRAPPER = """
import resource, runpy, sys
out = sys.argv.pop(1)
sys.argv[0] = "reconcile"
try:
    runpy.run_module("reconciler", run_name="__main__", alter_sys=True)
finally:
    with open(out, "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def write_source(path: Path, rows: int = ROWS) -> None:
    """``rows`` rows of ``event_time, id, payload``, written a block at a time."""
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    text = (words * (PAYLOAD // len(words) + 1))[:PAYLOAD]
    with path.open("w") as f:
        f.write("event_time,id,payload\n")
        for start in range(0, rows, 10_000):
            f.write(
                "".join(
                    f"2026-01-01T00:{i % 60:02d}:{i % 59:02d}Z,{i},{text[i % 17 :]}{i}\n"
                    for i in range(start, min(start + 10_000, rows))
                )
            )


def arrow_size(path: Path) -> int:
    """The file's records as Arrow, in bytes, read a batch at a time."""
    return sum(b.nbytes for b in pq.ParquetFile(path).iter_batches(batch_size=1 << 16))


def apply_measured(root: Path, rows: int) -> tuple[GitOpsRepo, float]:
    """A root of ``rows`` rows and a filter over it, applied by a real ``reconcile``
    process; the repository and that process's own peak RSS in MB (the JVM and Spark's
    Python workers are other processes)."""
    repo = GitOpsRepo.create(root)
    (repo.root / "sources").mkdir()
    write_source(repo.root / "sources" / "big.csv", rows)
    schema = "[event_time TIMESTAMP, id BIGINT, payload STRING]"
    repo.write(ROOT, manifest(ROOT, "Root", root_events(schema)))
    query = f"SELECT event_time, id, upper(payload) AS payload FROM `{ROOT}` WHERE id % 2 = 0"
    repo.write(DERIVED, manifest(DERIVED, "Derivative", derivative_events([ROOT], query)))
    return repo, run_measured(repo.root, "apply", "--yes")


def run_measured(root: Path, *args: str) -> float:
    """Run ``reconcile -C root *args`` as a process; its own peak RSS in MB."""
    peak_file = root.parent / f"peak-{len(list(root.parent.glob('peak-*')))}"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(peak_file), "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return int(peak_file.read_text()) / 1024


def test_a_slice_larger_than_the_driver_is_written_by_spark_and_streamed(tmp_path: Path) -> None:
    # The same run over 10,000 rows gives the driver's own footprint (interpreter, Spark
    # client, Arrow); a driver that held the big slice would need its size on top.
    _, baseline_mb = apply_measured(tmp_path / "small", 10_000)
    repo, peak_mb = apply_measured(tmp_path / "repo", ROWS)
    root, derived = repo.odf.dataset(ROOT), repo.odf.dataset(DERIVED)
    assert check_integrity(root) == [] and check_integrity(derived) == []
    (root_slice,) = _slices(root)
    (derived_slice,) = _slices(derived)
    assert root_slice[0].offset_interval == models.OffsetInterval(start=0, end=ROWS - 1)
    assert derived_slice[0].offset_interval == models.OffsetInterval(start=0, end=ROWS // 2 - 1)
    for dataset, (_, path) in ((root, root_slice), (derived, derived_slice)):
        declared = decode_arrow_schema(dataset.state().data_schema)
        written = pq.read_schema(path).remove_metadata()
        assert encode_arrow_schema(written) == encode_arrow_schema(declared)
        assert [f.nullable for f in written] == [f.nullable for f in declared]
    size_mb = arrow_size(root_slice[1]) / 2**20
    assert size_mb > 290, f"the root slice is only {size_mb:.0f} MB as Arrow"
    measured = {"peak_mb": peak_mb, "baseline_mb": baseline_mb, "slice_mb": size_mb}
    assert peak_mb - baseline_mb < size_mb / 2, json.dumps(measured)

    # Exporting the whole dataset with `reconcile sql` streams it too: Spark's tasks
    # write the result, the driver copies it to the file a batch at a time.
    query = f"SELECT * FROM `{ROOT}` ORDER BY offset DESC"
    small_out, out = tmp_path / "small.parquet", tmp_path / "all.parquet"
    sql_baseline_mb = run_measured(
        tmp_path / "small", "sql", "--format", "parquet", "--out", str(small_out), query
    )
    sql_peak_mb = run_measured(repo.root, "sql", "--format", "parquet", "--out", str(out), query)
    exported = pq.ParquetFile(out)
    assert exported.metadata.num_rows == ROWS
    assert exported.schema_arrow.names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "id",
        "payload",
    ]
    offsets = [b.column(0) for b in exported.iter_batches(batch_size=1 << 16, columns=["offset"])]
    assert pa.chunked_array(offsets).to_pylist() == list(range(ROWS - 1, -1, -1))
    assert pq.ParquetFile(small_out).metadata.num_rows == 10_000
    measured = {"peak_mb": sql_peak_mb, "baseline_mb": sql_baseline_mb, "slice_mb": size_mb}
    assert sql_peak_mb - sql_baseline_mb < size_mb / 2, json.dumps(measured)


def _slices(dataset: Dataset) -> list[tuple[models.DataSlice, Path]]:
    found = []
    for _, block in dataset.iter_blocks(dataset.head()):
        event = block.event
        if isinstance(event, models.AddData | models.ExecuteTransform) and event.new_data:
            found.append((event.new_data, dataset.layout.data_file(event.new_data.physical_hash)))
    return found


def test_the_digest_fed_batch_by_batch_is_the_digest_of_the_whole_table() -> None:
    table = pa.table(
        {
            "offset": pa.array(range(1000), pa.int64()),
            "name": pa.array([None if i % 7 == 0 else f"n{i}" for i in range(1000)]),
            "tags": pa.array([[f"t{i}"] * (i % 3) for i in range(1000)]),
            "when": pa.array(range(1000), pa.timestamp("ms", tz="UTC")),
        }
    )
    batches = table.to_batches(max_chunksize=128)
    digest = RecordDigest(table.schema)
    for batch in batches:
        digest.update(batch)
    assert digest.digest() == arrow_digest(pa.Table.from_batches(batches)) == arrow_digest(table)
