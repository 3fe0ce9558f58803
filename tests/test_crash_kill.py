"""A ``reconcile`` killed with SIGKILL by another process, at 23 points of a run over two
roots and two derivatives, leaves valid chains, and the next run finishes the work exactly
once, with nothing left behind.

The kill is real and comes from outside: the test starts ``reconcile`` in its own process
group, and the process stops itself at its k-th write under ``odf/`` (just before or just
after a ``.pending-*`` temporary is renamed into place, counted by a wrapper around
``os.replace``) and waits there; the test sees it stopped and sends SIGKILL to the group
(the Python process and its Spark JVM). Stopping at a counted write, rather than killing
at a random time, makes every window of a run reachable on every machine: a temporary
not yet renamed, a block without its head, a head without the next block, a data file or
checkpoint without a block naming it, a dataset folder with a Seed but no head.

Two runs are killed: a metadata run (new events for every dataset and a new root; no
data, so no JVM and a cheap kill) at 20 points, and a data run (two files into an
Append root, one into a Ledger root, a join and a map) at 3 points spread over its
slices, checkpoints and derivative. After each kill every chain must pass the integrity
check and no head may name a missing block; then the next ``reconcile`` (which takes
the dead run's lock, since the kernel dropped it) must remove every ``.pending-*`` and
unreferenced file and reach exactly the uninterrupted run's result: for the datasets the
template already had, the very same head hash (so the same events, offsets, logical and
physical hashes); for the new root, the same events but its Seed's random id.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, events, manifest, reconcile, rows, slices

from reconciler.apply.outcome import WROTE, Status
from reconciler.odf import Timestamp, models
from reconciler.odf.integrity import check_integrity
from reconciler.odf.lock import read_holder
from reconciler.odf.repository import Dataset

pytestmark = pytest.mark.usefixtures("spark")

WHEN = "2026-03-01T00:00:00Z"
SET_UP = Timestamp.parse("2026-02-01T00:00:00Z")
A, B, AB, C, D = "org.x.a", "org.x.b", "org.x.ab", "org.x.c", "org.x.d"
TEMPLATE_DATASETS = (A, B, AB, C)

# Runs the CLI; stops at its argv[2]-th replace into argv[1] (before or after the rename),
# writes what it was about to do (or had done) to argv[3], and waits for its SIGKILL.
KILLABLE_RECONCILE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    odf, stop, marker = Path(sys.argv[1]).resolve(), int(sys.argv[2]), Path(sys.argv[3])
    count, real_replace = [0], os.replace

    def point(what):
        count[0] += 1
        if count[0] == stop:
            # whole or not at all: the test reads it as soon as the name exists
            marker.with_suffix(".tmp").write_text(what)
            real_replace(marker.with_suffix(".tmp"), marker)
            time.sleep(600)

    def replace(src, dst, **kwargs):
        target = Path(dst).resolve()
        if odf not in target.parents:
            return real_replace(src, dst, **kwargs)
        where = target.relative_to(odf).parent
        point(f"before {where}")
        real_replace(src, dst, **kwargs)
        point(f"after {where}")

    os.replace = replace
    from reconciler.cli import app
    app(sys.argv[4:], prog_name="reconcile")
    """
)


def root_manifest(name: str, merge: str, extra: str = "") -> str:
    return manifest(
        name,
        "Root",
        f"""
        - kind: SetPollingSource
          fetch: {{kind: FilesGlob, path: "sources/{name}-*.csv"}}
          read: {{kind: Csv, header: true, schema: [k BIGINT, v STRING]}}
          merge: {merge}
        {extra}""",
    )


def derivative_manifest(name: str, inputs: list[str], query: str, extra: str = "") -> str:
    refs = ", ".join(f"{{datasetRef: {i}}}" for i in inputs)
    return manifest(
        name,
        "Derivative",
        f"""
        - kind: SetTransform
          inputs: [{refs}]
          transform: {{kind: Sql, engine: spark, query: "{query}"}}
        {extra}""",
    )


