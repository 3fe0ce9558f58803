"""The read stage of ingest: a fetched (and prepared) file becomes a Spark DataFrame.

kamu reads on DataFusion (ENGINE-SEMANTICS §1.9); this is the same contract on Spark:
the ODF ``ReadStep`` options are mapped onto Spark's CSV, JSON and Parquet readers, and
the formats Spark cannot read (a JSON document, GeoJSON, NdGeoJSON, a zipped Shapefile)
are first rewritten as NDJSON in ``workdir``, as kamu does, and read by the NdJson path.

Two choices differ from a plain ``spark.read``, because a slice, once committed, is
hashed into the chain forever:

* **Malformed records fail the read; they are never dropped or nulled.** Spark's
  PERMISSIVE mode turns a bad row into nulls (and FAILFAST stops with no location), so
  every text read carries a corrupt-record column, checked before the data is used (or,
  ``deferred``, as it is used), and a ReadError names the file, the line, the text and
  the reason of every bad record, up to ``SHOWN`` of them, and counts the rest. Under
  ANSI mode Spark still does this for a CSV ``abc`` in an INT column, a wrong number of
  CSV fields, a JSON ``1.5`` or ``"x"`` for an INT and unparsable JSON: the row is kept
  with nulls and its text in the corrupt column, no exception; ANSI only affects casts
  in queries (such as the Parquet schema cast).
  Spark does not say why a record failed, but it nulls only the fields that failed to
  convert, so the error also says, where it can tell, which column (and value) failed,
  that the CSV field count is wrong, or that the text is not JSON.
* **The read schema replaces inference** (as in kamu): columns are taken by name and
  type from the DDL, and without one, CSV columns are all strings unless ``inferSchema``.

Spark's file sources make every column nullable whatever the schema says, so the
returned DataFrame's columns are nullable; NOT NULL is checked here (a null is a
ReadError, as kamu's Arrow reader fails) and stays in ``spark_schema``'s StructType for
the writer. Column names are matched case-sensitively, as in kamu; but the session keeps
Spark's default ``spark.sql.caseSensitive=false``, so two columns differing only in
case cannot be held at all and are reported rather than renamed (Spark's CSV header
reader would rename them ``a0``/``A1``).

``read_data`` is a context manager: the DataFrame it gives is backed by the cached,
checked data, which it releases on exit. (The cache holds the corrupt-record column the
DataFrame hides, so unpersisting the DataFrame itself would release nothing: Spark
uncaches only a plan equal to the cached one, never the plan it is projected from.)
An ingest defers the check to the query that writes the slice instead, which then
parses the file once and caches nothing; the ReadError is raised as the block ends.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from operator import or_
from pathlib import Path
from typing import Any, TypeVar

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (Spark's own convention)
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..engine import executor_watch
from ..engine.errors import first_line
from ..engine.frames import as_read
from ..odf import models
from ..plan.ddl import DdlError, parse_columns
from . import geo

CORRUPT = "__odf_corrupt_record"
"""The column Spark fills with the raw text of a record it could not parse."""
SHOWN = 20
"""How many malformed records an error quotes, each at its line with its reason; the
rest are counted. Enough to fix a file in one pass, few enough to read."""
RFC3339 = "rfc3339"
"""The one date and timestamp format ODF requires; Spark's default parser reads it."""

_SPARK_ERRORS = (PySparkException, Py4JJavaError)
_SCALARS: dict[str, DataType] = {
    "boolean": BooleanType(),
    "tinyint": ByteType(),
    "smallint": ShortType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
}
_MAX_PRECISION = 38  # Spark's DecimalType limit
_DECIMAL = re.compile(r"decimal\((\d+)(?:,(\d+))?\)")
_GLOB = re.compile(r"([\\\[\]{}*?])")
_VALUE_CHARS = 60
"""How much of a field's value a malformed-record error quotes."""
_JSON_PARTIAL = "spark.sql.json.enablePartialResults"
"""Spark's switch (on by default) to keep the good fields of a bad JSON record."""
_TOO_DEEP = "JSON nested too deeply to read (more levels than Python's recursion limit)"
T = TypeVar("T")
_Explain = Callable[[str, Sequence[str | None]], str | None]
"""Why a malformed record failed, from its raw text and its columns as Spark parsed them
(cast to strings, None where null), or None when that cannot be told."""


