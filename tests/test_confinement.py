"""Sources stay in the repository unless its base configuration allows a folder outside.

The hostile corpus (``test_hostile_sources.py``) shows what is refused; these tests pin
what is allowed (``source_roots``, symlinks that stay inside), that a pull request cannot
widen its own allow-list, and that apply checks again when files change after the plan.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import git
import gitops_repo
import pyarrow.parquet as pq
import pytest
import yaml
from gitops_repo import derivative_events
from typer.testing import CliRunner

from reconciler.apply.outcome import Status
from reconciler.apply.run import apply_plan
from reconciler.cli import app
from reconciler.config import ConfigError, RepoConfig
from reconciler.ingest.fetch import Fetched, SourceOutsideError, UpToDate, fetch
from reconciler.ingest.pull import IngestContext
from reconciler.odf import Timestamp, models
from reconciler.odf.repository import OdfRepository
from reconciler.planning.compose import PlanRequest, make_plan
from reconciler.source_paths import (
    Globs,
    OutsideError,
    SourceRoots,
    glob_folder,
    glob_matches,
    glob_would_match,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = Timestamp.parse("2026-03-01T00:00:00Z")
SECRET = "TOP-SECRET-CANARY-7f3a"
# A record that does not parse: a reader that got this far would quote it in its error.
MALFORMED = f"a,b\n{SECRET},x\n"


def manifest(name: str, fetch: str) -> str:
    return textwrap.dedent(
        f"""\
        kind: DatasetSnapshot
        version: 1
        content:
          name: {name}
          kind: Root
          metadata:
            - kind: SetPollingSource
              fetch: {fetch}
              read: {{kind: Csv, header: true, schema: ["a BIGINT", "b STRING"]}}
              merge: {{kind: Append}}
        """
    )


def make_repo(tmp: Path, pyproject: str = "[tool.reconciler]\n") -> tuple[Path, Path]:
    """A repository with its pyproject.toml, and an empty folder beside it."""
    root, outside = tmp / "repo", tmp / "exports"
    (root / "datasets").mkdir(parents=True)
    (root / "sources").mkdir()
    (root / "pyproject.toml").write_text(pyproject)
    outside.mkdir()
    return root, outside


def cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["-C", str(root), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def problems(root: Path, base: str | None = None) -> list[str]:
    plan = make_plan(RepoConfig.load(root), PlanRequest(base_ref=base))
    return [f"{p.location}: {p.field}: {p.message}" for p in plan.problems]


def glob_step(path: str) -> models.FetchStepFilesGlob:
    return models.FetchStepFilesGlob.model_validate({"kind": "FilesGlob", "path": path})


def fetch_in(
    root: Path,
    step: models.FetchStep,
    env: dict[str, str] | None = None,
    source_roots: tuple[Path, ...] = (),
) -> Fetched | UpToDate:
    return fetch(
        step,
        prev_state=None,
        system_time=T0,
        workdir=root.parent / "work",
        base_dir=root,
        env=env or {},
        source_roots=source_roots,
    )


# --- Configuration -------------------------------------------------------------------------


def test_source_roots_are_absolute_or_relative_to_the_repository(tmp_path: Path) -> None:
    root, _ = make_repo(
        tmp_path, '[tool.reconciler]\nsource_roots = ["/mnt/exports", "../sibling"]\n'
    )
    assert RepoConfig.load(root).source_roots == (Path("/mnt/exports"), root / "../sibling")


def test_a_repository_without_source_roots_allows_no_folder_outside(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path)
    assert RepoConfig.load(root).source_roots == ()


def test_source_roots_that_is_not_a_list_of_paths_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    root, _ = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = "../sibling"\n')
    with pytest.raises(ConfigError) as e:
        RepoConfig.load(root)
    assert str(e.value) == (
        "[tool.reconciler] source_roots must be a list of folder paths, got '../sibling'"
    )
    assert cli(root, "--plan") == (
        1,
        "error: [tool.reconciler] source_roots must be a list of folder paths, got '../sibling'\n",
    )


# --- Plans ---------------------------------------------------------------------------------


def test_source_roots_let_the_plan_accept_globs_and_file_urls_in_the_allowed_folder(
    tmp_path: Path,
) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "2026.csv").write_text("a,b\n1,x\n")
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "../exports/*.csv"}')
    )
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", f'{{kind: Url, url: "file://{outside}/2026.csv"}}')
    )
    refusal = "resolves outside the repository"
    assert [p.split(": ")[-1] for p in problems(root)] == [
        f"FilesGlob path '../exports/*.csv' {refusal}",
        f"Url 'file://{outside}/2026.csv' {refusal}",
    ]

    (root / "pyproject.toml").write_text('[tool.reconciler]\nsource_roots = ["../exports"]\n')
    assert problems(root) == []
    (root / "pyproject.toml").write_text(f'[tool.reconciler]\nsource_roots = ["{outside}"]\n')
    assert problems(root) == []


def test_an_allowed_root_does_not_allow_its_neighbours(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = ["../exports"]\n')
    (tmp_path / "exports-private").mkdir()
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "../exports-private/*.csv"}')
    )
    assert problems(root) == [
        f"{root}/datasets/a.yaml:8:38: content.metadata[0].fetch.path: FilesGlob path "
        "'../exports-private/*.csv' resolves outside the repository and its source_roots"
    ]


def test_symlinks_that_stay_inside_the_repository_are_followed(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path)
    (root / "sources" / "real").mkdir()
    (root / "sources" / "real" / "a.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "alias").symlink_to("real")
    (root / "common").mkdir()
    (root / "common" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/alias/*.csv"}')
    )
    (root / "datasets" / "shared").symlink_to("../common")
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", '{kind: Url, url: "file:sources/alias/a.csv"}')
    )
    (root / "datasets" / "drafts").mkdir()
    (root / "datasets" / "drafts" / "c.manifest").write_text(
        manifest("org.example.c", '{kind: FilesGlob, path: "sources/real/*.csv"}')
    )
    (root / "datasets" / "c.yaml").symlink_to("drafts/c.manifest")
    assert RepoConfig.load(root).manifest_paths() == [
        root / "datasets" / "b.yaml",
        root / "datasets" / "c.yaml",
        root / "datasets" / "shared" / "a.yaml",
    ]
    assert problems(root) == []


def test_a_double_star_glob_never_descends_into_a_symlinked_folder(tmp_path: Path) -> None:
    """Two links to ``.`` made the walk exponential (the plan never ended; one, as here,
    makes forty levels of the same files, so a regression fails rather than hangs), and a link
    to ``/proc`` walked the whole machine: ``**`` now skips symlinked folders, wherever
    they lead. Hidden names stay unmatched by wildcards, as glob's are."""
    root, outside = make_repo(tmp_path)
    (outside / "orders-9.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "orders").mkdir()
    (root / "sources" / "orders" / "orders-1.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "orders" / ".orders-2.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "loop").mkdir()
    (root / "sources" / "loop" / "a").symlink_to(".")
    (root / "sources" / "exports").symlink_to(outside)
    roots = SourceRoots.of(root)
    assert glob_matches("sources/**/orders-*.csv", roots, root) == [
        root / "sources" / "orders" / "orders-1.csv"
    ]
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/**/orders-*.csv"}')
    )
    assert problems(root) == []


