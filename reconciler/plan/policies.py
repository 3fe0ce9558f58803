"""Policies: repository rules that every manifest of a pull request is checked against.

The manifests come from untrusted pull requests, so policies only read them: a rule is
one of a few checks implemented here (``name_pattern``, ``require_events``,
``forbid_steps``, ``allowed_engines``, ``breaking_changes``, ``deterministic_queries``,
``chain_changes``, ``env_templates``) with its parameters in
``policies/*.yaml``, and the only other kind of policy is a JSON Schema document
(``policies/*.schema.json`` or ``.schema.yaml``) applied to each manifest's YAML data.
Nothing in a manifest or a policy is ever run, imported or fetched over the network.

Each finding becomes a ``Verdict`` in the plan, with the policy's id and severity and a
message that says what was found and where; an error-level verdict fails the plan.
Policy files are checked when loaded, and every mistake in them is a ``PolicyError``
naming the file, line and policy, so that a broken policy never passes silently. They
come from the base branch, so they are trusted, but they are read within the bounds of
manifests all the same (``safe_yaml``): a broken one fails with a message, never hangs
or crashes the plan, and never silently means something else than it reads.
"""

from __future__ import annotations

import contextlib
import json
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from reconciler.env_templates import env_names
from reconciler.odf import json_schemas, models
from reconciler.odf.manifest import LoadedSnapshot, construct
from reconciler.odf.safe_yaml import (
    UnsafeYamlError,
    YamlLoader,
    check_events,
    key_flaws,
    read_text,
)
from reconciler.plan.diff import facet_key
from reconciler.plan.model import ChangeClass, DatasetPlan, Location, Severity, Verdict

if TYPE_CHECKING:
    # Not exported by referencing, which annotates with it the same way.
    from referencing._core import Resolver

YamlPath = tuple[str | int, ...]
"""A path into a YAML document: mapping keys and sequence indices."""

_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_STR_TAG = "tag:yaml.org,2002:str"
_RULE_KEYS = ("id", "severity", "message", "applies_to")
SCHEMA_SUFFIXES = (".schema.json", ".schema.yaml")
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_POLICY_BASE_URI = "https://reconciler.local/policies/"
_MAX_DETAIL = 120
_DOCUMENT = "policy file"  # what the bounded reader's messages call the file

# The comment line that approves a breaking change. Only whole-line comments count.
_OVERRIDE = re.compile(r"^[ \t]*#[ \t]*reconcile:[ \t]*allow-breaking-change:(.*)$", re.MULTILINE)
_RENAMED_FROM = re.compile(r"^[ \t]*#[ \t]*reconcile:[ \t]*renamed-from:(.*)$", re.MULTILINE)
# A comment meant as a directive: ``reconcile`` then a colon, or then a directive's word.
_DIRECTIVE_LIKE = re.compile(
    r"^[ \t]*#[ \t]*reconcile\b(?:[ \t]*:|[ \t-]*(?:allow|renamed)).*$",
    re.MULTILINE | re.IGNORECASE,
)

# Unions whose members ``forbid_steps`` can name, as ``<union>::<kind>`` like the spec.
_STEP_UNIONS: dict[str, Any] = {
    "FetchStep": models.FetchStep,
    "PrepStep": models.PrepStep,
    "ReadStep": models.ReadStep,
    "Transform": models.Transform,
    "MergeStrategy": models.MergeStrategy,
    "EventTimeSource": models.EventTimeSource,
    "SourceCaching": models.SourceCaching,
    "Attachments": models.Attachments,
}


def _members(annotated: Any) -> tuple[type[models.OdfModel], ...]:
    """The models of an ``Annotated[Union[...], ...]`` union (a one-member Union is the model)."""
    union = typing.get_args(annotated)[0]
    return typing.get_args(union) or (union,)


_SPEC_NAMES: dict[type[models.OdfModel], str] = {
    member: f"{union}::{member.model_fields['kind'].default}"
    for union, annotated in _STEP_UNIONS.items()
    for member in _members(annotated)
}
_EVENT_KINDS = tuple(str(t.model_fields["kind"].default) for t in models.EVENT_TYPES)


