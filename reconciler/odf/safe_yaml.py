"""YAML from untrusted pull requests: the loader, and the bounds checked around parsing.

The plan of a pull request runs in CI on files nobody has reviewed, so reading one must
end in a document or in a located message, never in a crash. Three things crash or
mislead a YAML parser, and each is stopped here:

- Bytes that are not YAML text (a NUL, an ELF header, UTF-16 without a byte-order mark,
  invalid UTF-8): refused before parsing, at the line and column of the first bad byte.
- Depth: libyaml's composer recurses in C once per nesting level, so a flow collection
  nested about 30,000 deep kills the process with SIGSEGV, and Python's constructor and
  the JSON Schema policies recurse too. The parser's event stream is flat, so it is read
  first and the file refused at the first level beyond ``MAX_DEPTH``; only then is a tree
  built. ``MAX_BYTES`` bounds everything else a parse costs.
- What a reviewer cannot see: anchors and aliases (a few lines can expand exponentially,
  "billion laughs"), merge keys (``<<``) and duplicate keys (the last one silently wins,
  so a reviewer reads two names and the reconciler uses one).

Policy files, though read from the base branch, go through the same bounds so that a
broken one fails with a message too; ``document`` names the kind of file in messages.
"""

from __future__ import annotations

import codecs
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from .names import shown

MAX_BYTES = 1 << 20
"""The largest manifest: a definition is a few kilobytes; 1 MiB bounds a parse's cost."""
MAX_DEPTH = 64
"""The deepest nesting of collections: a real manifest needs about 8."""

# libyaml's parser when PyYAML was built with it (it is, from PyPI wheels): several times
# faster, with the same nodes and marks.
_SafeBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlLoader(_SafeBase):  # type: ignore[valid-type,misc]
    """Safe YAML without implicit timestamps (times stay strings so nanoseconds survive)
    and with YAML 1.2's booleans: only ``true`` and ``false``. YAML 1.1 also reads
    ``yes``, ``no``, ``on`` and ``off`` as booleans, kamu (a YAML 1.2 reader) reads them as
    strings, and a manifest must mean the same to both: ``nullValue: NO`` is the text NO,
    and ``header: yes`` is refused as kamu refuses it."""


_BOOL = "tag:yaml.org,2002:bool"
YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:timestamp", _BOOL)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _first in "tTfF":
    YamlLoader.yaml_implicit_resolvers.setdefault(_first, []).append(
        (_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"))
    )

# Characters outside YAML's printable set (YAML 1.1 §5.1): C0 controls but tab and line
# breaks, DEL, C1 controls but NEL, surrogates and the two non-characters U+FFFE/U+FFFF.
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# The embeddings, overrides and isolates of Unicode's bidirectional algorithm ("Trojan
# Source", CVE-2021-42574); the marks U+200E/U+200F, which right-to-left text uses, stay.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_WIDE_BOMS = {
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\xfe\xff": "UTF-16",
    b"\xff\xfe": "UTF-16",
}
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
MAX_INT_CHARS = 100
"""The longest integer a file may spell (a 64-bit one takes 20 digits): Python refuses to
read one of more than 4,300 digits, which stopped the plan with no file or line."""


@dataclass(frozen=True)
class Flaw:
    """Why a YAML file is refused, at a 1-based line and column."""

    line: int
    column: int
    message: str


class UnsafeYamlError(ValueError):
    """The file cannot be parsed safely; ``flaw`` says where and why."""

    def __init__(self, flaw: Flaw) -> None:
        self.flaw = flaw
        super().__init__(f"{flaw.line}:{flaw.column}: {flaw.message}")


def read_text(path: Path, *, document: str = "manifest") -> str:
    """The file as text, refused (``UnsafeYamlError``) when it is not a regular file,
    larger than ``MAX_BYTES``, not UTF-8, or holds a character YAML does not allow.

    ``document`` names what the file should be in messages (``"policy file"``), here and
    in ``decode``, ``check_events`` and ``key_flaws``: other YAML files the reconciler
    reads go through the same bounds and should not be refused as "manifests"."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeYamlError(Flaw(1, 1, "not a regular file"))
        if info.st_size > MAX_BYTES:
            raise UnsafeYamlError(Flaw(1, 1, _too_large(info.st_size, document)))
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise UnsafeYamlError(Flaw(1, 1, f"cannot read file: {e.strerror}")) from None
    if len(data) > MAX_BYTES:  # it grew after stat()
        raise UnsafeYamlError(Flaw(1, 1, _too_large(len(data), document)))
    return decode(data, document=document)


def _too_large(size: int, document: str) -> str:
    return f"file is {size} bytes; a {document} may be at most {MAX_BYTES} bytes (1 MiB)"


def decode(data: bytes, *, document: str = "manifest") -> str:
    """``data`` as UTF-8 text of YAML's printable characters, else the first bad spot."""
    for bom, encoding in _WIDE_BOMS.items():
        if data.startswith(bom):
            raise UnsafeYamlError(
                Flaw(1, 1, f"file is {encoding} (byte-order mark); {document}s must be UTF-8")
            )
    if data.startswith(codecs.BOM_UTF8):  # invisible in an editor and in a diff
        raise UnsafeYamlError(
            Flaw(1, 1, f"file starts with a byte-order mark; {document}s are UTF-8 without one")
        )
    try:
        text, bad = data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        text, bad = data[: e.start].decode("utf-8"), e
    found = _UNPRINTABLE.search(text)
    if found is not None:
        char = found.group()
        message = f"control character U+{ord(char):04X} is not allowed in YAML"
        if char == "\0":
            message += " (a binary file, or UTF-16 without a byte-order mark?)"
        raise UnsafeYamlError(_flaw_at(text, found.start(), message))
    found = _BIDI.search(text)
    if found is not None:
        message = (
            f"bidirectional control character U+{ord(found.group()):04X} is not allowed: it"
            " makes text display in another order than it is read (a reviewer would not see"
            " what the file says)"
        )
        raise UnsafeYamlError(_flaw_at(text, found.start(), message))
    if bad is not None:
        byte = bad.object[bad.start]
        message = f"not valid UTF-8 (byte 0x{byte:02x}); {document}s must be UTF-8 text"
        raise UnsafeYamlError(_flaw_at(text, len(text), message))
    return text


