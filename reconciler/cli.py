"""The ``reconcile`` command line: people read text, machines read JSON, exit codes tell CI.

The CLI only parses options, calls the library and renders results or errors; no
library module prints.
"""

from __future__ import annotations

import enum
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import log_view
from .apply import Outcome, Status, apply_plan
from .config import ConfigError, RepoConfig
from .engine.errors import describe
from .gitops import GitError
from .ingest.pull import IngestContext, push_file
from .odf import Timestamp
from .odf.repository import OdfRepository, RepositoryError
from .openlineage_events import Lineage
from .plan.model import Plan
from .plan.policies import PolicyError
from .plan.render_json import render_json
from .plan.render_markdown import render_markdown
from .plan.render_text import render_text
from .planning import PlanRequest, make_plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

app = typer.Typer(
    add_completion=False,
    help="GitOps reconciler for Open Data Fabric datasets: plan, apply and verify chains.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


class LogFormat(enum.StrEnum):
    TEXT = "text"
    YAML = "yaml"
    JSON = "json"


@dataclass
class Session:
    """What every command needs: the repository's configuration and run options."""

    config: RepoConfig
    system_time: Timestamp | None = None
    fetch_uncacheable: bool = False

    @property
    def odf(self) -> OdfRepository:
        return OdfRepository(self.config.odf_dir)

    def ingest_context(self) -> IngestContext:
        root = self.config.root

        def spark() -> SparkSession:
            from .engine.session import SparkSettings, get_spark

            return get_spark(SparkSettings.load(root))

        return IngestContext(
            spark=spark,
            base_dir=root,
            env=dict(os.environ),
            system_time=self.system_time,
            fetch_uncacheable=self.fetch_uncacheable,
        )


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


class PlanFormat(enum.StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


@app.callback(invoke_without_command=True)
def reconcile(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Option("-C", help="Run as if started in this directory (like git -C).")
    ] = Path("."),
    plan: Annotated[
        bool, typer.Option("--plan", help="Show what would change; write nothing.")
    ] = False,
    output_format: Annotated[
        PlanFormat,
        typer.Option("--format", help="Plan output: text, markdown (PR comment) or json."),
    ] = PlanFormat.TEXT,
    out: Annotated[Path | None, typer.Option("--out", help="Write the plan to this file.")] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 when nothing changes, 2 on changes, 1 on errors."
        ),
    ] = False,
    base: Annotated[
        str | None,
        typer.Option("--base", help="Git ref to compare manifests with (the PR's base)."),
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Plan deletion of chains with no manifest.")
    ] = False,
    system_time: Annotated[
        str | None, typer.Option("--system-time", help="RFC 3339 system time for blocks written.")
    ] = None,
    fetch_uncacheable: Annotated[
        bool,
        typer.Option(
            "--fetch-uncacheable",
            help="Fetch sources that give no ETag or Last-Modified again.",
        ),
    ] = False,
) -> None:
    """Plan (--plan) or apply: bring the chains under odf/ to the manifests under datasets/."""
    try:
        when = Timestamp.parse(system_time) if system_time else None
        ctx.obj = Session(RepoConfig.load(directory), when, fetch_uncacheable)
    except (ConfigError, ValueError) as e:
        raise _fail(f"error: {e}") from None
    if ctx.invoked_subcommand is not None:
        return
    request = PlanRequest(base_ref=base, prune=prune)
    try:
        result = make_plan(ctx.obj.config, request)
    except (GitError, PolicyError, ConfigError) as e:
        raise _fail(f"error: {e}") from None
    _emit(_render(result, output_format, out is None), out)
    if plan or result.has_errors:
        raise typer.Exit(result.exit_code(detailed_exitcode))
    _apply(ctx.obj, result, when or Timestamp.now())


def _render(result: Plan, output_format: PlanFormat, to_terminal: bool) -> str:
    if output_format is PlanFormat.JSON:
        return render_json(result) + "\n"
    if output_format is PlanFormat.MARKDOWN:
        return render_markdown(result)
    color = to_terminal and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    return render_text(result, color=color)


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


