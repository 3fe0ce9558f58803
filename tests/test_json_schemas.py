"""The hand-written ODF JSON Schemas accept real manifests and blocks, and reject bad ones."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURE_MANIFESTS, load_vectors
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from reconciler.odf.json_schemas import (
    SCHEMA_BASE_URI,
    SCHEMA_DIR,
    registry,
    schema_files,
    validator,
)

MANIFESTS = sorted(FIXTURE_MANIFESTS.glob("*.yaml"))
BLOCKS = load_vectors("block-vectors.json")

DID = "did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4"
HASH = "f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272"
SQL = {"kind": "Sql", "engine": "spark", "query": "SELECT * FROM input"}

# One valid example per schema file (several for unions, one per variant), so
# that validating them walks every file and every variant through the registry.
EXAMPLES: dict[str, list[Any]] = {
    "plan.json": [
        {
            "formatVersion": 1,
            "engineStarted": False,
            "summary": {
                "actions": {
                    "create": 0,
                    "update": 0,
                    "recreate": 0,
                    "unchanged": 0,
                    "orphaned": 0,
                    "delete": 0,
                },
                "pendingData": 0,
                "errors": 0,
                "warnings": 0,
                "hasChanges": False,
                "hasErrors": False,
                "exitCode": {"default": 0, "detailed": 0},
            },
            "datasets": [],
            "verdicts": [],
            "problems": [],
        }
    ],
    "run-result.json": [
        {
            "formatVersion": 1,
            "command": "verify",
            "ok": True,
            "exitCode": 0,
            "interrupted": False,
            "discarded": None,
            "error": None,
            "datasets": [],
            "summary": {
                "datasets": 0,
                "statuses": {},
                "records": 0,
                "seconds": 0.1,
                "line": "0 datasets: 0 valid in 0.1 s",
            },
        }
    ],
    "fragments/AttachmentEmbedded.json": [{"path": "README.md", "content": "# Hi"}],
    "fragments/Attachments.json": [
        {"kind": "Embedded", "items": [{"path": "README.md", "content": "# Hi"}]}
    ],
    "fragments/Checkpoint.json": [{"physicalHash": HASH, "size": 10}],
    "fragments/CompressionFormat.json": ["Gzip", "zip"],
    "fragments/DataSlice.json": [
        {
            "logicalHash": HASH,
            "physicalHash": HASH,
            "offsetInterval": {"start": 0, "end": 9},
            "size": 100,
        }
    ],
    "fragments/DatasetKind.json": ["Root", "derivative"],
    "fragments/DatasetVocabulary.json": [
        {
            "offsetColumn": "offset",
            "operationTypeColumn": "op",
            "systemTimeColumn": "system_time",
            "eventTimeColumn": "event_time",
        }
    ],
    "fragments/EnvVar.json": [{"name": "TOKEN"}, {"name": "MODE", "value": "fast"}],
    "fragments/EventTimeSource.json": [
        {"kind": "FromMetadata"},
        {"kind": "fromPath", "pattern": r"(\d{4}-\d{2}-\d{2})", "timestampFormat": "yyyy-MM-dd"},
        {"kind": "fromsystemtime"},
    ],
    "fragments/ExecuteTransformInput.json": [
        {
            "datasetId": DID,
            "prevBlockHash": HASH,
            "newBlockHash": HASH,
            "prevOffset": 9,
            "newOffset": 19,
        }
    ],
    "fragments/FetchStep.json": [
        {
            "kind": "Url",
            "url": "https://example.org/data.csv?key=${{ env.KEY }}",
            "eventTime": {"kind": "FromSystemTime"},
            "cache": {"kind": "Forever"},
            "headers": [{"name": "Authorization", "value": "Bearer x"}],
        },
        {"kind": "FilesGlob", "path": "data/*.csv", "order": "byName"},
        {
            "kind": "Container",
            "image": "ghcr.io/kamu-data/fetch:1",
            "command": ["fetch"],
            "args": ["--all"],
            "env": [{"name": "TOKEN"}],
        },
        {
            "kind": "Mqtt",
            "host": "broker.example.org",
            "port": 1883,
            "username": "u",
            "password": "${{ env.MQTT_PASSWORD }}",
            "topics": [{"path": "sensors/#", "qos": "AtLeastOnce"}],
        },
        {"kind": "EthereumLogs", "chainId": 1, "nodeUrl": "wss://localhost:8545"},
    ],
    "fragments/MergeStrategy.json": [
        {"kind": "Append"},
        {"kind": "Ledger", "primaryKey": ["id"]},
        {"kind": "snapshot", "primaryKey": ["id"], "compareColumns": ["updated_at"]},
    ],
    "fragments/MqttQos.json": ["AtMostOnce", "atLeastOnce", "exactlyonce"],
    "fragments/MqttTopicSubscription.json": [
        {"path": "a/b"},
        {"path": "a/+", "qos": "ExactlyOnce"},
    ],
    "fragments/OffsetInterval.json": [{"start": 0, "end": 18446744073709551615}],
    "fragments/PrepStep.json": [
        {"kind": "Decompress", "format": "Gzip", "subPath": "*.csv"},
        {"kind": "pipe", "command": ["jq", "-c", ".[]"]},
    ],
    "fragments/ReadStep.json": [
        {
            "kind": "Csv",
            "schema": ["a BIGINT"],
            "separator": ",",
            "encoding": "utf8",
            "quote": '"',
            "escape": "\\",
            "header": True,
            "inferSchema": False,
            "nullValue": "",
            "dateFormat": "rfc3339",
            "timestampFormat": "rfc3339",
        },
        {"kind": "GeoJson", "schema": ["geometry STRING"]},
        {"kind": "EsriShapefile", "subPath": "lines.*"},
        {"kind": "Parquet"},
        {"kind": "Json", "subPath": "data.items", "encoding": "utf8"},
        {"kind": "NdJson", "timestampFormat": "rfc3339"},
        {"kind": "NdGeoJson"},
    ],
    "fragments/RequestHeader.json": [{"name": "Accept", "value": "text/csv"}],
    "fragments/SourceCaching.json": [{"kind": "Forever"}],
    "fragments/SourceOrdering.json": ["ByEventTime", "byname"],
    "fragments/SourceState.json": [{"sourceName": "default", "kind": "odf/etag", "value": "abc"}],
    "fragments/SqlQueryStep.json": [{"alias": "tmp", "query": "SELECT 1"}, {"query": "SELECT 2"}],
    "fragments/TemporalTable.json": [{"name": "rates", "primaryKey": ["currency"]}],
    "fragments/Transform.json": [
        SQL,
        {
            "kind": "sql",
            "engine": "flink",
            "version": "1.0.0",
            "queries": [{"alias": "tmp", "query": "SELECT 1"}, {"query": "SELECT * FROM tmp"}],
            "temporalTables": [{"name": "rates", "primaryKey": ["currency"]}],
        },
    ],
    "fragments/TransformInput.json": [
        {"datasetRef": DID, "alias": "input1"},
        {"datasetRef": "account/org.example.prices"},
        {"datasetRef": "repo/org.example.prices"},
        {"datasetRef": "https://example.org/odf/prices/"},
    ],
    "fragments/Watermark.json": [
        {"systemTime": "2020-01-01T12:00:00Z", "eventTime": "2019-12-31T00:00:00+01:00"}
    ],
    "metadata-events/AddData.json": [
        {
            "kind": "AddData",
            "prevCheckpoint": HASH,
            "prevOffset": 9,
            "newData": {
                "logicalHash": HASH,
                "physicalHash": HASH,
                "offsetInterval": {"start": 10, "end": 19},
                "size": 100,
            },
            "newCheckpoint": {"physicalHash": HASH, "size": 5},
            "newWatermark": "2020-01-01T00:00:00Z",
            "newSourceState": {"sourceName": "default", "kind": "odf/etag", "value": "x"},
        }
    ],
    "metadata-events/AddPushSource.json": [
        {
            "kind": "AddPushSource",
            "sourceName": "default",
            "read": {"kind": "NdJson"},
            "preprocess": SQL,
            "merge": {"kind": "Append"},
        }
    ],
    "metadata-events/DisablePollingSource.json": [{"kind": "DisablePollingSource"}],
    "metadata-events/DisablePushSource.json": [
        {"kind": "disablePushSource", "sourceName": "default"}
    ],
    "metadata-events/ExecuteTransform.json": [
        {
            "kind": "ExecuteTransform",
            "queryInputs": [{"datasetId": DID, "newBlockHash": HASH, "newOffset": 3}],
            "prevCheckpoint": HASH,
            "prevOffset": 2,
            "newData": {
                "logicalHash": HASH,
                "physicalHash": HASH,
                "offsetInterval": {"start": 3, "end": 3},
                "size": 1,
            },
            "newCheckpoint": {"physicalHash": HASH, "size": 5},
            "newWatermark": "2020-01-01T00:00:00.5Z",
        }
    ],
    "metadata-events/MetadataEvent.json": [
        {"kind": "Seed", "datasetId": DID, "datasetKind": "Root"},
        {"kind": "setinfo", "description": "Prices"},
    ],
    "metadata-events/Seed.json": [{"kind": "Seed", "datasetId": DID, "datasetKind": "Derivative"}],
    "metadata-events/SetAttachments.json": [
        {
            "kind": "SetAttachments",
            "attachments": {"kind": "Embedded", "items": [{"path": "a.md", "content": "a"}]},
        }
    ],
    "metadata-events/SetDataSchema.json": [
        {
            "kind": "SetDataSchema",
            "schema": "EAAAAAAACgAMAAYABQAIAAoAAAAAAQQADAAAAAgACAAAAAQACAAAAAQAAAAAAAAA",
        }
    ],
    "metadata-events/SetInfo.json": [{"kind": "SetInfo", "description": "d", "keywords": ["k"]}],
    "metadata-events/SetLicense.json": [
        {
            "kind": "SetLicense",
            "shortName": "OGL-Canada-2.0",
            "name": "Open Government Licence - Canada",
            "spdxId": "OGL-Canada-2.0",
            "websiteUrl": "https://open.canada.ca/en/open-government-licence-canada",
        }
    ],
    "metadata-events/SetPollingSource.json": [
        {
            "kind": "SetPollingSource",
            "fetch": {"kind": "Url", "url": "https://example.org/a.zip"},
            "prepare": [{"kind": "decompress", "format": "zip"}],
            "read": {"kind": "Csv", "header": True},
            "preprocess": SQL,
            "merge": {"kind": "Ledger", "primaryKey": ["id"]},
        }
    ],
    "metadata-events/SetTransform.json": [
        {"kind": "SetTransform", "inputs": [{"datasetRef": "org.example.raw"}], "transform": SQL}
    ],
    "metadata-events/SetVocab.json": [{"kind": "SetVocab", "eventTimeColumn": "date"}],
    "DatasetSnapshot.json": [
        {
            "kind": "DatasetSnapshot",
            "version": 1,
            "content": {
                "name": "org.example.prices",
                "kind": "root",
                "metadata": [
                    {
                        "kind": "AddPushSource",
                        "sourceName": "default",
                        "read": {"kind": "NdJson"},
                        "merge": {"kind": "Append"},
                    },
                    {"kind": "SetVocab", "eventTimeColumn": "date"},
                ],
            },
        }
    ],
    "Manifest.json": [
        {
            "kind": "DatasetSnapshot",
            "version": 1,
            "content": {"name": "a", "kind": "Root", "metadata": []},
        },
        {"kind": "odf-metadata-block", "version": 2, "content": "FAAAAAAAAAA="},
    ],
    "MetadataBlock.json": [
        {
            "systemTime": "2020-01-01T12:00:00Z",
            "prevBlockHash": HASH,
            "sequenceNumber": 1,
            "event": {
                "kind": "SetLicense",
                "shortName": "x",
                "name": "y",
                "websiteUrl": "https://x.org",
            },
        }
    ],
}


def minimal_manifest() -> dict[str, Any]:
    """A small valid DatasetSnapshot manifest that each negative test breaks in one place."""
    return {
        "kind": "DatasetSnapshot",
        "version": 1,
        "content": {
            "name": "org.example.prices",
            "kind": "Root",
            "metadata": [
                {
                    "kind": "SetPollingSource",
                    "fetch": {"kind": "Url", "url": "https://example.org/prices.csv"},
                    "read": {"kind": "Csv", "header": True},
                    "merge": {"kind": "Ledger", "primaryKey": ["date"]},
                }
            ],
        },
    }


def flatten(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """Yield each error and, depth first, every error nested in its context."""
    for error in errors:
        yield error
        yield from flatten(error.context or ())


def located_messages(instance: Any, schema: str = "DatasetSnapshot") -> set[tuple[str, str]]:
    """Return ``(json_path, message)`` for every error, nested ones included."""
    return {(e.json_path, e.message) for e in flatten(validator(schema).iter_errors(instance))}


def find_refs(node: Any) -> Iterator[str]:
    """Yield every ``$ref`` value found anywhere in a schema document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from find_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from find_refs(item)


