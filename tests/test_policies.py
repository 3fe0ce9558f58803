"""Policies: the shipped rules fire on what they forbid and stay quiet on a compliant
manifest, JSON Schema policies report paths, the override comment is read exactly, and
mistakes in policy files are errors that point at the file, line and policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE_MANIFESTS

from reconciler.odf.manifest import load_snapshots
from reconciler.plan.model import (
    Action,
    ChangeClass,
    DatasetPlan,
    EventChange,
    Location,
    Severity,
    Verdict,
)
from reconciler.plan.policies import (
    ManifestFacts,
    PolicyError,
    PolicySet,
    evaluate,
    load_policies,
    read_override,
)

SHIPPED = Path(__file__).resolve().parents[1] / "policies"
ERROR, WARNING = Severity.ERROR, Severity.WARNING

# The shipped messages, as the plan shows them after each finding.
NAME_MESSAGE = (
    "dataset names must be in reverse-domain form, in lower case, with at least two parts, "
    "like org.example.weather.daily"
)
LICENSE_MESSAGE = (
    "add a SetLicense event (shortName, name, spdxId, websiteUrl) so readers know whether "
    "and how they may reuse the data"
)
INFO_MESSAGE = (
    "add a SetInfo event with a one-sentence description and keywords so people can find "
    "and understand the dataset"
)
PROGRAM_MESSAGE = (
    "this step runs an arbitrary program when the dataset is ingested; fetch with Url or "
    "FilesGlob and reshape the data in preprocess SQL instead, or, if it cannot be avoided, "
    "ask the owners of policies/ to review the program for an exception"
)
ENGINE_MESSAGE = (
    "only the spark engine is available here: write the query in Spark SQL and set 'engine: spark'"
)
BREAKING_MESSAGE = (
    "this change breaks the datasets and people that read this dataset; if it is intended, "
    "add the line '# reconcile: allow-breaking-change: <reason>' to the manifest so that "
    "reviewers approve it"
)
SHAPE_MESSAGE = (
    "keep the SetInfo description to one sentence of at most 200 characters and put details "
    "in a README.md attachment"
)

# Compliant with every shipped policy; the tests below break one thing at a time.
COMPLIANT = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.example.weather.daily
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: https://example.org/weather.csv
      read:
        kind: Csv
        header: true
        schema:
          - event_time TIMESTAMP
          - station STRING
          - temperature DOUBLE
      preprocess:
        kind: Sql
        engine: spark
        query: SELECT * FROM input
      merge:
        kind: Ledger
        primaryKey: [event_time, station]
    - kind: SetInfo
      description: Daily weather observations by station.
      keywords: [weather]
    - kind: SetLicense
      shortName: CC0
      name: Creative Commons Zero v1.0 Universal
      spdxId: CC0-1.0
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
"""

WITHOUT_INFO = COMPLIANT.replace(
    "    - kind: SetInfo\n"
    "      description: Daily weather observations by station.\n"
    "      keywords: [weather]\n",
    "",
)

DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.example.weather.hot-days
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: org.example.weather.daily
      transform:
        kind: Sql
        engine: flink
        query: SELECT * FROM `org.example.weather.daily` WHERE temperature > 30