def _apply(session: Session, result: Plan, when: Timestamp) -> None:
    """Append the planned metadata, then pull the datasets; one line per dataset."""
    # OpenLineage runs for this apply: configured the standard way, else none and no cost.
    lineage = Lineage.from_environment(session.config.root, os.environ)
    context = session.ingest_context()
    outcomes = apply_plan(session.odf, result, when, context, _report, lineage)
    counts = {status: sum(o.status is status for o in outcomes) for status in Status}
    summary = [f"{counts[s]} {s.value}" for s in Status if counts[s]]
    typer.echo(f"{len(outcomes)} dataset(s): " + (", ".join(summary) or "nothing to do"))
    if counts[Status.FAILED] or counts[Status.SKIPPED]:
        raise typer.Exit(1)


def _report(outcome: Outcome) -> None:
    parts = []
    if outcome.metadata_blocks:
        parts.append(f"{outcome.metadata_blocks} metadata block(s)")
    if outcome.data_blocks:
        parts.append(f"{outcome.data_blocks} data block(s) with {outcome.rows} row(s)")
    if outcome.message:
        parts.append(outcome.message)
    detail = ": " + "; ".join(parts) if parts else ""
    typer.echo(f"{outcome.dataset}: {outcome.status.value}{detail}")


@app.command()
def push(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    file: Annotated[str, typer.Argument(help="File to ingest, or - for standard input.")],
    source: Annotated[
        str | None, typer.Option("--source", help="Push source name, if there are several.")
    ] = None,
) -> None:
    """Ingest a file through one of a root dataset's push sources (AddPushSource)."""
    session: Session = ctx.obj
    dataset = session.odf.dataset(name)
    if not dataset.exists():
        raise _fail(f"error: dataset {name!r} not found in {session.config.odf_dir}")
    with tempfile.TemporaryDirectory(prefix="odf-stdin-") as tmp:
        path = Path(file)
        if file == "-":
            path = Path(tmp) / "stdin"
            path.write_bytes(sys.stdin.buffer.read())
        elif not path.is_file():
            raise _fail(f"error: {file}: no such file")
        try:
            result = push_file(dataset, session.ingest_context(), path, source)
        except Exception as e:  # reported, never a traceback: the chain is unchanged
            raise _fail(f"error: {name}: {describe(e)}") from None
    if result.blocks:
        typer.echo(f"{name}: {result.blocks} block(s) with {result.rows} row(s)")
    else:
        typer.echo(f"{name}: up-to-date (nothing new in {file})")


@app.command()
def log(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Dataset name (its folder in the ODF repository).")],
    output: Annotated[LogFormat, typer.Option("--output", "-o")] = LogFormat.TEXT,
    limit: Annotated[int | None, typer.Option(help="Show at most this many blocks.")] = None,
) -> None:
    """Show a dataset's metadata chain, newest block first."""
    session: Session = ctx.obj
    dataset = session.odf.dataset(name)
    if not dataset.exists():
        raise _fail(f"error: dataset {name!r} not found in {session.config.odf_dir}")
    try:
        entries: list[log_view.Entry] = []
        for entry in dataset.iter_blocks():
            if limit is not None and len(entries) >= limit:
                break
            entries.append(entry)
    except (RepositoryError, ValueError) as e:
        raise _fail(f"error: {name}: {e}") from None
    renderers = {
        LogFormat.TEXT: log_view.render_text,
        LogFormat.YAML: log_view.render_yaml,
        LogFormat.JSON: log_view.render_json,
    }
    sys.stdout.write(renderers[output](entries))
    if output is LogFormat.JSON:
        sys.stdout.write("\n")


