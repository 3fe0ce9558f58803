"""Multihashes and ODF dataset identifiers as validated string types.

ODF writes hashes and ids as multiformats: binary in FlatBuffers, multibase text
(base16, prefix ``f``) everywhere else. Keeping the canonical text as a ``str``
subclass lets models, YAML, JSON and file names share one value, while the codec
asks for the binary form. Parsing goes through the ``multiformats`` package, which
also learns the two ODF codes it does not ship with.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from multiformats import multibase, multicodec, multihash, varint
from multiformats.multicodec import Multicodec
from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

SHA3_256 = 0x16
ARROW0_SHA3_256 = 0x300016
ODF_METADATA_BLOCK = 0x400000
ED25519_PUB = 0xED

for _codec in (
    Multicodec("arrow0-sha3-256", "multihash", ARROW0_SHA3_256, "draft", "ODF logical hash"),
    Multicodec("odf-metadata-block", "ipld", ODF_METADATA_BLOCK, "draft", "ODF metadata block"),
):
    if not multicodec.exists(code=_codec.code):
        multicodec.register(_codec)

_SHA3_PREFIX = varint.encode(SHA3_256) + varint.encode(32)
_ARROW0_PREFIX = varint.encode(ARROW0_SHA3_256) + varint.encode(32)
_ED25519_PREFIX = varint.encode(ED25519_PUB)
# Every hash ODF writes has one of these prefixes; checking them directly skips the
# generic (and, with its runtime type checks, slow) multiformats parser on hot paths.
_KNOWN_PREFIXES = ((_SHA3_PREFIX, 34), (_ARROW0_PREFIX, 37))


def _decode_multibase(text: str, what: str) -> bytes:
    if text.startswith("f"):  # the canonical form: skip the generic decoder
        try:
            return bytes.fromhex(text[1:])
        except ValueError:
            raise ValueError(f"invalid base16 {what}: {text!r}") from None
    try:
        return bytes(multibase.decode(text))
    except Exception as e:  # multibase raises several unrelated error types
        raise ValueError(f"invalid multibase {what} {text!r}: {e}") from None


class Multihash(str):
    """A multihash in canonical multibase base16 form (``f1620…`` for SHA3-256)."""

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> Multihash:
        return cls.from_bytes(_decode_multibase(text, "multihash"))

    @classmethod
    def from_bytes(cls, data: bytes) -> Multihash:
        """Validate a binary multihash (known code, declared length) and wrap it."""
        for prefix, size in _KNOWN_PREFIXES:
            if len(data) == size and data.startswith(prefix):
                return str.__new__(cls, "f" + data.hex())
        try:
            _, digest = multihash.unwrap_raw(data)
        except Exception as e:
            raise ValueError(f"invalid multihash {data.hex()}: {e}") from None
        if len(bytes(digest)) == 0:
            raise ValueError(f"multihash {data.hex()} has an empty digest")
        return str.__new__(cls, "f" + data.hex())

    @classmethod
    def from_digest(cls, digest: bytes, code: int = SHA3_256) -> Multihash:
        prefix = (
            _SHA3_PREFIX if code == SHA3_256 else varint.encode(code) + varint.encode(len(digest))
        )
        return str.__new__(cls, "f" + (prefix + digest).hex())

    @classmethod
    def sha3_256(cls, data: bytes) -> Multihash:
        """The ODF content hash of some bytes (blocks, data and checkpoint files)."""
        return cls.from_digest(hashlib.sha3_256(data).digest())

    def to_bytes(self) -> bytes:
        return bytes.fromhex(self[1:])

    @property
    def code(self) -> int:
        return int(multihash.unwrap_raw(self.to_bytes())[0])

    @property
    def digest(self) -> bytes:
        return bytes(multihash.unwrap_raw(self.to_bytes())[1])

    def short(self) -> str:
        """The last eight hex digits, as people quote a block in messages."""
        return self[-8:]

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return _string_type_schema(cls)


class DatasetId(str):
    """An ODF dataset identity: ``did:odf:`` + base16 multibase of an ed25519 public key."""

    __slots__ = ()
    PREFIX = "did:odf:"

    @classmethod
    def parse(cls, text: str) -> DatasetId:
        """Accept ``did:odf:`` in any multibase encoding; the result is always base16."""
        if not text.startswith(cls.PREFIX):
            raise ValueError(f"expected a dataset id starting with 'did:odf:', got {text!r}")
        return cls.from_bytes(_decode_multibase(text[len(cls.PREFIX) :], "dataset id"))

    @classmethod
    def from_bytes(cls, data: bytes) -> DatasetId:
        if len(data) == 34 and data.startswith(_ED25519_PREFIX):
            return str.__new__(cls, cls.PREFIX + "f" + data.hex())
        code, size = varint.decode_raw(data)[:2]
        if code != ED25519_PUB:
            raise ValueError(
                f"dataset id must hold an ed25519 public key (0xed), got code {code:#x}"
            )
        if len(data) - size != 32:
            raise ValueError(f"dataset id key must be 32 bytes, got {len(data) - size}")
        return str.__new__(cls, cls.PREFIX + "f" + data.hex())

    @classmethod
    def from_public_key(cls, key: bytes) -> DatasetId:
        return cls.from_bytes(_ED25519_PREFIX + key)

    @classmethod
    def generate(cls) -> tuple[DatasetId, Ed25519PrivateKey]:
        """A fresh identity; the private key is returned so a caller may keep it."""
        private = Ed25519PrivateKey.generate()
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls.from_public_key(public), private

    @classmethod
    def from_did_key(cls, text: str) -> DatasetId:
        """Convert ``did:key:z…`` (base58btc) into ``did:odf``; the key bytes are the same."""
        if not text.startswith("did:key:"):
            raise ValueError(f"expected 'did:key:…', got {text!r}")
        return cls.from_bytes(_decode_multibase(text[len("did:key:") :], "did:key"))

    def to_bytes(self) -> bytes:
        return bytes.fromhex(self[len(self.PREFIX) + 1 :])

    @property
    def public_key(self) -> bytes:
        return self.to_bytes()[len(_ED25519_PREFIX) :]

    def to_did_key(self) -> str:
        encoded: str = multibase.encode(self.to_bytes(), "base58btc")
        return "did:key:" + encoded

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return _string_type_schema(cls)


def _string_type_schema(cls: type[Multihash] | type[DatasetId]) -> core_schema.CoreSchema:
    def coerce(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        raise ValueError(f"expected a string, got {type(value).__name__}")

    return core_schema.no_info_plain_validator_function(
        coerce, serialization=core_schema.plain_serializer_function_ser_schema(str)
    )
