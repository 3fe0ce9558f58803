"""Source settings judged by the plan: each check on a real manifest file, exact messages.

Every test loads a manifest from disk with the real loader and runs ``source_problems``
on it, so the lines and field paths are the ones a reviewer sees. No JVM is involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
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

from reconciler.ingest.readers import ReadError, spark_schema
from reconciler.odf.manifest import load_snapshots
from reconciler.odf.names import shown
from reconciler.plan.ddl import DdlError, parse_columns
from reconciler.plan.desired import DesiredDataset
from reconciler.plan.model import Column
from reconciler.plan.source_checks import source_problems

HEAD = """\
kind: DatasetSnapshot
version: 1
content:
  name: org.example.a
  kind: Root
  metadata:
"""
# Line 7 is the first event's first line.


def polling(
    read: str = '{kind: Csv, schema: ["a BIGINT", "b STRING"]}',
    merge: str = "{kind: Append}",
    fetch: str = '{kind: FilesGlob, path: "s/*.csv"}',
) -> str:
    return (
        "    - kind: SetPollingSource\n"
        f"      fetch: {fetch}\n"
        f"      read: {read}\n"
        f"      merge: {merge}\n"
    )


def found(tmp_path: Path, events: str) -> list[tuple[int | None, str | None, str]]:
    """(line, field path, message) of every source problem of the manifest."""
    path = tmp_path / "m.yaml"
    path.write_text(HEAD + events)
    (loaded,) = load_snapshots(path)
    problems = source_problems(DesiredDataset(loaded, ()))
    assert all(p.location is not None and p.location.file == str(path) for p in problems)
    return [(p.location.line if p.location else None, p.field, p.message) for p in problems]


# -------------------------------------------------------------------------------- ddl


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("a INT", Column("a", "int")),
        ("a INTEGER NOT NULL", Column("a", "int", False)),
        ("a LONG", Column("a", "bigint")),
        ("a SHORT", Column("a", "smallint")),
        ("a BYTE", Column("a", "tinyint")),
        ("a REAL", Column("a", "float")),
        ("a BOOL", Column("a", "boolean")),
        ("a TEXT", Column("a", "string")),
        ("a VARCHAR(20)", Column("a", "string")),
        ("a CHAR(3)", Column("a", "string")),
        ("a VARCHAR", Column("a", "string")),
        ("a TIMESTAMP_LTZ", Column("a", "timestamp_ltz")),
        ("a DECIMAL", Column("a", "decimal(10,0)")),
        ("a NUMERIC(5)", Column("a", "decimal(5,0)")),
        ("a DEC(38, 38)", Column("a", "decimal(38,38)")),
        ("a ARRAY<ARRAY<DECIMAL(4,1)>>", Column("a", "array<array<decimal(4,1)>>")),
        ("`a``b` DATE", Column("a`b", "date")),
        ('"Date (UTC)" DATE NOT NULL', Column("Date (UTC)", "date", False)),
        ("a STRING COMMENT 'x, y' NOT NULL", Column("a", "string", False)),
        ('a STRING NOT NULL COMMENT "why"', Column("a", "string", False)),
    ],
)
def test_the_ddl_parser_normalizes_every_accepted_spelling(ddl: str, expected: Column) -> None:
    assert parse_columns([ddl]) == (expected,)


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("a GEOMETRY", "type 'geometry' is not supported in a read schema"),
        ("a BINARY", "type 'binary' is not supported in a read schema"),
        ("a TIMESTAMP_NTZ", "type 'timestamp_ntz' is not supported in a read schema"),
        ("a MAP<STRING, INT>", "type 'map<string,int>' is not supported in a read schema"),
        (
            "a STRUCT<x: INT, `y z` STRING NOT NULL>",
            "type 'struct<x:int,`y z`:string>' is not supported in a read schema",
        ),
        (
            "a DECIMAL(40,2)",
            "DECIMAL(40,2) is out of range: the precision must be 1 to 38 and the scale 0 "
            "to the precision",
        ),
        (
            "a DECIMAL(0)",
            "DECIMAL(0,0) is out of range: the precision must be 1 to 38 and the scale 0 "
            "to the precision",
        ),
        (
            "a DECIMAL(5,6)",
            "DECIMAL(5,6) is out of range: the precision must be 1 to 38 and the scale 0 "
            "to the precision",
        ),
        (
            "a DECIMAL(-1,2)",
            "the precision of DECIMAL must be a number, found '-' in 'DECIMAL(-1,2)'",
        ),
        (
            "a DECIMAL(12345678901234567890)",
            "the precision of DECIMAL 123456789… is too large in 'DECIMAL(12345678901234567890)'",
        ),
        ("a DECIMAL(10,2", "missing ')' to close DECIMAL( in 'DECIMAL(10,2'"),
        ("a DECIMAL(10,2))", "unexpected ')' after the type in 'DECIMAL(10,2))'"),
        ("a ARRAY<INT", "missing '>' to close ARRAY< in 'ARRAY<INT'"),
        ("a ARRAY<>", "expected a type, found '>' in 'ARRAY<>'"),
        ("a ARRAY(INT)", "expected '<' after ARRAY, found '(' in 'ARRAY(INT)'"),
        ("a INT(11)", "type INT takes no parameters, in 'INT(11)'"),
        ("a INT garbage", "unexpected 'garbage' after the type in 'INT garbage'"),
        ("a INT NOT", "missing 'null' after NOT in 'INT NOT'"),
        ("a INT COMMENT x", "COMMENT must be a quoted string, found 'x' in 'INT COMMENT x'"),
        ("lonely", "expected 'name TYPE', got 'lonely'"),
        ('"a b"', "column '\"a b\"' has no type"),
        ('"open INT', "unterminated quoted name in '\"open INT'"),
        ("`` INT", "empty column name in '`` INT'"),
        ("", "the column string is empty"),
        ("a INT,", "an empty column between commas in 'a INT,'"),
        ("a INT,,b INT", "an empty column between commas in 'a INT,,b INT'"),
        (
            "a " + "ARRAY<" * 40 + "INT" + ">" * 40,
            "types are nested more than 32 deep in "
            "'ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<ARRAY<'… (283 characters)",
        ),
    ],
)
def test_the_ddl_parser_refuses_what_the_readers_cannot_read(ddl: str, message: str) -> None:
    with pytest.raises(DdlError) as refused:
        parse_columns([ddl])
    assert str(refused.value) == message


def test_every_type_the_plan_accepts_is_one_the_readers_map() -> None:
    accepted = [
        "a BOOLEAN",
        "b TINYINT",
        "c SMALLINT",
        "d INT",
        "e BIGINT",
        "f FLOAT",
        "g DOUBLE",
        "h DECIMAL(38,0)",
        "i DATE",
        "j TIMESTAMP",
        "k TIMESTAMP_LTZ",
        "l STRING",
        "m VARCHAR",
        "n ARRAY<ARRAY<INT>>",
    ]
    assert spark_schema(accepted) == StructType(
        [
            StructField("a", BooleanType()),
            StructField("b", ByteType()),
            StructField("c", ShortType()),
            StructField("d", IntegerType()),
            StructField("e", LongType()),
            StructField("f", FloatType()),
            StructField("g", DoubleType()),
            StructField("h", DecimalType(38, 0)),
            StructField("i", DateType()),
            StructField("j", TimestampType()),
            StructField("k", TimestampType()),
            StructField("l", StringType()),
            StructField("m", StringType()),
            StructField("n", ArrayType(ArrayType(IntegerType()))),
        ]
    )


def test_ingest_refuses_a_type_with_the_plans_message() -> None:
    with pytest.raises(ReadError) as refused:
        spark_schema(["m MAP<STRING,INT>"])
    assert str(refused.value) == (
        "read schema column 'm MAP<STRING,INT>': type 'map<string,int>' is not supported "
        "in a read schema"
    )


# --------------------------------------------------------------------------- schemas


def test_a_valid_source_has_no_problems(tmp_path: Path) -> None:
    events = polling(
        read="{kind: Csv, separator: ';', quote: '', encoding: UTF-8, timestampFormat: "
        '"yyyy-MM-dd\'T\'HH:mm:ss", schema: ["t TIMESTAMP NOT NULL", "id STRING", '
        '"`Unit price` DECIMAL(12,2), tags ARRAY<STRING>"]}',
        merge="{kind: Snapshot, primaryKey: [id], compareColumns: [Unit price]}",
        fetch="{kind: FilesGlob, path: 's/*.csv', order: ByName, eventTime: "
        "{kind: FromPath, pattern: 'x-(\\d{4}-\\d{2}-\\d{2})\\.csv', timestampFormat: '%Y-%m-%d'}}",
    )
    assert found(tmp_path, events + "    - kind: SetVocab\n      eventTimeColumn: t\n") == []


def test_a_schema_entry_that_does_not_parse_is_refused_at_that_entry(tmp_path: Path) -> None:
    events = polling(read='{kind: Csv, schema: ["a INT", "b DECIMAL(40,2)"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[1]",
            "read schema column 'b DECIMAL(40,2)': DECIMAL(40,2) is out of range: the "
            "precision must be 1 to 38 and the scale 0 to the precision",
        )
    ]


def test_an_empty_read_schema_is_refused(tmp_path: Path) -> None:
    assert found(tmp_path, polling(read="{kind: Csv, schema: []}")) == [
        (
            9,
            "content.metadata[0].read.schema",
            "the read schema is empty: list its columns, or leave 'schema' out",
        )
    ]


def test_columns_declared_twice_or_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    events = polling(read='{kind: Csv, schema: ["a INT", "A STRING", "b INT, a INT"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[1]",
            "columns 'a' and 'A' differ only in case, which Spark "
            "(spark.sql.caseSensitive=false) cannot hold apart",
        ),
        (9, "content.metadata[0].read.schema[2]", "column 'a' is declared more than once"),
    ]


def test_the_reconcilers_column_names_are_reserved(tmp_path: Path) -> None:
    events = polling(read='{kind: Csv, schema: ["__odf_row_id BIGINT"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[0]",
            "column name '__odf_row_id' is reserved: names starting with '__odf_' are the "
            "reconciler's",
        )
    ]


def test_a_system_column_name_in_the_read_schema_is_refused(tmp_path: Path) -> None:
    events = polling(read='{kind: Csv, schema: ["offset BIGINT", "b STRING"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[0]",
            "column 'offset' has the name of a system column; rename it in the read schema "
            "(or in a preprocess query)",
        )
    ]


def test_a_system_column_name_in_another_case_is_refused(tmp_path: Path) -> None:
    """Spark holds ``Offset`` and ``offset`` as one column: the slice was committed, and
    every query of it failed with COLUMN_ALREADY_EXISTS."""
    events = polling(read='{kind: Csv, schema: ["Offset BIGINT", "b STRING"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[0]",
            "column 'Offset' differs only in case from the system column 'offset', which Spark"
            " (spark.sql.caseSensitive=false) cannot hold apart from it; rename it in the read"
            " schema (or in a preprocess query)",
        )
    ]


def test_an_event_time_column_that_is_not_a_time_is_refused(tmp_path: Path) -> None:
    events = polling(read='{kind: Csv, schema: ["event_time STRING", "b STRING"]}')
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[0]",
            "event time column 'event_time' must be a DATE or a TIMESTAMP, not STRING",
        )
    ]


# ----------------------------------------------------------------- column references


def test_a_primary_key_missing_from_the_schema_is_refused_with_a_case_hint(
    tmp_path: Path,
) -> None:
    events = polling(merge="{kind: Ledger, primaryKey: [A]}")
    assert found(tmp_path, events) == [
        (
            10,
            "content.metadata[0].merge.primaryKey[0]",
            "primaryKey 'A' is not a column of the read schema (names are case-sensitive: "
            "did you mean 'a'?); its columns: 'a', 'b'",
        )
    ]


def test_compare_columns_must_name_read_schema_columns(tmp_path: Path) -> None:
    events = polling(merge="{kind: Snapshot, primaryKey: [a], compareColumns: [b, nothing]}")
    assert found(tmp_path, events) == [
        (
            10,
            "content.metadata[0].merge.compareColumns[1]",
            "compareColumns 'nothing' is not a column of the read schema; its columns: 'a', 'b'",
        )
    ]


def test_an_empty_or_repeated_primary_key_is_refused(tmp_path: Path) -> None:
    events = polling(merge="{kind: Ledger, primaryKey: []}") + polling(
        merge="{kind: Snapshot, primaryKey: [a, a]}"
    ).replace("SetPollingSource", "AddPushSource\n      sourceName: p").replace(
        '      fetch: {kind: FilesGlob, path: "s/*.csv"}\n', ""
    )
    assert found(tmp_path, events) == [
        (
            10,
            "content.metadata[0].merge.primaryKey",
            "primaryKey is empty: a Ledger merge needs a key column",
        ),
        (14, "content.metadata[1].merge.primaryKey[1]", "primaryKey names 'a' more than once"),
    ]


def test_the_vocabulary_event_time_column_must_be_in_the_read_schema(tmp_path: Path) -> None:
    events = polling() + "    - kind: SetVocab\n      eventTimeColumn: ts\n"
    assert found(tmp_path, events) == [
        (
            12,
            "content.metadata[1].eventTimeColumn",
            "eventTimeColumn 'ts' is not a column of the read schema of content.metadata[0]; "
            "its columns: 'a', 'b'",
        )
    ]


def test_column_references_are_left_to_the_query_checker_with_a_preprocess(
    tmp_path: Path,
) -> None:
    events = (
        polling(merge="{kind: Ledger, primaryKey: [id]}")
        + "      preprocess: {kind: Sql, engine: spark, query: 'SELECT a AS id FROM input'}\n"
        + "    - kind: SetVocab\n      eventTimeColumn: ts\n"
    )
    assert found(tmp_path, events) == []


def test_without_a_read_schema_no_column_is_checked(tmp_path: Path) -> None:
    events = polling(read="{kind: Csv, header: true}", merge="{kind: Ledger, primaryKey: [x]}")
    assert found(tmp_path, events) == []


# ------------------------------------------------------------------------------ fetch


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "ftp://example.org/a.csv",
            "URL scheme 'ftp' is not supported: only http, https and file URLs can be fetched",
        ),
        (
            "jar:file:/x.jar!/a.csv",
            "URL scheme 'jar' is not supported: only http, https and file URLs can be fetched",
        ),
        (
            "data:text/csv,a%0A1",
            "URL scheme 'data' is not supported: only http, https and file URLs can be fetched",
        ),
        (
            "GOPHER://example.org/",
            "URL scheme 'gopher' is not supported: only http, https and file URLs can be fetched",
        ),
        (
            "sources/a.csv",
            "URL has no scheme: only http, https and file URLs can be fetched",
        ),
    ],
)
def test_url_schemes_the_fetcher_lacks_are_refused(tmp_path: Path, url: str, message: str) -> None:
    events = polling(fetch=f"{{kind: Url, url: '{url}'}}")
    assert found(tmp_path, events) == [(8, "content.metadata[0].fetch.url", message)]


@pytest.mark.parametrize(
    "url", ["https://example.org/a.csv", "HTTP://x/", "file:sources/a.csv", "${{ env.URL }}"]
)
def test_fetchable_and_templated_urls_pass(tmp_path: Path, url: str) -> None:
    assert found(tmp_path, polling(fetch=f"{{kind: Url, url: '{url}'}}")) == []


def test_headers_that_are_no_names_or_route_the_request_elsewhere_are_refused(
    tmp_path: Path,
) -> None:
    """A value with a line break passed the plan and was refused by the fetch (journey 37):
    the plan now tells what the fetch would refuse, without showing the value."""
    headers = (
        "[{name: Host, value: evil.example}, {name: 'X Key', value: a},"
        " {name: X-Forwarded-Host, value: b}, {name: Authorization, value: c},"
        ' {name: X-Forwarded-Prefix, value: /evil}, {name: X-Key, value: "a\\r\\nHost: e"}]'
    )
    events = polling(fetch=f"{{kind: Url, url: 'https://x/a.csv', headers: {headers}}}")
    routes = (
        " may send the request elsewhere than its URL (another host or path), past the review"
        " of the URL and the env-templates prefixes: write the address in the URL"
    )
    assert found(tmp_path, events) == [
        (8, "content.metadata[0].fetch.headers[0].name", f"header 'Host'{routes}"),
        (8, "content.metadata[0].fetch.headers[1].name", "'X Key' is no HTTP header name"),
        (8, "content.metadata[0].fetch.headers[2].name", f"header 'X-Forwarded-Host'{routes}"),
        (8, "content.metadata[0].fetch.headers[4].name", f"header 'X-Forwarded-Prefix'{routes}"),
        (
            8,
            "content.metadata[0].fetch.headers[5].value",
            "the value of header 'X-Key' holds a line break or a NUL character, which HTTP does"
            " not allow",
        ),
    ]


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "busybox:1.36",
        "ghcr.io/acme/tool:v1.2_RC",
        "localhost:5000/a/b-c__d.e",
        "registry.example.org/x/y@sha256:" + "ab" * 32,
        "ghcr.io/acme/tool:${{ env.TAG }}",
        "${{ env.IMAGE }}",
    ],
)
def test_image_references_and_templated_images_pass(tmp_path: Path, image: str) -> None:
    assert found(tmp_path, polling(fetch=f"{{kind: Container, image: '{image}'}}")) == []


@pytest.mark.parametrize(
    "image",
    ["--env=AWS_SECRET_ACCESS_KEY", "-v", "Busybox", "busybox:", "a b", "ghcr.io//x", "x" * 600],
)
def test_an_image_that_is_no_reference_is_refused(tmp_path: Path, image: str) -> None:
    """docker read ``--env=AWS_SECRET_ACCESS_KEY`` in the image's place as an option, which
    copied the runner's secret into the container the next argument named."""
    events = polling(fetch=f"{{kind: Container, image: '{image}'}}")
    message = (
        f"{shown(image)} is no container image reference: [registry[:port]/]name[:tag]"
        "[@digest], its name in lower case"
    )
    assert found(tmp_path, events) == [(8, "content.metadata[0].fetch.image", message)]


