"""The Open Data Fabric protocol core: models, canonical encoding, hashes and chains.

Pure Python by design: nothing here imports Spark or git, so planning, verification of
chain integrity and any other consumer of the protocol can run without a JVM.
"""

from .codec import BlockDecodeError, decode_block, encode_block
from .hashing import block_hash, logical_hash, physical_hash
from .models import DatasetKind, DatasetSnapshot, MetadataBlock
from .multiformat import DatasetId, Multihash
from .timestamps import Timestamp

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