def test_all_twenty_fixture_manifests_are_present() -> None:
    assert len(MANIFESTS) == 20


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_every_fixture_manifest_validates_against_the_dataset_snapshot_schema(path: Path) -> None:
    document = next(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    assert list(validator("DatasetSnapshot").iter_errors(document)) == []


@pytest.mark.parametrize("vector", BLOCKS, ids=[v["name"] for v in BLOCKS])
def test_every_block_vector_validates_against_the_metadata_block_schema(
    vector: dict[str, Any],
) -> None:
    assert list(validator("MetadataBlock").iter_errors(vector["block"])) == []


def test_a_manifest_with_an_unknown_key_fails_with_an_error_that_locates_and_names_the_key() -> (
    None
):
    manifest = minimal_manifest()
    manifest["content"]["colour"] = "red"
    errors = list(validator("DatasetSnapshot").iter_errors(manifest))
    assert [(e.json_path, e.validator, e.message) for e in errors] == [
        (
            "$.content",
            "additionalProperties",
            "Additional properties are not allowed ('colour' was unexpected)",
        )
    ]


def test_an_unknown_key_inside_a_union_variant_is_reported_on_that_variant() -> None:
    manifest = minimal_manifest()
    manifest["content"]["metadata"][0]["fetch"]["headerz"] = []
    assert (
        "$.content.metadata[0].fetch",
        "Additional properties are not allowed ('headerz' was unexpected)",
    ) in located_messages(manifest)


def test_a_union_with_an_unknown_kind_fails_on_its_kind_tag() -> None:
    manifest = minimal_manifest()
    manifest["content"]["metadata"][0]["fetch"]["kind"] = "Ftp"
    kinds = ["Url", "url", "FilesGlob", "filesGlob", "filesglob", "Container", "container"]
    kinds += ["Mqtt", "mqtt", "EthereumLogs", "ethereumLogs", "ethereumlogs"]
    assert validator("DatasetSnapshot").is_valid(manifest) is False
    assert ("$.content.metadata[0].fetch.kind", f"'Ftp' is not one of {kinds}") in located_messages(
        manifest
    )


def test_an_event_with_an_unknown_kind_fails_on_its_kind_tag() -> None:
    manifest = minimal_manifest()
    manifest["content"]["metadata"].append({"kind": "SetWatermark"})
    messages = located_messages(manifest)
    assert any(
        path == "$.content.metadata[1].kind" and msg.startswith("'SetWatermark' is not one of")
        for path, msg in messages
    )


def test_set_license_without_website_url_fails_as_a_missing_required_field() -> None:
    manifest = minimal_manifest()
    manifest["content"]["metadata"].append(
        {"kind": "SetLicense", "shortName": "MIT", "name": "MIT License"}
    )
    assert validator("DatasetSnapshot").is_valid(manifest) is False
    assert ("$.content.metadata[1]", "'websiteUrl' is a required property") in located_messages(
        manifest
    )


def test_set_license_event_schema_alone_reports_the_missing_website_url() -> None:
    event = {"kind": "SetLicense", "shortName": "MIT", "name": "MIT License"}
    errors = list(validator("metadata-events/SetLicense").iter_errors(event))
    assert [(e.json_path, e.message) for e in errors] == [
        ("$", "'websiteUrl' is a required property")
    ]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("merge", "kind"), "snapshot"),
        (("fetch", "kind"), "url"),
        (("read", "kind"), "csv"),
        (("kind",), "setPollingSource"),
        (("kind",), "setpollingsource"),
    ],
)
def test_union_tags_accept_camel_case_and_lowercase_spellings(
    where: tuple[str, ...], value: str
) -> None:
    manifest = minimal_manifest()
    manifest["content"]["metadata"][0]["merge"] = {"kind": "Snapshot", "primaryKey": ["date"]}
    target = manifest["content"]["metadata"][0]
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    assert list(validator("DatasetSnapshot").iter_errors(manifest)) == []


