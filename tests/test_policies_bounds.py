"""Policy files are read within the bounds of manifests (``safe_yaml``).

Policies come from the base branch, so they are trusted; a broken one must still fail
with one ``PolicyError`` at its file and line, never hang the plan (an alias bomb), crash
it (deep nesting, bytes that are not UTF-8) or silently mean something else than it
reads (a duplicate key, where the last one would win). JSON schema policies are JSON:
no anchors or merge keys can be written there, but their size, encoding, nesting and
duplicate keys are bounded the same way.

Deep nesting runs in a child process, where a crash of the parser would be an exit
code rather than the end of the test session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.odf.safe_yaml import MAX_BYTES, MAX_DEPTH
from reconciler.plan.policies import PolicyError, SchemaPolicy, load_policies

DEEP = f"collections nested deeper than {MAX_DEPTH} levels"
ALIASES = "YAML anchors and aliases are not allowed in policy files"
TOO_LARGE = f"file is {MAX_BYTES + 1} bytes; a policy file may be at most {MAX_BYTES} bytes (1 MiB)"
RULE = "rules:\n  - id: names\n    severity: error\n    message: m\n    name_pattern: x\n"
BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def _padded(text: str) -> str:
    """``text`` with a trailing comment that makes the file one byte over ``MAX_BYTES``."""
    return text + "#" * (MAX_BYTES + 1 - len(text))


CASES = [
    # Rule files.
    pytest.param("a.yaml", _padded(RULE), 1, TOO_LARGE, id="rules-one-byte-over-1-mib"),
    pytest.param("a.yaml", BILLION_LAUGHS + RULE, 1, ALIASES, id="rules-billion-laughs"),
    pytest.param(
        "a.yaml",
        RULE.replace("- id: names", "- &rule id: names") + "  - *rule\n",
        2,
        ALIASES,
        id="rules-alias-repeating-a-rule",
    ),
    pytest.param(
        "a.yaml",
        RULE + "    severity: warning\n",
        6,
        "duplicate key 'severity' (first at line 3)",
        id="rules-duplicate-key-in-a-rule",
    ),
    pytest.param(
        "a.yaml",
        RULE + "rules: []\n",
        6,
        "duplicate key 'rules' (first at line 1)",
        id="rules-duplicate-top-level-key",
    ),
    pytest.param(
        "a.yaml",
        RULE.replace("    severity: error\n", "    <<: {severity: error}\n"),
        3,
        "YAML merge keys ('<<') are not allowed in policy files",
        id="rules-merge-key",
    ),
    pytest.param(
        "a.yaml",
        RULE.replace("message: m", "message: caf\xe9").encode("latin-1"),
        4,
        "not valid UTF-8 (byte 0xe9); policy files must be UTF-8 text",
        id="rules-latin1",
    ),
    pytest.param(
        "a.yaml",
        RULE.encode("utf-16"),
        1,
        "file is UTF-16 (byte-order mark); policy files must be UTF-8",
        id="rules-utf16",
    ),
    pytest.param(
        "a.yaml",
        b"\x00" + RULE.encode(),
        1,
        "control character U+0000 is not allowed in YAML"
        " (a binary file, or UTF-16 without a byte-order mark?)",
        id="rules-binary",
    ),
    pytest.param(
        "a.yaml",
        "rules: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n",
        1,
        DEEP,
        id="rules-one-level-too-deep",
    ),
    # Schema policies in YAML.
    pytest.param(
        "s.schema.yaml",
        "x-message: m\nproperties:\n  kind: {type: string}\n  kind: {const: Root}\n",
        4,
        "duplicate key 'kind' (first at line 3)",
        id="schema-yaml-duplicate-nested-key",
    ),
    pytest.param(
        "s.schema.yaml",
        "x-message: m\n$defs:\n" + "".join(f"  {line}\n" for line in BILLION_LAUGHS.splitlines()),
        3,
        ALIASES,
        id="schema-yaml-billion-laughs",
    ),
    pytest.param(
        "s.schema.yaml",
        "x-message: m\nproperties:\n  kind: !!foo {type: string}\n",
        3,
        "YAML tags (!!foo) are not allowed in policy files: a value is read as it is written,"
        " as a reviewer reads it",
        id="schema-yaml-unknown-tag",
    ),
    # Schema policies in JSON: the same bounds but anchors and merge keys, which JSON
    # cannot write.
    pytest.param(
        "s.schema.json",
        '{\n  "x-message": "m",\n  "properties": {\n    "kind": {"type": "string"},\n'
        '    "kind": {"const": "Root"}\n  }\n}\n',
        5,
        "duplicate key 'kind' (first at line 4)",
        id="schema-json-duplicate-nested-key",
    ),
    pytest.param(
        "s.schema.json",
        '{\n  "x-message": "m",\n  "x-\\u006dessage": "n"\n}\n',
        3,
        "duplicate key 'x-message' (first at line 2)",
        id="schema-json-duplicate-key-spelled-with-an-escape",
    ),
    # The one escape libyaml reads otherwise than JSON, so it could hide a duplicate.
    pytest.param(
        "s.schema.json",
        '{\n  "x-message": "m",\n  "\\ud83d\\ude00": "n"\n}\n',
        3,
        "invalid YAML: found invalid Unicode character escape code",
        id="schema-json-surrogate-pair-escape",
    ),
    pytest.param(
        "s.schema.json",
        '{"x-message": "caf\xe9"}\n'.encode("latin-1"),
        1,
        "not valid UTF-8 (byte 0xe9); policy files must be UTF-8 text",
        id="schema-json-latin1",
    ),
    pytest.param(
        "s.schema.json",
        '{"x-message": "m"}' + " " * (MAX_BYTES + 1 - len('{"x-message": "m"}')),
        1,
        TOO_LARGE,
        id="schema-json-one-byte-over-1-mib",
    ),
    pytest.param(
        "s.schema.json",
        '{"x-message": "m",\n "items":\n' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}\n",
        3,
        DEEP,
        id="schema-json-one-level-too-deep",
    ),
]


@pytest.mark.parametrize(("name", "content", "line", "message"), CASES)
def test_a_policy_file_out_of_bounds_is_one_located_error(
    tmp_path: Path, name: str, content: str | bytes, line: int, message: str
) -> None:
    file = _write(tmp_path, name, content)
    with pytest.raises(PolicyError) as caught:
        load_policies(file.parent)
    error = caught.value
    assert (error.file, error.line, error.policy, error.message) == (file, line, None, message)
    assert str(error) == f"{file}:{line}: {message}"


DEEP_CASES = [
    pytest.param(
        "a.yaml", "rules:\n" + "- " * 30_000 + "x\n", 2, DEEP, id="rules-block-30000-deep"
    ),
    pytest.param(
        "a.yaml", "rules: " + "{a: " * 30_000 + "}" * 30_000, 1, DEEP, id="rules-flow-30000-deep"
    ),
    # Past Python's recursion limit, so past the JSON parser's: the YAML reading says where.
    pytest.param(
        "s.schema.json",
        '{"x-message": "m",\n "properties":\n' + '{"a": ' * 100_000 + "{}" + "}" * 100_001,
        3,
        DEEP,
        id="schema-json-objects-100000-deep",
    ),
    # libyaml refuses a flow sequence this deep while scanning, before the depth bound.
    pytest.param(
        "s.schema.json",
        '{"x-message": "m",\n "items":\n' + "[" * 100_000 + "]" * 100_000 + "}",
        3,
        "invalid YAML: exceeded maximum nesting depth",
        id="schema-json-arrays-100000-deep",
    ),
]


@pytest.mark.parametrize(("name", "content", "line", "message"), DEEP_CASES)
def test_a_deeply_nested_policy_file_is_refused_without_crashing(
    tmp_path: Path, name: str, content: str, line: int, message: str
) -> None:
    file = _write(tmp_path, name, content)
    child = subprocess.run(
        [sys.executable, "-c", _IN_CHILD, str(file.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (child.returncode, child.stderr) == (0, "")
    assert json.loads(child.stdout) == [str(file), line, message]


_IN_CHILD = """\
import json, sys
from pathlib import Path
from reconciler.plan.policies import PolicyError, SchemaPolicy, load_policies
try:
    load_policies(Path(sys.argv[1]))
