"""The ODF JSON/YAML form of the models: tags, enums, timestamps, hashes, unknown keys."""

from __future__ import annotations

import pydantic
import pytest

from reconciler.odf import Timestamp, models

POLLING = {
    "fetch": {"kind": "Url", "url": "https://example.org/data.csv"},
    "read": {"kind": "Csv", "header": True},
    "merge": {"kind": "Append"},
}


@pytest.mark.parametrize("spelling", ["Snapshot", "snapshot", "SNAPSHOT"])
def test_union_tags_accept_pascal_camel_and_lower_case(spelling: str) -> None:
    event = models.SetPollingSource.model_validate(
        {**POLLING, "merge": {"kind": spelling, "primaryKey": ["id"]}}
    )
    assert event.merge == models.MergeStrategySnapshot(primary_key=["id"])
    assert event.model_dump(mode="json", by_alias=True, exclude_none=True)["merge"] == {
        "kind": "Snapshot",
        "primaryKey": ["id"],
    }


def test_event_tags_accept_camel_case() -> None:
    block = models.MetadataBlock.model_validate(
        {
            "systemTime": "2020-01-01T00:00:00Z",
            "sequenceNumber": 1,
            "event": {"kind": "setPollingSource", **POLLING},
        }
    )
    assert isinstance(block.event, models.SetPollingSource)


def test_enums_are_read_by_name_in_any_case_and_written_in_pascal_case() -> None:
    step = models.PrepStepDecompress.model_validate({"format": "zip", "subPath": "a.csv"})
    assert step.format is models.CompressionFormat.ZIP
    assert step.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "kind": "Decompress",
        "format": "Zip",
        "subPath": "a.csv",
    }
    assert models.DatasetKind("derivative") is models.DatasetKind.DERIVATIVE


def test_unknown_keys_are_rejected() -> None:
    with pytest.raises(pydantic.ValidationError, match="extra_forbidden"):
        models.SetInfo.model_validate({"description": "x", "colour": "red"})


def test_a_merge_strategy_of_a_later_spec_is_named_as_unsupported() -> None:
    with pytest.raises(
        pydantic.ValidationError,
        match=r"MergeStrategy::ChangelogStream \(ODF 0.37\) is not supported yet",
    ):
        models.SetPollingSource.model_validate({**POLLING, "merge": {"kind": "ChangelogStream"}})


def test_timestamps_keep_nanoseconds_and_normalise_offsets_to_utc() -> None:
    ts = Timestamp.parse("2020-01-01T13:30:00.123456789+01:30")
    assert (ts.isoformat(), ts.nanos) == ("2020-01-01T12:00:00.123456789Z", 123_456_789)
    assert Timestamp.parse("2020-01-01T12:00:00.5Z").isoformat() == "2020-01-01T12:00:00.500Z"
    assert (
        Timestamp.parse("2020-01-01T12:00:00.000120Z").isoformat() == "2020-01-01T12:00:00.000120Z"
    )
    assert Timestamp.from_fields(*ts.to_fields()) == ts
    assert ts.to_fields() == (2020, 1, 43200, 123_456_789)


@pytest.mark.parametrize(
    "text",
    [
        "2020-01-01",
        "2020-01-01T12:00:00",
        "2020-13-01T00:00:00Z",
        "2020-01-01T12:00:00.1234567891Z",
    ],
)
def test_malformed_timestamps_are_rejected_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"2020-01-01T12:00:00Z|invalid timestamp"):
        Timestamp.parse(text)


def test_hashes_in_any_multibase_are_stored_in_base16() -> None:
    b16 = "f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272"
    b58 = models.Multihash.parse(b16)
    from multiformats import multibase

    z = multibase.encode(b58.to_bytes(), "base58btc")
    assert models.Checkpoint.model_validate({"physicalHash": z, "size": 1}).physical_hash == b16


def test_a_hash_with_an_unknown_multihash_code_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError, match="invalid multihash"):
        models.Checkpoint.model_validate({"physicalHash": "f" + "ff7f20" + "00" * 32, "size": 1})


def test_set_data_schema_is_base64_of_the_raw_bytes_in_json() -> None:
    event = models.SetDataSchema.model_validate({"schema": "AAECAw=="})
    assert event.schema_ == b"\x00\x01\x02\x03"
    assert event.model_dump(mode="json", by_alias=True) == {
        "kind": "SetDataSchema",
        "schema": "AAECAw==",
    }


def test_transform_query_normalizes_into_a_single_step_of_queries() -> None:
    sql = models.TransformSql(engine="spark", query="SELECT 1")
    assert sql.normalized() == models.TransformSql(
        engine="spark", queries=[models.SqlQueryStep(query="SELECT 1")]
    )


def test_the_structured_read_schema_of_a_later_spec_is_named_as_unsupported() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"structured read schema of ODF 0.38"):
        models.SetPollingSource.model_validate(
            {
                **POLLING,
                "read": {"kind": "Csv", "schema": {"fields": [{"name": "a", "type": "string"}]}},
            }
        )
