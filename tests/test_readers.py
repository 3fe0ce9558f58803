"""The read stage on real Spark: every ODF reader, its options, and its failures.

Each test writes a tiny real file, reads it with ``read_data`` and compares the exact
rows and Spark schema (or the exact error). Timestamps are compared as UTC text made by
Spark itself, since ``collect`` turns them into naive datetimes in Python's local zone.
"""

from __future__ import annotations

import io
import zipfile
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapefile
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from reconciler.ingest import geo
from reconciler.ingest.readers import CORRUPT, ReadError, read_data, spark_schema
from reconciler.odf import models

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def read(spark: SparkSession, step: Any, path: Path | None, tmp_path: Path) -> DataFrame:
    """The checked data; released from the cache on return, so the tests' later actions
    read the file again (it is still there)."""
    frame = read_or_none(spark, step, path, tmp_path)
    assert frame is not None
    return frame


def read_or_none(
    spark: SparkSession, step: Any, path: Path | None, tmp_path: Path
) -> DataFrame | None:
    with read_data(spark, step, path, tmp_path / "work") as frame:
        return frame


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in frame.collect()]


def utc(frame: DataFrame, name: str) -> list[str]:
    """A timestamp column as ISO text in UTC, rendered by Spark (session zone UTC)."""
    return [r[0] for r in frame.select(F.date_format(name, "yyyy-MM-dd'T'HH:mm:ssXXX")).collect()]


def csv(**kwargs: Any) -> models.ReadStepCsv:
    return models.ReadStepCsv.model_validate(kwargs)


# ------------------------------------------------------------------------ spark_schema


def test_spark_schema_maps_kamu_ddl_types_and_keeps_not_null() -> None:
    schema = spark_schema(
        [
            '"Date (UTC)" DATE NOT NULL',
            "amount DECIMAL(10,2)",
            "event_time TIMESTAMP",
            "name VARCHAR(20), code TEXT",
            "n INTEGER not null",
            "big BIGINT",
            "tags ARRAY<STRING>",
        ]
    )
    assert schema == StructType(
        [
            StructField("Date (UTC)", DateType(), False),
            StructField("amount", DecimalType(10, 2), True),
            StructField("event_time", TimestampType(), True),
            StructField("name", StringType(), True),
            StructField("code", StringType(), True),
            StructField("n", IntegerType(), False),
            StructField("big", LongType(), True),
            StructField("tags", ArrayType(StringType()), True),
        ]
    )
    assert schema.simpleString() == (
        "struct<Date (UTC):date,amount:decimal(10,2),event_time:timestamp,name:string,"
        "code:string,n:int,big:bigint,tags:array<string>>"
    )


def test_spark_schema_rejects_bad_ddl_naming_the_column_string() -> None:
    with pytest.raises(ReadError) as bad_type:
        spark_schema(["a INT", "b GEOMETRY"])
    assert str(bad_type.value) == (
        "read schema column 'b GEOMETRY': type 'geometry' is not supported in a read schema"
    )
    with pytest.raises(ReadError) as no_type:
        spark_schema(["lonely"])
    assert str(no_type.value) == "read schema column 'lonely': expected 'name TYPE', got 'lonely'"
    with pytest.raises(ReadError) as twice:
        spark_schema(["a INT", "a STRING"])
    assert str(twice.value) == "read schema names a column more than once: a"


# --------------------------------------------------------------------------------- csv


def test_csv_with_header_and_schema_gives_typed_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.csv", "city,population\nA,1000\nB,2000\nC,3000\n")
    step = csv(header=True, schema=["city STRING NOT NULL", "population INT NOT NULL"])
    frame = read(spark, step, path, tmp_path)
    assert frame.schema.simpleString() == "struct<city:string,population:int>"
    assert rows(frame) == [("A", 1000), ("B", 2000), ("C", 3000)]


def test_csv_result_is_the_cached_checked_data_without_corrupt_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark's file sources drop NOT NULL; read_data checks it instead (see the NOT NULL
    # test) and spark_schema keeps it for the writer.
    path = write(tmp_path, "in.csv", "A,1\n")
    step = csv(schema=["city STRING NOT NULL", "n INT"])
    with read_data(spark, step, path, tmp_path / "work") as frame:
        assert frame is not None
        assert [(f.name, f.nullable) for f in frame.schema] == [("city", True), ("n", True)]
        assert CORRUPT not in frame.columns
        path.unlink()  # the rows now come from the cache filled by the check
        assert rows(frame) == [("A", 1)]
    # The cache is released on exit: the rows would have to be read again, from nothing.
    with pytest.raises(Py4JJavaError, match="FILE_NOT_EXIST"):
        frame.collect()


