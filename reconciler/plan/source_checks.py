"""Source settings the plan judges before anything runs: what ingest would refuse on shape.

A root dataset's polling and push sources are only exercised when apply fetches and
reads data, hours after the pull request was merged. Everything about them that can be
told from the manifest alone is checked here, with no JVM and without running anything
the manifest gives (a regex is compiled and inspected, never matched): the read schema
(every DDL type one the readers accept, names unique as Spark compares them, no system
column), the columns the merge strategy and the vocabulary name, the ``fromPath`` regex
and time formats, URL schemes the fetcher has, one-character CSV settings and encodings
both Python and the JVM know. Each finding is located in the manifest like a loading
problem: file, line, column and field path.

Columns named by the merge strategy and vocabulary are checked against the read schema
only when the source has no preprocess query; with one, the query's output is what the
merge sees, and the query checker judges that.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

from .. import container_refs, http_headers
from ..ingest.fetch import EventTimeError, chrono_to_strptime
from ..odf import models
from ..odf.manifest import issue_at
from ..odf.names import shown
from ..transform.output_rules import system_column
from .ddl import DdlError, parse_columns
from .desired import DesiredDataset
from .model import Column, Location, Problem
from .patterns import regex_problem, spark_datetime_problem

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str]
SourceEvent = models.SetPollingSource | models.AddPushSource

URL_SCHEMES = ("http", "https", "file")
"""What ``ingest.fetch`` can fetch a ``Url`` from."""
LISTED = 20
"""How many column names a message lists."""
RESERVED_PREFIX = "__odf_"
"""Column names the readers and writer use for their own bookkeeping columns."""
RFC3339 = "rfc3339"
"""The ODF format name the readers take as Spark's default parser (``readers.RFC3339``)."""
TIME_TYPES = ("date", "timestamp", "timestamp_ltz")
"""Read-schema types an event time column may have (``frames.is_time``)."""
ENCODINGS = frozenset(
    {
        "utf-8", "utf8", "utf-16", "utf-16le", "utf-16be", "utf-32", "utf-32le", "utf-32be",
        "us-ascii", "ascii", "iso-8859-1", "latin1", "iso-8859-2", "iso-8859-3",
        "iso-8859-4", "iso-8859-5", "iso-8859-6", "iso-8859-7", "iso-8859-8", "iso-8859-9",
        "iso-8859-13", "iso-8859-15", "iso-8859-16", "windows-1250", "windows-1251",
        "windows-1252", "windows-1253", "windows-1254", "windows-1255", "windows-1256",
        "windows-1257", "windows-1258", "cp1252", "koi8-r", "koi8-u", "shift_jis", "euc-jp",
        "euc-kr", "gb2312", "gbk", "gb18030", "big5", "cp437", "ibm437", "cp850", "ibm850",
        "iso-2022-jp", "macroman",
    }
)  # fmt: skip
"""Encoding names both Python's codecs and Java's charsets resolve, to the same encoding.
Spark decodes CSV and NDJSON with Java, the readers scan and decode JSON with Python, and
the two disagree on many spellings (``latin-1`` and ``utf_8`` are Python's only)."""


def source_problems(ds: DesiredDataset) -> list[Problem]:
    """Every source setting of a manifest that ingest would refuse, as plan problems."""
    problems = []
    for loc, message in source_findings(ds.snapshot):
        issue = issue_at(ds.loaded, loc, message)
        location = Location(str(issue.file), issue.line, issue.column)
        problems.append(Problem(message, dataset=ds.name, location=location, field=issue.field))
    return problems


def source_findings(snapshot: models.DatasetSnapshot) -> Iterator[Finding]:
    """(where, what) for each problem, ``where`` being the path of the field at fault."""
    vocab, vocab_at = _vocabulary(snapshot)
    push_names: dict[str, int] = {}
    for i, event in enumerate(snapshot.metadata):
        at: Loc = ("content", "metadata", i)
        if isinstance(event, models.SetPollingSource):
            yield from _fetch_findings(event.fetch, (*at, "fetch"))
            for j, step in enumerate(event.prepare or []):
                if isinstance(step, models.PrepStepPipe) and not step.command:
                    yield (*at, "prepare", j, "command"), "the Pipe command is empty"
        if isinstance(event, models.AddPushSource):
            first = push_names.setdefault(event.source_name, i)
            if first != i:
                name, earlier = event.source_name, f"content.metadata[{first}]"
                yield (
                    (*at, "sourceName"),
                    f"push source {shown(name)} is already defined by {earlier}",
                )
        if isinstance(event, SourceEvent):
            yield from _read_findings(event.read, (*at, "read"))
            yield from _merge_findings(event.merge, (*at, "merge"))
            columns = _schema_columns(event.read)
            if columns is not None and event.preprocess is None:
                yield from _column_findings(event, columns, at, vocab, vocab_at)


# ------------------------------------------------------------------------------- fetch