@pytest.mark.parametrize(
    "written",
    [
        "sources/*.csv",
        "sources/orders/orders-*.csv",
        "sources/**/orders-*.csv",
        "sources/**/*.csv",
        "sources/**",
        "**/*.csv",
        "sources/*/orders-?.csv",
        "sources/**/[a-o]*-[!2].csv",
        "sources/.hidden/*.csv",
        "./sources/../sources/orders/*.csv",
        "sources/orders/orders-1.csv",
    ],
)
def test_a_deleted_file_is_judged_by_the_globs_own_rules(tmp_path: Path, written: str) -> None:
    """A plan asks whether a file git says was deleted was one of a glob's matches, which
    cannot be listed any more: the answer must be the listing's for every file that is
    there (hidden names, ``**`` at any depth, character classes), and no file outside
    the glob's fixed folder matches."""
    root, _ = make_repo(tmp_path)
    names = [
        "sources/a.csv",
        "sources/.b.csv",
        "sources/orders/orders-1.csv",
        "sources/orders/orders-2.csv",
        "sources/orders/deep/orders-3.csv",
        "sources/orders/deep/x.txt",
        "sources/.hidden/orders-4.csv",
        "sources/.hidden/deeper/orders-5.csv",
        "other/orders-6.csv",
        "top.csv",
    ]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("a,b\n1,x\n")
    matches = glob_matches(written, SourceRoots.of(root), root)
    listed = {Path(os.path.normpath(p)) for p in matches if p.is_file()}
    judged = {root / name for name in names if glob_would_match(written, root, root / name)}
    assert judged == listed


