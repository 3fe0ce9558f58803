"""Hostile dataset names: a name from a pull request can never become a path elsewhere.

Every case goes through the real CLI (``tests/hostile.py``): plan and apply both exit 1,
name the manifest and the line of the offending field, print no traceback, and write
nothing, inside the repository or beside it. A repository without ``policies/`` has no
``name_pattern`` rule, so what refuses these names is the spec's grammar itself.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hostile import GOOD_NAME, Hostile, assert_refused, build

from reconciler.config import RepoConfig
from reconciler.plan.model import Location, Problem
from reconciler.plan.render_text import render_text
from reconciler.planning.compose import PlanRequest, make_plan

GRAMMAR = "is not a valid dataset name"
NOT_A_REF = "is not a dataset reference"
FILE = "datasets/x.yaml"
NAME_LINE = 4  # `  name: …` in every manifest below


def root(name: str) -> str:
    """A valid root manifest but for ``name`` (written as a JSON string, which is YAML)."""
    return f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/good/*.csv"}}
      read: {{kind: Csv, header: true, schema: ["a BIGINT", "b STRING"]}}
      merge: {{kind: Append}}
"""


def derivative(inputs: str, name: str = "org.example.derived") -> str:
    """A valid derivative manifest but for ``inputs`` (a YAML flow list, on line 8)."""
    return f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: {inputs}
      transform: {{kind: Sql, engine: spark, query: "SELECT * FROM x"}}
"""


def quoted(value: str) -> str:
    """``value`` as a YAML double-quoted scalar: JSON, with DEL escaped as YAML allows."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\x7f")


def bad_name(id_: str, name: str, expect: str = GRAMMAR) -> Hostile:
    return Hostile(id_, {FILE: root(quoted(name))}, expect, line=NAME_LINE)


NAMES = [
    bad_name("traversal-two-up", "../../escaped"),
    bad_name("traversal-one-up", "../x"),
    bad_name("traversal-inside-dotted-name", "org.example/../../x"),
    bad_name("dot-dot", ".."),
    bad_name("dot", "."),
    bad_name("empty", ""),
    bad_name("absolute-path", "/tmp/escaped"),
    bad_name("absolute-root", "/"),
    bad_name("nested-slashes", "org/example/x"),
    bad_name("trailing-slash", "org.example.x/"),
    bad_name("backslash", "org\\example"),
    bad_name("windows-traversal", "..\\..\\escaped"),
    bad_name("windows-drive", "C:\\escaped"),
    bad_name("nul-byte", "org.example\x00x"),
    bad_name("newline", "org.example\nx"),
    bad_name("carriage-return", "org.example\rx"),
    bad_name("tab", "org.example\tx"),
    bad_name("escape-sequence", "org.\x1b[31mred"),
    bad_name("inner-space", "org example"),
    bad_name("leading-space", " org.example.x"),
    bad_name("trailing-space", "org.example.x "),
    bad_name("star", "*"),
    bad_name("glob", "org.example.*"),
    bad_name("question-mark", "org.example.x?"),
    bad_name("leading-dash", "-org.example"),
    bad_name("trailing-dash", "org.example-"),
    bad_name("dash-before-dot", "org-.example"),
    bad_name("double-dash", "org--example"),
    bad_name("double-dot", "org..example"),
    bad_name("leading-dot", ".org.example"),
    bad_name("trailing-dot", "org.example."),
    bad_name("underscore", "org_example"),
    bad_name("colon", "org:example"),
    bad_name("shell-substitution", "$(touch pwned)"),
    bad_name("backticks", "`id`"),
    bad_name("tilde-home", "~root"),
    bad_name("percent-encoded-dots", "%2e%2e"),
    bad_name("non-ascii-letter", "données.météo"),
    bad_name("fullwidth-letters", "\uff4f\uff52\uff47.example"),
    bad_name(
        "right-to-left-override",
        "org.\u202eelpmaxe",
        "bidirectional control character U+202E is not allowed",  # refused before parsing
    ),
    bad_name("zero-width-space", "org.\u200bexample"),
    bad_name("emoji", "org.example.\U0001f4a9"),
    bad_name("delete-character", "org.example\x7f"),
    bad_name("longer-than-255-bytes", "a" * 256, "is longer than 255 bytes (256)"),
    bad_name("dotted-and-4096-bytes", ".".join(["part"] * 820), "is longer than 255 bytes"),
    Hostile("number-name", {FILE: root("123")}, "Input should be a valid string", line=NAME_LINE),
    Hostile("null-name", {FILE: root("null")}, "Input should be a valid string", line=NAME_LINE),
    Hostile("list-name", {FILE: root("[a, b]")}, "Input should be a valid string", line=NAME_LINE),
    Hostile("mapping-name", {FILE: root("{a: b}")}, "valid string", line=NAME_LINE),
    Hostile(
        "missing-name",
        {FILE: root("x").replace("  name: x\n", "")},
        "required field 'name' is missing",
        line=NAME_LINE,
    ),
]


