"""A run's working folder: beneath the repository's cache, or the system's temporary
folder when that cannot be written."""

from __future__ import annotations

import tempfile
from pathlib import Path

from reconciler.writer.scratch import scratch_dir


def test_the_folder_is_made_beneath_the_cache_and_removed_after(tmp_path: Path) -> None:
    under = tmp_path / ".reconcile-cache" / "work"
    with scratch_dir(under, "odf-ingest-") as name:
        folder = Path(name)
        assert folder.parent == under and folder.name.startswith("odf-ingest-")
        (folder / "slice.parquet").write_bytes(b"x")
    assert list(under.iterdir()) == []


def test_a_folder_that_cannot_be_made_falls_back_to_the_system_folder(tmp_path: Path) -> None:
    (tmp_path / ".reconcile-cache").write_text("not a folder")  # even root cannot mkdir here
    with scratch_dir(tmp_path / ".reconcile-cache" / "work", "odf-verify-") as name:
        assert Path(name).parent == Path(tempfile.gettempdir())


def test_no_folder_given_is_the_system_folder() -> None:
    with scratch_dir(None, "odf-push-") as name:
        assert Path(name).parent == Path(tempfile.gettempdir())
