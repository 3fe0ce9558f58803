"""What a root's chain ingested, for the plan to tell whether it can be read again.

Recreating a root reads its whole history again, which only works while every file the
chain ingested is still there (``plan.recreate``, which compares these names with the
glob's listing). The plan is pure, so the chain is read here, only for the roots it
recreates: from the head back to the Seed, each data ``AddData`` names the file it came
from in its source state (a ``FilesGlob`` records the file's name).
"""

from __future__ import annotations

from ..odf import models
from ..odf.repository import OdfRepository, RepositoryError
from ..plan.recreate import HistoryReader, RootHistory


def history_reader(repo: OdfRepository) -> HistoryReader:
    """A ``HistoryReader`` over ``repo``'s chains."""

    def read(name: str) -> RootHistory:
        names: list[str] = []
        pushed = 0
        try:
            for _, block in repo.dataset(name).iter_blocks():
                event = block.event
                if not isinstance(event, models.AddData) or event.new_data is None:
                    continue
                if event.new_source_state is None:
                    pushed += 1
                else:
                    names.append(event.new_source_state.value)
        except (RepositoryError, ValueError) as e:
            return RootHistory(unreadable=f"its chain cannot be read: {e}")
        return RootHistory(tuple(reversed(names)), pushed)

    return read