class ReadError(Exception):
    """Input that cannot be read as its read step says. ``path`` is the input file and
    ``lines`` the locations quoted for malformed records (lines of the file, or the
    record/feature numbers of formats rewritten to NDJSON)."""

    def __init__(
        self, message: str, *, path: Path | None = None, lines: tuple[int, ...] = ()
    ) -> None:
        super().__init__(message)
        self.path = path
        self.lines = lines


def spark_schema(ddl: Sequence[str]) -> StructType:
    """A kamu DDL read schema (``"Quoted name" DATE NOT NULL``, ``amount DECIMAL(10,2)``)
    as a Spark StructType, NOT NULL kept as ``nullable=False``.

    The types are kamu's (``convert_sql_to_odf_data_type``): BOOLEAN, INT/INTEGER,
    BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), DATE, TIMESTAMP (an instant: Spark's
    TimestampType, read in the session's UTC), STRING/VARCHAR/TEXT and ARRAY<..>, plus
    Spark's TINYINT and SMALLINT.
    """
    fields: list[StructField] = []
    for text in ddl:
        try:
            columns = parse_columns([text])
        except DdlError as e:
            raise ReadError(f"read schema column {text!r}: {e}") from None
        for col in columns:
            try:
                data_type = _data_type(col.type)
            except ValueError as e:
                raise ReadError(f"read schema column {text!r}: {e}") from None
            fields.append(StructField(col.name, data_type, col.nullable))
    names = [f.name for f in fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReadError(f"read schema names a column more than once: {', '.join(duplicates)}")
    return StructType(fields)


def _data_type(text: str) -> DataType:
    """A type in ``ddl.normalize_type`` spelling (lower case, no spaces)."""
    if text in _SCALARS:
        return _SCALARS[text]
    decimal = _DECIMAL.fullmatch(text)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2) or 0)
        if not 0 < precision <= _MAX_PRECISION or scale > precision:
            raise ValueError(f"DECIMAL({precision},{scale}) is out of range")
        return DecimalType(precision, scale)
    if text.startswith("array<") and text.endswith(">"):
        return ArrayType(_data_type(text[len("array<") : -1]))
    raise ValueError(f"type {text!r} is not supported in a read schema")


@contextmanager
def read_data(
    spark: SparkSession,
    step: models.ReadStep,
    path: Path | None,
    workdir: Path,
    *,
    deferred: bool = False,
) -> Iterator[DataFrame | None]:
    """Read ``path`` as ``step`` says, checked (see the module docstring), and give the
    data for the ``with`` block.

    By default the check is a pass of its own before the block, which caches the data
    for the block and releases it when the block ends. With ``deferred`` the check runs
    in the block's own query instead, so the file is parsed once and nothing is cached
    (a whole ingest is then one pass over the input, like a plain ``spark.read``): a
    malformed record, or a NULL in a NOT NULL column, fails the Spark job that meets
    it, and a Spark failure in the block has the input checked, which raises the same
    ReadError the eager check gives (any other failure is raised as it is). Deferring is
    only sound when the block computes every row read before it commits anything, as a
    slice write does (a query with a LIMIT or a filter might never meet the bad record),
    and the data must not be used after the block.

    A missing or empty input gives an empty DataFrame of the read schema, or None when
    the step has no schema (§1.1 step 4). Files rewritten to NDJSON are written under
    ``workdir``; keep it until the DataFrame is no longer used.
    """
    read = _read(spark, step, path, workdir)
    if read is None:
        yield None
    elif deferred:
        try:
            yield _guarded(read).drop(CORRUPT)
        except _SPARK_ERRORS:
            try:
                _checked(read).unpersist()
            except ReadError as problem:  # the input's fault: say what is wrong with it
                raise problem from None
            raise
    else:
        cached = _checked(read)
        try:
            yield cached.drop(CORRUPT)
        finally:
            cached.unpersist()


