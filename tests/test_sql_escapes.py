"""The second sandbox corpus: SQL that would make the runner fetch a URL or read a file
through the XML, JSON, CSV, Avro and Protobuf functions, on the shared SparkSession.

A canary HTTP server on 127.0.0.1 serves the schemas and DTDs the queries name; it must
receive no request at all. Every attempt goes through each path SQL from a manifest or
a user takes: the plan's check (``check_query``), a derivative's run at apply
(``apply_transform``, then the rows are fetched), a root's preprocess at ingest
(``preprocess``) and ``reconcile sql`` (``run_sql``). The XML functions that stay
allowed are then run over documents naming an external DTD and external entities, and
must not fetch them either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.engine.query_check import QueryError, apply_transform, check_query
from reconciler.ingest.preprocess import PreprocessError, preprocess
from reconciler.inspection.sql import SqlError, run_sql
from reconciler.odf.models import DatasetVocabulary, TransformSql
from reconciler.odf.repository import OdfRepository
from reconciler.plan.model import Column

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

XSD = (
    b'<?xml version="1.0"?><xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">'
    b'<xs:element name="r" type="xs:string"/></xs:schema>'
)
DTD = b'<!ENTITY leak "LEAKED">'


@dataclass
class Canary:
    """A server that records every path it is asked for."""

    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            body = DTD if self.path.endswith(".dtd") else XSD
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            """Silent: the test reads ``requests``."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Canary(f"http://127.0.0.1:{server.server_port}", requests)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory, canary: Canary) -> Path:
    """A local XSD that includes one from the canary: reading it would make a request."""
    folder = tmp_path_factory.mktemp("schemas")
    (folder / "include.xsd").write_text(
        '<?xml version="1.0"?><xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">'
        f'<xs:include schemaLocation="{canary.url}/included.xsd"/></xs:schema>'
    )
    (folder / "plain.xsd").write_bytes(XSD)
    return folder


DTD_DOC = '<!DOCTYPE r SYSTEM "{url}/external.dtd"><r><a>1</a></r>'
ENTITY_DOC = '<!DOCTYPE r [<!ENTITY e SYSTEM "{url}/entity.txt">]><r><a>&e;</a></r>'
XSD_OPTION = (
    "not allowed: gives {function} the option '{option}', which makes Spark load a file or URL"
)
NOT_LITERAL = "not allowed: gives {function} options that are not a map() of string literals"
XPATH = "not allowed: calls {function}, whose XML parser fetches external DTDs"
DESCRIPTOR = (
    "not allowed: {function} reads a descriptor file or loads a Java class;"
    " give the descriptor inline as a binary literal (X'...')"
)

