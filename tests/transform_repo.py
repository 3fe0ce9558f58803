"""Two small root datasets (stock, a Snapshot; prices, an Append) for transform tests."""

from __future__ import annotations

from pathlib import Path

from gitops_repo import GitOpsRepo, derivative_events, manifest, reconcile, root_events

from reconciler.apply.outcome import Status
from reconciler.odf import Timestamp

STOCK = "org.example.stock"
PRICES = "org.example.prices"
JOIN_QUERY = (
    "SELECT s.day, s.id, s.qty * p.price AS value\n"
    "FROM `org.example.stock` AS s JOIN `org.example.prices` AS p ON s.id = p.id"
)
"""Stock valued at its price: a join of the two roots."""
VOCAB = """- kind: SetVocab
      eventTimeColumn: day"""


def ts(text: str) -> Timestamp:
    return Timestamp.parse(text)


def make_repo(tmp_path: Path) -> GitOpsRepo:
    """The two roots, reading ``stock/*.csv`` and ``prices/*.csv`` (empty for now)."""
    repo = GitOpsRepo.create(tmp_path)
    stock = root_events(
        schema="[day DATE, id STRING, qty BIGINT]",
        merge="{kind: Snapshot, primaryKey: [id]}",
        extra=VOCAB,
    ).replace("sources/*.csv", "stock/*.csv")
    prices = root_events(schema="[day DATE, id STRING, price DOUBLE]", extra=VOCAB).replace(
        "sources/*.csv", "prices/*.csv"
    )
    repo.write(STOCK, manifest(STOCK, "Root", stock))
    repo.write(PRICES, manifest(PRICES, "Root", prices))
    (tmp_path / "stock").mkdir()
    (tmp_path / "prices").mkdir()
    return repo


def derivative(repo: GitOpsRepo, name: str, inputs: list[str], query: str) -> None:
    """A derivative manifest over ``inputs`` with ``day`` as its event time."""
    events_yaml = derivative_events(inputs, query) + VOCAB + "\n"
    repo.write(name, manifest(name, "Derivative", events_yaml))


def run(repo: GitOpsRepo, when: str) -> dict[str, tuple[Status, int]]:
    """One in-process reconcile at system time ``when``: each dataset's status and rows."""
    results = reconcile(repo.root, ts(when))
    return {r.dataset: (r.status, r.rows) for r in results}