JOIN = f"SELECT a.event_time, a.k, a.v, b.v AS w FROM `{A}` AS a JOIN `{B}` AS b ON a.k = b.k"
MAP = f"SELECT op, event_time, k * 10 AS k10, w FROM `{AB}`"
DOCUMENTED = """
        - kind: SetInfo
          description: Documented later
        - kind: SetLicense
          shortName: CC0-1.0
          name: Creative Commons Zero v1.0 Universal
          websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
        """


def write_manifests(repo: GitOpsRepo, extra: str = "") -> None:
    repo.write(A, root_manifest(A, "{kind: Append}", extra))
    repo.write(B, root_manifest(B, "{kind: Ledger, primaryKey: [k]}", extra))
    repo.write(AB, derivative_manifest(AB, [A, B], JOIN, extra))
    repo.write(C, derivative_manifest(C, [AB], MAP, extra))


def template(root: Path, with_data: bool) -> GitOpsRepo:
    """Four chains with their metadata (Seeds fixed here, so every copy shares them);
    then either new events for all and a new root (metadata run), or source files
    (data run)."""
    repo = GitOpsRepo.create(root)
    write_manifests(repo)
    repo.commit("datasets")
    repo.apply(SET_UP)
    if with_data:
        (root / "sources").mkdir()
        (root / "sources" / f"{A}-1.csv").write_text("k,v\n1,x\n2,y\n")
        (root / "sources" / f"{A}-2.csv").write_text("k,v\n3,z\n")
        (root / "sources" / f"{B}-1.csv").write_text("k,v\n1,p\n3,q\n1,r\n")
    else:
        write_manifests(repo, DOCUMENTED)
        repo.write(D, root_manifest(D, "{kind: Append}", DOCUMENTED))
    repo.commit("next")
    return repo


def summary(ds: Dataset) -> tuple[list[dict[str, object]], list[list[tuple[object, ...]]]]:
    """Every event (a Seed without its random id) and every record, in order."""
    dumped = []
    for event in events(ds):
        data = event.model_dump(mode="json", by_alias=True)
        if isinstance(event, models.Seed):
            data.pop("datasetId")
        dumped.append(data)
    return dumped, [rows(t) for t in slices(ds)]


def stray_files(ds: Dataset) -> list[str]:
    """``.pending-*`` temporaries, lock files and files no block reachable from the head
    names; what must never be left for git to commit."""
    stored = {p for p in ds.root.rglob("*") if p.is_file()}
    wanted = ds.referenced_files() | {ds.layout.head_ref, ds.layout.info / "alias"}
    return sorted(str(p.relative_to(ds.root)) for p in stored - wanted)


class Reference:
    """The uninterrupted run of a template: its result and the writes it made, in order."""

    def __init__(self, repo: GitOpsRepo, monkeypatch: pytest.MonkeyPatch) -> None:
        odf, real_replace = repo.odf.root.resolve(), os.replace
        self.points: list[str] = []

        def replace(src: str, dst: str) -> None:
            target = Path(dst).resolve()
            if odf in target.parents:
                where = target.relative_to(odf).parent
                self.points += [f"before {where}", f"after {where}"]
            real_replace(src, dst)

        with monkeypatch.context() as patched:
            patched.setattr(os, "replace", replace)
            outcomes = reconcile(repo.root, Timestamp.parse(WHEN))
        assert {o.status for o in outcomes} <= WROTE, outcomes  # the heads are compared after
        self.heads = {n: repo.odf.dataset(n).head() for n in TEMPLATE_DATASETS}
        self.results = {n: summary(repo.odf.dataset(n)) for n in repo.odf.names()}


@pytest.fixture(scope="module")
def monkeymodule() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def templates(
    tmp_path_factory: pytest.TempPathFactory, monkeymodule: pytest.MonkeyPatch
) -> dict[str, tuple[Path, Reference]]:
    made = {}
    for kind, with_data in (("metadata", False), ("data", True)):
        base = tmp_path_factory.mktemp(kind)
        template(base / "template", with_data)
        shutil.copytree(base / "template", base / "uninterrupted")
        made[kind] = base / "template", Reference(GitOpsRepo(base / "uninterrupted"), monkeymodule)
    return made