def test_container_variables_an_environment_file_cannot_hold_are_refused(
    tmp_path: Path,
) -> None:
    events = polling(
        fetch="{kind: Container, image: busybox, env: ["
        "{name: 'A=B', value: x}, {name: 'X Y'}, {name: OK, value: \"a\\nb\"},"
        " {name: T, value: '${{ env.T }}'}]}"
    )
    assert found(tmp_path, events) == [
        (8, "content.metadata[0].fetch.env[0].name", "'A=B' is no environment variable's name"),
        (8, "content.metadata[0].fetch.env[1].name", "'X Y' is no environment variable's name"),
        (
            8,
            "content.metadata[0].fetch.env[2].value",
            "the value of OK holds a line break or a NUL character, which a container's"
            " environment file cannot hold",
        ),
    ]


def test_event_time_sources_the_fetcher_refuses_are_refused(tmp_path: Path) -> None:
    url = polling(fetch="{kind: Url, url: 'https://x/', eventTime: {kind: FromPath, pattern: (x)}}")
    glob = polling(
        fetch="{kind: FilesGlob, path: a, order: ByEventTime, eventTime: {kind: FromMetadata}}"
    )
    assert found(tmp_path, url + glob) == [
        (
            8,
            "content.metadata[0].fetch.eventTime.kind",
            "a Url source cannot take its event time fromPath (only FilesGlob can)",
        ),
        (
            12,
            "content.metadata[1].fetch.order",
            "FilesGlob can only be ordered ByName, not ByEventTime",
        ),
        (
            12,
            "content.metadata[1].fetch.eventTime.kind",
            "a FilesGlob source cannot take its event time fromMetadata; use fromPath",
        ),
    ]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (
            "x-(\\d+",
            "is not a valid regular expression: missing ): x-(\\d+",
        ),
        ("x-\\d+", "has no capture group: group 1 must capture the time in the file name"),
        (
            "(?=x)(\\d+)",
            "uses lookahead or lookbehind, which kamu's regex engine (Rust) does not support",
        ),
        ("(\\d)\\1", "uses a backreference, which kamu's regex engine (Rust) does not support"),
        ("(?>\\d+)(x)", "uses an atomic group, which kamu's regex engine (Rust) does not support"),
        (
            "x{a}(\\d+)",
            "uses { as a character, which kamu's regex engine (Rust) reads as a counted "
            "repetition ({n}, {n,} or {n,m}): write \\{ for the character",
        ),
    ],
)
def test_from_path_patterns_are_compiled_and_inspected(
    tmp_path: Path, pattern: str, message: str
) -> None:
    fetch = f"{{kind: FilesGlob, path: a, eventTime: {{kind: FromPath, pattern: '{pattern}'}}}}"
    assert found(tmp_path, polling(fetch=fetch)) == [
        (
            8,
            "content.metadata[0].fetch.eventTime.pattern",
            f"fromPath pattern {pattern!r} {message}",
        )
    ]