# (query, the error after "`query`: "). {url} is the canary, {dir} the schemas.
ESCAPES: dict[str, tuple[str, str]] = {
    "from_xml validating against an XSD over http": (
        "SELECT from_xml('<r>1</r>', 'a INT', map('rowValidationXSDPath', '{url}/a.xsd')) AS x",
        XSD_OPTION.format(function="from_xml", option="rowValidationXSDPath"),
    ),
    "from_xml validating against a local XSD": (
        "SELECT from_xml('<r>1</r>', 'a INT', map('rowValidationXSDPath', '{dir}/plain.xsd')) AS x",
        XSD_OPTION.format(function="from_xml", option="rowValidationXSDPath"),
    ),
    "from_xml with a local XSD that includes a URL": (
        "SELECT from_xml('<r>1</r>', 'a INT', map('rowValidationXSDPath', '{dir}/include.xsd')) AS x",
        XSD_OPTION.format(function="from_xml", option="rowValidationXSDPath"),
    ),
    "the option name in another case": (
        "SELECT from_xml('<r>1</r>', 'a INT', map('ROWVALIDATIONXSDPATH', '{url}/b.xsd')) AS x",
        XSD_OPTION.format(function="from_xml", option="ROWVALIDATIONXSDPATH"),
    ),
    "schema_of_xml validating against an XSD": (
        "SELECT schema_of_xml('<r>1</r>', map('rowValidationXSDPath', '{url}/c.xsd')) AS x",
        XSD_OPTION.format(function="schema_of_xml", option="rowValidationXSDPath"),
    ),
    "from_xml called through IDENTIFIER()": (
        "SELECT IDENTIFIER('from_xml')('<r>1</r>', 'a INT',"
        " map('rowValidationXSDPath', '{url}/d.xsd')) AS x",
        XSD_OPTION.format(function="from_xml", option="rowValidationXSDPath"),
    ),
    "an XSD option in a CTE nobody reads": (
        "WITH v AS (SELECT from_xml('<r/>', 'a INT', map('rowValidationXSDPath', '{url}/e.xsd'))"
        " AS x) SELECT 1 AS one",
        XSD_OPTION.format(function="from_xml", option="rowValidationXSDPath"),
    ),
    "an option name built by an expression": (
        "SELECT from_xml('<r>1</r>', 'a INT',"
        " map('rowValidation' || 'XSDPath', '{url}/f.xsd')) AS x",
        NOT_LITERAL.format(function="from_xml"),
    ),
    "an option value built by an expression": (
        "SELECT from_xml('<r>1</r>', 'a INT',"
        " map('rowValidationXSDPath', concat('{url}', '/g.xsd'))) AS x",
        NOT_LITERAL.format(function="from_xml"),
    ),
    "options from map_from_arrays": (
        "SELECT schema_of_xml('<r/>',"
        " map_from_arrays(array('rowValidationXSDPath'), array('{url}/h.xsd'))) AS x",
        NOT_LITERAL.format(function="schema_of_xml"),
    ),
    "options from a subquery's map": (
        "SELECT from_json('1', 'a INT', (SELECT map('mode', 'FAILFAST'))) AS x",
        NOT_LITERAL.format(function="from_json"),
    ),
    "from_csv options from a string function": (
        "SELECT from_csv('1', 'a INT', str_to_map('path:{dir}')) AS x",
        NOT_LITERAL.format(function="from_csv"),
    ),
    "a JSON option naming a file": (
        "SELECT from_json('1', 'a INT', map('schemaFile', '{dir}/plain.xsd')) AS x",
        XSD_OPTION.format(function="from_json", option="schemaFile"),
    ),
    "from_avro with a schema URL": (
        "SELECT from_avro(X'02', '\"int\"', map('avroSchemaUrl', '{url}/i.avsc')) AS x",
        XSD_OPTION.format(function="from_avro", option="avroSchemaUrl"),
    ),
    "xpath_string with an external DTD": (
        f"SELECT xpath_string('{DTD_DOC}', 'r/a') AS x",
        XPATH.format(function="xpath_string"),
    ),
    "xpath with an external entity": (
        f"SELECT xpath('{ENTITY_DOC}', 'r/a/text()') AS x",
        XPATH.format(function="xpath"),
    ),
    "xpath_int": (f"SELECT xpath_int('{DTD_DOC}', 'r/a') AS x", XPATH.format(function="xpath_int")),
    "xpath_boolean": (
        f"SELECT xpath_boolean('{DTD_DOC}', 'r/a') AS x",
        XPATH.format(function="xpath_boolean"),
    ),
    "xpath_number": (
        f"SELECT xpath_number('{DTD_DOC}', 'r/a') AS x",
        XPATH.format(function="xpath_number"),
    ),
    "xpath_long in a lambda": (
        f"SELECT transform(array('{DTD_DOC}'), d -> xpath_long(d, 'r/a')) AS x",
        XPATH.format(function="xpath_long"),
    ),
    "xpath_double in a subquery": (
        f"SELECT (SELECT xpath_double('{DTD_DOC}', 'r/a')) AS x",
        XPATH.format(function="xpath_double"),
    ),
    "xpath_float through IDENTIFIER()": (
        f"SELECT IDENTIFIER('xpath_float')('{DTD_DOC}', 'r/a') AS x",
        XPATH.format(function="xpath_float"),
    ),
    "from_protobuf with a descriptor over http": (
        "SELECT from_protobuf(X'08', 'M', '{url}/m.desc') AS x",
        DESCRIPTOR.format(function="from_protobuf"),
    ),
    "to_protobuf with a local descriptor file": (
        "SELECT to_protobuf(named_struct('a', 1), 'M', '{dir}/m.desc') AS x",
        DESCRIPTOR.format(function="to_protobuf"),
    ),
    "from_protobuf naming a Java class": (
        "SELECT from_protobuf(X'08', 'com.example.Message') AS x",
        DESCRIPTOR.format(function="from_protobuf"),
    ),
    "from_protobuf with a descriptor path built by an expression": (
        "SELECT from_protobuf(X'08', 'M', concat('{url}', '/n.desc')) AS x",
        DESCRIPTOR.format(function="from_protobuf"),
    ),
}