def test_csv_without_schema_reads_every_column_as_string(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.csv", "city,population\nA,1000\nB,2000\n")
    frame = read(spark, csv(header=True), path, tmp_path)
    assert frame.schema.simpleString() == "struct<city:string,population:string>"
    assert rows(frame) == [("A", "1000"), ("B", "2000")]


def test_csv_without_header_reads_the_first_line_as_data(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.csv", "city,population\nA,1000\n")
    frame = read(spark, csv(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<_c0:string,_c1:string>"
    assert rows(frame) == [("city", "population"), ("A", "1000")]


def test_csv_without_header_applies_schema_by_position(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.csv", "A,1000\nB,2000\n")
    frame = read(spark, csv(schema=["city STRING", "population BIGINT"]), path, tmp_path)
    assert frame.schema.simpleString() == "struct<city:string,population:bigint>"
    assert rows(frame) == [("A", 1000), ("B", 2000)]


def test_csv_infer_schema_uses_spark_inference(spark: SparkSession, tmp_path: Path) -> None:
    # Spark infers INT where it fits (kamu's DataFusion infers Int64).
    path = write(
        tmp_path,
        "in.csv",
        "city,population,ratio,day,at\nA,1000,0.5,2020-01-02,2020-01-02T03:04:05Z\nB,,1.5,,\n",
    )
    frame = read(spark, csv(header=True, inferSchema=True), path, tmp_path)
    assert frame.schema.simpleString() == (
        "struct<city:string,population:int,ratio:double,day:date,at:timestamp>"
    )
    assert rows(frame.drop("at")) == [
        ("A", 1000, 0.5, date(2020, 1, 2)),
        ("B", None, 1.5, None),
    ]
    assert utc(frame, "at") == ["2020-01-02T03:04:05Z", None]


def test_csv_schema_with_quoted_name_decimal_and_timestamp(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "in.csv",
        "Date (UTC),amount,date\n2020-01-01,12.50,2020-01-01\n2020-01-02,0.1,2020-01-02T10:30:00+02:00\n",
    )
    step = csv(
        header=True,
        schema=['"Date (UTC)" DATE NOT NULL', "amount DECIMAL(10,2)", "date TIMESTAMP"],
        dateFormat="rfc3339",
        timestampFormat="rfc3339",
    )
    frame = read(spark, step, path, tmp_path)
    assert frame.schema.simpleString() == (
        "struct<Date (UTC):date,amount:decimal(10,2),date:timestamp>"
    )
    assert rows(frame.drop("date")) == [
        (date(2020, 1, 1), Decimal("12.50")),
        (date(2020, 1, 2), Decimal("0.10")),
    ]
    # A bare date as a TIMESTAMP is midnight UTC; an offset is converted to UTC.
    assert utc(frame, "date") == ["2020-01-01T00:00:00Z", "2020-01-02T08:30:00Z"]


def test_csv_custom_date_and_timestamp_formats_are_spark_patterns(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.csv", "05/01/2020,05/01/2020 13:14\n")
    step = csv(
        schema=["d DATE", "t TIMESTAMP"],
        dateFormat="dd/MM/yyyy",
        timestampFormat="dd/MM/yyyy HH:mm",
    )
    frame = read(spark, step, path, tmp_path)
    assert rows(frame.drop("t")) == [(date(2020, 1, 5),)]
    assert utc(frame, "t") == ["2020-01-05T13:14:00Z"]


def test_tsv_separator_and_empty_fields_are_null(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.tsv", "1\t2\t3\t4\n1\t\t\t4\n1\t2\t\t\n\t\t3\t4\n")
    step = csv(separator="\t", schema=["a INT", "b INT", "c INT", "d INT"])
    frame = read(spark, step, path, tmp_path)
    assert rows(frame) == [(1, 2, 3, 4), (1, None, None, 4), (1, 2, None, None), (None, None, 3, 4)]


def test_csv_default_escape_is_rfc4180_doubled_quotes(spark: SparkSession, tmp_path: Path) -> None:
    # No escape character by default (kamu v0.250.0): "" inside quotes is one quote and a
    # backslash is an ordinary character.
    path = write(tmp_path, "in.csv", '1,"say ""hi"", ok"\n2,"C:\\dir\\"\n')
    frame = read(spark, csv(schema=["id INT", "text STRING"]), path, tmp_path)
    assert rows(frame) == [(1, 'say "hi", ok'), (2, "C:\\dir\\")]


def test_csv_custom_quote_and_escape(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.csv", "1;'it\\'s; fine'\n2;'plain'\n")
    step = csv(separator=";", quote="'", escape="\\", schema=["id INT", "text STRING"])
    frame = read(spark, step, path, tmp_path)
    assert rows(frame) == [(1, "it's; fine"), (2, "plain")]


def test_csv_null_value_and_empty_fields_become_null(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.csv", "a,b\nNA,1\n,NA\nx,2\n")
    frame = read(
        spark, csv(header=True, nullValue="NA", schema=["a STRING", "b INT"]), path, tmp_path
    )
    assert rows(frame) == [(None, 1), (None, None), ("x", 2)]


def test_empty_file_gives_empty_frame_with_schema_or_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "empty.csv", "")
    frame = read(spark, csv(schema=["a STRING NOT NULL", "b INT"]), path, tmp_path)
    assert frame.schema.simpleString() == "struct<a:string,b:int>"
    assert rows(frame) == []
    assert read_or_none(spark, csv(header=True), path, tmp_path) is None


def test_missing_file_gives_empty_frame_with_schema_or_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.csv"
    frame = read(spark, csv(schema=["a STRING"]), missing, tmp_path)
    assert (frame.schema.simpleString(), rows(frame)) == ("struct<a:string>", [])
    assert read_or_none(spark, csv(), missing, tmp_path) is None
    assert read_or_none(spark, models.ReadStepNdJson(), None, tmp_path) is None


def test_csv_malformed_rows_are_reported_with_line_numbers(
    spark: SparkSession, tmp_path: Path
) -> None:
    # ANSI mode does not make Spark's PERMISSIVE CSV reader fail: `abc` for an INT and a
    # row with too many or too few fields each come back as a row of nulls with the text
    # in the corrupt-record column. read_data turns that into an error.
    path = write(
        tmp_path,
        "bad.csv",
        "city,population\nA,1000\nB,abc\nC,3000,extra\n\nD\nE,5000\n",
    )
    step = csv(header=True, schema=["city STRING", "population INT"])
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f"{path}: line 3: malformed record: B,abc: column population (INT): 'abc' is not a valid INT\n"
        f"{path}: line 4: malformed record: C,3000,extra: it has 3 fields, the schema has 2\n"
        f"{path}: line 6: malformed record: D: it has 1 field, the schema has 2"
    )
    assert caught.value.lines == (3, 4, 6)
    assert caught.value.path == path


def test_csv_ragged_rows_fail_even_without_schema(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "ragged.csv", "a,b\n1,2\n3,4,5\n")
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, csv(header=True), path, tmp_path)
    assert str(caught.value) == (
        f"{path}: line 3: malformed record: 3,4,5: it has 3 fields, the header has 2"
    )


def test_csv_many_malformed_rows_quote_the_first_twenty(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "bad.csv", "".join(f"x{i}\n" for i in range(22)))
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, csv(schema=["n INT"]), path, tmp_path)
    assert str(caught.value) == "\n".join(
        [
            f"{path}: line {i + 1}: malformed record: x{i}: column n (INT): 'x{i}' is not a valid INT"
            for i in range(20)
        ]
        + [f"{path}: and 2 more malformed records"]
    )


def test_csv_malformed_record_names_the_column_that_failed(
    spark: SparkSession, tmp_path: Path
) -> None:
    # PERMISSIVE mode nulls only the fields that fail to convert, so the error names the
    # first column whose value came back null, its type as the DDL spells it; a record
    # with the wrong number of fields says so instead.
    path = write(
        tmp_path,
        "data.csv",
        "event_time,city,temperature_c,price\n"
        "2026-11-01T00:00:00Z,oslo,12.5,80\n"
        "2026-11-01T00:00:00Z,oslo,warm,80\n"
        "a,b\n"
        "yesterday,bergen,9.5,80\n"
        "2026-11-01T00:00:00Z,bergen,9.5,1e20\n"
        f"2026-11-01T00:00:00Z,bergen,{'9' * 70},80\n",
    )
    step = csv(
        header=True,
        schema=[
            "event_time TIMESTAMP",
            "city STRING",
            "temperature_c DOUBLE",
            "price DECIMAL(12,2)",
        ],
    )
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f"{path}: line 3: malformed record: 2026-11-01T00:00:00Z,oslo,warm,80: "
        "column temperature_c (DOUBLE): 'warm' is not a valid DOUBLE\n"
        f"{path}: line 4: malformed record: a,b: it has 2 fields, the schema has 4\n"
        f"{path}: line 5: malformed record: yesterday,bergen,9.5,80: "
        "column event_time (TIMESTAMP): 'yesterday' is not a valid TIMESTAMP\n"
        # 1e20 has more digits than DECIMAL(12,2) holds.
        f"{path}: line 6: malformed record: 2026-11-01T00:00:00Z,bergen,9.5,1e20: "
        "column price (DECIMAL(12,2)): '1e20' is not a valid DECIMAL(12,2)"
    )
    assert caught.value.lines == (3, 4, 5, 6)


def test_csv_malformed_record_is_split_with_the_step_quote_and_escape(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Split naively on the separator, these records would have four fields, not three.
    path = write(tmp_path, "data.csv", '1,"Oslo, Norway",12.5\n2,"Bergen, ""west""",warm\n')
    step = csv(schema=["id INT", "place STRING", "temperature_c DOUBLE"])
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f'{path}: line 2: malformed record: 2,"Bergen, ""west""",warm: '
        "column temperature_c (DOUBLE): 'warm' is not a valid DOUBLE"
    )
    custom = write(tmp_path, "data.ssv", "1;'it\\'s; fine';x\n")
    step = csv(separator=";", quote="'", escape="\\", schema=["id INT", "s STRING", "n INT"])
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, custom, tmp_path)
    assert str(caught.value) == (
        f"{custom}: line 1: malformed record: 1;'it\\'s; fine';x: "
        "column n (INT): 'x' is not a valid INT"
    )


def test_malformed_record_keeps_the_plain_message_when_the_field_is_unknown(
    spark: SparkSession, tmp_path: Path
) -> None:
    # With nullValue NA, a quoted empty field is an empty string, not a null, and not an
    # INT either; with no value to name, the error only quotes the record.
    path = write(tmp_path, "empty.csv", '1,2\n3,""\n')
    with pytest.raises(ReadError) as empty:
        read_or_none(spark, csv(nullValue="NA", schema=["a INT", "b INT"]), path, tmp_path)
    assert str(empty.value) == f'{path}: line 2: malformed record: 3,""'
    # Spark keeps a backslash escape outside a quote as text where Python's csv module
    # drops it: the STRING column shows the two splits disagree, so nothing is claimed.
    path = write(tmp_path, "escape.csv", "1,C:\\dir\\x,z\n")
    step = csv(escape="\\", schema=["id INT", "path STRING", "n INT"])
    with pytest.raises(ReadError) as escape:
        read_or_none(spark, step, path, tmp_path)
    assert str(escape.value) == f"{path}: line 1: malformed record: 1,C:\\dir\\x,z"
    # Spark reads single-quoted JSON, which json.loads refuses: its parsed column shows
    # the text was JSON enough for Spark.
    path = write(tmp_path, "quotes.ndjson", "{'id': 1, 'value': 'high'}\n")
    step = models.ReadStepNdJson.model_validate({"schema": ["id INT", "value DOUBLE"]})
    with pytest.raises(ReadError) as quotes:
        read_or_none(spark, step, path, tmp_path)
    assert str(quotes.value) == f"{path}: line 1: malformed record: {{'id': 1, 'value': 'high'}}"


def test_csv_null_in_not_null_column_fails(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.csv", "A,1\n,2\n,3\n")
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, csv(schema=["city STRING NOT NULL", "n INT"]), path, tmp_path)
    assert str(caught.value) == f"{path}: column 'city' is NOT NULL but 2 records have no value"


def test_csv_options_must_be_single_characters(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.csv", "a\n")
    for option, message in [
        ({"separator": "::"}, "Csv.separator must be a single character, got '::'"),
        ({"separator": ""}, "Csv.separator must be a single character, got ''"),
        ({"quote": "''"}, "Csv.quote must be a single character, got \"''\""),
        ({"escape": "\\\\"}, "Csv.escape must be a single character, got '\\\\\\\\'"),
    ]:
        with pytest.raises(ReadError) as caught:
            read_or_none(spark, csv(**option), path, tmp_path)
        assert str(caught.value) == message


def test_csv_header_names_are_case_sensitive_and_case_twins_are_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark itself would rename "a,A" to a0/A1 (spark.sql.caseSensitive=false, which is a
    # session setting the reader must not change); kamu keeps both names, so the read
    # fails instead of inventing names.
    path = write(tmp_path, "in.csv", "Name,value\nx,1\n")
    frame = read(spark, csv(header=True), path, tmp_path)
    assert frame.columns == ["Name", "value"]
    twins = write(tmp_path, "twins.csv", "a,A\n1,2\n")
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, csv(header=True), twins, tmp_path)
    assert str(caught.value) == (
        f"{twins}: columns 'a' and 'A' differ only in case, which this Spark session "
        "(spark.sql.caseSensitive=false) cannot hold apart"
    )


def test_csv_encoding_decodes_the_file(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("name,n\nCaf\u00e9,1\n".encode("iso-8859-1"))
    step = csv(header=True, encoding="ISO-8859-1", schema=["name STRING", "n INT"])
    assert rows(read(spark, step, path, tmp_path)) == [("Caf\u00e9", 1)]


def test_csv_file_name_with_glob_characters_is_read_literally(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "data[1]{x}.csv", "a\n")
    assert rows(read(spark, csv(), path, tmp_path)) == [("a",)]


# -------------------------------------------------------------------------------- json


CITIES = (
    '{"result": {"cities": [{"city": "A", "population": 1000}, {"city": "B", "population": 2000}]}}'
)


def test_json_sub_path_reads_the_nested_array(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.json", CITIES)
    step = models.ReadStepJson.model_validate(
        {"subPath": "result.cities", "schema": ["city STRING NOT NULL", "population INT NOT NULL"]}
    )
    frame = read(spark, step, path, tmp_path)
    assert frame.schema.simpleString() == "struct<city:string,population:int>"
    assert rows(frame) == [("A", 1000), ("B", 2000)]


def test_json_root_array_without_schema_infers_sorted_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.json", '[{"z": "A", "a": 1}, {"z": "B", "a": 2.5}]')
    frame = read(spark, models.ReadStepJson(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<a:double,z:string>"
    assert rows(frame) == [(1.0, "A"), (2.5, "B")]


def test_json_wrong_sub_path_and_non_array_are_errors(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.json", CITIES)
    cases = [
        ("result.towns", f"{path}: Sub-path not found: result.towns"),
        ("result.cities.x", f"{path}: Sub-path not found: result.cities.x"),
        ("result", f"{path}: Sub-path does not specify an array: result"),
        (None, f"{path}: Sub-path does not specify an array: ."),
    ]
    for sub_path, message in cases:
        step = models.ReadStepJson.model_validate({"subPath": sub_path})
        with pytest.raises(ReadError) as caught:
            read_or_none(spark, step, path, tmp_path)
        assert str(caught.value) == message


def test_json_record_of_wrong_type_is_reported_by_record_number(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.json", '[{"n": 1}, {"n": "x"}]')
    step = models.ReadStepJson.model_validate({"schema": ["n INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f'{path}: record 2: malformed record: {{"n":"x"}}: column n (INT): "x" is not a valid INT'
    )


# ------------------------------------------------------------------------------ ndjson


def test_ndjson_infers_schema(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.ndjson", '{"b": "x", "a": 1}\n\n{"a": 2, "c": true}\n')
    frame = read(spark, models.ReadStepNdJson(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<a:bigint,b:string,c:boolean>"
    assert rows(frame) == [(1, "x", None), (2, None, True)]


def test_ndjson_with_schema_and_timestamps(spark: SparkSession, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "in.ndjson",
        '{"t": "2020-01-01", "n": 1}\n{"t": "2020-01-01T10:00:00Z", "n": 2}\n',
    )
    step = models.ReadStepNdJson.model_validate({"schema": ["t TIMESTAMP", "n BIGINT"]})
    frame = read(spark, step, path, tmp_path)
    assert frame.schema.simpleString() == "struct<t:timestamp,n:bigint>"
    assert utc(frame, "t") == ["2020-01-01T00:00:00Z", "2020-01-01T10:00:00Z"]


def test_ndjson_malformed_lines_are_reported_with_line_numbers(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(tmp_path, "in.ndjson", '{"n": 1}\n\n{"n": oops\n{"n": 1.5}\n')
    step = models.ReadStepNdJson.model_validate({"schema": ["n INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f'{path}: line 3: malformed record: {{"n": oops: not valid JSON (Expecting value at char 6)\n'
        f'{path}: line 4: malformed record: {{"n": 1.5}}: column n (INT): 1.5 is not a valid INT'
    )
    # Without a schema, unparsable JSON is still an error, not a `_corrupt_record` column.
    with pytest.raises(ReadError) as inferred:
        read_or_none(spark, models.ReadStepNdJson(), path, tmp_path)
    assert str(inferred.value) == (
        f'{path}: line 3: malformed record: {{"n": oops: not valid JSON (Expecting value at char 6)'
    )


def test_ndjson_malformed_record_names_the_column_that_failed(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Keys match column names exactly, as Spark's reader does: "value" is not "Value".
    long = "very " * 20
    path = write(
        tmp_path,
        "in.ndjson",
        '{"sensor": "s1", "Value": 1.5}\n'
        '{"sensor": "s2", "value": 2, "Value": "high"}\n'
        f'{{"sensor": "s3", "Value": "{long}high"}}\n',
    )
    step = models.ReadStepNdJson.model_validate({"schema": ["sensor STRING", "Value DOUBLE"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f'{path}: line 2: malformed record: {{"sensor": "s2", "value": 2, "Value": "high"}}: '
        'column Value (DOUBLE): "high" is not a valid DOUBLE\n'
        f'{path}: line 3: malformed record: {{"sensor": "s3", "Value": "{long}high"}}: '
        f'column Value (DOUBLE): "{long[:59]}… is not a valid DOUBLE'
    )


def test_ndjson_malformed_record_that_is_not_json_says_why(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "in.ndjson",
        '{"sensor": "s1", "value": 1.5}\n{"sensor": "s2" "value": 2}\n"s3"\n',
    )
    step = models.ReadStepNdJson.model_validate({"schema": ["sensor STRING", "value DOUBLE"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f'{path}: line 2: malformed record: {{"sensor": "s2" "value": 2}}: '
        "not valid JSON (Expecting ',' delimiter at char 16)\n"
        f'{path}: line 3: malformed record: "s3": not a JSON object'
    )


def test_ndjson_keys_match_schema_names_case_sensitively(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark's JSON reader matches keys exactly, so a schema column VALUE does not pick up
    # the key "value" (kamu: column names are case-sensitive). Two schema names that
    # differ only in case cannot coexist in this session and are refused.
    path = write(tmp_path, "in.ndjson", '{"value": 1, "Other": 2}\n')
    step = models.ReadStepNdJson.model_validate({"schema": ["VALUE INT", "Other INT"]})
    assert rows(read(spark, step, path, tmp_path)) == [(None, 2)]
    twins = models.ReadStepNdJson.model_validate({"schema": ["Value INT", "value INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, twins, path, tmp_path)
    assert str(caught.value) == (
        f"{path}: columns 'Value' and 'value' differ only in case, which this Spark session "
        "(spark.sql.caseSensitive=false) cannot hold apart"
    )


# ----------------------------------------------------------------------------- geojson

POINT = '{"coordinates":[1.5,2.0],"type":"Point"}'
SQUARE = (
    '{"coordinates":[[[0.0,0.0],[10.0,0.0],[10.0,10.0],[0.0,10.0],[0.0,0.0]]],"type":"Polygon"}'
)
FEATURES = [
    '{"type": "Feature", "properties": {"id": 0, "name": "A"}, "geometry": {"type": "Point", "coordinates": [1.5, 2.0]}}',
    '{"type": "Feature", "properties": {"id": 1, "name": "B"}, "geometry": {"type": "Polygon", "coordinates": [[[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0], [0.0, 0.0]]]}}',
]


def test_geojson_features_become_rows_with_geometry_json(
    spark: SparkSession, tmp_path: Path
) -> None:
    text = '{"type": "FeatureCollection", "features": [' + ",".join(FEATURES) + "]}"
    path = write(tmp_path, "in.geojson", text)
    frame = read(spark, models.ReadStepGeoJson(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<geometry:string,id:bigint,name:string>"
    assert rows(frame) == [(POINT, 0, "A"), (SQUARE, 1, "B")]
    step = models.ReadStepGeoJson.model_validate(
        {"schema": ["id INT NOT NULL", "name STRING", "geometry STRING NOT NULL"]}
    )
    assert rows(read(spark, step, path, tmp_path)) == [(0, "A", POINT), (1, "B", SQUARE)]


def test_geojson_must_be_a_feature_collection(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.geojson", FEATURES[0])
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, models.ReadStepGeoJson(), path, tmp_path)
    assert str(caught.value) == f"{path}: expected a GeoJSON FeatureCollection, got 'Feature'"


def test_ndgeojson_reads_one_feature_per_line(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.ndgeojson", FEATURES[0] + "\n\n" + FEATURES[1] + "\n")
    frame = read(spark, models.ReadStepNdGeoJson(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<geometry:string,id:bigint,name:string>"
    assert rows(frame) == [(POINT, 0, "A"), (SQUARE, 1, "B")]


def test_ndgeojson_errors_name_the_source_line(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "in.ndgeojson", FEATURES[0] + "\n\n" + FEATURES[1] + "\n")
    step = models.ReadStepNdGeoJson.model_validate({"schema": ["id INT", "name INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f"{path}: line 1: malformed record: "
        r'{"id":0,"name":"A","geometry":"{\"coordinates\":[1.5,2.0],\"type\":\"Point\"}"}'
        ': column name (INT): "A" is not a valid INT'
        f"\n{path}: line 3: malformed record: "
        r'{"id":1,"name":"B","geometry":"{\"coordinates\":[[[0.0,0.0],[10.0,0.0],[10.0,10.0],'
        r'[0.0,10.0],[0.0,0.0]]],\"type\":\"Polygon\"}"}'
        ': column name (INT): "B" is not a valid INT'
    )
    not_feature = write(tmp_path, "bad.ndgeojson", FEATURES[0] + '\n{"type": "Point"}\n')
    with pytest.raises(ReadError) as wrong:
        read_or_none(spark, models.ReadStepNdGeoJson(), not_feature, tmp_path)
    assert str(wrong.value) == f"{not_feature}: line 2: expected a Feature, got type 'Point'"


# ----------------------------------------------------------------------------- parquet


def test_parquet_without_and_with_schema(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "name": pa.array(["a", None]),
            "score": pa.array([0.5, 1.5]),
        }
    )
    pq.write_table(table, path)
    frame = read(spark, models.ReadStepParquet(), path, tmp_path)
    assert frame.schema.simpleString() == "struct<id:bigint,name:string,score:double>"
    assert rows(frame) == [(1, "a", 0.5), (2, None, 1.5)]
    step = models.ReadStepParquet.model_validate({"schema": ["name STRING", "id INT NOT NULL"]})
    typed = read(spark, step, path, tmp_path)
    assert typed.schema.simpleString() == "struct<name:string,id:int>"
    assert rows(typed) == [("a", 1), (None, 2)]


def test_parquet_schema_cast_overflow_fails_under_ansi(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"n": pa.array([1, 2**40], pa.int64())}), path)
    step = models.ReadStepParquet.model_validate({"schema": ["n INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value).startswith(
        f'{path}: [CAST_OVERFLOW] The value 1099511627776L of the type "BIGINT" cannot be '
        'cast to "INT" due to an overflow.'
    )


def test_parquet_schema_columns_must_exist_by_exact_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1], "Name": ["a"]}), path)
    step = models.ReadStepParquet.model_validate({"schema": ["id INT", "name STRING", "x INT"]})
    with pytest.raises(ReadError) as caught:
        read_or_none(spark, step, path, tmp_path)
    assert str(caught.value) == (
        f"{path}: the read schema's columns 'name', 'x' are not in the Parquet file, "
        "which has 'id', 'Name'"
    )


# --------------------------------------------------------------------------- shapefile


def shapefile_zip(tmp_path: Path, members: dict[str, list[tuple[float, float, str, int]]]) -> Path:
    """A zip holding one point shapefile per ``members`` key (its path without .shp)."""
    build = tmp_path / "build"
    build.mkdir(exist_ok=True)
    archive = tmp_path / "shapes.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for index, (member, points) in enumerate(members.items()):
            base = build / f"shape{index}"
            with shapefile.Writer(str(base), shapeType=shapefile.POINT) as writer:
                writer.field("name", "C", size=10)
                writer.field("count", "N", size=10, decimal=0)
                for x, y, name, count in points:
                    writer.point(x, y)
                    writer.record(name, count)
            for suffix in (".shp", ".shx", ".dbf"):
                zipped.write(base.with_suffix(suffix), member + suffix)
    return archive


def test_shapefile_records_and_point_geometry(spark: SparkSession, tmp_path: Path) -> None:
    # dBASE numbers are read as doubles, as kamu does.
    archive = shapefile_zip(tmp_path, {"points": [(1.5, 2.0, "a", 1), (-3.0, 4.25, "b", 2)]})
    frame = read(spark, models.ReadStepEsriShapefile(), archive, tmp_path)
    assert frame.schema.simpleString() == "struct<count:double,geometry:string,name:string>"
    assert rows(frame) == [
        (1.0, POINT, "a"),
        (2.0, '{"coordinates":[-3.0,4.25],"type":"Point"}', "b"),
    ]
    step = models.ReadStepEsriShapefile.model_validate(
        {"schema": ["name STRING NOT NULL", "geometry STRING"]}
    )
    assert rows(read(spark, step, archive, tmp_path)) == [
        ("a", POINT),
        ("b", '{"coordinates":[-3.0,4.25],"type":"Point"}'),
    ]


def test_shapefile_sub_path_selects_one_of_several(spark: SparkSession, tmp_path: Path) -> None:
    archive = shapefile_zip(
        tmp_path, {"one/points": [(1.5, 2.0, "a", 1)], "two/points": [(0.0, 0.0, "z", 9)]}
    )
    for sub_path in ("two", "two/points", "two/points.shp", "t*/*.shp"):
        step = models.ReadStepEsriShapefile.model_validate(
            {"subPath": sub_path, "schema": ["name STRING"]}
        )
        assert rows(read(spark, step, archive, tmp_path)) == [("z",)], sub_path
    with pytest.raises(ReadError) as several:
        read_or_none(spark, models.ReadStepEsriShapefile(), archive, tmp_path)
    assert str(several.value) == (
        f"{archive}: the archive contains several .shp files; set subPath to one of: "
        "one/points.shp, two/points.shp"
    )
    step = models.ReadStepEsriShapefile.model_validate({"subPath": "three"})
    with pytest.raises(ReadError) as missing:
        read_or_none(spark, step, archive, tmp_path)
    assert str(missing.value) == (
        f"{archive}: no .shp file in the archive matches subPath 'three'; it contains: "
        "one/points.shp, two/points.shp"
    )


def test_shapefile_polygons_become_multipolygons_like_kamu(tmp_path: Path) -> None:
    # The Rust shapefile crate converts every polygon shape to a MultiPolygon.
    base = tmp_path / "poly"
    with shapefile.Writer(str(base), shapeType=shapefile.POLYGON) as writer:
        writer.field("name", "C", size=10)
        writer.poly([[[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]]])
        writer.record("sq")
        writer.null()
        writer.record("none")
    archive = tmp_path / "poly.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for suffix in (".shp", ".shx", ".dbf"):
            zipped.write(base.with_suffix(suffix), "poly" + suffix)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = io.StringIO()
    assert geo.shapefile_to_ndjson(archive, None, scratch, out) == 2
    assert out.getvalue().splitlines() == [
        '{"name":"sq","geometry":"{\\"coordinates\\":[[[[0.0,0.0],[0.0,10.0],[10.0,10.0],'
        '[10.0,0.0],[0.0,0.0]]]],\\"type\\":\\"MultiPolygon\\"}"}',
        '{"name":"none","geometry":null}',
    ]