def test_a_globs_fixed_folder_and_its_matches_of_files_that_are_gone(tmp_path: Path) -> None:
    """Where a plan looks for deleted matches (the fixed part, ``..`` and ``.`` taken as
    written), and which paths count."""
    root = tmp_path
    assert glob_folder("sources/**/orders-*.csv", root) == root / "sources"
    assert glob_folder("./a/../b/*.csv", root) == root / "b"
    assert glob_folder("b/c.csv", root) == root / "b" / "c.csv"
    assert glob_would_match("sources/**/orders-*.csv", root, root / "sources/x/y/orders-1.csv")
    assert not glob_would_match("sources/**/orders-*.csv", root, root / "sources/.x/orders-1.csv")
    assert not glob_would_match("sources/*.csv", root, root / "sources/x/a.csv")
    assert not glob_would_match("sources/*.csv", root, root / "elsewhere/a.csv")
    # a hostile pattern of many ** stays polynomial
    many = "/".join(["**"] * 200) + "/x.csv"
    assert not glob_would_match(many, root, root.joinpath(*["d"] * 60, "y.csv"))


def git_repo(root: Path) -> git.Repo:
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.org")
    return repo


def commit_all(repo: git.Repo, message: str) -> None:
    repo.git.add(A=True)
    repo.index.commit(message)


