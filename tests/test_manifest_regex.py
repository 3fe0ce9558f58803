"""A manifest's regexes run on RE2 (``reconciler.manifest_regex``): linear time on file
names a pull request chooses, and the same groups, hence the same event times, as before.

Python's backtracking ``re`` took minutes on ``^(\\d{0,4})(?:1|11)*$`` and 46 ``1``s (about
1.6 times longer per character), and seconds on a run of adjacent ``\\d*``: the plan's
pending-data check matches every new file's name, so a pull request chose both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.ingest.fetch import EventTimeError, event_time_from_name
from reconciler.manifest_regex import ManifestRegexError, compile_regex
from reconciler.odf import Timestamp, models
from reconciler.plan.patterns import regex_problem

RUST = "kamu's regex engine (Rust) does not support"


def from_path(pattern: str, timestamp_format: str | None = None) -> models.EventTimeSourceFromPath:
    if timestamp_format is None:
        return models.EventTimeSourceFromPath(pattern=pattern)
    return models.EventTimeSourceFromPath(pattern=pattern, timestampFormat=timestamp_format)


# ------------------------------------------------------------------ the plan, end to end

ALTERNATION = r"^(\d{0,4})(?:1|11)*$"
ADJACENT_STARS = r"^(\d*)" + r"\d*" * 15 + r"x$"


def _manifest(name: str, folder: str, pattern: str) -> str:
    # A YAML single-quoted scalar keeps each backslash as it is.
    return (
        f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Root\n"
        "  metadata:\n"
        "    - kind: SetPollingSource\n"
        f"      fetch: {{kind: FilesGlob, path: 'sources/{folder}/*.csv', eventTime: "
        f"{{kind: FromPath, pattern: '{pattern}'}}}}\n"
        "      read: {kind: Csv, header: true, schema: ['a BIGINT']}\n"
        "      merge: {kind: Append}\n"
    )


def test_the_plan_matches_crafted_file_names_in_linear_time(tmp_path: Path) -> None:
    """A backtracking engine needs hours on these names (46 characters took minutes); the
    timeout only bounds the test. The plan says exactly what it said before: the name does
    not match, and apply would stop at that file."""
    root = tmp_path / "repo"
    (root / "datasets").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "odf"\n')
    crafted = {"r": "1" * 60 + "!.csv", "s": "1" * 60 + "!.csv"}
    for folder, pattern in (("r", ALTERNATION), ("s", ADJACENT_STARS)):
        name = f"org.example.{folder}"
        (root / "datasets" / f"{name}.yaml").write_text(_manifest(name, folder, pattern))
        (root / "sources" / folder).mkdir(parents=True)
        (root / "sources" / folder / crafted[folder]).write_text("a\n1\n")

    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "-C", str(root), "--plan", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    problems = json.loads(done.stdout)["problems"]
    assert problems == [
        {
            "message": f"fromPath pattern '{pattern}' does not match file name "
            f"'{crafted[folder]}': apply would stop at this file, and read no file after it",
            "dataset": f"org.example.{folder}",
            "location": {
                "file": f"datasets/org.example.{folder}.yaml",
                "line": 8,
                "column": 94,
            },
            "field": "content.metadata[0].fetch.eventTime.pattern",
            "severity": "error",
        }
        for folder, pattern in (("r", ALTERNATION), ("s", ADJACENT_STARS))
    ]


# ------------------------------------------------------------------- event times, exact


@pytest.mark.parametrize(
    ("pattern", "timestamp_format", "name", "expected"),
    [
        (r"data-(\d+-\d+-\d+)\.csv", None, "data-2020-10-01.csv", "2020-10-01T00:00:00Z"),
        (r"orders-(\d{4}-\d{2}-\d{2})", None, "orders-2026-01-05.csv", "2026-01-05T00:00:00Z"),
        (r"[^_]+_(\d{4}-\d{2}-\d{2})", None, "sales_2020-01-31.parquet", "2020-01-31T00:00:00Z"),
        (r"(?P<day>\d{4}-\d\d-\d\d)", None, "x-2026-01-05-y.csv", "2026-01-05T00:00:00Z"),
        # Rust's spelling of a named group, which Python's re (3.11) refused.
        (r"(?<day>\d{4}-\d\d-\d\d)", None, "x-2026-01-05-y.csv", "2026-01-05T00:00:00Z"),
        (r"(?:v\d+_)?(\d{8})", "%Y%m%d", "v2_20260105.csv", "2026-01-05T00:00:00Z"),
        (r"(\d{4})(\d{2})(\d{2})", "%Y", "20201001.csv", "2020-01-01T00:00:00Z"),
        (r"(.+?)(-\d+)?\.csv", None, "2020-10-01-3.csv", "2020-10-01T00:00:00Z"),
        (r"(?i)DATA-(\d+-\d+-\d+)", None, "data-2020-10-01.csv", "2020-10-01T00:00:00Z"),
        (r"(\d+-\d+-\d+)", None, "été-2020-10-01.csv", "2020-10-01T00:00:00Z"),
        (
            r"_(\d{4}-\d\d-\d\d_\d\d\d\d)",
            "%Y-%m-%d_%H%M",
            "dump_2020-10-01_1745.csv",
            "2020-10-01T17:45:00Z",
        ),
        (
            r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d)",
            "%Y-%m-%dT%H:%M:%S%:z",
            "2020-10-01T17:45:00+02:00.csv",
            "2020-10-01T15:45:00Z",
        ),
        # A name that is not UTF-8 (a byte Python decodes as a lone surrogate) is searched too.
        (r"(\d{4}-\d\d-\d\d)", None, "\udcff-2020-10-01.csv", "2020-10-01T00:00:00Z"),
    ],
)
def test_the_event_time_from_a_name_is_the_same_as_before(
    pattern: str, timestamp_format: str | None, name: str, expected: str
) -> None:
    """Values Python's re gave before RE2 took over, each checked against it then."""
    assert regex_problem(pattern) is None
    source = from_path(pattern, timestamp_format)
    assert event_time_from_name(name, source) == Timestamp.parse(expected)


