"""Loading DatasetSnapshot manifests: real manifests load, and errors point into the YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE_MANIFESTS

from reconciler.odf import models
from reconciler.odf.manifest import ManifestError, ManifestIssue, load_snapshot, load_snapshots

FIXTURES = sorted(FIXTURE_MANIFESTS.glob("*.yaml"))


def test_there_are_twenty_fixture_manifests() -> None:
    assert len(FIXTURES) == 20


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_real_kamu_manifest_loads(path: Path) -> None:
    snapshot = load_snapshot(path)
    assert snapshot.name and snapshot.metadata


def test_a_loaded_manifest_has_the_expected_events() -> None:
    snapshot = load_snapshot(FIXTURE_MANIFESTS / "com.acme.orders.yaml")
    assert snapshot.name == "com.acme.orders"
    assert snapshot.kind is models.DatasetKind.ROOT
    (source,) = snapshot.metadata
    assert source == models.SetPollingSource(
        fetch=models.FetchStepFilesGlob(path="data/orders-*.csv"),
        read=models.ReadStepCsv(
            header=True, schema=["event_time TIMESTAMP", "order_id BIGINT", "quantity BIGINT"]
        ),
        merge=models.MergeStrategyLedger(primary_key=["order_id"]),
    )


def test_env_templates_stay_verbatim() -> None:
    snapshot = load_snapshot(FIXTURE_MANIFESTS / "com.youtube.channel.kamu-data.stats.yaml")
    dumped = str([e.model_dump(by_alias=True) for e in snapshot.metadata])
    assert "key=${{env.YOUTUBE_API_KEY}}" in dumped


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ds.yaml"
    path.write_text(text)
    return path


HEADER = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: org.example.ds\n  kind: Root\n  metadata:\n"


def _issues(path: Path) -> list[ManifestIssue]:
    with pytest.raises(ManifestError) as e:
        load_snapshot(path)
    return e.value.issues


def test_every_error_of_a_file_is_reported_with_line_column_and_field_path(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        HEADER + "    - kind: SetPollingSource\n"  # line 7
        "      fetch:\n"
        "        kind: Url\n"
        "        url: http://127.0.0.1/x.csv\n"
        "        bogus: 1\n"  # line 11
        "      read:\n"
        "        kind: Csv\n"
        "        schema: 5\n"  # line 14
        "      merge:\n"
        "        kind: Ledger\n"  # line 16: primaryKey missing
        "    - kind: Whatever\n",  # line 17
    )
    issues = _issues(path)
    assert [(i.line, i.column, i.field, i.message) for i in issues] == [
        (
            11,
            9,
            "content.metadata[0].fetch.bogus",
            "unknown field 'bogus'; expected one of: url, eventTime, cache, headers",
        ),
        (14, 17, "content.metadata[0].read.schema", "Input should be a valid list"),
        (16, 9, "content.metadata[0].merge.primaryKey", "required field 'primaryKey' is missing"),
        (
            17,
            13,
            "content.metadata[1].kind",
            "unknown kind 'Whatever'; expected one of: 'AddData', 'ExecuteTransform', 'Seed', "
            "'SetPollingSource', 'SetTransform', 'SetVocab', 'SetAttachments', 'SetInfo', "
            "'SetLicense', 'SetDataSchema', 'AddPushSource', 'DisablePushSource', "
            "'DisablePollingSource'",
        ),
    ]
    assert str(issues[0]).startswith(f"{path}:11:9: content.metadata[0].fetch.bogus: unknown field")


def test_yaml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "    - kind: SetInfo\n      description: [unclosed\n")
    (issue,) = _issues(path)
    assert issue.line == 9 and issue.message.startswith("invalid YAML")


def test_the_envelope_must_be_a_version_1_dataset_snapshot(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER.replace("version: 1", "version: 2") + "    - kind: SetInfo\n")
    (issue,) = _issues(path)
    assert (issue.line, issue.field) == (2, "version")
    assert issue.message == "Input should be 1, got 2"


@pytest.mark.parametrize(
    ("kind", "event", "message"),
    [
        ("Root", "SetTransform", "a Root dataset cannot have SetTransform"),
        ("Derivative", "AddPushSource", "a Derivative dataset cannot have AddPushSource"),
        ("Root", "Seed", "Seed is not allowed in a manifest"),
        ("Root", "DisablePollingSource", "DisablePollingSource is not allowed in a manifest"),
    ],
)
def test_events_that_contradict_the_dataset_kind_or_belong_to_engines_are_rejected(
    tmp_path: Path, kind: str, event: str, message: str
) -> None:
    bodies = {
        "SetTransform": "      inputs: [{datasetRef: a}]\n      transform: {kind: Sql, engine: spark, query: SELECT 1}\n",
        "AddPushSource": "      sourceName: s\n      read: {kind: Csv}\n      merge: {kind: Append}\n",
        "Seed": "      datasetId: did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc\n      datasetKind: Root\n",
        "DisablePollingSource": "",
    }
    text = HEADER.replace("kind: Root", f"kind: {kind}") + f"    - kind: {event}\n" + bodies[event]
    (issue,) = _issues(_write(tmp_path, text))
    assert (issue.line, issue.field) == (7, "content.metadata[0].kind")
    assert issue.message.startswith(message)


def test_several_documents_in_one_file_load_in_order(tmp_path: Path) -> None:
    doc = HEADER + "    - kind: SetInfo\n      description: d\n"
    path = _write(tmp_path, doc + "---\n" + doc.replace("org.example.ds", "org.example.two"))
    assert [(s.snapshot.name, s.line) for s in load_snapshots(path)] == [
        ("org.example.ds", 1),
        ("org.example.two", 1 + doc.count("\n") + 1),
    ]
    with pytest.raises(ManifestError, match="expected one manifest per file"):
        load_snapshot(path)


def test_unquoted_timestamps_stay_exact_strings(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        HEADER + "    - kind: SetInfo\n      description: 2020-01-01T00:00:00.123456789Z\n",
    )
    (event,) = load_snapshot(path).metadata
    assert event == models.SetInfo(description="2020-01-01T00:00:00.123456789Z")


def test_booleans_are_yaml_1_2s_so_a_manifest_means_what_it_means_to_kamu(tmp_path: Path) -> None:
    """YAML 1.1 reads yes/no/on/off as booleans, kamu's YAML 1.2 reader as strings: NO is
    a null marker's text, and a boolean field given yes or "true" is refused as kamu
    refuses it, at its line."""
    read = "      read:\n        kind: Csv\n"
    source = "    - kind: AddPushSource\n      sourceName: s\n      merge: {kind: Append}\n"
    good = _write(
        tmp_path, HEADER + source + read + "        nullValue: NO\n        header: TRUE\n"
    )
    (event,) = load_snapshot(good).metadata
    assert isinstance(event, models.AddPushSource)
    assert event.read == models.ReadStepCsv(null_value="NO", header=True)
    bad = _write(
        tmp_path, HEADER + source + read + "        header: yes\n        inferSchema: 'true'\n"
    )
    yes = "'yes' is read as text, not a boolean (a manifest is YAML 1.2, as kamu reads it)"
    assert [(i.line, i.column, i.field, i.message) for i in _issues(bad)] == [
        (12, 17, "content.metadata[0].read.header", f"{yes}: write true"),
        (13, 22, "content.metadata[0].read.inferSchema", "Input should be a valid boolean"),
    ]
    assert (
        str(_issues(bad)[0]) == f"{bad}:12:17: content.metadata[0].read.header: {yes}: write true"
    )


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("yes", "true"),
        ("Y", "true"),
        ("On", "true"),
        ("NO", "false"),
        ("n", "false"),
        ("off", "false"),
    ],
)
def test_a_yaml_1_1_boolean_says_it_is_text_and_what_to_write(
    tmp_path: Path, written: str, meant: str
) -> None:
    """``header: yes`` said only "Input should be a valid boolean"."""
    read = f"      read:\n        kind: Csv\n        header: {written}\n"
    source = "    - kind: AddPushSource\n      sourceName: s\n      merge: {kind: Append}\n"
    (issue,) = _issues(_write(tmp_path, HEADER + source + read))
    assert (issue.line, issue.column, issue.field, issue.message) == (
        12,
        17,
        "content.metadata[0].read.header",
        f"{written!r} is read as text, not a boolean (a manifest is YAML 1.2, as kamu reads"
        f" it): write {meant}",
    )


def test_yaml_aliases_are_refused_so_a_manifest_cannot_expand_exponentially(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    path = _write(tmp_path, bomb + HEADER + "    - kind: SetInfo\n")
    (issue,) = _issues(path)
    assert (issue.line, issue.message) == (
        1,
        "YAML anchors and aliases are not allowed in manifests",
    )
