"""``reconcile push NAME FILE``: ingest a file through a root dataset's push source.

With ``--commit`` (and ``--push``) a push joins the GitOps loop as an apply does
(``loop.converge``): the checkout is checked before anything is written, the ODF folder
is committed with a message saying what moved and where it came from, and a push the
remote rejected moves the checkout to the remote's tip and pushes the file again there.
That is exactly once: the rejected commit was discarded, so its records are in no chain
the remote has.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import typer

from ..apply.outcome import Outcome, Status
from ..config import shown_paths
from ..engine.errors import describe
from ..ingest.pull import push_file
from ..odf.lock import RepositoryLockedError
from ..writer.scratch import scratch_dir
from . import loop
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    JavaNotFound,
    Session,
    duration,
    existing,
    fail,
    written_offsets,
)
from .progress import Finished
from .progress import describe as describe_outcome
from .results import RunResult, applied


def run(
    session: Session,
    name: str,
    file: str,
    source: str | None,
    commit: bool = False,
    push_too: bool = False,
    retries: int = 0,
) -> None:
    """One line: what the push wrote, and how long it took; then the loop's lines."""
    existing(session, name)
    shown = "standard input" if file == "-" else Path(file).name
    # Standard input is copied to a file a chunk at a time (it may be larger than
    # memory), in the run's working folder, which a cluster's executors reach too; a
    # retry after a rejected git push reads the copy again.
    with scratch_dir(session.config.work_dir, "stdin-") as tmp:
        path = Path(file)
        if file == "-":
            path = Path(tmp) / "stdin"
            with path.open("wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
        elif not path.is_file():
            raise fail(f"error: {file}: no such file")
        session.check_store()

        def once() -> loop.Attempt:
            return _attempt(session, name, path, file, source, shown)

        try:
            with loop.writing(session, "reconcile push", commit) as killed:
                session.odf.remove_leftovers()
                if commit:
                    attempt = loop.converge(session, push_too, retries, False, once, killed)
                else:
                    attempt = once()
        except (RepositoryLockedError, loop.CommitRefusedError) as e:
            raise fail(f"error: {e}") from None
    if attempt.result.error is not None:
        typer.echo(f"error: {attempt.result.error}", err=True)
    if attempt.code != EXIT_OK:
        raise typer.Exit(attempt.code)


def _attempt(
    session: Session, name: str, path: Path, file: str, source: str | None, shown: str
) -> loop.Attempt:
    """Push the file once: its outcome (a failure is an outcome too, the chain unchanged)."""
    began = time.monotonic()
    result = RunResult("push")
    try:
        pushed = push_file(session.odf.dataset(name), session.ingest_context(), path, source)
    except JavaNotFound as e:
        raise fail(f"error: {e}") from None
    except Exception as e:  # reported, never a traceback: the chain is unchanged
        if session.verbose:
            raise
        message = describe(e)
        if file == "-":  # its copy's path means nothing to the user
            message = message.replace(str(path), "standard input")
        message = shown_paths(message, session.config.root)  # as an apply's causes read
        result.error = f"{name}: {message}"
        failed = Outcome(name, Status.FAILED, message=message)
        return loop.Attempt(result, [Finished(failed, 0.0)], EXIT_FAILED, None)
    status = Status.UPDATED if pushed.blocks else Status.UP_TO_DATE
    note = "" if pushed.blocks else f"nothing new in {file}"
    outcome = Outcome(name, status, data_blocks=pushed.blocks, rows=pushed.rows, message=note)
    seconds = time.monotonic() - began
    typer.echo(f"{name}: {describe_outcome(outcome)} in {duration(seconds)}")
    done = Finished(outcome, seconds, written_offsets(session, outcome))
    result.datasets.append(applied(done))
    source_said = f" (push source {source})" if source else ""
    return loop.Attempt(result, [done], EXIT_OK, None, pushed_from=f"{shown}{source_said}")
