"""The command line's conventions: help, version, exit codes, --select, -q, --format json,
progress lines and summaries, Ctrl-C and a missing Java.

Most tests run the app in-process; the ones about a real process (exit codes as a shell
sees them, SIGINT, PATH without java) run ``python -m reconciler``.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_here import reconcile_here
from drip_server import dripping_server
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events, rows, slices
from typer.testing import CliRunner, Result

from reconciler.cli import app
from reconciler.odf import json_schemas
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import OdfRepository

A, B, C, D = "org.example.a", "org.example.b", "org.example.c", "org.example.d"
WHEN = "2026-01-01T00:00:00Z"
JAVA_MISSING = (
    "error: Java was not found: install a Java 17 runtime "
    "(apt-get install openjdk-17-jre-headless) or set JAVA_HOME\n"
)


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-C", str(root), *args])


def process(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=600,
    )


def normal(text: str) -> list[str]:
    """Lines with the clock and the durations replaced, which differ from run to run."""
    lines = [re.sub(r"^\d\d:\d\d:\d\d ", "HH:MM:SS ", line) for line in text.splitlines()]
    return [re.sub(r" in (\d+ min )?[\d.]+ s$", " in N s", line) for line in lines]


WAITING = "no files match none/*.csv"
"""What a root waiting for its first file notes: its glob as written, no runner path."""


def build(root: Path) -> GitOpsRepo:
    """a (a root with two records) -> b -> c, and d (a root waiting for its first file)."""
    repo = GitOpsRepo.create(root)
    repo.write(A, manifest(A, "Root", root_events()))
    for name, source in ((B, A), (C, B)):
        query = f"SELECT op, event_time, a, b FROM `{source}`"
        repo.write(name, manifest(name, "Derivative", derivative_events([source], query)))
    waiting = root_events().replace("sources/*.csv", "none/*.csv")
    repo.write(D, manifest(D, "Root", waiting))
    (root / "sources").mkdir()
    (root / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    repo.commit("datasets")
    return repo


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory, spark: object) -> tuple[Path, Result]:
    """The repository after one apply (in this process, on the tests' Spark), and it."""
    repo = build(tmp_path_factory.mktemp("applied") / "repo")
    return repo.root, cli(repo.root, "--system-time", WHEN)


@pytest.fixture
def copy(applied: tuple[Path, Result], tmp_path: Path) -> Path:
    shutil.copytree(applied[0], tmp_path / "repo")
    return tmp_path / "repo"


def validate(document: dict[str, object]) -> None:
    json_schemas.validator("run-result.json").validate(document)


# Help, version, usage errors


def test_version_names_the_package_and_the_pyspark_it_runs_on() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    expected = f"reconcile {version('odf-reconciler')} (pyspark {version('pyspark')})\n"
    assert result.output == expected


@pytest.mark.parametrize(
    "command", ["", "plan", "apply", "verify", "sql", "log", "push", "lineage", "init"]
)
def test_dash_h_is_help_on_every_command(command: str) -> None:
    result = CliRunner().invoke(app, [*command.split(), "-h"], prog_name="reconcile")
    assert result.exit_code == 0
    assert result.output.startswith(f"Usage: reconcile {command}".rstrip() + " [OPTIONS]")
    # A command's help names the options that go before it (``-C`` was nowhere in it).
    ends = " ".join(result.output.split())
    if command:
        assert ends.endswith(
            "Before the command: -C <path> (run in that directory), -q (errors and the last"
            " line only), -v (tracebacks), --version; see reconcile --help."
        )


def test_the_bare_command_says_in_its_help_that_it_applies() -> None:
    result = CliRunner().invoke(app, ["--help"], prog_name="reconcile")
    assert "Without a command, reconcile APPLIES: it is `reconcile apply`" in result.output
    assert "64 usage error, 130\n  interrupted." in result.output


@pytest.mark.parametrize(
    "args",
    [["--no-such-option"], ["plan", "--format", "yaml"], ["no-such-command"], ["log"]],
    ids=["unknown-option", "bad-choice", "unknown-command", "missing-argument"],
)
def test_a_usage_error_exits_64_never_2(applied: tuple[Path, Result], args: list[str]) -> None:
    result = cli(applied[0], *args)
    assert result.exit_code == 64, result.output


def test_a_usage_error_exits_64_in_a_real_process(applied: tuple[Path, Result]) -> None:
    done = process(applied[0], "verify", "--format", "markdown")
    assert done.returncode == 64
    assert done.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--format': Value error, 'markdown' is not one of 'text', 'json'."
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["plan", "--bogus"], "No such option: --bogus (Possible options: --base, --out)"),
        (["verify", "--format", "markdown"], "Invalid value for '--format': Value error,"),
        (["log"], "Missing argument 'name'."),
        (["sql", "SELECT 1", "--limit", "-1"], "Invalid value for '--limit': Input should be"),
    ],
)
def test_a_usage_error_is_found_before_the_repository_is_looked_for(
    tmp_path: Path, args: list[str], error: str
) -> None:
    """Outside a repository ``reconcile plan --bogus`` said "not a reconciler repository",
    exit 1; inside one "No such option", exit 64: a usage error is now the same in both."""
    repository = tmp_path / "repo"
    repository.mkdir()
    (repository / "pyproject.toml").write_text("[tool.reconciler]\n")
    outside, inside = cli(tmp_path, *args), cli(repository, *args)
    assert (outside.exit_code, inside.exit_code) == (64, 64)
    assert outside.output == inside.output
    assert outside.output.splitlines()[-1].startswith(f"Error: {error}")