def _read(
    spark: SparkSession, step: models.ReadStep, path: Path | None, workdir: Path
) -> _Unchecked | None:
    """The data as read, not yet checked, or None (no schema and no data)."""
    schema = spark_schema(step.schema_) if step.schema_ else None
    csv_options = _csv_options(step) if isinstance(step, models.ReadStepCsv) else {}
    if path is None or not path.exists() or path.stat().st_size == 0:
        return _empty(spark, schema)
    if not path.is_file():
        raise ReadError(f"{path}: not a file", path=path)
    if schema is not None:
        _check_names([f.name for f in schema], path)
    workdir.mkdir(parents=True, exist_ok=True)
    match step:
        case models.ReadStepCsv():
            header = bool(step.header)
            source = _Source(path, path, encoding=_codec(step.encoding), header=header)
            return _read_csv(spark, source, csv_options, bool(step.infer_schema), schema)
        case models.ReadStepNdJson():
            options = _json_options(step.encoding, step.date_format, step.timestamp_format)
            source = _Source(path, path, encoding=_codec(step.encoding))
            return _read_ndjson(spark, source, options, schema)
        case models.ReadStepJson():
            return _read_json(spark, step, path, workdir, schema)
        case models.ReadStepGeoJson():
            return _read_converted(
                spark, path, workdir, schema, geo.geojson_to_ndjson, "feature {}".format
            )
        case models.ReadStepNdGeoJson():
            return _read_ndgeojson(spark, path, workdir, schema)
        case models.ReadStepEsriShapefile():
            sub_path = step.sub_path
            scratch = Path(tempfile.mkdtemp(prefix="shapefile-", dir=workdir))

            def convert(archive: Path, out: Any) -> int:
                return geo.shapefile_to_ndjson(archive, sub_path, scratch, out)

            return _read_converted(spark, path, workdir, schema, convert, "record {}".format)
        case models.ReadStepParquet():
            return _read_parquet(spark, _Source(path, path), schema)
    raise ReadError(f"read step {step.kind} is not supported")


# ------------------------------------------------------------------------------ sources


@dataclass(frozen=True)
class _Source:
    """Where records come from: ``path`` is the input named in errors; ``data`` is the
    file Spark reads (the input itself, or an NDJSON rewrite of it), and ``label``
    turns a line of ``data`` into a location in ``path``."""

    path: Path
    data: Path
    encoding: str = "utf-8"
    header: bool = False
    label: Callable[[int], str] = "line {}".format


@dataclass(frozen=True)
class _Unchecked:
    """Data as Spark reads it, and what checking it takes."""

    frame: DataFrame
    """With the corrupt-record column when ``corrupt``."""
    source: _Source | None
    """Where the records come from; None for a missing or empty input (nothing to check)."""
    required: Sequence[str] = ()
    """The NOT NULL columns."""
    corrupt: bool = False
    explain: _Explain | None = None


def _empty(spark: SparkSession, schema: StructType | None) -> _Unchecked | None:
    if schema is None:
        return None
    return _Unchecked(spark.createDataFrame([], as_read(schema)), None)


def _with_corrupt(schema: StructType) -> StructType:
    return StructType([*as_read(schema).fields, StructField(CORRUPT, StringType(), True)])


def _check_names(names: Sequence[str], path: Path) -> None:
    if CORRUPT in names:
        raise ReadError(f"{path}: the column name {CORRUPT!r} is reserved", path=path)
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise ReadError(
                f"{path}: columns {other!r} and {name!r} differ only in case, which this "
                "Spark session (spark.sql.caseSensitive=false) cannot hold apart",
                path=path,
            )


def _codec(encoding: str | None) -> str:
    """A Python codec for scanning the file as Spark decodes it (Java charset names
    such as ``utf8`` or ``ISO-8859-1`` are mostly Python's too)."""
    try:
        return codecs.lookup(encoding or "utf-8").name
    except LookupError:
        return "utf-8"


def _spark_path(path: Path) -> str:
    """An absolute path with Hadoop's glob characters escaped, so ``a[1].csv`` is read
    as that file rather than as a pattern."""
    return _GLOB.sub(r"\\\1", str(path.absolute()))


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


