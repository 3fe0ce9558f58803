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


def _fraction(least: float, most: float) -> Callable[[str], bool]:
    """A number from ``least`` to ``most``: ``spark.memory.fraction = 0`` leaves tasks no
    memory, and Spark refuses to start (``onHeapExecutionMemory must be > 0``)."""

    def accepts(value: str) -> bool:
        try:
            return least <= float(value) <= most
        except ValueError:
            return False

    return accepts


def _count(least: int, most: int = 2**31 - 1) -> Callable[[str], bool]:
    """A whole number from ``least`` to ``most`` (Spark reads counts as an ``int``)."""

    def accepts(value: str) -> bool:
        text = value.strip()
        return text.isdigit() and least <= int(text) <= most

    return accepts


def _size(least: int) -> Callable[[str], bool]:
    """A byte size of at least ``least`` bytes and below 2^63 (Spark's ``long``):
    ``spark.sql.files.maxPartitionBytes = 0`` stopped every read (``step cannot be 0``)."""

    def accepts(value: str) -> bool:
        found = _bytes(value)
        return found is not None and least <= found < 2**63

    return accepts


def _bytes(value: str) -> int | None:
    """The bytes a Spark size means (a bare number is bytes), or None if it is none."""
    found = re.fullmatch(r"([0-9]+)\s*([kmgtp]?)b?", value.strip(), re.IGNORECASE)
    if found is None:
        return None
    return int(found.group(1)) * _UNIT_BYTES[(found.group(2) or "b").lower()]


def _duration(least_ms: int, infinite: bool = False) -> Callable[[str], bool]:
    """A duration of at least ``least_ms`` milliseconds and at most a year (Spark keeps
    durations in a ``long`` of milliseconds, and ``99999999999999999d`` came back as
    ``-1000ms``); with ``infinite``, ``-1`` too (no time limit)."""

    def accepts(value: str) -> bool:
        text = value.strip().lower()
        if infinite and text == "-1":
            return True
        found = re.fullmatch(r"([0-9]+)\s*(us|ms|s|m|min|h|d)?", text)
        if found is None:
            return False
        micros = int(found.group(1)) * _UNIT_US[found.group(2) or "s"]
        return least_ms * 1000 <= micros <= _YEAR_US

    return accepts


def _memory(value: str) -> bool:
    """A JVM memory size of at least the 450 MiB Spark asks of a driver or executor (a
    bare number is MiB here, as the JVM reads it)."""
    text = value.strip()
    found = _bytes(text + "m" if text.isdigit() else text)
    return found is not None and _MIN_MEMORY <= found < 2**63


