"""The one SparkSession of a process, started lazily and configured for ODF.

Starting a JVM takes seconds, and most plans (metadata-only changes) never need one, so
nothing here starts Spark until ``get_spark`` is called; ``spark_started`` lets a caller
report whether it was. pyspark itself is imported only then, to keep importing this
module cheap.

Settings come from ``[tool.reconciler.spark]`` in the repository's ``pyproject.toml``,
so the engine configuration is versioned and reviewed with the datasets, and can be
overridden per run (a CI job pointing at a cluster) by environment variables.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.config import ConfigError
from reconciler.engine import executor_watch
from reconciler.held_signals import held_signals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER_ENV = "RECONCILER_SPARK_MASTER"
CONF_ENV = "RECONCILER_SPARK_CONF"
LOCAL_IP_ENV = "SPARK_LOCAL_IP"
LOOPBACK = "127.0.0.1"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# Settings the reconciler's results depend on; a repository may not change them.
FIXED_CONF: Mapping[str, str] = {
    # ODF system and event time columns are timestamp(ms, UTC): with the session in UTC,
    # a TIMESTAMP means the same instant whatever the runner's local zone is.
    "spark.sql.session.timeZone": "UTC",
    # Overflow, bad casts and invalid input raise instead of silently turning into NULL,
    # so a transform cannot write wrong data that would then be hashed into the chain.
    "spark.sql.ansi.enabled": "true",
    # ODF stores timestamps as Parquet INT64 TIMESTAMP(MILLIS, UTC), not Spark's micros.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    # A reconciler run is a batch job: no web UI, no port to bind.
    "spark.ui.enabled": "false",
    # Queries reach only their declared inputs (DESIGN, Engine): no `parquet.`/path``
    # tables, which would also make query analysis read files from the runner.
    "spark.sql.runSQLOnFiles": "false",
    # Spark rewrites `${env:NAME}`, `${system:prop}` and `${spark.key}` in SQL text before
    # parsing it, so a query could read the runner's environment (its secrets) into a
    # slice, a plan error or a log line: queries are taken as written.
    "spark.sql.variable.substitute": "false",
    # Spark starts its Python workers as `python -m pyspark.daemon` in the directory the
    # run started in, the repository, and `-m` puts that directory first on their path:
    # a `pyspark/` folder a pull request adds would be imported instead of the real one,
    # with the apply's secrets and push token. PYTHONSAFEPATH keeps it off (Python 3.11+);
    # Spark hands `spark.executorEnv.*` to the workers in local mode and on a cluster.
    "spark.executorEnv.PYTHONSAFEPATH": "1",
    # Spark makes its catalog's default database folder on the first lookup of a table
    # it does not know (a misspelt dataset name), in the working directory: the user's
    # repository. No table is ever created (the sandbox allows queries only), so the
    # folder goes to the system's temporary one instead.
    "spark.sql.warehouse.dir": str(
        Path(tempfile.gettempdir()) / f"odf-reconciler-{os.getuid()}" / "spark-warehouse"
    ),
}

# Defaults a repository may override in its conf table.
DEFAULT_CONF: Mapping[str, str] = {
    # The console progress bar redraws on stderr and garbles the per-dataset report.
    "spark.ui.showConsoleProgress": "false",
    # Reconciled slices are small; Spark's default of 200 mostly schedules empty tasks.
    "spark.sql.shuffle.partitions": "4",
    # Local runs bind to loopback only; a cluster master needs a reachable driver host,
    # which its conf table then sets.
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    # Spark logs INFO by default and announces its logging set-up on every start, which
    # buries the reconciler's own report: warnings and errors only (log4j2.properties).
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
}


class EngineUnavailableError(RuntimeError):
    """Spark cannot start on this machine (no Java), so queries cannot be validated."""


@dataclass(frozen=True)
class SparkSettings:
    """Where and how to start Spark: master URL, application name, extra Spark conf.

    ``conf`` is a tuple of pairs (not a dict) so that settings stay immutable and
    hashable; ``spark_conf`` gives the full conf with the fixed settings applied.
    """

    master: str = "local[*]"
    app_name: str = "odf-reconciler"
    conf: tuple[tuple[str, str], ...] = ()
    executor_wait: float = 300.0
    """Seconds a job on a cluster may wait with no executor before it is cancelled
    (``executor_watch``): a dead worker made a run hang until its CI job timed out."""

    @classmethod
    def load(cls, repo_root: Path, environ: Mapping[str, str] | None = None) -> SparkSettings:
        """Read ``[tool.reconciler.spark]``, then apply ``RECONCILER_SPARK_MASTER`` and
        ``RECONCILER_SPARK_CONF`` (``key=value;key=value``) from ``environ``
        (default: the process environment), which win over the file."""
        return cls.of_pyproject(_read_toml(repo_root / "pyproject.toml"), environ)

    @classmethod
    def of_pyproject(
        cls, pyproject: dict[str, Any], environ: Mapping[str, str] | None = None
    ) -> SparkSettings:
        """The settings of a parsed ``pyproject.toml`` (with the environment's overrides):
        a pull request's plan takes them from the base branch's file, since a Spark conf
        such as ``spark.driver.extraJavaOptions`` would run code of the PR's choosing."""
        env = os.environ if environ is None else environ
        table = _table(pyproject, "tool.reconciler.spark")
        conf_table = _table(pyproject, "tool.reconciler.spark.conf")
        conf = {key: _conf_value(key, value) for key, value in _flatten(conf_table)}
        conf |= _parse_conf_env(env.get(CONF_ENV, ""))
        return cls(
            master=env.get(MASTER_ENV) or _string(table, "master", cls.master),
            app_name=_string(table, "app_name", cls.app_name),
            conf=tuple(conf.items()),
            executor_wait=_seconds(table, "executor_wait", cls.executor_wait),
        )

    def __post_init__(self) -> None:
        """A configured value that contradicts a fixed setting is an error rather than
        silently replaced, so nobody believes a repository runs in another time zone."""
        for key, value in self.conf:
            fixed = FIXED_CONF.get(key)
            if fixed is not None and value.lower() != fixed.lower():
                raise ConfigError(
                    f"Spark conf {key}={value!r} is not allowed: the reconciler requires {fixed!r}"
                )

    def spark_conf(self) -> dict[str, str]:
        """Defaults, then the configured conf, then the fixed settings."""
        return {**DEFAULT_CONF, **dict(self.conf), **FIXED_CONF}


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None


def _table(document: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The table at a dotted path; a missing table is empty."""
    table = document
    for key in dotted.split("."):
        value = table.get(key, {})
        if not isinstance(value, dict):
            raise ConfigError(f"[{dotted}] must be a table, got {value!r}")
        table = value
    return table


def _string(table: dict[str, Any], key: str, default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"[tool.reconciler.spark] {key} must be a string, got {value!r}")
    return value


def _seconds(table: dict[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ConfigError(
            f"[tool.reconciler.spark] {key} must be a number of seconds above 0, got {value!r}"
        )
    return float(value)


def _flatten(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Conf keys as Spark spells them. TOML reads an unquoted ``spark.ui.port = 1`` as
    nested tables, which is an easy mistake to make, so both spellings are accepted."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _conf_value(key: str, value: Any) -> str:
    """Spark conf values are strings; TOML numbers and booleans are accepted and spelt
    as Spark expects (``true``, not Python's ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(f"[tool.reconciler.spark.conf] {key} must be a string, got {value!r}")


def _parse_conf_env(text: str) -> dict[str, str]:
    """``key=value;key=value``; blank entries are skipped so a trailing ``;`` is fine."""
    conf: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{CONF_ENV}: expected key=value, got {entry!r}")
        conf[key.strip()] = value.strip()
    return conf


def java_available() -> bool:
    """Whether Spark's launcher will find Java: like ``spark-class``, it uses
    ``$JAVA_HOME/bin/java`` when JAVA_HOME is set and ``java`` on PATH otherwise."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return os.access(Path(java_home) / "bin" / "java", os.X_OK)
    return shutil.which("java") is not None


_lock = threading.Lock()
_session: SparkSession | None = None
_jvm_quiet = False


@contextmanager
def jvm_quiet() -> Iterator[None]:
    """While inside, a JVM that starts sends its standard error (its banner, its log
    lines, its Python workers') nowhere, for the rest of its life. Only the JVM's: the
    process's own standard error was pointed at /dev/null instead, and a Ctrl-C while
    Spark started said nothing of the stop it had asked for."""
    global _jvm_quiet
    _jvm_quiet = True
    try:
        yield
    finally:
        _jvm_quiet = False


def spark_started() -> bool:
    """Whether this process has started Spark (never starts it)."""
    return _session is not None


def get_spark(settings: SparkSettings) -> SparkSession:
    """The process's SparkSession, started on first use.

    There is one session per process, so only the first caller's settings count; later
    callers share that session whatever settings they pass.
    """
    global _session
    with _lock:
        if _session is None:
            _session = _start(settings)
        return _session


def _start(settings: SparkSettings) -> SparkSession:
    if not java_available():
        raise EngineUnavailableError(
            "validating queries needs Java 17: install openjdk-17-jre-headless "
            "(or set JAVA_HOME to a Java 17 installation)"
        )
    conf = settings.spark_conf()
    # Read by Spark's launcher scripts before the JVM starts; without it Spark resolves
    # the host name and may bind to an interface other than the driver's address.
    os.environ.setdefault(LOCAL_IP_ENV, conf["spark.driver.bindAddress"])
    # Slices are written by Spark's Python workers (writer.slice_files): the driver's
    # own interpreter, which has pyarrow, rather than whatever python3 is on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark
    from pyspark.sql import SparkSession

    # Without SPARK_HOME, pyspark takes the working directory's parent for Spark's home
    # when it holds a ``bin/spark-submit`` and a ``jars/`` folder, before the installed
    # package: run in a folder of a pull request's checkout (its ``datasets/``), the
    # command would start the pull request's script. A SPARK_HOME the environment sets
    # (a cluster's distribution) is the operator's choice and stays; an empty one (a
    # workflow's unset variable) is none, and pyspark would take the working directory.
    if not os.environ.get("SPARK_HOME"):
        os.environ["SPARK_HOME"] = str(Path(pyspark.__file__).parent)

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _launch_gateway_alone(settings, conf)
    session = builder.getOrCreate()
    _quiet_expected_errors()
    if not settings.master.startswith("local"):
        executor_watch.watch(session, settings.master, settings.executor_wait)
    return session


def _launch_gateway_alone(settings: SparkSettings, conf: dict[str, str]) -> None:
    """Start Spark's JVM in a session of its own, for the builder to use.

    A service manager stops a service, and ``kill -TERM -PGID`` a job, by signalling
    every process of its group: the JVM died of that SIGTERM (pyspark makes it ignore
    SIGINT only), failing the dataset at hand, where the reconciler would have finished
    its file and stopped. Alone, it hears only us; it still ends with this process,
    since it exits when its stdin pipe from us closes."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # started already (a test's own session)
        return
    spark_conf = SparkConf().setMaster(settings.master).setAppName(settings.app_name)
    spark_conf.setAll(list(conf.items()))
    quiet = {"stderr": subprocess.DEVNULL} if _jvm_quiet else {}
    # a stop that cut the start would leave the JVM running for good (held_signals)
    with held_signals("Spark has started (a few seconds)"):
        gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True, **quiet})
    SparkContext._ensure_initialized(gateway=gateway, conf=spark_conf)


def _quiet_expected_errors() -> None:
    """pyspark logs every SQL analysis error with its JVM stack trace at ERROR before
    raising it. The reconciler reports bad queries as results (and re-raises the rest),
    so those log lines only duplicate the exception on stderr."""
    from pyspark.logger import PySparkLogger

    PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
