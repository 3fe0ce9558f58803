"""`reconcile` (apply) and `reconcile push` end to end: real CLI processes, real git.

The first test is the README's promise: a fresh copy of this repository's example
datasets is planned and ingested by one command, and a second run is up to date.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from cli_here import reconcile_here
from gitops_repo import GitOpsRepo, manifest, rows, slices
from test_cli_conventions import normal

from reconciler.odf.integrity import check_integrity

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = (
    "org.example.bank.transactions",
    "org.example.warehouse.stock",
    "org.example.warehouse.stock.value",
    "org.example.weather.observations",
    "org.example.weather.daily",
    "org.example.weather.anomalies",
)


def run(
    root: Path,
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``reconcile -C root ARGS``, or ``reconcile ARGS`` run in ``cwd`` when it is given;
    in this process (``cli_here``) unless ``process`` asks for a process of its own."""
    where = [] if cwd is not None else ["-C", str(root)]
    if not process:
        return reconcile_here([*where, *args], stdin=stdin, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *where, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
        timeout=600,
    )


QUICKSTART = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && reconcile"


def fresh_clone(target: Path) -> GitOpsRepo:
    """Every file git tracks in this checkout, in a new repository with nothing beside
    it: what a user has after cloning (the package itself is already installed here)."""
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    repo = GitOpsRepo.create(target)
    for name in filter(None, tracked.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target / name)
    repo.commit("clone")
    return repo