# ---------------------------------------------------------------------------------- csv


def _csv_options(step: models.ReadStepCsv) -> dict[str, str]:
    """Spark CSV options for the ODF ones.

    ``escape`` defaults to the quote character: kamu v0.250.0 reads CSV with no escape
    character, quotes inside a quoted value being doubled (RFC 4180: ``"say ""hi"" now"``) and
    backslashes literal; Spark's own default ``\\`` would instead keep ``""`` as two
    characters and break ``"C:\\dir\\"``. An empty ``quote`` turns quoting off (ODF).
    """
    quote = _one_char("quote", step.quote, '"', allow_empty=True)
    options = {
        "sep": _one_char("separator", step.separator, ",", allow_empty=False),
        "quote": quote,
        "escape": _one_char("escape", step.escape, quote, allow_empty=True),
        "encoding": step.encoding or "utf-8",
    }
    if step.null_value is not None:
        options["nullValue"] = step.null_value
    return options | _format_options(step.date_format, step.timestamp_format)


def _one_char(name: str, value: str | None, default: str, *, allow_empty: bool) -> str:
    if value is None:
        return default
    if len(value) == 1 or (allow_empty and value == ""):
        return value
    raise ReadError(f"Csv.{name} must be a single character, got {value!r}")


def _format_options(date_format: str | None, timestamp_format: str | None) -> dict[str, str]:
    """``rfc3339`` (or nothing) leaves Spark's default parser, which reads RFC 3339 and
    ISO 8601 (``2020-01-01`` as a TIMESTAMP is midnight UTC); anything else is passed
    through as a Spark datetime pattern."""
    options = {}
    if date_format and date_format.lower() != RFC3339:
        options["dateFormat"] = date_format
    if timestamp_format and timestamp_format.lower() != RFC3339:
        options["timestampFormat"] = timestamp_format
    return options


def _read_csv(
    spark: SparkSession,
    source: _Source,
    options: dict[str, str],
    infer: bool,
    schema: StructType | None,
) -> _Unchecked | None:
    header = {"header": str(source.header).lower()}
    declared = schema is not None
    if schema is None:
        schema = _csv_inferred(spark, source, options | header, infer)
        if not schema.fields:
            return None
    width = "the schema" if declared else "the header" if source.header else "the first record"
    frame = _load(spark, "csv", options | header | _permissive(), _with_corrupt(schema), source)
    explain = _csv_explainer(options, schema, width)
    return _Unchecked(frame, source, _required(schema), corrupt=True, explain=explain)


def _csv_inferred(
    spark: SparkSession, source: _Source, options: dict[str, str], infer: bool
) -> StructType:
    """Column names from the header line as written (Spark's own header reading would
    rename case-insensitive duplicates), types from Spark's inference or strings."""
    flags = {"inferSchema": str(infer).lower()}
    inferred = _load(spark, "csv", options | flags, None, source).schema
    names = [f.name for f in inferred]
    if source.header:
        options = options | {"header": "false"}
        first = _run(source, lambda: _load(spark, "csv", options, None, source).first())
        names = [v if v else f"_c{i}" for i, v in enumerate(first or [])]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ReadError(
                f"{source.path}: the header names a column more than once: "
                f"{', '.join(duplicates)}; give a read schema",
                path=source.path,
            )
        _check_names(names, source.path)
    return StructType(
        [StructField(n, f.dataType, True) for n, f in zip(names, inferred, strict=True)]
    )


def _csv_explainer(options: dict[str, str], schema: StructType, width: str) -> _Explain:
    """Why a CSV record is malformed: its text split again with Python's ``csv`` module
    as the options say, then a field count other than the schema's (``width`` names
    where that count comes from), or the first column with a value (neither empty nor
    ``nullValue``) that Spark could not convert, PERMISSIVE mode leaving it null and the
    other columns parsed. If a STRING column differs from the split text, this split
    disagrees with Spark's (the two differ on an escape character outside quotes), and
    nothing is claimed."""
    null_value = options.get("nullValue", "")
    absent = ("", null_value)

    def explain(text: str, parsed: Sequence[str | None]) -> str | None:
        fields = _csv_split(text, options)
        if fields is None:
            return None
        for field, raw, value in zip(schema, fields, parsed, strict=False):
            if isinstance(field.dataType, StringType) and raw not in absent and value != raw:
                return None
        if len(fields) != len(schema):
            many = "field" if len(fields) == 1 else "fields"
            return f"it has {len(fields)} {many}, {width} has {len(schema)}"
        for field, raw, value in zip(schema, fields, parsed, strict=True):
            if value is None and raw not in absent:
                return _not_valid(field, repr(_clip(raw, _VALUE_CHARS)))
        return None

    return explain


