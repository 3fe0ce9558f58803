"""`reconcile --plan` end to end: a real CLI process on a real git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import git
import pytest
from cli_here import reconcile_here
from conftest import FIXTURE_MANIFESTS
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events
from test_cli_conventions import normal

from reconciler.odf import json_schemas

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo(tmp_path: Path) -> GitOpsRepo:
    gitops = GitOpsRepo.create(tmp_path / "repo")
    shutil.copytree(REPO_ROOT / "policies", gitops.root / "policies")
    return gitops


def reconcile(
    repo: GitOpsRepo, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``reconcile -C repo ARGS`` in this process (``cli_here``), or in a process of its
    own with the environment ``env`` when it is given."""
    if env is None:
        return reconcile_here(["-C", str(repo.root), *args])
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(repo.root), *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )


def plan_json(repo: GitOpsRepo, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = reconcile(repo, "--plan", "--format", "json", *args, env=env)
    assert "Traceback" not in result.stderr, result.stderr  # the JVM may log its start-up
    document = json.loads(result.stdout)
    json_schemas.validator("plan.json").validate(document)
    return result.returncode, document


def test_detailed_exit_codes_are_2_for_changes_0_for_none_and_1_for_errors(
    repo: GitOpsRepo,
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    assert reconcile(repo, "--plan", "--detailed-exitcode").returncode == 2
    assert reconcile(repo, "--plan").returncode == 0
    repo.apply()
    assert reconcile(repo, "--plan", "--detailed-exitcode").returncode == 0
    repo.write("org.example.a", manifest("org.example.a", "Root", "- kind: SetInfo\n  colour: red"))
    bad = reconcile(repo, "--plan", "--detailed-exitcode")
    assert bad.returncode == 1
    assert "unknown field 'colour'; expected one of: description, keywords" in bad.stdout
    assert reconcile(repo, "--plan").returncode == 1


def test_a_manifest_whose_suffix_is_not_lower_case_is_an_error_not_passed_over(
    repo: GitOpsRepo,
) -> None:
    """``datasets/Orders.YAML`` was not read and not reported: the dataset never came."""
    (repo.root / "datasets" / "org.example.a.YAML").write_text(
        manifest("org.example.a", "Root", root_events())
    )
    (repo.root / "datasets" / "notes.txt").write_text("not a manifest, and not one by name")
    bad = reconcile(repo, "--plan")
    assert bad.returncode == 1
    assert (
        "  datasets/org.example.a.YAML: not read: a manifest's name ends in .yaml or .yml, in"
        " lower case"
    ) in bad.stdout.splitlines()
    assert "notes.txt" not in bad.stdout


def test_json_plan_follows_its_schema_and_out_writes_a_file(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 2
    assert document["formatVersion"] == 1
    assert document["engineStarted"] is False
    (ds,) = document["datasets"]
    assert (ds["name"], ds["action"], ds["changeClass"]) == (
        "org.example.a",
        "create",
        "compatible",
    )
    assert [e["kind"] for e in ds["events"]] == ["SetPollingSource", "SetInfo", "SetLicense"]
    assert document["summary"]["exitCode"] == {"default": 0, "detailed": 2}
    out = repo.root / "plan.md"
    result = reconcile(repo, "--plan", "--format", "markdown", "--out", str(out))
    assert (result.returncode, result.stdout) == (
        0,
        f"Plan: 1 to create. 0 errors, 1 warning.\nWrote the plan to {out}.\n",
    )
    assert "| `org.example.a` | create | compatible |" in out.read_text()
    saved = repo.root / "plan.json"
    result = reconcile(repo, "--plan", "--format", "json", "--out", str(saved))
    assert result.stdout.splitlines()[-1] == (
        f"Saved the plan to {saved}: `reconcile show {saved}` shows it, and"
        f" `reconcile -C {repo.root} apply {saved}` applies it unless it is stale."
    )
    assert reconcile(repo, "-q", "--plan", "--out", str(out)).stdout == ""


def test_the_log_names_the_out_file_tidied_from_the_current_directory(repo: GitOpsRepo) -> None:
    """``-C pr plan --out ../plan/plan.json``, as the plan workflow runs it, was logged as
    ``Saved the plan to pr/../plan/plan.json``: the path is normalised, relative to the
    current directory when inside it and absolute when not."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root / "pr").mkdir()
    (repo.root / "plan").mkdir()
    args = ["plan", "--format", "json", "--out", "pr/../plan/plan.json"]
    saved = reconcile_here(args, cwd=repo.root)
    assert saved.stdout.splitlines()[-1] == (
        "Saved the plan to plan/plan.json: `reconcile show plan/plan.json` shows it, and"
        " `reconcile apply plan/plan.json` applies it unless it is stale."
    )
    assert (repo.root / "plan" / "plan.json").is_file()
    args = ["-C", repo.root.name, "plan", "--format", "markdown", "--out", "pr/../plan.md"]
    taken = reconcile_here(args, cwd=repo.root.parent)
    assert taken.stdout.splitlines()[-1] == f"Wrote the plan to {repo.root.name}/plan.md."
    outside = reconcile_here(["plan", "--format", "markdown", "--out", "../plan.md"], cwd=repo.root)
    assert outside.stdout.splitlines()[-1] == f"Wrote the plan to {repo.root.parent}/plan.md."


def test_the_saved_plans_commands_are_typed_from_the_current_directory(
    repo: GitOpsRepo,
) -> None:
    """``-C pr plan --out ../plan/plan.json`` said `` `reconcile apply plan/plan.json`
    applies it ``, which fails where it was run: the ``-C pr`` was lost. ``show`` needs no
    repository and takes the path from here; ``apply`` keeps the ``-C`` as given and the
    path as taken from its directory."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    workspace = repo.root.parent
    (workspace / "plan").mkdir()
    args = ["-C", repo.root.name, "plan", "--format", "json", "--out", "../plan/plan.json"]
    saved = reconcile_here(args, cwd=workspace)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.splitlines()[-1] == (
        "Saved the plan to plan/plan.json: `reconcile show plan/plan.json` shows it, and"
        f" `reconcile -C {repo.root.name} apply ../plan/plan.json` applies it unless it is"
        " stale."
    )
    shown = reconcile_here(["show", "plan/plan.json"], cwd=workspace, spark=False)
    assert shown.returncode == 0, shown.stderr
    applied = reconcile_here(
        ["-C", repo.root.name, "apply", "../plan/plan.json"], cwd=workspace, spark=False
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[-1].startswith("1 dataset: 1 created (0 records) in ")
    # without -C, the path as the current directory has it
    (repo.root / "plan").mkdir()
    here = reconcile_here(["plan", "--format", "json", "--out", "plan/p.json"], cwd=repo.root)
    assert here.stdout.splitlines()[-1] == (
        "Saved the plan to plan/p.json: `reconcile show plan/p.json` shows it, and"
        " `reconcile apply plan/p.json` applies it unless it is stale."
    )


def test_a_plan_with_errors_is_saved_nowhere_and_says_so(repo: GitOpsRepo) -> None:
    """``plan --out`` wrote a plan with errors (exit 1); ``terraform plan -out`` writes
    none. Its errors and summary line go to stderr, and a file of that name from before
    is left as it was, as terraform leaves it."""
    repo.write("org.example.a", manifest("org.example.a", "Root", "- kind: SetInfo\n  colour: red"))
    for output_format in ("json", "markdown"):
        saved = repo.root / f"plan.{output_format}"
        result = reconcile(repo, "plan", "--format", output_format, "--out", str(saved))
        assert (result.returncode, result.stdout) == (1, "")
        assert not saved.exists()
        lines = result.stderr.splitlines()
        assert "unknown field 'colour'; expected one of: description, keywords" in result.stderr
        assert lines[-2:] == [
            "Plan: no datasets. 1 error, 0 warnings.",
            f"error: no plan was saved to {saved}: it has errors",
        ]
    saved = repo.root / "plan.json"
    saved.write_text("the plan of yesterday")
    again = reconcile(repo, "-q", "plan", "--format", "json", "--out", str(saved))
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.splitlines()[-1] == (
        f"error: no plan was saved to {saved}: it has errors ({saved} from before is left as"
        " it was)"
    )
    assert saved.read_text() == "the plan of yesterday"


def test_a_plan_without_query_changes_needs_no_java(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    no_java = repo.root / "bin"
    no_java.mkdir()
    (no_java / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    env["PATH"] = str(no_java)
    code, document = plan_json(repo, "--detailed-exitcode", env=env)
    assert code == 2 and document["engineStarted"] is False


def _write_reader(repo: GitOpsRepo, query: str) -> None:
    """``org.example.b``, a derivative of ``org.example.a`` by ``query``."""
    repo.write(
        "org.example.b",
        manifest("org.example.b", "Derivative", derivative_events(["org.example.a"], query)),
    )


def test_a_changed_query_is_analysed_and_a_bad_one_fails_the_plan_naming_the_dataset(
    repo: GitOpsRepo,
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(repo, "SELECT a, b FROM `org.example.a`")
    repo.apply()
    _write_reader(repo, "SELECT a,\n  nope\nFROM `org.example.a`")
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1 and document["engineStarted"] is True
    b = next(d for d in document["datasets"] if d["name"] == "org.example.b")
    assert b["query"]["ok"] is False
    assert b["query"]["dataset"] == "org.example.b"
    assert "nope" in b["query"]["error"] and b["query"]["line"] == 2
    text = reconcile(repo, "--plan").stdout
    assert "org.example.b" in text and "nope" in text


def test_a_query_whose_output_the_run_would_refuse_fails_the_plan(repo: GitOpsRepo) -> None:
    """The query is valid SQL, but its output has no event time column: the transform
    would fail at apply, so the plan that approves it fails first, in every format."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(repo, "SELECT a, b FROM `org.example.a`")
    refused = "the query's output has no event time column 'event_time'"
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1
    b = next(d for d in document["datasets"] if d["name"] == "org.example.b")
    assert (b["query"]["ok"], b["query"]["error"]) == (False, refused)
    errors = [p for p in document["problems"] if p["severity"] == "error"]
    assert [(p["dataset"], p["message"]) for p in errors] == [
        ("org.example.b", f"query check failed: {refused}")
    ]
    text = reconcile(repo, "plan")
    assert text.returncode == 1
    assert f"query check failed: {refused}" in text.stdout + text.stderr
    markdown = reconcile(repo, "plan", "--format", "markdown")
    assert markdown.returncode == 1 and refused in markdown.stdout


def test_a_derivative_s_new_event_time_column_is_checked_against_its_query(
    repo: GitOpsRepo,
) -> None:
    """Only the SetVocab changes, with the override a breaking change needs: the query is
    analysed again, and a column its output lacks fails the plan, as the run would."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(repo, "SELECT event_time, a, b FROM `org.example.a`")
    repo.apply()
    events = derivative_events(["org.example.a"], "SELECT event_time, a, b FROM `org.example.a`")
    repo.write(
        "org.example.b",
        "# reconcile: allow-breaking-change: a new time column\n"
        + manifest(
            "org.example.b",
            "Derivative",
            events + "\n    - kind: SetVocab\n      eventTimeColumn: happened_at\n",
        ),
    )
    refused = "the query's output has no event time column 'happened_at'"
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1
    b = next(d for d in document["datasets"] if d["name"] == "org.example.b")
    assert (b["action"], b["query"]["ok"], b["query"]["error"]) == ("update", False, refused)
    errors = [p["message"] for p in document["problems"] if p["severity"] == "error"]
    assert errors == [f"query check failed: {refused}"]


def test_a_query_whose_output_holds_a_variant_fails_the_plan(repo: GitOpsRepo) -> None:
    """A VARIANT's Arrow form carries field metadata the chain's schema cannot encode:
    the run would fail writing its schema, so the plan fails first."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(
        repo,
        "SELECT event_time, v.* FROM `org.example.a`,"
        " LATERAL variant_explode(parse_json('{\\\"k\\\": 1}')) AS v",
    )
    refused = (
        "column 'value' is or holds a VARIANT (variant), which a slice cannot hold: its"
        " Arrow form carries field metadata that the chain's schema cannot encode; give it"
        " as a STRING (to_json) or as typed columns"
    )
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1
    b = next(d for d in document["datasets"] if d["name"] == "org.example.b")
    assert (b["query"]["ok"], b["query"]["error"]) == (False, refused)


def test_a_query_whose_input_failed_its_own_check_is_said_not_analysed(
    repo: GitOpsRepo,
) -> None:
    """b's query breaks on a's renamed column; c reads a and b, so its output cannot be
    known: it is not left looking unchanged, it gets a warning saying why."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(repo, "SELECT event_time, b FROM `org.example.a`")
    both = "SELECT x.event_time, x.b, y.b AS c FROM `org.example.a` x JOIN `org.example.b` y ON x.b = y.b"
    repo.write(
        "org.example.c",
        manifest(
            "org.example.c",
            "Derivative",
            derivative_events(["org.example.a", "org.example.b"], both),
        ),
    )
    repo.apply()
    repo.write(
        "org.example.a",
        "# reconcile: allow-breaking-change: b is renamed\n"
        + manifest("org.example.a", "Root", root_events(schema="[a BIGINT, renamed STRING]")),
    )
    code, document = plan_json(repo)
    assert code == 1
    messages = {(p["dataset"], p["severity"], p["message"]) for p in document["problems"]}
    assert (
        "org.example.c",
        "warning",
        "its query was not analysed: org.example.b failed its own query check, so its output"
        " is unknown; fix that first",
    ) in messages
    assert any(d == "org.example.b" and sev == "error" for d, sev, _ in messages)


def test_a_valid_changed_query_shows_its_output_schema_change(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    _write_reader(repo, "SELECT event_time, a, b FROM `org.example.a`")
    repo.apply()
    _write_reader(repo, "SELECT event_time, a FROM `org.example.a`")
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1  # breaking without an override comment
    b = next(d for d in document["datasets"] if d["name"] == "org.example.b")
    (event,) = b["events"]
    assert event["changeClass"] == "breaking"
    assert event["schema"]["removed"] == ["b"]
    assert [c["name"] for c in b["query"]["outputSchema"]] == ["event_time", "a"]
    assert [v["policy"] for v in document["verdicts"]] == ["breaking-change-override"]
    text = repo.root / "datasets" / "org.example.b.yaml"
    text.write_text(
        "# reconcile: allow-breaking-change: b was never used downstream\n" + text.read_text()
    )
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 2 and document["verdicts"] == []


def test_an_override_the_base_already_had_allows_no_new_breaking_change(
    repo: GitOpsRepo,
) -> None:
    """An override line left in a manifest approved an earlier change: a later pull
    request's breaking change does not show it in its diff, so it is not approved."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    query = "SELECT event_time, a, b FROM `org.example.a`"
    b_text = manifest("org.example.b", "Derivative", derivative_events(["org.example.a"], query))
    text = repo.root / "datasets" / "org.example.b.yaml"
    text.write_text(b_text + "# reconcile: allow-breaking-change: c was dropped in May\n")
    repo.apply()
    repo.commit("base")
    text.write_text(text.read_text().replace("event_time, a, b FROM", "event_time, a FROM"))
    code, document = plan_json(repo, "--base", "HEAD", "--detailed-exitcode")
    assert code == 1
    assert [v["policy"] for v in document["verdicts"]] == ["breaking-change-override"]
    about_b = [p for p in document["problems"] if p.get("dataset") == "org.example.b"]
    override_line = len(b_text.splitlines()) + 1  # the warning points at the line
    assert about_b[0]["location"] == {"file": "datasets/org.example.b.yaml", "line": override_line}
    assert [(p["severity"], p["message"]) for p in about_b] == [
        (
            "warning",
            "the override 'c was dropped in May' was already in the base branch's manifest:"
            " it allowed an earlier breaking change, not this one; give this change its own"
            " reason",
        )
    ]
    (b,) = [d for d in document["datasets"] if d["name"] == "org.example.b"]
    assert (b["action"], "override" in b) == ("update", False)
    # Without a base (the scheduled apply, after the pull request's plan) the line counts.
    code, document = plan_json(repo, "--detailed-exitcode")
    assert (code, document["verdicts"]) == (2, [])
    text.write_text(text.read_text().replace("c was dropped in May", "b is read by no one"))
    code, document = plan_json(repo, "--base", "HEAD", "--detailed-exitcode")
    assert (code, document["verdicts"]) == (2, [])
    assert [p for p in document["problems"] if p.get("dataset") == "org.example.b"] == []
    (b,) = [d for d in document["datasets"] if d["name"] == "org.example.b"]
    assert (b["action"], b["override"]) == ("recreate", "b is read by no one")
    # Merged and not applied yet: a pull request that leaves the manifest as it is does
    # not make the base's own approved change its error.
    repo.commit("merged, not applied yet")
    code, document = plan_json(repo, "--base", "HEAD", "--detailed-exitcode")
    assert (code, document["verdicts"]) == (2, [])
    (b,) = [d for d in document["datasets"] if d["name"] == "org.example.b"]
    assert (b["action"], b["override"]) == ("recreate", "b is read by no one")


class _Recorder(BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Recorder.requests.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"a,b\n1,x\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_plan_executes_nothing_from_manifests_and_resolves_no_secret(
    repo: GitOpsRepo, http_server: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pipe-ran"
    events = f"""
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: "{http_server}/data.csv?key=${{{{ env.SECRET_TOKEN }}}}"
        headers: [{{name: Authorization, value: "Bearer ${{{{ env.SECRET_TOKEN }}}}"}}]
      prepare:
        - kind: Pipe
          command: [sh, -c, "touch {marker}; cat"]
      read: {{kind: Csv, header: true, schema: [a BIGINT, b STRING]}}
      merge: {{kind: Append}}
    """
    repo.write("org.example.a", manifest("org.example.a", "Root", events))
    env = {**os.environ, "SECRET_TOKEN": "s3cr3t-value"}
    for output_format in ("text", "json", "markdown"):
        result = reconcile(repo, "--plan", "--format", output_format, env=env)
        assert "s3cr3t-value" not in result.stdout + result.stderr
        assert "${{ env.SECRET_TOKEN }}" in result.stdout
    assert _Recorder.requests == []
    assert not marker.exists()


def test_a_template_sends_only_what_the_base_s_policies_allow_and_where(
    repo: GitOpsRepo, http_server: str
) -> None:
    """A merged manifest's fetch resolved any variable of the runner's environment (the
    store's credentials among them) into a URL of the pull request's choosing; the pull
    request's plan passed with no word, and the scheduled run sent it."""
    security = repo.root / "policies" / "security.yaml"
    security.write_text(
        security.read_text().replace(
            "env_templates: {}", 'env_templates: {WEATHER_KEY: ["https://api.weather.example/"]}'
        )
    )
    repo.commit("base allowing one key, for one host")
    events = f"""
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: "{http_server}/d.csv?k=${{{{ env.AWS_SECRET_ACCESS_KEY }}}}&w=${{{{ env.WEATHER_KEY }}}}"
      read: {{kind: Csv, header: true, schema: [a BIGINT, b STRING]}}
      merge: {{kind: Append}}
    """
    repo.write("org.example.a", manifest("org.example.a", "Root", events))
    repo.commit("a source that sends the runner's secrets elsewhere")
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": "s3cr3t-value", "WEATHER_KEY": "w-key"}
    code, document = plan_json(repo, "--base", "HEAD~1", env=env)
    assert code == 1
    url = f"{http_server}/d.csv?k=${{{{ env.AWS_SECRET_ACCESS_KEY }}}}&w=${{{{ env.WEATHER_KEY }}}}"
    message = (
        "a fetch sends the runner's environment variables only where the policies allow; ask"
        " the owners of policies/ to add the variable, with the addresses its value may go"
        " to, to the env_templates rule"
    )
    found = document["verdicts"]
    assert [
        (v["policy"], v["message"], v["location"]) for v in found if v["policy"] == "env-templates"
    ] == [
        (
            "env-templates",
            "env.AWS_SECRET_ACCESS_KEY at content.metadata[0].fetch.url: no env_templates"
            f" rule allows AWS_SECRET_ACCESS_KEY: {message}",
            {"file": "datasets/org.example.a.yaml", "line": 10, "column": 14},
        ),
        (
            "env-templates",
            f"env.WEATHER_KEY at content.metadata[0].fetch.url is sent to {url!r}, and"
            " WEATHER_KEY may go only to addresses starting with"
            f" 'https://api.weather.example/': {message}",
            {"file": "datasets/org.example.a.yaml", "line": 10, "column": 14},
        ),
    ]
    # Merged past its plan: the run plans with the checkout's policies, and sends nothing.
    applied = reconcile(repo, "apply", "--yes", env=env)
    assert applied.returncode == 1
    assert "nothing was applied" in applied.stderr + applied.stdout
    assert "s3cr3t-value" not in applied.stdout + applied.stderr
    assert _Recorder.requests == []
    assert not (repo.root / "odf").exists()


def test_the_kamu_fixture_manifests_plan_with_every_unsupported_feature_named(
    repo: GitOpsRepo,
) -> None:
    for path in FIXTURE_MANIFESTS.glob("*.yaml"):
        shutil.copy(path, repo.root / "datasets" / path.name)
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 1 and document["engineStarted"] is False
    assert len(document["datasets"]) == 20
    assert all(d["action"] == "create" for d in document["datasets"])
    problems = {(p.get("dataset"), p["message"]) for p in document["problems"]}
    assert (
        "net.rocketpool.reth.tokens-minted",
        "FetchStep::EthereumLogs sources are not supported yet",
    ) in problems
    assert (
        "com.defillama.chains",
        "engine 'datafusion' is not supported: queries run on Spark (engine: spark)",
    ) in problems
    policies = {(v["policy"], v["dataset"]) for v in document["verdicts"]}
    assert ("no-program-steps", "ca.bankofcanada.exchange-rates.daily") in policies
    assert ("reverse-domain-name", "player-scores") in policies
    assert ("license-required", "com.acme.orders") in policies


def test_base_marks_datasets_the_pull_request_changed(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write("org.example.b", manifest("org.example.b", "Root", root_events()))
    repo.apply()
    repo.commit("base")
    repo.write(
        "org.example.b",
        manifest("org.example.b", "Root", root_events().replace("Example data", "New words")),
    )
    _, document = plan_json(repo, "--base", "HEAD")
    assert {d["name"]: d.get("changedInPr") for d in document["datasets"]} == {
        "org.example.a": False,
        "org.example.b": True,
    }
    assert document["baseRef"] == "HEAD"
    bad = reconcile(repo, "--plan", "--base", "no-such-ref")
    assert bad.returncode == 1 and bad.stderr.startswith("error: unknown git ref 'no-such-ref'")


def test_policies_are_taken_from_the_base_branch(repo: GitOpsRepo) -> None:
    repo.write(
        "org.example.a",
        manifest("org.example.a", "Root", root_events().split("- kind: SetLicense")[0]),
    )
    repo.commit("base with policies")
    shutil.rmtree(repo.root / "policies")  # the pull request tries to delete the rules
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    assert [v["policy"] for v in document["verdicts"]] == ["license-required"]


def test_a_pull_request_that_points_policies_elsewhere_is_still_judged_by_the_base(
    repo: GitOpsRepo,
) -> None:
    repo.write(
        "org.example.a",
        manifest("org.example.a", "Root", root_events().split("- kind: SetLicense")[0]),
    )
    repo.commit("base with policies")
    # The pull request names a folder of its own, empty, as the policies.
    (repo.root / "lax").mkdir()
    (repo.root / "lax" / "none.yaml").write_text("rules: []\n")
    (repo.root / "pyproject.toml").write_text('[tool.reconciler]\npolicies = "lax"\n')
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    assert [v["policy"] for v in document["verdicts"]] == ["license-required"]
    assert reconcile(repo, "--plan").returncode == 0  # on its own, the new folder rules


@pytest.mark.parametrize(
    ("base", "change", "message"),
    [
        (
            "",
            'odf_root = "chains"',
            "odf_root changes from 'odf' to 'chains': the committed chains stay in 'odf', and"
            " apply would create every dataset anew in 'chains'. Only the reconciler writes"
            " chains, so they cannot move in a pull request",
        ),
        (
            'data_store = "../one"',
            'data_store = "../two"',
            "data_store changes from '../one' to '../two': the data and checkpoint files the"
            " chains name are in the old store, and the next run would look for them in the"
            " new one. Copy them there first (see the README, 'Where data lives'), then change"
            " the setting",
        ),
        (
            'data_store = "../one"',
            'data_store = "odf"',
            "data_store changes from '../one' to 'odf': the data and checkpoint files the"
            " chains name are in the old store, and the next run would look for them in the"
            " new one. Copy them there first (see the README, 'Where data lives'), then change"
            " the setting",
        ),
        (
            'max_decompressed_size = "1GiB"',
            'max_decompressed_size = "1TiB"',
            "max_decompressed_size rises from 1073741824 to 1099511627776 bytes: the limit is"
            " what stops a decompression bomb in a pull request from filling the runner's disk,"
            " so a maintainer reviews and merges a higher one as such, since this plan cannot"
            " approve it",
        ),
        (
            "max_download_size = 1000",
            'max_download_size = "20GiB"',
            "max_download_size rises from 1000 to 21474836480 bytes: the limit is what stops a"
            " server a pull request names from filling the runner's disk, so a maintainer"
            " reviews and merges a higher one as such, since this plan cannot approve it",
        ),
        (
            "",
            "max_download_seconds = 7200",
            "max_download_seconds rises from 3600 to 7200 seconds: the limit is what stops a"
            " server a pull request names from holding the scheduled run for ever, a byte at a"
            " time, so a maintainer reviews and merges a higher one as such, since this plan"
            " cannot approve it",
        ),
    ],
    ids=[
        "odf_root",
        "store-to-store",
        "store-back-into-git",
        "decompress-limit",
        "download-size",
        "download-seconds",
    ],
)
def test_a_pull_request_cannot_move_the_chains_or_their_store(
    repo: GitOpsRepo, base: str, change: str, message: str
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root.parent / "one").mkdir()
    (repo.root.parent / "two").mkdir()  # both there: a store that is not is its own error
    (repo.root / "pyproject.toml").write_text(f"[tool.reconciler]\n{base}\n")
    repo.commit("base")
    (repo.root / "pyproject.toml").write_text(f"[tool.reconciler]\n# moved\n{change}\n")
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    errors = [p for p in document["problems"] if p["severity"] == "error"]
    assert [(p["message"], p["location"], p["field"]) for p in errors] == [
        (
            message,
            {"file": "pyproject.toml", "line": 3},
            f"tool.reconciler.{change.split(' ')[0]}",
        )
    ]


@pytest.mark.parametrize(
    ("base", "change"),
    [
        ('data_store = "s3://bucket/team"', 'data_store = "s3://bucket/team/"'),
        ('data_store = "../one"', 'data_store = "./../one/"'),
    ],
    ids=["s3-trailing-slash", "folder-spelt-otherwise"],
)
def test_another_spelling_of_the_same_store_is_no_move(
    repo: GitOpsRepo, base: str, change: str
) -> None:
    """The store is where ``open_store`` puts the objects: a trailing slash or a ``./``
    names the same place, and was refused as a move to another store."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root.parent / "one").mkdir()
    (repo.root / "pyproject.toml").write_text(f"[tool.reconciler]\n{base}\n")
    repo.commit("base")
    (repo.root / "pyproject.toml").write_text(f"[tool.reconciler]\n{change}\n")
    code, document = plan_json(repo, "--base", "HEAD")
    assert [p["message"] for p in document["problems"] if p["severity"] == "error"] == []
    assert code == 0


@pytest.mark.parametrize("setting", ["store", "./data/../store", "datasets"])
def test_a_folder_store_inside_the_repository_fails_every_plan(
    repo: GitOpsRepo, setting: str
) -> None:
    """Git holds neither the folder nor its files: on a CI runner they went with the job,
    and every clone's chains named data it did not have."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root / "pyproject.toml").write_text(f'[tool.reconciler]\n\ndata_store = "{setting}"\n')
    (repo.root / "store").mkdir()
    message = (
        f"data_store {setting!r} is a folder inside the repository, which git does not hold:"
        " a CI checkout throws its files away with the job, and every clone's chains would"
        " name data it does not have. Leave data_store unset to keep the data with the"
        " chains in git, or name a folder outside the repository (a shared mount) or an"
        " s3:// store"
    )
    code, document = plan_json(repo)
    assert code == 1
    assert _rule_errors(document) == [
        (message, {"file": "pyproject.toml", "line": 3}, "tool.reconciler.data_store")
    ]
    repo.commit("a store inside")
    applied = reconcile(repo, "apply", "--yes")
    assert applied.returncode == 1
    assert not (repo.root / "odf").exists()


def test_a_folder_store_that_is_not_there_fails_every_plan(repo: GitOpsRepo) -> None:
    """Journey 41: a pull request naming a folder no runner has planned with only the
    maintainer's-change error; merged past it, every run stopped at the store's check
    and the scheduled job at its verify. The plan says the folder is not there, with and
    without a base, and so does apply, before it writes anything."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.commit("base")
    (repo.root / "pyproject.toml").write_text('[tool.reconciler]\ndata_store = "../nowhere"\n')
    folder = repo.root.parent / "nowhere"
    missing = (
        f"data_store '../nowhere' does not exist: {folder} must be a folder this machine can"
        f" write (create it with mkdir -p {folder}, or mount the share it is on)"
    )
    where = {"file": "pyproject.toml", "line": 2}
    code, document = plan_json(repo)
    assert code == 1
    assert _rule_errors(document) == [(missing, where, "tool.reconciler.data_store")]
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    assert [m for m, _, _ in _rule_errors(document)] == [
        missing,
        "data_store changes from 'odf' to '../nowhere': once merged, the next run moves every"
        " data and checkpoint file out of git into that store and removes them from the"
        " dataset folders, with the runner's credentials. Where the data lives is a"
        " maintainer's change: a maintainer reviews and merges it as such, since this plan"
        " cannot approve it",
    ]
    folder.write_text("")
    code, document = plan_json(repo)
    assert _rule_errors(document) == [
        (
            missing.replace("does not exist", "is a file, not a folder"),
            where,
            "tool.reconciler.data_store",
        )
    ]
    folder.unlink()
    applied = reconcile(repo, "apply", "--yes")
    assert applied.returncode == 1
    assert f"error: data store {folder} does not exist" in applied.stdout + applied.stderr
    assert not (repo.root / "odf").exists()
    assert not folder.exists()


def _rule_errors(document: dict) -> list[tuple[str, dict | None, str]]:  # type: ignore[type-arg]
    return [
        (p["message"], p.get("location"), p["field"])
        for p in document["problems"]
        if p["severity"] == "error"
    ]


_RULE_CHANGE = (
    " the policies judge every later pull request (this one is judged by the base's), so a"
    " change to them is a change of the rules: a maintainer reviews and merges it as such,"
    " since this plan cannot approve it"
)


def test_a_pull_request_that_changes_the_policies_fails_its_plan_naming_each_file(
    repo: GitOpsRepo,
) -> None:
    """Judged by the base's rules, it passed with exit 0; the relaxed rules then judged
    every later pull request, and nobody had been told."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.commit("base with policies")
    metadata = repo.root / "policies" / "metadata.yaml"
    metadata.write_text(metadata.read_text().replace("severity: error", "severity: warning"))
    (repo.root / "policies" / "naming.yaml").unlink()
    (repo.root / "policies" / "README.md").write_text("Why these rules.\n")  # not a policy
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    assert _rule_errors(document) == [
        (
            "this pull request changes the policy file metadata.yaml:" + _RULE_CHANGE,
            {"file": "policies/metadata.yaml", "line": 1},
            "policies",
        ),
        (
            "this pull request deletes the policy file naming.yaml:" + _RULE_CHANGE,
            {"file": "policies/naming.yaml"},
            "policies",
        ),
    ]
    assert document["verdicts"] == []  # judged by the base's rules, which it meets
    assert reconcile(repo, "--plan").returncode == 0  # the scheduled run: merged, in force


def test_a_policy_file_replaced_by_a_submodule_is_named_as_such(repo: GitOpsRepo) -> None:
    """A gitlink where a rule file was is an empty folder in every clone, which no plan
    reads: merged, as if the file were deleted; the plan said only that it changed."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    base = repo.commit("base with policies")
    metadata = repo.root / "policies" / "metadata.yaml"
    metadata.unlink()
    metadata.mkdir()
    git_repo = git.Repo(repo.root)
    git_repo.git.update_index("--force-remove", "policies/metadata.yaml")
    git_repo.git.update_index("--add", "--cacheinfo", f"160000,{base},policies/metadata.yaml")
    git_repo.git.commit("-q", "-m", "a submodule where a rule file was")
    code, document = plan_json(repo, "--base", "HEAD~1")
    assert code == 1
    assert _rule_errors(document) == [
        (
            "this pull request replaces the policy file metadata.yaml by a folder, whose rules"
            " no plan reads:" + _RULE_CHANGE,
            {"file": "policies/metadata.yaml", "line": 1},
            "policies",
        )
    ]


def test_a_pull_request_whose_policies_do_not_load_is_told_where(repo: GitOpsRepo) -> None:
    """A broken policy file passed its plan (the base's rules judged it), then stopped
    every plan and run on main."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.commit("base with policies")
    (repo.root / "policies" / "extra.yaml").write_text("rules:\n  - id: x\n    colour: red\n")
    (repo.root / "policies" / "more.yaml").write_text("rules: {}\n")  # every file is named
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    broken = reconcile(repo, "--plan")
    assert broken.returncode == 1
    (change, added, load, load_more) = _rule_errors(document)
    assert change[0] == "this pull request adds the policy file extra.yaml:" + _RULE_CHANGE
    assert added[0] == "this pull request adds the policy file more.yaml:" + _RULE_CHANGE
    assert load[1:] == ({"file": "policies/extra.yaml", "line": 3}, "policies.x")
    assert load_more[1:] == ({"file": "policies/more.yaml", "line": 1}, "policies")
    prefix = "the policies as this pull request leaves them do not load: "
    suffix = "; once merged, every plan and run on the base branch would stop here"
    reasons = [each[0].removeprefix(prefix).removesuffix(suffix) for each in (load, load_more)]
    assert reasons[0].startswith("unknown key 'colour'; a rule has id, severity")
    assert [each[0] for each in (load, load_more)] == [prefix + r + suffix for r in reasons]
    assert reasons[1] == "'rules' must be a list"
    assert broken.stderr.splitlines() == [
        f"error: policies/extra.yaml:3: x: {reasons[0]}",
        "error: policies/more.yaml:1: 'rules' must be a list",
    ]


def test_broken_policies_on_the_base_are_named_where_the_repository_has_them(
    repo: GitOpsRepo,
) -> None:
    """The base's policies are read from a copy: its errors named a temporary path."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root / "policies" / "zz.yaml").write_text("rules: {}\n")
    repo.commit("a broken policy, merged past its failed check")
    done = reconcile(repo, "--plan", "--base", "HEAD")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "error: policies/zz.yaml:1: 'rules' must be a list (as HEAD has it)"
    )


def test_a_pull_request_that_points_policies_at_another_folder_fails_at_that_line(
    repo: GitOpsRepo,
) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.commit("base with policies")
    (repo.root / "pyproject.toml").write_text('[tool.reconciler]\n# lax\npolicies = "lax"\n')
    code, document = plan_json(repo, "--base", "HEAD")
    assert code == 1
    assert _rule_errors(document) == [
        (
            "policies changes from 'policies' to 'lax': this pull request is judged by the"
            " rules in 'policies', but the next one would be judged by the rules it names. It"
            " is a change of the rules: a maintainer reviews and merges it as such, since this"
            " plan cannot approve it",
            {"file": "pyproject.toml", "line": 3},
            "tool.reconciler.policies",
        )
    ]


def test_apply_ingests_then_plan_reports_unchanged(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    (repo.root / "sources").mkdir()
    (repo.root / "sources" / "a.csv").write_text("a,b\n1,x\n2,y\n")
    applied = reconcile(repo, "--system-time", "2026-01-01T00:00:00Z")
    assert applied.returncode == 0, applied.stderr
    assert normal(applied.stdout)[-2:] == [  # after the plan
        "HH:MM:SS OK    org.example.a created: 6 blocks (4 metadata), 2 records in N s",
        "1 dataset: 1 created (2 records) in N s",
    ]
    code, document = plan_json(repo, "--detailed-exitcode")
    assert code == 0 and document["datasets"][0]["action"] == "unchanged"
    log = reconcile(repo, "log", "org.example.a", "-o", "json")
    assert {e["block"]["systemTime"] for e in json.loads(log.stdout)} == {"2026-01-01T00:00:00Z"}
    again = reconcile(repo, "--system-time", "2026-01-02T00:00:00Z")
    assert again.returncode == 0, again.stderr
    assert normal(again.stdout)[-2:] == [
        "HH:MM:SS OK    org.example.a up to date in N s",
        "1 dataset: 1 up to date in N s",
    ]


def test_prune_deletes_an_orphaned_chain_only_when_asked(repo: GitOpsRepo) -> None:
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.remove("org.example.a")
    kept = reconcile(repo)
    assert kept.returncode == 0 and repo.odf.dataset("org.example.a").exists()
    assert normal(kept.stdout)[-1] == "0 datasets: nothing to do in N s"
    pruned = reconcile(repo, "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "HH:MM:SS OK    org.example.a deleted in N s" in normal(pruned.stdout)
    assert not (repo.root / "odf" / "org.example.a").exists()


def test_a_deletion_waits_while_anything_else_in_the_run_failed(repo: GitOpsRepo) -> None:
    """A rename removes one manifest and adds its successor: when the successor failed
    to ingest, the old chain was deleted anyway, and pushed, leaving neither."""
    (repo.root / "sources").mkdir(exist_ok=True)
    (repo.root / "sources" / "1.csv").write_text("a,b\n1,x\n2,y\n")
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    repo.remove("org.example.a")
    wrong = root_events(schema="[a BIGINT, b BIGINT]")  # b is text: the read refuses it
    repo.write("org.example.b", manifest("org.example.b", "Root", wrong))
    held = reconcile(repo, "--prune")
    assert held.returncode == 1
    lines = normal(held.stdout)
    assert "HH:MM:SS SKIP  org.example.a skipped: deletion held back: 1 dataset did not" in (
        " ".join(lines)
    )
    assert lines[-1] == "2 datasets: 1 failed, 1 skipped in N s"
    assert lines.index(next(x for x in lines if "SKIP  org.example.a" in x)) > lines.index(
        next(x for x in lines if "ERROR org.example.b" in x)
    )
    assert repo.odf.dataset("org.example.a").exists()
    repo.write("org.example.b", manifest("org.example.b", "Root", root_events()))
    done = reconcile(repo, "--prune")
    assert done.returncode == 0, done.stderr
    assert [x for x in normal(done.stdout) if " START " not in x][-3:] == [
        "HH:MM:SS OK    org.example.b created: 6 blocks (4 metadata), 2 records in N s",
        "HH:MM:SS OK    org.example.a deleted in N s",
        "2 datasets: 1 created (2 records), 1 deleted in N s",
    ]
    assert not repo.odf.dataset("org.example.a").exists()


def test_a_pull_request_that_removes_a_manifest_plans_the_delete_with_its_chain(
    repo: GitOpsRepo,
) -> None:
    """With --prune (what the workflows run) the pull request's plan says the merge
    deletes the chain, marks the deletion as the pull request's, and says what goes."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.write("org.example.b", manifest("org.example.b", "Root", root_events()))
    repo.apply()
    repo.commit("base")
    repo.remove("org.example.b")
    state = repo.odf.dataset("org.example.b").state()
    code, document = plan_json(repo, "--base", "HEAD", "--prune", "--detailed-exitcode")
    assert code == 2
    (deleted,) = [d for d in document["datasets"] if d["action"] == "delete"]
    assert deleted == {
        "name": "org.example.b",
        "kind": "Root",
        "action": "delete",
        "changedInPr": True,
        "datasetId": str(state.dataset_id),
        "inputs": [],
        "downstream": [],
        "affectedDownstream": [],
        "events": [],
        "pending": [],
        "chain": {"head": str(state.head), "blocks": 4, "records": 0},
    }
    text = reconcile(repo, "--plan", "--base", "HEAD", "--prune").stdout.splitlines()
    assert text[text.index("- org.example.b (Root) will be deleted (changed in this PR)") + 1] == (
        f"    deletes: {state.dataset_id} at head {state.head} (4 blocks, 0 records);"
        " git history keeps it (a data store outside git keeps its data until `reconcile gc"
        " --delete` collects it). Apply deletes it last, and only in a run where every other"
        " dataset succeeds (a rename's new dataset, say)"
    )
    markdown = reconcile(repo, "--plan", "--base", "HEAD", "--prune", "--format", "markdown")
    assert (
        "<details><summary><code>org.example.b</code> (Root): delete, changed in this PR"
        f"</summary>\n\n- **Deletes:** {state.dataset_id} at head {state.head} (4 blocks,"
        " 0 records); git history keeps it (a data store outside git keeps its data until"
        " `reconcile gc --delete` collects it). Apply deletes it last, and only in a run where"
        " every other dataset succeeds (a rename's new dataset, say)\n\n</details>"
    ) in markdown.stdout


def test_prune_deletes_nothing_while_a_manifest_cannot_be_read(repo: GitOpsRepo) -> None:
    """A typo in a manifest drops its dataset from the plan: its chain must not be
    planned as deleted for it, nor any other chain, since the file may define any."""
    repo.write("org.example.a", manifest("org.example.a", "Root", root_events()))
    repo.apply()
    broken = repo.root / "datasets" / "org.example.a.yaml"
    broken.write_text(broken.read_text().replace("kind: Root", "kind: Rooot"))
    code, document = plan_json(repo, "--prune")
    assert code == 1
    assert [(d["name"], d["action"]) for d in document["datasets"]] == [
        ("org.example.a", "orphaned")
    ]
    assert [p["message"] for p in document["problems"] if p["severity"] == "warning"] == [
        "not deleted by --prune: 1 manifest could not be read, and may define it"
    ]
    applied = reconcile(repo, "--prune")
    assert applied.returncode == 1
    assert repo.odf.dataset("org.example.a").exists()