except PolicyError as e:
    print(json.dumps([str(e.file), e.line, e.message]))
"""


def test_a_policy_that_is_not_a_regular_file_is_an_error(tmp_path: Path) -> None:
    """A pipe named like a rule file would block the read; a folder so named holds no
    policy and is passed over, as a pull request's plan passes over its files."""
    directory = tmp_path / "policies"
    (directory / "a.yaml").mkdir(parents=True)
    os.mkfifo(directory / "b.yaml")
    with pytest.raises(PolicyError) as caught:
        load_policies(directory)
    assert str(caught.value) == f"{directory / 'b.yaml'}:1: not a regular file"
    assert caught.value.also == ()


def test_json_escapes_and_numbers_within_bounds_still_load(tmp_path: Path) -> None:
    """The YAML reading of a JSON schema bounds it without changing what it says: escaped
    keys that differ stay two keys, and ``1e3`` stays a number."""
    schema = (
        '{\n\t"x-message": "m",\n\t"properties": {\n\t\t"a\\/b": {"maxLength": 1e3},\n'
        '\t\t"a\\\\b": {"type": "string"}\n\t}\n}\n'
    )
    file = _write(tmp_path, "s.schema.json", schema)
    (policy,) = load_policies(file.parent).policies
    assert isinstance(policy, SchemaPolicy)
    assert policy.validator.schema["properties"] == {
        "a/b": {"maxLength": 1000.0},
        "a\\b": {"type": "string"},
    }


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    file = tmp_path / "policies" / name
    file.parent.mkdir()
    file.write_bytes(content.encode() if isinstance(content, str) else content)
    return file
