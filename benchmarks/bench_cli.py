"""How long a short ``reconcile`` command takes, start to exit, as a user runs it.

A command that starts no engine (``--help``, a plan with no changed query, ``log``,
``verify --integrity``, ``lineage``) is mostly the interpreter loading modules, so the
figure that matters is the whole process. Each command is timed as a fresh process over
a small repository (a root and a derivative, metadata applied, no data), best of
``--runs``, beside two floors measured in the same run: a bare interpreter
(``python -c pass``), and one that only imports the modules every command of this kind
must load (typer, pydantic, pyarrow: the app, the protocol models, the schemas). The
driver's peak memory (``ru_maxrss`` of the children) is printed for each.

    python benchmarks/bench_cli.py [--runs 5]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reconciler.apply.metadata import apply_dataset
from reconciler.config import RepoConfig
from reconciler.odf.repository import OdfRepository
from reconciler.odf.timestamps import Timestamp
from reconciler.plan.model import QueryCheck
from reconciler.planning.compose import PlanRequest, make_plan

ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: org.example.a
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "sources/*.csv"}
      read: {kind: Csv, header: true, schema: [event_time TIMESTAMP, id BIGINT]}
      merge: {kind: Ledger, primaryKey: [id]}
    - kind: SetVocab
      eventTimeColumn: event_time
"""

DERIVED = """kind: DatasetSnapshot
version: 1
content:
  name: org.example.b
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: org.example.a}]
      transform: {kind: Sql, engine: spark, query: "SELECT * FROM `org.example.a`"}
"""

COMMANDS = {
    "--help": ["--help"],
    "plan": ["plan"],
    "log": ["log", "org.example.b"],
    "verify --integrity": ["verify", "--integrity"],
    "lineage": ["lineage"],
}


def build(root: Path) -> None:
    """The two manifests, and their metadata applied (as an apply's first half would;
    the query is taken as valid, so that no engine starts here)."""
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "org.example.a.yaml").write_text(ROOT)
    (root / "datasets" / "org.example.b.yaml").write_text(DERIVED)
    config = RepoConfig.load(root)
    plan = make_plan(config, PlanRequest(), lambda name, inputs, sql: QueryCheck(name, ok=True))
    repo = OdfRepository(config.odf_dir)
    ids = {d.name: d.dataset_id for d in plan.datasets if d.dataset_id}
    for dataset in plan.datasets:
        result = apply_dataset(repo, dataset, Timestamp.parse("2026-01-01T00:00:00Z"), ids)
        assert result.error is None, result.error


def best(command: list[str], runs: int) -> float:
    """The shortest of ``runs`` runs of ``command``, in seconds; each must exit 0."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        build(root)
        bare = best([python, "-c", "pass"], args.runs)
        floor_code = "import typer, pydantic, pyarrow"
        floor = best([python, "-c", floor_code], args.runs)
        print(f"{'python -c pass':<28}{bare:7.3f} s")
        print(f"{'import typer/pydantic/pyarrow':<28}{floor:7.3f} s  (the floor)")
        for name, extra in COMMANDS.items():
            seconds = best([python, "-m", "reconciler", "-C", str(root), *extra], args.runs)
            print(f"{'reconcile ' + name:<28}{seconds:7.3f} s  {seconds / floor:4.1f}x the floor")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory of the largest child process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
