"""``reconcile sql``: read-only SQL over the ODF repository's datasets, on real Spark.

One small repository is built and ingested once for the module: a Snapshot root whose
second file retracts and corrects rows (so its view shows ``op`` 1, 2 and 3 rows), an
Append root with a DECIMAL column, and a root that has no data yet. The CLI runs in
this process with typer's runner; ``get_spark`` hands it the test session's Spark.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gitops_repo import GitOpsRepo, manifest, reconcile, root_events
from typer.testing import CliRunner, Result

from reconciler.apply.outcome import Status
from reconciler.cli import app
from reconciler.odf import Timestamp

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.usefixtures("spark")

STOCK = "org.example.stock"
PRICES = "org.example.prices"
EMPTY = "org.example.empty"
VOCAB = """- kind: SetVocab
      eventTimeColumn: day"""


@dataclass(frozen=True)
class Built:
    root: Path
    odf_files: dict[str, str]
    """Every file under odf/ with the SHA-256 of its bytes, right after ingest."""


def odf_files(root: Path) -> dict[str, str]:
    odf = root / "odf"
    return {
        str(p.relative_to(odf)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(odf.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Built:
    repo = GitOpsRepo.create(tmp_path_factory.mktemp("sql") / "repo")
    stock = root_events(
        schema="[day DATE, id STRING, qty BIGINT, note STRING]",
        merge="{kind: Snapshot, primaryKey: [id]}",
        extra=VOCAB,
    ).replace("sources/*.csv", "stock/*.csv")
    prices = root_events(schema='[day DATE, id STRING, "price DECIMAL(6,2)"]', extra=VOCAB)
    empty = root_events(schema="[day DATE, id STRING]", extra=VOCAB).replace(
        "sources/*.csv", "none/*.csv"
    )
    repo.write(STOCK, manifest(STOCK, "Root", stock))
    repo.write(PRICES, manifest(PRICES, "Root", prices))
    repo.write(EMPTY, manifest(EMPTY, "Root", empty))
    for folder in ("stock", "sources", "none"):
        (repo.root / folder).mkdir()
    (repo.root / "stock" / "1.csv").write_text(
        'day,id,qty,note\n2026-01-01,a,1,"x, y"\n2026-01-01,b,2,\n'
    )
    (repo.root / "sources" / "1.csv").write_text(
        "day,id,price\n2026-01-01,a,18.90\n2026-01-01,b,0.05\n2026-01-01,c,\n"
    )
    first = reconcile(repo.root, Timestamp.parse("2026-01-01T06:00:00Z"))
    assert [o.status for o in first] == [Status.CREATED] * 3, [o.message for o in first]
    (repo.root / "stock" / "2.csv").write_text("day,id,qty,note\n2026-01-02,b,3,\n")
    second = reconcile(repo.root, Timestamp.parse("2026-01-02T06:00:00.250Z"))
    assert {o.dataset: o.rows for o in second}[STOCK] == 3, second
    return Built(repo.root, odf_files(repo.root))


@pytest.fixture
def root(built: Built) -> Path:
    return built.root


def sql(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["-C", str(root), "sql", *args])


STOCK_TABLE = """\
offset | op | system_time              | day        | id | qty | note
-------+----+--------------------------+------------+----+-----+-----
     0 |  0 | 2026-01-01T06:00:00Z     | 2026-01-01 | a  |   1 | x, y
     1 |  0 | 2026-01-01T06:00:00Z     | 2026-01-01 | b  |   2 | null
     2 |  1 | 2026-01-02T06:00:00.250Z | 2026-01-01 | a  |   1 | x, y
     3 |  2 | 2026-01-02T06:00:00.250Z | 2026-01-01 | b  |   2 | null
     4 |  3 | 2026-01-02T06:00:00.250Z | 2026-01-02 | b  |   3 | null
(5 rows)
"""


def test_a_dataset_is_a_view_of_all_its_rows_as_stored(root: Path) -> None:
    """Both slices, in offset order, with the retraction (op 1) and the correction
    pair (2, 3); numbers right-aligned, NULL as null, timestamps exact to the ms."""
    result = sql(root, f"SELECT * FROM `{STOCK}`")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == STOCK_TABLE


def test_the_table_says_how_many_rows_the_limit_left_out(root: Path) -> None:
    result = sql(root, "--limit", "2", f"SELECT offset, id FROM `{STOCK}`")
    assert (result.exit_code, result.stderr) == (0, "")
    assert (
        result.stdout
        == """\