class PolicyError(ValueError):
    """A policy file is invalid; says where, so the policy owners can fix it."""

    def __init__(self, file: Path, line: int, policy: str | None, message: str) -> None:
        self.file = file
        self.line = line
        self.policy = policy
        self.message = message
        self.also: tuple[PolicyError, ...] = ()
        super().__init__(self.shown(file))

    def shown(self, file: Path | str) -> str:
        """The error with its file written as ``file`` (relative to the repository, say)."""
        where = f"{file}:{self.line}"
        return (
            f"{where}: {self.policy}: {self.message}" if self.policy else f"{where}: {self.message}"
        )

    def each(self) -> tuple[PolicyError, ...]:
        """This error and those of the other broken files (``load_policies`` reads every
        file), so the policy owners fix them all in one go, not one per run."""
        return (self, *self.also)


# What policies look at: one validated manifest document with its raw YAML data and tree.
ManifestFacts = LoadedSnapshot


@dataclass(frozen=True)
class Finding:
    """One thing a policy found: what, and where in the manifest (None: the whole of it)."""

    detail: str
    path: YamlPath | None = None
    line: int | None = None  # in the text at ``path`` (a query), counted from 1


class Check(Protocol):
    """A rule's check: the findings of one manifest, given the plan of its dataset if any."""

    def findings(
        self, manifest: ManifestFacts, dataset: DatasetPlan | None
    ) -> Iterator[Finding]: ...


@dataclass(frozen=True)
class NamePattern:
    """The whole dataset name must match ``pattern``."""

    pattern: re.Pattern[str]

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        name = manifest.snapshot.name
        if self.pattern.fullmatch(name) is None:
            yield Finding(f"name {name!r} does not match the required pattern", ("content", "name"))


@dataclass(frozen=True)
class RequireEvents:
    """Each of ``kinds`` must appear among the manifest's events."""

    kinds: tuple[str, ...]

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        present = {event.kind for event in manifest.snapshot.metadata}
        for kind in self.kinds:
            if kind not in present:
                yield Finding(f"no {kind} event")


@dataclass(frozen=True)
class ForbidSteps:
    """None of ``steps`` (spec names like ``PrepStep::Pipe``) may appear in any event."""

    steps: frozenset[str]

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        for model, path in _walk_events(manifest.snapshot):
            name = _SPEC_NAMES.get(type(model))
            if name in self.steps:
                yield Finding(f"{name} at {_path_text(path)}", path)


@dataclass(frozen=True)
class AllowedEngines:
    """Every SQL transform (a source's ``preprocess``, ``SetTransform``) uses one of ``engines``."""

    engines: tuple[str, ...]

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        for model, path in _walk_events(manifest.snapshot):
            if isinstance(model, models.TransformSql) and model.engine not in self.engines:
                where = (*path, "engine")
                allowed = ", ".join(self.engines)
                yield Finding(
                    f"engine {model.engine!r} at {_path_text(where)} (allowed: {allowed})", where
                )


@dataclass(frozen=True)
class BreakingChangesNeedOverride:
    """A breaking change needs the manifest's reviewed override comment (see ``read_override``)."""

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        if dataset is None or dataset.change_class is not ChangeClass.BREAKING:
            return
        if dataset.override is not None:
            return
        breaking = [e for e in dataset.events if e.change_class is ChangeClass.BREAKING]
        changes = [f"{e.key} ({'; '.join(e.reasons)})" if e.reasons else e.key for e in breaking]
        # At the first event of the manifest that changed so (a removed one has no line
        # left: the whole manifest, then), where a reviewer and an annotation look.
        keys = {e.key for e in breaking}
        path: YamlPath | None = next(
            (
                ("content", "metadata", i)
                for i, event in enumerate(manifest.snapshot.metadata)
                if facet_key(event) in keys
            ),
            None,
        )
        yield Finding("breaking change" + (f" to {', '.join(changes)}" if changes else ""), path)


@dataclass(frozen=True)
class DeterministicQueries:
    """A new or changed query (transform or preprocess) gives the same result on every run.

    The engine's analysis lists what in a query is non-deterministic (``rand()``,
    ``current_timestamp()``, ``TABLESAMPLE``…); each is a finding, pointed at the
    manifest's first SQL. Data from such a query cannot be replayed by ``verify`` nor
    trusted by readers to be what the query computes.
    """

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        if dataset is None or dataset.query is None:
            return
        sql, path = next(
            (
                (m, p)
                for m, p in _walk_events(manifest.snapshot)
                if isinstance(m, models.TransformSql)
            ),
            (None, None),
        )
        for what in dataset.query.nondeterministic:
            found = _STEP_LINE.search(what)
            if sql is None or path is None or found is None:
                yield Finding(f"non-deterministic {what}", path)
                continue
            step = step_query_path(sql, found.group("alias"))
            yield Finding(f"non-deterministic {what}", (*path, *step), int(found.group("line")))


