"""A class-data archive for the JVMs the test session starts: Spark starts in half the time.

Many tests run ``reconcile`` in a process of its own (crash recovery, the git loop, the
CLI's conventions, the wheel), and each such process starts a JVM that loads and
compiles Spark anew: on a 2-core machine about 12 s to a SparkSession and 18 s to the
end of a first job, 20 and 32 CPU-seconds. A dynamic class-data-sharing archive (JDK
13+: ``-XX:ArchiveClassesAtExit``, then ``-XX:SharedArchiveFile``) holds the loaded
classes, and limiting the JIT to its first tier skips the optimising compiler, whose
work small test data never pays back; measured on that machine, 5 s to the session and
7 s to the end of the first job. The serial collector instead of G1 saves another CPU-second
and about 0.7 s a start (8.2 to 6.0-6.8 CPU-s, wall 7.0 to 5.5-6.5 s): a test JVM's heap is
small, and G1's concurrent threads only compete with the other test worker for the cores.

The archive is made once by a short Spark run in a child process and kept in pytest's
cache under a key of the Java build, the pyspark version and the interpreter, so a
later session reuses it. ``SPARK_SUBMIT_OPTS`` hands these options to every driver JVM
``spark-submit`` starts from then on, this process's own included. A JVM that cannot use
the archive (another build) ignores it without a word, and when the archive cannot be
made the tests run as before, only slower. Nothing here reaches the product: it is the
test session's environment only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

OPTS_ENV = "SPARK_SUBMIT_OPTS"
LEAN = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"

# A run that loads what the tests use: a session, a job, a shuffle, SQL, Parquet written
# and read, and the Arrow hand-over to a Python worker. The JVM is stopped by closing its
# standard input (pyspark's gateway exits on it) and waited for, as it writes the
# archive on its way out.
_WARM_UP = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import pyarrow as pa
    from pyspark import SparkContext
    from reconciler.engine.session import SparkSettings, get_spark
    from reconciler.writer.slice_files import Output, write_frame

    spark = get_spark(SparkSettings(master="local[2]"))
    out = Path(sys.argv[1])
    frame = spark.range(1000).selectExpr("id % 7 AS k", "CAST(id AS STRING) AS v")
    frame.write.parquet(str(out / "parquet"))
    spark.read.parquet(str(out / "parquet")).createOrReplaceTempView("t")
    spark.sql("SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY k").collect()
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    write_frame(frame, Output(out / "slice.parquet", schema))
    process = SparkContext._gateway.proc
    spark.stop()
    process.stdin.close()
    process.wait(timeout=300)
    """
)


def _key() -> str:
    """What the archive depends on: the Java build, pyspark's jars, this interpreter."""
    import pyspark

    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=60, check=True
    ).stderr
    return hashlib.sha256(f"{java}|{pyspark.__version__}|{sys.prefix}".encode()).hexdigest()[:16]


def _made(folder: Path, key: str) -> Path | None:
    """The archive for ``key``, made now unless an earlier session made it; None when
    the run made none (a failing run raises, and the caller goes without)."""
    archive = folder / f"spark-{key}.jsa"
    # The test session's workers (pytest-xdist) all get here at once: one makes the
    # archive while the others wait on the lock, then find it made.
    with open(folder / "making.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file() and archive.stat().st_size:
            return archive
        return _make(folder, archive)


def _make(folder: Path, archive: Path) -> Path | None:
    """Run the warm-up with the archive written at its exit; the archive, or None."""
    scratch = folder / f"warm-up-{os.getpid()}"
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    env = {**os.environ, OPTS_ENV: f"-XX:ArchiveClassesAtExit={partial} {LEAN}"}
    try:
        subprocess.run(
            [sys.executable, "-c", _WARM_UP, str(scratch)],
            env=env,
            capture_output=True,
            timeout=600,
            check=True,
        )
        if not (partial.is_file() and partial.stat().st_size):
            return None
        partial.replace(archive)
        return archive
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test: when any collected test uses Spark (the ``spark``
    fixture, which every test that starts a ``reconcile`` with Spark asks for too),
    make or find the archive and set ``SPARK_SUBMIT_OPTS`` for the JVMs to come."""
    if os.environ.get(OPTS_ENV) or not any(
        "spark" in getattr(item, "fixturenames", ()) for item in session.items
    ):
        return
    cache = session.config.cache
    if cache is None:
        return
    try:
        archive = _made(cache.mkdir("jvm-class-archive"), _key())
    except (OSError, subprocess.SubprocessError):
        return
    if archive is not None:
        os.environ[OPTS_ENV] = f"-XX:SharedArchiveFile={archive} {LEAN}"
