"""A data store on a pyarrow file system: a folder outside the datasets, or S3.

Objects are ``<base>/data/<physical hash>`` and ``<base>/checkpoints/<physical hash>``,
shared by every dataset of the repository (content addressing makes that safe), written
once and never overwritten. Reads go through a local cache folder: an object is
downloaded the first time a run asks for it, checked against its hash on the way, and
kept under its hash (an object never changes, so a cached copy never goes stale).

pyarrow's file systems (``LocalFileSystem``, ``S3FileSystem``) are already a dependency:
no object-store client is added, and S3 credentials come from the AWS SDK's standard
chain (environment, ``~/.aws``, instance roles), never from the repository.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import pyarrow.parquet as pq
from pyarrow import fs as pafs

from ..masking import Mask
from .multiformat import Multihash
from .store import KINDS, StoreError, folder_of, fsync_dir

_CHUNK = 1 << 20
_FOLDER = pafs.FileType.Directory
_PENDING = ".pending-"
"""The prefix of a temporary: an upload (folder store) or a download not yet renamed."""
_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")
PROBE = f"{_PENDING}write-check"
"""The temporary ``check`` writes, reads the size of and removes, beside the store's
folders."""
_PROBE_BYTES = b"odf-reconciler: a run may write here\n"
_CREDENTIALS = "credentials come from the environment or the AWS configuration"


class StoredObject(NamedTuple):
    """One file of a store as its listing gives it."""

    path: str
    """``data/<hash>`` or ``checkpoints/<hash>`` (or a temporary's name there)."""
    size: int
    modified: float
    """When it was written, in seconds since the epoch (S3's ``LastModified``)."""
    temporary: bool
    """An upload not renamed into its object yet, or a killed run's: never an object."""


class FileSystemStore:
    """Content-addressed objects under ``base`` of a pyarrow file system ``filesystem``."""

    local = False

    def __init__(
        self, filesystem: Any, base: str, cache: Path, shown: str, rename: bool = False
    ) -> None:
        self.filesystem = filesystem
        self.base = base.rstrip("/")
        self.cache = Path(cache)
        self.shown = shown
        """How messages name the store (its URL or folder, nothing secret)."""
        self.rename = rename
        """Write through a temporary name and rename (a local folder: a crash never
        leaves half an object under its hash; an S3 upload is atomic by itself)."""
        self._listed: dict[str, int] | None = None

    def key(self, hash_: str, kind: str) -> str:
        return f"{self.base}/{folder_of(kind)}/{hash_}"

    def check(self, write: bool = True) -> None:
        """The store is there and this run may write to it (``_probe``): the commands
        that write ask before any work. ``write=False``, the sweep under the lock (after
        the command's own check), asks only that a bucket answers; a folder is probed
        either way, at no cost."""
        self._require_base()
        if write or self.rename:
            self._probe()

    def _require_base(self) -> None:
        """The bucket, or the folder, is there (read only)."""
        with self._errors("cannot be reached"):
            info = self.filesystem.get_file_info(self.base)
            if info.type == pafs.FileType.NotFound and self.rename:
                # Never made here: a missing folder is most often a share that is not
                # mounted, and a run writing into a new empty one would split the chains'
                # objects between two places (as a missing bucket is refused).
                raise StoreError(
                    f"data store {self.shown} does not exist: create it (mkdir -p"
                    f" {self.shown}), or mount the share it is on"
                )
            if info.type == pafs.FileType.File:
                raise StoreError(f"data store {self.shown} is a file, not a folder")
            bucket = self.base.split("/", 1)[0]
            if not self.rename and self.filesystem.get_file_info(bucket).type != _FOLDER:
                raise StoreError(f"data store {self.shown}: bucket {bucket} does not exist")

    def _probe(self) -> None:
        """Write a small temporary object, read its size back, and remove it. A folder on
        a read-only share (or one this user may not write), a bucket these credentials
        may read but not write, and a server that keeps an unsigned upload's chunk
        framing as the object's bytes (``_check_stored``; an empty body has no framing,
        so the probe has a body) stopped the run only at its first upload, after the
        Spark work. A bucket pays an upload, a HEAD and a DELETE a run for it. A store
        that refuses the removal (a policy that protects objects from deletion) keeps
        the temporary, which is no object: the write was what had to be known. Its name
        and bytes are always the same, so such a store keeps one, not one a run, and
        runs writing it at once write the same bytes."""
        probe = f"{self.base}/{PROBE}"
        try:
            with self.filesystem.open_output_stream(probe) as out:
                out.write(_PROBE_BYTES)
            stored = self.filesystem.get_file_info(probe).size
        except OSError as e:
            reason = e.strerror or _scrubbed(str(e))
            hint = "" if self.rename else f"; {_CREDENTIALS}"
            raise StoreError(
                f"data store {self.shown} cannot be written ({reason}): a run stores its data"
                f" and checkpoint files there{hint}"
            ) from None
        with contextlib.suppress(OSError):
            self.filesystem.delete_file(probe)
        if stored != len(_PROBE_BYTES):
            raise StoreError(
                f"data store {self.shown}: a test object of {len(_PROBE_BYTES)} bytes was"
                f" stored as {stored} bytes, so no upload of this run could be trusted and"
                " nothing was run; check the store's endpoint and credentials (some servers"
                " keep an unsigned upload's framing)"
            )

    def put(self, source: Path, hash_: str, kind: str) -> bool:
        size = source.stat().st_size
        written = self.size(hash_, kind) != size
        if written:
            self._upload(source, hash_, kind)
            self._check_stored(hash_, kind, size)
        self.adopt(source, hash_, kind)
        return written

    def _check_stored(self, hash_: str, kind: str, size: int) -> None:
        """The object's size as the store now gives it, against the file's: a server
        that kept something else (a client's chunk framing, a cut upload) took the write
        without an error, and a block naming the object would then point at bytes that
        are not its. The object is removed (the next run stores it again); the file
        stays where it was, so nothing is lost."""
        stored = self.size(hash_, kind)
        if stored == size:
            return
        with contextlib.suppress(OSError):
            self.filesystem.delete_file(self.key(hash_, kind))
        held = "nothing" if stored is None else f"{stored} bytes"
        raise StoreError(
            f"data store {self.shown}: {folder_of(kind)}/{hash_} was stored as {held}, not"
            f" its {size} bytes, so it was removed and no block names it; check the store's"
            " endpoint and credentials (some servers keep an unsigned upload's framing)"
        )

    def _upload(self, source: Path, hash_: str, kind: str) -> None:
        key = self.key(hash_, kind)
        with self._errors(f"cannot store {folder_of(kind)}/{hash_}"):
            parent = key.rsplit("/", 1)[0]
            if self.rename:
                self.filesystem.create_dir(parent, recursive=True)
            target = f"{parent}/{_PENDING}{secrets.token_hex(8)}" if self.rename else key
            try:
                with open(source, "rb") as src, self.filesystem.open_output_stream(target) as out:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
            except Exception:
                # A failed write (a full disk) takes its temporary with it: left, it
                # would keep the store full until gc's --min-age let it go.
                if self.rename:
                    with contextlib.suppress(OSError):
                        self.filesystem.delete_file(target)
                raise
            if self.rename:
                self.filesystem.move(target, key)

    def fetch(self, hash_: str, kind: str) -> Path:
        path = self.cache / folder_of(kind) / hash_
        if not path.exists() and self.download(hash_, kind) is False:
            raise StoreError(
                f"data store {self.shown}: object {folder_of(kind)}/{hash_} does not "
                "match its hash (run `reconcile verify --integrity`)"
            )
        return path  # a missing object: the caller's read reports it as a missing file

    def download(self, hash_: str, kind: str) -> bool | None:
        path = self.cache / folder_of(kind) / hash_
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{_PENDING}{secrets.token_hex(8)}"
        hasher = hashlib.sha3_256()
        try:
            with self.open(hash_, kind) as src, open(tmp, "wb") as out:
                while chunk := src.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
            if Multihash.from_digest(hasher.digest()) != hash_:
                return False
            os.replace(tmp, path)
            return True
        except FileNotFoundError:
            return None
        finally:
            tmp.unlink(missing_ok=True)

    def adopt(self, source: Path, hash_: str, kind: str) -> None:
        """Keep a file just stored as the cached copy of its object (moved, not copied)."""
        path = self.cache / folder_of(kind) / hash_
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            source.unlink()
        else:
            os.replace(source, path) if _same_device(source, path.parent) else _move(source, path)
            fsync_dir(path.parent)

    def size(self, hash_: str, kind: str) -> int | None:
        with self._errors(f"cannot read {folder_of(kind)}/{hash_}"):
            info = self.filesystem.get_file_info(self.key(hash_, kind))
        return info.size if info.type == pafs.FileType.File else None

    def sizes(self) -> dict[str, int]:
        """Listed once per store object (every dataset of a ``verify`` shares the store,
        and listing it for each would cost the whole store's listing per dataset): a
        snapshot for checks that write nothing, which is all that ask for it."""
        if self._listed is None:
            listed = {o.path: o.size for o in self.objects() if not o.temporary}
            if not listed:  # a deleted bucket lists as empty: one error, not each object
                self._require_base()
            self._listed = listed
        return self._listed

    def objects(self) -> list[StoredObject]:
        """Every file under the store's folders, listed now (never the snapshot
        ``sizes`` keeps), an upload a killed run left half done included: what
        ``reconcile gc`` judges by age."""
        found: list[StoredObject] = []
        with self._errors("cannot be listed"):
            for kind in KINDS:
                folder = folder_of(kind)
                selector = pafs.FileSelector(f"{self.base}/{folder}", allow_not_found=True)
                for info in self.filesystem.get_file_info(selector):
                    if info.type == pafs.FileType.File:
                        name = info.base_name
                        modified = (info.mtime_ns or 0) / 1e9
                        found.append(
                            StoredObject(f"{folder}/{name}", info.size, modified, _temporary(name))
                        )
        return sorted(found)

    def delete(self, path: str) -> None:
        """Remove the file at ``path`` (``data/<hash>``…) and its cached copy; one
        already gone is no error (two collectors may race)."""
        with self._errors(f"cannot delete {path}"), contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(f"{self.base}/{path}")
        (self.cache / path).unlink(missing_ok=True)

    @contextlib.contextmanager
    def open(self, hash_: str, kind: str) -> Iterator[BinaryIO]:
        with self._errors(f"cannot read {folder_of(kind)}/{hash_}"):
            stream = self.filesystem.open_input_stream(self.key(hash_, kind))
        with stream:
            yield stream

    def footer(self, hash_: str, kind: str) -> pq.FileMetaData | None:
        cached = self.cache / folder_of(kind) / hash_
        if cached.is_file():
            return pq.read_metadata(cached)
        try:
            with self._errors(f"cannot read {folder_of(kind)}/{hash_}"):
                source = self.filesystem.open_input_file(self.key(hash_, kind))
                with source:  # pyarrow reads the footer with a ranged request or two
                    return pq.read_metadata(source)
        except FileNotFoundError:
            return None

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """pyarrow's OSError (credentials, network, a missing bucket) as one StoreError;
        a missing object stays a FileNotFoundError."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as e:
            message = _scrubbed(str(e))
            # No credentials hint where the store was never reached: it would send people
            # to the wrong cause.
            unreached = _UNREACHED.search(message) is not None
            hint = f" ({_CREDENTIALS})"
            raise StoreError(
                f"data store {self.shown} {what}: {message}"
                + (hint if not self.rename and not unreached else "")
            ) from None


_UNREACHED = re.compile(
    r"NETWORK_CONNECTION|could not connect|couldn't connect|connection refused"
    r"|could(?: not|n't) resolve|timed? ?out|curlCode",
    re.IGNORECASE,
)
"""What the AWS SDK says when no answer came from the store (its endpoint, the network)."""


def _scrubbed(message: str) -> str:
    """An SDK message with any credential from the environment blanked out."""
    mask = Mask(v for name in _SECRETS if len(v := os.environ.get(name, "")) >= 4)
    return " ".join(mask(message).split())


def _same_device(a: Path, folder: Path) -> bool:
    return a.stat().st_dev == folder.stat().st_dev


def _temporary(name: str) -> bool:
    """A folder store's upload not yet renamed into its object (or a killed one's)."""
    return name.startswith(_PENDING)


def _move(source: Path, target: Path) -> None:
    tmp = target.parent / f"{_PENDING}{secrets.token_hex(8)}"
    try:
        with open(source, "rb") as src, open(tmp, "wb") as out:
            while chunk := src.read(_CHUNK):
                out.write(chunk)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    source.unlink()


def _require_profile(setting: str, environ: Mapping[str, str]) -> None:
    """``StoreError`` when ``AWS_PROFILE`` names a profile no AWS file defines. The
    AWS CLI and boto3 stop there ("could not be found"); the SDK pyarrow runs goes on
    without credentials, so a misspelt profile read as unsigned requests refused with
    ACCESS_DENIED or an HTTP 500, and never named the profile."""
    name = environ.get("AWS_PROFILE")
    if not name:
        return
    home = Path.home() / ".aws"
    config = Path(environ.get("AWS_CONFIG_FILE") or home / "config")
    credentials = Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials")
    sections = {"default" if name == "default" else f"profile {name}", name}
    for path, wanted in ((config, sections), (credentials, {name})):
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        with contextlib.suppress(OSError, configparser.Error):
            parser.read(path)
            if wanted & set(parser.sections()):
                return
    raise StoreError(
        f"data store {setting}: AWS_PROFILE names the profile {name!r}, which neither"
        f" {config} nor {credentials} defines: correct the name, or unset AWS_PROFILE"
        " to use the environment's credentials"
    )


def open_store(setting: str, s3: dict[str, Any], root: Path, cache: Path) -> FileSystemStore:
    """The store a ``data_store`` setting names (not ``"odf"``, the dataset folders):
    ``s3://bucket/prefix`` (with ``[tool.reconciler.s3]``'s ``endpoint_url`` and
    ``region``) or a folder, absolute or relative to the repository root."""
    if setting.startswith("s3://"):
        base = setting.removeprefix("s3://").strip("/")
        if not base:
            raise ValueError(f"data_store {setting!r} names no bucket")
        _require_profile(setting, os.environ)
        options: dict[str, Any] = {}
        endpoint = s3.get("endpoint_url")
        if endpoint:  # with its scheme (``config._s3``)
            scheme, _, host = str(endpoint).partition("://")
            options["endpoint_override"] = host
            options["scheme"] = scheme
        if s3.get("region"):
            options["region"] = str(s3["region"])
        return FileSystemStore(pafs.S3FileSystem(**options), base, cache, setting)
    folder = (root / setting).resolve()
    return FileSystemStore(pafs.LocalFileSystem(), str(folder), cache, str(folder), rename=True)
