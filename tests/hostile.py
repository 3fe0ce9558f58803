"""The harness of the hostile-manifest corpus: a case is refused, located, and harmless.

Manifests come from pull requests nobody has reviewed. Each case is a set of files (and
symlinks) dropped into a small, valid repository beside one good dataset; then the plan
and the apply run through the real CLI, and the case passes only when

- both exit 1, with a message that names the case's file (and line, when given),
- no Python traceback reaches the output, and nothing of the secret file outside the
  repository does,
- the good dataset is still planned (one bad manifest does not hide the others),
- nothing at all was written: the repository and the folder beside it are byte-identical
  afterwards (no chain under ``odf/``, no file outside the repository).

The plan and apply run in-process (``CliRunner``): a refused case must be refused before
any engine starts, so they cost milliseconds. A case that could crash the interpreter
itself (deep nesting) sets ``subprocess=True`` and runs in a child process, where a
crash is an exit code rather than the end of the test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from reconciler.cli import app

# A file outside the repository that no error may ever print.
SECRET = "TOP-SECRET-CANARY-7f3a"
GOOD_NAME = "org.example.good"
GOOD_MANIFEST = f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {GOOD_NAME}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/good/*.csv"}}
      read: {{kind: Csv, header: true, schema: ["a BIGINT", "b STRING"]}}
      merge: {{kind: Append}}
"""


@dataclass(frozen=True)
class Hostile:
    """One hostile input.

    ``files`` are written under the repository (paths relative to it; bytes are written
    as they are). ``symlinks`` map a path in the repository to a target; ``{outside}`` in
    a target or a file's text is replaced by the folder beside the repository, which
    holds ``secret.csv`` and ``manifest.yaml`` (a valid manifest). ``file`` is the path
    the message must name (default: the first file), ``line`` the line, and ``expect``
    a piece of the message that says what is wrong.
    """

    id: str
    files: Mapping[str, str | bytes]
    expect: str
    symlinks: Mapping[str, str] = field(default_factory=dict)
    file: str | None = None
    line: int | None = None
    subprocess: bool = False

    @property
    def named_file(self) -> str:
        if self.file is not None:
            return self.file
        return next(iter(self.files)) if self.files else next(iter(self.symlinks))


def build(tmp: Path, case: Hostile) -> tuple[Path, Path]:
    """The repository with the good dataset and the case's files, and the folder beside it."""
    root, outside = tmp / "repo", tmp / "outside"
    (root / "datasets").mkdir(parents=True)
    (root / "sources" / "good").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "odf"\n')
    (root / "datasets" / f"{GOOD_NAME}.yaml").write_text(GOOD_MANIFEST)
    (root / "sources" / "good" / "a.csv").write_text("a,b\n1,x\n")
    outside.mkdir()
    (outside / "secret.csv").write_text(f"a,b\n1,{SECRET}\n")
    (outside / "manifest.yaml").write_text(GOOD_MANIFEST.replace(GOOD_NAME, "org.example.out"))
    for rel, content in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{outside}", str(outside)), encoding="utf-8")
    for rel, target in case.symlinks.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target.replace("{outside}", str(outside)))
    return root, outside


def snapshot(tmp: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``tmp`` (symlinks not followed) with its content or target."""
    found: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(tmp):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(tmp))
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path).encode())
            elif path.is_dir():
                found[rel] = ("dir", b"")
            else:
                found[rel] = ("file", path.read_bytes())
    return found


def run(root: Path, *args: str, in_subprocess: bool = False) -> tuple[int, str]:
    """``reconcile -C root ARGS``: the exit code and everything it printed."""
    if in_subprocess:
        done = subprocess.run(
            [sys.executable, "-m", "reconciler", "-C", str(root), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        return done.returncode, done.stdout + done.stderr
    result = CliRunner().invoke(app, ["-C", str(root), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{type(result.exception).__name__}: {result.exception}")
    return result.exit_code, result.output


def assert_refused(tmp: Path, case: Hostile) -> None:
    """The case's plan and apply both refuse it, say where, and write nothing anywhere."""
    root, _ = build(tmp, case)
    before = snapshot(tmp)
    for args in (("--plan",), ()):
        code, output = run(root, *args, in_subprocess=case.subprocess)
        what = "plan" if args else "apply"
        assert code == 1, f"{what} exited {code}:\n{output}"
        assert "Traceback" not in output, output
        assert SECRET not in output, output
        assert case.named_file in output, f"{what} does not name {case.named_file}:\n{output}"
        if case.line is not None:
            assert f"{case.named_file}:{case.line}" in output, output
        assert case.expect in output, f"{what} does not say {case.expect!r}:\n{output}"
        assert GOOD_NAME in output, f"{what} lost the good dataset:\n{output}"
        assert snapshot(tmp) == before, f"{what} wrote something"
