"""Pull a root dataset: run its polling source until it is up to date, or ingest a file
through one of its push sources.

One polling iteration (ENGINE-SEMANTICS §1.1) is fetch, prepare, read, preprocess, merge
and commit; iterations repeat while the source has more (a FilesGlob with several new
files). Fetching happens before Spark is needed, so a run in which every source is up to
date never starts a JVM.

Each iteration is all or nothing: if it fails, the head goes back to where it started,
so the chain is as the last whole iteration left it, and the next run redoes the failed
one once (source states are only committed with their data). A failure in the first
iteration is raised; after that the pull ends with the iterations done kept and the
failure reported (``PullResult.failure``). Asked to stop (the first Ctrl-C or SIGTERM),
it ends after the iteration at hand, keeping those done: the next run goes on from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark.sql import SparkSession

from ..odf import models
from ..odf.chain import ChainState
from ..odf.repository import Dataset
from ..odf.schema_evolution import IncompatibleSchemaError
from ..odf.timestamps import Timestamp
from ..writer.commit import all_or_nothing, commit
from ..writer.scratch import INGEST_PREFIX, PUSH_PREFIX, scratch_dir
from .fetch import DownloadLimits, Fetched, SourceNotFoundError, UpToDate, fetch
from .prepare import prepare
from .preprocess import preprocessed
from .readers import ReadError, read_data, spark_schema
from .stage import SliceRequest, stage

STOPPED = "stopped when asked to: the source has more, for the next run"
"""The note of a pull that a stop ended before its source was up to date."""


class IngestError(RuntimeError):
    """A pull that failed; the chain was left as it was before the pull."""


@dataclass(frozen=True)
class IngestContext:
    """What every pull of one run shares."""

    spark: Callable[[], SparkSession]
    """Starts (or returns) the process's SparkSession, only when data must be read."""
    base_dir: Path
    """Relative source paths (FilesGlob, file: URLs) are relative to this folder."""
    env: Mapping[str, str]
    """Where ``${{ env.NAME }}`` templates are resolved from."""
    system_time: Timestamp | None = None
    """A fixed system time for every block (``--system-time``), else the clock."""
    fetch_uncacheable: bool = False
    progress: Callable[[str], None] = lambda _: None
    """Hears each stage of the current pull as it begins (fetch, prepare, read, merge,
    commit; transform for a derivative), for a progress view."""
    source_roots: tuple[Path, ...] = ()
    """Folders outside ``base_dir`` that sources may read too (``source_roots``)."""
    reserved: tuple[tuple[Path, str], ...] = ()
    """The reconciler's own folders, which no source may read (``reserved_folders``)."""
    scratch: Path | None = None
    """Where each pull's working folder goes (``writer.scratch``); None, the system's
    temporary folder."""
    max_decompressed_size: int = 10 * 2**30
    """The most bytes a ``Decompress`` prepare step may write (``RepoConfig``)."""
    download_limits: DownloadLimits = field(default_factory=DownloadLimits)
    """The most bytes and seconds one download may take (``RepoConfig``)."""

    def now(self) -> Timestamp:
        return self.system_time or Timestamp.now()


@dataclass(frozen=True)
class PullResult:
    blocks: int = 0
    rows: int = 0
    note: str = ""
    size: int = 0
    """Bytes of the data files committed (Parquet slices; checkpoints not counted)."""
    failure: Exception | None = None
    """What ended the pull after the iterations counted here were committed; they stay."""

    @property
    def up_to_date(self) -> bool:
        return self.blocks == 0


def pull_polling(dataset: Dataset, context: IngestContext) -> PullResult:
    """Ingest from the dataset's polling source until the source has nothing new.

    Each iteration is committed whole or not at all. A failure in the first is raised,
    the chain as it was; a failure after some were committed ends the pull with those
    kept and the failure in ``PullResult.failure``, as a stop does (kamu commits each
    iteration too): completed work is not thrown away because a later file is bad, and
    the next run starts again from that file."""
    done = PullResult()
    while True:
        try:
            with all_or_nothing(dataset):
                step, more = _poll_once(dataset, context)
        except KeyboardInterrupt:
            # A second stop, or a download or container cut by the first: the iteration
            # at hand was taken back whole, and those before it are kept.
            if done.blocks and context.download_limits.stop():
                return replace(done, note=STOPPED)
            raise
        except Exception as error:
            if not done.blocks:
                raise
            return replace(done, failure=error)
        done = PullResult(
            done.blocks + step.blocks, done.rows + step.rows, step.note, done.size + step.size
        )
        if not more:
            return done
        if context.download_limits.stop():
            # Asked to stop (the first Ctrl-C or SIGTERM): each iteration is whole, so the
            # run keeps those done; a backlog longer than any run otherwise never landed,
            # every run redoing it and throwing it away.
            return replace(done, note=STOPPED)


