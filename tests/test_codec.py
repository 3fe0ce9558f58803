"""Canonical FlatBuffers encoding: golden vectors, both manifest versions, round trips."""

from __future__ import annotations

import hashlib

import pytest
from conftest import load_vectors
from hypothesis import HealthCheck, given, settings
from strategies import blocks_with

from reconciler.odf import (
    BlockDecodeError,
    MetadataBlock,
    block_hash,
    decode_block,
    encode_block,
    models,
)
from reconciler.odf.codec import manifest_version

BLOCK_VECTORS = load_vectors("block-vectors.json")


@pytest.mark.parametrize("vector", BLOCK_VECTORS, ids=[v["name"] for v in BLOCK_VECTORS])
def test_encoding_a_vector_block_reproduces_the_reference_bytes_and_hash(vector: dict) -> None:
    block = MetadataBlock.model_validate(vector["block"])
    data = encode_block(block, version=vector["manifestVersion"])
    assert data.hex() == vector["expectedManifestHex"]
    assert block_hash(data) == vector["expectedBlockHash"]


@pytest.mark.parametrize("vector", BLOCK_VECTORS, ids=[v["name"] for v in BLOCK_VECTORS])
def test_decoding_reference_bytes_gives_the_vector_block_back(vector: dict) -> None:
    block = decode_block(bytes.fromhex(vector["expectedManifestHex"]))
    assert block.model_dump(mode="json", by_alias=True, exclude_none=True) == vector["block"]


def test_block_hash_is_sha3_256_of_the_whole_manifest_as_base16_multihash() -> None:
    data = bytes.fromhex(BLOCK_VECTORS[0]["expectedManifestHex"])
    assert block_hash(data) == "f1620" + hashlib.sha3_256(data).hexdigest()


def test_version_3_aligns_timestamps_and_so_hashes_differently_from_version_2() -> None:
    block = MetadataBlock.model_validate(
        {
            "systemTime": "2020-01-01T12:00:00Z",
            "sequenceNumber": 117,
            "event": {"kind": "AddData"},
            "prevBlockHash": "f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272",
        }
    )
    v2, v3 = encode_block(block, version=2), encode_block(block, version=3)
    assert block_hash(v2).startswith("f162073e2977b")
    assert block_hash(v3).startswith("f1620a9387470")
    assert manifest_version(v2) == 2 and manifest_version(v3) == 3
    assert decode_block(v2) == decode_block(v3) == block


def test_encoding_rejects_an_unknown_manifest_version() -> None:
    block = MetadataBlock.model_validate(BLOCK_VECTORS[0]["block"])
    with pytest.raises(ValueError, match="cannot write manifest version 4; supported: 2, 3"):
        encode_block(block, version=4)


def _patched_manifest(version: int | None = None, kind: int | None = None) -> bytes:
    # Manifest fields are fixed-width scalars, so patching them in place keeps the buffer valid.
    data = bytearray(bytes.fromhex(BLOCK_VECTORS[0]["expectedManifestHex"]))
    if version is not None:
        at = data.index((2).to_bytes(4, "little"), 16)
        data[at : at + 4] = version.to_bytes(4, "little")
    if kind is not None:
        at = data.index((0x400000).to_bytes(8, "little"))
        data[at : at + 8] = kind.to_bytes(8, "little")
    return bytes(data)


@pytest.mark.parametrize("version", [1, 4])
def test_decoding_rejects_unsupported_manifest_versions(version: int) -> None:
    with pytest.raises(
        BlockDecodeError, match=f"unsupported metadata block manifest version {version}"
    ):
        decode_block(_patched_manifest(version=version))


def test_decoding_rejects_a_manifest_of_another_kind() -> None:
    with pytest.raises(BlockDecodeError, match="manifest kind 0x400001 is not odf-metadata-block"):
        decode_block(_patched_manifest(kind=0x400001))


def test_decoding_garbage_raises_a_decode_error_not_a_crash() -> None:
    with pytest.raises(BlockDecodeError):
        decode_block(b"\x01\x02\x03")


def test_nanoseconds_of_system_time_are_kept_and_hashed() -> None:
    base = {"sequenceNumber": 0, "event": {"kind": "SetInfo", "description": "x"}}
    exact = MetadataBlock.model_validate({**base, "systemTime": "2050-01-01T12:00:00.123456789Z"})
    micro = MetadataBlock.model_validate({**base, "systemTime": "2050-01-01T12:00:00.123456Z"})
    assert decode_block(encode_block(exact)).system_time.nanos == 123_456_789
    assert block_hash(encode_block(exact)) != block_hash(encode_block(micro))


@pytest.mark.parametrize("event", models.EVENT_TYPES, ids=lambda e: e.__name__)
def test_every_event_type_survives_encode_then_decode(event: type[models.OdfModel]) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(blocks_with(event))
    def roundtrip(block: MetadataBlock) -> None:
        for version in (2, 3):
            assert decode_block(encode_block(block, version)) == block

    roundtrip()


@pytest.mark.parametrize("event", models.EVENT_TYPES, ids=lambda e: e.__name__)
def test_every_event_type_survives_model_to_json_to_model(event: type[models.OdfModel]) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(blocks_with(event))
    def roundtrip(block: MetadataBlock) -> None:
        as_json = block.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert MetadataBlock.model_validate(as_json) == block
        assert MetadataBlock.model_validate_json(block.model_dump_json(by_alias=True)) == block

    roundtrip()
