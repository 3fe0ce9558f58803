"""Ingest of root datasets: fetch a source, prepare the raw file, read, merge and commit."""