_STEP_LINE = re.compile(r" in (?:`query`|step `(?P<alias>[^`]+)`) \(line (?P<line>[0-9]+)\)$")
"""Where the engine's analysis found it (``engine.query_check._in_step``'s words)."""


def step_query_path(sql: models.TransformSql, alias: str | None) -> YamlPath:
    """The path, under a ``TransformSql``, of the query of the step ``alias`` names (any
    other: the one written as ``query:``, else the last of ``queries:``, the output)."""
    queries = sql.queries or []
    named = [i for i, q in enumerate(queries) if alias is not None and q.alias == alias]
    if named:
        return ("queries", named[0], "query")
    if sql.query is not None or not queries:
        return ("query",)
    return ("queries", len(queries) - 1, "query")


@dataclass(frozen=True)
class EnvTemplates:
    """The runner's environment variables a fetch's ``${{ env.NAME }}`` templates may
    name, and where each value may go: the address (a URL, or a container image) must
    start, as written up to its first template, with one of the variable's prefixes
    (``*``: anywhere, for a value that is no secret).

    A merged manifest's fetch resolves its templates from the runner's whole environment,
    which holds the data store's credentials and whatever else the job was given: a
    template naming ``AWS_SECRET_ACCESS_KEY`` in a URL of the pull request's choosing sent
    it there. As dbt keeps ``DBT_ENV_SECRET_`` variables out of models, the policies
    (the base's, for a pull request) name what a manifest may send, and to whom.
    """

    allowed: tuple[tuple[str, tuple[str, ...]], ...]

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        allowed = dict(self.allowed)
        for model, path in _walk_events(manifest.snapshot):
            for where, names, address in _templated(model, path):
                for name in names:
                    prefixes = allowed.get(name)
                    used = f"env.{name} at {_path_text(where)}"
                    if prefixes is None:
                        yield Finding(f"{used}: no env_templates rule allows {name}", where)
                    elif not any(p == "*" or _literal(address).startswith(p) for p in prefixes):
                        yield Finding(
                            f"{used} is sent to {_shorten(address)!r}, and {name} may go only"
                            f" to addresses starting with {', '.join(map(repr, prefixes))}",
                            where,
                        )


def _templated(model: models.OdfModel, path: YamlPath) -> Iterator[tuple[YamlPath, list[str], str]]:
    """The fields of a fetch step that the fetch resolves templates in, each with the
    variables it names and the address their values go to: the URL (its headers go
    there too), or the container's image (which gets its command, arguments and
    environment; a variable listed without a value passes the runner's own)."""
    if isinstance(model, models.FetchStepUrl):
        yield (*path, "url"), env_names(model.url), model.url
        for i, header in enumerate(model.headers or []):
            yield (*path, "headers", i, "value"), env_names(header.value), model.url
    elif isinstance(model, models.FetchStepContainer):
        image = model.image
        yield (*path, "image"), env_names(image), image
        for field in ("command", "args"):
            for i, text in enumerate(getattr(model, field) or []):
                yield (*path, field, i), env_names(text), image
        for i, var in enumerate(model.env or []):
            names = [var.name] if var.value is None else env_names(var.value)
            yield (*path, "env", i), names, image


def _literal(address: str) -> str:
    """``address`` up to its first template: all of it that the manifest fixes."""
    return address.split("${{", 1)[0]


@dataclass(frozen=True)
class ChainChangesForbidden:
    """A pull request leaves ``odf/`` as it is: only the reconciler writes chains.

    Judged over the pull request's diff by ``chain_changes.judge``, not here per manifest:
    a fabricated chain need not have a manifest at all. This class only marks the rule.
    """

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        yield from ()


@dataclass(frozen=True)
class Rule:
    """A policy from a rule file: one check, its severity and its message."""

    id: str
    severity: Severity
    message: str
    check: Check
    applies_to: models.DatasetKind | None = None

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        if self.applies_to is None or manifest.snapshot.kind is self.applies_to:
            yield from self.check.findings(manifest, dataset)


@dataclass(frozen=True)
class SchemaPolicy:
    """A policy from a JSON Schema document: every validation error is a finding."""

    id: str
    severity: Severity
    message: str
    validator: Draft202012Validator

    def findings(self, manifest: ManifestFacts, dataset: DatasetPlan | None) -> Iterator[Finding]:
        for error in self.validator.iter_errors(manifest.raw):
            path = tuple(error.absolute_path)
            where = f" at {_path_text(path)}" if path else ""
            yield Finding(_shorten(error.message) + where, path)