def test_a_pattern_with_nested_repetitions_is_accepted(tmp_path: Path) -> None:
    """RE2 runs it in linear time on any file name, and kamu's engine accepts it: the
    guard against Python's backtracking (refusing a repetition in a repetition) is gone."""
    pattern = "(" * 20 + "a*" + ")*" * 20 + "(b)"
    fetch = f"{{kind: FilesGlob, path: a, eventTime: {{kind: FromPath, pattern: '{pattern}'}}}}"
    assert found(tmp_path, polling(fetch=fetch)) == []


def test_an_unsupported_chrono_timestamp_format_is_refused(tmp_path: Path) -> None:
    fetch = (
        "{kind: FilesGlob, path: a, eventTime: "
        "{kind: FromPath, pattern: '(.*)', timestampFormat: '%Y-%Q'}}"
    )
    assert found(tmp_path, polling(fetch=fetch)) == [
        (
            8,
            "content.metadata[0].fetch.eventTime.timestampFormat",
            "timestamp format '%Y-%Q': timestamp format directive %Q is not supported",
        )
    ]


def test_an_empty_pipe_command_is_refused(tmp_path: Path) -> None:
    events = polling() + "      prepare: [{kind: Pipe, command: []}]\n"
    assert found(tmp_path, events) == [
        (11, "content.metadata[0].prepare[0].command", "the Pipe command is empty")
    ]