def _flaw_at(text: str, index: int, message: str) -> Flaw:
    line_start = text.rfind("\n", 0, index) + 1
    return Flaw(text.count("\n", 0, index) + 1, index - line_start + 1, message)


def check_events(text: str, *, document: str = "manifest") -> None:
    """Read the parser's flat event stream; raise ``UnsafeYamlError`` at the first anchor
    or alias, the first tag, the first collection nested deeper than ``MAX_DEPTH``, or the
    first integer longer than ``MAX_INT_CHARS``. Syntax errors
    propagate as the parser's ``yaml.MarkedYAMLError``."""
    loader = YamlLoader(text)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                message = f"YAML anchors and aliases are not allowed in {document}s"
                raise UnsafeYamlError(_flaw_of(event, message))
            tag = getattr(event, "tag", None)
            if tag is not None:  # written in the file: the parser gives untagged ones none
                # ``!!binary`` showed a reviewer base64 where the run read a URL.
                shown = tag.replace("tag:yaml.org,2002:", "!!", 1)
                message = (
                    f"YAML tags ({shown}) are not allowed in {document}s: a value is read as"
                    " it is written, as a reviewer reads it"
                )
                raise UnsafeYamlError(_flaw_of(event, message))
            if isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_INT_CHARS:
                tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
                if tag == _INT_TAG:
                    message = (
                        f"a number of {len(event.value)} characters; numbers in a {document}"
                        f" have at most {MAX_INT_CHARS}"
                    )
                    raise UnsafeYamlError(_flaw_of(event, message))
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    message = f"collections nested deeper than {MAX_DEPTH} levels"
                    raise UnsafeYamlError(_flaw_of(event, message))
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def _flaw_of(item: yaml.Event | yaml.Node, message: str) -> Flaw:
    return Flaw(*_position(item), message)


def _position(item: yaml.Event | yaml.Node) -> tuple[int, int]:
    """Where ``item`` starts, 1-based (the parser always marks; 1:1 if it did not)."""
    mark = item.start_mark
    return (mark.line + 1, mark.column + 1) if mark else (1, 1)


def key_flaws(root: yaml.Node, *, document: str = "manifest") -> list[Flaw]:
    """Every duplicate key (compared as values: ``name`` and ``"name"`` are one key) and
    every merge key in a composed document, each at its second occurrence."""
    constructor = YamlLoader("")
    flaws: list[Flaw] = []
    todo = [root]
    try:
        while todo:
            node = todo.pop()
            if isinstance(node, yaml.SequenceNode):
                todo += node.value
            elif isinstance(node, yaml.MappingNode):
                flaws += _mapping_flaws(constructor, node, document)
                todo += [value for _, value in node.value]
    finally:
        constructor.dispose()
    return sorted(flaws, key=lambda f: (f.line, f.column))


def _mapping_flaws(constructor: YamlLoader, node: yaml.MappingNode, document: str) -> list[Flaw]:
    flaws: list[Flaw] = []
    seen: dict[object, int] = {}
    for key, _ in node.value:
        if key.tag == _MERGE_TAG:
            message = f"YAML merge keys ('<<') are not allowed in {document}s"
            flaws.append(_flaw_of(key, message))
            continue
        if not isinstance(key, yaml.ScalarNode):
            continue  # refused by the constructor: a collection cannot be a key
        value = _key_value(constructor, key)
        if value in seen:
            message = f"duplicate key {shown(str(value))} (first at line {seen[value]})"
            flaws.append(_flaw_of(key, message))
        else:
            seen[value] = _position(key)[0]
    return flaws


def _key_value(constructor: YamlLoader, key: yaml.ScalarNode) -> object:
    """The key as the document's data holds it. Nearly every key is a string, which is
    its own text: taking that as is skips the constructor, most of this check's cost."""
    return key.value if key.tag == _STR_TAG else constructor.construct_object(key)
