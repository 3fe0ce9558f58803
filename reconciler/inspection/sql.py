"""``reconcile sql``: one read-only SQL query over the datasets of the ODF repository.

Reviewing a pull request or chasing a wrong number means looking at the rows a chain
holds, and the data files are content-addressed Parquet slices that nobody can query by
hand. This module makes every dataset that has data a temporary view named by its
dataset name, holding all its rows as stored (system columns, retractions and
corrections included, as ``kamu sql`` shows them) and typed by its ``SetDataSchema``.

The query text is typed by a person but may come from anywhere (a wiki page, a pull
request comment), so it runs behind the sandbox the transforms use
(``query_check.apply_transform``): a single query, no commands, reading the dataset
views and nothing else, without reflection or user-defined functions. The ODF
repository is only read; results go to standard output or to a file the caller names.

Rendering is deterministic, so a result can be diffed and pinned by tests:

- timestamps are RFC 3339 in UTC with ``Z`` and as few fractional digits as keep them
  exact (0, 3 or 6); ``TIMESTAMP_NTZ`` values have no zone and so no ``Z``; dates are
  ``YYYY-MM-DD``;
- decimals keep their scale and never use exponents (``18.90``); in JSON they are
  strings, so that no reader turns them into binary floats;
- floats are Python's shortest round-trip spelling; NaN and infinities are ``NaN``,
  ``Infinity`` and ``-Infinity`` (strings in JSON, which has no such numbers);
- binary values are lower-case hex; lists, structs and maps are compact JSON;
- NULL is ``null`` in the table (an empty cell would look like an empty string), an
  empty field in CSV (where an empty string is written ``""``), ``null`` in JSON;
- in the table, tabs, carriage returns and newlines inside values are written ``\\t``,
  ``\\r`` and ``\\n`` so that every row stays on one line.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import re
import secrets
import shutil
import unicodedata
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ..engine.errors import first_line
from ..engine.query_check import (
    NOT_A_QUERY,
    QUERY_FIELD,
    QueryError,
    apply_transform,
    tables_read,
)
from ..engine.view_hints import with_view_hint
from ..odf import models
from ..odf.repository import Dataset, OdfRepository
from ..odf.timestamps import Timestamp

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Renamed = Callable[[str], str | None]
"""The new name of a dataset renamed from the one given, if a manifest says so."""


def _never_renamed(_: str) -> str | None:
    return None


@dataclass(frozen=True)
class Scope:
    """Which datasets a query sees, and what tells it about a dataset it cannot see."""

    names: Collection[str] | None = None
    """The datasets that may be views (``--select``); None: every dataset."""
    renamed: Renamed = _never_renamed
    """Asked only for a table not found, so that reading the manifests costs nothing
    otherwise."""


TABLE_LIMIT = 100
"""Rows the table shows unless told otherwise; the other formats give every row."""

_PARQUET_GROUP_ROWS = 1 << 16
"""Rows per row group of an exported Parquet file: what the driver holds at a time."""

_FIELD_PREFIX = f"{QUERY_FIELD}: "  # query_check's words for a transform's `query:` field
_ESCAPES = str.maketrans({"\t": "\\t", "\r": "\\r", "\n": "\\n"})
_CSV_SPECIAL = re.compile(r'[",\r\n]')


class SqlError(Exception):
    """The query cannot run, or its result cannot be written: ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class SqlResult:
    """The rows fetched (at most the limit asked for) and how many the query returns.

    ``total`` is None when it was not counted: only the table says how many rows it
    left out, and counting runs the query a second time.
    """

    table: pa.Table
    total: int | None

    @property
    def shown(self) -> int:
        return int(self.table.num_rows)


def run_sql(
    spark: SparkSession,
    repo: OdfRepository,
    query: str,
    limit: int | None = None,
    count_total: bool = False,
    scope: Scope = Scope(),
) -> SqlResult:
    """Run ``query`` over the repository's datasets and fetch at most ``limit`` rows.

    With ``count_total``, a result cut by the limit is counted in full (a second run of
    the query); otherwise ``total`` is the number of rows fetched when nothing was cut,
    and None when something was.
    """
    frame = analyse(spark, repo, query, scope)
    try:
        if limit is None:
            return SqlResult(frame.toArrow(), None)
        table = frame.limit(limit + 1).toArrow()
        if table.num_rows <= limit:
            return SqlResult(table, table.num_rows)
        total = frame.count() if count_total else None
        return SqlResult(table.slice(0, limit), total)
    except Exception as e:  # raised by the JVM while running: ANSI errors, missing files
        raise SqlError(first_line(str(e), type(e).__name__)) from None