def bad_ref(id_: str, ref: str, expect: str = NOT_A_REF) -> Hostile:
    return Hostile(id_, {FILE: derivative(f"[{{datasetRef: {quoted(ref)}}}]")}, expect, line=8)


REFS = [
    bad_ref("ref-traversal", "../../escaped"),
    bad_ref("ref-absolute", "/etc"),
    bad_ref("ref-empty", ""),
    bad_ref("ref-dot-dot", ".."),
    bad_ref("ref-account-slash-name", "acme/org.example.good"),
    bad_ref("ref-remote-url", "https://example.org/odf/x"),
    bad_ref("ref-file-url", "file:///etc/passwd"),
    bad_ref("ref-space", "org.example good"),
    bad_ref("ref-newline", "org.example\ngood"),
    bad_ref("ref-non-ascii", "orgé.example"),
    bad_ref("ref-backtick-for-sql", "x` UNION SELECT 1 --"),
    bad_ref("ref-did-key-instead-of-odf", "did:key:z6Mkabc"),
    bad_ref("ref-did-odf-not-multibase", "did:odf:../../x", "is not a valid dataset id"),
    bad_ref("ref-did-odf-empty", "did:odf:", "is not a valid dataset id"),
    bad_ref("ref-did-odf-wrong-key", "did:odf:f" + "00" * 34, "is not a valid dataset id"),
    Hostile(
        "ref-second-input-bad",
        {FILE: derivative(f'[{{datasetRef: {GOOD_NAME}}}, {{datasetRef: "a/b", alias: y}}]')},
        NOT_A_REF,
        line=8,
    ),
]

DUPLICATES = [
    Hostile(
        "name-twice-in-other-case-across-files",
        {"datasets/a.yaml": root("org.example.dup"), "datasets/b.yaml": root("ORG.Example.Dup")},
        "dataset 'ORG.Example.Dup' is defined twice (also in",
        file="datasets/b.yaml",
        line=NAME_LINE,
    ),
    Hostile(
        "good-name-again-in-other-case",
        {FILE: root("Org.Example.Good")},
        "names are case-insensitive",
        line=NAME_LINE,
    ),
    Hostile(
        "name-twice-in-two-documents-of-one-file",
        {FILE: root("org.example.twice") + "---\n" + root("org.example.TWICE")},
        "dataset 'org.example.TWICE' is defined twice",
        line=11 + NAME_LINE,
    ),
    Hostile(
        "alias-defaulted-from-two-refs-differing-in-case",
        {FILE: derivative(f"[{{datasetRef: {GOOD_NAME}}}, {{datasetRef: ORG.EXAMPLE.GOOD}}]")},
        "input alias 'ORG.EXAMPLE.GOOD' is already used by input 0",
        line=8,
    ),
    Hostile(
        "explicit-alias-twice",
        {FILE: derivative(f"[{{datasetRef: {GOOD_NAME}, alias: x}}, {{datasetRef: b, alias: X}}]")},
        "input alias 'X' is already used by input 0",
        line=8,
    ),
    Hostile(
        "explicit-alias-equal-to-a-defaulted-one",
        {FILE: derivative(f"[{{datasetRef: {GOOD_NAME}}}, {{datasetRef: b, alias: {GOOD_NAME}}}]")},
        f"input alias '{GOOD_NAME}' is already used by input 0",
        line=8,
    ),
]

