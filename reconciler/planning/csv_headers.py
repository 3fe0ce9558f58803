"""CSV files whose first line does not fit the read schema.

With a read schema, a CSV file's columns are read by position, as Spark
(``enforceSchema``) and kamu read them: a header line is skipped, not matched. Names
that differ from the schema's are common and meant (``Order ID`` read as ``order_id``),
so they are not judged; but a header that names a schema column at another position is
an export whose columns moved, and ingesting it would put each value under the wrong
name, with nothing to say so. A first line with another number of fields than the schema
has columns (a column added to the schema, old files left as they were) makes apply
refuse the rows. The plan reads the first line of each file apply would read next (at
most ``HEADER_BYTES``) and reports each such file as an error, saying which.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..odf import models
from ..odf.chain import ChainState
from ..plan.ddl import DdlError, parse_columns
from ..plan.desired import DesiredDataset, DesiredState, polling_source
from ..plan.model import Action, Plan, Problem
from ..plan.pending import NAMED_FILES, TouchedSources, at_most, files_to_read
from ..plan.policies import field_location
from ..wording import count

HEADER_BYTES = 64 * 1024
"""The most of a file read for its header; a longer first line is not judged."""


def plan_header_problems(
    plan: Plan,
    desired: DesiredState,
    matched: Mapping[str, Sequence[Path]],
    actual: Mapping[str, ChainState],
    touched: Mapping[str, TouchedSources],
) -> list[Problem]:
    """``header_problems`` of every dataset, over the files its next apply reads: all it
    matches for a chain created or recreated, else those after the last one read."""
    problems = []
    for dataset in plan.datasets:
        ds, paths = desired.datasets.get(dataset.name), matched.get(dataset.name)
        if ds is None or not paths:
            continue
        if dataset.action in (Action.CREATE, Action.RECREATE):
            state, since = None, None
        else:
            state, since = actual.get(dataset.name), touched.get(dataset.name)
        names = set(files_to_read([p.name for p in paths], state, since))
        problems += header_problems(ds, sorted((p for p in paths if p.name in names), key=_name))
    return problems


def _name(path: Path) -> str:
    return path.name


def header_problems(ds: DesiredDataset, files: Iterable[Path]) -> list[Problem]:
    """An error for each of ``files`` whose first line does not fit the read schema
    (``NAMED_FILES`` of them, then a count); none when the source is not a plain CSV
    with a schema."""
    index, source = polling_source(ds.snapshot)
    if source is None:
        return []
    read = source.read
    if not isinstance(read, models.ReadStepCsv) or not read.schema_:
        return []
    if source.prepare:  # decompressed or piped first: the file is not what is read
        return []
    if any(v is not None and len(v) != 1 for v in (read.separator, read.escape)) or (
        read.quote is not None and len(read.quote) > 1
    ):
        return []  # options the plan refuses on their own (``source_checks``)
    try:
        names = [c.name for c in parse_columns(read.schema_)]
    except DdlError:
        return []  # the schema's own problem is reported where it is checked
    problems = []
    for path in files:
        first = _first_record(path, read)
        message = _mismatch(path.name, first, names, bool(read.header)) if first else None
        if message is not None:
            problems.append(
                Problem(
                    message,
                    dataset=ds.name,
                    location=field_location(ds.loaded, ("content", "metadata", index, "read")),
                    field=f"content.metadata[{index}].read.schema",
                )
            )
    return at_most(problems, NAMED_FILES)


def _mismatch(file: str, first: Sequence[str], names: Sequence[str], header: bool) -> str | None:
    """Why the file's first record does not fit the schema's columns, or None."""
    if len(first) != len(names):
        return (
            f"{file} has {count(len(first), 'field')} in its first line but the read schema"
            f" declares {count(len(names), 'column')}: apply would refuse its rows, since a"
            " CSV row needs one field for each column"
        )
    moved = _moved(first, names) if header else {}
    if not moved:
        return None
    shown = ", ".join(
        f"{name} is column {at + 1} in the file but {names.index(name) + 1} in the schema"
        for name, at in moved.items()
    )
    return (
        f"the header of {file} names the read schema's columns in another order ({shown}):"
        " CSV columns are read by position, so their values would be ingested under other"
        " columns' names. Put the schema in the file's order, or export the file in the"
        " schema's"
    )


def _first_record(path: Path, read: models.ReadStepCsv) -> list[str] | None:
    """The file's first line as fields (the header's names, with ``header: true``), or
    None when it cannot be read as text or is empty."""
    try:
        with path.open("rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError:
        return None
    try:
        decoder = codecs.getincrementaldecoder(read.encoding or "utf-8")(errors="strict")
        text = decoder.decode(head)
    except (LookupError, UnicodeDecodeError):
        return None
    line = text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    if not line.strip() or (len(head) == HEADER_BYTES and "\n" not in text):
        return None  # empty, or a first line too long to judge
    if read.quote == "":  # no quoting at all
        reader = csv.reader([line], delimiter=read.separator or ",", quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(
            [line],
            delimiter=read.separator or ",",
            quotechar=read.quote or '"',
            escapechar=read.escape or "\\",
        )
    try:
        return [name.strip() for name in next(reader, [])]
    except csv.Error:
        return None


def _moved(header: Sequence[str], names: Sequence[str]) -> Mapping[str, int]:
    """Each schema column the header names at another position, with its position in the
    header; names are compared ignoring case, as Spark resolves them."""
    wanted = {name.lower(): name for name in names}
    moved = {}
    for at, text in enumerate(header):
        name = wanted.get(text.lower())
        if name is not None and names.index(name) != at:
            moved[name] = at
    return moved
