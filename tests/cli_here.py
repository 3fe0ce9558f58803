"""``reconcile`` run in the test's own process, on the test session's SparkSession.

A ``reconcile`` process starts a JVM of its own and compiles its first queries anew: on
2 cores an apply of two datasets of a few rows took 10 to 20 s that way, most of the
suite's time, where the same command here takes a second or two. The command is the
same code from ``main`` down (typer parses the same arguments, the command writes the same
files, runs the same git), so a test runs it here unless what it checks is being a
process of its own: a signal, a kill, a race between runs, the repository's own Spark
settings or environment, the exit of a crash.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest_spark import TEST_SETTINGS
from typer.testing import CliRunner

from reconciler.cli import app
from reconciler.engine.session import get_spark, spark_started


def reconcile_here(
    args: list[str], stdin: str | None = None, cwd: Path | None = None, spark: bool = True
) -> subprocess.CompletedProcess[str]:
    """``reconcile ARGS`` here, as ``subprocess.run`` would give it: its exit code, standard
    output and standard error. An exception the command lets out is raised, with its
    traceback, where a process would have printed it and exited 1.

    ``spark=False`` is for a command that never starts Spark (``log``, ``show``): no JVM
    is started for it, and one the command starts after all fails the test."""
    # The session a command asks for is this one, started with the test settings: one
    # started by the command would have the repository's for the rest of the tests.
    if spark:
        get_spark(TEST_SETTINGS)
    started = spark_started()
    with _working_directory(cwd):
        result = CliRunner().invoke(app, args, input=stdin, prog_name="reconcile")
    assert started or not spark_started(), f"reconcile {args} started Spark: pass spark=True"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["reconcile", *args], result.exit_code, result.stdout, result.stderr
    )


@contextmanager
def _working_directory(cwd: Path | None) -> Iterator[None]:
    """In ``cwd`` for the command (as a process started there), back where it was after."""
    if cwd is None:
        yield
        return
    before = Path.cwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)
