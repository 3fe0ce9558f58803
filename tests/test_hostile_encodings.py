"""Hostile manifest files: no bytes in a pull request crash the plan or hide a change.

Every case goes through the real CLI (``tests/hostile.py``): plan and apply exit 1 with
the manifest's file and line, no traceback, and nothing written. The deep-nesting bombs
run in a child process, where a stack overflow would be an exit code (139) instead of the
end of the test session; they are refused from the parser's flat event stream before
any tree is built, in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, events, manifest, reconcile
from hostile import GOOD_MANIFEST, GOOD_NAME, Hostile, assert_refused

from reconciler.apply.outcome import Outcome, Status
from reconciler.odf import models
from reconciler.odf.safe_yaml import MAX_BYTES, MAX_DEPTH

FILE = "datasets/x.yaml"
VALID = GOOD_MANIFEST.replace(GOOD_NAME, "org.example.x")
CONTROL = "is not allowed in YAML"
NOT_UTF8 = "not valid UTF-8"
DEEP = f"collections nested deeper than {MAX_DEPTH} levels"
DUPLICATE = "duplicate key"


def case(id_: str, content: str | bytes, expect: str, line: int, **kw: bool) -> Hostile:
    return Hostile(id_, {FILE: content}, expect, line=line, **kw)


def spliced(line: int, text: str) -> str:
    """The valid manifest with ``text`` inserted before its 1-based ``line``."""
    lines = VALID.splitlines(keepends=True)
    return "".join([*lines[: line - 1], text, *lines[line - 1 :]])


ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x02\x00\x3e\x00\x01\x00\x00\x00\xb0\x10\x40"

BYTES = [
    case("nul-first-byte", b"\x00" + VALID.encode(), "U+0000 " + CONTROL, 1),
    case("nul-in-a-value", VALID.replace("org.example.x", "org.\x00x"), "U+0000", 4),
    case("nul-in-a-comment", spliced(3, "# hidden \x00 byte\n"), "U+0000", 3),
    case("bell", VALID.replace("kind: Root", "kind: Root\x07"), "U+0007 " + CONTROL, 5),
    case("delete", VALID.replace("version: 1", "version: 1\x7f"), "U+007F " + CONTROL, 2),
    case("terminal-escape", spliced(2, "# \x1b]0;pwned\x07\n"), "U+001B " + CONTROL, 2),
    case("form-feed", spliced(6, "\x0c\n"), "U+000C " + CONTROL, 6),
    case("vertical-tab", spliced(6, "  \x0b\n"), "U+000B " + CONTROL, 6),
    case("c1-control-csi", VALID.replace("org.example.x", "org.\x9bx"), "U+009B " + CONTROL, 4),
    case("non-character-fffe", spliced(2, "# \ufffe\n"), "U+FFFE " + CONTROL, 2),
    case("elf-header", ELF, "U+007F " + CONTROL, 1),
    case("png-header", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", NOT_UTF8 + " (byte 0x89)", 1),
    case("gzip-header", b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "U+001F " + CONTROL, 1),
    case("utf16-le-without-bom", VALID.encode("utf-16-le"), "U+0000 " + CONTROL, 1),
    case("utf16-be-without-bom", VALID.encode("utf-16-be"), "UTF-16 without a byte-order", 1),
    case("utf16-with-bom", VALID.encode("utf-16"), "file is UTF-16 (byte-order mark)", 1),
    case("utf32-with-bom", VALID.encode("utf-32"), "file is UTF-32 (byte-order mark)", 1),
    case(
        "bidi-override-in-a-description",
        VALID.replace("kind: Root", "kind: Root # \u202eedoc\u202c"),
        "bidirectional control character U+202E is not allowed",
        5,
    ),
    case(
        "bidi-isolate", spliced(2, "# \u2066x\u2069\n"), "bidirectional control character U+2066", 2
    ),
    case(
        "utf8-with-bom",
        VALID.encode("utf-8-sig"),
        "file starts with a byte-order mark; manifests are UTF-8 without one",
        1,
    ),
    case(
        "latin1-accent", spliced(3, "# caf\xe9\n").encode("latin-1"), NOT_UTF8 + " (byte 0xe9)", 3
    ),
    case(
        "lone-continuation-byte",
        VALID.encode()[:30] + b"\x80" + VALID.encode()[30:],
        NOT_UTF8 + " (byte 0x80)",
        2,
    ),
    case("truncated-sequence-at-end", VALID.encode() + b"# \xc3", NOT_UTF8 + " (byte 0xc3)", 11),
    case("overlong-slash", VALID.encode() + b"# \xc0\xaf\n", NOT_UTF8 + " (byte 0xc0)", 11),
    case("encoded-surrogate", VALID.encode() + b"# \xed\xa0\x80\n", NOT_UTF8 + " (byte 0xed)", 11),
    case("byte-ff", b"\xff" * 64, NOT_UTF8 + " (byte 0xff)", 1),
]

BOMBS = [
    case(
        "flow-sequences-30000-deep",
        "a: " + "[" * 30000 + "]" * 30000,
        "nesting depth",
        1,
        subprocess=True,
    ),
    case(
        "flow-mappings-30000-deep", "a: " + "{a: " * 30000 + "}" * 30000, DEEP, 1, subprocess=True
    ),
    case("block-sequences-30000-deep", "- " * 30000 + "x\n", DEEP, 1, subprocess=True),
    case(
        "block-mappings-1000-deep",
        "".join(" " * i + "a:\n" for i in range(1000)),
        DEEP,
        MAX_DEPTH + 1,
        subprocess=True,
    ),
    case("flow-sequences-one-level-too-deep", "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, DEEP, 1),
    case(
        "nesting-under-content-one-level-too-deep",
        VALID.replace(
            "merge: {kind: Append}",
            "merge: " + "{a: " * (MAX_DEPTH - 2) + "1" + "}" * (MAX_DEPTH - 2),
        ),
        DEEP,
        10,
    ),
    case(
        "larger-than-1-mib",
        spliced(2, "#" * MAX_BYTES + "\n"),
        f"a manifest may be at most {MAX_BYTES}",
        1,
    ),
    case("one-byte-over-1-mib", "#" * (MAX_BYTES + 1), "file is 1048577 bytes", 1),
    case("one-huge-scalar", VALID.replace("org.example.x", "x" * 2_000_000), "1 MiB", 1),
    case(
        "billion-laughs",
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "YAML anchors and aliases are not allowed in manifests",
        1,
    ),
    case(
        "anchor-on-a-value", VALID.replace("kind: Root", "kind: &k Root"), "anchors and aliases", 5
    ),
    case(
        "undefined-alias", VALID.replace("kind: Root", "kind: *nothing"), "anchors and aliases", 5
    ),
    case(
        "anchor-and-alias-for-a-second-name",
        VALID.replace("name: org.example.x", "name: &n org.example.x") + "extra: *n\n",
        "anchors and aliases",
        4,
    ),
    case(
        "merge-key",
        VALID.replace("  kind: Root\n", "  <<: {name: org.example.y}\n  kind: Root\n"),
        "merge keys ('<<')",
        5,
    ),
    case(
        "a-version-of-5000-digits",  # Python reads no int of more than 4,300 digits
        VALID.replace("version: 1", "version: " + "9" * 5000),
        "a number of 5000 characters; numbers in a manifest have at most 100",
        2,
    ),
    case(
        "a-negative-hex-of-200-digits",
        VALID.replace("version: 1", "version: -0x" + "f" * 200),
        "a number of 203 characters",
        2,
    ),
    case(
        "ten-thousand-wrong-items",
        VALID.replace("metadata:", "metadata: [" + "1, " * 10_000 + "1]\n  x:"),
        "more problem(s) in this file not shown",
        6,
    ),
]

DUPLICATES = [
    case(
        "top-level-kind-twice",
        VALID + "kind: DatasetSnapshot\n",
        DUPLICATE + " 'kind' (first at line 1)",
        11,
    ),
    case(
        "top-level-content-twice",
        VALID + "content: {name: org.example.y}\n",
        DUPLICATE + " 'content' (first at line 3)",
        11,
    ),
    case(
        "version-twice-same-value",
        spliced(3, "version: 1\n"),
        DUPLICATE + " 'version' (first at line 2)",
        3,
    ),
    case(
        "nested-name-twice",
        spliced(5, "  name: org.example.y\n"),
        DUPLICATE + " 'name' (first at line 4)",
        5,
    ),
    case(
        "name-quoted-and-plain",
        spliced(5, '  "name": org.example.y\n'),
        DUPLICATE + " 'name' (first at line 4)",
        5,
    ),
    case(
        "name-explicit-key",
        spliced(5, "  ? name\n  : org.example.y\n"),
        DUPLICATE + " 'name' (first at line 4)",
        5,
    ),
    case(
        "key-twice-in-a-flow-mapping",
        VALID.replace("{kind: Append}", "{kind: Append, kind: Ledger}"),
        DUPLICATE + " 'kind' (first at line 10)",
        10,
    ),
    case(
        "fetch-twice-in-an-event",
        spliced(9, '      fetch: {kind: Url, url: "file:///etc/passwd"}\n'),
        DUPLICATE + " 'fetch' (first at line 8)",
        9,
    ),
    case(
        "boolean-keys-spelled-differently",
        VALID + "extra: {true: 1, TRUE: 2}\n",
        DUPLICATE + " 'True' (first at line 11)",
        11,
    ),
    case(
        "number-keys-spelled-differently",
        VALID + "extra: {16: 1, 0x10: 2}\n",
        DUPLICATE + " '16' (first at line 11)",
        11,
    ),
]

DOCUMENTS = [
    case("empty-file", "", "file holds no YAML document", 1),
    case("only-whitespace", "   \n\n  \n", "file holds no YAML document", 1),
    case("only-a-comment", "# nothing here\n", "file holds no YAML document", 1),
    case("only-a-document-marker", "---\n...\n", "a manifest must be a YAML mapping", 2),
    case(
        "a-list", "- kind: DatasetSnapshot\n- version: 1\n", "a manifest must be a YAML mapping", 1
    ),
    case("a-string", "just some text\n", "a manifest must be a YAML mapping", 1),
    case("a-number", "42\n", "a manifest must be a YAML mapping", 1),
    case("null", "~\n", "a manifest must be a YAML mapping", 1),
    case(
        "second-document-is-a-list", VALID + "---\n- a\n", "a manifest must be a YAML mapping", 12
    ),
    case("second-document-has-a-syntax-error", VALID + "---\nkind: [\n", "invalid YAML", 13),
    case(
        "python-object-tag",
        "!!python/object/apply:os.system [touch pwned]\n",
        "YAML tags (!!python/object/apply:os.system) are not allowed in manifests",
        1,
    ),
    case(
        "python-name-tag-in-a-value",
        VALID.replace("kind: Root", "kind: !!python/name:os.system ''"),
        "YAML tags (!!python/name:os.system) are not allowed in manifests",
        5,
    ),
    case(
        "custom-tag-directive",
        "%TAG !x! tag:evil,2000:\n---\n!x!thing {a: 1}\n",
        "YAML tags (tag:evil,2000:thing) are not allowed in manifests",
        3,
    ),
    case(
        "binary-tag-as-name",
        VALID.replace("name: org.example.x", "name: !!binary Li4vLi4vZXNjYXBlZA=="),
        "YAML tags (!!binary) are not allowed in manifests: a value is read as it is written",
        4,
    ),
    case("collection-as-a-key", VALID + "? [a, b]\n: c\n", "found unhashable key", 11),
    case("tab-indentation", VALID.replace("  kind: Root", "\tkind: Root"), "invalid YAML", 5),
]


@pytest.mark.parametrize("case", [*BYTES, *BOMBS, *DUPLICATES, *DOCUMENTS], ids=lambda c: c.id)
def test_a_hostile_manifest_file_is_refused_with_its_location(
    tmp_path: Path, case: Hostile
) -> None:
    assert_refused(tmp_path, case)


def deep_json_pull(tmp_path: Path, kind: str) -> tuple[Path, Outcome, GitOpsRepo]:
    """A root dataset reading one file nested 100,000 levels deep, reconciled once."""
    repo = GitOpsRepo.create(tmp_path)
    source = f"""
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/*.json"}}
      read: {{kind: {kind}, schema: ["a BIGINT"]}}
      merge: {{kind: Append}}
    """
    repo.write("org.example.deep", manifest("org.example.deep", "Root", source))
    (tmp_path / "sources").mkdir()
    deep = tmp_path / "sources" / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    (outcome,) = reconcile(tmp_path)
    return deep, outcome, repo


def data_blocks(repo: GitOpsRepo) -> list[models.AddData]:
    return [
        e for e in events(repo.odf.dataset("org.example.deep")) if isinstance(e, models.AddData)
    ]


@pytest.mark.usefixtures("spark")
@pytest.mark.parametrize("kind", ["Json", "GeoJson"])
def test_a_deeply_nested_json_data_file_fails_its_pull_naming_the_file(
    tmp_path: Path, kind: str
) -> None:
    deep, outcome, repo = deep_json_pull(tmp_path, kind)
    assert (outcome.status, outcome.message) == (
        Status.FAILED,
        f"read failed: ReadError: {deep}: JSON nested too deeply to read "
        "(more levels than Python's recursion limit)",
    )
    assert data_blocks(repo) == []


@pytest.mark.usefixtures("spark")
def test_a_deeply_nested_ndjson_record_is_a_malformed_record_of_the_file(tmp_path: Path) -> None:
    deep, outcome, repo = deep_json_pull(tmp_path, "NdJson")
    assert outcome.status is Status.FAILED
    assert outcome.message.startswith(
        f"read failed: ReadError: {deep}: line 1: malformed record: [[[["
    )
    assert data_blocks(repo) == []