def test_each_commands_help_says_what_its_format_takes() -> None:
    """verify's help offered ``--format <text|markdown|json>`` and refused markdown, and
    said "(§3)"; show's spoke of "after an apply its result", which show has none of."""

    def help_of(command: str) -> str:
        result = CliRunner().invoke(app, [command, "--help"], prog_name="reconcile")
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    verify = help_of("verify")
    assert "--format <text|json> text or json (reconciler/schemas/run-result.json)." in verify
    assert (
        "Check every chain rule, block hash and file, and replay every transform from the"
        " chain alone, comparing what it gives with what the chain records."
    ) in verify
    assert "§" not in verify
    assert (
        "--format <text|markdown|json> text; markdown (a pull-request comment); json (the"
        " plan again, as plan --format json writes it)."
    ) in help_of("show")
    assert (
        "--format <text|markdown|json> text; markdown (a pull-request comment); json"
        " (reconciler/schemas/plan.json, which apply and show take back)."
    ) in help_of("plan")
    assert (
        "--format <text|markdown|json> text; markdown (a pull-request comment, plans only);"
        " json (the plan, or after an apply its result: reconciler/schemas/run-result.json)."
    ) in help_of("apply")
    assert "--format <table|csv|json|parquet>" in help_of("sql")
    assert "-o, --format, --output <text|yaml|json>" in help_of("log")
    assert "--format <text|mermaid|dot>" in help_of("lineage")


def test_options_of_apply_before_another_command_are_a_usage_error(
    applied: tuple[Path, Result],
) -> None:
    result = cli(applied[0], "--format", "json", "verify")
    assert result.exit_code == 64
    assert result.output.splitlines()[-1] == (
        "Error: --format goes after the command: reconcile verify --format"
    )
    wrong = cli(applied[0], "--apply", "p.json", "plan")  # no such option after plan either
    assert wrong.exit_code == 64
    assert wrong.output.splitlines()[-1] == "Error: --apply is not an option of plan"


