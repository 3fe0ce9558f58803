"""The ``reconcile`` command line: it only assembles the app.

Each command's body is a thin module of ``reconciler.commands`` over the library,
imported when that command runs; the options are in ``commands.options``, the exit codes
and error handling in ``commands.common``, so that building the app (and answering
``--help``, ``--version`` or a usage error) loads no engine, model or pyarrow. A bare
``reconcile`` is ``reconcile apply`` and ``reconcile --plan`` is ``reconcile plan``,
with the same option names, so that existing scripts and workflows keep working.
"""

from __future__ import annotations

from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from .commands.common import (
    ReconcileGroup,
    Session,
    fail,
    is_repository,
    not_a_repository,
    parse_time,
    route_logging,
    usage_error,
)
from .commands.options import (
    DEFAULT_MIN_AGE,
    DEFAULT_PUSH_RETRIES,
    BaseOption,
    CommitOption,
    DetailedExitcodeOption,
    FetchUncacheableOption,
    FormatOption,
    LineageFormat,
    LockTimeoutOption,
    LogFormat,
    OutOption,
    OutputFormat,
    PlanFlag,
    PlanFormatOption,
    PruneOption,
    PushOption,
    PushRetriesOption,
    RunOptions,
    SavedPlanArgument,
    SavedPlanOption,
    SelectOption,
    ShowFormatOption,
    SqlFormat,
    SystemTimeOption,
    VerifyFormat,
    YesOption,
    check_combination,
    check_push,
)
from .config import ConfigError, RepoConfig

app = typer.Typer(
    cls=ReconcileGroup,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"reconcile {version('odf-reconciler')} (pyspark {version('pyspark')})")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def reconcile(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Option("-C", help="Run as if started in this directory (like git -C).")
    ] = Path("."),
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only errors and the final line.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Debug: tracebacks and the engine's own warnings."),
    ] = False,
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    plan: PlanFlag = False,
    output_format: FormatOption = OutputFormat.TEXT,
    out: OutOption = None,
    detailed_exitcode: DetailedExitcodeOption = False,
    base: BaseOption = None,
    prune: PruneOption = False,
    system_time: SystemTimeOption = None,
    fetch_uncacheable: FetchUncacheableOption = False,
    lock_timeout: LockTimeoutOption = None,
    select: SelectOption = None,
    yes: YesOption = False,
    commit: CommitOption = False,
    push: PushOption = False,
    push_retries: PushRetriesOption = DEFAULT_PUSH_RETRIES,
    saved_plan: SavedPlanOption = None,
) -> None:
    """Bring the chains under odf/ to the manifests under datasets/.

    Without a command, reconcile APPLIES: it is `reconcile apply`, and `reconcile --plan`
    is `reconcile plan`; the options below are theirs. Exit codes: 0 done, 1 failed,
    2 changes (plan --detailed-exitcode only), 64 usage error, 130 interrupted.
    """
    if quiet and verbose:
        raise usage_error("-q and -v cannot be used together")
    options = RunOptions(plan, output_format, out, detailed_exitcode, base, prune, select, yes)
    options = replace(options, commit=commit, push=push, push_retries=push_retries)
    options = replace(options, saved_plan=saved_plan)
    command = ctx.invoked_subcommand
    misplaced = options.given()
    if command is not None and misplaced:
        flag = misplaced[0]
        sub = ctx.command.get_command(ctx, command) if isinstance(ctx.command, TyperGroup) else None
        takes = sub is not None and any(flag in p.opts for p in sub.params)
        where = f"goes after the command: reconcile {command} {flag}"
        raise usage_error(f"{flag} {where if takes else f'is not an option of {command}'}")
    if command is not None:
        _parse_first(ctx, command)
    when = parse_time(system_time) if system_time else None
    try:
        config = RepoConfig.load(directory)
    except ConfigError as e:
        raise fail(f"error: {e}") from None
    ctx.obj = session = Session(
        config,
        system_time=when,
        fetch_uncacheable=fetch_uncacheable,
        quiet=quiet,
        verbose=verbose,
        directory=directory,
    )
    route_logging(verbose)
    session.override(None, False, lock_timeout)
    # init makes a repository; show renders a plan artifact a reviewer downloaded.
    if command not in ("init", "show") and not is_repository(config):
        raise not_a_repository(config)
    if command is None:
        _plan_or_apply(session, options)


