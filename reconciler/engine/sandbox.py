"""Keep a derivative's SQL to its declared inputs.

Queries come from manifests, and manifests from pull requests nobody has reviewed yet:
the plan analyses them on every pull request, and ``apply`` runs them once merged. A
query may read its inputs (temporary views registered under their aliases, and the
views of earlier steps) and compute over them; it may not read anything else on the
runner (files, catalog tables, other sessions' views) nor call into the JVM.

The check works on Spark's *analysed logical plan*, not on the SQL text: a text filter
is defeated by comments, quoting, ``IDENTIFIER('…')``-built names, CTEs and
subqueries, while the analysed plan says exactly which relations Spark resolved and
which functions it bound, whatever the spelling. Analysing runs no job and reads no
data; statements other than queries (which ``spark.sql`` would *execute*) are refused
by ``query_check`` from the parse alone, before this module sees them.

One thing is checked before analysis, on the parsed plan: calls to Java reflection.
Spark's analyser looks up (and so loads and initialises) the class a ``reflect`` call
names, so such a call is refused before the analyser runs.

Rules for the analysed plan, walked through every node, every expression and every
subquery:

- a temporary view whose name is an allowed alias is an input; the sandbox does not
  look inside it (its plan is the DataFrame the caller registered);
- any other view (temporary, global temporary or permanent), table or file relation is
  refused, as is any leaf the sandbox does not know to be harmless;
- harmless leaves are ``VALUES`` (``LocalRelation``/``ResolvedInlineTable``), the empty
  ``SELECT 1`` relation, CTE references and ``range()``, which reads nothing and is as
  deterministic as ``sequence()`` (a huge range costs time when run, like any cross
  join of the inputs would; it reads nothing it should not);
- commands are refused wherever they appear, and so is ``SELECT TRANSFORM(…) USING
  'program'`` (Hive's script transformation, which Spark supports without Hive): it is
  a query, but running it runs any program on the runner with the rows as its input;
- Java reflection (``reflect``, ``java_method``, ``try_reflect``) and user-defined
  functions (Scala, Java, Python or Hive UDFs a session may have registered, whose code
  is not in the manifest) are refused;
- the XPath functions (``xpath``, ``xpath_string``, ``xpath_int``… ``xpath_number``)
  are refused: their parser loads the external DTD a document names, so a row's value
  would make the runner send a request, and Spark offers no setting to stop it;
- the JSON, CSV and XML functions (``from_xml``, ``schema_of_xml``, ``to_xml`` and
  their JSON and CSV twins) may not be given an option that names a location
  (``rowValidationXSDPath``, or any option whose name says path, file, URL, URI, XSD or
  DTD): Spark would load that schema, and whatever it includes, from any file or URL
  when the query runs. Their XML parser itself resolves neither DTDs nor entities.

Files and URLs can be reached from a query *before* analysis too, so the parsed plan is
also checked for calls whose arguments Spark reads while analysing or that no analysed
plan shows any more:

- ``from_protobuf`` and ``to_protobuf`` read their descriptor file (a Hadoop path, so
  ``http://`` as well) while the analyser types them, and without a descriptor they load
  a Java class by name; only a descriptor given inline as a binary literal
  (``X'0a…'``) is allowed;
- the options of the functions above, and of ``from_avro`` and ``schema_of_avro``, must
  be a ``map()`` of string literals, so that a reviewer reads the options the engine
  gets (an option name built by an expression is exactly what a reviewer would miss),
  and none may name a location.

Non-deterministic built-ins (``rand()``, ``uuid()``, ``current_timestamp()``,
``TABLESAMPLE``) read nothing outside the query and are not refused here: the walk only
collects them (``determinism``) for the caller, whose rule determinism is.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pyspark.sql import DataFrame

from reconciler.engine import determinism
from reconciler.engine.determinism import Nondeterminism
from reconciler.engine.limits import RECURSION_LEVELS

_CATALYST = "org.apache.spark.sql.catalyst"

# Leaves that read nothing: literal rows, the one empty row, CTE and recursive-CTE
# references (their definitions are walked where they are defined), and range().
_HARMLESS_LEAVES = frozenset(
    {
        "OneRowRelation",
        "LocalRelation",
        "ResolvedInlineTable",
        "CTERelationRef",
        "UnionLoopRef",
        "Range",
    }
)
# Inner nodes that run something outside Spark: TRANSFORM/MAP/REDUCE … USING 'program'.
_EXTERNAL_PROGRAMS = frozenset({"ScriptTransformation"})
# Function names (last name part, lower case) that resolve to Java reflection.
_REFLECTION_NAMES = frozenset({"reflect", "java_method", "try_reflect"})
_REFLECTION_CLASSES = frozenset({"CallMethodViaReflection", "TryReflect"})
# XPath expressions (analysed classes): their parser fetches a document's external DTD.
_XPATH_CLASSES = frozenset(
    {
        "XPathList",
        "XPathBoolean",
        "XPathShort",
        "XPathInt",
        "XPathLong",
        "XPathFloat",
        "XPathDouble",
        "XPathString",
    }
)
# Analysed expressions that hold evaluated reader or writer options (``options()``).
_OPTION_CLASSES = frozenset(
    {
        "XmlToStructs",
        "SchemaOfXml",
        "StructsToXml",
        "JsonToStructs",
        "SchemaOfJson",
        "StructsToJson",
        "CsvToStructs",
        "SchemaOfCsv",
        "StructsToCsv",
    }
)
# Function name -> the 0-based position of its options argument, for the parsed check.
_OPTIONS_ARGUMENT = {
    "from_xml": 2,
    "schema_of_xml": 1,
    "to_xml": 1,
    "from_json": 2,
    "schema_of_json": 1,
    "to_json": 1,
    "from_csv": 2,
    "schema_of_csv": 1,
    "to_csv": 1,
    "from_avro": 2,
    "schema_of_avro": 1,
    "from_protobuf": 3,
    "to_protobuf": 3,
}
# Functions that read a descriptor file at this 0-based position while being analysed.
_DESCRIPTOR_ARGUMENT = {"from_protobuf": 2, "to_protobuf": 2}
# Option names (any case) that point the engine at something to load.
_LOCATION_OPTION = re.compile(r"path|file|url|uri|xsd|dtd", re.IGNORECASE)


class SandboxError(Exception):
    """A query reaches outside its inputs: ``reason`` says how, ``line`` where (1-based,
    when Spark kept the position of the offending part of the query)."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def check_parsed(plan: Any, jvm: Any) -> None:
    """Refuse, before analysis, a parsed query (a JVM ``LogicalPlan``) calling reflection.

    Function names are not bound yet, so this goes by name: ``reflect``, ``java_method``
    and ``try_reflect`` however qualified or cased, and a function named by
    ``IDENTIFIER(…)``, unless the identifier is a plain string naming another function
    (an expression could build the name ``reflect``). ``jvm`` is the session's py4j view.
    """
    for node, kind in _parsed_trees(plan, node_types(jvm)):
        if kind == "UnresolvedFunction":
            name = str(node.nameParts().last()).lower()
            if name in _REFLECTION_NAMES:
                raise SandboxError(f"calls Java reflection ({name})", _line(node))
            _check_arguments(node, name, list(scala_seq(node.arguments())))
        elif kind == "ExpressionWithUnresolvedIdentifier":
            identifier = node.identifierExpr()
            if _simple_name(identifier) != "Literal":
                raise SandboxError(
                    "names a function with IDENTIFIER() over an expression; write the name",
                    _line(node),
                )
            text = str(identifier.value()).lower()
            if any(name in text for name in _REFLECTION_NAMES):
                raise SandboxError(f"calls Java reflection ({text})", _line(node))
            name = text.rpartition(".")[2].strip("`")
            _check_arguments(node, name, list(scala_seq(node.otherExprs())))