def test_the_readme_quickstart_ingests_the_examples_on_a_fresh_clone_then_is_up_to_date(
    tmp_path: Path,
) -> None:
    assert f"```sh\n{QUICKSTART}\n```" in (REPO_ROOT / "README.md").read_text()
    repo = fresh_clone(tmp_path / "alone" / "clone")
    assert sorted(p.name for p in (tmp_path / "alone").iterdir()) == ["clone"]

    # The quickstart's last command, `reconcile`, run in the clone as the README says,
    # a process of its own with the examples' Spark settings.
    first = run(repo.root, "--system-time", "2026-11-21T06:00:00Z", cwd=repo.root, process=True)
    assert first.returncode == 0, first.stdout + first.stderr
    assert [line for line in normal(first.stdout) if " START " not in line][-7:] == [
        "HH:MM:SS OK    org.example.bank.transactions created: 9 blocks (5 metadata), 24 records in N s",
        "HH:MM:SS OK    org.example.warehouse.stock created: 8 blocks (4 metadata), 16 records in N s",
        "HH:MM:SS OK    org.example.warehouse.stock.value created: 6 blocks (4 metadata), 16 records in N s",
        "HH:MM:SS OK    org.example.weather.observations created: 9 blocks (5 metadata), 216 records in N s",
        "HH:MM:SS OK    org.example.weather.daily created: 7 blocks (5 metadata), 9 records in N s",
        "HH:MM:SS OK    org.example.weather.anomalies created: 7 blocks (5 metadata), 34 records in N s",
        "6 datasets: 6 created (315 records) in N s",
    ]
    for name in EXAMPLES:
        assert check_integrity(repo.odf.dataset(name)) == [], name

    stock = [
        rows(t, "system_time") for t in slices(repo.odf.dataset("org.example.warehouse.stock"))
    ]
    assert stock[1:] == [
        [
            (5, 2, "2026-11-01T00:00:00Z", "P-1001", "Pallet wrap 500mm", 120, "18.90"),
            (6, 3, "2026-11-02T00:00:00Z", "P-1001", "Pallet wrap 500mm", 96, "18.90"),
            (7, 2, "2026-11-01T00:00:00Z", "P-1002", "Box 40x30x30", 800, "2.35"),
            (8, 3, "2026-11-02T00:00:00Z", "P-1002", "Box 40x30x30", 650, "2.35"),
            (9, 1, "2026-11-01T00:00:00Z", "P-1004", "Label roll 100x150", 55, "12.00"),
            (10, 0, "2026-11-02T00:00:00Z", "P-1006", "Corner protector", 400, "0.45"),
        ],
        [
            (11, 2, "2026-11-02T00:00:00Z", "P-1002", "Box 40x30x30", 650, "2.35"),
            (12, 3, "2026-11-03T00:00:00Z", "P-1002", "Box 40x30x30", 640, "2.35"),
            (13, 2, "2026-11-01T00:00:00Z", "P-1003", "Packing tape 66m", 340, "3.10"),
            (14, 3, "2026-11-03T00:00:00Z", "P-1003", "Packing tape 66m", 340, "3.25"),
            (15, 1, "2026-11-01T00:00:00Z", "P-1005", "Bubble wrap 1m", 18, "24.50"),
        ],
    ]

    # The map passes the stock's retractions (1) and corrections (2, 3) through.
    value = slices(repo.odf.dataset("org.example.warehouse.stock.value"))
    assert [rows(t, "system_time")[5:11] for t in value] == [
        [
            (5, 2, "2026-11-01T00:00:00Z", "P-1001", "Pallet wrap 500mm", 120, "18.90", "2268.00"),
            (6, 3, "2026-11-02T00:00:00Z", "P-1001", "Pallet wrap 500mm", 96, "18.90", "1814.40"),
            (7, 2, "2026-11-01T00:00:00Z", "P-1002", "Box 40x30x30", 800, "2.35", "1880.00"),
            (8, 3, "2026-11-02T00:00:00Z", "P-1002", "Box 40x30x30", 650, "2.35", "1527.50"),
            (9, 1, "2026-11-01T00:00:00Z", "P-1004", "Label roll 100x150", 55, "12.00", "660.00"),
            (10, 0, "2026-11-02T00:00:00Z", "P-1006", "Corner protector", 400, "0.45", "180.00"),
        ]
    ]
    daily = slices(repo.odf.dataset("org.example.weather.daily"))
    assert rows(daily[0], "system_time")[:3] == [
        (0, 0, "2026-11-01", "bergen-florida", 24, 3.6, 10.2, 6.98),
        (1, 0, "2026-11-01", "oslo-blindern", 24, -0.9, 6.2, 2.59),
        (2, 0, "2026-11-01", "tromso-langnes", 24, -5.3, 0.7, -2.1),
    ]

    verify = run(repo.root, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert normal(verify.stdout) == [
        "org.example.bank.transactions: valid (9 blocks)",
        "org.example.warehouse.stock: valid (8 blocks)",
        "org.example.warehouse.stock.value: valid (6 blocks, 1 transform replayed)",
        "org.example.weather.anomalies: valid (7 blocks, 1 transform replayed)",
        "org.example.weather.daily: valid (7 blocks, 1 transform replayed)",
        "org.example.weather.observations: valid (9 blocks)",
        "6 datasets: 6 valid in N s",
    ]

    second = run(repo.root, "--system-time", "2026-11-21T07:00:00Z")
    assert second.returncode == 0, second.stdout + second.stderr
    assert normal(second.stdout)[-13:] == [
        *(
            line
            for name in EXAMPLES
            for line in (f"HH:MM:SS START {name}", f"HH:MM:SS OK    {name} up to date in N s")
        ),
        "6 datasets: 6 up to date in N s",
    ]
    plan = run(repo.root, "--plan", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout


PUSH = """
    - kind: AddPushSource
      sourceName: api
      read: {kind: NdJson, schema: ["event_time TIMESTAMP", "sensor STRING", "value DOUBLE"]}
      merge: {kind: Append}
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
"""


def test_push_ingests_standard_input_and_a_failed_push_changes_nothing(tmp_path: Path) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("org.example.pushed", manifest("org.example.pushed", "Root", PUSH))
    assert run(repo.root, "--system-time", "2026-01-01T00:00:00Z").returncode == 0
    records = '{"event_time": "2026-01-01T10:00:00Z", "sensor": "s1", "value": 1.5}\n'
    pushed = run(
        repo.root,
        "--system-time",
        "2026-01-02T00:00:00Z",
        "push",
        "org.example.pushed",
        "-",
        stdin=records + '{"event_time": "2026-01-01T09:00:00Z", "sensor": "s2", "value": 2.5}\n',
    )
    assert pushed.returncode == 0, pushed.stderr
    assert normal(pushed.stdout) == ["org.example.pushed: updated: 2 blocks, 2 records in N s"]
    ds = repo.odf.dataset("org.example.pushed")
    head = ds.head()
    bad = run(repo.root, "push", "org.example.pushed", "-", "--source", "api", stdin="{not json\n")
    assert bad.returncode == 1
    # Spark's start-up says nothing (engine/log4j2.properties); only the JDK's own notice
    # of the vector module Spark loads comes before the error.
    (last,) = [
        line
        for line in bad.stderr.splitlines()
        if line != "WARNING: Using incubator modules: jdk.incubator.vector"
    ]
    assert last == (
        "error: org.example.pushed: ReadError: standard input: line 1: malformed record:"
        " {not json: not valid JSON (Expecting property name enclosed in double quotes at"
        " char 1)"
    )
    unknown = run(repo.root, "push", "org.example.pushed", "-", "--source", "nope", stdin=records)
    assert (
        unknown.stderr
        == "error: org.example.pushed: IngestError: org.example.pushed has no push source 'nope'; it has: api\n"
    )
    assert ds.head() == head and check_integrity(ds) == []
    (data,) = slices(ds)
    assert rows(data) == [
        (0, 0, "2026-01-02T00:00:00Z", "2026-01-01T09:00:00Z", "s2", 2.5),
        (1, 0, "2026-01-02T00:00:00Z", "2026-01-01T10:00:00Z", "s1", 1.5),
    ]
    assert data.column_names == ["offset", "op", "system_time", "event_time", "sensor", "value"]


def test_a_pushed_files_cause_names_it_relative_to_the_repository_or_whole_outside(
    tmp_path: Path,
) -> None:
    """As an apply's causes do: the error quoted the path the file was read at, the
    runner's checkout folder included, into the log and the run's result."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("org.example.pushed", manifest("org.example.pushed", "Root", PUSH))
    assert run(repo.root, "--system-time", "2026-01-01T00:00:00Z").returncode == 0
    inside = repo.root / "incoming" / "bad.json"
    inside.parent.mkdir()
    outside = tmp_path / "bad.json"
    for file, shown in ((inside, "incoming/bad.json"), (outside, str(outside))):
        file.write_text("{not json\n")
        bad = run(repo.root, "push", "org.example.pushed", str(file))
        assert bad.returncode == 1
        assert bad.stderr.splitlines()[-1] == (
            f"error: org.example.pushed: ReadError: {shown}: line 1: malformed record:"
            " {not json: not valid JSON (Expecting property name enclosed in double quotes at"
            " char 1)"
        )