CHAINS = [
    Hostile(
        "chain-folder-with-a-space",
        {"odf/bad name/refs/head": "x"},
        "chain folder not read: 'bad name' is not a valid dataset name",
        file="odf",
    ),
    Hostile(
        "chain-folder-with-a-newline",
        {"odf/bad\nname/refs/head": "x"},
        "chain folder not read: 'bad\\nname' is not a valid dataset name",
        file="odf",
    ),
    Hostile(
        "chain-folder-linked-outside-the-repository",
        {},
        "chain folder not read: dataset folder 'org.example.out' is a symbolic link",
        symlinks={"odf/org.example.out": "{outside}"},
        file="odf",
    ),
    Hostile(
        "chain-folder-linked-elsewhere-in-the-repository",
        {"sources/fake/refs/head": "x"},
        "dataset folder 'org.example.fake' is a symbolic link: a chain is read and written"
        " only in its own folder, never through a link",
        symlinks={"odf/org.example.fake": "../sources/fake"},
        file="odf",
    ),
]


@pytest.mark.parametrize("case", [*NAMES, *REFS, *DUPLICATES, *CHAINS], ids=lambda c: c.id)
def test_a_hostile_name_is_refused_where_it_is_written(tmp_path: Path, case: Hostile) -> None:
    assert_refused(tmp_path, case)


def problems(tmp_path: Path, case: Hostile) -> tuple[Path, list[Problem]]:
    """The case's repository and the problems of its plan."""
    root_dir, _ = build(tmp_path, case)
    return root_dir, list(make_plan(RepoConfig.load(root_dir), PlanRequest()).problems)


def test_a_duplicate_name_names_both_manifests_and_their_lines(tmp_path: Path) -> None:
    root_dir, found = problems(tmp_path, DUPLICATES[0])
    first, second = root_dir / "datasets" / "a.yaml", root_dir / "datasets" / "b.yaml"
    assert found == [
        Problem(
            f"dataset 'ORG.Example.Dup' is defined twice (also in {first}:4 as "
            "'org.example.dup'; names are case-insensitive)",
            dataset="ORG.Example.Dup",
            location=Location(str(second), 4, 9),
            field="content.name",
        )
    ]


def test_a_name_refused_by_the_grammar_is_refused_without_any_policy(tmp_path: Path) -> None:
    root_dir, found = problems(tmp_path, NAMES[0])
    assert not (root_dir / "policies").exists()
    assert found == [
        Problem(
            "'../../escaped' is not a valid dataset name: expected dot-separated parts of "
            "ASCII letters and digits with single inner dashes (like org.example.weather)",
            location=Location(str(root_dir / FILE), 4, 9),
            field="content.name",
        )
    ]


def test_a_duplicate_s_other_manifest_is_shown_relative_to_the_repository(
    tmp_path: Path,
) -> None:
    """The plan as rendered names files relative to the repository, in messages too:
    a CI runner's checkout folder means nothing to the reviewer."""
    root_dir, _ = build(tmp_path, DUPLICATES[0])
    plan = make_plan(RepoConfig.load(root_dir), PlanRequest())
    text = render_text(replace(plan, root=str(root_dir)), color=False)
    assert (
        "  datasets/b.yaml:4:9: ORG.Example.Dup: content.name: dataset 'ORG.Example.Dup' is"
        " defined twice (also in datasets/a.yaml:4 as 'org.example.dup'; names are"
        " case-insensitive)"
    ) in text.splitlines()
    assert str(root_dir) not in text