def _fetch_findings(fetch: models.FetchStep, at: Loc) -> Iterator[Finding]:
    """The configuration checks ``ingest.fetch`` makes before it fetches anything."""
    event_time = getattr(fetch, "event_time", None)
    if isinstance(fetch, models.FetchStepUrl):
        scheme = _scheme(fetch.url)
        supported = f"only {', '.join(URL_SCHEMES[:-1])} and {URL_SCHEMES[-1]} URLs can be fetched"
        if scheme == "":
            yield (*at, "url"), f"URL has no scheme: {supported}"
        elif scheme is not None and scheme not in URL_SCHEMES:
            yield (*at, "url"), f"URL scheme {shown(scheme)} is not supported: {supported}"
        if isinstance(event_time, models.EventTimeSourceFromPath):
            message = "a Url source cannot take its event time fromPath (only FilesGlob can)"
            yield (*at, "eventTime", "kind"), message
        yield from _header_findings(fetch, at)
    if isinstance(fetch, models.FetchStepContainer):
        yield from _container_findings(fetch, at)
    if isinstance(fetch, models.FetchStepFilesGlob):
        if fetch.order not in (None, models.SourceOrdering.BY_NAME):
            yield (*at, "order"), f"FilesGlob can only be ordered ByName, not {fetch.order}"
        if isinstance(event_time, models.EventTimeSourceFromMetadata):
            message = "a FilesGlob source cannot take its event time fromMetadata; use fromPath"
            yield (*at, "eventTime", "kind"), message
        if isinstance(event_time, models.EventTimeSourceFromPath):
            yield from _from_path_findings(event_time, (*at, "eventTime"))


def _header_findings(fetch: models.FetchStepUrl, at: Loc) -> Iterator[Finding]:
    """The headers as written; a line break written in a value stays after templates."""
    for i, header in enumerate(fetch.headers or []):
        if (problem := http_headers.name_problem(header.name)) is not None:
            yield (*at, "headers", i, "name"), problem
        elif (problem := http_headers.value_problem(header.name, header.value)) is not None:
            yield (*at, "headers", i, "value"), problem


def _container_findings(fetch: models.FetchStepContainer, at: Loc) -> Iterator[Finding]:
    """The image and the variables as written: a template is resolved only by the fetch,
    which checks the image again then; a line break written in a value stays after it."""
    if "${{" not in fetch.image and (problem := container_refs.image_problem(fetch.image)):
        yield (*at, "image"), problem
    for i, var in enumerate(fetch.env or []):
        if (problem := container_refs.name_problem(var.name)) is not None:
            yield (*at, "env", i, "name"), problem
        elif var.value is not None and (
            problem := container_refs.value_problem(var.name, var.value)
        ):
            yield (*at, "env", i, "value"), problem


def _scheme(url: str) -> str | None:
    """The URL's scheme in lower case, or None when a ``${{ env.… }}`` template stands
    where it would be (only fetch resolves templates, so the plan cannot tell)."""
    if "${{" in url.split(":", 1)[0]:
        return None
    return urlsplit(url.strip()).scheme.lower()


def _from_path_findings(source: models.EventTimeSourceFromPath, at: Loc) -> Iterator[Finding]:
    problem = regex_problem(source.pattern)
    if problem is not None:
        yield (*at, "pattern"), f"fromPath pattern {shown(source.pattern)} {problem}"
    if source.timestamp_format is not None:
        try:
            chrono_to_strptime(source.timestamp_format)
        except EventTimeError as e:
            yield (*at, "timestampFormat"), str(e)


# -------------------------------------------------------------------------------- read


def _read_findings(read: models.ReadStep, at: Loc) -> Iterator[Finding]:
    if read.schema_ is not None:
        yield from _schema_findings(read.schema_, (*at, "schema"))
    if isinstance(read, models.ReadStepCsv):
        for field, value, may_be_empty in (
            ("separator", read.separator, False),
            ("quote", read.quote, True),
            ("escape", read.escape, True),
        ):
            if value is not None and not (len(value) == 1 or (may_be_empty and value == "")):
                yield (*at, field), f"Csv.{field} must be a single character, got {shown(value)}"
    encoding = getattr(read, "encoding", None)
    if encoding is not None and encoding.lower() not in ENCODINGS:
        yield (
            (*at, "encoding"),
            (
                f"encoding {shown(encoding)} is not supported: use a name both Python and Java "
                "know, such as utf-8, utf-16le, iso-8859-1 or windows-1252"
            ),
        )
    if isinstance(read, models.ReadStepCsv | models.ReadStepJson | models.ReadStepNdJson):
        for field, value in (
            ("dateFormat", read.date_format),
            ("timestampFormat", read.timestamp_format),
        ):
            if value is None or value.lower() == RFC3339:
                continue
            problem = spark_datetime_problem(value)
            if problem is not None:
                yield (*at, field), f"{field} {shown(value)} {problem}"