def attempt(query: str, canary: Canary, schemas: Path) -> str:
    return query.replace("{url}", canary.url).replace("{dir}", str(schemas))


def sql(query: str) -> TransformSql:
    return TransformSql(engine="spark", query=query)


INPUT = (Column("doc", "string"),)


@pytest.mark.parametrize(("query", "reason"), ESCAPES.values(), ids=ESCAPES.keys())
def test_the_plan_check_refuses_the_escape(
    spark: SparkSession, canary: Canary, schemas: Path, query: str, reason: str
) -> None:
    check = check_query(spark, "acme.out", {"src": INPUT}, sql(attempt(query, canary, schemas)))
    assert (check.ok, check.error) == (False, f"`query`: {reason}")
    assert canary.requests == []


@pytest.mark.parametrize(("query", "reason"), ESCAPES.values(), ids=ESCAPES.keys())
def test_a_derivative_run_refuses_the_escape(
    spark: SparkSession, canary: Canary, schemas: Path, query: str, reason: str
) -> None:
    frame = spark.createDataFrame([("<r/>",)], "doc string")
    with pytest.raises(QueryError) as refused:
        apply_transform(spark, {"src": frame}, sql(attempt(query, canary, schemas))).collect()
    assert refused.value.message == f"`query`: {reason}"
    assert canary.requests == []


@pytest.mark.parametrize(("query", "reason"), ESCAPES.values(), ids=ESCAPES.keys())
def test_ingest_refuses_the_escape_in_a_preprocess_query(
    spark: SparkSession, canary: Canary, schemas: Path, query: str, reason: str
) -> None:
    frame = spark.createDataFrame([("<r/>",)], "doc string")
    transform = sql(attempt(query, canary, schemas))
    with pytest.raises(PreprocessError) as refused:
        preprocess(spark, frame, transform, DatasetVocabulary(), has_read_schema=True).collect()
    assert str(refused.value) == f"preprocess query failed (line 1): `query`: {reason}"
    assert canary.requests == []


@pytest.mark.parametrize(("query", "reason"), ESCAPES.values(), ids=ESCAPES.keys())
def test_reconcile_sql_refuses_the_escape(
    spark: SparkSession, canary: Canary, schemas: Path, tmp_path: Path, query: str, reason: str
) -> None:
    (tmp_path / "odf").mkdir()
    with pytest.raises(SqlError) as refused:
        run_sql(spark, OdfRepository(tmp_path / "odf"), attempt(query, canary, schemas))
    assert refused.value.message == reason
    assert canary.requests == []


# XML functions that stay allowed, run over documents that name a DTD or an entity on the
# canary: Spark's StAX parser resolves neither, and drops the unresolved entity.
ALLOWED_XML: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    "from_xml over a document with an external DTD": (
        f"SELECT from_xml('{DTD_DOC}', 'a INT').a AS x",
        [(1,)],
    ),
    "from_xml over a document with an external entity": (
        f"SELECT from_xml('{ENTITY_DOC}', 'a STRING').a AS x",
        [(None,)],
    ),
    "schema_of_xml over a document with an external DTD": (
        f"SELECT schema_of_xml('{DTD_DOC}') AS x",
        [("STRUCT<a: BIGINT>",)],
    ),
    "from_xml with a harmless option": (
        f"SELECT from_xml('{DTD_DOC}', 'a INT', map('mode', 'FAILFAST')).a AS x",
        [(1,)],
    ),
}


@pytest.mark.parametrize(("query", "expected"), ALLOWED_XML.values(), ids=ALLOWED_XML.keys())
def test_allowed_xml_parsing_resolves_no_dtd_and_no_entity(
    spark: SparkSession, canary: Canary, query: str, expected: list[tuple[Any, ...]]
) -> None:
    frame = spark.createDataFrame([("<r/>",)], "doc string")
    transform = sql(attempt(query, canary, Path()))
    rows = apply_transform(spark, {"src": frame}, transform).collect()
    assert [tuple(row) for row in rows] == expected
    assert canary.requests == []


def test_the_canary_does_answer_a_request(canary: Canary) -> None:
    """The server the corpus relies on is really listening: silence means no request."""
    import urllib.request

    with urllib.request.urlopen(f"{canary.url}/probe.xsd", timeout=10) as response:
        assert response.read() == XSD
    assert canary.requests == ["/probe.xsd"]
    canary.requests.clear()