Policy = Rule | SchemaPolicy


@dataclass(frozen=True)
class PolicySet:
    """Every policy of a repository, in file name order and then in file order."""

    policies: tuple[Policy, ...] = ()


# --- Evaluation ----------------------------------------------------------------------------


def evaluate(
    policies: PolicySet, manifest: ManifestFacts, dataset: DatasetPlan | None
) -> list[Verdict]:
    """The verdicts of every policy on one manifest; ``dataset`` is its plan, when known.

    Without a plan, checks that need one (``breaking_changes``, ``deterministic_queries``)
    find nothing. A policy set without a ``deterministic_queries`` rule gets
    ``DEFAULT_DETERMINISM``, one without ``env_templates`` ``DEFAULT_ENV_TEMPLATES`` (no
    variable): a repository may make a rule a warning, never forget it.
    """
    in_force: tuple[Policy, ...] = policies.policies
    for default in (DEFAULT_DETERMINISM, DEFAULT_ENV_TEMPLATES):
        kind = type(default.check)
        if not any(isinstance(p, Rule) and isinstance(p.check, kind) for p in in_force):
            in_force = (*in_force, default)
    return [
        Verdict(
            policy=policy.id,
            severity=policy.severity,
            message=f"{finding.detail}: {policy.message}",
            dataset=manifest.snapshot.name,
            location=field_location(manifest, finding.path, finding.line),
        )
        for policy in in_force
        for finding in policy.findings(manifest, dataset)
    ]


def read_override(text: str) -> str | None:
    """The reason of the manifest's ``# reconcile: allow-breaking-change: <reason>`` line.

    A comment, so ODF tools read the manifest unchanged and the approval shows up in the
    pull request diff. A line without a reason approves nothing (None), and a line inside
    a multi-line string (a SQL query, say) is data, not a comment.
    """
    found = find_override(text)
    return found[0] if found else None


def find_override(text: str) -> tuple[str, int] | None:
    """``read_override``'s reason with its 1-based line, where a finding about the
    override points."""
    return _find_directive(text, "allow-breaking-change", _OVERRIDE)


def find_renamed_from(text: str) -> tuple[tuple[str, int], ...]:
    """The name in each of the manifest's ``# reconcile: renamed-from: <old name>``
    lines, with its 1-based line: the chain of that name is this dataset's, moved to the
    new name (``plan/renames.py``; more than one line is an error there). A comment, as
    the override is, so ODF tools read the manifest unchanged and the rename shows up in
    the pull request's diff."""
    return tuple(_directives(text, "renamed-from", _RENAMED_FROM))


def find_near_misses(text: str) -> tuple[tuple[str, int], ...]:
    """Each comment that looks meant as a directive but is none (``# Reconcile:
    Renamed-From: a``, ``# reconcile: allow-breaking-changes: x``, a directive without a
    value), with its 1-based line: ignored silently, a rename became a deletion and a
    new dataset, and an override approved nothing, with no word why."""
    if "reconcile" not in text.lower():  # the common case: skip tokenising the file
        return ()
    exact = {match.start() for match in _OVERRIDE.finditer(text) if match.group(1).strip()}
    exact |= {match.start() for match in _RENAMED_FROM.finditer(text) if match.group(1).strip()}
    inside = _lines_inside_scalars(text)
    found = []
    for match in _DIRECTIVE_LIKE.finditer(text):
        line = text.count("\n", 0, match.start())
        if match.start() not in exact and line not in inside:
            found.append((match.group().strip(), line + 1))
    return tuple(found)


def _find_directive(text: str, word: str, pattern: re.Pattern[str]) -> tuple[str, int] | None:
    """The value and 1-based line of the first ``# reconcile: <word>: <value>`` comment
    with a value, outside multi-line scalars."""
    return next(_directives(text, word, pattern), None)


def _directives(text: str, word: str, pattern: re.Pattern[str]) -> Iterator[tuple[str, int]]:
    """Each ``# reconcile: <word>: <value>`` comment with a value, outside multi-line
    scalars, as (value, 1-based line)."""
    if word not in text:  # the common case: skip tokenising the file
        return
    inside = _lines_inside_scalars(text)
    for match in pattern.finditer(text):
        value, line = match.group(1).strip(), text.count("\n", 0, match.start())
        if value and line not in inside:
            yield value, line + 1


