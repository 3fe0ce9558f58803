"""What every command shares: the session, exit codes, errors and the engine's start.

The command line is assembled from this module and ``options`` alone, so neither imports
anything heavy at module level: the protocol models, pyarrow and the engine are loaded
by the command that needs them, and ``reconcile --help`` needs none.

Exit codes are part of the interface CI scripts depend on:

- 0: done; for ``plan --detailed-exitcode``, nothing would change.
- 1: something failed (a dataset, a check, a query, a bad repository).
- 2: only ``plan --detailed-exitcode``: something would change.
- 64: a usage error (sysexits' EX_USAGE), never 2, so that a typo in a CI script is not
  taken for "changes".
- 130: interrupted (Ctrl-C), as a shell reports a SIGINT.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import typer
from typer._click.core import Context
from typer._click.exceptions import ClickException, UsageError  # typer vendors click
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from ..config import ConfigError, RepoConfig
from ..engine.errors import describe
from ..masking import Mask, referenced_secrets
from ..plan.selection import Graph, SelectionError, parse_selectors, select
from ..wording import close_names
from . import interrupt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..apply.outcome import Outcome
    from ..ingest.pull import IngestContext
    from ..odf.repository import Dataset, OdfRepository
    from ..odf.timestamps import Timestamp

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CHANGES = 2
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""A reader that closed standard output early (``reconcile sql … | head``): no message,
and the status of a process killed by SIGPIPE, as git's and coreutils' commands end."""

JAVA_MISSING = (
    "Java was not found: install a Java 17 runtime "
    "(apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
)


class JavaNotFound(BaseException):
    """Spark cannot start because there is no Java.

    A BaseException, like KeyboardInterrupt, so that no dataset's error handling takes it
    for that dataset's failure: without an engine the whole run stops, with one line.
    """

    def __str__(self) -> str:
        return JAVA_MISSING


@dataclass
class Session:
    """What every command needs: the repository's configuration and the global options."""

    config: RepoConfig
    system_time: Timestamp | None = None
    fetch_uncacheable: bool = False
    quiet: bool = False
    lock_timeout: float = 0.0
    verbose: bool = False
    started: float = field(default_factory=time.monotonic)
    directory: Path = Path(".")
    """Where the command runs as if started (``-C``): relative paths given are taken
    from there, as ``git -C`` takes them."""

    @overload
    def at(self, path: Path) -> Path: ...
    @overload
    def at(self, path: None) -> None: ...
    def at(self, path: Path | None) -> Path | None:
        """A path given on the command line, taken from ``-C``'s directory."""
        if path is None or path.is_absolute():
            return path
        return self.directory / path

    def out(self, path: Path | None) -> Path | None:
        """An ``--out`` file, taken from ``-C``'s directory, whose folder must exist: a
        wrong path is refused before the work it would receive, not after."""
        where = self.at(path)
        if where is not None and not where.parent.is_dir():
            taken = path is not None and not path.is_absolute() and self.directory != Path(".")
            relative = f" (a relative path is taken from -C {self.directory})" if taken else ""
            raise usage_error(f"--out {path}: folder {where.parent} does not exist{relative}")
        return where

    @property
    def odf(self) -> OdfRepository:
        return self.config.repository()

    def check_store(self) -> None:
        """Before a run writes anything (not even the lock file): the data store must be
        reachable with the credentials at hand, or the run stops with one line."""
        problem = self.store_problem()
        if problem is not None:
            raise fail(f"error: {problem}")

    def store_problem(self) -> str | None:
        """Why the data store cannot be used with the credentials at hand; None if it can
        (or the data lives in the dataset folders)."""
        from ..odf.store import StoreError

        store = self.odf.store
        if store is None:
            return None
        if (problem := self.cache_problem()) is not None:
            return problem
        try:
            store.check()
        except StoreError as e:
            return str(e)
        return None

    def cache_problem(self) -> str | None:
        """Why the data store's cache cannot be trusted (``gitops.cache_problem``); None
        without a store outside git, which has no cache."""
        if self.config.data_store == "odf":
            return None
        from ..gitloop.gitops import cache_problem

        return cache_problem(self.config)

    def check_cache(self) -> None:
        """For commands that read the store without writing it (``sql``, ``verify``)."""
        if (problem := self.cache_problem()) is not None:
            raise fail(f"error: {problem}")

    def secret_mask(self) -> Mask:
        """Masks the values of the environment variables the manifests' templates name.
        A dataset's cause passes through it before it is shown, written as JSON or
        committed: a fetch masks what it words itself, but a reader's or the engine's
        error can quote a resolved value too (a file path, a record a server echoed)."""
        manifests = [
            path.read_text(encoding="utf-8", errors="replace")
            for path in self.config.manifest_paths()
        ]
        return Mask(referenced_secrets(manifests, os.environ))

    def say(self, text: str, err: bool = False) -> None:
        """A line that ``-q`` leaves out (errors and final lines use ``typer.echo``)."""
        if not self.quiet:
            typer.echo(text, err=err)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spark(self) -> SparkSession:
        """The process's SparkSession, started on first use: without Java, one clear
        error; without ``-v``, none of the JVM's own start-up lines on stderr."""
        from ..engine.session import SparkSettings, get_spark, java_available, spark_started

        if spark_started():
            return get_spark(SparkSettings.load(self.config.root))
        if not java_available():
            raise JavaNotFound()
        with self.engine_start():
            return get_spark(SparkSettings.load(self.config.root))

    @contextmanager
    def engine_start(self) -> Iterator[None]:
        """Around code that may start the JVM: its standard error goes nowhere unless
        ``-v`` (``session.jvm_quiet``), and the Ctrl-C handler pyspark installs is
        replaced by ours again afterwards."""
        from ..engine.session import jvm_quiet

        with contextlib.nullcontext() if self.verbose else jvm_quiet():
            try:
                yield
            finally:
                interrupt.restore()

    def override(
        self, system_time: str | None, fetch_uncacheable: bool, lock_timeout: float | None = None
    ) -> None:
        """Options given after the subcommand win over the same ones given before it."""
        if system_time is not None:
            self.system_time = parse_time(system_time)
        if lock_timeout is not None:
            self.lock_timeout = lock_timeout
        self.fetch_uncacheable = self.fetch_uncacheable or fetch_uncacheable

    def ingest_context(self, progress: Callable[[str], None] = lambda _: None) -> IngestContext:
        from ..ingest.fetch import DownloadLimits
        from ..ingest.pull import IngestContext

        return IngestContext(
            spark=self.spark,
            base_dir=self.config.root,
            env=dict(os.environ),
            system_time=self.system_time,
            fetch_uncacheable=self.fetch_uncacheable,
            progress=progress,
            source_roots=self.config.source_roots,
            reserved=self.config.reserved_folders(),
            scratch=self.config.work_dir,
            max_decompressed_size=self.config.max_decompressed_size,
            download_limits=DownloadLimits(
                self.config.max_download_size,
                self.config.max_download_seconds,
                interrupt.requested,
            ),
        )


