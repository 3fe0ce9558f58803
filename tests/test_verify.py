"""``reconcile verify``: fresh results pass, every kind of tampering is caught.

One repository (a Snapshot root with checkpoints, a derivative over it) is built once;
each case works on its own copy.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_here import reconcile_here
from gitops_repo import GitOpsRepo, events, slices
from pyspark.sql import SparkSession
from transform_repo import STOCK, derivative, make_repo, run

from reconciler.commands.verify import _describe
from reconciler.inspection.verify import Verdict, verify_dataset
from reconciler.odf import Timestamp, content_sweep, models
from reconciler.odf.integrity import inspect_dataset
from reconciler.odf.repository import Dataset
from reconciler.odf.slices import write_slice

SCALED = "org.example.scaled"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("verify") / "repo")
    derivative(
        repo, SCALED, [STOCK], "SELECT op, day, id, qty * 10 AS qty10 FROM `org.example.stock`"
    )
    (repo.root / "stock" / "1.csv").write_text("day,id,qty\n2020-01-01,a,1\n2020-01-01,b,2\n")
    run(repo, "2026-01-01T00:00:00Z")
    (repo.root / "stock" / "2.csv").write_text("day,id,qty\n2020-01-02,b,3\n2020-01-02,c,4\n")
    run(repo, "2026-01-02T00:00:00Z")
    return repo.root


@pytest.fixture
def repo(built: Path, tmp_path: Path) -> GitOpsRepo:
    shutil.copytree(built, tmp_path / "repo")
    return GitOpsRepo(tmp_path / "repo")


def cli(root: Path, *args: str) -> tuple[int, list[str]]:
    """``reconcile -C root verify ARGS`` in this process (``cli_here``), its exit code and
    standard output: every run here is an ``--integrity`` check, which starts no Spark."""
    done = reconcile_here(["-C", str(root), "verify", *args], spark=False)
    # the summary line ends in the time verify took, which differs from run to run
    return done.returncode, [
        re.sub(r" in [\d.]+ s$", " in N s", x) for x in done.stdout.splitlines()
    ]


def test_a_valid_line_counts_blocks_and_replays_in_words() -> None:
    """It said ``valid (9 block(s), 1 transform(s) replayed)`` where every other line of
    the reconciler says ``9 blocks`` and ``1 block``."""
    assert _describe(Verdict("a", blocks=9)) == "a: valid (9 blocks)"
    assert _describe(Verdict("a", blocks=1)) == "a: valid (1 block)"
    assert (
        _describe(Verdict("a", blocks=6, replayed=1)) == "a: valid (6 blocks, 1 transform replayed)"
    )
    assert (
        _describe(Verdict("a", blocks=7, replayed=2))
        == "a: valid (7 blocks, 2 transforms replayed)"
    )


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_fresh_results_are_valid_and_every_transform_replays(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    assert cli(repo.root, "--integrity") == (
        0,
        [
            "org.example.prices: valid (5 blocks)",
            f"{SCALED}: valid (8 blocks)",
            f"{STOCK}: valid (8 blocks)",
            "3 datasets: 3 valid in N s",
        ],
    )
    verdict = verify_dataset(repo.odf, SCALED, repo.odf.names_by_id(), lambda: spark)
    assert (verdict.valid, verdict.blocks, verdict.replayed) == (True, 8, 2)


def last_data_event(dataset: Dataset) -> models.AddData | models.ExecuteTransform:
    return next(
        e
        for e in reversed(events(dataset))
        if isinstance(e, models.AddData | models.ExecuteTransform)
    )


def head_block(ds: Dataset) -> Path:
    return ds.layout.block(ds.head() or "")


def data_file(ds: Dataset) -> Path:
    data = last_data_event(ds).new_data
    assert data is not None
    return ds.layout.data_file(data.physical_hash)


def checkpoint_file(ds: Dataset) -> Path:
    checkpoint = last_data_event(ds).new_checkpoint
    assert checkpoint is not None
    return ds.layout.checkpoint_file(checkpoint.physical_hash)


@pytest.mark.parametrize(
    ("name", "target", "expected"),
    [
        (SCALED, head_block, "block {hash} was changed: its bytes hash to "),
        (SCALED, data_file, "block #7: data file bytes do not match physical hash {hash}"),
        (
            SCALED,
            checkpoint_file,
            "block #7: checkpoint file bytes do not match physical hash {hash}",
        ),
        (STOCK, data_file, "block #7: data file bytes do not match physical hash {hash}"),
        (
            STOCK,
            checkpoint_file,
            "block #7: checkpoint file bytes do not match physical hash {hash}",
        ),
    ],
    ids=[
        "derivative-block",
        "derivative-data",
        "derivative-checkpoint",
        "root-data",
        "root-checkpoint",
    ],
)
def test_a_flipped_byte_is_caught(
    repo: GitOpsRepo, name: str, target: Callable[[Dataset], Path], expected: str
) -> None:
    ds = repo.odf.dataset(name)
    path = target(ds)
    flip_middle_byte(path)
    code, lines = cli(repo.root, "--integrity", name)
    assert code == 1
    assert lines[0] == f"{name}: invalid"
    assert lines[1].startswith("  " + expected.format(hash=path.name, root=ds.root)), lines
    assert lines[-1] == "1 dataset: 0 valid, 1 invalid in N s"


@pytest.mark.parametrize(
    ("target", "damage", "changed"),
    [
        (head_block, lambda p: p.write_bytes(p.read_bytes() + b"\r\n"), True),
        (data_file, lambda p: p.write_bytes(p.read_bytes() + b"\r"), True),
        (checkpoint_file, flip_middle_byte, True),
        (data_file, Path.unlink, False),
    ],
    ids=["block-crlf", "data-longer", "checkpoint-flipped", "data-missing"],
)
def test_a_file_whose_bytes_changed_is_told_from_one_that_is_gone(
    repo: GitOpsRepo,
    target: Callable[[Dataset], Path],
    damage: Callable[[Path], object],
    changed: bool,
) -> None:
    """A file there with other bytes (size or hash) is what a rewriting git attribute
    leaves, and ``verify`` then names the attribute; a missing file is not that."""
    ds = repo.odf.dataset(SCALED)
    damage(target(ds))
    (problem,) = inspect_dataset(ds).problems
    assert problem.changed is changed


def test_a_missing_data_file_is_caught(repo: GitOpsRepo) -> None:
    path = data_file(repo.odf.dataset(SCALED))
    path.unlink()
    assert cli(repo.root, "--integrity") == (
        1,
        [
            "org.example.prices: valid (5 blocks)",
            f"{SCALED}: invalid",
            f"  block #7: data file {path.name} is missing",
            f"{STOCK}: valid (8 blocks)",
            "3 datasets: 2 valid, 1 invalid in N s",
        ],
    )


def test_a_missing_block_is_caught(repo: GitOpsRepo) -> None:
    ds = repo.odf.dataset(STOCK)
    (_, newest), (older, _) = list(ds.iter_blocks())[:2]
    ds.layout.block(older).unlink()
    assert newest.prev_block_hash == older
    assert cli(repo.root, "--integrity", STOCK) == (
        1,
        [
            f"{STOCK}: invalid",
            f"  block {older} is missing",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_re_encoded_file_is_accepted_for_a_derivative_only(repo: GitOpsRepo) -> None:
    """Same records, other bytes: a derivative's data can be recomputed (a warning), a
    root's cannot (a failure), as in §3.3."""
    paths = [data_file(repo.odf.dataset(n)) for n in (SCALED, STOCK)]
    for path in paths:
        pq.write_table(pq.read_table(path), path, compression="zstd")
    scaled, stock = paths
    assert cli(repo.root, "--integrity") == (
        1,
        [
            "org.example.prices: valid (5 blocks)",
            f"{SCALED}: valid (8 blocks)",
            f"  warning: block #7: data file {scaled.name} has {scaled.stat().st_size} bytes, "
            f"the block says {last_data_event(repo.odf.dataset(SCALED)).new_data.size}; "  # type: ignore[union-attr]
            "its records still match the logical hash",
            f"{STOCK}: invalid",
            f"  block #7: data file {stock.name} has {stock.stat().st_size} bytes, "
            f"the block says {last_data_event(repo.odf.dataset(STOCK)).new_data.size}; "  # type: ignore[union-attr]
            "its records still match the logical hash",
            "3 datasets: 2 valid, 1 invalid in N s",
        ],
    )