def test_verbose_lets_an_unexpected_error_s_traceback_through(
    applied: tuple[Path, Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``-v`` a defect is one line with a hint; with it, before or after the
    command, the error itself (``-v`` once landed in the lock timeout instead)."""
    from reconciler.gitloop import fingerprints

    def defect(*args: object) -> None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(fingerprints, "take", defect)
    result = cli(applied[0], "plan")
    assert (result.exit_code, result.output) == (
        1,
        "error: RuntimeError: a defect (run with -v for details)\n",
    )
    for args in (["-v", "plan"], ["plan", "-v"], ["--verbose", "plan"]):
        result = cli(applied[0], *args)
        assert isinstance(result.exception, RuntimeError), args
        assert str(result.exception) == "a defect"


def test_an_apply_stopped_before_its_datasets_still_writes_its_json_document(
    copy: Path,
) -> None:
    """The scheduled job's summary reads why a run stopped from its result document:
    a run refused by another's lock writes one too, and says it applied nothing."""
    with OdfRepository(copy / "odf").lock("reconcile apply"):
        done = process(copy, "apply", "--format", "json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    validate(document)
    assert document["error"].startswith("odf/ is locked by reconcile apply (pid ")
    assert (document["datasets"], document["exitCode"]) == ([], 1)
    assert document["summary"]["line"].startswith("nothing applied in ")
    assert done.stderr.splitlines()[0] == f"error: {document['error']}"


def test_quiet_plan_prints_only_its_errors_and_its_summary_line(copy: Path) -> None:
    full = cli(copy, "plan").output.splitlines()
    for args in (["-q", "plan"], ["plan", "-q"]):
        assert cli(copy, *args).output.splitlines() == [full[-1]]
    (copy / "datasets" / "broken.yaml").write_text("kind: DatasetSnapshot\nversion: 1\n")
    full = cli(copy, "plan").output.splitlines()
    quiet = cli(copy, "-q", "plan")
    assert quiet.exit_code == 1
    problems = full[full.index("Problems:") : full.index("Warnings:")]
    assert quiet.output.splitlines() == [*filter(None, problems), "", full[-1]]
    assert problems[1].startswith("  datasets/broken.yaml:")
    assert full[-1].endswith(" 1 error, 1 warning.")


def test_paths_given_with_c_are_taken_from_its_directory(copy: Path) -> None:
    """Like ``git -C``: ``reconcile -C repo plan --out p.json`` writes repo/p.json, and
    ``show``, ``apply PLAN`` and ``sql --out`` read and write there too."""

    def run_in_parent(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", "-C", copy.name, *args],
            cwd=copy.parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    planned = run_in_parent("plan", "--format", "json", "--out", "p.json")
    assert planned.returncode == 0, planned.stderr
    assert (copy / "p.json").is_file() and not (copy.parent / "p.json").exists()
    shown = run_in_parent("show", "p.json", "--format", "markdown", "--out", "p.md")
    assert shown.returncode == 0, shown.stderr
    assert (copy / "p.md").read_text().startswith("## Reconcile plan")
    applied = run_in_parent("apply", "p.json", "--system-time", WHEN)
    assert applied.returncode == 0, applied.stderr
    queried = run_in_parent("sql", f"SELECT a FROM `{A}`", "--format", "csv", "--out", "a.csv")
    assert queried.returncode == 0, queried.stderr
    assert (copy / "a.csv").read_text() == "a\n1\n2\n"


def test_push_takes_lock_timeout_after_the_command(copy: Path) -> None:
    result = cli(copy, "push", A, "-", "--lock-timeout", "5")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: {A}: "), result.output


def test_options_that_cannot_apply_are_usage_errors(applied: tuple[Path, Result]) -> None:
    root = applied[0]
    for args, message in (
        (
            ["apply", "--detailed-exitcode"],
            "--detailed-exitcode is a plan's: use it with reconcile plan",
        ),
        (["--detailed-exitcode"], "--detailed-exitcode is a plan's: use it with reconcile plan"),
        (
            ["log", A, "--limit", "0"],
            "Invalid value for '--limit': Input should be greater than or equal to 1",
        ),
        (["verify", A, "-s", D], "the names given and --select have no dataset in common"),
    ):
        result = cli(root, *args)
        assert result.exit_code == 64, (args, result.output)
        assert result.output.splitlines()[-1] == f"Error: {message}", args


def test_a_folder_that_is_no_repository_is_an_error_saying_so(tmp_path: Path) -> None:
    for args in ([], ["plan"], ["verify"], ["lineage"]):
        result = cli(tmp_path, *args)
        assert result.exit_code == 1
        assert result.output == (
            f"error: {tmp_path} is not a reconciler repository (no [tool.reconciler] in "
            "pyproject.toml, no datasets/ folder, no odf/ folder); `reconcile init` creates one\n"
        )


def test_a_folder_inside_a_repository_names_the_repository_to_run_in(tmp_path: Path) -> None:
    """From ``datasets/`` the error said to run ``reconcile init``, which would have made a
    second repository inside the first."""
    (tmp_path / "pyproject.toml").write_text("[tool.reconciler]\n")
    inside = tmp_path / "datasets" / "shop"
    inside.mkdir(parents=True)
    result = cli(inside, "plan")
    assert result.exit_code == 1
    assert result.output == (
        f"error: {inside} is not a reconciler repository (no [tool.reconciler] in"
        " pyproject.toml, no datasets/ folder, no odf/ folder); it is inside"
        f" {tmp_path}: run there, or with -C {tmp_path}\n"
    )


def test_quiet_and_verbose_together_are_a_usage_error(applied: tuple[Path, Result]) -> None:
    result = cli(applied[0], "-q", "-v", "plan")
    assert result.exit_code == 64
    assert result.output.splitlines()[-1] == "Error: -q and -v cannot be used together"


# Apply: progress lines, summary, JSON


def test_apply_without_a_terminal_prints_start_and_result_lines_and_a_summary(
    applied: tuple[Path, Result],
) -> None:
    _, result = applied
    assert result.exit_code == 0, result.output
    assert normal(result.output)[-9:] == [
        f"HH:MM:SS START {A}",
        f"HH:MM:SS OK    {A} created: 6 blocks (4 metadata), 2 records in N s",
        f"HH:MM:SS START {B}",
        f"HH:MM:SS OK    {B} created: 6 blocks (4 metadata), 2 records in N s",
        f"HH:MM:SS START {C}",
        f"HH:MM:SS OK    {C} created: 6 blocks (4 metadata), 2 records in N s",
        f"HH:MM:SS START {D}",
        f"HH:MM:SS OK    {D} created: 4 blocks (4 metadata); {WAITING} in N s",
        "4 datasets: 4 created (6 records) in N s",
    ]


@pytest.mark.parametrize(
    "args",
    [["-q", "apply"], ["apply", "-q"], ["apply", "--quiet", "--yes"]],
    ids=["before", "after", "long-after"],
)
def test_quiet_apply_prints_only_the_final_line(copy: Path, args: list[str]) -> None:
    result = cli(copy, *args)
    assert result.exit_code == 0, result.output
    assert normal(result.output) == ["4 datasets: 4 up to date in N s"]


def test_quiet_and_verbose_after_the_command_are_still_exclusive(
    applied: tuple[Path, Result],
) -> None:
    result = cli(applied[0], "plan", "-q", "-v")
    assert result.exit_code == 64
    assert result.output.splitlines()[-1] == "Error: -q and -v cannot be used together"


def test_apply_json_is_one_document_on_stdout_following_its_schema(copy: Path) -> None:
    (copy / "sources" / "2.csv").write_text("a,b\n3,z\n")
    result = CliRunner().invoke(
        app, ["-C", str(copy), "apply", "--format", "json", "--system-time", WHEN]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    validate(document)
    times = [d.pop("seconds") for d in document["datasets"]]
    assert all(isinstance(t, float | int) for t in times)
    assert document["summary"].pop("seconds") >= 0
    line = document["summary"].pop("line")
    assert normal(line) == ["4 datasets: 3 updated (3 records), 1 up to date in N s"]
    updated = {"status": "updated", "error": None, "blocks": 1, "metadataBlocks": 0}
    unmoved = {"movedFiles": 0, "renamedFrom": None, "note": None}
    assert document == {
        "formatVersion": 1,
        "command": "apply",
        "ok": True,
        "exitCode": 0,
        "interrupted": False,
        "discarded": None,
        "error": None,
        "datasets": [
            {"name": A, **updated, "records": 1, "offsets": [2, 2], **unmoved},
            {"name": B, **updated, "records": 1, "offsets": [2, 2], **unmoved},
            {"name": C, **updated, "records": 1, "offsets": [2, 2], **unmoved},
            {
                "name": D,
                "status": "up-to-date",
                "error": None,
                "blocks": 0,
                "metadataBlocks": 0,
                "records": 0,
                "offsets": None,
                "movedFiles": 0,
                "renamedFrom": None,
                "note": WAITING,
            },
        ],
        "summary": {"datasets": 4, "statuses": {"updated": 3, "up-to-date": 1}, "records": 3},
    }
    assert normal(result.stderr)[-1] == "4 datasets: 3 updated (3 records), 1 up to date in N s"


# --select


def planned(root: Path, *selectors: str) -> list[str]:
    result = cli(root, "plan", "--format", "json", *selectors)
    assert result.exit_code == 0, result.output
    return [d["name"] for d in json.loads(result.stdout)["datasets"]]


def test_select_picks_datasets_by_name_and_graph_operator(applied: tuple[Path, Result]) -> None:
    root = applied[0]
    assert planned(root, "--select", f"{B}+") == [B, C]
    assert planned(root, "-s", f"+{B}") == [A, B]
    assert planned(root, "--select", f"+{B}+") == [A, B, C]
    assert planned(root, "--select", f"{A} {D}") == [A, D]
    assert planned(root, "-s", C, "-s", D) == [C, D]
    alias = cli(root, "--plan", "--format", "json", "--select", f"{B}+")
    assert [d["name"] for d in json.loads(alias.stdout)["datasets"]] == [B, C]


def test_select_with_unknown_names_is_a_usage_error_naming_them(
    applied: tuple[Path, Result],
) -> None:
    for command in (["plan"], ["apply"], [], ["verify"], ["sql", "SELECT 1"]):
        result = cli(applied[0], *command, "--select", "org.example.zz+ org.example.yy")
        assert result.exit_code == 64, (command, result.output)
        assert result.output.splitlines()[-1] == (
            "Error: --select: no such dataset: org.example.yy, org.example.zz"
        )


def test_a_selection_leaving_out_an_input_with_no_chain_fails_its_plan(
    tmp_path: Path, spark: object
) -> None:
    """Apply could not name the input (it has no chain, hence no id): the plan says so,
    and apply writes nothing, rather than failing on it."""
    root = build(tmp_path / "repo").root
    expected = (
        f"  datasets/{B}.yaml:1: {B}: reads {A}, which has no chain yet and is not selected:"
        f" select it too (+{B} selects everything {B} reads)"
    )
    for command in (["plan"], ["apply"]):
        result = cli(root, *command, "-s", B)
        assert result.exit_code == 1, result.output
        assert expected in result.output.splitlines(), result.output
    # the run's result names the first error: the scheduled job's summary shows it
    refused = cli(root, "apply", "-s", B, "--format", "json")
    assert json.loads(refused.stdout)["error"] == (
        f"the plan has 1 error, so nothing was applied; the first: {expected.strip()}"
    )
    assert not (root / "odf").exists() or not any((root / "odf").rglob("blocks/*"))
    assert cli(root, "plan", "-s", f"+{B}").exit_code == 0


def test_apply_of_a_selection_runs_only_it_reading_the_upstreams_data(copy: Path) -> None:
    (copy / "sources" / "2.csv").write_text("a,b\n3,z\n")
    first = cli(copy, "-q", "apply", "--select", A, "--system-time", WHEN)
    assert normal(first.output) == ["1 dataset: 1 updated (1 record) in N s"]
    result = cli(copy, "apply", "--select", f"{B}+", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    validate(document)
    assert [(d["name"], d["status"], d["offsets"]) for d in document["datasets"]] == [
        (B, "updated", [2, 2]),
        (C, "updated", [2, 2]),
    ]


# verify and log


def test_verify_json_follows_the_schema(applied: tuple[Path, Result]) -> None:
    result = cli(applied[0], "verify", "--integrity", "--format", "json", "-s", f"{B}+")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    validate(document)
    assert [(d["name"], d["status"], d["blocks"], d["problems"]) for d in document["datasets"]] == [
        (B, "valid", 6, []),
        (C, "valid", 6, []),
    ]
    assert normal(document["summary"]["line"]) == ["2 datasets: 2 valid in N s"]


def test_log_takes_format_like_every_command_and_keeps_o_and_output(
    applied: tuple[Path, Result],
) -> None:
    outputs = {
        args: cli(applied[0], "log", A, *args, "yaml", "--limit", "1").output
        for args in (("--format",), ("-o",), ("--output",))
    }
    assert len(set(outputs.values())) == 1
    assert outputs[("--format",)].startswith("blockHash: ")


# Real processes: a missing Java, Ctrl-C


def without_java(tmp_path: Path) -> dict[str, str]:
    """The environment with python and git alone on PATH: no java, and no JAVA_HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    return {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(bin_dir)}


def test_a_missing_java_is_one_line_and_exit_1(
    applied: tuple[Path, Result], tmp_path: Path
) -> None:
    done = process(applied[0], "verify", B, env=without_java(tmp_path))
    assert done.returncode == 1
    assert done.stderr == JAVA_MISSING
    assert normal(done.stdout) == ["0 datasets: 0 valid in N s"]


def test_a_selection_analyses_only_its_queries_and_those_it_reads(
    copy: Path, tmp_path: Path
) -> None:
    """``plan -s a`` analysed every changed query in the repository, starting Spark for
    datasets the selection neither runs nor reads."""
    for name, source in ((B, A), (C, B)):
        query = f"SELECT op, event_time, a, b, a + 1 AS a1 FROM `{source}`"
        (copy / "datasets" / f"{name}.yaml").write_text(
            manifest(name, "Derivative", derivative_events([source], query))
        )
    env = without_java(tmp_path)  # a plan that starts the engine says so
    runs = {select: process(copy, "plan", "-s", select, env=env) for select in (A, B, C, D)}
    assert {select: (done.returncode, done.stderr) for select, done in runs.items()} == {
        A: (0, ""),
        B: (1, "analysing 1 query on Spark…\n"),
        C: (1, "analysing 2 queries on Spark…\n"),
        D: (0, ""),
    }
    assert f"2 queries not analysed ({B}, {C}): validating queries needs Java 17" in runs[C].stdout
    assert "query" not in runs[A].stdout


def interrupted(
    root: Path, *signals: signal.Signals, options: tuple[str, ...] = (), group: bool = False
) -> subprocess.CompletedProcess[str]:
    """An apply of ``root`` (with ``options``) sent ``signals`` once its first dataset has
    started, 1.5 s apart (closer, a second is the first's echo); with ``group``, to its
    whole process group, as a terminal's Ctrl-C and ``timeout`` send them, so its git
    children get them too."""
    running = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(root), "--system-time", WHEN, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert running.stdout is not None
    for line in running.stdout:
        if line.endswith(f"START {A}\n"):
            for number, sent in enumerate(signals):
                time.sleep(1.5 if number else 0)
                if group:
                    os.killpg(running.pid, sent)
                else:
                    running.send_signal(sent)
            break
    stdout, stderr = running.communicate(timeout=600)
    return subprocess.CompletedProcess(running.args, running.returncode, stdout, stderr)


def test_ctrl_c_stops_after_the_dataset_at_hand_with_exit_130_and_valid_chains(
    tmp_path: Path,
) -> None:
    repo = build(tmp_path / "repo")
    done = interrupted(repo.root, signal.SIGINT, group=True)
    assert done.returncode == 130, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "analysing 2 queries on Spark…",
        "stopping at the next safe point, keeping what is done (Ctrl-C again to stop at once)",
        f"interrupted: stopped after {A}; every chain is valid",
    ]
    # The datasets that did not run are counted as skipped, not left out.
    assert normal(done.stdout)[-2:] == [
        f"HH:MM:SS OK    {A} created: 6 blocks (4 metadata), 2 records in N s",
        "4 datasets: 1 created (2 records), 3 skipped in N s",
    ]
    assert repo.odf.names() == [A]
    assert check_integrity(repo.odf.dataset(A)) == []


def test_sigterm_stops_after_the_dataset_at_hand_as_ctrl_c_does(tmp_path: Path) -> None:
    """What a service manager, a container runtime or a CI runner's cancel sends; a
    service manager sends it to every process of the service, so the JVM got it too and
    died (pyspark makes it ignore SIGINT only), failing the dataset at hand."""
    repo = build(tmp_path / "repo")
    done = interrupted(repo.root, signal.SIGTERM, group=True)
    assert done.returncode == 130, done.stdout + done.stderr
    assert done.stderr.splitlines()[-2:] == [
        "stopping at the next safe point, keeping what is done (SIGTERM again to stop at once)",
        f"interrupted: stopped after {A}; every chain is valid",
    ]
    assert repo.odf.names() == [A]
    assert check_integrity(repo.odf.dataset(A)) == []


def test_a_stop_ends_a_backlog_after_the_file_at_hand_keeping_the_files_done(
    tmp_path: Path,
) -> None:
    """A pull of many files was all or nothing: stopped, the files it had ingested were
    rolled back with it, so a backlog longer than a run never landed. Each file's
    iteration is whole; the next run takes the rest, each record once."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    (repo.root / "sources").mkdir()
    for day in (1, 2, 3):
        (repo.root / "sources" / f"2026-01-0{day}.csv").write_text(f"a,b\n{day},d{day}\n")
    repo.write(A, manifest(A, "Root", root_events()))
    done = interrupted(repo.root, signal.SIGINT, group=True)
    assert done.returncode == 130, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == f"interrupted: stopped after {A}; every chain is valid"
    assert normal(done.stdout)[-2:] == [
        f"HH:MM:SS OK    {A} created: 6 blocks (4 metadata), 1 record; stopped when asked to:"
        " the source has more, for the next run in N s",
        "1 dataset: 1 created (1 record) in N s",
    ]
    assert check_integrity(repo.odf.dataset(A)) == []
    rest = reconcile_here(["-C", str(repo.root), "apply", "--system-time", WHEN])
    assert rest.returncode == 0, rest.stdout + rest.stderr
    ingested = [r[3:] for t in slices(repo.odf.dataset(A)) for r in rows(t, "system_time")]
    assert ingested == [(1, "d1"), (2, "d2"), (3, "d3")]


def test_a_bad_file_in_a_backlog_keeps_the_files_before_it_and_the_next_run_goes_on(
    tmp_path: Path,
) -> None:
    """A failing file rolled back the whole pull, the good files before it too, so one
    bad file in a backlog held every file before it back. Each iteration is whole: the
    ones before the bad file stay (kamu commits each iteration too), the dataset still
    counts as failed, and once the file is mended the next run takes it and the rest."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    (repo.root / "sources").mkdir()
    for day, a in ((1, "1"), (2, "two"), (3, "3")):
        (repo.root / "sources" / f"2026-01-0{day}.csv").write_text(f"a,b\n{a},d{day}\n")
    repo.write(A, manifest(A, "Root", root_events()))
    first = reconcile_here(["-C", str(repo.root), "apply", "--system-time", WHEN])
    assert first.returncode == 1, first.stdout + first.stderr
    lines = normal(first.stdout)
    assert lines[-2].startswith(
        f"HH:MM:SS ERROR {A} failed: 6 blocks (4 metadata), 1 record; read failed: "
    )
    assert lines[-2].endswith(
        "; what the files before it added is kept (1 record), and the next run starts again"
        " from this one in N s"
    )
    assert "2026-01-02.csv" in lines[-2]
    assert lines[-1] == "1 dataset: 1 failed (1 record kept) in N s"  # said "1 failed"
    dataset = repo.odf.dataset(A)
    assert check_integrity(dataset) == []
    assert [r[3:] for t in slices(dataset) for r in rows(t, "system_time")] == [(1, "d1")]
    (repo.root / "sources" / "2026-01-02.csv").write_text("a,b\n2,d2\n")
    rest = reconcile_here(["-C", str(repo.root), "apply", "--system-time", WHEN])
    assert rest.returncode == 0, rest.stdout + rest.stderr
    ingested = [r[:2] + r[3:] for t in slices(dataset) for r in rows(t, "system_time")]
    assert ingested == [(0, 0, 1, "d1"), (1, 0, 2, "d2"), (2, 0, 3, "d3")]


# A container runtime whose first run gives one record and asks for another run; the
# second runs until it is killed by name (``docker kill NAME``), after saying so in $LOG.
BATCHES_RUNTIME = """#!/bin/sh
if [ "$1" = kill ]; then kill "$(cat "$LOG/pid")"; exit 0; fi
while [ $# -gt 0 ]; do
  if [ "$1" = --volume ]; then out="${2%%:*}"; fi
  shift
done
if [ ! -e "$LOG/first" ]; then
  touch "$LOG/first" "$out/new-has-more-data"; echo e1 > "$out/new-etag"
  printf 'a,b\\n1,x\\n'; exit 0
fi
echo $$ > "$LOG/pid"; touch "$LOG/second"
exec sleep 600
"""


def test_a_stop_during_a_later_batch_keeps_the_batches_done(tmp_path: Path) -> None:
    """The first signal cuts a container (or a download) at once, and the pull's roll
    back took the batches before it too: they are whole, and kept."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    log, runtime = tmp_path / "log", tmp_path / "bin" / "docker"
    log.mkdir()
    runtime.parent.mkdir()
    runtime.write_text(BATCHES_RUNTIME)
    runtime.chmod(0o755)
    events = root_events().replace(
        '{kind: FilesGlob, path: "sources/*.csv"}', "{kind: Container, image: busybox}"
    )
    repo.write(A, manifest(A, "Root", events))
    env = {**os.environ, "LOG": str(log), "PATH": f"{runtime.parent}:{os.environ['PATH']}"}
    running = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(repo.root), "--system-time", WHEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 300
    while not (log / "second").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    running.send_signal(signal.SIGINT)
    stdout, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stdout + stderr
    assert stderr.splitlines()[-1] == f"interrupted: stopped after {A}; every chain is valid"
    assert check_integrity(repo.odf.dataset(A)) == []
    assert [r[3:] for t in slices(repo.odf.dataset(A)) for r in rows(t, "system_time")] == [
        (1, "x")
    ]


@pytest.mark.parametrize("dripping", ["body", "headers"])
def test_sigterm_cuts_a_download_in_progress_at_once(tmp_path: Path, dripping: str) -> None:
    """A download has written nothing, and a slow server held the stopped run until the
    download's end (``timeout`` sends one SIGTERM): it is cut, and the dataset with it,
    whether the server drips its body or its headers."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    with dripping_server(seconds=60, headers=dripping == "headers") as url:
        events = root_events().replace(
            '{kind: FilesGlob, path: "sources/*.csv"}', f'{{kind: Url, url: "{url}"}}'
        )
        repo.write(A, manifest(A, "Root", events))
        started = time.monotonic()
        done = interrupted(repo.root, signal.SIGTERM)
        stopped = time.monotonic() - started
    assert done.returncode == 130, done.stdout + done.stderr
    assert stopped < 20, done.stderr
    assert done.stderr.splitlines()[-2:] == [
        "stopping at the next safe point, keeping what is done (SIGTERM again to stop at once)",
        f"interrupted: stopped during {A}, which is left as it was; every chain is valid",
    ]
    assert not (repo.root / "odf").exists() or repo.odf.names() == []


def test_a_second_ctrl_c_stops_at_once_without_a_traceback(tmp_path: Path) -> None:
    """The second Ctrl-C interrupts a call into the JVM: py4j logs that with a traceback,
    which without -v must not reach the terminal. The dataset at hand is rolled back."""
    repo = build(tmp_path / "repo")
    done = interrupted(repo.root, signal.SIGINT, signal.SIGINT)
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "ERROR:" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith("interrupted: stopped ")
    for name in repo.odf.names():
        assert check_integrity(repo.odf.dataset(name)) == []


def test_the_prompt_takes_no_answer_as_no(tmp_path: Path) -> None:
    """On a terminal apply asks before changing metadata; end of input (Ctrl-D) is "no",
    said as a cancelled apply, not as click's bare 'Aborted!'. Nothing is written."""
    repo = build(tmp_path / "repo")
    terminal, their_end = pty.openpty()
    running = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(repo.root), "apply"],
        stdin=their_end,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(their_end)
    assert running.stderr is not None
    asked = b""
    while b"Apply these changes? [y/N]:" not in asked:
        piece = os.read(running.stderr.fileno(), 256)
        assert piece, asked
        asked += piece
    os.write(terminal, b"\x04")
    stdout, stderr = running.communicate(timeout=600)
    os.close(terminal)
    assert running.returncode == 1
    assert b"Aborted" not in stderr
    assert stderr.decode().splitlines()[-1] == "error: apply cancelled: nothing was written"
    assert stdout.decode().splitlines()[-1].lstrip().startswith("nothing applied in ")
    assert not (repo.root / "odf").exists() or repo.odf.names() == []


def test_init_works_outside_a_repository_and_names_each_file_then_refuses_a_second_time(
    tmp_path: Path,
) -> None:
    first = cli(tmp_path, "init", "new")
    assert first.exit_code == 0, first.output
    *files, began, done = first.output.splitlines()
    assert began == "initialized a git repository on branch main: nothing is committed yet"
    assert done == f"{len(files)} files created in {tmp_path / 'new'}: next, `reconcile plan`"
    assert all((tmp_path / "new" / line.removeprefix("created ")).is_file() for line in files)
    assert "created pyproject.toml" in files
    again = cli(tmp_path / "new", "init")
    assert again.exit_code == 1
    assert again.output == (
        f"error: {tmp_path / 'new' / 'datasets'} already holds manifests: "
        "this is a reconciler repository already\n"
    )


REQUIRED = {"sql": ["SELECT 1"], "log": ["org.example.a"], "push": ["org.example.a", "-"]}
"""The arguments each command must be given."""


@pytest.mark.parametrize(
    "command", ["plan", "apply", "verify", "sql", "log", "push", "gc", "show", "lineage"]
)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_a_commands_help_is_shown_outside_a_repository(
    tmp_path: Path, command: str, flag: str
) -> None:
    result = cli(tmp_path, command, flag)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: root {command} ")  # CliRunner names it root
    # the command itself still needs a repository, once its arguments are right (a usage
    # error comes first: test_a_usage_error_is_found_before_the_repository_is_looked_for)
    refused = cli(tmp_path, command, *REQUIRED.get(command, []))
    if command == "show":  # but show, which renders a plan file anywhere, needs the file
        assert (refused.exit_code, refused.output.splitlines()[-1]) == (
            64,
            "Error: Missing argument 'file'.",
        )
        return
    assert refused.exit_code == 1
    assert refused.output.startswith(f"error: {tmp_path} is not a reconciler repository")
