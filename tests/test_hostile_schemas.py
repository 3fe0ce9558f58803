"""Hostile read schemas and source settings: the plan refuses each, with no JVM, and so
does apply, before anything is fetched, read or written.

Each case is one manifest beside the harness's good dataset (``tests/hostile.py``); it
passes only when ``reconcile --plan`` and ``reconcile`` both exit 1, name the manifest's
file and line, say what is wrong, print no traceback and write nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import Hostile, assert_refused, build, run

BAD = "datasets/org.example.bad.yaml"
GLOB = '{kind: FilesGlob, path: "sources/good/*.csv"}'
SCHEMA = '["a BIGINT", "b STRING"]'


def manifest(
    schema: str = SCHEMA,
    *,
    read: str | None = None,
    merge: str = "{kind: Append}",
    fetch: str = GLOB,
    extra: str = "",
) -> str:
    """A root manifest whose source is on lines 7-10: fetch 8, read 9, merge 10."""
    read = read or f"{{kind: Csv, header: true, schema: {schema}}}"
    return (
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: org.example.bad\n  kind: Root\n"
        "  metadata:\n"
        "    - kind: SetPollingSource\n"
        f"      fetch: {fetch}\n"
        f"      read: {read}\n"
        f"      merge: {merge}\n" + extra
    )


def case(case_id: str, text: str, expect: str, line: int) -> Hostile:
    return Hostile(case_id, {BAD: text}, expect=expect, line=line)


def schema_case(case_id: str, ddl: str, expect: str) -> Hostile:
    return case(case_id, manifest(f"[{ddl}]"), expect, 9)


def from_path(pattern: str, timestamp_format: str = "%Y-%m-%d") -> str:
    return (
        "{kind: FilesGlob, path: 'sources/good/*.csv', eventTime: "
        f"{{kind: FromPath, pattern: '{pattern}', timestampFormat: '{timestamp_format}'}}}}"
    )


def url(value: str) -> str:
    return f"{{kind: Url, url: '{value}'}}"


PUSH = (
    "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: org.example.bad\n  kind: Root\n"
    "  metadata:\n"
    "    - kind: AddPushSource\n"
    "      sourceName: api\n"
    "      read: {kind: NdJson, schema: [SCHEMA]}\n"
    "      merge: MERGE\n"
)

CASES = [
    # --- DDL types
    schema_case("unknown-type", '"a GEOMETRY"', "type 'geometry' is not supported"),
    schema_case("decimal-precision-40", '"a DECIMAL(40,2)"', "DECIMAL(40,2) is out of range"),
    schema_case("decimal-scale-above-precision", '"a DECIMAL(5,6)"', "DECIMAL(5,6) is out of"),
    schema_case("decimal-precision-zero", '"a DECIMAL(0)"', "DECIMAL(0,0) is out of range"),
    schema_case("decimal-negative-scale", '"a DECIMAL(5,-1)"', "must be a number, found '-'"),
    schema_case(
        "decimal-huge-precision", '"a DECIMAL(99999999999999999999999)"', "is too large in"
    ),
    schema_case("unclosed-parenthesis", '"a DECIMAL(10,2"', "missing ')' to close DECIMAL("),
    schema_case("extra-parenthesis", '"a DECIMAL(10,2))"', "unexpected ')' after the type"),
    schema_case("unclosed-array", '"a ARRAY<INT"', "missing '>' to close ARRAY<"),
    schema_case("empty-array", '"a ARRAY<>"', "expected a type, found '>'"),
    schema_case("map-type", '"a MAP<STRING,INT>"', "type 'map<string,int>' is not supported"),
    schema_case("struct-type", '"a STRUCT<x: INT>"', "type 'struct<x:int>' is not supported"),
    schema_case("binary-type", '"a BINARY"', "type 'binary' is not supported in a read schema"),
    schema_case("timestamp-ntz", '"a TIMESTAMP_NTZ"', "type 'timestamp_ntz' is not supported"),
    schema_case("mysql-int-width", '"a INT(11)"', "type INT takes no parameters"),
    schema_case("trailing-words", '"a INT DEFAULT 0"', "unexpected 'DEFAULT' after the type"),
    schema_case("not-without-null", '"a INT NOT"', "missing 'null' after NOT"),
    schema_case("unquoted-comment", '"a INT COMMENT x"', "COMMENT must be a quoted string"),
    schema_case("deep-nesting", '"a ' + "ARRAY<" * 200 + "INT" + ">" * 200 + '"', "nested more"),
    schema_case("long-garbage", '"a INT ' + "x " * 20000 + '"', "unexpected 'x' after the type"),
    schema_case("no-type", '"lonely"', "expected 'name TYPE', got 'lonely'"),
    schema_case("unterminated-quoted-name", "'\"open INT'", "unterminated quoted name"),
    schema_case("empty-quoted-name", '"`` INT"', "empty column name"),
    schema_case("empty-entry", '""', "the column string is empty"),
    schema_case("trailing-comma", '"a INT,"', "an empty column between commas"),
    case("empty-schema", manifest("[]"), "the read schema is empty", 9),
    # --- column names
    schema_case("duplicate-differing-in-case", '"a INT", "A STRING"', "differ only in case"),
    schema_case("duplicate-in-one-entry", '"a INT, a STRING"', "'a' is declared more than once"),
    schema_case("reserved-name", '"__odf_corrupt_record STRING"', "is reserved"),
    schema_case("system-column-name", '"op INT", "b STRING"', "name of a system column"),
    schema_case("event-time-not-a-time", '"event_time BIGINT"', "must be a DATE or a TIMESTAMP"),
    # --- column references
    case(
        "missing-primary-key",
        manifest(merge="{kind: Ledger, primaryKey: [id]}"),
        "primaryKey 'id' is not a column of the read schema",
        10,
    ),
    case(
        "primary-key-differing-in-case",
        manifest(merge="{kind: Snapshot, primaryKey: [A]}"),
        "did you mean 'a'?",
        10,
    ),
    case(
        "compare-columns-naming-nothing",
        manifest(merge="{kind: Snapshot, primaryKey: [a], compareColumns: [nothing]}"),
        "compareColumns 'nothing' is not a column",
        10,
    ),
    case(
        "empty-primary-key",
        manifest(merge="{kind: Ledger, primaryKey: []}"),
        "primaryKey is empty",
        10,
    ),
    case(
        "repeated-primary-key",
        manifest(merge="{kind: Ledger, primaryKey: [a, a]}"),
        "primaryKey names 'a' more than once",
        10,
    ),
    case(
        "event-time-column-missing",
        manifest(extra="    - kind: SetVocab\n      eventTimeColumn: ts\n"),
        "eventTimeColumn 'ts' is not a column of the read schema of content.metadata[0]",
        12,
    ),
    # --- regexes
    case("regex-unbalanced", manifest(fetch=from_path("x-(\\d+")), "not a valid regular", 8),
    case(
        "regex-bad-range",
        manifest(fetch=from_path("([z-a])")),
        "invalid character class range: z-a",
        8,
    ),
    case("regex-no-group", manifest(fetch=from_path("\\d+")), "has no capture group", 8),
    case("regex-any-byte", manifest(fetch=from_path("\\C(\\d+)")), "uses \\C (any single byte)", 8),
    case(
        "regex-literal-brace",
        manifest(fetch=from_path("x{a}(\\d+)")),
        "uses { as a character, which kamu's regex engine (Rust) reads as a counted repetition",
        8,
    ),
    case("regex-lookbehind", manifest(fetch=from_path("(?<=x)(\\d+)")), "lookahead or look", 8),
    case("regex-backreference", manifest(fetch=from_path("(\\d)\\1")), "a backreference", 8),
    case("regex-huge-repeat", manifest(fetch=from_path("(a{9999999999})")), "too large", 8),
    case("chrono-format", manifest(fetch=from_path("(.*)", "%Y-%Q")), "%Q is not supported", 8),
    # --- URLs and event time sources
    case("ftp-url", manifest(fetch=url("ftp://example.org/a.csv")), "URL scheme 'ftp'", 8),
    case("jar-url", manifest(fetch=url("jar:file:/x.jar!/a.csv")), "URL scheme 'jar'", 8),
    case("data-url", manifest(fetch=url("data:text/csv,a%0A1")), "URL scheme 'data'", 8),
    case("gopher-url", manifest(fetch=url("gopher://example.org/")), "URL scheme 'gopher'", 8),
    case("no-scheme-url", manifest(fetch=url("sources/good/a.csv")), "URL has no scheme", 8),
    case(
        "url-from-path",
        manifest(fetch="{kind: Url, url: 'https://x/', eventTime: {kind: FromPath, pattern: (x)}}"),
        "a Url source cannot take its event time fromPath",
        8,
    ),
    case(
        "glob-from-metadata",
        manifest(
            fetch="{kind: FilesGlob, path: 'sources/good/*.csv', eventTime: {kind: FromMetadata}}"
        ),
        "cannot take its event time fromMetadata",
        8,
    ),
    # --- reader options
    case(
        "two-character-separator",
        manifest(read="{kind: Csv, separator: ';;', schema: [a INT]}"),
        "Csv.separator must be a single character, got ';;'",
        9,
    ),
    case(
        "two-character-quote",
        manifest(read="{kind: Csv, quote: \"''\", schema: [a INT]}"),
        "Csv.quote must be a single character",
        9,
    ),
    case(
        "python-only-encoding",
        manifest(read="{kind: Csv, encoding: latin-1, schema: [a INT]}"),
        "encoding 'latin-1' is not supported",
        9,
    ),
    case(
        "unknown-encoding",
        manifest(read="{kind: NdJson, encoding: klingon, schema: [a INT]}"),
        "encoding 'klingon' is not supported",
        9,
    ),
    case(
        "week-based-timestamp-format",
        manifest(read="{kind: Csv, timestampFormat: YYYY-MM-dd, schema: [a INT]}"),
        "week-based letter 'Y'",
        9,
    ),
    case(
        "unterminated-date-format-quote",
        manifest(read='{kind: NdJson, dateFormat: "yyyy\'T", schema: [a INT]}'),
        "unterminated quoted text",
        9,
    ),
    case(
        "empty-pipe-command",
        manifest(extra="      prepare: [{kind: Pipe, command: []}]\n"),
        "the Pipe command is empty",
        11,
    ),
    # --- push sources
    case(
        "push-source-bad-type",
        PUSH.replace("SCHEMA", '"a DECIMAL(39,0)"').replace("MERGE", "{kind: Append}"),
        "DECIMAL(39,0) is out of range",
        9,
    ),
    case(
        "push-source-missing-key",
        PUSH.replace("SCHEMA", '"a INT"').replace("MERGE", "{kind: Ledger, primaryKey: [k]}"),
        "primaryKey 'k' is not a column",
        10,
    ),
    case(
        "push-source-named-twice",
        PUSH.replace("SCHEMA", '"a INT"').replace("MERGE", "{kind: Append}")
        + PUSH.split("  metadata:\n")[1]
        .replace("SCHEMA", '"a INT"')
        .replace("MERGE", "{kind: Append}"),
        "push source 'api' is already defined by content.metadata[0]",
        12,
    ),
]


def test_the_corpus_has_at_least_forty_cases_with_unique_ids() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_hostile_source_is_refused_by_plan_and_apply(tmp_path: Path, case: Hostile) -> None:
    assert_refused(tmp_path, case)


def test_a_long_hostile_value_is_cut_in_the_message(tmp_path: Path) -> None:
    long_type = "x" * 100_000
    root, _ = build(tmp_path, case("long-type", manifest(f'["a {long_type}"]'), "", 9))
    code, output = run(root, "--plan")
    assert code == 1
    problem = next(line for line in output.splitlines() if "is not supported" in line)
    assert problem.endswith("… (100000 characters) is not supported in a read schema")
    assert len(problem) < 400