def _schema_findings(schema: list[str], at: Loc) -> Iterator[Finding]:
    """Every entry parses to types the readers accept, and no name is taken twice as
    Spark compares names (case-insensitively) or is one the reconciler reserves."""
    if not schema:
        yield at, "the read schema is empty: list its columns, or leave 'schema' out"
        return
    seen: dict[str, str] = {}
    for k, text in enumerate(schema):
        try:
            columns = parse_columns([text])
        except DdlError as e:
            yield (*at, k), f"read schema column {shown(text)}: {e}"
            continue
        for column in columns:
            key = column.name.lower()
            first = seen.get(key)
            if first is None:
                seen[key] = column.name
            elif first == column.name:
                yield (*at, k), f"column {shown(column.name)} is declared more than once"
            else:
                yield (
                    (*at, k),
                    (
                        f"columns {shown(first)} and {shown(column.name)} differ only in case, "
                        "which Spark (spark.sql.caseSensitive=false) cannot hold apart"
                    ),
                )
            if column.name.startswith(RESERVED_PREFIX):
                yield (
                    (*at, k),
                    (
                        f"column name {shown(column.name)} is reserved: names starting with "
                        f"{RESERVED_PREFIX!r} are the reconciler's"
                    ),
                )


def _schema_columns(read: models.ReadStep) -> list[tuple[int, Column]] | None:
    """The read schema's columns with the index of the entry declaring each, or None when
    there is no schema or it does not parse (which ``_schema_findings`` reports)."""
    if not read.schema_:
        return None
    columns = []
    try:
        for k, text in enumerate(read.schema_):
            columns += [(k, column) for column in parse_columns([text])]
    except DdlError:
        return None
    return columns


# ------------------------------------------------------------------------------- merge


def _merge_findings(merge: models.MergeStrategy, at: Loc) -> Iterator[Finding]:
    keys = getattr(merge, "primary_key", None)
    if keys is None:
        return
    if not keys:
        yield (*at, "primaryKey"), f"primaryKey is empty: a {merge.kind} merge needs a key column"
    for j, key in enumerate(keys):
        if key in keys[:j]:
            yield (*at, "primaryKey", j), f"primaryKey names {shown(key)} more than once"


def _column_findings(
    event: SourceEvent,
    columns: list[tuple[int, Column]],
    at: Loc,
    vocab: models.DatasetVocabulary,
    vocab_at: Loc | None,
) -> Iterator[Finding]:
    """What the merge and the slice writer need of the data, which without a preprocess
    query has exactly the read schema's columns."""
    names = [c.name for _, c in columns]
    referenced = {
        "primaryKey": getattr(event.merge, "primary_key", None),
        "compareColumns": getattr(event.merge, "compare_columns", None),
    }
    for field, wanted in referenced.items():
        for j, name in enumerate(wanted or []):
            if name not in names:
                yield (*at, "merge", field, j), _missing(field, name, names)
    for k, column in columns:
        system = system_column(column.name, vocab)
        if system == column.name:
            yield (
                (*at, "read", "schema", k),
                (
                    f"column {shown(column.name)} has the name of a system column; rename it in "
                    "the read schema (or in a preprocess query)"
                ),
            )
        elif system is not None:
            yield (
                (*at, "read", "schema", k),
                (
                    f"column {shown(column.name)} differs only in case from the system column"
                    f" {shown(system)}, which Spark (spark.sql.caseSensitive=false) cannot hold"
                    " apart from it; rename it in the read schema (or in a preprocess query)"
                ),
            )
        if column.name == vocab.event_time_column and column.type not in TIME_TYPES:
            yield (
                (*at, "read", "schema", k),
                (
                    f"event time column {shown(column.name)} must be a DATE or a TIMESTAMP, "
                    f"not {column.type.upper()}"
                ),
            )
    if vocab_at is not None and vocab.event_time_column not in names:
        source = f"content.metadata[{at[-1]}]"
        yield vocab_at, _missing("eventTimeColumn", vocab.event_time_column, names, source)


def _missing(field: str, name: str, names: list[str], source: str = "") -> str:
    """A column that is not in the read schema (of ``source``, when that is not the
    field's own event), with the one differing only in case."""
    near = next((n for n in names if n.lower() == name.lower()), None)
    hint = f" (names are case-sensitive: did you mean {shown(near)}?)" if near else ""
    schema = f"the read schema of {source}" if source else "the read schema"
    listed = _listed(names)
    return f"{field} {shown(name)} is not a column of {schema}{hint}; its columns: {listed}"


def _listed(names: list[str]) -> str:
    """Column names for a message: quoted, and no more than ``LISTED`` of them."""
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(shown(n) for n in names[:LISTED]) + more


def _vocabulary(snapshot: models.DatasetSnapshot) -> tuple[models.DatasetVocabulary, Loc | None]:
    """The vocabulary in force (the last SetVocab, unset fields at their defaults) and
    where its ``eventTimeColumn`` is set, if a manifest sets it."""
    for i in reversed(range(len(snapshot.metadata))):
        event = snapshot.metadata[i]
        if isinstance(event, models.SetVocab):
            given = event.model_dump(exclude_none=True, exclude={"kind"})
            at: Loc = ("content", "metadata", i, "eventTimeColumn")
            return models.DatasetVocabulary(**given), at if event.event_time_column else None
    return models.DatasetVocabulary(), None