def _positive_number(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False


_UNIT_BYTES = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_UNIT_US = {"us": 1, "ms": 10**3, "s": 10**6, "m": 60 * 10**6, "min": 60 * 10**6}
_UNIT_US |= {"h": 60 * _UNIT_US["m"], "d": 24 * 60 * _UNIT_US["m"]}
_YEAR_US = 365 * _UNIT_US["d"]
_MIN_MEMORY = 471_859_200  # Spark refuses less: "must be at least 471859200"
# More partitions than this only cost: Spark's bookkeeping for 2^31 of them ran out of
# memory ("Requested array size exceeds VM limit") before any task ran.
_MAX_PARTITIONS = 100_000
COUNT = ValueForm("a whole number from 1 to 2147483647", _count(1))
COUNT_OR_ZERO = ValueForm("a whole number from 0 to 2147483647", _count(0))
PARTITIONS = ValueForm(f"a whole number from 1 to {_MAX_PARTITIONS}", _count(1, _MAX_PARTITIONS))
MEMORY = ValueForm("a memory size of at least 450m (a unit: 512m, 4g)", _memory)
SIZE = ValueForm("a size of at least 1 byte (bytes, or with a unit: 64m, 4g)", _size(1))
# A read split into partitions of a few bytes runs a task per few bytes: "1" made the
# ingest of a 47 KB file take three minutes.
PARTITION_BYTES = ValueForm("a size of at least 1m (64m, 128m)", _size(2**20))
SIZE_OR_ZERO = ValueForm("a size (bytes, or with a unit: 64m, 4g)", _size(0))
RESULT_SIZE = ValueForm(
    "0 (no limit) or a size of at least 1m", lambda v: _size(2**20)(v) or _bytes(v) == 0
)
SIZE_OR_OFF = ValueForm(
    "a size (bytes, or with a unit: 10m), or -1 for none",
    lambda v: v.strip() == "-1" or _size(0)(v),
)
DURATION = ValueForm(
    "a duration of at most a year (seconds, or with a unit: 500ms, 120s, 5min, 1h)",
    _duration(0),
)
POSITIVE_DURATION = ValueForm(
    "a duration above 0 and at most a year (seconds, or with a unit: 500ms, 120s, 1h)",
    _duration(1),
)
NETWORK_TIMEOUT = ValueForm(
    "a duration above the executors' 10s heartbeat and at most a year (120s, 5min)",
    _duration(10_001),
)
BROADCAST_TIMEOUT = ValueForm(
    "a duration above 0 and at most a year (300s, 10min), or -1 for none",
    _duration(1, infinite=True),
)
BOOLEAN = ValueForm("true or false", _matches(r"true|false"))
MEMORY_FRACTION = ValueForm("a number from 0.01 to 1", _fraction(0.01, 1.0))
STORAGE_FRACTION = ValueForm("a number from 0 to 0.99", _fraction(0.0, 0.99))
FACTOR = ValueForm("a number above 0", _positive_number)

TUNING: Mapping[str, ValueForm] = {
    "spark.sql.shuffle.partitions": PARTITIONS,
    "spark.default.parallelism": PARTITIONS,
    "spark.sql.files.maxPartitionBytes": PARTITION_BYTES,
    "spark.sql.files.openCostInBytes": SIZE_OR_ZERO,
    "spark.sql.autoBroadcastJoinThreshold": SIZE_OR_OFF,
    "spark.sql.broadcastTimeout": BROADCAST_TIMEOUT,
    "spark.sql.adaptive.enabled": BOOLEAN,
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": SIZE,
    "spark.sql.adaptive.autoBroadcastJoinThreshold": SIZE_OR_OFF,
    "spark.sql.adaptive.coalescePartitions.enabled": BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": SIZE,
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": PARTITIONS,
    "spark.sql.adaptive.localShuffleReader.enabled": BOOLEAN,
    "spark.sql.adaptive.skewJoin.enabled": BOOLEAN,
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": FACTOR,
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": SIZE,
    "spark.driver.memory": MEMORY,
    "spark.driver.cores": COUNT,
    "spark.driver.maxResultSize": RESULT_SIZE,
    "spark.executor.memory": MEMORY,
    "spark.executor.memoryOverhead": SIZE_OR_ZERO,
    "spark.executor.cores": COUNT,
    "spark.executor.instances": COUNT,
    "spark.cores.max": COUNT,
    "spark.task.cpus": COUNT,
    "spark.memory.fraction": MEMORY_FRACTION,
    "spark.memory.storageFraction": STORAGE_FRACTION,
    "spark.memory.offHeap.enabled": BOOLEAN,
    "spark.memory.offHeap.size": SIZE_OR_ZERO,
    "spark.dynamicAllocation.enabled": BOOLEAN,
    "spark.dynamicAllocation.shuffleTracking.enabled": BOOLEAN,
    "spark.dynamicAllocation.minExecutors": COUNT_OR_ZERO,
    "spark.dynamicAllocation.maxExecutors": COUNT,
    "spark.dynamicAllocation.initialExecutors": COUNT_OR_ZERO,
    "spark.dynamicAllocation.executorIdleTimeout": POSITIVE_DURATION,
    "spark.dynamicAllocation.cachedExecutorIdleTimeout": POSITIVE_DURATION,
    "spark.dynamicAllocation.schedulerBacklogTimeout": POSITIVE_DURATION,
    "spark.network.timeout": NETWORK_TIMEOUT,
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