def _lines_inside_scalars(text: str) -> set[int]:
    """0-based lines that continue a multi-line scalar, where a ``#`` starts no comment."""
    lines: set[int] = set()
    # A broken manifest is reported by the manifest loader; what was scanned still counts.
    with contextlib.suppress(yaml.YAMLError):
        for token in yaml.scan(text, Loader=YamlLoader):
            if isinstance(token, yaml.ScalarToken):
                start, end = token.start_mark, token.end_mark
                lines.update(range(start.line + 1, end.line + (1 if end.column else 0)))
    return lines


def _walk_events(snapshot: models.DatasetSnapshot) -> Iterator[tuple[models.OdfModel, YamlPath]]:
    """Every model inside the snapshot's events, with its path in the manifest."""
    for i, event in enumerate(snapshot.metadata):
        yield from _walk(event, ("content", "metadata", i))


def _walk(value: object, path: YamlPath) -> Iterator[tuple[models.OdfModel, YamlPath]]:
    if isinstance(value, models.OdfModel):
        yield value, path
        for name, field in type(value).model_fields.items():
            yield from _walk(getattr(value, name), (*path, field.alias or name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, (*path, i))


def field_location(
    manifest: ManifestFacts, path: YamlPath | None, line: int | None = None
) -> Location:
    """The line of ``path`` in the manifest when it can be told, else the manifest's
    line; with ``line``, that line of the text at ``path`` (a block scalar's text starts
    on the line after its ``|``)."""
    if path is None or manifest.node is None:
        return Location(str(manifest.file), manifest.line)
    node = _locate(manifest.node, path)
    mark = node.start_mark
    if line is None:
        return Location(str(manifest.file), mark.line + 1, mark.column + 1)
    first = mark.line + 1
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        first += 1  # the text of ``query: |`` starts on the line after the ``|``
    return Location(str(manifest.file), first + line - 1)


def _locate(root: yaml.Node, path: YamlPath) -> yaml.Node:
    """The deepest node of a YAML tree on ``path`` (a key spelled differently stops it)."""
    node = root
    for part in path:
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
        elif isinstance(node, yaml.MappingNode):
            value = next((v for k, v in node.value if k.value == part), None)
            if value is None:
                break
            node = value
        else:
            break
    return node


def _path_text(path: YamlPath) -> str:
    """``content.metadata[0].prepare[1]``: the field path as manifest errors spell it."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _shorten(text: str) -> str:
    """Validation messages quote the offending value, which may be long: keep plans readable."""
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def load_policies(directory: Path) -> PolicySet:
    """Every policy in ``directory``: rule files ``*.yaml`` and schemas ``*.schema.json|yaml``.

    Files are read in name order, so verdicts come out in a stable order. A missing or
    empty directory means no policies. Other files (a README) and folders are ignored. A broken file
    is a ``PolicyError`` (the first), naming the other broken files' errors in ``also``.
    """
    if not directory.is_dir():
        return PolicySet()
    seen: dict[str, str] = {}
    policies: list[Policy] = []
    errors: list[PolicyError] = []
    for path in sorted(directory.iterdir()):
        if path.is_dir():  # a folder (even one named ``x.yaml``) holds no policy
            continue
        try:
            if path.name.endswith(SCHEMA_SUFFIXES):
                policies.append(_load_schema_policy(path, seen))
            elif path.suffix == ".yaml":
                policies += _load_rule_file(path, seen)
        except PolicyError as e:
            errors.append(e)
    if errors:
        errors[0].also = tuple(errors[1:])
        raise errors[0]
    return PolicySet(tuple(policies))


@dataclass(frozen=True)
class _Source:
    """The policy file (and policy) being read, to raise errors that point into it."""

    file: Path
    policy: str | None = None

    def error(self, node: yaml.Node | None, message: str) -> PolicyError:
        return self.at(node.start_mark.line + 1 if node is not None else 1, message)

    def at(self, line: int, message: str) -> PolicyError:
        return PolicyError(self.file, line, self.policy, message)

    def mapping(self, node: yaml.Node, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """A mapping's ``key: (key node, value node)``; keys must be strings (and are
        unique: ``_compose`` refused the file otherwise)."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping")
        return {self.string(key, "a key"): (key, value) for key, value in node.value}

    def string(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STR_TAG or not node.value:
            raise self.error(node, f"{what} must be a non-empty string")
        return str(node.value)

    def strings(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node]]:
        """A non-empty list of strings, each with its node to point at a bad one."""
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.error(node, f"{what} must be a non-empty list of strings")
        return [(self.string(item, f"each item of {what}"), item) for item in node.value]

    def severity(self, node: yaml.Node, what: str) -> Severity:
        value = self.string(node, what)
        if value not in {s.value for s in Severity}:
            expected = ", ".join(s.value for s in Severity)
            raise self.error(node, f"{what} {value!r} is not one of: {expected}")
        return Severity(value)

    def claim(self, node: yaml.Node, policy: str, seen: dict[str, str]) -> _Source:
        """Check ``policy`` is a new kebab-case id and record it; errors then name it."""
        if not _ID.fullmatch(policy):
            raise self.error(node, f"id {policy!r} must be kebab-case (like 'license-required')")
        if policy in seen:
            raise replace(self, policy=policy).error(
                node, f"duplicate id, first defined at {seen[policy]}"
            )
        seen[policy] = f"{self.file}:{node.start_mark.line + 1}"
        return replace(self, policy=policy)


