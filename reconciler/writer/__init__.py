"""The slice writer ingest and transforms share, below both.

A Spark task writes each slice (and a Snapshot's checkpoint) as one Parquet file and
hashes it as it writes (``slice_files``); a staged iteration is then committed to its
chain, files before blocks, all or nothing (``commit``).
"""
