"""Data and checkpoint files in a store beside git: the dataset folder, another folder, S3.

The S3 store is driven against a real S3-compatible server (moto's standalone server, a
separate process on 127.0.0.1, with authentication on) through the production client,
pyarrow's ``S3FileSystem``, from the CLI. The server's request log tells what a run
fetched.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
import pytest
from gitops_repo import GitOpsRepo, manifest, root_events
from pyarrow import fs as pafs
from pyspark.sql import SparkSession
from s3_server import BUCKET, S3Server, iam_user, isolate_aws
from store_watch import Watched, watched_init
from transform_repo import VOCAB, derivative
from typer.testing import CliRunner, Result

from reconciler.cli import app
from reconciler.config import ConfigError, RepoConfig
from reconciler.odf import models
from reconciler.odf.hashing import physical_hash
from reconciler.odf.repository import Dataset
from reconciler.odf.store import StoreError
from reconciler.odf.store_fs import PROBE, FileSystemStore

ROOT = "org.example.readings"
DERIVED = "org.example.readings.doubled"
CSV1 = "day,id,qty\n2026-01-01,a,1\n2026-01-01,b,2\n"
CSV2 = "day,id,qty\n2026-01-02,a,3\n"


def write_settings(root: Path, data_store: str | None, endpoint: str | None) -> None:
    """``pyproject.toml`` storing data in ``data_store`` (None: the dataset folders),
    with the S3 server at ``endpoint`` when given."""
    settings = "[tool.reconciler]\n"
    if data_store is not None:
        settings += f'data_store = "{data_store}"\n'
        if not data_store.startswith("s3://"):  # a folder store must exist
            (root / data_store).mkdir(parents=True, exist_ok=True)
    if endpoint is not None:
        settings += f'\n[tool.reconciler.s3]\nendpoint_url = "{endpoint}"\nregion = "us-east-1"\n'
    (root / "pyproject.toml").write_text(settings)


def make_repo(root: Path, data_store: str | None, endpoint: str | None = None) -> GitOpsRepo:
    """A root (an Append of ``sources/*.csv``) and a derivative of it, storing data in
    ``data_store`` (None: the default, the dataset folders)."""
    repo = GitOpsRepo.create(root)
    write_settings(root, data_store, endpoint)
    events = root_events(schema="[day DATE, id STRING, qty BIGINT]", extra=VOCAB)
    repo.write(ROOT, manifest(ROOT, "Root", events))
    derivative(repo, DERIVED, [ROOT], f"SELECT day, id, qty * 2 AS qty2 FROM `{ROOT}`")
    (root / "sources").mkdir()
    (root / "sources" / "1.csv").write_text(CSV1)
    return repo


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-C", str(root), *args])


def apply(root: Path, when: str) -> Result:
    result = cli(root, "apply", "--yes", "--system-time", when)
    assert result.exit_code == 0, result.output
    return result


def stored_files(root: Path) -> list[str]:
    """Every data and checkpoint file inside the dataset folders."""
    odf = root / "odf"
    return sorted(
        str(p.relative_to(odf))
        for p in odf.glob("*/*/*")
        if p.is_file() and p.parent.name in ("data", "checkpoints")
    )


def named_objects(dataset: Dataset) -> list[tuple[str, str]]:
    """(kind, physical hash) of every data and checkpoint file the chain names."""
    named = []
    for _, block in dataset.iter_blocks():
        event = block.event
        if isinstance(event, models.AddData | models.ExecuteTransform):
            if event.new_data is not None:
                named.append(("data", event.new_data.physical_hash))
            if event.new_checkpoint is not None:
                named.append(("checkpoint", event.new_checkpoint.physical_hash))
    return named


def logical_hashes(root: Path, names: Sequence[str] = (ROOT, DERIVED)) -> dict[str, list[str]]:
    repo = RepoConfig.load(root).repository()
    found: dict[str, list[str]] = {}
    for name in names:
        for _, block in repo.dataset(name).iter_blocks():
            event = block.event
            if isinstance(event, models.AddData | models.ExecuteTransform) and event.new_data:
                found.setdefault(name, []).append(event.new_data.logical_hash)
    return found


@dataclass(frozen=True)
class Built:
    root: Path
    prefix: str
    first: dict[str, list[tuple[str, str]]]
    """The objects each dataset's chain named after the first apply."""
    second_requests: list[str]
    """What the server was asked during the second apply (with an empty cache)."""
    idle_requests: list[str]
    """What the server was asked during a third, with an empty cache and nothing new."""


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, spark: SparkSession, s3_server: S3Server
) -> Iterator[Built]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
        mp.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
        isolate_aws(mp)
        root = tmp_path_factory.mktemp("s3store") / "repo"
        prefix = f"{BUCKET}/built"
        make_repo(root, f"s3://{prefix}", s3_server.endpoint)
        apply(root, "2026-01-01T06:00:00Z")
        repo = RepoConfig.load(root).repository()
        first = {n: named_objects(repo.dataset(n)) for n in (ROOT, DERIVED)}
        # A fresh checkout: nothing cached. The next run fetches only what it reads.
        shutil.rmtree(root / ".reconcile-cache")
        (root / "sources" / "2.csv").write_text(CSV2)
        before = len(s3_server.requests())
        apply(root, "2026-01-02T06:00:00Z")
        second = s3_server.requests()[before:]
        shutil.rmtree(root / ".reconcile-cache")  # the next scheduled job's fresh clone
        before = len(s3_server.requests())
        apply(root, "2026-01-03T06:00:00Z")
        idle = s3_server.requests()[before:]
        yield Built(root, prefix, first, second, idle)


def test_a_run_with_nothing_new_reads_no_object(built: Built) -> None:
    """A fresh clone's run with nothing to do downloaded each derivative's checkpoint to
    compare its inputs' watermarks, though no input had a new block: the hourly job's
    cost grew with the number of derivatives, not with the change."""
    objects = [r for r in built.idle_requests if r.startswith(f"GET /{built.prefix}/")]
    assert objects == []
    # Its requests: the store's check (its temporary's upload, size and removal) and the
    # sweep's listings; no object of a chain is read or written.
    assert not [r for r in built.idle_requests if "/data/" in r or "/checkpoints/" in r]


def test_data_goes_to_the_store_and_only_blocks_and_refs_stay_in_git(
    built: Built, s3_server: S3Server
) -> None:
    assert stored_files(built.root) == []
    assert not list((built.root / "odf").glob("*/data/*"))
    s3 = s3_server.filesystem()
    repo = RepoConfig.load(built.root).repository()
    for name in (ROOT, DERIVED):
        objects = named_objects(repo.dataset(name))
        assert objects, name
        for kind, hash_ in objects:
            folder = "data" if kind == "data" else "checkpoints"
            info = s3.get_file_info(f"{built.prefix}/{folder}/{hash_}")
            assert info.type == pafs.FileType.File, (name, kind, hash_)
    text = "".join(
        p.read_text(errors="replace")
        for p in (built.root / "odf").rglob("*")
        if p.is_file() and "blocks" not in p.parts
    )
    assert s3_server.secret not in text


def test_a_run_fetches_only_what_it_reads(built: Built) -> None:
    gets = [r.split(" ", 1)[1] for r in built.second_requests if r.startswith("GET ")]
    old_data = [h for name in (ROOT, DERIVED) for kind, h in built.first[name] if kind == "data"]
    assert old_data
    for hash_ in old_data:
        assert not any(hash_ in path for path in gets), (hash_, gets)
    # Object reads (listings, ``/bucket?prefix=…``, are how sizes are looked up): only
    # the derivative's checkpoint, which holds its inputs' watermarks; the new root
    # slice it reads was written by the same run.
    fetched = [p for p in gets if p.startswith(f"/{built.prefix}/")]
    checkpoints = [h for kind, h in built.first[DERIVED] if kind == "checkpoint"]
    assert len(checkpoints) == 1
    assert fetched == [f"/{built.prefix}/checkpoints/{checkpoints[0]}"]
    # Nothing is uploaded twice: every PUT is of a new object, but for the check's empty
    # temporary (``store_fs._probe``: a multipart upload of one part), which is removed.
    requests = [r.split(" ", 1) for r in built.second_requests]
    puts = [path.split("?")[0] for verb, path in requests if verb == "PUT"]
    probes = {p for p in puts if p.startswith(f"/{built.prefix}/.pending-")}
    assert probes == {f"/{built.prefix}/{PROBE}"}
    assert len(puts) == len(set(puts))
    assert [path for verb, path in requests if verb == "DELETE"] == [*probes]
    assert not any(h in p for h in old_data for p in puts)


def test_verify_checks_the_stores_objects_and_replays_from_them(
    built: Built, s3_server: S3Server
) -> None:
    shutil.rmtree(built.root / ".reconcile-cache", ignore_errors=True)
    before = len(s3_server.requests())
    integrity = cli(built.root, "verify", "--integrity")
    assert integrity.exit_code == 0, integrity.output
    # One listing per kind of object for the sizes, then each object read once (pyarrow
    # asks for its size again as it opens it), by several threads at once.
    repo = RepoConfig.load(built.root).repository()
    named = {(k, h) for n in (ROOT, DERIVED) for k, h in named_objects(repo.dataset(n))}
    keys = [f"/{built.prefix}/{'data' if k == 'data' else 'checkpoints'}/{h}" for k, h in named]
    listing = f"GET /{BUCKET}?delimiter=/&list-type=2&max-keys=1000&prefix=built"
    assert sorted(s3_server.requests()[before:]) == sorted(
        [f"{listing}/data/", f"{listing}/checkpoints/"]
        + [f"{verb} {key}" for key in keys for verb in ("HEAD", "GET")]
    )
    assert len(keys) == 6
    # A replay keeps what the check downloads, and reads it from the cache: each object
    # is still read once.
    shutil.rmtree(built.root / ".reconcile-cache", ignore_errors=True)
    before = len(s3_server.requests())
    replay = cli(built.root, "verify")
    assert replay.exit_code == 0, replay.output
    assert "2 transforms replayed" in replay.output
    assert sorted(s3_server.requests()[before:]) == sorted(
        [f"{listing}/data/", f"{listing}/checkpoints/"]
        + [f"{verb} {key}" for key in keys for verb in ("HEAD", "GET")]
    )


def test_sql_reads_the_data_from_the_store(built: Built, s3_server: S3Server) -> None:
    """Only the datasets the query names: the root's slices are not fetched."""
    shutil.rmtree(built.root / ".reconcile-cache", ignore_errors=True)
    before = len(s3_server.requests())
    query = f"SELECT id, qty2 FROM `{DERIVED}` ORDER BY offset"
    result = cli(built.root, "sql", query, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["id,qty2", "a,2", "b,4", "a,6"]
    repo = RepoConfig.load(built.root).repository()
    slices = {
        n: [h for k, h in named_objects(repo.dataset(n)) if k == "data"] for n in (ROOT, DERIVED)
    }
    read = [r.split(" ", 1)[1] for r in s3_server.requests()[before:] if r.startswith("GET ")]
    assert sorted(read) == sorted(f"/{built.prefix}/data/{h}" for h in slices[DERIVED])
    assert len(slices[DERIVED]) == 2 and len(slices[ROOT]) == 2


def test_a_missing_or_changed_object_is_caught_by_verify(
    built: Built, s3_server: S3Server, credentials: S3Server
) -> None:
    s3 = s3_server.filesystem()
    hash_ = next(h for kind, h in built.first[ROOT] if kind == "data")
    key = f"{built.prefix}/data/{hash_}"
    with s3.open_input_stream(key) as f:
        original = f.read()
    try:
        s3.delete_file(key)
        missing = cli(built.root, "verify", "--integrity", ROOT)
        assert missing.exit_code == 1, missing.output
        assert f"data file {hash_} is missing from the data store" in missing.output
        changed = bytearray(original)
        changed[len(changed) // 2] ^= 0xFF
        with s3.open_output_stream(key) as f:
            f.write(bytes(changed))
        corrupted = cli(built.root, "verify", "--integrity", ROOT)
        assert corrupted.exit_code == 1, corrupted.output
        assert f"do not match physical hash {hash_}" in corrupted.output
    finally:
        with s3.open_output_stream(key) as f:
            f.write(original)
    assert cli(built.root, "verify", "--integrity", ROOT).exit_code == 0


def test_verify_tells_of_objects_no_chain_names_and_removes_none(
    built: Built, s3_server: S3Server, credentials: S3Server
) -> None:
    s3 = s3_server.filesystem()
    stray = f"{built.prefix}/data/f1620{'ab' * 32}"  # named like an object, by no block
    with s3.open_output_stream(stray) as f:
        f.write(b"left by a killed run")
    try:
        for extra in ([], ["--no-download"]):
            told = cli(built.root, "verify", "--integrity", *extra)
            assert told.exit_code == 0, told.output
            assert told.output.splitlines()[-2] == (
                f"data store s3://{built.prefix}: 1 object (20 bytes) that no chain names,"
                " never read: left by a run killed after storing them, a run whose push lost"
                " a race to another's, or a deleted or recreated dataset (`reconcile gc` lists"
                " those no ref of the repository names either, and says which only a ref"
                " keeps)"
            )
        # One dataset checked says nothing of the store: the others' chains were not read.
        one = cli(built.root, "verify", "--integrity", ROOT)
        assert (one.exit_code, "no chain names" in one.output) == (0, False)
        assert s3.get_file_info(stray).type == pafs.FileType.File  # told, not removed
    finally:
        s3.delete_file(stray)
    clean = cli(built.root, "verify", "--integrity")
    assert (clean.exit_code, "no chain names" in clean.output) == (0, False)


@pytest.mark.parametrize("secret", ["wrong", None], ids=["wrong", "missing"])
def test_bad_credentials_are_one_error_and_nothing_is_written(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, secret: str | None
) -> None:
    isolate_aws(monkeypatch)
    if secret is None:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    else:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    root = tmp_path / "repo"
    make_repo(root, f"s3://{BUCKET}/refused", s3_server.endpoint)
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: data store s3://{BUCKET}/refused cannot be reached")
    assert "credentials come from the environment" in errors[0]
    assert "Traceback" not in result.output
    assert s3_server.secret not in result.output
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))


def test_a_server_that_keeps_unsigned_framing_is_refused_before_any_work(
    tmp_path: Path, open_s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No credentials, and a server that takes unsigned writes: it keeps the client's
    chunk framing as the object's bytes. The store's check wrote an empty object, which
    has no framing, so the run did its Spark work and failed at its first upload; a
    check with a body is refused at once, its temporary removed."""
    isolate_aws(monkeypatch)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    root = tmp_path / "repo"
    make_repo(root, f"s3://{BUCKET}/unsigned", open_s3_server)
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 1, result.output
    said = result.output.splitlines()
    assert re.fullmatch(r"nothing applied in [0-9.]+ s", said[-1])
    assert said[-2:-1] == [
        f"error: data store s3://{BUCKET}/unsigned: a test object of 37 bytes was stored as"
        " 87 bytes, so no upload of this run could be trusted and nothing was run; check"
        " the store's endpoint and credentials (some servers keep an unsigned upload's"
        " framing)",
    ]
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))
    server = pafs.S3FileSystem(
        endpoint_override=open_s3_server.removeprefix("http://"), scheme="http", anonymous=True
    )
    assert server.get_file_info(pafs.FileSelector(f"{BUCKET}/unsigned", allow_not_found=True)) == []


def test_a_missing_store_folder_is_one_error_and_is_not_made(tmp_path: Path) -> None:
    """An unmounted share looks like a missing folder: made, it would take the new
    objects while the chains' old ones stay where the share is."""
    root = tmp_path / "repo"
    make_repo(root, "../share/odf-data")
    shutil.rmtree(tmp_path / "share")
    store = tmp_path / "share" / "odf-data"
    for args in (("apply", "--yes"), ("gc",)):
        result = cli(root, *args)
        assert result.exit_code == 1, result.output
        assert result.output.splitlines()[-2 if args[0] == "apply" else -1] == (
            f"error: data store {store} does not exist: create it (mkdir -p {store}), or"
            " mount the share it is on"
        )
    assert not (tmp_path / "share").exists()
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))


def test_a_store_folder_this_run_cannot_write_is_one_error_before_any_work(
    tmp_path: Path,
) -> None:
    """A read-only share stopped the run only at its first upload, after the Spark work.
    ``/sys`` is a folder no one may create a file in, root included (the tests may run as
    root, for whom permission bits are no bar)."""
    root = tmp_path / "repo"
    make_repo(root, "/sys")
    result = cli(root, "apply", "--yes")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-2].startswith("error: data store /sys cannot be written (")
    assert result.output.splitlines()[-2].endswith(
        "): a run stores its data and checkpoint files there"
    )
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))


def test_a_missing_bucket_is_one_error_and_nothing_is_written(
    tmp_path: Path, credentials: S3Server
) -> None:
    root = tmp_path / "repo"
    make_repo(root, "s3://no-such-bucket/p", credentials.endpoint)
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 1, result.output
    error, last = result.output.splitlines()[-2:]
    assert error == "error: data store s3://no-such-bucket/p: bucket no-such-bucket does not exist"
    assert last.startswith("nothing applied in ")
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))


def test_a_store_that_cannot_be_reached_is_not_blamed_on_credentials(
    tmp_path: Path, credentials: S3Server
) -> None:
    """Nothing listens on the endpoint: the error says what the SDK says, without the
    credentials hint, which would send people to the wrong cause."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    root = tmp_path / "repo"
    make_repo(root, f"s3://{BUCKET}/unreached", closed)
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 1, result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: data store s3://{BUCKET}/unreached cannot be reached: ")
    assert "credentials" not in error
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))
    as_json = cli(root, "apply", "--format", "json", "--system-time", "2026-01-01T06:00:00Z")
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)

    def untimed(text: str) -> str:
        """The SDK says how long the refused connect took ("after 0 ms"), which differs
        between the two runs."""
        return re.sub(r"after \d+ ms", "after N ms", text)

    assert (untimed(document["error"]), document["datasets"]) == (
        untimed(error.removeprefix("error: ")),
        [],
    )


def test_an_endpoint_without_its_scheme_is_refused_in_the_settings(tmp_path: Path) -> None:
    """The SDK took a bare host for https, and a local server failed each run at its
    first request with "SSL connect error"."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.reconciler]\ndata_store = "s3://b/p"\n'
        '[tool.reconciler.s3]\nendpoint_url = "127.0.0.1:9000"\n'
    )
    with pytest.raises(ConfigError) as refused:
        RepoConfig.load(tmp_path)
    assert str(refused.value) == (
        "[tool.reconciler.s3] endpoint_url '127.0.0.1:9000' must start with http:// or"
        " https://, as in http://127.0.0.1:9000 or https://s3.example.org"
    )


@pytest.mark.parametrize("where", ["config", "credentials"])
def test_a_profile_no_aws_file_defines_is_one_error_naming_it(
    tmp_path: Path, credentials: S3Server, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """boto3 and the AWS CLI stop at a misspelt AWS_PROFILE; the SDK under pyarrow sent
    unsigned requests instead, refused with words that never named the profile. A
    profile either file defines is used as the SDK uses it."""
    config, creds = tmp_path / "aws-config", tmp_path / "aws-credentials"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    root = tmp_path / "repo"
    make_repo(root, f"s3://{BUCKET}/profiled", credentials.endpoint)
    monkeypatch.setenv("AWS_PROFILE", "tem")
    result = cli(root, "verify", "--integrity")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"error: data store s3://{BUCKET}/profiled: AWS_PROFILE names the profile 'tem',"
        f" which neither {config} nor {creds} defines: correct the name, or unset"
        " AWS_PROFILE to use the environment's credentials"
    ]
    if where == "config":
        config.write_text("[profile team]\nregion = us-east-1\n[profile tem]\n")
    else:
        creds.write_text("[tem]\naws_access_key_id = x\n")
    assert cli(root, "verify", "--integrity").output == "no chain in odf/ yet: nothing to verify\n"


def test_credentials_are_refused_in_the_repository(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.reconciler]\ndata_store = "s3://b/p"\n[tool.reconciler.s3]\nsecret_key = "x"\n'
    )
    with pytest.raises(ConfigError, match="credentials come from the environment"):
        RepoConfig.load(tmp_path)


def test_an_object_already_stored_is_not_uploaded_again(
    tmp_path: Path, s3_server: S3Server
) -> None:
    store = FileSystemStore(s3_server.filesystem(), f"{BUCKET}/once", tmp_path / "cache", "s3")
    for i in range(2):
        source = tmp_path / f"file{i}"
        source.write_bytes(b"same bytes")
        hash_ = physical_hash(source)
        assert store.put(source, hash_, "data") is (i == 0)
        assert not source.exists()  # kept as the cached copy
    assert store.fetch(hash_, "data").read_bytes() == b"same bytes"
    assert store.size(hash_, "data") == len(b"same bytes")


def _mangling(s3_server: S3Server, prefix: str) -> Callable[[str], None]:
    """A store point that, once an object is in place, replaces every object under
    ``prefix`` with its first 10 bytes, through the real client: what a server does
    that keeps another body than the one sent (moto kept an unsigned upload's chunk
    framing) and answers the write with success."""
    s3 = s3_server.filesystem()

    def point(where: str) -> None:
        if where != "after store":
            return
        for info in s3.get_file_info(pafs.FileSelector(prefix, recursive=True)):
            if info.type == pafs.FileType.File and info.size > 10:
                with s3.open_input_stream(info.path) as stream:
                    head = stream.read(10)
                with s3.open_output_stream(info.path) as out:
                    out.write(head)

    return point


def test_an_object_the_store_keeps_otherwise_is_removed_and_named(
    tmp_path: Path, s3_server: S3Server
) -> None:
    """An upload answered with success is checked by its size: the object is removed,
    the error names it, and the file stays where it was."""
    prefix = f"{BUCKET}/mangled-one"
    watched = Watched(s3_server.filesystem(), _mangling(s3_server, prefix))
    store = FileSystemStore(watched, prefix, tmp_path / "cache", f"s3://{prefix}")
    source = tmp_path / "slice"
    source.write_bytes(b"twenty bytes of data")
    hash_ = physical_hash(source)
    with pytest.raises(StoreError) as refused:
        store.put(source, hash_, "data")
    assert str(refused.value) == (
        f"data store s3://{prefix}: data/{hash_} was stored as 10 bytes, not its 20 bytes, so"
        " it was removed and no block names it; check the store's endpoint and credentials"
        " (some servers keep an unsigned upload's framing)"
    )
    assert store.size(hash_, "data") is None
    assert source.read_bytes() == b"twenty bytes of data"


def test_a_run_whose_uploads_the_store_keeps_otherwise_writes_no_block_naming_them(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, through apply: the head never names an object that is not its bytes,
    and the next run, with a store that keeps what it is sent, finishes the work."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    isolate_aws(monkeypatch)
    prefix = f"{BUCKET}/mangled-run"
    root = tmp_path / "repo"
    make_repo(root, f"s3://{prefix}", s3_server.endpoint)
    with monkeypatch.context() as patched:
        patched.setattr(FileSystemStore, "__init__", watched_init(_mangling(s3_server, prefix)))
        failed = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert failed.exit_code == 1, failed.output
    assert "was stored as 10 bytes, not its" in failed.output
    # the store's words, not the class of its error ("commit failed: StoreError: …")
    assert f"failed: commit failed: data store s3://{prefix}: data/" in failed.output
    assert "StoreError" not in failed.output
    assert named_objects(RepoConfig.load(root).repository().dataset(ROOT)) == []
    apply(root, "2026-01-01T07:00:00Z")
    assert cli(root, "verify", "--integrity").exit_code == 0
    assert [
        kind for kind, _ in named_objects(RepoConfig.load(root).repository().dataset(ROOT))
    ] == ["data"]


REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.stem for p in (REPO_ROOT / "datasets").glob("*.yaml"))


def bundled_examples(root: Path, data_store: str | None, endpoint: str | None) -> None:
    """The README's example datasets, their sources and policies, storing data in
    ``data_store`` (None: the dataset folders)."""
    GitOpsRepo.create(root)
    for folder in ("datasets", "sources", "policies"):
        shutil.copytree(REPO_ROOT / folder, root / folder, dirs_exist_ok=True)
    write_settings(root, data_store, endpoint)


def test_the_same_logical_hashes_wherever_the_data_lives(
    tmp_path: Path, spark: SparkSession, credentials: S3Server
) -> None:
    """The bundled examples (three roots, three derivatives) in each kind of store."""
    stores = {
        "dataset folder": None,
        "another folder": "../data-store",
        "s3": f"s3://{BUCKET}/same",
    }
    found = {}
    for label, setting in stores.items():
        root = tmp_path / label.replace(" ", "-") / "repo"
        endpoint = credentials.endpoint if label == "s3" else None
        bundled_examples(root, setting, endpoint)
        apply(root, "2026-11-21T06:00:00Z")
        found[label] = logical_hashes(root, EXAMPLES)
        if setting is not None:
            assert stored_files(root) == []
        assert cli(root, "verify", "--integrity").exit_code == 0
    folder = tmp_path / "another-folder" / "data-store"
    assert sorted({p.parent.name for p in folder.rglob("*") if p.is_file()}) == [
        "checkpoints",
        "data",
    ]
    assert found["dataset folder"] == found["another folder"] == found["s3"]
    assert sorted(found["dataset folder"]) == EXAMPLES
    assert len(EXAMPLES) == 6


def _move_into(root: Path, setting: str, endpoint: str | None) -> None:
    """The pull request that moves the repository's data out of git: a store setting."""
    text = f'[tool.reconciler]\ndata_store = "{setting}"\n'
    if endpoint is not None:
        text += f'\n[tool.reconciler.s3]\nendpoint_url = "{endpoint}"\nregion = "us-east-1"\n'
    (root / "pyproject.toml").write_text(text)
    if endpoint is None:  # a folder store must exist
        (root / setting).mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_repository_moves_its_data_out_of_git_into_a_store(
    tmp_path: Path, spark: SparkSession, credentials: S3Server, where: str
) -> None:
    root = tmp_path / "repo"
    repo = make_repo(root, None)
    apply(root, "2026-01-01T06:00:00Z")
    repo.commit("applied with the data in git")
    before = stored_files(root)
    assert [f.split("/")[1] for f in before] == ["checkpoints", "data", "data"]
    sizes = {f: (root / "odf" / f).stat().st_size for f in before}
    hashes = logical_hashes(root)
    setting = "../store" if where == "folder" else f"s3://{BUCKET}/moved"
    _move_into(root, setting, credentials.endpoint if where == "s3" else None)
    repo.commit("move the data out of git")

    # The plan says what apply will move, per dataset, and counts it as a change; in a
    # pull request, the move is a maintainer's change (merged as such, the plan fails).
    planned = cli(root, "plan", "--detailed-exitcode")
    assert planned.exit_code == 2, planned.output
    pull_request = cli(root, "plan", "--detailed-exitcode", "--base", "HEAD~1")
    assert pull_request.exit_code == 1, pull_request.output
    assert (
        f"  pyproject.toml:2: tool.reconciler.data_store: data_store changes from 'odf' to"
        f" {setting!r}: once merged, the next run moves every data and checkpoint file out"
        " of git into that store and removes them from the dataset folders, with the"
        " runner's credentials. Where the data lives is a maintainer's change: a maintainer"
        " reviews and merges it as such, since this plan cannot approve it"
    ) in pull_request.output.splitlines()
    moves = [line.strip() for line in planned.output.splitlines() if "store-move" in line]
    by_dataset = {name: [f for f in before if f.startswith(name + "/")] for name in (DERIVED, ROOT)}
    assert moves == [
        f"pending data: store-move: {len(files)} file{'s' if len(files) > 1 else ''}"
        f" ({sum(sizes[f] for f in files):,} bytes) in the dataset folder move into the"
        f" data store {setting}{'' if where == 'folder' else f' at {credentials.endpoint}'}"
        for files in (by_dataset[ROOT], by_dataset[DERIVED])
    ]
    # Until apply moves them, every reader finds the files in the dataset folders, and
    # the store's listing (empty) is read with theirs; a replay reads them there too.
    assert cli(root, "verify", "--integrity").exit_code == 0
    assert cli(root, "verify", "--integrity", "--no-download").exit_code == 0
    replayed = cli(root, "verify")
    assert replayed.exit_code == 0, replayed.output
    assert f"{DERIVED}: valid (7 blocks, 1 transform replayed)" in replayed.output

    (root / "sources" / "2.csv").write_text(CSV2)
    moved = apply(root, "2026-01-02T06:00:00Z")
    lines = [line for line in moved.output.splitlines() if " OK " in line]
    assert "1 file moved into the data store" in lines[0], lines
    assert "2 files moved into the data store" in lines[1], lines
    assert stored_files(root) == []
    assert not list((root / "odf").glob("*/data")) + list((root / "odf").glob("*/checkpoints"))
    repo_now = RepoConfig.load(root).repository()
    store = repo_now.store
    assert store is not None
    for name in (ROOT, DERIVED):
        for kind, hash_ in named_objects(repo_now.dataset(name)):
            assert store.size(hash_, kind) is not None, (name, kind, hash_)
    after = logical_hashes(root)
    assert {n: h[-len(hashes[n]) :] for n, h in after.items()} == hashes  # newest first
    assert {n: len(h) for n, h in after.items()} == {ROOT: 2, DERIVED: 2}
    shutil.rmtree(root / ".reconcile-cache", ignore_errors=True)
    assert cli(root, "verify", "--integrity").exit_code == 0
    assert cli(root, "verify", "--integrity", "--no-download").exit_code == 0
    assert cli(root, "plan", "--detailed-exitcode").exit_code == 0


def test_an_orphaned_chains_files_stay_and_are_not_planned_to_move(
    tmp_path: Path, spark: SparkSession
) -> None:
    root = tmp_path / "repo"
    make_repo(root, None)
    apply(root, "2026-01-01T06:00:00Z")
    (root / "datasets" / f"{DERIVED}.yaml").unlink()  # its chain is orphaned, never touched
    _move_into(root, "../store", None)
    planned = cli(root, "plan")
    moves = [line.strip() for line in planned.output.splitlines() if "store-move" in line]
    assert len(moves) == 1 and moves[0].startswith("pending data: store-move: 1 file ("), moves
    apply(root, "2026-01-02T06:00:00Z")
    assert [f.split("/")[0] for f in stored_files(root)] == [DERIVED, DERIVED]
    assert cli(root, "plan", "--detailed-exitcode").exit_code == 0  # nothing left to do
    assert cli(root, "verify", "--integrity").exit_code == 0


def test_a_file_that_does_not_match_its_name_is_not_moved(
    tmp_path: Path, spark: SparkSession
) -> None:
    root = tmp_path / "repo"
    make_repo(root, None)
    apply(root, "2026-01-01T06:00:00Z")
    (data,) = (root / "odf" / ROOT / "data").iterdir()
    data.write_bytes(data.read_bytes() + b"!")
    _move_into(root, "../store", None)
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-02T06:00:00Z")
    assert result.exit_code == 1, result.output
    failed = [
        re.sub(r" in [0-9.]+ s$", "", line.split(" ", 2)[2])
        for line in result.output.splitlines()
        if "ERROR" in line
    ]
    assert failed == [
        f"{ROOT} failed: {ROOT}: data/{data.name} does not match its hash"
        f" ({physical_hash(data)}): it was not moved into the data store"
        " (`reconcile verify --integrity` tells more)"
    ]
    assert data.exists()
    assert not (tmp_path / "store" / "data" / data.name).exists()


def test_a_move_that_stops_part_way_counts_the_files_that_left_the_folder(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The files moved before the stop leave git in the run's commit: its message and
    result said nothing of them."""
    root = tmp_path / "repo"
    make_repo(root, None)
    apply(root, "2026-01-01T06:00:00Z")
    (root / "sources" / "2.csv").write_text(CSV2)
    apply(root, "2026-01-02T06:00:00Z")
    sound, broken = sorted((root / "odf" / ROOT / "data").iterdir())  # moved in this order
    broken.write_bytes(broken.read_bytes() + b"!")
    _move_into(root, "../store", None)
    result = cli(
        root, "apply", "--yes", "--format", "json", "--system-time", "2026-01-03T06:00:00Z"
    )
    assert result.exit_code == 1, result.output
    (moved,) = [d for d in json.loads(result.stdout)["datasets"] if d["name"] == ROOT]
    assert (moved["status"], moved["movedFiles"]) == ("failed", 1)
    assert moved["error"].startswith(f"{ROOT}: data/{broken.name} does not match its hash")
    assert (tmp_path / "store" / "data" / sound.name).is_file()
    assert (not sound.exists(), broken.exists()) == (True, True)


def test_a_missing_object_is_named_before_the_engine_reads_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    root = tmp_path / "repo"
    make_repo(root, "../store")
    apply(root, "2026-01-01T06:00:00Z")
    named = [h for kind, h in named_objects(Dataset(root / "odf" / ROOT)) if kind == "data"]
    (tmp_path / "store" / "data" / named[0]).unlink()
    shutil.rmtree(root / ".reconcile-cache")
    result = cli(root, "sql", f"SELECT count(*) FROM `{ROOT}`")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == (
        f"error: {ROOT}: data/{named[0]}, named by the chain of {ROOT}, is not in the data"
        f" store {tmp_path / 'store'} (`reconcile verify --integrity` lists every missing file)"
    )


@pytest.mark.parametrize("secret", ["wrong", None], ids=["wrong", "missing"])
def test_readers_without_the_stores_credentials_give_one_error(
    built: Built, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, secret: str | None
) -> None:
    """A fresh clone (nothing cached) whose credentials are wrong or absent: ``verify``
    and ``sql`` stop with the store's one line, as ``apply`` does, not a crash."""
    isolate_aws(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    if secret is None:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    else:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    shutil.rmtree(built.root / ".reconcile-cache", ignore_errors=True)
    store = f"data store s3://{built.prefix}"
    for args, prefix in (
        (["verify", "--integrity"], f"error: {store} cannot be listed: "),  # the sizes
        (["verify"], f"error: {store} cannot be listed: "),
        (["sql", f"SELECT * FROM `{ROOT}`"], f"error: {ROOT}: {store} cannot read data/"),
    ):
        result = cli(built.root, *args)
        assert result.exit_code == 1, (args, result.output)
        lines = result.output.splitlines()
        assert len(lines) == 1 and lines[0].startswith(prefix), (args, result.output)
        assert lines[0].endswith("(credentials come from the environment or the AWS configuration)")


def test_verify_no_download_lists_the_store_and_reads_no_object(
    built: Built, s3_server: S3Server, credentials: S3Server
) -> None:
    """The scheduled job's check: blocks in full, objects by the store's listing. Not an
    object is read, and a missing or cut object is still named."""
    before = len(s3_server.requests())
    result = cli(built.root, "verify", "--integrity", "--no-download")
    assert result.exit_code == 0, result.output
    listing = f"GET /{BUCKET}?delimiter=/&list-type=2&max-keys=1000&prefix={built.prefix.split('/', 1)[1]}"
    assert s3_server.requests()[before:] == [f"{listing}/data/", f"{listing}/checkpoints/"]
    s3 = s3_server.filesystem()
    data = [h for kind, h in built.first[ROOT] if kind == "data"]
    checkpoint = next(h for kind, h in built.first[DERIVED] if kind == "checkpoint")
    keys = [f"{built.prefix}/data/{data[0]}", f"{built.prefix}/checkpoints/{checkpoint}"]
    originals = []
    for key in keys:
        with s3.open_input_stream(key) as f:
            originals.append(f.read())
    try:
        s3.delete_file(keys[0])
        with s3.open_output_stream(keys[1]) as f:
            f.write(originals[1][:-1])
        damaged = cli(built.root, "verify", "--integrity", "--no-download")
        assert damaged.exit_code == 1, damaged.output
        assert damaged.output.splitlines()[:-1] == [
            f"{ROOT}: invalid",
            f"  block #6: data file {data[0]} is missing from the data store",
            f"{DERIVED}: invalid",
            f"  block #6: checkpoint file {checkpoint} has {len(originals[1]) - 1} bytes, "
            f"the block says {len(originals[1])}",
        ]
    finally:
        for key, original in zip(keys, originals, strict=True):
            with s3.open_output_stream(key) as f:
                f.write(original)


def test_verify_no_download_of_a_deleted_bucket_says_so_once(
    built: Built, tmp_path: Path, credentials: S3Server
) -> None:
    """A bucket that is gone lists as empty: each object was named missing, where the
    other commands say the bucket does not exist."""
    root = tmp_path / "repo"
    shutil.copytree(built.root, root, ignore=shutil.ignore_patterns(".reconcile-cache"))
    write_settings(root, "s3://gone-bucket/p", credentials.endpoint)
    result = cli(root, "verify", "--integrity", "--no-download")
    assert (result.exit_code, result.output) == (
        1,
        "error: data store s3://gone-bucket/p: bucket gone-bucket does not exist\n",
    )


FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from pyarrow import fs
from reconciler.odf.store import StoreError
from reconciler.odf.store_fs import PROBE, FileSystemStore

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
base, cache, source = sys.argv[1:]
store = FileSystemStore(fs.LocalFileSystem(), base, Path(cache), base, rename=True)
try:
    store.put(Path(source), "f1620" + "ab" * 32, "data")
except StoreError as e:
    print(e)
"""


def test_a_write_the_disk_refuses_leaves_no_temporary_in_a_folder_store(tmp_path: Path) -> None:
    """The file system refuses the write part way (a size limit stands in for a full
    disk): the error names the object, and the half-written temporary is gone."""
    store, source = tmp_path / "store", tmp_path / "slice.parquet"
    store.mkdir()
    source.write_bytes(b"x" * 100_000)
    failed = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(store), str(tmp_path / "cache"), str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert failed.stdout == (
        f"data store {store} cannot store data/f1620{'ab' * 32}: [Errno 27] Error writing bytes"
        " to file. Detail: [errno 27] File too large\n"
    )
    assert [p.name for p in store.rglob("*")] == ["data"]
    assert source.read_bytes() == b"x" * 100_000


@pytest.mark.parametrize("carried", ["file", "link"])
def test_a_cache_git_carries_fails_the_plan_and_stops_every_reader(
    tmp_path: Path, spark: SparkSession, carried: str
) -> None:
    """A run takes a cached file for the object its name promises (it was hashed when
    downloaded): a pull request that committed a file under a real object's name in
    ``.reconcile-cache/`` (or the folder as a link) changed a derivative's data with a
    clean plan, and verify's replay then read the same file and agreed."""
    root = tmp_path / "repo"
    repo = make_repo(root, "../store")
    apply(root, "2026-01-01T06:00:00Z")
    repo.commit("applied")
    git_repo = git.Repo(root)
    git_repo.git.checkout("-q", "-b", "poison")
    (_, real), *_ = named_objects(RepoConfig.load(root).repository().dataset(ROOT))
    shutil.rmtree(root / ".reconcile-cache", ignore_errors=True)
    if carried == "file":
        poisoned = root / ".reconcile-cache" / "data" / real
        poisoned.parent.mkdir(parents=True)
        poisoned.write_bytes(b"rows of the pull request's choosing")
        problem = (
            f"git tracks .reconcile-cache/data/{real} in the data store's cache"
            " (.reconcile-cache/), whose files are used as the objects they are named after"
            " without being hashed again; remove it from git (`git rm -r --cached"
            " .reconcile-cache`)"
        )
    else:
        (root / "seed").mkdir()
        (root / ".reconcile-cache").symlink_to("seed")
        problem = (
            ".reconcile-cache is a symbolic link: the data store's cache is this clone's own"
            " folder, whose files are used as the objects they are named after; remove the link"
        )
    git_repo.git.add("--force", "-A")
    git_repo.index.commit("a cached object of the pull request's own")
    heads = {
        name: str(RepoConfig.load(root).repository().dataset(name).head())
        for name in (ROOT, DERIVED)
    }

    planned = cli(root, "plan", "--base", "main")
    assert planned.exit_code == 1
    assert f"  .reconcile-cache: {problem}" in planned.output.splitlines()
    for args in (
        ("apply", "--yes"),
        ("sql", f"SELECT * FROM `{DERIVED}`"),
        ("verify", "--integrity"),
        ("verify",),
    ):
        result = cli(root, *args)
        assert result.exit_code == 1, args
        assert f"error: {problem}" in result.output.splitlines(), args
    after = {
        name: str(RepoConfig.load(root).repository().dataset(name).head())
        for name in (ROOT, DERIVED)
    }
    assert after == heads


def test_credentials_that_may_read_the_bucket_but_not_write_stop_the_run_first(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Journey 41: the store's check (a read) passed, the Spark work ran, and every
    dataset then failed at its upload with ACCESS_DENIED. The check now writes (and
    removes) an empty temporary object, so the run stops before any work, in one line."""
    reads = {"Effect": "Allow", "Action": ["s3:Get*", "s3:List*", "s3:Head*"], "Resource": "*"}
    key = iam_user(s3_server, "reader", [reads])
    isolate_aws(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    root = tmp_path / "repo"
    make_repo(root, f"s3://{BUCKET}/read-only", s3_server.endpoint)
    before = len(s3_server.requests())
    result = cli(root, "apply", "--yes", "--system-time", "2026-01-01T06:00:00Z")
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert re.fullmatch(
        rf"error: data store s3://{BUCKET}/read-only cannot be written \(When initiating"
        r" multiple part upload for key 'read-only/\.pending-write-check' in bucket"
        rf" '{BUCKET}': AWS Error ACCESS_DENIED during CreateMultipartUpload operation:"
        r" Access Denied \(Request ID: \w+\)\): a run stores its data and checkpoint files"
        r" there; credentials come from the environment or the AWS configuration",
        errors[0],
    ), errors[0]
    assert "analysing" not in result.output  # stopped before the plan started Spark
    assert key["SecretAccessKey"] not in result.output
    assert not (root / "odf").exists() or not any((root / "odf").rglob("*"))
    assert [r.split(" ")[0] for r in s3_server.requests()[before:]] == [
        "HEAD",
        "GET",
        "HEAD",
        "POST",
    ]
