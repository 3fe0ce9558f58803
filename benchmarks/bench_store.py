"""Reading many objects of an S3 data store: the reconciler's readers against one at a time.

Why: a store outside git is a network away. ``verify --integrity`` reads every object the
chains name, and ``sql``, a replay or a rebuilt checkpoint fetch every slice of a
history, so what they cost is mostly round trips. This starts moto's S3 server on
127.0.0.1 behind a TCP proxy that holds each request for ``--latency-ms`` (a bucket in
another building), writes ``--objects`` objects, then prints, per round:

- the integrity check's reading (``store_verify.intact_objects``: sizes from the
  listing, eight objects at a time) against the same work one object at a time through
  the same pyarrow client (its size, then its bytes through the hash), which is what the
  check did until session 16;
- fetching every object into the cache as a reader does
  (``DatasetLayout.data_files_to_read``) against ``DataStore.fetch`` one at a time;
- the driver's peak memory (``ru_maxrss``).

    python benchmarks/bench_store.py [--objects 200] [--size 100000] [--latency-ms 20]
                                     [--rounds 3]

Needs the dev dependencies (moto). Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyarrow import fs as pafs

from reconciler.odf.multiformat import Multihash
from reconciler.odf.repository import DatasetLayout
from reconciler.odf.store_fs import FileSystemStore
from reconciler.odf.store_verify import intact_objects

BUCKET = "bench-store"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def proxy(port: int, target: int, delay: float) -> None:
    """Forward 127.0.0.1:``port`` to ``target``, holding each chunk a client sends for
    ``delay`` seconds (the answers go back at once)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wait: float) -> None:
        try:
            while data := await reader.read(1 << 16):
                if wait:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, 0))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def _client(port: int) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        region="us-east-1",
        access_key="bench",
        secret_key="bench",
        allow_bucket_creation=True,
    )


def one_at_a_time(store: FileSystemStore, named: dict[str, int]) -> int:
    """The old check's reading: each object's size, then its bytes through the hash."""
    intact = 0
    for path, size in named.items():
        hash_ = path.partition("/")[2]
        if store.size(hash_, "data") != size:
            continue
        hasher = hashlib.sha3_256()
        with store.open(hash_, "data") as stream:
            while chunk := stream.read(1 << 20):
                hasher.update(chunk)
        intact += Multihash.from_digest(hasher.digest()) == hash_
    return intact


def measure(port: int, work: Path, named: dict[str, int]) -> str:
    """One round of both comparisons, each with a store of its own (a store keeps its
    listing) and an empty cache."""

    def store() -> FileSystemStore:
        return FileSystemStore(_client(port), f"{BUCKET}/odf", work / "cache", "")

    hashes = [path.partition("/")[2] for path in named]
    old_check, old_ok = _timed(lambda: one_at_a_time(store(), named))
    new_check, new_ok = _timed(lambda: len(intact_objects(store(), named)))
    shutil.rmtree(work / "cache", ignore_errors=True)
    fetching = store()
    old_fetch, _ = _timed(lambda: [fetching.fetch(h, "data") for h in hashes])
    shutil.rmtree(work / "cache", ignore_errors=True)
    layout = DatasetLayout(work / "dataset", store())
    new_fetch, _ = _timed(lambda: layout.data_files_to_read(hashes))
    shutil.rmtree(work / "cache", ignore_errors=True)
    return (
        f"verify's reading {new_check:.2f} s against {old_check:.2f} s one at a time "
        f"({old_check / new_check:.1f}x; {new_ok} and {old_ok} intact); fetching "
        f"{new_fetch:.2f} s against {old_fetch:.2f} s one at a time ({old_fetch / new_fetch:.1f}x)"
    )


def _timed(run: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    s3_port, proxy_port = _free_port(), _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    relay = subprocess.Popen(
        [sys.executable, __file__, "--proxy", str(proxy_port), str(s3_port), str(args.latency_ms)]
    )
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        _wait_for(s3_port)
        _wait_for(proxy_port)
        direct = _client(s3_port)
        direct.create_dir(BUCKET)
        named: dict[str, int] = {}
        for _ in range(args.objects):
            body = os.urandom(args.size)
            hash_ = str(Multihash.from_digest(hashlib.sha3_256(body).digest()))
            with direct.open_output_stream(f"{BUCKET}/odf/data/{hash_}") as out:
                out.write(body)
            named[f"data/{hash_}"] = args.size
        print(
            f"{args.objects} objects of {args.size:,} bytes in moto on 127.0.0.1, "
            f"{args.latency_ms:g} ms added to each request"
        )
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}: {measure(proxy_port, work, named)}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"driver peak memory (maxrss): {peak:.0f} MiB")
    finally:
        relay.terminate()
        server.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--proxy"]:
        proxy(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) / 1000)
    else:
        main()