def _poll_once(dataset: Dataset, context: IngestContext) -> tuple[PullResult, bool]:
    """One iteration: what it committed, and whether the source may have more."""
    state = dataset.state()
    source = state.polling_source
    if source is None:
        return PullResult(note="no polling source"), False
    if _uncacheable(state, source) and not context.fetch_uncacheable:
        return PullResult(note="source is uncacheable (it gave no ETag or date)"), False
    system_time = context.now()
    with scratch_dir(context.scratch, INGEST_PREFIX) as tmp:
        work = Path(tmp)
        context.progress("fetch")
        try:
            fetched = fetch(
                source.fetch,
                prev_state=state.last_source_state,
                system_time=system_time,
                workdir=work,
                base_dir=context.base_dir,
                env=context.env,
                source_roots=context.source_roots,
                reserved=context.reserved,
                limits=context.download_limits,
            )
        except SourceNotFoundError as e:
            if not _awaiting_first_file(state, source):
                raise
            return PullResult(note=str(e)), False
        if isinstance(fetched, UpToDate):
            return PullResult(), False
        blocks, rows, size = _ingest_file(
            dataset, state, context, source, fetched, system_time, work
        )
    return PullResult(blocks, rows, size=size), fetched.has_more


def _awaiting_first_file(state: ChainState, source: models.SetPollingSource) -> bool:
    """A FilesGlob that has never matched is waiting for its first file, not broken: kamu
    fails it, but in a repository a dataset is often declared before its data lands,
    and a scheduled run should not fail every hour until then."""
    return isinstance(source.fetch, models.FetchStepFilesGlob) and state.last_source_state is None


def _uncacheable(state: ChainState, source: models.SetPollingSource) -> bool:
    """kamu's rule: once a source has given data without a state to resume from, it
    cannot tell whether it changed, so it is not fetched again unless asked."""
    return (
        state.last_offset is not None
        and state.last_source_state is None
        and not isinstance(source.fetch, models.FetchStepFilesGlob)
    )


def _ingest_file(
    dataset: Dataset,
    state: ChainState,
    context: IngestContext,
    source: models.SetPollingSource | models.AddPushSource,
    fetched: Fetched,
    system_time: Timestamp,
    work: Path,
) -> tuple[int, int, int]:
    """Prepare, read, preprocess, merge and commit one fetched file; returns the blocks
    appended, and the rows and bytes of the data file written."""
    steps = source.prepare if isinstance(source, models.SetPollingSource) else None
    context.progress("prepare")
    path = prepare(steps, fetched.path, work, context.max_decompressed_size)
    context.progress("read")
    spark = context.spark()
    schema = source.read.schema_
    transform = source.preprocess
    # Without a preprocess query the slice write computes every row read, so the read
    # check can ride along in it (one pass over the file, no cache); a query might filter
    # or limit the rows and never meet a bad record, so its input is checked first.
    try:
        with (
            read_data(spark, source.read, path, work, deferred=transform is None) as read,
            preprocessed(spark, read, transform, state.vocabulary(), bool(schema)) as frame,
        ):
            request = SliceRequest(
                frame=frame,
                merge=source.merge,
                system_time=system_time,
                source_state=fetched.source_state,
                source_event_time=fetched.source_event_time,
                required=frozenset(f.name for f in spark_schema(schema or []) if not f.nullable),
                schema_may_grow=bool(schema),
                input_bytes=path.stat().st_size if path.exists() else 0,
            )
            context.progress("merge")
            try:
                staged = stage(spark, dataset, state, request, work)
            except IncompatibleSchemaError as e:
                raise IncompatibleSchemaError(f"{fetched.origin}: {e}") from None
    except ReadError:
        context.progress("read")  # a deferred check fails in the merge; it is a read failure
        raise
    size = staged.slice.size if staged.slice is not None else 0
    context.progress("commit")
    return commit(dataset, staged, system_time), staged.rows, size


def push_file(
    dataset: Dataset, context: IngestContext, path: Path, source_name: str | None
) -> PullResult:
    """Ingest one file through a push source (the only one, or the one named)."""
    state = dataset.state()
    sources = state.push_sources
    if not sources:
        raise IngestError(f"{dataset.root.name} has no push source")
    if source_name is None:
        if len(sources) > 1:
            raise IngestError(
                f"{dataset.root.name} has several push sources; name one with --source: "
                + ", ".join(sorted(sources))
            )
        source_name = next(iter(sources))
    source = sources.get(source_name)
    if source is None:
        raise IngestError(
            f"{dataset.root.name} has no push source {source_name!r}; it has: "
            + ", ".join(sorted(sources))
        )
    system_time = context.now()
    fetched = Fetched(path=path, source_state=None, source_event_time=None, origin=str(path))
    with all_or_nothing(dataset), scratch_dir(context.scratch, PUSH_PREFIX) as tmp:
        blocks, rows, size = _ingest_file(
            dataset, state, context, source, fetched, system_time, Path(tmp)
        )
    return PullResult(blocks, rows, size=size)
