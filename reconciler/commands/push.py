"""``reconcile push NAME FILE``: ingest a file through a root dataset's push source."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import typer

from ..apply.outcome import Outcome, Status
from ..engine.errors import describe
from ..ingest.pull import push_file
from ..odf.lock import RepositoryLockedError
from ..writer.scratch import scratch_dir
from .common import JavaNotFound, Session, duration, existing, fail
from .progress import describe as describe_outcome


def run(session: Session, name: str, file: str, source: str | None) -> None:
    """One line: what the push wrote, and how long it took."""
    dataset = existing(session, name)
    began = time.monotonic()
    # Standard input is copied to a file a chunk at a time (it may be larger than
    # memory), in the run's working folder, which a cluster's executors reach too.
    with scratch_dir(session.config.work_dir, "stdin-") as tmp:
        path = Path(file)
        if file == "-":
            path = Path(tmp) / "stdin"
            with path.open("wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
        elif not path.is_file():
            raise fail(f"error: {file}: no such file")
        session.check_store()
        try:
            with session.odf.lock("reconcile push", timeout=session.lock_timeout):
                session.odf.remove_leftovers()
                result = push_file(dataset, session.ingest_context(), path, source)
        except RepositoryLockedError as e:
            raise fail(f"error: {e}") from None
        except JavaNotFound as e:
            raise fail(f"error: {e}") from None
        except Exception as e:  # reported, never a traceback: the chain is unchanged
            if session.verbose:
                raise
            message = describe(e)
            if file == "-":  # its copy's path means nothing to the user
                message = message.replace(str(path), "standard input")
            raise fail(f"error: {name}: {message}") from None
    status = Status.UPDATED if result.blocks else Status.UP_TO_DATE
    note = "" if result.blocks else f"nothing new in {file}"
    outcome = Outcome(name, status, data_blocks=result.blocks, rows=result.rows, message=note)
    typer.echo(f"{name}: {describe_outcome(outcome)} in {duration(time.monotonic() - began)}")