def _csv_split(text: str, options: dict[str, str]) -> list[str] | None:
    """One CSV line's fields as ``_csv_options`` has Spark read them: the escape
    character is the quote doubled (RFC 4180) or a character before a quote; an empty
    quote turns quoting off."""
    quote, escape = options["quote"], options["escape"]
    try:
        reader = csv.reader(
            [text],
            delimiter=options["sep"],
            quotechar=quote or None,
            quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
            doublequote=bool(quote) and escape == quote,
            escapechar=escape if quote and escape and escape != quote else None,
            strict=False,
        )
        return next(reader, [])
    except (csv.Error, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------- json


def _json_options(
    encoding: str | None, date_format: str | None, timestamp_format: str | None
) -> dict[str, str]:
    options = _format_options(date_format, timestamp_format)
    if encoding and _codec(encoding) != "utf-8":
        options |= {"encoding": encoding, "lineSep": "\n"}
    return options


def _read_ndjson(
    spark: SparkSession, source: _Source, options: dict[str, str], schema: StructType | None
) -> _Unchecked | None:
    options = options | _permissive()
    if schema is None:
        inferred = _load(spark, "json", options, None, source).schema
        schema = StructType([f for f in inferred if f.name != CORRUPT])
        if not inferred.fields:
            return None
    frame = _load(spark, "json", options, _with_corrupt(schema), source)
    partial = (spark.conf.get(_JSON_PARTIAL, "true") or "").lower() == "true"
    explain = _json_explainer(schema, columns=partial)
    return _Unchecked(frame, source, _required(schema), corrupt=True, explain=explain)


def _json_explainer(schema: StructType, *, columns: bool) -> _Explain:
    """Why a JSON record is malformed: text that ``json.loads`` refuses, a value that is
    not an object, or the first column whose key (matched exactly, as Spark's reader
    does) has a value Spark could not convert, PERMISSIVE mode leaving it null and the
    other columns parsed. Spark also accepts single-quoted JSON, so "not valid JSON" is
    said only when Spark got no column from the record either. Without ``columns``
    (Spark's JSON partial results turned off, every column of a bad record null) no
    column is named."""

    def explain(text: str, parsed: Sequence[str | None]) -> str | None:
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            if any(value is not None for value in parsed):
                return None
            return f"not valid JSON ({e.msg} at char {e.pos})"
        except (ValueError, RecursionError):
            return None
        if not isinstance(record, dict):
            return None if isinstance(record, list) else "not a JSON object"
        if not columns:
            return None
        for field, value in zip(schema, parsed, strict=True):
            raw = record.get(field.name)
            if value is None and raw is not None:
                quoted = json.dumps(raw, ensure_ascii=False)
                return _not_valid(field, _clip(quoted, _VALUE_CHARS))
        return None

    return explain


def _read_json(
    spark: SparkSession,
    step: models.ReadStepJson,
    path: Path,
    workdir: Path,
    schema: StructType | None,
) -> _Unchecked | None:
    """The array at ``subPath`` (kamu ``readers/json.rs``): each element one record. As
    in kamu, without ``subPath`` the document itself must be an array; a lone object is
    "Sub-path does not specify an array: ." rather than one record."""
    try:
        document = json.loads(path.read_text(encoding=_codec(step.encoding)))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReadError(f"{path}: not a JSON document: {e}", path=path) from None
    except RecursionError:
        raise ReadError(f"{path}: {_TOO_DEEP}", path=path) from None
    value, walked = document, []
    for key in step.sub_path.split(".") if step.sub_path else []:
        walked.append(key)
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            raise ReadError(f"{path}: Sub-path not found: {'.'.join(walked)}", path=path)
    if not isinstance(value, list):
        where = step.sub_path or "."
        raise ReadError(f"{path}: Sub-path does not specify an array: {where}", path=path)

    def convert(_: Path, out: Any) -> int:
        for number, record in enumerate(value, start=1):
            if not isinstance(record, dict):
                raise geo.GeoFormatError(f"record {number} is not an object: {record!r}")
            out.write(geo.record_line(record) + "\n")
        return len(value)

    options = _json_options(None, step.date_format, step.timestamp_format)
    return _read_converted(spark, path, workdir, schema, convert, "record {}".format, options)


def _read_ndgeojson(
    spark: SparkSession, path: Path, workdir: Path, schema: StructType | None
) -> _Unchecked | None:
    lines: list[int] = []

    def convert(source: Path, out: Any) -> int:
        lines.extend(geo.ndgeojson_to_ndjson(source, out))
        return len(lines)

    def label(line: int) -> str:
        return f"line {lines[line - 1]}"

    return _read_converted(spark, path, workdir, schema, convert, label)


def _read_converted(
    spark: SparkSession,
    path: Path,
    workdir: Path,
    schema: StructType | None,
    convert: Callable[[Path, Any], int],
    label: Callable[[int], str],
    options: dict[str, str] | None = None,
) -> _Unchecked | None:
    """Rewrite ``path`` as NDJSON in ``workdir`` with ``convert`` and read that; the
    ``label`` of a rewritten line is where it came from (``feature 2``)."""
    handle, name = tempfile.mkstemp(prefix=f"{path.stem}-", suffix=".ndjson", dir=workdir)
    data = Path(name)
    try:
        with open(handle, "w", encoding="utf-8") as out:
            count = convert(path, out)
    except geo.GeoFormatError as e:
        raise ReadError(f"{path}: {e}", path=path) from None
    except RecursionError:  # Python's json recurses once per level, reading and writing
        raise ReadError(f"{path}: {_TOO_DEEP}", path=path) from None
    if count == 0:
        return _empty(spark, schema)
    source = _Source(path=path, data=data, label=label)
    return _read_ndjson(spark, source, options or {}, schema)


# ------------------------------------------------------------------------------ parquet


def _read_parquet(spark: SparkSession, source: _Source, schema: StructType | None) -> _Unchecked:
    """The file's columns, or with a schema those columns (by exact name) cast to it."""
    frame = _load(spark, "parquet", {}, None, source)
    if schema is not None:
        missing = [f.name for f in schema if f.name not in frame.columns]
        if missing:
            raise ReadError(
                f"{source.path}: the read schema's columns {', '.join(map(repr, missing))} "
                f"are not in the Parquet file, which has {', '.join(map(repr, frame.columns))}",
                path=source.path,
            )
        frame = frame.select(*[_col(f.name).cast(f.dataType).alias(f.name) for f in schema])
    return _Unchecked(frame, source, _required(schema))


# ------------------------------------------------------------------------ spark & checks


def _permissive() -> dict[str, str]:
    return {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


def _required(schema: StructType | None) -> list[str]:
    return [] if schema is None else [f.name for f in schema if not f.nullable]


def _load(
    spark: SparkSession,
    fmt: str,
    options: dict[str, str],
    schema: StructType | None,
    source: _Source,
) -> DataFrame:
    reader: DataFrameReader = spark.read.format(fmt).options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    return _run(source, lambda: reader.load(_spark_path(source.data)))


def _run(source: _Source, action: Callable[[], T]) -> T:
    """Run a Spark call; its failure is a ReadError naming the input."""
    try:
        return action()
    except _SPARK_ERRORS as e:
        text = str(e)
        message = executor_watch.explains(text) or first_line(text, type(e).__name__)
        raise ReadError(f"{source.path}: {message}", path=source.path) from None


def _checked(read: _Unchecked) -> DataFrame:
    """Cache the data and check it in one pass: no malformed record, no null in a NOT
    NULL column. The first ``SHOWN`` malformed records are collected with their parsed
    columns (as strings), from which ``explain`` tells why each failed. Returns the
    cached frame itself, the corrupt-record column included: ``read_data`` hides it and
    unpersists this."""
    if read.source is None:
        return read.frame
    source = read.source
    frame = read.frame.cache()
    checks = [F.count_if(_col(CORRUPT).isNotNull())] if read.corrupt else [F.lit(0)]
    checks += [F.count_if(_col(name).isNull()) for name in read.required]
    try:
        counts = _run(source, lambda: frame.agg(*checks).first())
        if counts[0]:
            parsed = [_col(c).cast("string") for c in frame.columns if c != CORRUPT]
            bad = frame.where(_col(CORRUPT).isNotNull()).select(_col(CORRUPT), *parsed)
            found = _run(source, lambda: bad.limit(SHOWN).collect())
            explain = read.explain
            records = [(r[0], explain(r[0], r[1:]) if explain else None) for r in found]
            raise _malformed(source, counts[0], records)
        nulls = [(n, c) for n, c in zip(read.required, counts[1:], strict=True) if c]
        if nulls:
            raise ReadError(
                "\n".join(
                    f"{source.path}: column {n!r} is NOT NULL but {c} record"
                    f"{'s have' if c != 1 else ' has'} no value"
                    for n, c in nulls
                ),
                path=source.path,
            )
    except ReadError:
        frame.unpersist()
        raise
    return frame


def _guarded(read: _Unchecked) -> DataFrame:
    """The data with the check folded into it: a job that computes a malformed record, or
    a NULL in a NOT NULL column, fails (its message is Spark's, hence the recheck of
    ``read_data``). The filter keeps every row and sits on the scan, below anything a
    query adds; referencing the corrupt-record column also keeps Spark's CSV reader from
    skipping the columns the query does not use, so every field is still parsed."""
    bad = [_col(CORRUPT).isNotNull()] if read.corrupt else []
    bad += [_col(name).isNull() for name in read.required]
    if read.source is None or not bad:
        return read.frame
    message = f"{read.source.path}: a malformed record or a NULL in a NOT NULL column"
    failure = F.raise_error(F.lit(message))
    return read.frame.where(F.when(reduce(or_, bad), failure).otherwise(F.lit(True)))


def _malformed(source: _Source, count: int, records: Sequence[tuple[str, str | None]]) -> ReadError:
    """Quote the malformed records, each with why it failed when known, at their lines
    in the file. Spark gives each bad record's raw text but not where it was, so the
    file is scanned for those texts; every line with such a text is itself malformed,
    for the same reason (parsing is deterministic)."""
    reasons: dict[str, str | None] = {}
    for text, reason in records:
        reasons.setdefault(text, reason)

    def quoted(text: str) -> str:
        reason = reasons.get(text)
        return f"malformed record: {_clip(text)}" + (f": {reason}" if reason else "")

    located = list(_locate(source, set(reasons)))
    if located:
        messages = [f"{source.path}: {source.label(n)}: {quoted(t)}" for n, t in located]
    else:
        messages = [f"{source.path}: {quoted(t)}" for t, _ in records]
    if count > len(messages):
        messages.append(f"{source.path}: and {count - len(messages)} more malformed records")
    return ReadError("\n".join(messages), path=source.path, lines=tuple(n for n, _ in located))


def _locate(source: _Source, texts: set[str]) -> Iterator[tuple[int, str]]:
    """The first ``SHOWN`` lines of ``source.data`` whose text is one of ``texts``,
    skipping a CSV header line (line ends ``\\n``, ``\\r\\n`` and ``\\r``, as Spark)."""
    found = 0
    with source.data.open(encoding=source.encoding, errors="replace", newline="") as file:
        for number, line in enumerate(file, start=1):
            text = line.rstrip("\r\n")
            if text in texts and not (source.header and number == 1):
                yield number, text
                found += 1
                if found == SHOWN:
                    return


def _not_valid(field: StructField, value: str) -> str:
    """A column's value that does not convert, its type in DDL spelling."""
    type_name = field.dataType.simpleString().upper()
    return f"column {field.name} ({type_name}): {value} is not a valid {type_name}"


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