"""


def _write(tmp_path: Path, text: str, name: str = "ds.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _facts(path: Path) -> ManifestFacts:
    (facts,) = load_snapshots(path)
    return facts


def _shipped_verdicts(path: Path, dataset: DatasetPlan | None = None) -> list[Verdict]:
    return evaluate(load_policies(SHIPPED), _facts(path), dataset)


def _policies(tmp_path: Path, files: dict[str, str]) -> PolicySet:
    directory = tmp_path / "policies"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return load_policies(directory)


def _plan(change_class: ChangeClass | None, override: str | None = None) -> DatasetPlan:
    breaking = EventChange(
        kind="SetPollingSource",
        key="SetPollingSource",
        before={"kind": "SetPollingSource"},
        after={"kind": "SetPollingSource"},
        change_class=ChangeClass.BREAKING,
        reasons=("column temperature removed", "primary key changed"),
    )
    return DatasetPlan(
        name="org.example.weather.daily",
        kind="Root",
        action=Action.UPDATE,
        events=(breaking,) if change_class is ChangeClass.BREAKING else (),
        change_class=change_class,
        override=override,
    )


# --- The shipped policies -----------------------------------------------------------------


def test_the_shipped_policies_load_in_file_name_order() -> None:
    policies = load_policies(SHIPPED).policies
    assert [(p.id, p.severity) for p in policies] == [
        ("chains-changed-in-pull-request", ERROR),  # chains.yaml
        ("deterministic-queries", ERROR),  # determinism.yaml
        ("spark-engine-only", ERROR),  # engines.yaml
        ("breaking-change-override", ERROR),  # evolution.yaml
        ("manifest-shape", WARNING),  # manifest-shape.schema.json
        ("license-required", ERROR),  # metadata.yaml
        ("info-recommended", WARNING),
        ("reverse-domain-name", ERROR),  # naming.yaml
        ("no-program-steps", ERROR),  # security.yaml
        ("env-templates", ERROR),
    ]


@pytest.mark.parametrize(
    "dataset",
    [
        None,
        _plan(ChangeClass.COMPATIBLE),
        _plan(ChangeClass.BREAKING, override="readers migrated, see #12"),
    ],
    ids=["no-plan", "compatible", "breaking-with-override"],
)
def test_a_compliant_manifest_gets_no_verdicts(tmp_path: Path, dataset: DatasetPlan | None) -> None:
    assert _shipped_verdicts(_write(tmp_path, COMPLIANT), dataset) == []


@pytest.mark.parametrize(
    "name",
    # Valid by the spec's grammar (which the manifest loader enforces) but not the policy's.
    ["weather", "Org.Example.Weather", "weather-station", "org.example.Daily"],
)
def test_reverse_domain_name_fires_on_other_names(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, COMPLIANT.replace("org.example.weather.daily", name, 1))
    assert _shipped_verdicts(path) == [
        Verdict(
            policy="reverse-domain-name",
            severity=ERROR,
            message=f"name {name!r} does not match the required pattern: {NAME_MESSAGE}",
            dataset=name,
            location=Location(str(path), 4, 9),
        )
    ]


@pytest.mark.parametrize("name", ["io.kamu", "org.example-1.weather-2.v3", "a.b"])
def test_reverse_domain_name_accepts_reverse_domain_names(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, COMPLIANT.replace("org.example.weather.daily", name, 1))
    assert _shipped_verdicts(path) == []


def test_license_required_fires_without_set_license(tmp_path: Path) -> None:
    path = _write(tmp_path, COMPLIANT[: COMPLIANT.index("    - kind: SetLicense")])
    assert _shipped_verdicts(path) == [
        Verdict(
            "license-required",
            ERROR,
            f"no SetLicense event: {LICENSE_MESSAGE}",
            "org.example.weather.daily",
            Location(str(path), 1),
        )
    ]


def test_info_recommended_warns_without_set_info(tmp_path: Path) -> None:
    path = _write(tmp_path, "---\n" + WITHOUT_INFO)
    assert _shipped_verdicts(path) == [
        Verdict(
            "info-recommended",
            WARNING,
            f"no SetInfo event: {INFO_MESSAGE}",
            "org.example.weather.daily",
            Location(str(path), 2),  # the document starts after '---'
        )
    ]


def test_no_program_steps_fires_on_container_fetch_and_pipe_prepare(tmp_path: Path) -> None:
    text = COMPLIANT.replace(
        "      fetch:\n        kind: Url\n        url: https://example.org/weather.csv\n",
        "      fetch:\n"
        "        kind: Container\n"
        "        image: ghcr.io/example/weather-fetcher:1.0\n"
        "      prepare:\n"
        "        - kind: Decompress\n"
        "          format: Gzip\n"
        "        - kind: pipe\n"
        "          command: [sed, -e, 1d]\n",
    )
    path = _write(tmp_path, text)
    assert _shipped_verdicts(path) == [
        Verdict(
            "no-program-steps",
            ERROR,
            f"FetchStep::Container at content.metadata[0].fetch: {PROGRAM_MESSAGE}",
            "org.example.weather.daily",
            Location(str(path), 9, 9),
        ),
        Verdict(
            "no-program-steps",
            ERROR,
            f"PrepStep::Pipe at content.metadata[0].prepare[1]: {PROGRAM_MESSAGE}",
            "org.example.weather.daily",
            Location(str(path), 14, 11),
        ),
    ]


def test_spark_engine_only_fires_on_a_preprocess_query(tmp_path: Path) -> None:
    path = _write(tmp_path, COMPLIANT.replace("engine: spark", "engine: datafusion"))
    assert _shipped_verdicts(path) == [
        Verdict(
            "spark-engine-only",
            ERROR,
            "engine 'datafusion' at content.metadata[0].preprocess.engine (allowed: spark): "
            + ENGINE_MESSAGE,
            "org.example.weather.daily",
            Location(str(path), 20, 17),
        )
    ]


def test_spark_engine_only_fires_on_a_set_transform(tmp_path: Path) -> None:
    path = _write(tmp_path, DERIVATIVE)
    verdicts = _shipped_verdicts(path)
    assert [v for v in verdicts if v.policy == "spark-engine-only"] == [
        Verdict(
            "spark-engine-only",
            ERROR,
            "engine 'flink' at content.metadata[0].transform.engine (allowed: spark): "
            + ENGINE_MESSAGE,
            "org.example.weather.hot-days",
            Location(str(path), 12, 17),
        )
    ]


def test_breaking_change_override_fires_on_a_breaking_change_without_override(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, COMPLIANT)
    assert _shipped_verdicts(path, _plan(ChangeClass.BREAKING)) == [
        Verdict(
            "breaking-change-override",
            ERROR,
            "breaking change to SetPollingSource (column temperature removed; primary key "
            f"changed): {BREAKING_MESSAGE}",
            "org.example.weather.daily",
            Location(str(path), 7, 7),  # the SetPollingSource that changed
        )
    ]


def test_manifest_shape_warns_on_a_long_set_info_description(tmp_path: Path) -> None:
    description = "Daily weather observations " + "x" * 174  # 201 characters
    text = COMPLIANT.replace(
        "      description: Daily weather observations by station.",
        f"      description: {description}",
    ).replace("kind: SetInfo", "kind: setinfo")  # every tag spelling counts
    path = _write(tmp_path, text)
    assert _shipped_verdicts(path) == [
        Verdict(
            "manifest-shape",
            WARNING,
            f"'Daily weather observations {'x' * 91}… at content.metadata[1].description: "
            + SHAPE_MESSAGE,
            "org.example.weather.daily",
            Location(str(path), 26, 20),
        )
    ]


def test_manifest_shape_accepts_a_description_of_200_characters(tmp_path: Path) -> None:
    description = "Daily weather observations " + "x" * 173
    text = COMPLIANT.replace("Daily weather observations by station.", description)
    assert _shipped_verdicts(_write(tmp_path, text)) == []


def test_kamu_fixture_with_a_pipe_step() -> None:
    path = FIXTURE_MANIFESTS / "ca.bankofcanada.exchange-rates.daily.yaml"
    name = "ca.bankofcanada.exchange-rates.daily"
    assert _shipped_verdicts(path) == [
        Verdict(
            "license-required",
            ERROR,
            f"no SetLicense event: {LICENSE_MESSAGE}",
            name,
            Location(str(path), 1),
        ),
        Verdict(
            "info-recommended",
            WARNING,
            f"no SetInfo event: {INFO_MESSAGE}",
            name,
            Location(str(path), 1),
        ),
        Verdict(
            "no-program-steps",
            ERROR,
            f"PrepStep::Pipe at content.metadata[0].prepare[0]: {PROGRAM_MESSAGE}",
            name,
            Location(str(path), 12, 11),
        ),
    ]


def test_kamu_fixture_with_the_datafusion_engine() -> None:
    path = FIXTURE_MANIFESTS / "com.yahoo.finance.tickers.daily.yaml"
    name = "com.yahoo.finance.tickers.daily"
    assert _shipped_verdicts(path) == [
        Verdict(
            "spark-engine-only",
            ERROR,
            "engine 'datafusion' at content.metadata[0].preprocess.engine (allowed: spark): "
            + ENGINE_MESSAGE,
            name,
            Location(str(path), 25, 17),
        ),
        Verdict(
            "license-required",
            ERROR,
            f"no SetLicense event: {LICENSE_MESSAGE}",
            name,
            Location(str(path), 1),
        ),
        Verdict(
            "info-recommended",
            WARNING,
            f"no SetInfo event: {INFO_MESSAGE}",
            name,
            Location(str(path), 1),
        ),
    ]


# --- Rules and their checks ---------------------------------------------------------------


def test_applies_to_limits_a_rule_to_one_kind_of_dataset(tmp_path: Path) -> None:
    policies = _policies(
        tmp_path,
        {
            "derived.yaml": (
                "rules:\n"
                "  - id: derived-need-info\n"
                "    severity: warning\n"
                "    message: describe how the data is derived\n"
                "    applies_to: Derivative\n"
                "    require_events: [SetInfo]\n"
            )
        },
    )
    root = _facts(_write(tmp_path, WITHOUT_INFO))
    derivative = _facts(_write(tmp_path, DERIVATIVE, "derivative.yaml"))
    assert evaluate(policies, root, None) == []
    assert evaluate(policies, derivative, None) == [
        Verdict(
            "derived-need-info",
            WARNING,
            "no SetInfo event: describe how the data is derived",
            "org.example.weather.hot-days",
            Location(str(tmp_path / "derivative.yaml"), 1),
        )
    ]


def test_without_a_yaml_tree_verdicts_point_at_the_manifest_line(tmp_path: Path) -> None:
    (loaded,) = load_snapshots(
        _write(tmp_path, COMPLIANT.replace("engine: spark", "engine: flink"))
    )
    facts = ManifestFacts(loaded.snapshot, "datasets/weather.yaml", 7, raw={})
    (verdict,) = evaluate(load_policies(SHIPPED), facts, None)
    assert verdict.location == Location("datasets/weather.yaml", 7)


def test_an_empty_or_missing_policies_directory_gives_no_verdicts(tmp_path: Path) -> None:
    manifest = _facts(
        _write(
            tmp_path,
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: x\n  kind: Root\n  metadata: []\n",
        )
    )
    empty = _policies(tmp_path, {})
    assert empty == PolicySet()
    assert load_policies(tmp_path / "missing") == PolicySet()
    # a folder, even one named like a rule file, holds no policy: a pull request's plan
    # skips it (it names files), and the base's plan and runs stopped at it
    (tmp_path / "policies" / "zz.yaml").mkdir()
    (tmp_path / "policies" / "zz.yaml" / "README").write_text("hi\n")
    assert load_policies(tmp_path / "policies") == PolicySet()
    assert evaluate(empty, manifest, _plan(ChangeClass.BREAKING)) == []


# --- JSON Schema policies -----------------------------------------------------------------

LICENSE_SPDX_SCHEMA = """\
{
\t"$comment": "tabs are fine in JSON",
\t"x-message": "licenses need an SPDX id",
\t"properties": {
\t\t"content": {
\t\t\t"properties": {
\t\t\t\t"metadata": {
\t\t\t\t\t"items": {
\t\t\t\t\t\t"if": {
\t\t\t\t\t\t\t"properties": {
\t\t\t\t\t\t\t\t"kind": {"$ref": "https://reconciler.local/schemas/metadata-events/SetLicense.json#/properties/kind"}
\t\t\t\t\t\t\t},
\t\t\t\t\t\t\t"required": ["kind"]
\t\t\t\t\t\t},
\t\t\t\t\t\t"then": {"required": ["spdxId"]}
\t\t\t\t\t}
\t\t\t\t}
\t\t\t}
\t\t}
\t}
}
"""


def test_a_json_schema_policy_reports_each_error_with_its_path(tmp_path: Path) -> None:
    policies = _policies(tmp_path, {"license-spdx.schema.json": LICENSE_SPDX_SCHEMA})
    # Two licenses without an SPDX id; the $ref to the ODF schema's kind covers 'setLicense'.
    text = COMPLIANT.replace("      spdxId: CC0-1.0\n", "") + (
        "    - kind: setLicense\n"
        "      shortName: Proprietary\n"
        "      name: Example Corp data license\n"
        "      websiteUrl: https://example.org/license\n"
    )
    path = _write(tmp_path, text)
    assert evaluate(policies, _facts(path), None) == [
        Verdict(
            "license-spdx",
            ERROR,
            "'spdxId' is a required property at content.metadata[2]: licenses need an SPDX id",
            "org.example.weather.daily",
            Location(str(path), 28, 7),
        ),
        Verdict(
            "license-spdx",
            ERROR,
            "'spdxId' is a required property at content.metadata[3]: licenses need an SPDX id",
            "org.example.weather.daily",
            Location(str(path), 32, 7),
        ),
    ]


def test_a_yaml_schema_policy_sees_the_whole_document(tmp_path: Path) -> None:
    schema = (
        "$comment: the envelope is part of what a schema policy sees\n"
        "x-severity: warning\n"
        "x-message: declare datasets with version 1 manifests\n"
        "properties:\n"
        "  version: {const: 2}\n"
    )
    policies = _policies(tmp_path, {"envelope.schema.yaml": schema})
    path = _write(tmp_path, COMPLIANT)
    assert evaluate(policies, _facts(path), None) == [
        Verdict(
            "envelope",
            WARNING,
            "2 was expected at version: declare datasets with version 1 manifests",
            "org.example.weather.daily",
            Location(str(path), 2, 10),
        )
    ]


def test_json_schema_numbers_are_json_numbers(tmp_path: Path) -> None:
    # Read as YAML, 1e0 would be the string '1e0' and the schema would be invalid.
    schema = '{"x-message": "manifests are version 0", "properties": {"version": {"exclusiveMaximum": 1e0}}}'
    policies = _policies(tmp_path, {"old.schema.json": schema})
    path = _write(tmp_path, COMPLIANT)
    assert evaluate(policies, _facts(path), None) == [
        Verdict(
            "old",
            ERROR,
            "1 is greater than or equal to the maximum of 1.0 at version: manifests are version 0",
            "org.example.weather.daily",
            Location(str(path), 2, 10),
        )
    ]


# --- The override comment -----------------------------------------------------------------


def test_read_override_returns_the_stripped_reason() -> None:
    text = "# reconcile: allow-breaking-change:   readers migrated, see #12  \n" + COMPLIANT
    assert read_override(text) == "readers migrated, see #12"


def test_read_override_without_a_reason_is_none() -> None:
    assert read_override("# reconcile: allow-breaking-change:\n" + COMPLIANT) is None
    assert read_override("# reconcile: allow-breaking-change:   \n" + COMPLIANT) is None
    assert read_override("# reconcile: allow-breaking-change\n" + COMPLIANT) is None
    assert read_override(COMPLIANT) is None


def test_read_override_finds_an_indented_comment_in_the_middle_of_the_file() -> None:
    text = COMPLIANT.replace(
        "      merge:\n",
        "      # reconcile: allow-breaking-change: key changed, consumers told on 2024-05-01\n"
        "      merge:\n",
    )
    assert read_override(text) == "key changed, consumers told on 2024-05-01"


def test_read_override_ignores_the_text_inside_a_query_and_after_a_value() -> None:
    inside_query = COMPLIANT.replace(
        "        query: SELECT * FROM input\n",
        "        query: |\n"
        "          SELECT * FROM input\n"
        "          # reconcile: allow-breaking-change: smuggled\n",
    )
    after_value = COMPLIANT.replace(
        "kind: Root", "kind: Root  # reconcile: allow-breaking-change: not a line"
    )
    assert read_override(inside_query) is None
    assert read_override(after_value) is None


def test_a_comment_after_a_block_scalar_is_still_an_override() -> None:
    text = COMPLIANT.replace(
        "        query: SELECT * FROM input\n",
        "        query: |\n"
        "          SELECT * FROM input\n"
        "# reconcile: allow-breaking-change: reviewed\n",
    )
    assert read_override(text) == "reviewed"


# --- Environment variables in fetch templates ----------------------------------------------


def _env_rule(allowed: str) -> str:
    """A rule file with one ``env_templates`` rule; ``allowed`` its entries, each line
    written at the rule's own indent."""
    entries = "".join(f"  {line}\n" for line in allowed.splitlines())
    return (
        f"rules:\n  - id: env\n    severity: error\n    message: m\n    env_templates:\n{entries}"
    )


