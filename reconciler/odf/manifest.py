"""Reading ``DatasetSnapshot`` manifests with errors that point into the YAML.

People write these files by hand and review them in pull requests, so every problem is
reported with the file, line and column, the field path as written in the manifest
(``content.metadata[0].read.schema``) and what was expected, and all problems of a file
are reported together. Values are kept verbatim: ``${{ env.NAME }}`` templates are
resolved only by the code that runs a source, never here.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import yaml

from . import models
from .names import name_key, ref_problem, shown
from .safe_yaml import Flaw, UnsafeYamlError, YamlLoader, check_events, key_flaws, read_text

# Events that only an engine may write, or that make no sense in a definition.
_NOT_IN_SNAPSHOTS = {
    "Seed": "the dataset identity is created by the reconciler",
    "AddData": "data blocks are written by ingest",
    "ExecuteTransform": "data blocks are written by transforms",
    "DisablePollingSource": "remove the SetPollingSource from the manifest instead",
    "DisablePushSource": "remove the AddPushSource from the manifest instead",
}
_ROOT_ONLY = ("SetPollingSource", "AddPushSource")
_MAX_ISSUES = 100
"""Issues shown per file: enough for any real mistake, while a file of a million wrong
items still gives a plan a reviewer can read."""
_DERIVATIVE_ONLY = ("SetTransform",)


@dataclass(frozen=True)
class ManifestIssue:
    """One problem in a manifest, located in its file."""

    file: Path
    line: int
    column: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class ManifestError(ValueError):
    """A manifest file could not be read; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ManifestIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


@dataclass(frozen=True)
class LoadedSnapshot:
    """A manifest document with where it came from.

    ``raw`` is the whole document as YAML data (for JSON Schema policies) and ``node`` its
    composed YAML tree (to point findings at a line); both are what the loader read.
    """

    snapshot: models.DatasetSnapshot
    file: Path | str
    line: int
    raw: Any = None
    node: yaml.Node | None = None

    def position(self, *loc: str | int) -> tuple[int, int]:
        """The line and column of the field at ``loc`` (``"content", "name"``), or of the
        document when the tree is not kept."""
        if self.node is None:
            return self.line, 1
        mark = _locate(self.node, loc, at_key=False)[0].start_mark
        return mark.line + 1, mark.column + 1


def load_snapshots(path: str | Path) -> list[LoadedSnapshot]:
    """Every ``DatasetSnapshot`` document of a file; raises ``ManifestError`` with all issues.

    The text is bounded and checked before any tree is built (``safe_yaml``), so no file
    can crash the reader: every failure is an issue with a line and column."""
    file = Path(path)
    loaded: list[LoadedSnapshot] = []
    issues: list[ManifestIssue] = []
    try:
        text = read_text(file)
        check_events(text)
        for node in _compose_all(text):
            flaws = key_flaws(node)
            if flaws:
                issues += [_flaw_issue(file, flaw) for flaw in flaws]
                continue
            snapshot, raw, found = _validate_document(file, node)
            issues += found
            if snapshot is not None:
                loaded.append(LoadedSnapshot(snapshot, file, node.start_mark.line + 1, raw, node))
    except UnsafeYamlError as e:
        issues.append(_flaw_issue(file, e.flaw))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        issues.append(ManifestIssue(file, line, col, "", f"invalid YAML: {e.problem or e}"))
    except yaml.YAMLError as e:  # unmarked (a reader error the checks above let through)
        issues.append(ManifestIssue(file, 1, 1, "", f"invalid YAML: {e}"))
    if len(issues) > _MAX_ISSUES:
        rest = issues[_MAX_ISSUES]
        more = f"{len(issues) - _MAX_ISSUES} more problem(s) in this file not shown"
        issues = [*issues[:_MAX_ISSUES], ManifestIssue(file, rest.line, rest.column, "", more)]
    if issues:
        raise ManifestError(issues)
    if not loaded:
        raise ManifestError([ManifestIssue(file, 1, 1, "", "file holds no YAML document")])
    return loaded


def _flaw_issue(file: Path, flaw: Flaw) -> ManifestIssue:
    return ManifestIssue(file, flaw.line, flaw.column, "", flaw.message)


