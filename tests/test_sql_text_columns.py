"""CSV fields and JSON values rendered a column at a time (``text_columns``) are exactly
those rendered value by value (``sql.csv_cells``, ``sql.json_texts``), for every type and
for the edges of each: the export path may not change one byte of what
``reconcile sql --format csv|json`` prints."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from reconciler.inspection.sql import csv_cells, json_texts
from reconciler.inspection.text_columns import csv_fields, csv_lines, json_lines, json_values

UTC = dt.UTC


def ts(*parts: int, tz: dt.tzinfo | None = UTC) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=tz)  # type: ignore[misc]


COLUMNS = {
    "int8": pa.array([-128, 127, 0, None], pa.int8()),
    "int64": pa.array([-(2**63), 2**63 - 1, 7, None], pa.int64()),
    "uint64": pa.array([2**64 - 1, 0, None], pa.uint64()),
    "bool": pa.array([True, False, None], pa.bool_()),
    "decimal": pa.array(
        [decimal.Decimal("18.90"), decimal.Decimal("-0.05"), decimal.Decimal("0.00"), None],
        pa.decimal128(6, 2),
    ),
    "decimal_wide": pa.array(
        [decimal.Decimal("-" + "9" * 28 + "." + "1" * 10), decimal.Decimal("1E-10")],
        pa.decimal128(38, 10),
    ),
    "decimal_whole": pa.array([decimal.Decimal("5"), decimal.Decimal("-12")], pa.decimal128(4, 0)),
    "date": pa.array([dt.date(1000, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 12, 31), None]),
    "date_year_1": pa.array([dt.date(1, 1, 1), dt.date(2026, 1, 1)]),
    "timestamp_utc": pa.array(
        [
            ts(2026, 1, 1, 6),
            ts(2026, 1, 2, 6, 0, 0, 250_000),
            ts(2026, 1, 2, 6, 0, 0, 123_456),
            ts(1969, 12, 31, 23, 59, 59, 500_000),
            ts(1969, 12, 31, 23, 59, 59, 1),
            ts(1000, 1, 1),
            ts(9999, 12, 31, 23, 59, 59, 999_999),
            None,
        ],
        pa.timestamp("us", tz="UTC"),
    ),
    "timestamp_ntz": pa.array(
        [dt.datetime(2026, 1, 1, 6, 0, 0, 10), dt.datetime(1970, 1, 1), None], pa.timestamp("us")
    ),
    "timestamp_year_1": pa.array([ts(1, 1, 1), ts(2026, 1, 1)], pa.timestamp("us", tz="UTC")),
    "timestamp_other_zone": pa.array([ts(2026, 1, 1, 6)], pa.timestamp("us", tz="Europe/Paris")),
    "timestamp_ms": pa.array([ts(2026, 1, 1, 6, 0, 0, 5000)], pa.timestamp("ms", tz="UTC")),
    "string": pa.array(
        ["plain", "", None, "a,b", 'say "hi"', "two\nlines", "cr\rhere", " spaced ", "ünï 字"]
    ),
    "large_string": pa.array(["x,y", "", None], pa.large_string()),
    "string_escaped": pa.array(['a "quote"', "back\\slash", "tab\there", "\x01", "ok"]),
    "float": pa.array([0.1, 1e16, float("nan"), float("inf"), -0.0, None], pa.float64()),
    "binary": pa.array([b"\x00\xff", b"", None]),
    "list": pa.array([[1, 2], [], None]),
    "struct": pa.array([{"a": 1, "b": "x,y"}, None]),
    "map": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_a_column_renders_as_its_values_do_one_by_one(name: str) -> None:
    column = COLUMNS[name]
    assert csv_fields(column, csv_cells).to_pylist() == csv_cells(column)
    assert json_values(column, json_texts).to_pylist() == json_texts(column)


def test_the_fields_are_exact() -> None:
    """Pinned, so that the two paths cannot drift together."""
    assert csv_fields(COLUMNS["timestamp_utc"], csv_cells).to_pylist() == [
        "2026-01-01T06:00:00Z",
        "2026-01-02T06:00:00.250Z",
        "2026-01-02T06:00:00.123456Z",
        "1969-12-31T23:59:59.500Z",
        "1969-12-31T23:59:59.000001Z",
        "1000-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "",
    ]
    assert csv_fields(COLUMNS["timestamp_ntz"], csv_cells).to_pylist() == [
        "2026-01-01T06:00:00.000010",
        "1970-01-01T00:00:00",
        "",
    ]
    assert csv_fields(COLUMNS["string"], csv_cells).to_pylist() == [
        "plain",
        '""',
        "",
        '"a,b"',
        '"say ""hi"""',
        '"two\nlines"',
        '"cr\rhere"',
        " spaced ",
        "ünï 字",
    ]
    assert csv_fields(COLUMNS["decimal"], csv_cells).to_pylist() == ["18.90", "-0.05", "0.00", ""]
    assert csv_fields(COLUMNS["bool"], csv_cells).to_pylist() == ["true", "false", ""]
    assert csv_fields(COLUMNS["date_year_1"], csv_cells).to_pylist() == ["0001-01-01", "2026-01-01"]


def test_rows_are_lines_of_fields() -> None:
    columns = [
        csv_fields(pa.array([1, None, 3]), csv_cells),
        csv_fields(pa.array(["a,b", "", None]), csv_cells),
    ]
    assert csv_lines(columns) == '1,"a,b"\n,""\n3,\n'


def test_json_values_are_exact() -> None:
    assert json_values(COLUMNS["decimal"], json_texts).to_pylist() == [
        '"18.90"',
        '"-0.05"',
        '"0.00"',
        "null",
    ]
    assert json_values(COLUMNS["int8"], json_texts).to_pylist() == ["-128", "127", "0", "null"]
    assert json_values(COLUMNS["string"], json_texts).to_pylist()[:3] == ['"plain"', '""', "null"]
    assert json_values(COLUMNS["string_escaped"], json_texts).to_pylist() == [
        '"a \\"quote\\""',
        '"back\\\\slash"',
        '"tab\\there"',
        '"\\u0001"',
        '"ok"',
    ]


def test_json_rows_are_objects_in_column_order() -> None:
    columns = [
        json_values(pa.array([1, None]), json_texts),
        json_values(pa.array(["a,b", ""]), json_texts),
    ]
    assert json_lines(["n", 'é"x'], columns) == '{"n":1,"é\\"x":"a,b"}\n{"n":null,"é\\"x":""}\n'
