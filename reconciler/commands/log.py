"""``reconcile log NAME``: a dataset's chain, newest block first, like ``kamu log``."""

from __future__ import annotations

import sys

from ..inspection import log as log_view
from ..odf import models
from ..odf.repository import RepositoryError
from .common import Session, existing, fail
from .options import LogFormat

_RENDERERS = {
    LogFormat.TEXT: log_view.render_text,
    LogFormat.YAML: log_view.render_yaml,
    LogFormat.JSON: log_view.render_json,
}


def run(session: Session, name: str, output_format: LogFormat, limit: int | None) -> None:
    dataset = existing(session, name)
    try:
        entries: list[log_view.Entry] = []
        for entry in dataset.iter_blocks():
            if limit is not None and len(entries) >= limit:
                break
            entries.append(entry)
    except (RepositoryError, ValueError) as e:
        raise fail(f"error: {name}: {e}") from None
    # Inputs are shown by name next to their ids; finding names reads every chain's Seed,
    # so it is done only when a block names inputs.
    reads_inputs = any(
        isinstance(block.event, models.SetTransform | models.ExecuteTransform)
        for _, block in entries
    )
    ids = session.odf.names_by_id() if reads_inputs else {}
    names = {str(i): name for i, name in ids.items()}
    sys.stdout.write(_RENDERERS[output_format](entries, names))
    if output_format is LogFormat.JSON:
        sys.stdout.write("\n")