@dataclass(frozen=True)
class StreamedResult:
    """A whole result, in the files Spark's tasks wrote it to (``writer.result_parts``):
    rendered rows for a text format, Arrow batches for Parquet. Each part is removed
    once copied out, so a result can be written once."""

    schema: pa.Schema
    output_format: str
    parts: list[Path]

    def write_text(self, out: BinaryIO) -> None:
        """CSV's header, then each part's bytes in order, as its task rendered them."""
        if self.output_format == "csv":
            header = ",".join(_csv_field(name) for name in self.schema.names)
            out.write((header + "\n").encode("utf-8"))
        for part in self.parts:
            with part.open("rb") as rendered:
                shutil.copyfileobj(rendered, out, 1 << 20)
            part.unlink()


def stream_sql(
    spark: SparkSession,
    repo: OdfRepository,
    query: str,
    scratch: Path,
    output_format: str,
    limit: int | None = None,
    scope: Scope = Scope(),
) -> StreamedResult:
    """Run ``query`` (its first ``limit`` rows, when given) with every row written by
    Spark's tasks beneath ``scratch``, which must outlive the result: rendered as
    ``csv`` or ``json`` by the tasks themselves, in parallel, or as Arrow for
    ``parquet``. The driver never holds more than a batch of the result, so an export
    is not bounded by its memory. The query has run when this returns: its errors are
    raised here, before anything is written."""
    from ..writer.result_parts import write_parts
    from ..writer.slice_files import collected_schema

    if output_format not in ("csv", "json", "parquet"):
        raise SqlError(f"{output_format} cannot be streamed")
    frame = analyse(spark, repo, query, scope)
    if output_format != "csv":  # JSON keys and Parquet columns: CSV takes any header
        _require_distinct(frame.columns)
    if limit is not None:
        frame = frame.limit(limit)
    schema = collected_schema(frame)
    render = None if output_format == "parquet" else partial(_rendered, output_format, schema)
    try:
        parts = write_parts(frame, scratch, render)
    except Exception as e:  # raised by the JVM while running: ANSI errors, missing files
        raise SqlError(first_line(str(e), type(e).__name__)) from None
    return StreamedResult(schema, output_format, parts)


def _rendered(output_format: str, schema: pa.Schema, batch: pa.RecordBatch) -> bytes:
    """A batch's rows as CSV lines (RFC 4180, ``\\n`` line ends, NULL an empty field)
    or newline-delimited JSON objects (keys in column order), in a Spark task."""
    from .text_columns import csv_fields, csv_lines, json_lines, json_values

    if output_format == "csv":
        text = csv_lines([csv_fields(column, csv_cells) for column in batch.columns])
    else:
        values = [json_values(column, json_texts) for column in batch.columns]
        text = json_lines(schema.names, values)
    return text.encode("utf-8")


def analyse(
    spark: SparkSession,
    repo: OdfRepository,
    query: str,
    scope: Scope = Scope(),
) -> DataFrame:
    """The sandboxed, analysed query over the dataset views it names (of the scope's
    names, when given); nothing has run yet. Only the datasets the query names are
    read: their chains, and from a data store outside git their slices, which a view
    needs listed before the query runs."""
    named = tables_read(spark, query)
    names = scope.names
    if named is not None:
        wanted = {table.lower() for table in named}  # names are unique ignoring case
        chosen = [n for n in repo.names() if n.lower() in wanted]
        names = chosen if names is None else [n for n in chosen if n in names]
    views = dataset_views(spark, repo, names)
    transform = models.TransformSql(engine="spark", query=query)
    datasets = repo.names()

    def hint(message: str, _: Sequence[str], /, *, reader: str) -> str:
        """Against every dataset, not just the views registered; no list of them, which
        would name those with no data too."""
        reason = partial(_missing_dataset, datasets=datasets, scope=scope)
        return with_view_hint(message, datasets, reason, listed=False)

    try:
        return apply_transform(spark, views, transform, hint)
    except QueryError as e:
        message = e.message.removeprefix(_FIELD_PREFIX)
        if message.startswith(NOT_A_QUERY):
            message = "only a single read-only query (SELECT, WITH, VALUES, TABLE) can run here"
        if e.line is not None and "\n" in query.strip():
            message += f" (line {e.line})"
        raise SqlError(message) from None


