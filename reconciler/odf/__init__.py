"""The Open Data Fabric protocol core: models, canonical encoding, hashes and chains.

Pure Python by design: nothing here imports Spark or git, so planning, verification of
chain integrity and any other consumer of the protocol can run without a JVM.

The names below are loaded on first use (PEP 562), not when the package is: importing
one light submodule (``odf.timestamps``, ``odf.names``) must not load the codec, numpy
and every pydantic model, which is most of what a short command such as
``reconcile --help`` would otherwise spend its time on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .codec import BlockDecodeError, decode_block, encode_block
    from .hashing import block_hash, logical_hash, physical_hash
    from .models import DatasetKind, DatasetSnapshot, MetadataBlock
    from .multiformat import DatasetId, Multihash
    from .timestamps import Timestamp

_HOMES = {
    "BlockDecodeError": "codec",
    "decode_block": "codec",
    "encode_block": "codec",
    "block_hash": "hashing",
    "logical_hash": "hashing",
    "physical_hash": "hashing",
    "DatasetKind": "models",
    "DatasetSnapshot": "models",
    "MetadataBlock": "models",
    "DatasetId": "multiformat",
    "Multihash": "multiformat",
    "Timestamp": "timestamps",
}

__all__ = [
    "BlockDecodeError",
    "DatasetId",
    "DatasetKind",
    "DatasetSnapshot",
    "MetadataBlock",
    "Multihash",
    "Timestamp",
    "block_hash",
    "decode_block",
    "encode_block",
    "logical_hash",
    "physical_hash",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