@pytest.mark.parametrize("kind", ["Root", "Derivative", "root", "derivative"])
def test_snapshot_content_kind_accepts_pascal_case_and_lowercase(kind: str) -> None:
    manifest = minimal_manifest()
    manifest["content"]["kind"] = kind
    assert validator("DatasetSnapshot").is_valid(manifest) is True


def test_snapshot_content_kind_rejects_other_values() -> None:
    manifest = minimal_manifest()
    manifest["content"]["kind"] = "ROOT"
    assert (
        "$.content.kind",
        "'ROOT' is not one of ['Root', 'root', 'Derivative', 'derivative']",
    ) in located_messages(manifest)


def test_sql_transform_needs_exactly_one_of_query_and_queries() -> None:
    transform = validator("fragments/Transform")
    both = {**SQL, "queries": [{"query": "SELECT 1"}]}
    neither = {"kind": "Sql", "engine": "spark"}
    assert transform.is_valid(SQL) is True
    assert transform.is_valid(both) is False
    assert transform.is_valid(neither) is False


def test_transform_input_requires_dataset_ref_and_not_alias() -> None:
    transform_input = validator("TransformInput")
    assert transform_input.is_valid({"datasetRef": "org.example.raw"}) is True
    assert [e.message for e in transform_input.iter_errors({"alias": "raw"})] == [
        "'datasetRef' is a required property"
    ]