class _OwnWarnings(logging.Handler):
    """``warning: …`` on the standard error of the moment (a test's runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"warning: {record.getMessage()}\n")


_ROUTE = "reconciler"


def route_logging(verbose: bool) -> None:
    """What Python's logging shows on the terminal. Without ``-v``, the reconciler's own
    warnings only; a library's records are dropped (py4j logs a traceback through the
    root logger when a second Ctrl-C interrupts a call into the JVM, and no traceback
    reaches the terminal without ``-v``). With ``-v``, every record, as logging's own
    defaults print them. Called once per command; a second call replaces the first."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == _ROUTE]:
        root.removeHandler(handler)
    chosen: logging.Handler
    if verbose:
        chosen = logging.StreamHandler()
        chosen.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    else:
        chosen = _OwnWarnings(logging.WARNING)
        chosen.addFilter(lambda record: record.name.startswith("reconciler."))
    chosen.set_name(_ROUTE)
    root.addHandler(chosen)


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Print ``message`` on stderr and return the exit to raise."""
    typer.echo(message, err=True)
    return typer.Exit(code)


def usage_error(message: str) -> UsageError:
    """A usage error: exit 64, with the command's usage line."""
    return UsageError(message, get_current_context(silent=True))


def parse_time(text: str) -> Timestamp:
    from ..odf.timestamps import Timestamp

    try:
        return Timestamp.parse(text)
    except ValueError as e:
        raise usage_error(f"--system-time: {e}") from None


def is_repository(config: RepoConfig) -> bool:
    """A reconciler repository has a ``[tool.reconciler]`` table, a datasets folder or an
    ODF folder; anything else is most likely the wrong directory."""
    if config.datasets_dir.is_dir() or config.odf_dir.is_dir():
        return True
    pyproject = config.root / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError:
        return True  # RepoConfig.load reports it
    return isinstance(document.get("tool", {}).get("reconciler"), dict)