@app.command()
def verify(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None, typer.Argument(help="Datasets to check (default: all of them).")
    ] = None,
    integrity: Annotated[
        bool,
        typer.Option("--integrity", help="Only check hashes and files; do not replay transforms."),
    ] = False,
) -> None:
    """Check every chain rule, block hash and file, and replay every transform (§3)."""
    from .verify import dataset_names, verify_dataset

    session: Session = ctx.obj
    repo = session.odf
    chosen = names or repo.names()
    missing = [n for n in chosen if not repo.dataset(n).exists()]
    if missing:
        raise _fail(f"error: dataset {missing[0]!r} not found in {session.config.odf_dir}")
    spark = None if integrity else session.ingest_context().spark
    ids = {} if integrity else dataset_names(repo)  # only a replay resolves inputs
    invalid = 0
    for name in chosen:
        verdict = verify_dataset(repo, name, ids, spark)
        if verdict.valid:
            replayed = f", {verdict.replayed} transform(s) replayed" if verdict.replayed else ""
            typer.echo(f"{name}: valid ({verdict.blocks} block(s){replayed})")
        else:
            invalid += 1
            typer.echo(f"{name}: invalid")
        for problem in verdict.problems:
            typer.echo(f"  {'' if problem.fatal else 'warning: '}{problem}")
    typer.echo(f"{len(chosen)} dataset(s): {len(chosen) - invalid} valid, {invalid} invalid")
    if invalid:
        raise typer.Exit(1)


class LineageOutput(enum.StrEnum):
    TEXT = "text"
    MERMAID = "mermaid"
    DOT = "dot"


@app.command()
def lineage(
    ctx: typer.Context,
    output_format: Annotated[
        LineageOutput, typer.Option("--format", help="text (a tree), mermaid or dot.")
    ] = LineageOutput.TEXT,
) -> None:
    """Show which datasets each dataset reads, from the manifests and the chains."""
    from .lineage import lineage_graph, render_lineage

    session: Session = ctx.obj
    graph = lineage_graph(session.config)
    for problem in graph.problems:
        typer.echo(f"warning: {problem.message}", err=True)
    sys.stdout.write(render_lineage(graph, output_format.value))


class SqlFormat(enum.StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


@app.command()
def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="One query (SELECT, WITH, VALUES or TABLE).")],
    output_format: Annotated[
        SqlFormat,
        typer.Option(
            "--format", help="table, csv, json (one object per line) or parquet (needs --out)."
        ),
    ] = SqlFormat.TABLE,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the result to this file.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=0, help="At most this many rows; the table shows 100 unless told."),
    ] = None,
) -> None:
    """Run one read-only SQL query over the ODF repository's datasets, on Spark.

    Every dataset with data is a view named by its dataset name, holding all its rows as
    stored: offset, op (retractions and corrections included), system_time, event_time
    and its own columns. Quote names with dots in backticks:
    SELECT * FROM `org.example.weather`. The query may read those views and nothing
    else. Timestamps print as RFC 3339 in UTC; NULL is null in the table, an empty field
    in csv (an empty string is "") and null in json.
    """
    from .engine.session import EngineUnavailableError, SparkSettings, get_spark
    from .sql_query import TABLE_LIMIT, SqlError, render, run_sql, save

    session: Session = ctx.obj
    if output_format is SqlFormat.PARQUET and out is None:
        raise _fail("error: --format parquet needs --out FILE")
    if out is not None and out.resolve().is_relative_to(session.config.odf_dir.resolve()):
        raise _fail(f"error: {out}: will not write into the ODF repository")
    is_table = output_format is SqlFormat.TABLE
    try:
        spark = get_spark(SparkSettings.load(session.config.root))
        rows = TABLE_LIMIT if limit is None and is_table else limit
        result = run_sql(spark, session.odf, query, rows, count_total=is_table)
        if out is None:
            sys.stdout.write(render(result, output_format.value))
        else:
            save(result, output_format.value, out)
    except (SqlError, ConfigError, EngineUnavailableError) as e:
        raise _fail(f"error: {e}") from None
    except Exception as e:  # reported, never a traceback; nothing was written
        raise _fail(f"error: {describe(e)}") from None


def main() -> None:
    app()
