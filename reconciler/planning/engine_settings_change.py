"""Spark settings a pull request may not change on its own plan's approval.

Once merged, ``[tool.reconciler.spark]`` is what the scheduled run starts Spark with,
holding the runner's credentials. Most of Spark's settings can make it load or run code
(``spark.driver.extraJavaOptions`` with a ``-javaagent``, ``spark.jars``, plugins,
listeners, catalogs, extensions, any class name) or send the data elsewhere (the master
URL, the event log's folder), so such a change is a change of code, as one under
``.github/`` is: the plan of a pull request (``--base``) reports each added or changed
setting outside the tuning ones (``spark_tuning``) as an error at its line, and a
maintainer merges it knowingly, as the shipped workflows make them do for ``.github/``.
A tuning setting's value is checked for its form, as Spark would read it. The pull
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
from .spark_tuning import TUNING, task_cores_problem, value_problem

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
        problems.append(
            _problem(pyproject, text, "master", _CODE_CHANGE.format(what="the master URL"))
        )
    was = dict(before.conf)
    changed = [(key, value) for key, value in now.conf if was.get(key) != value]
    for key, value in changed:
        if key not in TUNING:
            problems.append(_problem(pyproject, text, key, _CODE_CHANGE.format(what=key)))
        elif (wrong := value_problem(key, value)) is not None:
            problems.append(_problem(pyproject, text, key, f"{wrong}: {_WOULD_STOP}"))
    cores_changed = {"spark.task.cpus", "spark.executor.cores"} & {key for key, _ in changed}
    too_many = task_cores_problem(now.master, dict(now.conf)) if cores_changed else None
    if too_many is not None:
        problems.append(_problem(pyproject, text, "spark.task.cpus", too_many))
    return problems


_CODE_CHANGE = (
    "Spark setting {what} changes in this pull request: outside the tuning settings"
    " (partitions, memory, cores, timeouts) a Spark setting can make the scheduled"
    " run load or run code, or send its data elsewhere, with the runner's"
    " credentials. It is a change of code: a maintainer reviews and merges it as"
    " such, since this plan cannot approve it"
)
_WOULD_STOP = "every scheduled run would stop when it starts Spark"


def _problem(pyproject: Path, text: str, key: str, message: str) -> Problem:
    table = _TABLE if key == "master" else f"{_TABLE}.conf"
    field = f"{_TABLE}.master" if key == "master" else f"{_TABLE}.conf.{key}"
    return Problem(
        message,
        location=Location(str(pyproject), setting_line(text, table, key)),
        field=field,
    )
