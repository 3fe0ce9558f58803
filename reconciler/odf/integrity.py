"""Integrity of a stored dataset: every block and every file it references (§3.3).

The chain is re-folded with every rule and every block hash checked; then each data
slice and checkpoint named by a block must exist with the recorded size and physical
hash. When a data file's bytes differ, its logical hash decides, as in kamu:

- a root's data cannot be produced again, so its bytes are the record: any difference
  fails (the message still says whether the records changed, which tells a damaged
  copy from a falsification);
- a derivative's data can be recomputed, and Parquet is not byte-reproducible across
  writers, so a file whose records still match the logical hash is accepted, with a
  warning, because its name (the physical hash) no longer describes its bytes.

Checkpoints are compared by size and physical hash only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import chain, models
from .chain import ChainRuleError
from .hashing import logical_hash, physical_hash
from .models import MetadataBlock
from .multiformat import Multihash
from .repository import BlockHashMismatchError, BlockNotFoundError, Dataset, RepositoryError
from .slices import read_file


@dataclass(frozen=True)
class IntegrityProblem:
    """What is wrong, and in which block (sequence number) when one is to blame."""

    message: str
    sequence_number: int | None = None
    fatal: bool = True
    """False for a warning: a derivative's data file re-encoded with the same records."""

    def __str__(self) -> str:
        where = f"block #{self.sequence_number}: " if self.sequence_number is not None else ""
        return where + self.message


@dataclass(frozen=True)
class Inspection:
    """What ``inspect_dataset`` found, and the blocks it read (oldest first) for a caller that
    goes on to use them; no blocks when the chain itself could not be read or folded."""

    problems: list[IntegrityProblem]
    blocks: list[tuple[Multihash, MetadataBlock]]


def check_integrity(dataset: Dataset) -> list[IntegrityProblem]:
    """Every problem found, warnings included; an empty list means the dataset is intact."""
    return inspect_dataset(dataset).problems


def inspect_dataset(dataset: Dataset) -> Inspection:
    """Check the chain, then every file its blocks name, reading each block once."""
    try:
        blocks = list(dataset.iter_blocks())
        blocks.reverse()
        derivative = chain.fold(blocks).kind is models.DatasetKind.DERIVATIVE
    except ChainRuleError as e:
        return Inspection([IntegrityProblem(str(e), e.sequence_number)], [])
    except BlockHashMismatchError as e:
        changed = f"block {e.expected} was changed: its bytes hash to {e.actual}"
        return Inspection([IntegrityProblem(changed)], [])
    except BlockNotFoundError as e:
        return Inspection([IntegrityProblem(f"block {e.hash} is missing")], [])
    except (RepositoryError, ValueError) as e:
        return Inspection([IntegrityProblem(str(e))], [])
    problems: list[IntegrityProblem] = []
    for _, block in blocks:
        event = block.event
        if not isinstance(event, models.AddData | models.ExecuteTransform):
            continue
        seq = block.sequence_number
        if event.new_data is not None:
            path = dataset.layout.data_file(event.new_data.physical_hash)
            problem = _check_file(path, event.new_data.size, event.new_data.physical_hash, "data")
            if problem and path.exists():
                same_records, explained = _check_logical(path, event.new_data)
                fatal = not (same_records and derivative)
                problems.append(IntegrityProblem(f"{problem}; {explained}", seq, fatal))
            elif problem:
                problems.append(IntegrityProblem(problem, seq))
        if event.new_checkpoint is not None:
            path = dataset.layout.checkpoint_file(event.new_checkpoint.physical_hash)
            problem = _check_file(
                path, event.new_checkpoint.size, event.new_checkpoint.physical_hash, "checkpoint"
            )
            if problem:
                problems.append(IntegrityProblem(problem, seq))
    return Inspection(problems, blocks)


def _check_file(path: Path, size: int, expected: str, what: str) -> str | None:
    if not path.is_file():
        return f"{what} file {path.name} is missing"
    actual_size = path.stat().st_size
    if actual_size != size:
        return f"{what} file {path.name} has {actual_size} bytes, the block says {size}"
    if physical_hash(path) != expected:
        return f"{what} file bytes do not match physical hash {expected}"
    return None


def _check_logical(path: Path, data: models.DataSlice) -> tuple[bool, str]:
    """Whether the file's records match the block's logical hash, and what to say."""
    try:
        actual = logical_hash(read_file(path))
    except Exception as e:  # an unreadable file is a finding, not a crash of the check
        return False, f"its records cannot be read ({type(e).__name__})"
    if actual != data.logical_hash:
        return False, f"its records do not match logical hash {data.logical_hash} either"
    return True, "its records still match the logical hash"