def _missing_dataset(table: str, datasets: list[str], scope: Scope) -> str | None:
    """Why a dataset the query names is not a view: ``--select`` left it out, it has
    no data yet (a view needs a schema), or it was renamed (a query saved before the
    rename, as ``reconcile log`` says for the old name)."""
    same = [n for n in datasets if n.lower() == table.lower()]
    if same and scope.names is not None and same[0] not in scope.names:
        return f"{same[0]} is not among the datasets --select chose"
    if same:
        return f"{same[0]} has no data yet"
    new = scope.renamed(table)
    return None if new is None else f"{table} was renamed to `{new}`"


def dataset_views(
    spark: SparkSession, repo: OdfRepository, names: Collection[str] | None = None
) -> dict[str, DataFrame]:
    """Every dataset that has data (of ``names``, when given), by name: all its rows as
    stored, in offset order."""
    views: dict[str, DataFrame] = {}
    for name in repo.names():
        if names is not None and name not in names:
            continue
        try:
            frame = _dataset_frame(spark, repo.dataset(name))
        except Exception as e:  # a broken chain, a type Spark lacks, a missing data file
            raise SqlError(f"{name}: {first_line(str(e), type(e).__name__)}") from None
        if frame is not None:
            views[name] = frame
    return views


def _dataset_frame(spark: SparkSession, dataset: Dataset) -> DataFrame | None:
    """The dataset's rows typed by its SetDataSchema, or None before its first data.

    Offsets grow with the chain, and each slice is in offset order, so the slices' rows
    read in chain order are in offset order, with no sort (up to ``MOST_SCANS`` slices:
    a view of a million rows was sorted, shuffling every row, before each export).
    """
    from ..engine.stored_rows import rows_in_offset_order

    state = dataset.state()
    if state.data_schema is None:
        return None
    hashes = [
        event.new_data.physical_hash
        for _, block in dataset.iter_blocks(state.head)
        if isinstance(event := block.event, models.AddData | models.ExecuteTransform)
        and event.new_data is not None
    ]
    files = dataset.layout.data_files_to_read(hashes[::-1])
    return rows_in_offset_order(spark, state.data_schema, files, state.vocabulary().offset_column)


# Rendering