def test_a_pull_request_cannot_widen_its_own_source_roots(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "2026.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/*.csv"}')
    )
    repo = git_repo(root)
    commit_all(repo, "base: no source_roots")
    repo.git.checkout("-b", "pr")
    (root / "pyproject.toml").write_text('[tool.reconciler]\nsource_roots = ["../exports"]\n')
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", '{kind: FilesGlob, path: "../exports/*.csv"}')
    )
    commit_all(repo, "pr: widen source_roots and read from it")

    code, output = cli(root, "--plan", "--base", "main")
    assert code == 1
    assert (
        "datasets/b.yaml:8:38: org.example.b: content.metadata[0].fetch.path: "
        "FilesGlob path '../exports/*.csv' resolves outside the repository\n"
    ) in output
    # Without --base (the plan of the merged branch, and apply) the working tree rules.
    assert problems(root) == []


def test_a_pull_request_that_only_widens_source_roots_fails_its_plan_at_that_line(
    tmp_path: Path,
) -> None:
    """It changes no manifest, so it planned as "no changes"; the next pull request
    then read any file of the runner's into git through the widened list."""
    root, _ = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = ["../exports"]\n')
    repo = git_repo(root)
    commit_all(repo, "base: one allowed folder")
    repo.git.checkout("-b", "pr")
    (root / "pyproject.toml").write_text(
        '[tool.reconciler]\n# wider\nsource_roots = ["../exports", "/"]\n'
    )
    commit_all(repo, "pr: widen source_roots")
    code, output = cli(root, "--plan", "--base", "main")
    assert code == 1
    assert (
        "pyproject.toml:3: tool.reconciler.source_roots: source_roots adds '/': once merged,"
        " any manifest could read the runner's files there into a chain that everyone can"
        " read. It is a change of what sources may read: a maintainer reviews and merges it"
        " as such, since this plan cannot approve it\n"
    ) in output
    (root / "pyproject.toml").write_text("[tool.reconciler]\nsource_roots = []\n")
    commit_all(repo, "pr: narrow them instead")
    assert cli(root, "--plan", "--base", "main")[0] == 0


def test_a_pull_request_is_judged_by_the_source_roots_of_its_base(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = ["../exports"]\n')
    (outside / "2026.csv").write_text("a,b\n1,x\n")
    repo = git_repo(root)
    commit_all(repo, "base: allows ../exports")
    repo.git.checkout("-b", "pr")
    (root / "pyproject.toml").write_text("[tool.reconciler]\n")
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", '{kind: FilesGlob, path: "../exports/*.csv"}')
    )
    commit_all(repo, "pr")
    assert problems(root, base="main") == []


def test_a_base_without_pyproject_allows_no_folder_outside(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path)
    (root / "pyproject.toml").unlink()
    (root / "README.md").write_text("base\n")
    repo = git_repo(root)
    commit_all(repo, "base: no pyproject.toml")
    (root / "pyproject.toml").write_text('[tool.reconciler]\nsource_roots = ["../exports"]\n')
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", '{kind: FilesGlob, path: "../exports/*.csv"}')
    )
    assert sorted(p.split(": ")[-1] for p in problems(root, base="main")) == [
        "FilesGlob path '../exports/*.csv' resolves outside the repository",
        # and widening source_roots is refused at its line (see above)
        "a maintainer reviews and merges it as such, since this plan cannot approve it",
    ]


# --- Apply ---------------------------------------------------------------------------------


def test_apply_ingests_a_file_from_an_allowed_folder_on_spark(
    tmp_path: Path, spark: SparkSession
) -> None:
    root, outside = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = ["../exports"]\n')
    (outside / "2026.csv").write_text("a,b\n1,x\n2,y\n")
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.shared", '{kind: FilesGlob, path: "../exports/*.csv"}')
    )
    code, output = cli(root, "--system-time", "2026-03-01T00:00:00Z")
    assert code == 0, output
    dataset = OdfRepository(root / "odf").dataset("org.example.shared")
    state = dataset.state().last_source_state
    assert state is not None and state.value == "2026.csv"
    [data_file] = (dataset.root / "data").iterdir()
    assert [(r["offset"], r["a"], r["b"]) for r in pq.read_table(data_file).to_pylist()] == [
        (0, 1, "x"),
        (1, 2, "y"),
    ]


def test_apply_refuses_a_match_symlinked_outside_after_the_plan(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "secret.csv").write_text(MALFORMED)
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/*.csv"}')
    )
    config = RepoConfig.load(root)
    plan = make_plan(config, PlanRequest())
    assert not plan.has_errors  # the glob matches nothing yet: a warning only
    (root / "sources" / "2026.csv").symlink_to(outside / "secret.csv")

    context = IngestContext(
        spark=lambda: pytest.fail("nothing may be read"), base_dir=root, env={}, system_time=T0
    )
    [outcome] = apply_plan(OdfRepository(config.odf_dir), plan, T0, context)
    assert (outcome.status, outcome.data_blocks, outcome.message) == (
        Status.FAILED,
        0,
        "fetch failed: SourceOutsideError: FilesGlob path 'sources/*.csv' matches sources/2026.csv, "
        "which resolves "
        "outside the repository; it is not read",
    )


def test_fetch_refuses_every_match_that_leads_outside_not_only_the_next(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "secret.csv").write_text(MALFORMED)
    (root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (root / "sources" / "z.csv").symlink_to(outside / "secret.csv")
    with pytest.raises(SourceOutsideError) as e:
        fetch_in(root, glob_step("sources/*.csv"))
    assert str(e.value) == (
        "FilesGlob path 'sources/*.csv' matches sources/z.csv, which resolves "
        "outside the repository; it is not read"
    )


def test_a_file_name_that_is_not_utf8_is_a_plan_error_and_refused_by_the_fetch(
    tmp_path: Path,
) -> None:
    """The chain records a file's name as text, and ODF's strings are UTF-8: such a name
    stopped every dataset's plan and run with "UnicodeEncodeError: … surrogates not
    allowed", naming no file."""
    root, _ = make_repo(tmp_path)
    git.Repo.init(root)
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/*.csv"}')
    )
    (root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (root / "sources" / os.fsdecode(b"b\xff.csv")).write_text("a,b\n2,y\n")
    message = (
        "FilesGlob path 'sources/*.csv' matches sources/b\\xff.csv, whose name is not UTF-8"
        " text, which a chain cannot record; rename it"
    )
    where = root / "datasets" / "a.yaml"
    assert problems(root) == [f"{where}:8:38: content.metadata[0].fetch.path: {message}"]
    code, output = cli(root, "plan")
    assert code == 1
    assert f"org.example.a: content.metadata[0].fetch.path: {message}" in output
    with pytest.raises(SourceOutsideError) as e:
        fetch_in(root, glob_step("sources/*.csv"))
    assert str(e.value) == f"{message}; it is not read"


def test_fetch_refuses_a_file_url_whose_template_resolves_outside_naming_it_as_written(
    tmp_path: Path,
) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "secret.csv").write_text(MALFORMED)
    step = models.FetchStepUrl.model_validate(
        {"kind": "Url", "url": "file:${{ env.EXPORT_DIR }}/secret.csv"}
    )
    with pytest.raises(SourceOutsideError) as e:
        fetch_in(root, step, env={"EXPORT_DIR": "../exports"})
    assert str(e.value) == (
        "Url 'file:${{ env.EXPORT_DIR }}/secret.csv' resolves outside the repository; "
        "it is not read"
    )


def test_fetch_refuses_a_file_url_symlinked_outside(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "secret.csv").write_text(MALFORMED)
    (root / "sources" / "a.csv").symlink_to(outside / "secret.csv")
    step = models.FetchStepUrl.model_validate({"kind": "Url", "url": "file:sources/a.csv"})
    with pytest.raises(SourceOutsideError) as e:
        fetch_in(root, step)
    assert str(e.value) == (
        "Url 'file:sources/a.csv' resolves outside the repository; it is not read"
    )


GIT_FOLDER = (
    "resolves into a .git folder, which holds git's objects and settings "
    "(a CI checkout's credentials among them), not files of the repository"
)


def test_git_s_own_folder_is_no_source(tmp_path: Path) -> None:
    """``actions/checkout`` leaves the push token in ``.git/config``: a manifest reading
    it, directly, through a ``file:`` URL, a link, or under an allowed folder that holds
    a repository of its own, is refused by the plan and by the fetch, unread."""
    root, outside = make_repo(tmp_path, '[tool.reconciler]\nsource_roots = ["../exports"]\n')
    git_repo(root)
    with git.Repo(root).config_writer() as cw:
        cw.set_value('http "https://github.com/"', "extraheader", f"AUTHORIZATION: {SECRET}")
    git_repo(outside)
    (root / "sources" / "config.csv").symlink_to("../.git/config")
    written = {
        "a": ("{kind: FilesGlob, path: .git/config}", "FilesGlob path '.git/config'"),
        "b": ("{kind: FilesGlob, path: .GIT/*}", "FilesGlob path '.GIT/*'"),
        "c": ("{kind: Url, url: 'file:.git/config'}", "Url 'file:.git/config'"),
        "d": (
            "{kind: FilesGlob, path: sources/*.csv}",
            "FilesGlob path 'sources/*.csv' matches sources/config.csv, which",
        ),
        "e": (
            "{kind: FilesGlob, path: ../exports/.git/config}",
            "FilesGlob path '../exports/.git/config'",
        ),
    }
    for name, (step, _) in written.items():
        (root / "datasets" / f"{name}.yaml").write_text(manifest(f"org.example.{name}", step))
    assert [p.split(": ")[-1] for p in problems(root)] == [
        f"{shown} {GIT_FOLDER}" for _, shown in written.values()
    ]
    for step, shown in written.values():
        source = models.SetPollingSource.model_validate(
            {"fetch": yaml.safe_load(step), "read": {"kind": "Csv"}, "merge": {"kind": "Append"}}
        )
        with pytest.raises(SourceOutsideError) as e:
            fetch_in(root, source.fetch, source_roots=(outside,))
        assert str(e.value) == f"{shown} {GIT_FOLDER}; it is not read"
    assert not (root.parent / "work").exists() or SECRET not in "".join(
        p.read_text(errors="replace") for p in (root.parent / "work").rglob("*") if p.is_file()
    )


def test_fetch_reads_from_a_folder_of_source_roots(tmp_path: Path) -> None:
    root, outside = make_repo(tmp_path)
    (outside / "2026.csv").write_text("a,b\n1,x\n")
    result = fetch_in(root, glob_step("../exports/*.csv"), source_roots=(outside,))
    assert isinstance(result, Fetched)
    assert result.path == root / "../exports/2026.csv"


def test_refused_sources_are_never_opened(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: a plan or apply that read
    # the refused file would hang here instead of exiting.
    root, outside = make_repo(tmp_path)
    os.mkfifo(outside / "pipe.csv")
    (root / "sources" / "evil").mkdir()
    (root / "sources" / "evil" / "a.csv").symlink_to(outside / "pipe.csv")
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/evil/*.csv"}')
    )
    expected = (
        "datasets/a.yaml:8:38: org.example.a: content.metadata[0].fetch.path: "
        "FilesGlob path 'sources/evil/*.csv' matches sources/evil/a.csv, which resolves "
        "outside the repository"
    )
    for args in (["--plan"], []):
        done = subprocess.run(
            [sys.executable, "-m", "reconciler", "-C", str(root), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"\nProblems:\n  {expected}\n" in done.stdout
    assert not (root / "odf").exists()


def plan_messages(root: Path) -> list[str]:
    return [p.message for p in make_plan(RepoConfig.load(root), PlanRequest()).problems]


RESERVED = "no source may read it (a dataset reads another one as a derivative's declared input)"


def test_no_source_reads_another_chain_or_the_cache_on_spark(
    tmp_path: Path, spark: SparkSession
) -> None:
    """A root dataset reading another one's slices as Parquet, its head, or the cache
    the store's objects are fetched to would be a derivative whose SQL no sandbox
    checks and whose lineage no block records: the plan and the fetch refuse each one,
    directly, through a link, and under a folder linked to the chains."""
    root, _ = make_repo(tmp_path)
    (root / "sources" / "a.csv").write_text("a,b\n1,x\n")
    (root / "datasets" / "good.yaml").write_text(
        manifest("org.example.good", '{kind: FilesGlob, path: "sources/*.csv"}')
    )
    code, output = cli(root, "--system-time", "2026-03-01T00:00:00Z")
    assert code == 0, output
    [slice_file] = (root / "odf" / "org.example.good" / "data").iterdir()
    (root / "leak").mkdir()
    (root / "leak" / "slice.parquet").symlink_to(slice_file)
    (root / "chains").symlink_to("odf")
    chains = "odf/, the chains folder"
    written = {
        "a": ("{kind: FilesGlob, path: 'odf/org.example.good/data/*'}", "FilesGlob path"),
        "b": ("{kind: FilesGlob, path: 'odf/*/refs/head'}", "FilesGlob path"),
        "c": ("{kind: Url, url: 'file:odf/org.example.good/refs/head'}", "Url"),
        "d": ("{kind: FilesGlob, path: 'leak/*.parquet'}", "FilesGlob path"),
        "e": ("{kind: FilesGlob, path: 'chains/*/data/*'}", "FilesGlob path"),
        "f": ("{kind: FilesGlob, path: '.reconcile-cache/**/*'}", "FilesGlob path"),
    }
    for name, (step, _) in written.items():
        (root / "datasets" / f"{name}.yaml").write_text(manifest(f"org.example.{name}", step))
    messages = [
        f"FilesGlob path 'odf/org.example.good/data/*' resolves into {chains}: {RESERVED}",
        f"FilesGlob path 'odf/*/refs/head' resolves into {chains}: {RESERVED}",
        f"Url 'file:odf/org.example.good/refs/head' resolves into {chains}: {RESERVED}",
        "FilesGlob path 'leak/*.parquet' matches leak/slice.parquet, which resolves into"
        f" {chains}: {RESERVED}",
        f"FilesGlob path 'chains/*/data/*' resolves into {chains}: {RESERVED}",
        "FilesGlob path '.reconcile-cache/**/*' resolves into .reconcile-cache/, the"
        f" reconciler's cache: {RESERVED}",
    ]
    assert plan_messages(root) == messages
    before = sorted(p.relative_to(root).as_posix() for p in (root / "odf").rglob("*"))
    code, output = cli(root, "--system-time", "2026-03-02T00:00:00Z")
    assert code == 1
    assert all(m in output for m in messages), output
    assert sorted(p.relative_to(root).as_posix() for p in (root / "odf").rglob("*")) == before
    config = RepoConfig.load(root)
    for (step, _), message in zip(written.values(), messages, strict=True):
        source = models.SetPollingSource.model_validate(
            {"fetch": yaml.safe_load(step), "read": {"kind": "Csv"}, "merge": {"kind": "Append"}}
        )
        with pytest.raises(SourceOutsideError) as e:
            fetch(
                source.fetch,
                prev_state=None,
                system_time=T0,
                workdir=tmp_path / "work",
                base_dir=root,
                env={},
                reserved=config.reserved_folders(),
            )
        assert str(e.value) == f"{message}; it is not read"