# ------------------------------------------------------------------------------- read


def test_csv_characters_must_be_single(tmp_path: Path) -> None:
    read = "{kind: Csv, separator: '||', quote: '\"\"', escape: '', schema: [a INT]}"
    assert found(tmp_path, polling(read=read)) == [
        (
            9,
            "content.metadata[0].read.separator",
            "Csv.separator must be a single character, got '||'",
        ),
        (9, "content.metadata[0].read.quote", "Csv.quote must be a single character, got '\"\"'"),
    ]


def test_an_empty_csv_separator_is_refused(tmp_path: Path) -> None:
    assert found(tmp_path, polling(read="{kind: Csv, separator: ''}")) == [
        (
            9,
            "content.metadata[0].read.separator",
            "Csv.separator must be a single character, got ''",
        )
    ]


def test_encodings_must_be_known_to_python_and_java(tmp_path: Path) -> None:
    csv = polling(read="{kind: Csv, encoding: latin-1}")
    ndjson = polling(read="{kind: NdJson, encoding: ebcdic-37}")
    json = polling(read="{kind: Json, encoding: ISO-8859-15}")
    assert found(tmp_path, csv + ndjson + json) == [
        (
            9,
            "content.metadata[0].read.encoding",
            "encoding 'latin-1' is not supported: use a name both Python and Java know, "
            "such as utf-8, utf-16le, iso-8859-1 or windows-1252",
        ),
        (
            13,
            "content.metadata[1].read.encoding",
            "encoding 'ebcdic-37' is not supported: use a name both Python and Java know, "
            "such as utf-8, utf-16le, iso-8859-1 or windows-1252",
        ),
    ]