@contextlib.contextmanager
def _located(source: _Source) -> Iterator[None]:
    """The bounded reader's refusals and the parser's errors as ``PolicyError``s at their line."""
    try:
        yield
    except UnsafeYamlError as e:
        raise source.at(e.flaw.line, e.flaw.message) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise source.at(mark.line + 1 if mark else 1, f"invalid YAML: {e.problem or e}") from None


def _read(source: _Source) -> str:
    """The policy file's text, within the bounds of a manifest's: at most ``MAX_BYTES``,
    UTF-8, and only the characters YAML allows (``safe_yaml.read_text``)."""
    with _located(source):
        return read_text(source.file, document=_DOCUMENT)


def _compose(source: _Source, text: str) -> yaml.Node | None:
    """The YAML tree of a policy file, refused at the first flaw ``safe_yaml`` refuses in
    a manifest: nesting deeper than ``MAX_DEPTH`` (libyaml's composer would crash), an
    anchor or alias (a few lines of aliases expand exponentially in a JSON Schema
    validator), a merge key or a duplicate key (the last one would silently win)."""
    with _located(source):
        check_events(text, document=_DOCUMENT)
        root = yaml.compose(text, Loader=YamlLoader)
        flaws = key_flaws(root, document=_DOCUMENT) if root is not None else []
        if flaws:
            raise UnsafeYamlError(flaws[0])
    return root


def _load_rule_file(path: Path, seen: dict[str, str]) -> list[Rule]:
    source = _Source(path)
    root = _compose(source, _read(source))
    if root is None:
        raise source.error(None, "a rule file must hold 'rules: [...]'")
    fields = source.mapping(root, "a rule file")
    for name, (key, _) in fields.items():
        if name != "rules":
            raise source.error(key, f"unknown key {name!r}; a rule file holds only 'rules'")
    if "rules" not in fields:
        raise source.error(root, "a rule file must hold 'rules: [...]'")
    rules = fields["rules"][1]
    if not isinstance(rules, yaml.SequenceNode):
        raise source.error(rules, "'rules' must be a list")
    return [_parse_rule(source, node, seen) for node in rules.value]


def _parse_rule(source: _Source, node: yaml.Node, seen: dict[str, str]) -> Rule:
    fields = source.mapping(node, "a rule")
    if "id" not in fields:
        raise source.error(node, "a rule needs an 'id'")
    id_node = fields["id"][1]
    source = source.claim(id_node, source.string(id_node, "'id'"), seen)
    for name, (key, _) in fields.items():
        if name not in _RULE_KEYS and name not in _CHECKS:
            raise source.error(
                key,
                f"unknown key {name!r}; a rule has {', '.join(_RULE_KEYS)} "
                f"and one check of: {', '.join(_CHECKS)}",
            )
    checks = [name for name in fields if name in _CHECKS]
    if len(checks) != 1:
        at = fields[checks[1]][0] if checks else node
        raise source.error(at, f"a rule needs exactly one check of: {', '.join(_CHECKS)}")
    for required in ("severity", "message"):
        if required not in fields:
            raise source.error(node, f"a rule needs a {required!r}")
    return Rule(
        id=str(source.policy),
        severity=source.severity(fields["severity"][1], "severity"),
        message=source.string(fields["message"][1], "'message'"),
        check=_CHECKS[checks[0]](source, fields[checks[0]][1]),
        applies_to=_applies_to(source, fields["applies_to"][1]) if "applies_to" in fields else None,
    )


def _applies_to(source: _Source, node: yaml.Node) -> models.DatasetKind:
    value = source.string(node, "'applies_to'")
    try:
        return models.DatasetKind(value)
    except ValueError:
        raise source.error(node, f"applies_to {value!r} is not one of: Root, Derivative") from None


