"""What an apply reports for each dataset: its status and what it wrote.

Apart from ``run`` so that the commands that only read these (``verify``'s results,
the progress view, the git loop's commit message) do not load the ingest engine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Status(enum.StrEnum):
    """A dataset's fate in a run; the first three are the plan's create, update and
    recreate carried out, so a log and a commit tell a chain replaced by a new one (a new
    ``did:odf``, which every reader outside the repository must follow) from one that
    grew."""

    CREATED = "created"
    UPDATED = "updated"
    RECREATED = "recreated"
    UP_TO_DATE = "up-to-date"
    FAILED = "failed"
    SKIPPED = "skipped"
    DELETED = "deleted"


WROTE = frozenset({Status.CREATED, Status.UPDATED, Status.RECREATED})
"""The statuses of a dataset whose chain this run advanced with blocks."""


@dataclass(frozen=True)
class Outcome:
    """What happened to one dataset in this run."""

    dataset: str
    status: Status
    metadata_blocks: int = 0
    data_blocks: int = 0
    rows: int = 0
    message: str = ""
    moved: int = 0
    """Files moved from the dataset folder into the data store (``odf/store_move.py``)."""
    renamed_from: str | None = None
    """The name this run moved the dataset's chain from (``plan/renames.py``)."""