@pytest.mark.parametrize(
    ("field", "pattern", "message"),
    [
        (
            "timestampFormat",
            "YYYY-MM-dd",
            "uses the week-based letter 'Y', which Spark 3 and later do not support",
        ),
        ("dateFormat", "EEE, dd MMM", "uses the letter 'E', which Spark cannot parse with"),
        ("dateFormat", "yyyy-MM-dd#", "uses the reserved character '#'"),
        (
            "timestampFormat",
            "yyyy-bb",
            "uses the letter 'b', which is not a Spark datetime pattern letter",
        ),
        ("timestampFormat", "yyyy-MM-dd'T", "has an unterminated quoted text (')"),
    ],
)
def test_spark_datetime_patterns_spark_refuses_are_refused(
    tmp_path: Path, field: str, pattern: str, message: str
) -> None:
    read = f'{{kind: NdJson, {field}: "{pattern}"}}'
    assert found(tmp_path, polling(read=read)) == [
        (9, f"content.metadata[0].read.{field}", f"{field} {pattern!r} {message}")
    ]


def test_rfc3339_and_quoted_letters_are_valid_datetime_formats(tmp_path: Path) -> None:
    read = "{kind: Csv, dateFormat: RFC3339, timestampFormat: \"yyyy-MM-dd'T'HH:mm:ss.SSSXXX\"}"
    assert found(tmp_path, polling(read=read)) == []


# ------------------------------------------------------------------------ push sources


def test_push_sources_are_checked_like_polling_sources(tmp_path: Path) -> None:
    events = (
        "    - kind: AddPushSource\n"
        "      sourceName: api\n"
        '      read: {kind: NdJson, schema: ["id STRING", "ID INT"]}\n'
        "      merge: {kind: Ledger, primaryKey: [key]}\n"
        "    - kind: AddPushSource\n"
        "      sourceName: api\n"
        '      read: {kind: NdJson, schema: ["v INT"]}\n'
        "      merge: {kind: Append}\n"
    )
    assert found(tmp_path, events) == [
        (
            9,
            "content.metadata[0].read.schema[1]",
            "columns 'id' and 'ID' differ only in case, which Spark "
            "(spark.sql.caseSensitive=false) cannot hold apart",
        ),
        (
            10,
            "content.metadata[0].merge.primaryKey[0]",
            "primaryKey 'key' is not a column of the read schema; its columns: 'id', 'ID'",
        ),
        (
            12,
            "content.metadata[1].sourceName",
            "push source 'api' is already defined by content.metadata[0]",
        ),
    ]