def _name_pattern(source: _Source, node: yaml.Node) -> Check:
    text = source.string(node, "'name_pattern'")
    try:
        return NamePattern(re.compile(text))
    except re.error as e:
        raise source.error(node, f"invalid regular expression {text!r}: {e}") from None


def _require_events(source: _Source, node: yaml.Node) -> Check:
    return RequireEvents(tuple(_known(source, node, "'require_events'", _EVENT_KINDS)))


def _forbid_steps(source: _Source, node: yaml.Node) -> Check:
    names = tuple(_SPEC_NAMES.values())
    return ForbidSteps(frozenset(_known(source, node, "'forbid_steps'", names)))


def _allowed_engines(source: _Source, node: yaml.Node) -> Check:
    return AllowedEngines(tuple(value for value, _ in source.strings(node, "'allowed_engines'")))


def _breaking_changes(source: _Source, node: yaml.Node) -> Check:
    if source.string(node, "'breaking_changes'") != "require_override":
        raise source.error(node, "breaking_changes takes one value: require_override")
    return BreakingChangesNeedOverride()


def _deterministic_queries(source: _Source, node: yaml.Node) -> Check:
    if source.string(node, "'deterministic_queries'") != "required":
        raise source.error(node, "deterministic_queries takes one value: required")
    return DeterministicQueries()


def _chain_changes(source: _Source, node: yaml.Node) -> Check:
    if source.string(node, "'chain_changes'") != "forbidden":
        raise source.error(node, "chain_changes takes one value: forbidden")
    return ChainChangesForbidden()


_ENV_NAME = re.compile(r"[A-Za-z0-9_-]+")
# A prefix fixes the host (a URL's, or an image's registry) up to the ``/`` after it, so
# that what a template fills in after it cannot move the value to another host.
_URL_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\\\s]+/\S*")
_IMAGE_PREFIX = re.compile(r"[^/@\\\s:]+(?::[0-9]+)?/\S*")


def _env_templates(source: _Source, node: yaml.Node) -> Check:
    if isinstance(node, yaml.MappingNode) and not node.value:
        return EnvTemplates(())  # {}: no variable at all
    allowed = []
    for name, (key, value) in source.mapping(node, "'env_templates'").items():
        if not _ENV_NAME.fullmatch(name):
            raise source.error(key, f"{name!r} is no environment variable's name")
        prefixes = []
        for prefix, item in source.strings(value, f"the addresses of {name}"):
            pattern = _URL_PREFIX if "://" in prefix else _IMAGE_PREFIX
            if prefix != "*" and ("${{" in prefix or not pattern.fullmatch(prefix)):
                raise source.error(
                    item,
                    f"{prefix!r} does not fix a host: write a URL up to the / after its host"
                    " (https://api.example.org/), an image's registry or owner up to its /"
                    " (ghcr.io/acme/), or * for a value that is no secret",
                )
            prefixes.append(prefix)
        allowed.append((name, tuple(prefixes)))
    return EnvTemplates(tuple(allowed))


def _known(source: _Source, node: yaml.Node, what: str, known: tuple[str, ...]) -> list[str]:
    """The strings of a list, each of which must be one of ``known`` (a typo never passes)."""
    values = []
    for value, item in source.strings(node, what):
        if value not in known:
            raise source.error(
                item, f"unknown {value!r} in {what}; expected one of: {', '.join(known)}"
            )
        values.append(value)
    return values


# The closed vocabulary of checks a rule can use.
_CHECKS: dict[str, Callable[[_Source, yaml.Node], Check]] = {
    "name_pattern": _name_pattern,
    "require_events": _require_events,
    "forbid_steps": _forbid_steps,
    "allowed_engines": _allowed_engines,
    "breaking_changes": _breaking_changes,
    "deterministic_queries": _deterministic_queries,
    "chain_changes": _chain_changes,
    "env_templates": _env_templates,
}

# In force when no rule of a repository checks determinism (see ``evaluate``).
DEFAULT_DETERMINISM = Rule(
    id="deterministic-queries",
    severity=Severity.ERROR,
    message=(
        "a query whose result changes from run to run commits data that verify cannot"
        " replay; compute the value from the inputs (an event time rather than the clock,"
        " a hash of the key rather than a random id)"
    ),
    check=DeterministicQueries(),
)