offset | id
-------+---
     0 | a
     1 | b
(showing 2 of 5 rows; see --limit)
"""
    )


def test_csv_quotes_what_it_must_and_keeps_null_apart_from_empty(
    root: Path, tmp_path: Path
) -> None:
    query = f"SELECT offset, op, system_time, id, note, '' AS blank FROM `{STOCK}` WHERE op <> 3"
    expected = (
        "offset,op,system_time,id,note,blank\n"
        '0,0,2026-01-01T06:00:00Z,a,"x, y",""\n'
        '1,0,2026-01-01T06:00:00Z,b,,""\n'
        '2,1,2026-01-02T06:00:00.250Z,a,"x, y",""\n'
        '3,2,2026-01-02T06:00:00.250Z,b,,""\n'
    )
    result = sql(root, "--format", "csv", query)
    assert (result.exit_code, result.stdout, result.stderr) == (0, expected, "")

    out = tmp_path / "result.csv"
    written = sql(root, "--format", "csv", "--out", str(out), "--limit", "1", query)
    assert (written.exit_code, written.stdout, written.stderr) == (0, "", "")
    assert out.read_text() == "".join(expected.splitlines(keepends=True)[:2])


def test_every_row_is_streamed_from_sparks_tasks_in_the_querys_order(
    root: Path, tmp_path: Path
) -> None:
    """CSV, JSON and Parquet give every row, written by Spark's tasks and read back a
    batch at a time; a join's two columns of one name are fine in CSV, refused where
    names must differ, and nothing is left behind either way."""
    query = (
        f"SELECT s.id, p.id, s.offset FROM `{STOCK}` AS s JOIN `{PRICES}` AS p USING (id)"
        " ORDER BY s.offset DESC"
    )
    as_csv = sql(root, "--format", "csv", query)
    assert (as_csv.exit_code, as_csv.stderr) == (0, "")
    assert as_csv.stdout == "id,id,offset\nb,b,4\nb,b,3\na,a,2\nb,b,1\na,a,0\n"
    # A view is its slices in chain order, each in offset order: no sort, and the
    # parts of the result, one per slice here, are read back in that order.
    in_order = sql(root, "--format", "csv", f"SELECT offset, op FROM `{STOCK}`")
    assert (in_order.exit_code, in_order.stdout) == (0, "offset,op\n0,0\n1,0\n2,1\n3,2\n4,3\n")
    for output_format in ("json", "parquet"):
        out = tmp_path / f"result.{output_format}"
        refused = sql(root, "--format", output_format, "--out", str(out), query)
        assert (refused.exit_code, refused.stdout, refused.stderr) == (
            1,
            "",
            "error: the result has more than one column named `id`; rename them with AS\n",
        )
    assert list(tmp_path.iterdir()) == []
    assert list((root / ".reconcile-cache" / "work").iterdir()) == []


def test_a_reader_that_stops_early_ends_the_export_quietly(root: Path) -> None:
    """``reconcile sql … | head``: no error line and no traceback, and the status of a
    process killed by SIGPIPE (141), as git's commands end."""
    query = f"SELECT explode(sequence(1, 100000)) AS n FROM `{STOCK}`"  # 500,000 rows
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "-C", str(root), "sql", "--format", "csv", query],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == b"n\n"
    process.stdout.close()
    assert process.wait(timeout=300) == 141
    assert process.stderr.read() == b""


def test_a_misspelt_dataset_leaves_nothing_in_the_repository(root: Path) -> None:
    """Looking up a table it does not know makes Spark create its catalog's folder in
    the working directory, unless told where: not in the user's repository."""
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "sql", "SELECT * FROM `org.example.stok`"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `org.example.stok` cannot be"
        " found: did you mean `org.example.stock`?\n"
    )
    assert not (root / "spark-warehouse").exists()


def test_a_missing_view_says_why_when_the_repository_can_tell(root: Path) -> None:
    """Spark's advice on schemas and catalogs fits no dataset view: the reason does."""
    left_out = sql(root, "--select", PRICES, f"SELECT * FROM `{STOCK}`")
    assert (left_out.exit_code, left_out.stdout, left_out.stderr) == (
        1,
        "",
        f"error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `{STOCK}` cannot be found:"
        f" {STOCK} is not among the datasets --select chose\n",
    )
    unquoted = sql(root, f"SELECT *\nFROM {STOCK}")
    assert (unquoted.exit_code, unquoted.stderr) == (
        1,
        f"error: a dotted name must be quoted in backticks: `{STOCK}`\n",
    )
    unknown = sql(root, "SELECT * FROM nothing_like_it")
    assert unknown.stderr == (
        "error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `nothing_like_it` cannot be"
        " found. Verify the spelling and correctness of the schema and catalog.\n"
    )