def falsify_last_run(
    ds: Dataset,
    records: Callable[[pa.Table], pa.Table],
    watermark: Callable[[models.ExecuteTransform], object] = lambda e: e.new_watermark,
) -> None:
    """Replace the last ExecuteTransform with one whose files and hashes are all
    consistent (so integrity passes) but whose result the query would not give."""
    blocks = list(ds.iter_blocks())
    (head, last), (prev, _) = blocks[0], blocks[1]
    event = last.event
    assert isinstance(event, models.ExecuteTransform) and event.new_data is not None
    table = records(slices(ds)[-1])
    written = write_slice(table, ds.root / "forged.parquet", ds.state().vocabulary())
    data_hash, size = ds.add_file(written.path)
    forged = event.model_copy(
        update={
            "new_data": event.new_data.model_copy(
                update={
                    "logical_hash": written.logical_hash,
                    "physical_hash": data_hash,
                    "size": size,
                }
            ),
            "new_watermark": watermark(event),
        }
    )
    ds.reset_head(prev, head)
    ds.append_event(forged, last.system_time)


def test_replay_catches_forged_records_that_integrity_cannot(
    repo: GitOpsRepo, spark: SparkSession
) -> None:
    ds = repo.odf.dataset(SCALED)
    recorded = last_data_event(ds).new_data
    assert recorded is not None

    def double_qty(table: pa.Table) -> pa.Table:
        index = table.column_names.index("qty10")
        return table.set_column(index, "qty10", pc.multiply(table["qty10"], 2))

    falsify_last_run(ds, double_qty)
    assert cli(repo.root, "--integrity", SCALED)[0] == 0
    verdict = verify_dataset(repo.odf, SCALED, repo.odf.names_by_id(), lambda: spark)
    forged = last_data_event(ds).new_data
    assert forged is not None
    assert [str(p) for p in verdict.problems] == [
        f"block #7: replay of ExecuteTransform {ds.head()} does not reproduce it: "
        f"logical hash {forged.logical_hash} in the block, {recorded.logical_hash} in the replay"
    ]