TEMPLATED = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.example.templated
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: "https://api.weather.example/v1/obs?key=${{ env.WEATHER_KEY }}&n=${{ env.N || 10 }}"
        headers:
          - name: Authorization
            value: "Bearer ${{ env.UNSET || env.AWS_SECRET_ACCESS_KEY }}"
      read: {kind: Csv, header: true}
      merge: {kind: Append}
"""


def test_a_template_names_only_variables_the_policies_allow_and_sends_them_only_there(
    tmp_path: Path,
) -> None:
    """A merged manifest's fetch resolved any variable of the runner's environment, the
    data store's credentials included, into a URL or header of its choosing."""
    manifest = _facts(_write(tmp_path, TEMPLATED))
    policies = _policies(
        tmp_path,
        {
            "env.yaml": _env_rule(
                "    WEATHER_KEY: ['https://api.weather.example/']\n    N: ['*']\n"
                "    UNSET: ['https://other.example/']\n"
            )
        },
    )
    path = str(tmp_path / "ds.yaml")
    assert [(v.message, v.location) for v in evaluate(policies, manifest, None)] == [
        (
            "env.UNSET at content.metadata[0].fetch.headers[0].value is sent to"
            " 'https://api.weather.example/v1/obs?key=${{ env.WEATHER_KEY }}&n=${{ env.N || 10 }}',"
            " and UNSET may go only to addresses starting with 'https://other.example/': m",
            Location(path, 13, 20),
        ),
        (
            "env.AWS_SECRET_ACCESS_KEY at content.metadata[0].fetch.headers[0].value: no"
            " env_templates rule allows AWS_SECRET_ACCESS_KEY: m",
            Location(path, 13, 20),
        ),
    ]
    # The same URL moved to another host: the key may not follow it.
    moved = _facts(
        _write(
            tmp_path,
            TEMPLATED.replace("api.weather.example", "api.weather.example.evil.org"),
            "m.yaml",
        )
    )
    assert [v.message.split(" is sent to ")[0] for v in evaluate(policies, moved, None)][:1] == [
        "env.WEATHER_KEY at content.metadata[0].fetch.url"
    ]