# In force when no rule of a repository names ``env_templates`` (see ``evaluate``).
DEFAULT_ENV_TEMPLATES = Rule(
    id="env-templates",
    severity=Severity.ERROR,
    message=(
        "a fetch's ${{ env.NAME }} sends the runner's variable where the manifest says;"
        " name the variable, with the addresses its value may go to, in an env_templates"
        " rule under policies/ (a change its owners review)"
    ),
    check=EnvTemplates(()),
)


def _load_schema_policy(path: Path, seen: dict[str, str]) -> SchemaPolicy:
    """A JSON Schema policy; its id is the file name without ``.schema.json|yaml``.

    The schema is draft 2020-12 and may ``$ref`` the ODF schemas by their ``$id``
    (``https://reconciler.local/schemas/metadata-events/SetInfo.json``); references are
    resolved from disk only, and one that resolves nowhere is an error now, not at plan time.
    """
    source = _Source(path)
    schema, root = _schema_document(source, path)
    fields = source.mapping(root, "a schema policy")
    policy_id = path.name.removesuffix(".json").removesuffix(".yaml").removesuffix(".schema")
    source = source.claim(root, policy_id, seen)
    severity = Severity.ERROR
    if "x-severity" in fields:
        severity = source.severity(fields["x-severity"][1], "x-severity")
    if "x-message" not in fields:
        raise source.error(root, "a schema policy needs an 'x-message' to show in the plan")
    message = source.string(fields["x-message"][1], "'x-message'")
    if schema.get("$schema", _DRAFT) != _DRAFT:
        raise source.error(fields["$schema"][1], f"only JSON Schema draft 2020-12 ({_DRAFT})")
    schema.setdefault("$id", _POLICY_BASE_URI + path.name)
    return SchemaPolicy(policy_id, severity, message, _validator(source, root, schema))


def _schema_document(source: _Source, path: Path) -> tuple[Any, yaml.Node]:
    """The schema's data, and its YAML tree to give errors a line."""
    text = _read(source)
    if path.suffix == ".json":
        data, root = _json_document(source, text)
    else:
        root = _compose(source, text)
        with _located(source):  # an unknown tag (``!!foo``) is found only now
            data = construct(root) if root is not None else None
    if root is None:
        raise source.error(None, "a schema policy must be a JSON Schema object")
    return data, root


def _json_document(source: _Source, text: str) -> tuple[Any, yaml.Node | None]:
    """A ``.schema.json`` file's data, read as JSON (YAML would take ``1e3`` for a
    string), and its tree: the same text read as YAML, with tabs, which JSON allows only
    between tokens, as spaces.

    Reading the tree puts JSON under the YAML bounds too. JSON has no anchors or merge
    keys, but its nesting is bounded for the same reasons, and a duplicate key, which
    JSON's parser takes silently (the last wins), is refused at its line: the tree reads
    each JSON key as the same string, libyaml reading JSON's escapes alike (and refusing
    a surrogate pair, the one escape it would read otherwise, as invalid YAML).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise source.at(e.lineno, f"invalid JSON: {e.msg}") from None
    except RecursionError:
        # Nested past Python's limit (about 1,000 levels), so far past MAX_DEPTH: reading
        # the text as YAML, next, refuses it at the line where it gets too deep.
        data = None
    return data, _compose(source, text.replace("\t", " "))


def _validator(source: _Source, root: yaml.Node, schema: dict[str, Any]) -> Draft202012Validator:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        at = _locate(root, tuple(e.absolute_path))
        raise source.error(at, f"invalid JSON Schema: {_shorten(e.message)}") from None
    resource = DRAFT202012.create_resource(schema)
    registry = json_schemas.registry().with_resource(schema["$id"], resource)
    resolver = registry.resolver(base_uri=schema["$id"])
    broken = next(_unresolvable(resolver, resource), None)
    if broken is not None:
        raise source.error(_find_ref(root, broken), f"$ref {broken!r} resolves to no schema")
    return Draft202012Validator(schema, registry=registry)


def _unresolvable(resolver: Resolver[Any], resource: Resource[Any]) -> Iterator[str]:
    """The ``$ref``s of a schema and its subschemas that cannot be resolved."""
    ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
    if isinstance(ref, str):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            yield ref
    for sub in resource.subresources():
        yield from _unresolvable(resolver.in_subresource(sub), sub)


def _find_ref(node: yaml.Node, ref: str) -> yaml.Node | None:
    """The key node of the first ``$ref: <ref>`` in a YAML tree, to say on which line it is."""
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "$ref" and value.value == ref:
                found: yaml.Node = key
                return found
            children.append(value)
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    return next((f for child in children if (f := _find_ref(child, ref)) is not None), None)