def tables_named(plan: Any, jvm: Any) -> frozenset[str] | None:
    """The tables a parsed query (a JVM ``LogicalPlan``) names, multi-part names joined
    by dots, or None when one is named by an expression (``IDENTIFIER(…)``), which only
    analysis resolves. CTE names are among them: a caller reading this as what to
    provide provides a little more, never less."""
    names: set[str] = set()
    for node, kind in _parsed_trees(plan, node_types(jvm)):
        if kind == "UnresolvedRelation":
            names.add(".".join(str(part) for part in scala_seq(node.multipartIdentifier())))
        elif kind == "PlanWithUnresolvedIdentifier":
            return None
    return frozenset(names)


def _check_arguments(node: Any, name: str, arguments: list[Any]) -> None:
    """Refuse a parsed call that would make Spark load a descriptor, schema or file."""
    position = _DESCRIPTOR_ARGUMENT.get(name)
    if position is not None and not _is_binary_literal(arguments, position):
        raise SandboxError(
            f"{name} reads a descriptor file or loads a Java class; give the descriptor"
            " inline as a binary literal (X'...')",
            _line(node),
        )
    position = _OPTIONS_ARGUMENT.get(name)
    if position is None or len(arguments) <= position:
        return
    options = arguments[position]
    pairs = list(scala_seq(options.arguments())) if _is_map_call(options) else []
    if not pairs or not all(_is_string_literal(part) for part in pairs):
        raise SandboxError(
            f"gives {name} options that are not a map() of string literals", _line(node)
        )
    for key in pairs[::2]:
        _check_option(node, name, str(key.value()))