def test_without_an_env_templates_rule_no_variable_may_be_named(tmp_path: Path) -> None:
    verdicts = evaluate(PolicySet(), _facts(_write(tmp_path, TEMPLATED)), None)
    assert [(v.policy, v.severity, v.message.split(": ")[0]) for v in verdicts] == [
        ("env-templates", ERROR, f"env.{name} at content.metadata[0].fetch.{where}")
        for name, where in (
            ("WEATHER_KEY", "url"),
            ("N", "url"),
            ("UNSET", "headers[0].value"),
            ("AWS_SECRET_ACCESS_KEY", "headers[0].value"),
        )
    ]
    assert verdicts[0].message.endswith(
        "no env_templates rule allows WEATHER_KEY: a fetch's ${{ env.NAME }} sends the"
        " runner's variable where the manifest says; name the variable, with the addresses"
        " its value may go to, in an env_templates rule under policies/ (a change its owners"
        " review)"
    )
    # The shipped rule allows none either, and lets a manifest without templates be.
    shipped = _shipped_verdicts(_write(tmp_path, TEMPLATED))
    assert [v.policy for v in shipped if v.policy == "env-templates"] == ["env-templates"] * 4
    assert [
        v for v in _shipped_verdicts(_write(tmp_path, COMPLIANT)) if v.policy == "env-templates"
    ] == []


