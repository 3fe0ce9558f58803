"""``reconcile --plan`` over many datasets with long chains and no query changes.

Builds a GitOps repository with N root datasets whose chains hold M blocks each, then
times a full plan against the floor measured in the same run: parsing the same YAML
manifests and reading the same block files, which any plan must do at least. Plan and
floor alternate ``--runs`` times and the best of each is compared, so that a moment of
load on a shared machine does not decide the ratio.

    python benchmarks/bench_plan.py [--datasets 1000] [--blocks 100] [--runs 3]

Then the same repository is committed to git, each dataset given a source file, and the
plan timed again, without and with ``--base``: what git adds to a team's plan.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from reconciler.config import RepoConfig
from reconciler.odf import DatasetId, Multihash, Timestamp, block_hash, encode_block, models
from reconciler.odf.repository import DatasetLayout
from reconciler.planning.compose import PlanRequest, make_plan

MANIFEST = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/{name}/{pattern}"}}
      read: {{kind: Csv, header: true, schema: [event_time TIMESTAMP, id BIGINT, value DOUBLE]}}
      merge: {{kind: Ledger, primaryKey: [id]}}
    - kind: SetInfo
      description: Benchmark dataset {name}
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
"""


class _FastChain:
    """Writes a valid chain without fsync or per-block validation: setup only, so that
    building 100,000 blocks takes seconds, not minutes (the product path fsyncs each)."""

    def __init__(self, root: Path) -> None:
        self.layout = DatasetLayout(root)
        self.layout.blocks.mkdir(parents=True)
        self.layout.refs.mkdir()
        self.head: Multihash | None = None
        self.seq = -1

    def append_event(self, event: models.OdfModel, t: Timestamp) -> None:
        self.seq += 1
        block = models.MetadataBlock(
            system_time=t, prev_block_hash=self.head, sequence_number=self.seq, event=event
        )
        data = encode_block(block)
        self.head = block_hash(data)
        self.layout.block(self.head).write_bytes(data)

    def finish(self) -> None:
        assert self.head is not None
        self.layout.head_ref.write_text(self.head)


def _pattern(i: int) -> str:
    """Every other dataset's glob walks its folders (``**``), as partitioned drops are read:
    the plan lists what each glob matches, so both walks are in the figures."""
    return _DEEP if i % 2 else "*.csv"


_DEEP = "**/*.csv"


def build(root: Path, datasets: int, blocks: int) -> None:
    (root / "datasets").mkdir(parents=True)
    t = Timestamp.parse("2026-01-01T00:00:00Z")
    for i in range(datasets):
        name = f"org.example.bench.d{i:04d}"
        text = MANIFEST.format(name=name, pattern=_pattern(i))
        (root / "datasets" / f"{name}.yaml").write_text(text)
        snapshot = models.DatasetSnapshotManifest.model_validate(yaml.safe_load(text)).content
        ds = _FastChain(root / "odf" / name)
        ds.append_event(
            models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT), t
        )
        for event in snapshot.metadata:
            ds.append_event(event, t)
        ds.append_event(models.SetDataSchema(schema_=b"\x00" * 64), t)
        offset = 0
        for j in range(blocks - len(snapshot.metadata) - 2):
            ds.append_event(
                models.AddData(
                    prev_offset=offset - 1 if offset else None,
                    new_data=models.DataSlice(
                        logical_hash=Multihash.sha3_256(b"l%d" % j),
                        physical_hash=Multihash.sha3_256(b"p%d" % j),
                        offset_interval=models.OffsetInterval(start=offset, end=offset + 9),
                        size=2048,
                    ),
                    new_watermark=Timestamp(1_700_000_000 + j),
                    new_source_state=models.SourceState(
                        source_name="default", kind="odf/etag", value=str(j)
                    ),
                ),
                t,
            )
            offset += 10
        ds.finish()
        ds.finish()


def floor(root: Path) -> float:
    start = time.perf_counter()
    for path in sorted((root / "datasets").glob("*.yaml")):
        yaml.load(
            path.read_text(),
            Loader=yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader,
        )
    for block in (root / "odf").glob("*/blocks/*"):
        block.read_bytes()
    return time.perf_counter() - start


def timed_plan(root: Path, datasets: int, base: str | None = None) -> float:
    """Seconds of one plan, checked to find every dataset unchanged without a JVM."""
    start = time.perf_counter()
    plan = make_plan(RepoConfig.load(root), PlanRequest(base_ref=base))
    seconds = time.perf_counter() - start
    assert plan.counts()["unchanged"] == datasets, plan.counts()
    assert not plan.engine_started and not plan.has_errors, plan.problems[:3]
    return seconds


def commit_to_git(root: Path) -> None:
    """Give every dataset a source file its glob matches, then commit the repository,
    chains included, as a team's repository holds them: a plan in git also asks git what
    changed since the chains' last runs (``planning.source_edits``) and, with a base,
    since the pull request branched."""
    for manifest in (root / "datasets").glob("*.yaml"):
        folder = root / "sources" / manifest.stem
        if _DEEP in manifest.read_text():
            folder = folder / "year=2026" / "month=01"
        folder.mkdir(parents=True)
        (folder / "new.csv").write_text("event_time,id,value\n")
    git = ["git", "-C", str(root), "-c", "gc.auto=0", "-c", "user.name=bench"]
    git += ["-c", "user.email=bench@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the datasets and their chains"], check=True)


def scale(description: str | None) -> argparse.Namespace:
    """``--datasets``, ``--blocks`` and ``--runs``: the benchmarks over ``build``'s
    repository take the same three."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    return parser.parse_args()


def main() -> None:
    args = scale(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build(root, args.datasets, args.blocks)
        print(
            f"setup: {args.datasets} datasets x {args.blocks} blocks "
            f"in {time.perf_counter() - start:.1f} s"
        )
        floor_s = plan_s = float("inf")
        for _ in range(args.runs):
            floor_s = min(floor_s, floor(root))
            plan_s = min(plan_s, timed_plan(root, args.datasets))
        total = args.datasets * args.blocks
        print(
            f"plan:  {plan_s:.2f} s ({total / plan_s:,.0f} blocks/s, "
            f"{args.datasets / plan_s:,.0f} datasets/s)"
        )
        print(f"floor: {floor_s:.2f} s (parse the YAML, read the block files)")
        print(f"ratio plan/floor: {plan_s / floor_s:.2f}x (best of {args.runs} runs each)")
        commit_to_git(root)
        in_git = based = float("inf")
        for _ in range(args.runs):
            in_git = min(in_git, timed_plan(root, args.datasets))
            based = min(based, timed_plan(root, args.datasets, base="main"))
        print(
            f"committed to git, a source file each: plan {in_git:.2f} s "
            f"({in_git / floor_s:.2f}x), plan --base main {based:.2f} s ({based / floor_s:.2f}x)"
        )


if __name__ == "__main__":
    main()
