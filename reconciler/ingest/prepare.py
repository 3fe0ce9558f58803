"""The prepare stage of ingest: turn the fetched file into the file the read step expects.

Sources often publish data compressed or slightly malformed; ``prepare`` steps fix that
before reading, in order, each step's output feeding the next (kamu-cli
``src/infra/core/src/services/ingest/prep_service.rs``):

- ``Decompress`` ``Gzip``: the decompressed stream (every member of a multi-member file,
  where kamu's single-member decoder stops after the first).
- ``Decompress`` ``Zip``: one member of the archive. ``subPath`` names it; the ODF schema
  says it "can contain glob patterns" while kamu looks the name up literally, so an exact
  name is tried first and then the pattern, which must match exactly one member. Without
  ``subPath`` the archive must hold exactly one file (directories and macOS ``__MACOSX/``
  metadata are not counted); kamu silently takes the first entry, which is rarely what an
  archive with several files means.
- ``Pipe``: the file is the stdin of ``command`` (an argv list, no shell) and its stdout
  is the result; a non-zero exit is an error that quotes the command, the exit code and
  the end of its stderr.

Every step writes a new file in ``workdir``; the input file is never modified (it may be
the user's own file, passed zero-copy by a ``FilesGlob`` or ``file://`` fetch), and
intermediate files are removed once the next step has consumed them.
"""

from __future__ import annotations

import fnmatch
import gzip
import os
import shlex
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

from ..odf import models

__all__ = ["PrepareError", "prepare"]

_STDERR_TAIL_LINES = 20
_STDERR_TAIL_CHARS = 4000
_MEMBERS_SHOWN = 20
_CHUNK = 1 << 20


class PrepareError(Exception):
    """A prepare step failed; the message names the step, and for a pipe the command,
    its exit code and the last lines of its stderr."""

    def __init__(
        self, message: str, *, step: int, exit_code: int | None = None, stderr: str = ""
    ) -> None:
        super().__init__(message)
        self.step = step
        self.exit_code = exit_code
        self.stderr = stderr


def prepare(
    steps: Sequence[models.PrepStep] | None,
    path: Path,
    workdir: Path,
    max_decompressed: int = 10 * 2**30,
) -> Path:
    """Apply ``steps`` to ``path``; return the prepared file (``path`` itself if no steps).
    A ``Decompress`` step that would write more than ``max_decompressed`` bytes stops
    there, with a PrepareError: the file is a decompression bomb, or needs the limit
    (``max_decompressed_size``) raised."""
    if not steps:
        return path
    workdir.mkdir(parents=True, exist_ok=True)
    current = path
    for number, step in enumerate(steps, start=1):
        output = _new_file(workdir, number)
        try:
            if isinstance(step, models.PrepStepPipe):
                _pipe(step.command, current, output, number)
            elif step.format == models.CompressionFormat.GZIP:
                _gunzip(current, output, number, max_decompressed)
            else:
                _unzip(current, step.sub_path, output, number, max_decompressed)
        except BaseException:
            output.unlink(missing_ok=True)
            if current != path:  # an earlier step's output, which no step will consume
                current.unlink(missing_ok=True)
            raise
        if current != path:
            current.unlink()
        current = output
    return current


def _new_file(workdir: Path, number: int) -> Path:
    fd, name = tempfile.mkstemp(prefix=f"prepare-{number}-", suffix=".data", dir=workdir)
    os.close(fd)
    return Path(name)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _copy_at_most(src: _Readable, dst: BinaryIO, limit: int, label: str, number: int) -> None:
    """Copy ``src`` to ``dst`` a MiB at a time, refusing to write more than ``limit``."""
    written = 0
    while chunk := src.read(min(_CHUNK, limit - written + 1)):
        written += len(chunk)
        if written > limit:
            raise PrepareError(
                f"{label}: the file decompresses to more than {_shown_size(limit)}, the most"
                " a prepare step may write (max_decompressed_size in [tool.reconciler]):"
                " a decompression bomb, or a file that needs the limit raised",
                step=number,
            )
        dst.write(chunk)


