"""The cluster path: ``reconcile`` against a real standalone Spark cluster.

A master and a worker are started from the pyspark package itself, on loopback, and the
CLI runs with ``RECONCILER_SPARK_MASTER`` pointing at them, so ingest and transforms run
in executor JVMs rather than in the driver. The logical hashes must equal those of the
same repository reconciled in this process on ``local[2]``: results may not depend on
where Spark ran them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from gitops_repo import GitOpsRepo, events, reconcile
from test_cli_conventions import WHEN, normal
from transform_repo import JOIN_QUERY, PRICES, STOCK, derivative, make_repo, ts

from reconciler.odf import models

# The local half runs in this process: on the test session's Spark, like every other test.
pytestmark = pytest.mark.usefixtures("spark")

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_daemon(cls: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def wait_for(log: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{log.name}: no {text!r} after {timeout} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def master_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("cluster")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master = spark_daemon(
        "org.apache.spark.deploy.master.Master",
        logs / "master.log",
        *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())),
    )
    daemons = [master]
    try:
        wait_for(logs / "master.log", "I have been elected leader")
        daemons.append(
            spark_daemon(
                "org.apache.spark.deploy.worker.Worker",
                logs / "worker.log",
                url,
                *("--host", "127.0.0.1", "--webui-port", str(free_port())),
                *("--cores", "2", "--memory", "1g", "--work-dir", str(logs / "work")),
            )
        )
        wait_for(logs / "worker.log", "Successfully registered with master")
        yield url
    finally:
        for daemon in reversed(daemons):
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=60)


def on(master: str, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``reconcile -C root args`` as a process whose Spark runs on ``master``."""
    env = {**os.environ, "RECONCILER_SPARK_MASTER": master, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def build(root: Path) -> GitOpsRepo:
    repo = make_repo(root)
    derivative(
        repo,
        "org.example.valued",
        [STOCK, PRICES],
        JOIN_QUERY,
    )
    (root / "stock" / "1.csv").write_text(
        "day,id,qty\n2020-01-01,a,2\n2020-01-01,b,3\n2020-01-02,c,7\n"
    )
    (root / "prices" / "1.csv").write_text(
        "day,id,price\n2020-01-01,c,0.5\n2020-01-01,a,1.5\n2020-01-01,b,2.0\n"
    )
    repo.commit("datasets")
    return repo


def data_hashes(repo: GitOpsRepo) -> dict[str, list[str]]:
    found = {}
    for name in (STOCK, PRICES, "org.example.valued"):
        found[name] = [
            e.new_data.logical_hash
            for e in events(repo.odf.dataset(name))
            if isinstance(e, models.AddData | models.ExecuteTransform) and e.new_data is not None
        ]
    return found


def test_a_standalone_cluster_gives_the_same_results_as_local_mode(
    master_url: str, tmp_path: Path
) -> None:
    on_cluster = build(tmp_path / "cluster")
    done = on(master_url, on_cluster.root, "--system-time", WHEN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [x for x in normal(done.stdout) if " START " not in x][-4:] == [
        "HH:MM:SS OK    org.example.prices created: 7 blocks (5 metadata), 3 records in N s",
        "HH:MM:SS OK    org.example.stock created: 7 blocks (5 metadata), 3 records in N s",
        "HH:MM:SS OK    org.example.valued created: 7 blocks (5 metadata), 3 records in N s",
        "3 datasets: 3 created (9 records) in N s",
    ]
    verify = on(master_url, on_cluster.root, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert normal(verify.stdout)[-2:] == [
        "org.example.valued: valid (7 blocks, 1 transform replayed)",
        "3 datasets: 3 valid in N s",
    ]
    # An export's rows are written by the executors and read back by the driver.
    query = "SELECT id, value FROM `org.example.valued` ORDER BY id"
    exported = on(master_url, on_cluster.root, "sql", "--format", "csv", query)
    assert (exported.returncode, exported.stdout) == (0, "id,value\na,3.0\nb,6.0\nc,3.5\n")

    local = build(tmp_path / "local")
    reconcile(local.root, ts("2026-01-01T00:00:00Z"))
    assert data_hashes(on_cluster) == data_hashes(local)


@pytest.fixture(scope="module")
def master_without_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A master whose workers are all gone: what a run meets when its worker died."""
    logs = tmp_path_factory.mktemp("deserted")
    port = free_port()
    master = spark_daemon(
        "org.apache.spark.deploy.master.Master",
        logs / "master.log",
        *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())),
    )
    try:
        wait_for(logs / "master.log", "I have been elected leader")
        yield f"spark://127.0.0.1:{port}"
    finally:
        os.killpg(master.pid, signal.SIGTERM)
        master.wait(timeout=60)


def test_a_cluster_without_executors_fails_the_run_saying_why_instead_of_hanging(
    master_without_workers: str, tmp_path: Path
) -> None:
    """Spark waits for an executor for ever; the run waited until its CI job timed out."""
    repo = build(tmp_path / "repo")
    (repo.root / "pyproject.toml").write_text("[tool.reconciler.spark]\nexecutor_wait = 3\n")
    done = on(master_without_workers, repo.root, "--system-time", WHEN)
    assert done.returncode == 1, done.stdout + done.stderr
    reason = (
        f"no Spark executor to run on for 3 s (master {master_without_workers}): every"
        " worker is gone or cannot reach the driver; the jobs were cancelled (executor_wait"
        " in [tool.reconciler.spark])"
    )
    lines = [line for line in normal(done.stdout) if " START " not in line]
    assert lines[-4:] == [
        f"HH:MM:SS ERROR {name} failed: read failed: ReadError: {folder}/1.csv: {reason} in N s"
        for name, folder in ((PRICES, "prices"), (STOCK, "stock"))
    ] + [
        f"HH:MM:SS SKIP  org.example.valued skipped: input {PRICES} failed in N s",
        "3 datasets: 2 failed, 1 skipped in N s",
    ]
    assert not any((repo.root / "odf").rglob("blocks/*"))