def _parse_first(ctx: typer.Context, command: str) -> None:
    """Parse the command's own arguments now, before the repository is looked for, in a
    context of their own that is then dropped (click parses them again after this
    callback). A usage error is then the same everywhere, exit 64: outside a repository,
    ``reconcile plan --bogus`` said "not a reconciler repository", exit 1, and inside one
    "No such option", exit 64. A command's ``--help`` is answered here, anywhere."""
    group = ctx.command
    sub = group.get_command(ctx, command) if isinstance(group, TyperGroup) else None
    if sub is None:
        return
    args = list(ctx.meta.get("command_args", ())[1:])
    with sub.make_context(command, args, parent=ctx):
        pass


def _plan_or_apply(session: Session, options: RunOptions) -> None:
    """Each command's body is imported when it runs, not with the app: a plan never
    loads the apply's engine, and ``--help`` loads neither."""
    check_combination(options)
    options = replace(
        options, out=session.out(options.out), saved_plan=session.at(options.saved_plan)
    )
    if options.plan_only:
        from .commands import plan as plan_command

        plan_command.run(session, options)
    else:
        from .commands import apply as apply_command

        apply_command.run(session, options)


@app.command()
def plan(
    ctx: typer.Context,
    output_format: PlanFormatOption = OutputFormat.TEXT,
    out: OutOption = None,
    detailed_exitcode: DetailedExitcodeOption = False,
    base: BaseOption = None,
    prune: PruneOption = False,
    select: SelectOption = None,
) -> None:
    """Show what apply would change; write nothing (the same as reconcile --plan)."""
    options = RunOptions(True, output_format, out, detailed_exitcode, base, prune, select)
    _plan_or_apply(ctx.obj, options)


@app.command()
def apply(
    ctx: typer.Context,
    saved_plan: SavedPlanArgument = None,
    plan: PlanFlag = False,
    output_format: FormatOption = OutputFormat.TEXT,
    out: OutOption = None,
    detailed_exitcode: DetailedExitcodeOption = False,
    base: BaseOption = None,
    prune: PruneOption = False,
    system_time: SystemTimeOption = None,
    fetch_uncacheable: FetchUncacheableOption = False,
    lock_timeout: LockTimeoutOption = None,
    select: SelectOption = None,
    yes: YesOption = False,
    commit: CommitOption = False,
    push: PushOption = False,
    push_retries: PushRetriesOption = DEFAULT_PUSH_RETRIES,
) -> None:
    """Plan, then append the metadata and pull every dataset in dependency order (the
    same as a bare reconcile). On a terminal, a change to metadata is confirmed first.
    Given a saved PLAN, apply exactly that plan, or refuse it if anything moved."""
    session: Session = ctx.obj
    session.override(system_time, fetch_uncacheable, lock_timeout)
    options = RunOptions(plan, output_format, out, detailed_exitcode, base, prune, select, yes)
    options = replace(options, commit=commit, push=push, push_retries=push_retries)
    options = replace(options, saved_plan=saved_plan)
    _plan_or_apply(session, options)


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
    select: SelectOption = None,
    output_format: Annotated[
        VerifyFormat,
        typer.Option("--format", help="text or json (reconciler/schemas/run-result.json)."),
    ] = VerifyFormat.TEXT,
    base: Annotated[
        str | None,
        typer.Option(
            "--base", help="With --integrity: check only what changed since this git ref."
        ),
    ] = None,
    no_download: Annotated[
        bool,
        typer.Option(
            "--no-download",
            help="With --integrity: a data store outside git is checked by its listing"
            " (each object there, with its size) instead of downloading every object.",
        ),
    ] = False,
) -> None:
    """Check every chain rule, block hash and file, and replay every transform from the
    chain alone, comparing what it gives with what the chain records."""
    from .commands import verify as verify_command

    verify_command.run(ctx.obj, names, select, integrity, output_format, base, no_download)


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
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            "-s",
            metavar="SELECTOR",
            help="Register only these datasets as views (NAME, NAME+, +NAME).",
        ),
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
    from .commands import sql as sql_command

    sql_command.run(ctx.obj, query, output_format, ctx.obj.out(out), limit, select)