def render_table(result: SqlResult) -> str:
    """An aligned text table: header, rule, rows, and a line with the row count.

    Numeric columns are right-aligned, the others left-aligned; trailing blanks are
    trimmed. The count line says how many rows were shown of how many when the limit
    cut the result.
    """
    table = result.table
    numeric = [_is_numeric(f.type) for f in table.schema]
    rows = [[_text(v, "null").translate(_ESCAPES) for v in row] for row in _rows(table)]
    header = [name.translate(_ESCAPES) for name in table.column_names]
    widths = [_width(h) for h in header]
    for row in rows:
        widths = [max(w, _width(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Iterable[str]) -> str:
        padded = (
            _pad(cell, width, right)
            for cell, width, right in zip(cells, widths, numeric, strict=True)
        )
        return " | ".join(padded).rstrip()

    lines = [line(header), "-+-".join("-" * w for w in widths)]
    lines.extend(line(row) for row in rows)
    lines.append(_count_line(result))
    return "\n".join(lines) + "\n"


def _count_line(result: SqlResult) -> str:
    shown, total = result.shown, result.total
    if total is None:
        return f"(showing the first {shown} rows; see --limit)"
    if total > shown:
        return f"(showing {shown} of {total} rows; see --limit)"
    return "(1 row)" if shown == 1 else f"({shown} rows)"


def save_text(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` whole or not at all."""
    _write_atomically(path, lambda tmp: tmp.write_bytes(text.encode("utf-8")))


def export(result: StreamedResult, path: Path) -> None:
    """Write a streamed result to ``path``, whole or not at all, a part or a batch at a
    time. Parquet is one file with the result's Arrow schema, in row groups of
    ``_PARQUET_GROUP_ROWS`` rows (Spark's batches, of 10,000 rows at most, would make
    row groups too small to read well)."""
    from ..writer.result_parts import read_parts
    from ..writer.sorted_runs import rechunked

    def write_parquet(tmp: Path) -> None:
        batches = read_parts(result.parts, result.schema)
        tables = (pa.Table.from_batches([batch]) for batch in batches)
        with pq.ParquetWriter(tmp, result.schema) as writer:
            for group in rechunked(tables, _PARQUET_GROUP_ROWS):
                writer.write_table(group)

    def write_text(tmp: Path) -> None:
        with tmp.open("wb") as out:
            result.write_text(out)

    _write_atomically(path, write_parquet if result.output_format == "parquet" else write_text)


def _write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write`` a temporary file beside ``path``, then move it there: a failure leaves
    neither a partial file nor the temporary one."""
    tmp = path.parent / f".{path.name}.pending-{secrets.token_hex(4)}"
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, pa.ArrowException) as e:
        cause = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SqlError(f"cannot write {path}: {cause}") from None  # not the temporary's name
    finally:
        tmp.unlink(missing_ok=True)


def _require_distinct(names: list[str]) -> None:
    """Refuse a result whose columns share a name: JSON objects and Parquet files need
    them distinct."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SqlError(
                f"the result has more than one column named `{name}`; rename them with AS"
            )
        seen.add(name)


def _rows(table: pa.Table | pa.RecordBatch) -> Iterable[tuple[Any, ...]]:
    """Rows as tuples of plain Python values, by position (names may repeat)."""
    columns = [_plain_column(column) for column in table.columns]
    return zip(*columns, strict=True) if columns else iter(())


def _plain_column(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    return [_plain(value, column.type) for value in column.to_pylist()]


def _plain(value: Any, type_: pa.DataType) -> Any:
    """A value with its type's meaning settled: maps become dicts of rendered keys.

    pyarrow gives a map as a list of (key, value) pairs; keys of any type become the
    text they render as, since JSON object keys are strings.
    """
    if value is None:
        return None
    if pa.types.is_map(type_):
        return {
            _text(_plain(k, type_.key_type), "null"): _plain(v, type_.item_type) for k, v in value
        }
    if pa.types.is_struct(type_):
        return {f.name: _plain(value[f.name], f.type) for f in type_}
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [_plain(v, type_.value_type) for v in value]
    if pa.types.is_fixed_size_list(type_):
        return [_plain(v, type_.value_type) for v in value]
    return value


def _is_numeric(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_)
    )


def _text(value: Any, null: str) -> str:
    """A value as table or CSV text."""
    if value is None:
        return null
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(_json_value(value), ensure_ascii=False, separators=(",", ":"))
    scalar = _scalar(value)
    return scalar if isinstance(scalar, str) else json.dumps(scalar)


def _json_value(value: Any) -> Any:
    """A plain value as JSON: numbers, booleans and strings as themselves, others as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    """Booleans, integers and finite floats as they are; anything else as its text."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        text = Timestamp.from_datetime(value).isoformat()
        return text if value.tzinfo is not None else text.removesuffix("Z")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return str(value)


def csv_cells(column: pa.Array) -> list[str]:
    """A column's CSV fields, value by value: what ``text_columns`` falls back to, and
    what it is held to."""
    return [_csv_cell(value) for value in _plain_column(column)]


def json_texts(column: pa.Array) -> list[str]:
    """A column's JSON values, value by value, as ``text_columns`` falls back to."""
    return [
        json.dumps(_json_value(value), ensure_ascii=False, separators=(",", ":"))
        for value in _plain_column(column)
    ]


def _csv_cell(value: Any) -> str:
    return "" if value is None else _csv_field(_text(value, ""))


def _csv_field(text: str) -> str:
    """Quoted when it must be, and when empty, so an empty string is not a NULL."""
    if text == "" or _CSV_SPECIAL.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _width(text: str) -> int:
    """Terminal columns: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - _width(text))
    return fill + text if right else text + fill
