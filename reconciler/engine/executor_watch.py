"""A job waiting for executors that will never come: a cluster whose workers died.

On a cluster master, a job with no executor to run on waits: Spark logs "Initial job
has not accepted any resources" now and then and never fails, so a scheduled run whose
only worker died hung until the CI job's time limit killed it, with no word of why in
its report. The watch looks at the cluster's executors every few seconds while a job is
active; once a job has waited ``executor_wait`` seconds with none, it cancels the jobs,
and the step's error (``reason``, through ``errors.describe``) says what happened. Until
an executor comes back, later jobs are cancelled at once, so the run ends in moments
rather than waiting again for each dataset. A local master runs tasks in the driver and
is not watched.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by errors.describe, which every command may call
    from pyspark.sql import SparkSession

_PERIOD = 2.0  # seconds between looks: a py4j call each, negligible beside a job

_reason: str | None = None


def explains(error_text: str) -> str | None:
    """Why the watch cancelled the jobs, when ``error_text`` (an engine error with its
    JVM trace) is a job's cancellation and the watch did it; else None."""
    return _reason if _reason is not None and "cancel" in error_text else None


def watch(spark: SparkSession, master: str, wait: float) -> None:
    """Start watching ``spark``'s executors (a daemon thread, for the session's life)."""
    thread = threading.Thread(
        target=_watch, args=(spark, master, wait), name="executor-watch", daemon=True
    )
    thread.start()


def _watch(spark: SparkSession, master: str, wait: float) -> None:
    global _reason
    context = spark.sparkContext
    since: float | None = None
    while True:
        time.sleep(_PERIOD)
        try:
            active = context.statusTracker().getActiveJobsIds()
            # the driver's own block manager is listed too
            executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1
        except Exception:  # the session stopped: nothing left to watch
            return
        if executors > 0:
            since, _reason = None, None
            continue
        if not active:
            continue
        now = time.monotonic()
        since = now if since is None else since
        if _reason is None and now - since < wait:
            continue
        _reason = (
            f"no Spark executor to run on for {wait:g} s (master {master}): every worker"
            " is gone or cannot reach the driver; the jobs were cancelled (executor_wait"
            " in [tool.reconciler.spark])"
        )
        context.cancelAllJobs()