def test_replay_catches_a_forged_watermark(repo: GitOpsRepo, spark: SparkSession) -> None:
    ds = repo.odf.dataset(SCALED)
    later = Timestamp.parse("2020-01-05T00:00:00Z")
    falsify_last_run(ds, lambda t: t, lambda e: later)
    verdict = verify_dataset(repo.odf, SCALED, repo.odf.names_by_id(), lambda: spark)
    assert [str(p) for p in verdict.problems] == [
        f"block #7: replay of ExecuteTransform {ds.head()} does not reproduce it: "
        "watermark 2020-01-05T00:00:00Z in the block, 2020-01-02T00:00:00Z in the replay"
    ]


@pytest.mark.parametrize("damage", [None, data_file, checkpoint_file], ids=["intact", "data", "cp"])
def test_the_content_sweep_finds_what_a_single_process_finds(
    repo: GitOpsRepo, monkeypatch: pytest.MonkeyPatch, damage: Callable[[Dataset], Path] | None
) -> None:
    """A Snapshot root with checkpoints and a derivative with ``ExecuteTransform`` blocks,
    checked with the blocks parsed by two processes (``content_sweep``) and by one."""
    if damage is not None:
        flip_middle_byte(damage(repo.odf.dataset(SCALED)))

    def found(sweep_from: int) -> list[tuple[str, list[str], int, int]]:
        monkeypatch.setattr(content_sweep, "SWEEP_FROM", sweep_from)
        checked = [(n, inspect_dataset(repo.odf.dataset(n))) for n in (STOCK, SCALED)]
        return [(n, [str(p) for p in i.problems], i.block_count, i.files) for n, i in checked]

    swept = found(1)
    assert swept == found(10**9)
    assert [(name, blocks, files) for name, _, blocks, files in swept] == [
        (STOCK, 8, 4),
        (SCALED, 8, 4),
    ]
    assert [problems != [] for _, problems, _, _ in swept] == [False, damage is not None]
