"""A real S3-compatible server for the data store's tests: moto's standalone server, a
separate process on 127.0.0.1, with authentication on, shared by the test session (a
pytest plugin of ``conftest``, so that every module gets the same server)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyarrow import fs as pafs

BUCKET = "odf-test"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    key: str
    secret: str
    log: Path

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            access_key=self.key,
            secret_key=self.secret,
        )

    def requests(self) -> list[str]:
        """Every request line the server logged so far (``GET /bucket/key``…), with
        those it colours (an object read's 206, any error) among them."""
        text = self.log.read_text(errors="replace")
        return re.findall(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+ /\S*) HTTP/1\.1', text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _moto(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]
) -> Iterator[tuple[str, Path]]:
    """A moto server process on 127.0.0.1, its endpoint and request log, until the end."""
    pytest.importorskip("moto")
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "requests.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"moto server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's server with IAM authentication: a user with one access key may do anything,
    any other credentials are refused. The bucket is made through pyarrow's client."""
    boto3 = pytest.importorskip("boto3")
    # The first three requests (the IAM setup below) need no signature; then all do.
    with _moto(tmp_path_factory, {"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as (endpoint, log):
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="reconciler")
        key = iam.create_access_key(UserName="reconciler")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
        }
        iam.put_user_policy(
            UserName="reconciler", PolicyName="all", PolicyDocument=json.dumps(policy)
        )
        server = S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], log)
        creator = pafs.S3FileSystem(
            endpoint_override=endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            access_key=server.key,
            secret_key=server.secret,
            allow_bucket_creation=True,
        )
        creator.create_dir(BUCKET)
        yield server


@pytest.fixture(scope="session")
def open_s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's server as it starts by default, which takes unsigned requests: its
    endpoint, with ``BUCKET`` made. The store a run without credentials meets when its
    server lets anyone write."""
    with _moto(tmp_path_factory, {}) as (endpoint, _):
        creator = pafs.S3FileSystem(
            endpoint_override=endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            anonymous=True,
            allow_bucket_creation=True,
        )
        creator.create_dir(BUCKET)
        yield endpoint


@pytest.fixture
def credentials(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server's credentials in the environment, and no other AWS configuration."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    isolate_aws(monkeypatch)
    return s3_server


def isolate_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS configuration but what the test sets: no profile, no session token, no
    instance metadata, no configuration or credentials file of the machine."""
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")


def iam_user(server: S3Server, name: str, statements: list[dict[str, Any]]) -> dict[str, str]:
    """A user of ``server`` whose policy is ``statements``, made with the server's own
    credentials: the access key (``AccessKeyId``, ``SecretAccessKey``) it may sign with."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.key,
        aws_secret_access_key=server.secret,
    )
    iam.create_user(UserName=name)
    key: dict[str, str] = iam.create_access_key(UserName=name)["AccessKey"]
    policy = {"Version": "2012-10-17", "Statement": statements}
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    return key