def test_a_container_s_variables_go_to_its_image(tmp_path: Path) -> None:
    """Its command, arguments and environment reach the image's program; a variable
    listed without a value passes the runner's own value of that name."""
    text = COMPLIANT.replace(
        "        kind: Url\n        url: https://example.org/weather.csv\n",
        "        kind: Container\n"
        '        image: "ghcr.io/acme/fetch:1"\n'
        '        args: ["${{ env.TOKEN }}"]\n'
        '        env: [{name: AWS_ACCESS_KEY_ID}, {name: X, value: "${{ env.TOKEN }}"}]\n',
    )
    manifest = _facts(_write(tmp_path, text))
    policies = _policies(tmp_path, {"env.yaml": _env_rule("    TOKEN: [ghcr.io/acme/]\n")})
    assert [v.message.split(": ")[0] for v in evaluate(policies, manifest, None)] == [
        "env.AWS_ACCESS_KEY_ID at content.metadata[0].fetch.env[0]"
    ]


# --- Mistakes in policy files -------------------------------------------------------------

GOOD_RULE = """\
rules:
  - id: license-required
    severity: error
    message: add a license
    require_events: [SetLicense]
"""


@pytest.mark.parametrize(
    ("files", "file", "line", "policy", "message"),
    [
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: names\n    severity: error\n    message: m\n    name_regex: '^x$'\n"
            },
            "a.yaml",
            5,
            "names",
            "unknown key 'name_regex'; a rule has id, severity, message, applies_to and one "
            "check of: name_pattern, require_events, forbid_steps, allowed_engines, breaking_changes,"
            " deterministic_queries, chain_changes, env_templates",
            id="unknown-check",
        ),
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: names\n    severity: fatal\n    message: m\n    name_pattern: x\n"
            },
            "a.yaml",
            3,
            "names",
            "severity 'fatal' is not one of: error, warning",
            id="bad-severity",
        ),
        pytest.param(
            {"a.yaml": GOOD_RULE, "b.yaml": "\n" + GOOD_RULE},
            "b.yaml",
            3,
            "license-required",
            "duplicate id, first defined at {dir}/a.yaml:2",
            id="duplicate-id",
        ),
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: names\n    severity: error\n    message: m\n    name_pattern: '^[a-z'\n"
            },
            "a.yaml",
            5,
            "names",
            "invalid regular expression '^[a-z': unterminated character set at position 1",
            id="invalid-regex",
        ),
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: steps\n    severity: error\n    message: m\n    forbid_steps:\n      - FetchStep::Url\n      - PrepStep::Shell\n"
            },
            "a.yaml",
            7,
            "steps",
            "unknown 'PrepStep::Shell' in 'forbid_steps'; expected one of: FetchStep::Url, "
            "FetchStep::FilesGlob, FetchStep::Container, FetchStep::Mqtt, FetchStep::EthereumLogs, "
            "PrepStep::Decompress, PrepStep::Pipe, ReadStep::Csv, ReadStep::GeoJson, "
            "ReadStep::EsriShapefile, ReadStep::Parquet, ReadStep::Json, ReadStep::NdJson, "
            "ReadStep::NdGeoJson, Transform::Sql, MergeStrategy::Append, MergeStrategy::Ledger, "
            "MergeStrategy::Snapshot, EventTimeSource::FromMetadata, EventTimeSource::FromPath, "
            "EventTimeSource::FromSystemTime, SourceCaching::Forever, Attachments::Embedded",
            id="unknown-step",
        ),
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: two\n    severity: error\n    message: m\n    require_events: [SetInfo]\n    allowed_engines: [spark]\n"
            },
            "a.yaml",
            6,
            "two",
            "a rule needs exactly one check of: name_pattern, require_events, forbid_steps, "
            "allowed_engines, breaking_changes, deterministic_queries, chain_changes,"
            " env_templates",
            id="two-checks",
        ),
        pytest.param(
            {"a.yaml": _env_rule("    A.B: ['*']\n")},
            "a.yaml",
            6,
            "env",
            "'A.B' is no environment variable's name",
            id="env-bad-name",
        ),
        pytest.param(
            {"a.yaml": _env_rule("    A: [https://api.example.org]\n")},
            "a.yaml",
            6,
            "env",
            "'https://api.example.org' does not fix a host: write a URL up to the / after its"
            " host (https://api.example.org/), an image's registry or owner up to its /"
            " (ghcr.io/acme/), or * for a value that is no secret",
            id="env-prefix-without-host-end",
        ),
        pytest.param(
            {"a.yaml": _env_rule("    A: ['*']\n    B: ['https://', ghcr.io/acme/]\n")},
            "a.yaml",
            7,
            "env",
            "'https://' does not fix a host: write a URL up to the / after its"
            " host (https://api.example.org/), an image's registry or owner up to its /"
            " (ghcr.io/acme/), or * for a value that is no secret",
            id="env-prefix-without-host",
        ),
        pytest.param(
            {"a.yaml": _env_rule("    A: []\n")},
            "a.yaml",
            6,
            "env",
            "the addresses of A must be a non-empty list of strings",
            id="env-no-address",
        ),
        pytest.param(
            {
                "a.yaml": "rules:\n  - id: Not_Kebab\n    severity: error\n    message: m\n    name_pattern: x\n"
            },
            "a.yaml",
            2,
            None,
            "id 'Not_Kebab' must be kebab-case (like 'license-required')",
            id="bad-id",
        ),
        pytest.param(
            {"a.yaml": "rules:\n  - id: x\n    severity: [error\n"},
            "a.yaml",
            4,
            None,
            "invalid YAML: did not find expected ',' or ']'",
            id="invalid-yaml",
        ),
        pytest.param(
            {"s.schema.json": '{\n  "x-message": "m"\n  "x-severity": "warning"\n}\n'},
            "s.schema.json",
            3,
            None,
            "invalid JSON: Expecting ',' delimiter",
            id="schema-invalid-json",
        ),
        pytest.param(
            {"s.schema.json": '{\n  "x-severity": "info",\n  "x-message": "m"\n}\n'},
            "s.schema.json",
            2,
            "s",
            "x-severity 'info' is not one of: error, warning",
            id="schema-bad-severity",
        ),
        pytest.param(
            {
                "s.schema.json": '{\n  "x-message": "m",\n  "properties": {\n    "kind": {"type": "text"}\n  }\n}\n'
            },
            "s.schema.json",
            4,
            "s",
            "invalid JSON Schema: 'text' is not valid under any of the given schemas",
            id="schema-invalid",
        ),
        pytest.param(
            {
                "s.schema.yaml": "x-message: m\nproperties:\n  kind:\n    $ref: https://example.org/remote.json\n"
            },
            "s.schema.yaml",
            4,
            "s",
            "$ref 'https://example.org/remote.json' resolves to no schema",
            id="schema-unresolvable-ref",
        ),
        pytest.param(
            {"license-required.schema.yaml": "x-message: m\n", "metadata.yaml": GOOD_RULE},
            "metadata.yaml",
            2,
            "license-required",
            "duplicate id, first defined at {dir}/license-required.schema.yaml:1",
            id="duplicate-id-across-kinds",
        ),
    ],
)
def test_policy_errors_name_the_file_line_and_policy(
    tmp_path: Path,
    files: dict[str, str],
    file: str,
    line: int,
    policy: str | None,
    message: str,
) -> None:
    directory = tmp_path / "policies"
    with pytest.raises(PolicyError) as caught:
        _policies(tmp_path, files)
    error = caught.value
    expected = message.format(dir=directory)
    assert (error.file, error.line, error.policy, error.message) == (
        directory / file,
        line,
        policy,
        expected,
    )
    prefix = f"{directory / file}:{line}: " + (f"{policy}: " if policy else "")
    assert str(error) == prefix + expected