def _is_map_call(node: Any) -> bool:
    return _simple_name(node) == "UnresolvedFunction" and (
        str(node.nameParts().last()).lower() == "map"
    )


def _is_string_literal(node: Any) -> bool:
    return _simple_name(node) == "Literal" and str(node.dataType().typeName()) == "string"


def _is_binary_literal(arguments: list[Any], position: int) -> bool:
    if len(arguments) <= position:
        return False
    node = arguments[position]
    return _simple_name(node) == "Literal" and str(node.dataType().typeName()) == "binary"


def _check_option(node: Any, function: str, option: str) -> None:
    if _LOCATION_OPTION.search(option):
        raise SandboxError(
            f"gives {function} the option {option!r}, which makes Spark load a file or URL",
            _line(node),
        )


def check_plan(frame: DataFrame, allowed: Collection[str]) -> tuple[Nondeterminism, ...]:
    """Refuse ``frame`` unless its analysed plan reads only the views named ``allowed``;
    give what in it is non-deterministic, in plan order.

    ``allowed`` holds view names as registered (the inputs' aliases and the earlier
    steps'); they match as Spark resolves names, case-insensitively unless the session
    sets ``spark.sql.caseSensitive``. The inside of an allowed view is not walked, so
    what an earlier step did is reported with that step, not again with this one.
    """
    session = frame.sparkSession
    case_sensitive = str(session.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    names = set(allowed) if case_sensitive else {name.lower() for name in allowed}
    walker = _Walker(node_types(session.sparkContext._jvm), names, case_sensitive)
    walker.plan(frame._jdf.queryExecution().analyzed())
    return tuple(walker.nondeterministic)


@cache
def node_types(jvm: Any) -> _Types:
    """The JVM's types, looked up once: each py4j call is a round trip to the JVM."""
    return _Types(jvm)


class _Types:
    """Which of the JVM types the sandbox cares about a node's class is, cached by class."""

    def __init__(self, jvm: Any) -> None:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        self._bases = {
            key: jvm.java.lang.Class.forName(f"{_CATALYST}.{name}", False, loader)
            for key, name in (
                ("plan", "plans.logical.LogicalPlan"),
                ("command", "plans.logical.Command"),
                ("plan_expression", "expressions.PlanExpression"),
                ("udf", "expressions.UserDefinedExpression"),
            )
        }
        self._kinds: dict[str, frozenset[str]] = {}

    def of(self, node: Any) -> tuple[str, frozenset[str]]:
        """The node's simple class name and the checked types it is an instance of."""
        java_class = node.getClass()
        name = str(java_class.getName())
        kinds = self._kinds.get(name)
        if kinds is None:
            kinds = frozenset(k for k, b in self._bases.items() if b.isAssignableFrom(java_class))
            self._kinds[name] = kinds
        return name.rpartition(".")[2].rpartition("$")[2], kinds


@dataclass
class _Walker:
    """Walks an analysed plan (py4j objects), raising SandboxError at the first breach."""

    types: _Types
    allowed: set[str]
    case_sensitive: bool
    nondeterministic: list[Nondeterminism] = field(default_factory=list)

    def plan(self, node: Any) -> None:
        name, kinds = self.types.of(node)
        if name == "View":
            self._view(node)
            return  # an allowed view's inside is the caller's own DataFrame
        if "command" in kinds:
            raise SandboxError(f"runs a command ({name})", _line(node))
        if name in _EXTERNAL_PROGRAMS:
            raise SandboxError(
                f"runs an external program (TRANSFORM ... USING {node.script()!r})", _line(node)
            )
        if name == "UnionLoop" and (depth := node.maxDepth()).isDefined():
            levels = int(depth.get())
            if not 0 < levels <= RECURSION_LEVELS:
                raise SandboxError(
                    f"sets MAX RECURSION LEVEL {levels}: a recursive WITH may go 1 to"
                    f" {RECURSION_LEVELS} levels deep, Spark's own limit, so that a run ends"
                    " (the plan cannot tell how deep its data leads)",
                    _line(node),
                )
        children = list(scala_seq(node.children()))
        if not children and name not in _HARMLESS_LEAVES:
            raise SandboxError(_relation_reason(node, name), _line(node))
        self._note(determinism.plan_node(name), node)
        for expression in scala_seq(node.expressions()):
            self.expression(expression)
        for child in children:
            self.plan(child)

    def expression(self, node: Any) -> None:
        name, kinds = self.types.of(node)
        if name in _REFLECTION_CLASSES:
            raise SandboxError(f"calls Java reflection ({node.prettyName()})", _line(node))
        if "udf" in kinds:
            raise SandboxError(f"calls user-defined function `{node.name()}`", _line(node))
        if name in _XPATH_CLASSES:
            raise SandboxError(
                f"calls {node.prettyName()}, whose XML parser fetches external DTDs", _line(node)
            )
        if name in _OPTION_CLASSES:
            for option in scala_seq(node.options().keys().toSeq()):
                _check_option(node, str(node.prettyName()), str(option))
        children = list(scala_seq(node.children()))
        if "plan_expression" in kinds:  # EXISTS, IN, scalar and lateral subqueries
            inner = node.plan()
            if "plan" not in self.types.of(inner)[1]:
                raise SandboxError(f"holds a {name} the sandbox cannot check", _line(node))
            self.plan(inner)  # which names what makes the subquery non-deterministic
        else:
            self._note(determinism.expression(node, name, children), node)
        for child in children:
            self.expression(child)

    def _note(self, what: str | None, node: Any) -> None:
        if what is not None:
            self.nondeterministic.append(Nondeterminism(what, _line(node)))

    def _view(self, node: Any) -> None:
        identifier = node.desc().identifier()
        table = str(identifier.table())
        key = table if self.case_sensitive else table.lower()
        if node.isTempView() and not identifier.database().isDefined() and key in self.allowed:
            return
        raise SandboxError(f"reads {identifier.quotedString()}, which is not an input", _line(node))


def _relation_reason(node: Any, name: str) -> str:
    """Why a leaf is refused, naming the table or file it reads when it has one."""
    if name == "LogicalRelation":
        table = node.catalogTable()
        if table.isDefined():
            return f"reads table {table.get().identifier().quotedString()}, which is not an input"
        relation = node.relation()
        if _simple_name(relation) == "HadoopFsRelation":
            paths = ", ".join(str(p) for p in scala_seq(relation.location().rootPaths()))
            return f"reads a file relation ({paths})"
        return f"reads a data source relation ({_simple_name(relation)})"
    if name == "HiveTableRelation":
        return f"reads table {node.tableMeta().identifier().quotedString()}, which is not an input"
    if name in {"DataSourceV2Relation", "DataSourceV2ScanRelation"}:
        return f"reads table `{node.name()}`, which is not an input"
    return f"reads a {name} relation, which is not an input"


def _parsed_trees(plan: Any, types: _Types) -> Iterator[tuple[Any, str]]:
    """Every plan and expression node of a parsed plan with its class name, depth first.

    A plan's inner children are its subqueries' plans, or for ``WITH`` the CTE
    definitions, which are not among its children.
    """
    stack = [plan]
    while stack:
        node = stack.pop()
        name, kinds = types.of(node)
        yield node, name
        stack.extend(scala_seq(node.children()))
        if "plan" in kinds:
            stack.extend(scala_seq(node.innerChildren()))
            stack.extend(scala_seq(node.expressions()))


def scala_seq(seq: Any) -> Iterator[Any]:
    """The elements of a Scala ``Seq`` held by py4j."""
    for index in range(seq.length()):
        yield seq.apply(index)


def _simple_name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _line(node: Any) -> int | None:
    line = node.origin().line()
    return int(line.get()) if line.isDefined() else None