def test_block_system_time_must_be_an_rfc3339_date_time() -> None:
    block = copy.deepcopy(BLOCKS[0]["block"])
    block["systemTime"] = "2050-13-01T12:00:00Z"
    errors = list(validator("MetadataBlock").iter_errors(block))
    assert [(e.json_path, e.message) for e in errors] == [
        ("$.systemTime", "'2050-13-01T12:00:00Z' is not a 'date-time'")
    ]


def test_block_sequence_number_must_be_a_non_negative_integer() -> None:
    block = copy.deepcopy(BLOCKS[0]["block"])
    block["sequenceNumber"] = -1
    errors = list(validator("MetadataBlock").iter_errors(block))
    assert [(e.json_path, e.message) for e in errors] == [
        ("$.sequenceNumber", "-1 is less than the minimum of 0")
    ]


def test_seed_dataset_id_must_be_a_did_odf() -> None:
    seed = {"kind": "Seed", "datasetId": "fed01816ef0", "datasetKind": "Root"}
    errors = list(validator("metadata-events/Seed").iter_errors(seed))
    assert [(e.json_path, e.validator) for e in errors] == [("$.datasetId", "pattern")]


def test_every_schema_file_is_a_valid_draft_2020_12_schema_with_an_id_matching_its_path() -> None:
    files = schema_files()
    assert len(files) == 45  # 5 top-level (plan, run-result), 14 metadata-events, 26 fragments
    for path in files:
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == SCHEMA_BASE_URI + path.relative_to(SCHEMA_DIR).as_posix()