def test_a_folder_store_is_no_source_even_in_source_roots(tmp_path: Path) -> None:
    """A shared folder holding the data store may also be one the sources are allowed to
    read: its files are still other datasets' slices, refused by the plan and the fetch."""
    root, outside = make_repo(
        tmp_path,
        '[tool.reconciler]\nsource_roots = ["../exports"]\ndata_store = "../exports/store"\n',
    )
    (outside / "store" / "data").mkdir(parents=True)
    (outside / "2026.csv").write_text("a,b\n1,x\n")
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", "{kind: FilesGlob, path: '../exports/store/data/*'}")
    )
    (root / "datasets" / "b.yaml").write_text(
        manifest("org.example.b", "{kind: FilesGlob, path: '../exports/*.csv'}")
    )
    message = (
        "FilesGlob path '../exports/store/data/*' resolves into"
        f" {outside / 'store'}/, the data store: {RESERVED}"
    )
    assert plan_messages(root) == [message]
    config = RepoConfig.load(root)
    assert [what for _, what in config.reserved_folders()] == [
        "odf/, the chains folder",
        ".reconcile-cache/, the reconciler's cache",
        f"{outside / 'store'}/, the data store",
    ]


def test_a_plans_globs_are_walked_once_each(tmp_path: Path) -> None:
    """The plan's confinement check and its listing of each source's files read the
    same globs (``source_paths.Globs``): a second ask gives the first walk's matches, or
    its refusal, without walking again (a file added meanwhile is not seen)."""
    root, _ = make_repo(tmp_path)
    (root / "sources" / "a.csv").write_text("a,b\n")
    globs = Globs(SourceRoots.of(root), root)
    assert globs.matches("sources/*.csv") == [root / "sources" / "a.csv"]
    (root / "sources" / "b.csv").write_text("a,b\n")
    assert globs.matches("sources/*.csv") == [root / "sources" / "a.csv"]
    assert glob_matches("sources/*.csv", SourceRoots.of(root), root) == [
        root / "sources" / "a.csv",
        root / "sources" / "b.csv",
    ]
    for _ in range(2):
        with pytest.raises(OutsideError) as e:
            globs.matches("../exports/*")
        assert str(e.value) == "resolves outside the repository"


