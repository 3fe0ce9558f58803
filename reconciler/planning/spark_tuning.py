"""The Spark settings a pull request may tune, and the form each one's value takes.

Tuning changes only how fast and in how much memory the same work runs, so a pull
request may change it on its own plan's approval. Each setting is named in full: a
family such as ``spark.sql.adaptive.`` also holds settings that load a class by name
(``spark.sql.adaptive.customCostEvaluatorClass``). A value is checked for its form (a
count, a size, a duration, a fraction, a boolean), since a value Spark cannot read, or
a task that needs more cores than the run has, passes the plan and then stops every
scheduled run when it starts Spark.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ValueForm:
    """What a setting's value must look like, and how the error says so."""

    description: str
    accepts: Callable[[str], bool]


def _matches(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.IGNORECASE)
    return lambda value: compiled.fullmatch(value.strip()) is not None


def _fraction(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except ValueError:
        return False


def _count(least: int) -> Callable[[str], bool]:
    """A whole number Spark reads as an ``int``: from ``least`` to 2,147,483,647."""

    def accepts(value: str) -> bool:
        text = value.strip()
        return text.isdigit() and least <= int(text) <= _INT_MAX

    return accepts


def _memory(value: str) -> bool:
    """A JVM memory size of at least the 450 MiB Spark asks of a driver or executor."""
    found = re.fullmatch(_SIZE_PATTERN, value.strip(), re.IGNORECASE)
    if found is None:
        return False
    digits = re.match(r"[0-9]+", value.strip())
    assert digits is not None
    unit = value.strip()[digits.end() :].strip().lower()[:1] or "m"  # JVM default: MiB
    return int(digits.group()) * _UNIT_BYTES.get(unit, 1) >= _MIN_MEMORY


def _positive_number(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False


# Spark's byte strings: a number, or one with k, m, g, t or p and an optional b.
_SIZE_PATTERN = r"[0-9]+\s*(?:[kmgtp]b?|b)?"
_INT_MAX = 2**31 - 1
_UNIT_BYTES = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_MIN_MEMORY = 471_859_200  # Spark refuses less: "must be at least 471859200"
COUNT = ValueForm("a whole number from 1 to 2147483647", _count(1))
COUNT_OR_ZERO = ValueForm("a whole number from 0 to 2147483647", _count(0))
MEMORY = ValueForm("a memory size of at least 450m (a unit: 512m, 4g)", _memory)
SIZE = ValueForm("a size (bytes, or with a unit: 64m, 4g)", _matches(_SIZE_PATTERN))
SIZE_OR_OFF = ValueForm(
    "a size (bytes, or with a unit: 10m), or -1 for none", _matches(rf"-1|{_SIZE_PATTERN}")
)
DURATION = ValueForm(
    "a duration (seconds, or with a unit: 500ms, 120s, 5min, 1h)",
    _matches(r"[0-9]+\s*(?:us|ms|s|m|min|h|d)?"),
)
BOOLEAN = ValueForm("true or false", _matches(r"true|false"))
FRACTION = ValueForm("a number from 0 to 1", _fraction)
FACTOR = ValueForm("a number above 0", _positive_number)

TUNING: Mapping[str, ValueForm] = {
    "spark.sql.shuffle.partitions": COUNT,
    "spark.default.parallelism": COUNT,
    "spark.sql.files.maxPartitionBytes": SIZE,
    "spark.sql.files.openCostInBytes": SIZE,
    "spark.sql.autoBroadcastJoinThreshold": SIZE_OR_OFF,
    "spark.sql.broadcastTimeout": DURATION,
    "spark.sql.adaptive.enabled": BOOLEAN,
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": SIZE,
    "spark.sql.adaptive.autoBroadcastJoinThreshold": SIZE_OR_OFF,
    "spark.sql.adaptive.coalescePartitions.enabled": BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": SIZE,
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": COUNT,
    "spark.sql.adaptive.localShuffleReader.enabled": BOOLEAN,
    "spark.sql.adaptive.skewJoin.enabled": BOOLEAN,
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": FACTOR,
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": SIZE,
    "spark.driver.memory": MEMORY,
    "spark.driver.cores": COUNT,
    "spark.driver.maxResultSize": SIZE,
    "spark.executor.memory": MEMORY,
    "spark.executor.memoryOverhead": SIZE,
    "spark.executor.cores": COUNT,
    "spark.executor.instances": COUNT,
    "spark.cores.max": COUNT,
    "spark.task.cpus": COUNT,
    "spark.memory.fraction": FRACTION,
    "spark.memory.storageFraction": FRACTION,
    "spark.memory.offHeap.enabled": BOOLEAN,
    "spark.memory.offHeap.size": SIZE,
    "spark.dynamicAllocation.enabled": BOOLEAN,
    "spark.dynamicAllocation.shuffleTracking.enabled": BOOLEAN,
    "spark.dynamicAllocation.minExecutors": COUNT_OR_ZERO,
    "spark.dynamicAllocation.maxExecutors": COUNT,
    "spark.dynamicAllocation.initialExecutors": COUNT_OR_ZERO,
    "spark.dynamicAllocation.executorIdleTimeout": DURATION,
    "spark.dynamicAllocation.cachedExecutorIdleTimeout": DURATION,
    "spark.dynamicAllocation.schedulerBacklogTimeout": DURATION,
    "spark.network.timeout": DURATION,
    "spark.locality.wait": DURATION,
    "spark.ui.showConsoleProgress": BOOLEAN,
}
"""Every setting a pull request may add or change, by its full name."""


def value_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not one ``key`` takes (None: it is); ``key`` is tuning."""
    form = TUNING[key]
    if form.accepts(value):
        return None
    return f"Spark setting {key} = {value!r} is not {form.description}"


def task_cores_problem(master: str, conf: Mapping[str, str]) -> str | None:
    """Why the cores a task asks for (``spark.task.cpus``) are more than an executor
    has: Spark then never schedules a task, or refuses to start (None: they fit, or
    the cores are the cluster's, unknown here)."""
    task = conf.get("spark.task.cpus", "1").strip()
    if not task.isdigit():
        return None  # its form is reported by ``value_problem``
    cores, where = _executor_cores(master, conf)
    if cores is None or int(task) <= cores:
        return None
    return (
        f"Spark setting spark.task.cpus = {task!r} asks more cores for each task than {where}"
        f" has ({cores}): no task could run"
    )


def _executor_cores(master: str, conf: Mapping[str, str]) -> tuple[int | None, str]:
    executor = conf.get("spark.executor.cores", "").strip()
    if executor.isdigit():
        return int(executor), "spark.executor.cores"
    local = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]|local", master.strip())
    if local is None:
        return None, ""
    threads = local.group(1)
    if threads is None:
        return 1, f"the master {master!r}"
    if threads == "*":
        return os.cpu_count(), f"the master {master!r} on this machine"
    return int(threads), f"the master {master!r}"