def test_every_ref_in_every_schema_resolves_in_the_registry() -> None:
    reg = registry()
    for uri in reg:
        resolver = reg.resolver(base_uri=uri)
        for ref in find_refs(reg.contents(uri)):
            assert resolver.lookup(ref).contents, f"{uri}: {ref} resolved to an empty schema"


def test_every_schema_in_the_registry_has_an_example_and_accepts_it() -> None:
    reg = registry()
    relative_paths = {str(uri).removeprefix(SCHEMA_BASE_URI) for uri in reg}
    assert relative_paths == set(EXAMPLES)
    for relative_path, examples in EXAMPLES.items():
        check = validator(relative_path)
        for example in examples:
            assert list(check.iter_errors(example)) == [], (relative_path, example)


def test_every_object_schema_rejects_unknown_keys() -> None:
    def objects(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for item in node:
                yield from objects(item)

    reg = registry()
    for uri in reg:
        for schema in objects(reg.contents(uri)):
            if "oneOf" in schema and "additionalProperties" not in schema:
                continue  # a union: each variant it points to closes itself
            assert schema["additionalProperties"] is False, (uri, schema.get("description"))


def test_validator_rejects_an_unknown_schema_name() -> None:
    with pytest.raises(KeyError):
        validator("NoSuchSchema")