def test_an_apply_refuses_a_plan_with_errors_before_spark_analyses_its_queries(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Journey 42: an apply whose plan had a refused source analysed the new query on
    Spark (16 s there) before it refused the plan, which it does whatever the queries
    say. The plan alone still analyses them, for the reviewer."""
    root, _ = make_repo(tmp_path)
    (root / "datasets" / "a.yaml").write_text(
        manifest("org.example.a", '{kind: FilesGlob, path: "sources/*.csv"}')
    )
    query = "SELECT event_time, a FROM `org.example.a`"
    (root / "datasets" / "b.yaml").write_text(
        gitops_repo.manifest(
            "org.example.b", "Derivative", derivative_events(["org.example.a"], query)
        )
    )
    (root / "datasets" / "evil.yaml").write_text(
        manifest("org.example.evil", "{kind: FilesGlob, path: 'odf/*/data/*'}")
    )
    code, output = cli(root, "apply", "--yes")
    assert code == 1
    assert "analysing" not in output and "query check" not in output, output
    assert (
        "the queries of org.example.b were not analysed: the plan has errors already, so"
        " nothing is applied; `reconcile plan` analyses them"
    ) in output
    assert (
        "error: the plan has 1 error, so nothing was applied; the first: datasets/evil.yaml:8:38:"
        " org.example.evil: FilesGlob path 'odf/*/data/*' resolves into odf/"
    ) in output
    assert output.splitlines()[-1].startswith("nothing applied in "), output
    assert not (root / "odf").exists()
    code, output = cli(root, "plan")
    assert code == 1
    assert "analysing 1 query on Spark…" in output
    assert "query check: ok; output columns: event_time timestamp, a bigint" in output
    assert "were not analysed" not in output