@app.command()
def log(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Dataset name (its folder in the ODF repository).")],
    output_format: Annotated[
        LogFormat, typer.Option("--format", "--output", "-o", help="text, yaml or json.")
    ] = LogFormat.TEXT,
    limit: Annotated[int | None, typer.Option(min=1, help="Show at most this many blocks.")] = None,
) -> None:
    """Show a dataset's metadata chain, newest block first."""
    from .commands import log as log_command

    log_command.run(ctx.obj, name, output_format, limit)


@app.command()
def push(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    file: Annotated[str, typer.Argument(help="File to ingest, or - for standard input.")],
    source: Annotated[
        str | None, typer.Option("--source", help="Push source name, if there are several.")
    ] = None,
    lock_timeout: LockTimeoutOption = None,
    commit: CommitOption = False,
    push: PushOption = False,
    push_retries: PushRetriesOption = DEFAULT_PUSH_RETRIES,
) -> None:
    """Ingest a file through one of a root dataset's push sources (AddPushSource).
    With --commit and --push, commit and push it as the scheduled apply does."""
    from .commands import push as push_command

    check_push(commit, push)
    session: Session = ctx.obj
    session.override(None, False, lock_timeout)
    path = file if file == "-" else str(session.at(Path(file)))
    push_command.run(session, name, path, source, commit, push, push_retries)


@app.command()
def gc(
    ctx: typer.Context,
    delete: Annotated[
        bool, typer.Option("--delete", help="Delete them (without it, gc only lists them).")
    ] = False,
    min_age: Annotated[
        str,
        typer.Option(
            "--min-age",
            metavar="AGE",
            help="Keep unnamed objects written less than AGE ago (7d, 12h, 30m, 0): a run "
            "of another clone stores its files before it pushes the blocks naming them.",
        ),
    ] = DEFAULT_MIN_AGE,
    all_commits: Annotated[
        bool,
        typer.Option(
            "--all-commits",
            help="Also keep what any commit of any ref names (so a revert of a deletion "
            "finds its data); by default only the refs' tips and the working tree protect.",
        ),
    ] = False,
    no_fetch: Annotated[
        bool,
        typer.Option(
            "--no-fetch",
            help="Judge by the refs this clone has, without fetching every remote first.",
        ),
    ] = False,
    allow_short_min_age: Annotated[
        bool,
        typer.Option(
            "--allow-short-min-age",
            help="Let --delete run with a --min-age under a day (only where no run of "
            "another clone can be storing files).",
        ),
    ] = False,
    lock_timeout: LockTimeoutOption = None,
) -> None:
    """Delete the objects of a data store outside git that no chain names any more."""
    from .commands import gc as gc_command

    session: Session = ctx.obj
    session.override(None, False, lock_timeout)
    gc_command.run(session, delete, min_age, all_commits, no_fetch, allow_short_min_age)


@app.command()
def show(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A plan written by plan --format json --out.")],
    output_format: ShowFormatOption = OutputFormat.TEXT,
    out: OutOption = None,
) -> None:
    """Render a saved JSON plan again, as text, Markdown or JSON (like terraform show)."""
    from .commands import show as show_command

    session: Session = ctx.obj
    show_command.run(session.at(file), output_format, session.out(out))


@app.command()
def lineage(
    ctx: typer.Context,
    output_format: Annotated[
        LineageFormat, typer.Option("--format", help="text (a tree), mermaid or dot.")
    ] = LineageFormat.TEXT,
) -> None:
    """Show which datasets each dataset reads, from the manifests and the chains."""
    from .commands import lineage as lineage_command

    lineage_command.run(ctx.obj, output_format)


@app.command()
def init(
    ctx: typer.Context,
    directory: Annotated[
        Path | None, typer.Argument(help="Where to create it (default: the current directory).")
    ] = None,
) -> None:
    """Make a reconciler repository, new or of an existing one: pyproject.toml, datasets/,
    policies/, workflows; a .gitignore or pyproject.toml there is added to, never replaced."""
    from .commands import init as init_command

    session: Session = ctx.obj
    init_command.run(session.config.root / directory if directory else session.config.root)


def main() -> None:
    app(prog_name="reconcile")