def load_snapshot(path: str | Path) -> models.DatasetSnapshot:
    """The single ``DatasetSnapshot`` of a manifest file."""
    loaded = load_snapshots(path)
    if len(loaded) > 1:
        second = loaded[1]
        raise ManifestError(
            [ManifestIssue(Path(second.file), second.line, 1, "", "expected one manifest per file")]
        )
    return loaded[0].snapshot


def _compose_all(text: str) -> Iterator[yaml.Node]:
    loader = YamlLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                yield node
    finally:
        loader.dispose()


def construct(node: yaml.Node) -> Any:
    """Python data of a composed YAML node, as the manifest loader builds it."""
    loader = YamlLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _validate_document(
    file: Path, node: yaml.Node
) -> tuple[models.DatasetSnapshot | None, Any, list[ManifestIssue]]:
    data = construct(node)
    if not isinstance(data, dict):
        line, column = node.start_mark.line + 1, node.start_mark.column + 1
        message = "a manifest must be a YAML mapping with kind, version and content"
        return None, data, [ManifestIssue(file, line, column, "", message)]
    try:
        manifest = models.DatasetSnapshotManifest.model_validate(data)
    except pydantic.ValidationError as e:
        return None, data, [_issue_from_pydantic(file, node, err) for err in e.errors()]
    issues = [
        *_check_event_kinds(file, node, manifest.content),
        *_check_inputs(file, node, manifest.content),
    ]
    return (manifest.content if not issues else None), data, issues


def _check_event_kinds(
    file: Path, node: yaml.Node, snapshot: models.DatasetSnapshot
) -> Iterator[ManifestIssue]:
    """Events a snapshot may not hold, and sources that contradict the dataset kind."""
    for i, event in enumerate(snapshot.metadata):
        loc: tuple[str | int, ...] = ("content", "metadata", i, "kind")
        reason = _NOT_IN_SNAPSHOTS.get(event.kind)
        if reason:
            yield _issue_at(file, node, loc, f"{event.kind} is not allowed in a manifest: {reason}")
        elif snapshot.kind == models.DatasetKind.ROOT and event.kind in _DERIVATIVE_ONLY:
            yield _issue_at(file, node, loc, f"a Root dataset cannot have {event.kind}")
        elif snapshot.kind == models.DatasetKind.DERIVATIVE and event.kind in _ROOT_ONLY:
            yield _issue_at(file, node, loc, f"a Derivative dataset cannot have {event.kind}")


def _check_inputs(
    file: Path, node: yaml.Node, snapshot: models.DatasetSnapshot
) -> Iterator[ManifestIssue]:
    """Every ``datasetRef`` that is neither a dataset name nor a ``did:odf`` id, and every
    input alias given twice. An input is a Spark view named by its alias (by default its
    ``datasetRef``) and Spark compares view names case-insensitively, so two inputs
    whose aliases differ only in case would silently become one view."""
    for i, event in enumerate(snapshot.metadata):
        if not isinstance(event, models.SetTransform):
            continue
        seen: dict[str, int] = {}
        for j, inp in enumerate(event.inputs):
            loc: tuple[str | int, ...] = ("content", "metadata", i, "inputs", j)
            problem = ref_problem(inp.dataset_ref)
            if problem is not None:
                yield _issue_at(file, node, (*loc, "datasetRef"), problem)
            alias = inp.alias if inp.alias is not None else inp.dataset_ref
            first = seen.setdefault(name_key(alias), j)
            if first != j:
                field = "alias" if inp.alias is not None else "datasetRef"
                message = f"input alias {shown(alias)} is already used by input {first}"
                yield _issue_at(file, node, (*loc, field), message)


def _issue_from_pydantic(file: Path, root: yaml.Node, err: Any) -> ManifestIssue:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    kind, message = err["type"], err["msg"]
    if kind == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1], root)
        message = f"unknown field '{loc[-1]}'"
        if allowed:
            message += f"; expected one of: {', '.join(allowed)}"
    elif kind == "missing":
        message = f"required field '{loc[-1]}' is missing"
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
    elif kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        message = f"unknown kind {ctx.get('tag')!r}; expected one of: {ctx.get('expected_tags')}"
        loc = (*loc, "kind")
    elif kind == "literal_error":
        message = f"{message}, got {err.get('input')!r}"
    elif kind == "bool_type" and isinstance(err.get("input"), str):
        message = _yaml_1_1_boolean(err["input"]) or message
    return _issue_at(file, root, loc, message, at_key=kind == "extra_forbidden")


