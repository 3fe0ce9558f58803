"""The committed FlatBuffers code is exactly what flatc generates from schemas/odf.fbs."""

from __future__ import annotations

from pathlib import Path

from reconciler.odf.fbs_codegen import PACKAGE_DIR, generate


def test_regenerating_the_flatbuffers_code_gives_the_committed_files(tmp_path: Path) -> None:
    fresh = {p.name: p.read_text() for p in generate(tmp_path / "fbs")}
    committed = {p.name: p.read_text() for p in sorted(PACKAGE_DIR.glob("*.py"))}
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert stale == [], f"run `python -m reconciler.odf.fbs_codegen`; stale: {stale}"