def test_json_is_one_object_per_row_with_exact_decimals_and_utc_times(root: Path) -> None:
    result = sql(root, "--format", "json", f"SELECT * FROM `{PRICES}`")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (
        '{"offset":0,"op":0,"system_time":"2026-01-01T06:00:00Z","day":"2026-01-01","id":"a","price":"18.90"}\n'
        '{"offset":1,"op":0,"system_time":"2026-01-01T06:00:00Z","day":"2026-01-01","id":"b","price":"0.05"}\n'
        '{"offset":2,"op":0,"system_time":"2026-01-01T06:00:00Z","day":"2026-01-01","id":"c","price":null}\n'
    )


def test_nested_and_special_values_render_the_same_in_every_text_format(root: Path) -> None:
    query = (
        "SELECT array(1, 2) AS a, map('k', 1.5D) AS m, named_struct('d', DATE'2026-01-01') AS s,"
        " X'6162' AS b, double('NaN') AS n, TIMESTAMP_NTZ'2026-01-01 01:02:03.5' AS t,"
        " 'a\tb' AS tab, true AS yes"
    )
    table = sql(root, query)
    assert (table.exit_code, table.stderr) == (0, "")
    assert table.stdout == (
        "a     | m         | s                  | b    |   n | t                       | tab  | yes\n"
        "------+-----------+--------------------+------+-----+-------------------------+------+-----\n"
        '[1,2] | {"k":1.5} | {"d":"2026-01-01"} | 6162 | NaN | 2026-01-01T01:02:03.500 | a\\tb | true\n'
        "(1 row)\n"
    )
    as_json = sql(root, "--format", "json", query)
    assert as_json.stdout == (
        '{"a":[1,2],"m":{"k":1.5},"s":{"d":"2026-01-01"},"b":"6162","n":"NaN",'
        '"t":"2026-01-01T01:02:03.500","tab":"a\\tb","yes":true}\n'
    )


def test_parquet_is_one_file_written_from_sparks_arrow_result(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "prices.parquet"
    result = sql(root, "--format", "parquet", "--out", str(out), f"SELECT * FROM `{PRICES}`")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    table = pq.read_table(out)
    assert table.schema == pa.schema(
        [
            ("offset", pa.int64()),
            ("op", pa.int32()),
            ("system_time", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("id", pa.string()),
            ("price", pa.decimal128(6, 2)),
        ]
    )
    at = dt.datetime(2026, 1, 1, 6, tzinfo=dt.UTC)
    day = dt.date(2026, 1, 1)
    assert [tuple(row.values()) for row in table.to_pylist()] == [
        (0, 0, at, day, "a", decimal.Decimal("18.90")),
        (1, 0, at, day, "b", decimal.Decimal("0.05")),
        (2, 0, at, day, "c", None),
    ]

    nowhere = tmp_path / "no" / "such" / "folder.parquet"
    refused = sql(root, "--format", "parquet", "--out", str(nowhere), f"SELECT * FROM `{PRICES}`")
    assert refused.exit_code == 64  # a usage error before any work, as plan --out's
    assert refused.stderr.splitlines()[-1] == (
        f"Error: --out {nowhere}: folder {nowhere.parent} does not exist"
    )
    folder = sql(root, "--format", "csv", "--out", str(tmp_path), f"SELECT * FROM `{PRICES}`")
    assert (folder.exit_code, folder.stderr) == (
        1,
        f"error: cannot write {tmp_path}: Is a directory\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prices.parquet"]
    missing = sql(root, "--format", "parquet", f"SELECT * FROM `{PRICES}`")
    assert missing.exit_code == 64
    assert missing.stderr.splitlines()[-1] == "Error: --format parquet needs --out FILE"


def test_a_query_joins_two_datasets(root: Path) -> None:
    query = (
        f"SELECT s.id, s.qty, p.price FROM `{STOCK}` AS s JOIN `{PRICES}` AS p USING (id)"
        " WHERE s.op IN (0, 3) ORDER BY s.id, s.qty"
    )
    result = sql(root, query)
    assert (result.exit_code, result.stderr) == (0, "")
    assert (
        result.stdout
        == """\
id | qty | price
---+-----+------
a  |   1 | 18.90
b  |   2 |  0.05
b  |   3 |  0.05
(3 rows)
"""
    )


def test_an_empty_result_has_its_header_and_no_rows(root: Path) -> None:
    query = f"SELECT offset, id FROM `{STOCK}` WHERE id = 'nobody'"
    table = sql(root, query)
    assert (table.exit_code, table.stdout) == (0, "offset | id\n-------+---\n(0 rows)\n")
    as_csv = sql(root, "--format", "csv", query)
    assert (as_csv.exit_code, as_csv.stdout) == (0, "offset,id\n")
    as_json = sql(root, "--format", "json", query)
    assert (as_json.exit_code, as_json.stdout) == (0, "")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        pytest.param(
            "SELECT reflect('java.lang.System', 'exit', 1)",
            "error: not allowed: calls Java reflection (reflect)",
            id="reflection",
        ),
        pytest.param(
            "SELECT * FROM secret",
            "error: not allowed: reads `secret`, which is not an input",
            id="another-view",
        ),
        pytest.param(
            "CREATE TABLE t AS SELECT 1",
            "error: only a single read-only query (SELECT, WITH, VALUES, TABLE) can run here",
            id="command",
        ),
        pytest.param(
            "SELECT * FROM parquet.`/etc/passwd`",
            "error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `parquet`.`/etc/passwd` cannot"
            " be found. Verify the spelling and correctness of the schema and catalog.",
            id="file",
        ),
    ],
)
def test_an_escape_from_the_dataset_views_is_refused_and_nothing_is_written(
    root: Path, tmp_path: Path, spark: SparkSession, query: str, error: str
) -> None:
    spark.range(1).createOrReplaceTempView("secret")
    out = tmp_path / "result.csv"
    try:
        result = sql(root, "--format", "csv", "--out", str(out), query)
    finally:
        spark.catalog.dropTempView("secret")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", error + "\n")
    assert list(tmp_path.iterdir()) == []