def _shown_size(size: int) -> str:
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def _gunzip(source: Path, output: Path, number: int, limit: int) -> None:
    label = f"prepare step {number} (Decompress Gzip)"
    try:
        with gzip.open(source, "rb") as src, open(output, "wb") as dst:
            _copy_at_most(src, dst, limit, label, number)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise PrepareError(
            f"{label}: {source.name} is not a valid gzip file: {e}",
            step=number,
        ) from None


def _unzip(source: Path, sub_path: str | None, output: Path, number: int, limit: int) -> None:
    label = f"prepare step {number} (Decompress Zip)"
    try:
        with zipfile.ZipFile(source) as archive:
            members = [
                info
                for info in archive.infolist()
                if not info.is_dir() and not info.filename.startswith("__MACOSX/")
            ]
            member = _choose_member(members, sub_path, label, source, number)
            with archive.open(member) as src, open(output, "wb") as dst:
                _copy_at_most(src, dst, limit, label, number)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise PrepareError(
            f"{label}: {source.name} is not a valid zip archive: {e}", step=number
        ) from None
    except (RuntimeError, NotImplementedError) as e:
        # zipfile's errors for encrypted members and unsupported compression methods.
        raise PrepareError(
            f"{label}: cannot extract from {source.name}: {e}", step=number
        ) from None


def _choose_member(
    members: list[zipfile.ZipInfo], sub_path: str | None, label: str, source: Path, number: int
) -> zipfile.ZipInfo:
    names = [m.filename for m in members]
    if sub_path is None:
        if len(members) == 1:
            return members[0]
        if not members:
            raise PrepareError(f"{label}: {source.name} contains no files", step=number)
        raise PrepareError(
            f"{label}: {source.name} contains several files ({_listing(names)}); "
            "set subPath to the one to read",
            step=number,
        )
    exact = [m for m in members if m.filename == sub_path]
    chosen = exact or [m for m in members if fnmatch.fnmatchcase(m.filename, sub_path)]
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        raise PrepareError(
            f"{label}: no file in {source.name} matches subPath {sub_path!r}; "
            f"it contains {_listing(names)}",
            step=number,
        )
    raise PrepareError(
        f"{label}: subPath {sub_path!r} matches several files in {source.name} "
        f"({_listing([m.filename for m in chosen])}); it must match exactly one",
        step=number,
    )


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_MEMBERS_SHOWN])
    more = len(names) - _MEMBERS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _pipe(command: list[str], source: Path, output: Path, number: int) -> None:
    if not command:
        raise PrepareError(f"prepare step {number} (Pipe): the command is empty", step=number)
    shown = shlex.join(command)
    label = f"prepare step {number} (Pipe)"
    with (
        open(source, "rb") as stdin,
        open(output, "wb") as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        try:
            code = subprocess.run(
                command, stdin=stdin, stdout=stdout, stderr=stderr, check=False
            ).returncode
        except FileNotFoundError:
            raise PrepareError(f"{label}: command not found: {command[0]}", step=number) from None
        except OSError as e:
            raise PrepareError(f"{label}: cannot run {shown}: {e.strerror}", step=number) from None
        if code == 0:
            return
        stderr.seek(0)
        tail = _tail(stderr.read())
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    raise PrepareError(
        f"{label}: {shown} {how}" + (f"; stderr:\n{tail}" if tail else " (no stderr)"),
        step=number,
        exit_code=code,
        stderr=tail,
    )


def _tail(raw: bytes) -> str:
    lines = raw.decode("utf-8", errors="replace").rstrip().splitlines()
    return "\n".join(lines[-_STDERR_TAIL_LINES:])[-_STDERR_TAIL_CHARS:]
