"""Spark settings a pull request may not change on its own plan's approval.

Once merged, ``[tool.reconciler.spark]`` is what the scheduled run starts Spark with,
holding the runner's credentials. Most of Spark's settings can make it load or run code
(``spark.driver.extraJavaOptions`` with a ``-javaagent``, ``spark.jars``, plugins,
listeners, catalogs, extensions, any class name) or send the data elsewhere (the master
URL, the event log's folder), so such a change is a change of code, as one under
``.github/`` is: the plan of a pull request (``--base``) reports each added or changed
setting outside the tuning ones below as an error at its line, and a maintainer merges
it knowingly, as the shipped workflows make them do for ``.github/``. The pull
request's own plan already analyses queries with the base's settings
(``planning.compose``); this is about what the merge would run. Removing a setting
adds no code, and tuning (partitions, memory, cores, timeouts) changes only how fast
and in how much memory the same work runs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..config import ConfigError, RepoConfig, setting_line
from ..engine.session import SparkSettings
from ..gitloop import gitops
from ..plan.model import Location, Problem

TUNING = (
    "spark.sql.shuffle.partitions",
    "spark.default.parallelism",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes",
    "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.broadcastTimeout",
    "spark.sql.adaptive.",
    "spark.driver.memory",
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.executor.memory",
    "spark.executor.memoryOverhead",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.cores.max",
    "spark.task.cpus",
    "spark.memory.",
    "spark.dynamicAllocation.",
    "spark.network.timeout",
    "spark.locality.wait",
    "spark.ui.showConsoleProgress",
)
"""Settings (or, ending in a dot, families) a pull request may add or change: each
takes a number, a size or a duration."""

_TABLE = "tool.reconciler.spark"


def engine_setting_problems(config: RepoConfig, base_ref: str) -> list[Problem]:
    """An error for each Spark setting the working tree adds or changes against the
    ``pyproject.toml`` of ``base_ref`` (the defaults without one), other than tuning.
    Neither side's environment counts: it is the runner's, not the pull request's."""
    pyproject = config.root / "pyproject.toml"
    base_text = gitops.file_at(config.root, base_ref, pyproject)
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    try:
        before = SparkSettings.of_pyproject(tomllib.loads(base_text or ""), environ={})
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"pyproject.toml at {base_ref}: {e}") from None
    now = SparkSettings.of_pyproject(tomllib.loads(text), environ={})
    problems = []
    if now.master != before.master:
        problems.append(_problem(pyproject, text, "master", f"{_TABLE}.master", "the master URL"))
    was = dict(before.conf)
    for key, value in now.conf:
        if was.get(key) == value or _tuning(key):
            continue
        problems.append(_problem(pyproject, text, key, f"{_TABLE}.conf.{key}", key))
    return problems


def _tuning(key: str) -> bool:
    return any(key.startswith(t) if t.endswith(".") else key == t for t in TUNING)


def _problem(pyproject: Path, text: str, key: str, field: str, what: str) -> Problem:
    table = _TABLE if key == "master" else f"{_TABLE}.conf"
    return Problem(
        f"Spark setting {what} changes in this pull request: outside the tuning settings"
        " (partitions, memory, cores, timeouts) a Spark setting can make the scheduled"
        " run load or run code, or send its data elsewhere, with the runner's"
        " credentials. It is a change of code: a maintainer reviews and merges it as"
        " such, since this plan cannot approve it",
        location=Location(str(pyproject), setting_line(text, table, key)),
        field=field,
    )