@pytest.mark.parametrize(
    ("pattern", "name", "message"),
    [
        (
            r"(a)?(\d{8})",
            "20260105.csv",
            r"fromPath pattern '(a)?(\d{8})' has no capture group 1 matching '20260105.csv'",
        ),
        (
            r"(\d{8})|(x)",
            "x.csv",
            r"fromPath pattern '(\d{8})|(x)' has no capture group 1 matching 'x.csv'",
        ),
        (
            r"(\d+-\d+-\d+)$",
            "data-2020-10-01.csv",
            r"fromPath pattern '(\d+-\d+-\d+)$' does not match file name 'data-2020-10-01.csv'",
        ),
        (
            r"(\w+)-(\d+)",
            "abc-2020.csv",
            "cannot parse 'abc' (from file name 'abc-2020.csv') with timestamp format '%Y-%m-%d': "
            "time data 'abc' does not match format '%Y-%m-%d'",
        ),
        (
            ALTERNATION,
            "1" * 60 + "!.csv",
            f"fromPath pattern '{ALTERNATION}' does not match file name '{'1' * 60}!.csv'",
        ),
    ],
)
def test_a_name_without_an_event_time_is_the_same_error_as_before(
    pattern: str, name: str, message: str
) -> None:
    with pytest.raises(EventTimeError) as e:
        event_time_from_name(name, from_path(pattern))
    assert str(e.value) == message


def test_apply_reports_a_pattern_re2_refuses_with_its_error() -> None:
    with pytest.raises(EventTimeError) as e:
        event_time_from_name("a.csv", from_path(r"(?=x)(\d+)"))
    assert str(e.value) == r"invalid fromPath pattern '(?=x)(\d+)': invalid perl operator: (?="


# --------------------------------------------------------------------- groups, compiled


def test_groups_are_numbered_and_named_as_python_numbered_them() -> None:
    regex = compile_regex(r"(?:x)?(?P<year>\d{4})-(?<month>\d\d)(-(\d\d))?")
    assert regex.groups == 4
    match = regex.search("report-2026-01.csv")
    assert match is not None
    assert [match.group(i) for i in range(5)] == ["2026-01", "2026", "01", None, None]
    assert (match.group("year"), match.group("month")) == ("2026", "01")


def test_an_error_of_re2_is_cut_and_printable() -> None:
    with pytest.raises(ManifestRegexError) as e:
        compile_regex("(\n" + "a" * 500)
    assert str(e.value) == "missing ): (\\n" + "a" * 106 + "…"


# -------------------------------------------------------------- what the plan refuses


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        # Python's and RE2's backtracking guard is gone: RE2 runs these in linear time,
        # and kamu's engine accepts them.
        (ALTERNATION, None),
        (ADJACENT_STARS, None),
        ("(a+)+$", None),
        ("(" * 20 + "a*" + ")*" * 20 + "(b)", None),
        (r"\p{Greek}{2}(\d)", None),
        (r"x{2,3}?[{](\d+)", None),
        (r"[[:alpha:]{](\d+)", None),
        (r"\C(\d+)", f"uses \\C (any single byte), which {RUST}"),
        (r"\Q.\E(\d+)", f"uses \\Q…\\E quoting, which {RUST}: escape each character with \\"),
        (r"\101(\d+)", f"uses the octal escape \\101, which {RUST}: write \\x{{…}}"),
        (
            r"x{a}(\d+)",
            "uses { as a character, which kamu's regex engine (Rust) reads as a counted "
            "repetition ({n}, {n,} or {n,m}): write \\{ for the character",
        ),
        (r"(a{9999999999})", "has the repetition {9999999999}, which is too large (at most 1000)"),
        (r"(\d{2}){1001}", "is not a valid regular expression: invalid repetition size: {1001}"),
        (r"(?x)(\d+)", "is not a valid regular expression: invalid perl operator: (?x"),
        (r"(a)(?(1)b|c)", f"uses a conditional group, which {RUST}"),
        (r"(\d++)", f"uses a possessive quantifier, which {RUST}"),
    ],
)
def test_the_plan_refuses_what_re2_or_kamus_engine_cannot_run(
    pattern: str, problem: str | None
) -> None:
    assert regex_problem(pattern) == problem
