"""What ingest will ask of a preprocess query's output, checked on the columns the
engine's analysis gave for it.

A root's source is committed to the chain when the plan is applied, and only then does
ingest run its preprocess query over real data; any problem found there fails every
later run of the dataset. So the plan checks the output columns against what ingest
and the merge require of them (``ingest.preprocess.check_columns``,
``ingest.merge``): no column named like a system column (ignoring case, as Spark
compares names), an event time column (when the query gives one) of type DATE or
TIMESTAMP, no two columns of one name, no type a slice cannot hold (the transform's
rule, ``transform.output_rules.column_problem``), and every ``primaryKey`` and
``compareColumns`` name present. Without a preprocess query the read schema is checked
instead, elsewhere, against the same rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..odf import models
from ..odf.manifest import LoadedSnapshot, issue_at
from ..transform.output_rules import (
    clash_text,
    column_problem,
    preprocess_case_clash,
    same_names,
    system_column,
)
from .diff import SourceEvent
from .model import Column, Location, Problem

YamlPath = tuple[str | int, ...]

_TIME_TYPES = frozenset({"timestamp", "timestamp_ntz", "date"})


def output_problems(
    loaded: LoadedSnapshot, index: int, source: SourceEvent, columns: Sequence[Column]
) -> list[Problem]:
    """Problems of the preprocess output ``columns`` of ``source``, the manifest's event
    number ``index``, each located at the manifest field it comes from."""
    vocab = _vocab(loaded.snapshot)
    event_path: YamlPath = ("content", "metadata", index)
    names = {c.name for c in columns} | {vocab.event_time_column}
    problems = []
    for message, path in _findings(source, columns, names, vocab, event_path):
        issue = issue_at(loaded, path, message)
        location = Location(str(issue.file), issue.line, issue.column)
        problems.append(
            Problem(message, dataset=loaded.snapshot.name, location=location, field=issue.field)
        )
    return problems


def _findings(
    source: SourceEvent,
    columns: Sequence[Column],
    names: set[str],
    vocab: models.DatasetVocabulary,
    event_path: YamlPath,
) -> Iterator[tuple[str, YamlPath]]:
    preprocess = (*event_path, "preprocess")
    for column in columns:
        system = system_column(column.name, vocab)
        if system == column.name:
            yield (
                f"the preprocess query gives a column `{column.name}`, which is a system"
                " column's name; rename it in the query",
                preprocess,
            )
        elif system is not None:
            yield preprocess_case_clash(column.name, system), preprocess
        elif column.name == vocab.event_time_column and column.type not in _TIME_TYPES:
            yield (
                f"the preprocess query gives the event time column `{column.name}` as"
                f" {column.type}; it must be a DATE or a TIMESTAMP",
                preprocess,
            )
        elif (problem := column_problem(column.name, column.type)) is not None:
            yield f"the preprocess query's {problem}", preprocess
    clash = same_names([c.name for c in columns])
    if clash is not None:
        yield (
            f"the preprocess query's output {clash_text(*clash)}; rename one of them with AS",
            preprocess,
        )
    fields = type(source.merge).model_fields
    for field in ("primary_key", "compare_columns"):
        if field not in fields:
            continue
        wanted: list[str] = getattr(source.merge, field) or []
        alias = str(fields[field].alias)
        for position, name in enumerate(wanted):
            if name not in names:
                yield (
                    f"merge.{alias} names `{name}`, which the preprocess query does not"
                    f" give; its columns are: {', '.join(c.name for c in columns)}",
                    (*event_path, "merge", alias, position),
                )


def _vocab(snapshot: models.DatasetSnapshot) -> models.DatasetVocabulary:
    """The vocabulary ingest uses: the manifest's last SetVocab over the defaults."""
    events = [e for e in snapshot.metadata if isinstance(e, models.SetVocab)]
    overrides = events[-1].model_dump(exclude={"kind"}) if events else {}
    return models.DatasetVocabulary(**{k: v for k, v in overrides.items() if v})
