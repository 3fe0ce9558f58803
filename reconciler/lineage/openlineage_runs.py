"""What each dataset run of an apply reads and writes, described for OpenLineage.

``apply`` knows when a dataset's run starts and ends; this module says what the run is
about, in the terms of :class:`~reconciler.lineage.openlineage_events.RunInfo`:

- Inputs: a derivative's input datasets by name, each with its schema as its chain's
  ``SetDataSchema`` records it now (inputs ran earlier in the same apply, so that is the
  schema the transform reads). A root has no inputs: its source lies outside the
  repository, and its URL may hold a resolved ``${{ env.X }}`` secret, so it is never
  reported.
- Output: the dataset, with its schema from its chain; after the run, the schema as
  written (the first run of a dataset is the one that writes its ``SetDataSchema``).
  Types are Spark DDL spellings (``bigint``, ``timestamp``), as in the plan.
- SQL: a derivative's transform, or a root's preprocess query, as the manifest being
  applied gives it: the plan's new event when the plan changes it, else the chain's
  (they are the same once the metadata is appended, and only the plan's is right when
  appending fails). A multi-step query is written as the engine runs it: each aliased
  step as ``CREATE OR REPLACE TEMPORARY VIEW `alias` AS ...;``, then the last step, so
  the text is one script that both people and SQL lineage parsers can read.
- Source code location: the manifest's path relative to the git work tree, which is
  what the commit reported beside it refers to.

Describing a run never fails: lineage is best effort, so whatever cannot be read (a
chain that does not exist yet, a schema Spark has no type for) is left out or falls back
to Arrow's type names, with a debug log line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import git
from pyspark.sql.pandas.types import from_arrow_schema

from ..engine.query_check import columns_from_schema
from ..odf import models
from ..odf.arrow_schema import decode_arrow_schema
from ..odf.chain import ChainState
from ..odf.repository import Dataset, OdfRepository
from ..plan.model import DatasetPlan
from .openlineage_events import LineageDataset, RunInfo

log = logging.getLogger(__name__)

Columns = tuple[tuple[str, str], ...]

_SOURCE_EVENTS = ("SetPollingSource", "DisablePollingSource")
_NOT_PLANNED = object()  # the plan leaves the event as the chain has it


class RunDescriber:
    """Describes the runs of one apply; it caches the git work tree it resolves paths in."""

    def __init__(self, repo: OdfRepository) -> None:
        self._repo = repo
        self._worktrees: dict[Path, Path | None] = {}

    def describe(self, ds: DatasetPlan) -> RunInfo:
        """The run about to apply ``ds``: call it before its metadata is appended.

        Never raises: a run that cannot be described in full is reported by name only,
        because lineage must not stop a reconcile.
        """
        kind: Literal["ingest", "transform"] = "ingest" if ds.kind == "Root" else "transform"
        try:
            state = chain_state(self._repo.dataset(ds.name))
            inputs = tuple(LineageDataset(n, self.columns(n)) for n in ds.inputs)
            return RunInfo(
                dataset=ds.name,
                kind=kind,
                inputs=() if kind == "ingest" else inputs,
                output=LineageDataset(ds.name, columns_of(state)),
                sql=_sql(ds, state),
                manifest_path=self.manifest_path(ds),
            )
        except Exception as e:  # best effort, as every other part of lineage
            log.warning("OpenLineage: the run of %s is reported without details: %s", ds.name, e)
            return RunInfo(ds.name, kind, (), LineageDataset(ds.name))

    def columns(self, name: str) -> Columns:
        """The dataset's schema as its chain records it now; empty if it has none yet."""
        return columns_of(chain_state(self._repo.dataset(name)))

    def manifest_path(self, ds: DatasetPlan) -> str | None:
        """The manifest's POSIX path inside its git work tree; None outside git."""
        if ds.manifest is None:
            return None
        path = Path(ds.manifest.file).resolve()
        top = self._worktree(path.parent)
        if top is None:
            return None
        try:
            return path.relative_to(top).as_posix()
        except ValueError:  # a manifest linked in from outside the work tree
            return None

    def _worktree(self, folder: Path) -> Path | None:
        if folder not in self._worktrees:
            try:
                with git.Repo(folder, search_parent_directories=True) as repo:
                    top = repo.working_tree_dir
                self._worktrees[folder] = Path(top).resolve() if top else None
            except (git.GitError, OSError, ValueError):  # not in git, or a damaged .git
                self._worktrees[folder] = None
        return self._worktrees[folder]


def chain_state(dataset: Dataset) -> ChainState | None:
    """The dataset's chain state, or None when it has no chain (yet) or cannot be read."""
    if not dataset.exists():
        return None
    try:
        return dataset.state()
    except Exception as e:  # a broken chain fails its own run; lineage just says less
        log.debug("no lineage details for %s: %s", dataset.root.name, e)
        return None


def columns_of(state: ChainState | None) -> Columns:
    """``(name, type)`` of the columns in the chain's ``SetDataSchema``, types in Spark DDL
    spelling, or Arrow's names for a type Spark cannot represent."""
    if state is None or state.data_schema is None:
        return ()
    try:
        schema = decode_arrow_schema(state.data_schema)
    except Exception as e:  # the chain's own checks report a bad schema, not lineage
        log.debug("undecodable data schema: %s", e)
        return ()
    try:
        return tuple((c.name, c.type) for c in columns_from_schema(from_arrow_schema(schema)))
    except Exception:  # e.g. an Arrow type Spark has no counterpart for
        return tuple((f.name, str(f.type)) for f in schema)


def sql_text(transform: models.TransformSql) -> str:
    """The transform as one SQL script (see the module docstring)."""
    steps = transform.normalized().queries or []
    parts = []
    for i, step in enumerate(steps):
        query = step.query.strip()
        if i == len(steps) - 1:
            parts.append(query)
        elif step.alias is not None:
            alias = "`" + step.alias.replace("`", "``") + "`"
            parts.append(f"CREATE OR REPLACE TEMPORARY VIEW {alias} AS\n{query.rstrip(';')};")
        else:
            parts.append(f"{query.rstrip(';')};")
    return "\n\n".join(parts)


def _sql(ds: DatasetPlan, state: ChainState | None) -> str | None:
    transform: models.Transform | None = None
    if ds.kind == "Root":
        source = _planned(ds, _SOURCE_EVENTS, models.SetPollingSource)
        if source is _NOT_PLANNED:
            source = state.polling_source if state is not None else None
        if isinstance(source, models.SetPollingSource):
            transform = source.preprocess
    else:
        set_transform = _planned(ds, ("SetTransform",), models.SetTransform)
        if set_transform is _NOT_PLANNED:
            set_transform = state.transform if state is not None else None
        if isinstance(set_transform, models.SetTransform):
            transform = set_transform.transform
    return sql_text(transform) if isinstance(transform, models.TransformSql) else None


def _planned(ds: DatasetPlan, kinds: tuple[str, ...], model: type[models.OdfModel]) -> object:
    """The plan's new event of one of ``kinds`` as ``model`` (None if it disables or cannot
    be read), or ``_NOT_PLANNED`` when the plan does not change it."""
    for change in ds.events:
        if change.kind in kinds:
            after = change.after
            if after is None or after.get("kind") != model.__name__:
                return None
            try:
                return model.model_validate(after)
            except ValueError:
                return None
    return _NOT_PLANNED
