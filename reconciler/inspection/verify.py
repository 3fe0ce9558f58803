"""``reconcile verify``: is each dataset what its chain says it is, and does it reproduce?

Two levels, as in ENGINE-SEMANTICS §3:

- **Integrity** (``odf/integrity.py``): every chain rule and block hash, then every data
  and checkpoint file's size and physical hash. Cheap, no Spark.
- **Replay** (derivatives only, unless ``--integrity``): every ``ExecuteTransform`` is run
  again from the chain alone: the ``SetTransform`` in force at that block, the inputs'
  recorded block and offset intervals, and the block's own system time. The result must
  have the recorded offsets, logical hash, watermark and checkpoint. The physical hash is
  not compared: it depends on the Parquet writer, while the logical hash covers exactly
  the records. This is what lets anyone trust a derivative without trusting whoever ran
  it.

A replay writes only to a temporary folder; the repository is never touched. Queries
replayed from a chain go through the same sandbox as every transform, because a chain in
a pull request is as untrusted as a manifest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.errors import describe
from ..gitloop.gitops import changed_paths, file_at, in_checkout, top_of
from ..odf import models
from ..odf.chain import ChainState
from ..odf.integrity import Change, IntegrityProblem, inspect_change, inspect_dataset
from ..odf.models import MetadataBlock
from ..odf.multiformat import DatasetId, Multihash
from ..odf.repository import Dataset, OdfRepository
from ..writer.scratch import scratch_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Verdict:
    """What ``verify`` found for one dataset."""

    dataset: str
    problems: list[IntegrityProblem] = field(default_factory=list)
    blocks: int = 0
    replayed: int = 0
    files: int = 0
    named: AbstractSet[str] = frozenset()
    """The store's paths the chain names (a full check only): see ``odf.integrity``."""

    @property
    def valid(self) -> bool:
        return not any(p.fatal for p in self.problems)


def verify_dataset(
    repo: OdfRepository,
    name: str,
    names: Mapping[DatasetId, str],
    spark: Callable[[], SparkSession] | None,
    scratch: Path | None = None,
    no_download: bool = False,
) -> Verdict:
    """Check ``name``; replay its transforms when ``spark`` is given (started on demand),
    staging each replay in a folder beneath ``scratch`` (``writer.scratch``). ``no_download``:
    a data store outside git is checked by its listing (``inspect_dataset``)."""
    dataset = repo.dataset(name)
    keep = spark is not None  # a replay reads them
    inspection = inspect_dataset(dataset, keep_blocks=keep, no_download=no_download)
    verdict = Verdict(
        name,
        inspection.problems,
        inspection.block_count,
        files=inspection.files,
        named=inspection.named,
    )
    if not verdict.valid or spark is None:
        return verdict
    for state, hash_, block in _transform_runs(inspection.blocks):
        problem = _replay(spark(), dataset, repo, names, state, hash_, block, scratch)
        verdict.replayed += 1
        if problem is not None:
            verdict.problems.append(problem)
    return verdict


def changes_since(repo: OdfRepository, repo_root: Path, base_ref: str) -> dict[str, Change]:
    """What changed in each dataset's folder between ``base_ref`` and the working tree
    (untracked files included), with the head each had at ``base_ref``; datasets with no
    change are absent. Raises ``gitops.GitError`` for a ref git cannot read."""
    top = top_of(repo_root)
    inside = in_checkout(top, repo.root)
    root = top / inside if inside is not None else repo.root.resolve()  # as git names it
    files: dict[str, tuple[set[str], set[str]]] = {}
    for path in changed_paths(repo_root, base_ref):
        if not path.is_relative_to(root) or path == root:
            continue  # the folder itself a submodule: the plan reports it, and no chain is read
        name, *rest = path.relative_to(root).parts
        if rest:
            changed, deleted = files.setdefault(name, (set(), set()))
            (changed if os.path.lexists(path) else deleted).add("/".join(rest))
    changes: dict[str, Change] = {}
    for name, (changed, deleted) in files.items():
        text = file_at(repo_root, base_ref, repo.root / name / "refs" / "head")
        base_head = Multihash.parse(text.strip()) if text is not None else None
        changes[name] = Change(base_head, frozenset(changed), frozenset(deleted))
    return changes


def verify_change(repo: OdfRepository, name: str, change: Change) -> Verdict:
    """Check only what ``change`` says changed in ``name`` (``integrity.inspect_change``)."""
    inspection = inspect_change(repo.dataset(name), change)
    return Verdict(name, inspection.problems, inspection.block_count, files=inspection.files)


def _transform_runs(
    blocks: list[tuple[Multihash, MetadataBlock]],
) -> Iterator[tuple[ChainState, Multihash, MetadataBlock]]:
    """Each ExecuteTransform block with the chain's state just before it."""
    state = ChainState()
    for hash_, block in blocks:
        if isinstance(block.event, models.ExecuteTransform):
            yield state, hash_, block
        state = state.apply(block, hash_)


def _replay(
    spark: SparkSession,
    dataset: Dataset,
    repo: OdfRepository,
    names: Mapping[DatasetId, str],
    state: ChainState,
    hash_: Multihash,
    block: MetadataBlock,
    scratch: Path | None,
) -> IntegrityProblem | None:
    from ..transform.execute import stage_transform
    from ..transform.inputs import recorded_inputs

    recorded = block.event
    assert isinstance(recorded, models.ExecuteTransform)
    seq = block.sequence_number
    try:
        inputs = recorded_inputs(state, recorded, repo, names)
        with scratch_dir(scratch, "odf-verify-") as tmp:
            staged = stage_transform(spark, dataset, state, inputs, block.system_time, Path(tmp))
    except Exception as e:  # any failure to reproduce is a finding about this block
        return IntegrityProblem(f"replay failed: {describe(e)}", seq)
    assert isinstance(staged.data_event, models.ExecuteTransform)
    differences = _differences(recorded, staged.data_event)
    if not differences:
        return None
    return IntegrityProblem(
        f"replay of ExecuteTransform {hash_} does not reproduce it: " + "; ".join(differences),
        seq,
    )


def _differences(recorded: models.ExecuteTransform, replayed: models.ExecuteTransform) -> list[str]:
    found = []
    old, new = recorded.new_data, replayed.new_data
    if (old is None) != (new is None):
        found.append(f"the block has {_rows(old)} row(s), the replay gives {_rows(new)}")
    elif old is not None and new is not None:
        if old.offset_interval != new.offset_interval:
            found.append(f"offsets {_interval(old)} in the block, {_interval(new)} in the replay")
        if old.logical_hash != new.logical_hash:
            found.append(
                f"logical hash {old.logical_hash} in the block, {new.logical_hash} in the replay"
            )
    if recorded.new_watermark != replayed.new_watermark:
        found.append(
            f"watermark {recorded.new_watermark} in the block, "
            f"{replayed.new_watermark} in the replay"
        )
    old_cp = recorded.new_checkpoint.physical_hash if recorded.new_checkpoint else None
    new_cp = replayed.new_checkpoint.physical_hash if replayed.new_checkpoint else None
    if old_cp != new_cp:
        found.append(f"checkpoint {old_cp} in the block, {new_cp} in the replay")
    return found


def _rows(data: models.DataSlice | None) -> int:
    if data is None:
        return 0
    return data.offset_interval.end - data.offset_interval.start + 1


def _interval(data: models.DataSlice) -> str:
    return f"{data.offset_interval.start}..{data.offset_interval.end}"