def test_engine_errors_are_one_line_with_exit_1(root: Path) -> None:
    unknown = sql(root, f"SELECT *\nFROM `{STOCK}`\nWHERE nope = 1")
    assert (unknown.exit_code, unknown.stdout) == (1, "")
    assert unknown.stderr == (
        "error: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter"
        " with name `nope` cannot be resolved. Did you mean one of the following?"
        " [`op`, `note`, `id`, `day`, `qty`]. (line 3)\n"
    )
    no_data = sql(root, f"SELECT * FROM `{EMPTY}`")
    assert (no_data.exit_code, no_data.stderr) == (
        1,
        f"error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `{EMPTY}` cannot be found:"
        f" {EMPTY} has no data yet\n",
    )
    at_run_time = sql(root, f"SELECT qty / (qty - qty) FROM `{STOCK}`")
    assert (at_run_time.exit_code, at_run_time.stdout) == (1, "")
    # Spark's advice to turn ANSI mode off is dropped: the reconciler refuses that setting.
    assert at_run_time.stderr == (
        "error: [DIVIDE_BY_ZERO] Division by zero."
        " Use `try_divide` to tolerate divisor being 0 and return NULL instead.\n"
    )


def test_a_dataset_named_by_its_old_name_says_what_it_was_renamed_to(root: Path) -> None:
    """A query saved before a rename names the old dataset: as ``reconcile log`` does,
    the error names the new one, in the table and in the streamed formats."""
    path = root / "datasets" / f"{STOCK}.yaml"
    text = path.read_text()
    old = "org.example.old-stock"
    path.write_text(f"# reconcile: renamed-from: {old}\n{text}")
    try:
        results = [sql(root, *fmt, f"SELECT * FROM `{old}`") for fmt in ([], ["--format", "csv"])]
    finally:
        path.write_text(text)
    for result in results:
        assert (result.exit_code, result.stdout, result.stderr) == (
            1,
            "",
            f"error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `{old}` cannot be found:"
            f" {old} was renamed to `{STOCK}`\n",
        )


def test_nothing_is_ever_written_to_the_odf_repository(built: Built) -> None:
    """Run last: the folder is as ingest left it, after every query above."""
    inside = built.root / "odf" / STOCK / "data" / "result.csv"
    result = sql(built.root, "--format", "csv", "--out", str(inside), "SELECT 1 AS x")
    assert result.exit_code == 64
    assert result.stderr.splitlines()[-1] == (
        f"Error: --out {inside}: will not write into the ODF repository"
    )
    assert odf_files(built.root) == built.odf_files