def not_a_repository(config: RepoConfig) -> typer.Exit:
    """The error for a directory that is no repository: inside one (``datasets/``, say),
    it names the repository to run in; a run never moves to it by itself, since a
    folder of one repository may well hold a sandbox of its own."""
    why = (
        f"error: {config.root} is not a reconciler repository (no [tool.reconciler] in "
        "pyproject.toml, no datasets/ folder, no odf/ folder)"
    )
    for parent in config.root.parents:
        try:
            found = is_repository(RepoConfig.load(parent))
        except (ConfigError, OSError):
            found = False  # another project's pyproject.toml, say
        if found:
            return fail(f"{why}; it is inside {parent}: run there, or with -C {parent}")
    return fail(f"{why}; `reconcile init` creates one")


def written_offsets(session: Session, outcome: Outcome) -> tuple[int, int] | None:
    """The first and last offset the dataset's run wrote (its records are contiguous)."""
    if not outcome.rows:
        return None
    last = session.odf.dataset(outcome.dataset).projection().last_offset
    return None if last is None else (last - outcome.rows + 1, last)


def existing(session: Session, name: str) -> Dataset:
    """The chain of ``name``, or exit 1 when there is none or the name is not valid."""
    from ..odf.repository import DatasetPathError

    try:
        dataset = session.odf.dataset(name)
    except DatasetPathError as e:
        raise fail(f"error: {e.reason}") from None
    if not dataset.exists():
        from ..plan.renames import renamed_to

        renamed = renamed_to(session.config, name)
        close = close_names(name, session.odf.names())
        hint = f"; did you mean {close[0]}?" if close else ""
        hint = f"; it was renamed to {renamed}" if renamed else hint
        raise fail(f"error: dataset {name!r} not found in {session.config.odf_dir}{hint}")
    return dataset


def selection(graph: Graph, values: Iterable[str] | None) -> frozenset[str] | None:
    """The datasets ``--select`` names in ``graph``; None when it was not given."""
    if not values:
        return None
    try:
        return select(graph, parse_selectors(values))
    except SelectionError as e:
        raise usage_error(f"--select: {e}") from None


def duration(seconds: float) -> str:
    """``0.4 s``, ``41 s``, ``2 min 5 s``: tenths only where they matter."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


_OUTPUT_FLAGS = frozenset({"-q", "--quiet", "-v", "--verbose"})


def _output_flags_first(args: list[str]) -> list[str]:
    """``reconcile apply -q`` as ``reconcile -q apply``: ``-q`` and ``-v`` belong to
    the group (they shape every command's output), and people write them after the
    command, as dbt and terraform let them. A ``--`` ends the options, as always."""
    end = args.index("--") if "--" in args else len(args)
    head = args[:end]
    flags = [a for a in head if a in _OUTPUT_FLAGS]
    return flags + [a for a in head if a not in _OUTPUT_FLAGS] + args[end:]


_GLOBAL_OPTIONS = (
    "Before the command: -C <path> (run in that directory), -q (errors and the last line"
    " only), -v (tracebacks), --version; see reconcile --help."
)


class ReconcileGroup(TyperGroup):
    """The app's command group: every way out of it ends in a documented exit code.

    Usage errors (click's own, and ours) exit 64, not click's 2; Ctrl-C outside an
    apply's own handling exits 130 with one line; any other error is one ``error:``
    line with exit 1, and a traceback only with ``-v``. A data store that cannot be
    reached is the user's to fix (credentials, network), so its line has no ``-v`` hint.
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        if parent is None:
            args = _output_flags_first(args)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as e:
            e.exit_code = EXIT_USAGE
            raise

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        """The command, whose help ends by naming the options that go before it: a
        command's ``--help`` listed only its own, and ``-C`` was nowhere to be found."""
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.epilog is None:
            command.epilog = _GLOBAL_OPTIONS
        return command

    def invoke(self, ctx: Context) -> Any:
        # The command's own arguments, which click clears before the group's callback
        # runs: the callback answers a command's --help without a repository.
        ctx.meta["command_args"] = [*ctx._protected_args, *ctx.args]
        try:
            return super().invoke(ctx)
        except UsageError as e:
            e.exit_code = EXIT_USAGE
            raise
        except (typer.Exit, typer.Abort, ClickException):
            raise
        except KeyboardInterrupt:
            raise fail("interrupted", EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            _discard_stdout()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except Exception as e:
            if isinstance(ctx.obj, Session) and ctx.obj.verbose:
                raise
            from ..odf.store import StoreError

            if isinstance(e, StoreError):  # credentials or network, not a defect: no hint
                raise fail(f"error: {e}") from None
            raise fail(f"error: {describe(e)} (run with -v for details)") from None


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what
    is still buffered does not fail again on the closed pipe and print a warning."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