_YAML_1_1_BOOLEANS = {
    "yes": "true",
    "y": "true",
    "on": "true",
    "no": "false",
    "n": "false",
    "off": "false",
}


def _yaml_1_1_boolean(text: str) -> str | None:
    """What to write for a YAML 1.1 boolean given to a boolean field: the loader reads
    YAML 1.2's booleans only, as kamu does (``safe_yaml``), so ``header: yes`` is the
    text yes, which "Input should be a valid boolean" left the author to work out."""
    meant = _YAML_1_1_BOOLEANS.get(text.lower())
    if meant is None:
        return None
    return (
        f"{text!r} is read as text, not a boolean (a manifest is YAML 1.2, as kamu reads"
        f" it): write {meant}"
    )


def issue_at(loaded: LoadedSnapshot, loc: tuple[str | int, ...], message: str) -> ManifestIssue:
    """A finding about the value at ``loc`` of a loaded manifest (``("content", "metadata",
    0, "read", "schema", 2)``), located in its file as loading problems are; checks that
    run after loading use it so that their lines and field paths read the same."""
    if loaded.node is None:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        return ManifestIssue(Path(loaded.file), loaded.line, 1, path, message)
    return _issue_at(Path(loaded.file), loaded.node, loc, message)


def _issue_at(
    file: Path, root: yaml.Node, loc: tuple[str | int, ...], message: str, at_key: bool = False
) -> ManifestIssue:
    node, path = _locate(root, loc, at_key)
    mark = node.start_mark
    return ManifestIssue(file, mark.line + 1, mark.column + 1, path, message)


def _locate(root: yaml.Node, loc: tuple[str | int, ...], at_key: bool) -> tuple[yaml.Node, str]:
    """The deepest YAML node on ``loc`` and the field path to show.

    Pydantic puts union tags (``SetPollingSource``) into error locations; they are not
    keys of the document, so they are skipped. A key that is absent (a missing field)
    is still named in the path, at the position of the mapping that lacks it.
    """
    node, path = root, ""
    for part in loc:
        in_sequence = isinstance(node, yaml.SequenceNode) and isinstance(part, int)
        if in_sequence and int(part) < len(node.value):
            node, path = node.value[int(part)], f"{path}[{part}]"
            continue
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            pair = next((kv for kv in node.value if kv[0].value == part), None)
            if pair is not None:
                key, value = pair
                path = f"{path}.{part}" if path else part
                # An unknown key is shown at the key, anything else at its value.
                node = key if at_key and part == loc[-1] else value
                continue
            if _is_union_tag(node, part):
                continue
            path = f"{path}.{part}" if path else part
        break
    return node, path


def _is_union_tag(node: yaml.MappingNode, part: str) -> bool:
    kind = next((v for k, v in node.value if k.value == "kind"), None)
    return isinstance(kind, yaml.ScalarNode) and str(kind.value).lower() == part.lower()


def _allowed_fields(loc: tuple[str | int, ...], root: yaml.Node) -> list[str]:
    """The camelCase field names of the model found at ``loc``, to say what was expected."""
    annotation: Any = models.DatasetSnapshotManifest
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    model = _as_model(annotation)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items() if name != "kind"]


def _step(annotation: Any, part: str | int) -> Any:
    annotation = _strip(annotation)
    if isinstance(part, int):
        args = typing.get_args(annotation)
        return args[0] if typing.get_origin(annotation) is list and args else None
    variants = _variants(annotation)
    if len(variants) > 1:  # a union: the loc part is the tag
        return next((v for v in variants if v.model_fields["kind"].default == part), None)
    model = _as_model(annotation)
    if model is None:
        return None
    for name, f in model.model_fields.items():
        if part in (name, f.alias):
            return f.annotation
    return None


def _strip(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _variants(annotation: Any) -> list[type[models.OdfModel]]:
    return [
        a
        for a in typing.get_args(annotation)
        if isinstance(a, type) and issubclass(a, models.OdfModel)
    ]


def _as_model(annotation: Any) -> type[models.OdfModel] | None:
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, models.OdfModel):
        return annotation
    return None
