"""A staged iteration committed to its chain: files first, then blocks, all or nothing.

Ingest and transforms end alike: a Spark task has written the slice (and a checkpoint)
to temporary files (``writer.slice_files``), and the blocks that name them are ready.
Files are moved under their hashes before any block that names them is appended, and the
head moves last, by compare-and-swap from the head the iteration started from, so a
crash at any point leaves the chain as it was or with the whole iteration committed,
and a concurrent writer makes the run fail rather than interleave. A run that fails
takes back exactly what it wrote (``all_or_nothing``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..odf import models
from ..odf.chain import ChainRuleError
from ..odf.multiformat import Multihash
from ..odf.repository import Dataset, HeadMovedError, RepositoryError
from ..odf.slices import MILLIS, OFFSET_TYPE, OP_TYPE, WrittenFile
from ..odf.timestamps import Timestamp


@dataclass
class Staged:
    """Everything one iteration will commit, already written to temporary files."""

    head: Multihash | None
    schema_event: models.SetDataSchema | None = None
    data_event: models.AddData | models.ExecuteTransform | None = None
    files: list[tuple[Path, str, Multihash]] = field(default_factory=list)
    """Files to move under their hashes: (path, "data" or CHECKPOINT_KIND, the physical
    hash its writer computed, which the blocks name)."""
    slice: WrittenFile | None = None

    @property
    def rows(self) -> int:
        return self.slice.rows if self.slice is not None else 0


def data_slice(written: WrittenFile | None, start: int) -> models.DataSlice | None:
    """The DataSlice of a written slice whose first offset is ``start``."""
    if written is None or written.rows == 0:
        return None
    return models.DataSlice(
        logical_hash=written.logical_hash,
        physical_hash=written.physical_hash,
        offset_interval=models.OffsetInterval(start=start, end=start + written.rows - 1),
        size=written.size,
    )


def system_fields(vocab: models.DatasetVocabulary) -> list[pa.Field]:
    """The first three fields of every slice: offset, op and system_time, never null."""
    return [
        pa.field(vocab.offset_column, OFFSET_TYPE, nullable=False),
        pa.field(vocab.operation_type_column, OP_TYPE, nullable=False),
        pa.field(vocab.system_time_column, MILLIS, nullable=False),
    ]


def commit(dataset: Dataset, staged: Staged, system_time: Timestamp) -> int:
    """Move the files under their hashes, then append the blocks; returns how many.

    Files first: a block never references a file that is not in place. The head moves
    with each append by compare-and-swap from the head the iteration started from, so a
    concurrent writer makes this fail rather than interleave.
    """
    for path, kind, hash_ in staged.files:
        dataset.add_file(path, kind, known=hash_)
    head, count = staged.head, 0
    for event in (staged.schema_event, staged.data_event):
        if event is not None:
            head = dataset.append_event(event, system_time, expected_head=head)
            count += 1
    return count


class ConcurrentRunError(RuntimeError):
    """Another writer moved the dataset's head while this run was writing it. The run's
    own files were taken back, the other's blocks and files left as they are."""

    def __init__(self, dataset: str, kept: int) -> None:
        self.dataset, self.kept = dataset, kept
        if kept:
            super().__init__(
                f"another run advanced {dataset} after {kept} block(s) of this run; "
                "those stay, the rest of this run was not kept"
            )
        else:
            super().__init__(f"another run advanced {dataset}; nothing of this run was kept")


@contextmanager
def all_or_nothing(dataset: Dataset) -> Iterator[None]:
    """On failure, take back exactly what this run wrote: move the head back to where it
    started (only by compare-and-swap from the last head this run wrote), and remove the
    files this run created that the chain does not reach, so nothing of it is left to be
    committed to git.

    If another writer moved the head meanwhile, its blocks and files stay and the
    failure becomes a ``ConcurrentRunError``. Under the repository lock that never
    happens; the rule protects writers that do not take it.
    """
    start = dataset.head()
    with dataset.recording() as journal:
        try:
            yield
        except BaseException as error:
            conflict = isinstance(error, HeadMovedError)
            if journal.head is not None:
                try:
                    dataset.reset_head(start, journal.head)
                except HeadMovedError:
                    conflict = True
            kept = _remove_unreached(dataset, journal.created)
            if conflict:
                raise ConcurrentRunError(dataset.root.name, kept) from error
            raise


def _remove_unreached(dataset: Dataset, created: list[Path]) -> int:
    """Remove the ``created`` files that the head does not reach; returns how many of the
    blocks among them it does reach (kept because another run built on them). A chain
    that cannot be read keeps everything, for ``verify`` to report."""
    try:
        reached = dataset.referenced_files()
    except (RepositoryError, ChainRuleError):
        return 0
    for path in created:
        if path not in reached:
            path.unlink(missing_ok=True)
    return sum(p in reached and p.parent == dataset.layout.blocks for p in created)
