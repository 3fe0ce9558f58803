"""``reconcile gc``'s judgement over many chains: which store objects no chain names.

Builds the repository ``bench_plan.py`` builds (N root datasets of M blocks each),
commits it, and fills a folder store with the objects the chains name plus as many
unnamed ones. Then times gc's judgement (every block of the working tree decoded, every
ref's blocks listed and those not read already skipped, the store listed) against the
floor measured in the same run: reading the same block files, listing the refs' objects
and the store, which any collector must do. Prints the driver's peak memory.

    python benchmarks/bench_gc.py [--datasets 1000] [--blocks 100] [--runs 3]
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from bench_plan import build, scale
from pyarrow import fs as pafs

from reconciler.commands.common import Session
from reconciler.commands.gc import judge_objects
from reconciler.config import RepoConfig
from reconciler.odf.store_fs import FileSystemStore

UNNAMED = 1000


def fill_store(store: Path) -> None:
    """As many unnamed objects as ``UNNAMED``, half of them a week old."""
    (store / "data").mkdir(parents=True)
    old = time.time() - 8 * 86400
    for i in range(UNNAMED):
        path = store / "data" / f"f1620{i:064x}"
        path.write_bytes(b"unnamed")
        if i % 2:
            os.utime(path, (old, old))


def floor(root: Path, store: Path) -> float:
    start = time.perf_counter()
    for block in (root / "odf").glob("*/blocks/*"):
        block.read_bytes()
    subprocess.run(
        ["git", "rev-list", "--objects", "--no-walk", "--all"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    for entry in os.scandir(store / "data"):
        entry.stat()
    return time.perf_counter() - start


def timed_gc(root: Path, store: FileSystemStore) -> float:
    """Seconds of one judgement, checked to collect exactly the old unnamed objects."""
    start = time.perf_counter()
    judgement = judge_objects(Session(RepoConfig.load(root)), store, 7 * 86400, False)
    seconds = time.perf_counter() - start
    assert (len(judgement.collect), len(judgement.young)) == (UNNAMED // 2, UNNAMED // 2)
    return seconds


def main() -> None:
    args = scale(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        start = time.perf_counter()
        build(root, args.datasets, args.blocks)
        git = ["git", "-c", "user.name=bench", "-c", "user.email=b@example.org"]
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run([*git, "-c", "gc.auto=0", "commit", "-qm", "chains"], cwd=root, check=True)
        store_dir = Path(tmp) / "store"
        fill_store(store_dir)
        store = FileSystemStore(
            pafs.LocalFileSystem(), str(store_dir), Path(tmp) / "cache", str(store_dir), True
        )
        print(
            f"setup: {args.datasets} datasets x {args.blocks} blocks, committed, and"
            f" {UNNAMED} unnamed objects in {time.perf_counter() - start:.1f} s"
        )
        floor_s = gc_s = float("inf")
        for _ in range(args.runs):
            floor_s = min(floor_s, floor(root, store_dir))
            gc_s = min(gc_s, timed_gc(root, store))
        total = args.datasets * args.blocks
        print(f"gc:    {gc_s:.2f} s ({total / gc_s:,.0f} blocks/s)")
        print(f"floor: {floor_s:.2f} s (read the blocks, list the refs' objects and the store)")
        print(f"ratio gc/floor: {gc_s / floor_s:.2f}x (best of {args.runs} runs each)")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"driver peak memory: {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
