"""Derivative datasets through ``reconcile``: SQL over the inputs' new slices, on Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from gitops_repo import T1, events, reconcile, rows, slices
from transform_repo import JOIN_QUERY, PRICES, STOCK, derivative, make_repo, run, ts

from reconciler.apply.outcome import Status
from reconciler.odf import models
from reconciler.odf.arrow_schema import decode_arrow_schema
from reconciler.odf.integrity import check_integrity

pytestmark = pytest.mark.usefixtures("spark")


def test_map_filter_passes_retractions_and_corrections_through(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    derivative(
        repo,
        "org.example.big",
        [STOCK],
        "SELECT op, day, id, qty * 10 AS qty10 FROM `org.example.stock` WHERE id <> 'z'",
    )
    (repo.root / "stock" / "1.csv").write_text(
        "day,id,qty\n2020-01-01,a,1\n2020-01-01,b,2\n2020-01-01,z,9\n"
    )
    assert run(repo, "2026-01-01T00:00:00Z")["org.example.big"] == (Status.CREATED, 2)
    (repo.root / "stock" / "2.csv").write_text("day,id,qty\n2020-01-02,b,3\n2020-01-02,c,4\n")
    assert run(repo, "2026-01-02T00:00:00Z")["org.example.big"] == (Status.UPDATED, 4)
    assert run(repo, "2026-01-03T00:00:00Z")["org.example.big"] == (Status.UP_TO_DATE, 0)

    ds = repo.odf.dataset("org.example.big")
    assert check_integrity(ds) == []
    kinds = [type(e).__name__ for e in events(ds)]
    assert kinds == [
        "Seed",
        "SetTransform",
        "SetInfo",
        "SetLicense",
        "SetVocab",
        "SetDataSchema",
        "ExecuteTransform",
        "ExecuteTransform",
    ]
    first, second = slices(ds)
    assert first.column_names == ["offset", "op", "system_time", "day", "id", "qty10"]
    assert rows(first) == [
        (0, 0, "2026-01-01T00:00:00Z", "2020-01-01", "a", 10),
        (1, 0, "2026-01-01T00:00:00Z", "2020-01-01", "b", 20),
    ]
    assert rows(second, "system_time") == [
        (2, 1, "2020-01-01", "a", 10),
        (3, 2, "2020-01-01", "b", 20),
        (4, 3, "2020-01-02", "b", 30),
        (5, 0, "2020-01-02", "c", 40),
    ]
    schema = decode_arrow_schema(
        next(e for e in events(ds) if isinstance(e, models.SetDataSchema)).schema_
    )
    assert schema.field("op").type == pa.int32() and not schema.field("op").nullable
    executes = [e for e in events(ds) if isinstance(e, models.ExecuteTransform)]
    stock = repo.odf.dataset(STOCK)
    stock_heads = [h for h, b in stock.iter_blocks() if isinstance(b.event, models.AddData)]
    (qi1,), (qi2,) = (e.query_inputs for e in executes)
    assert (qi1.prev_block_hash, qi1.new_block_hash, qi1.prev_offset, qi1.new_offset) == (
        None,
        stock_heads[1],
        None,
        2,
    )
    assert (qi2.prev_block_hash, qi2.new_block_hash, qi2.prev_offset, qi2.new_offset) == (
        stock_heads[1],
        stock_heads[0],
        2,
        7,
    )
    assert [e.new_watermark for e in executes] == [
        ts("2020-01-01T00:00:00Z"),
        ts("2020-01-02T00:00:00Z"),
    ]
    assert executes[1].prev_checkpoint == executes[0].new_checkpoint.physical_hash  # type: ignore[union-attr]


def test_join_and_aggregation_with_inputs_advancing_at_different_speeds(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    derivative(
        repo,
        "org.example.valued",
        [STOCK, PRICES],
        JOIN_QUERY,
    )
    derivative(
        repo,
        "org.example.total",
        ["org.example.valued"],
        "SELECT day, count(*) AS items, sum(value) AS total FROM `org.example.valued` GROUP BY day",
    )
    (repo.root / "stock" / "1.csv").write_text("day,id,qty\n2020-01-01,a,2\n2020-01-01,b,3\n")
    (repo.root / "prices" / "1.csv").write_text(
        "day,id,price\n2020-01-01,a,1.5\n2020-01-01,b,2.0\n"
    )
    assert run(repo, "2026-01-01T00:00:00Z") == {
        STOCK: (Status.CREATED, 2),
        PRICES: (Status.CREATED, 2),
        "org.example.valued": (Status.CREATED, 2),
        "org.example.total": (Status.CREATED, 1),
    }
    # Only prices move: the join sees the new prices and no stock rows, so it outputs
    # nothing, but it still consumes the prices slice and records how far it got.
    (repo.root / "prices" / "2.csv").write_text("day,id,price\n2020-01-03,a,9.0\n")
    assert run(repo, "2026-01-02T00:00:00Z") == {
        STOCK: (Status.UP_TO_DATE, 0),
        PRICES: (Status.UPDATED, 1),
        "org.example.valued": (Status.UPDATED, 0),
        "org.example.total": (Status.UP_TO_DATE, 0),
    }
    valued = repo.odf.dataset("org.example.valued")
    assert check_integrity(valued) == []
    last = [e for e in events(valued) if isinstance(e, models.ExecuteTransform)][-1]
    assert [(q.prev_offset, q.new_offset) for q in last.query_inputs] == [(1, None), (1, 2)]
    assert last.new_data is None
    # The slowest input holds the watermark back: stock is still at 2020-01-01.
    assert last.new_watermark == ts("2020-01-01T00:00:00Z")
    total = repo.odf.dataset("org.example.total")
    assert [rows(t, "system_time") for t in slices(total)] == [[(0, 0, "2020-01-01", 2, 9.0)]]


def test_a_failing_query_stops_only_its_downstream(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    derivative(
        repo,
        "org.example.broken",
        [STOCK],
        "SELECT day, id, 1 / 0 AS boom FROM `org.example.stock`",
    )
    derivative(
        repo,
        "org.example.after",
        ["org.example.broken"],
        "SELECT day, id, boom FROM `org.example.broken`",
    )
    derivative(repo, "org.example.fine", [PRICES], "SELECT day, id FROM `org.example.prices`")
    (repo.root / "stock" / "1.csv").write_text("day,id,qty\n2020-01-01,a,2\n")
    (repo.root / "prices" / "1.csv").write_text("day,id,price\n2020-01-01,a,1.5\n")
    results = {r.dataset: r for r in reconcile(repo.root, T1)}
    assert results["org.example.broken"].status is Status.FAILED
    assert results["org.example.broken"].message == (
        "transform failed: ArithmeticException: [DIVIDE_BY_ZERO] Division by zero."
        " Use `try_divide` to tolerate divisor being 0 and return NULL instead."
    )
    assert (results["org.example.after"].status, results["org.example.after"].message) == (
        Status.SKIPPED,
        "input org.example.broken failed",
    )
    assert results["org.example.fine"].status is Status.CREATED
    # a new dataset is created with its first data or not at all: the failed one is rolled back
    assert results["org.example.broken"].metadata_blocks == 0
    assert not (repo.root / "odf" / "org.example.broken").exists()