def kill_at(
    repo: GitOpsRepo, point: int, marker: Path, script: str = KILLABLE_RECONCILE
) -> tuple[int, str]:
    """Start ``reconcile`` (``script``, which counts its writes), SIGKILL it (and its
    JVM) once it stops at ``point``; returns its pid and where it stopped."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            str(repo.odf.root),
            str(point),
            str(marker),
            *("-C", str(repo.root), "--system-time", WHEN),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline, "the run never reached its kill point"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    return process.pid, marker.read_text()


def check_killed_then_finished(
    tmp_path: Path, template_root: Path, reference: Reference, point: int, expected_at: str
) -> None:
    root = tmp_path / f"kill-{point}"
    shutil.copytree(template_root, root)
    repo = GitOpsRepo(root)
    pid, stopped_at = kill_at(repo, point, tmp_path / f"stopped-{point}")
    assert stopped_at == expected_at
    for name in repo.odf.names():  # whatever the kill left is a valid chain, head included
        assert check_integrity(repo.odf.dataset(name)) == [], (point, name)
    holder = read_holder(repo.odf.root)
    assert holder is not None and holder.pid == pid  # the dead run's record; not its lock

    outcomes = reconcile(root, Timestamp.parse(WHEN))
    assert Status.FAILED not in {o.status for o in outcomes}, outcomes
    assert sorted(repo.odf.names()) == sorted(reference.results)
    for name, expected in reference.results.items():
        ds = repo.odf.dataset(name)
        assert check_integrity(ds) == [], (point, name)
        assert stray_files(ds) == [], (point, name)
        assert summary(ds) == expected, (point, name)
        if name in reference.heads:
            assert ds.head() == reference.heads[name], (point, name)
    assert sorted(p.name for p in repo.odf.root.iterdir()) == [".lock", *sorted(reference.results)]


def appends(name: str, count: int) -> list[str]:
    """The writes of ``count`` block appends: the block, then the head, each a temporary
    renamed into place."""
    return [
        f"{when} {name}/{folder}"
        for _ in range(count)
        for folder in ("blocks", "refs")
        for when in ("before", "after")
    ]


# 20 of the metadata run's 50 writes: every step of the first append, then through the
# other datasets' new events, and every step of the new root's Seed, head and alias.
METADATA_POINTS = [1, 2, 3, 4, 6, 8, 11, 14, 18, 20, 23, 26, 30, 33, 34, 35, 36, 37, 38, 50]


def test_the_metadata_run_makes_the_writes_the_kill_points_count_on(
    templates: dict[str, tuple[Path, Reference]],
) -> None:
    assert templates["metadata"][1].points == [
        *appends(A, 2),
        *appends(B, 2),
        *appends(AB, 2),
        *appends(C, 2),
        *appends(D, 1),
        f"before {D}/info",
        f"after {D}/info",
        *appends(D, 3),
    ]


@pytest.mark.parametrize("point", METADATA_POINTS)
def test_a_metadata_run_killed_at_a_write_is_finished_exactly_once_by_the_next(
    tmp_path: Path, templates: dict[str, tuple[Path, Reference]], point: int
) -> None:
    template_root, reference = templates["metadata"]
    expected_at = reference.points[point - 1]
    check_killed_then_finished(tmp_path, template_root, reference, point, expected_at)


def data_points(points: list[str]) -> list[int]:
    """A slice in place without its block (the Append root's first data file, renamed),
    a Ledger checkpoint still a temporary, and the last derivative's final head move."""
    return [
        points.index(f"after {A}/data") + 1,
        points.index(f"before {B}/checkpoints") + 1,
        len(points) - 1,
    ]


@pytest.mark.parametrize(
    "which", range(3), ids=["slice-no-block", "checkpoint-pending", "last-head"]
)
def test_a_data_run_killed_at_a_write_is_finished_exactly_once_by_the_next(
    tmp_path: Path, templates: dict[str, tuple[Path, Reference]], which: int
) -> None:
    template_root, reference = templates["data"]
    point = data_points(reference.points)[which]
    expected_at = reference.points[point - 1]
    check_killed_then_finished(tmp_path, template_root, reference, point, expected_at)
