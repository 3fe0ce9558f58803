"""did:odf identities: the reference vectors, generation and did:key conversion."""

from __future__ import annotations

import pytest
from conftest import load_vectors

from reconciler.odf import DatasetId

DID = {v["name"]: v for v in load_vectors("did-vectors.json")["vectors"]}


def test_a_public_key_becomes_the_reference_did_and_bytes() -> None:
    v = DID["seeded_did_multihash"]
    did = DatasetId.from_public_key(bytes.fromhex(v["input"]["public_key_hex"]))
    assert did == v["expected"]["did"]
    assert did.to_bytes().hex() == v["expected"]["did_bytes_hex"]
    assert did.public_key.hex() == v["expected"]["public_key_hex"]


def test_did_odf_converts_to_did_key_and_back() -> None:
    v = DID["did_odf_base16_to_did_key_base58"]
    did = DatasetId.parse(v["input"]["did"])
    assert did.to_did_key() == v["expected"]["did_key"]
    assert DatasetId.from_did_key(v["expected"]["did_key"]) == v["expected"]["roundtrip_did_odf"]


def test_did_odf_in_base58_parses_and_prints_in_base16() -> None:
    v = DID["did_odf_accepts_base58_multibase"]
    did = DatasetId.parse(v["input"]["did"])
    assert did == v["expected"]["canonical"].split(" ")[0]


def test_generated_ids_are_distinct_ed25519_keys_in_base16() -> None:
    (a, key), (b, _) = DatasetId.generate(), DatasetId.generate()
    assert a != b
    assert a.startswith("did:odf:fed01") and len(a) == len("did:odf:f") + 68
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    assert key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) == a.public_key


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "starting with 'did:odf:'"),
        ("did:odf:f1220" + "00" * 32, "ed25519 public key"),
        ("did:odf:fed01" + "00" * 31, "must be 32 bytes"),
        ("did:odf:fxyz", "invalid base16"),
    ],
)
def test_malformed_dataset_ids_are_rejected_with_the_reason(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        DatasetId.parse(text)
