"""The command line's options and choices, shared by the commands that take them.

Kept apart from the commands' bodies, with no import beyond typer and ``common``'s
usage error, so that the command line can be assembled, and ``--help``, ``--version``
and a usage error answered, without loading the engine, the protocol models or pyarrow:
each command's body is imported only when that command runs (``cli``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from .common import usage_error


class OutputFormat(enum.StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


PlanFlag = Annotated[
    bool, typer.Option("--plan", help="Only show what would change; write nothing (= plan).")
]
FormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="text; markdown (a pull-request comment, plans only); json (the plan, or "
        "after an apply its result: reconciler/schemas/run-result.json).",
    ),
]
PlanFormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="text; markdown (a pull-request comment); json (reconciler/schemas/plan.json,"
        " which apply and show take back).",
    ),
]
ShowFormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="text; markdown (a pull-request comment); json (the plan again, as plan"
        " --format json writes it).",
    ),
]
OutOption = Annotated[Path | None, typer.Option("--out", help="Write the plan to this file.")]
DetailedExitcodeOption = Annotated[
    bool,
    typer.Option(
        "--detailed-exitcode",
        help="With a plan: exit 0 when nothing changes, 2 on changes, 1 on errors.",
    ),
]
BaseOption = Annotated[
    str | None,
    typer.Option("--base", help="Git ref to compare manifests with (the PR's base)."),
]
PruneOption = Annotated[
    bool, typer.Option("--prune", help="Plan deletion of chains with no manifest.")
]
SystemTimeOption = Annotated[
    str | None, typer.Option("--system-time", help="RFC 3339 system time for blocks written.")
]
FetchUncacheableOption = Annotated[
    bool,
    typer.Option(
        "--fetch-uncacheable", help="Fetch sources that give no ETag or Last-Modified again."
    ),
]
LockTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--lock-timeout",
        help="Seconds to wait for another run's lock on odf/ (default 0: refuse at once).",
    ),
]
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes", "-y", help="Apply without asking (it asks only when stdin is a terminal)."
    ),
]
SelectOption = Annotated[
    list[str] | None,
    typer.Option(
        "--select",
        "-s",
        metavar="SELECTOR",
        help="Only these datasets: NAME, NAME+ (and downstream), +NAME (and upstream), "
        "+NAME+; several (space- or comma-separated, or repeated) select their union.",
    ),
]


class VerifyFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


class LogFormat(enum.StrEnum):
    TEXT = "text"
    YAML = "yaml"
    JSON = "json"


class SqlFormat(enum.StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


class LineageFormat(enum.StrEnum):
    TEXT = "text"
    MERMAID = "mermaid"
    DOT = "dot"


DEFAULT_PUSH_RETRIES = 3
DEFAULT_MIN_AGE = "7d"  # gc's

CommitOption = Annotated[
    bool,
    typer.Option(
        "--commit",
        help="Commit the ODF folder after the run (the datasets that succeeded, even when "
        "others failed), with a message saying what moved; refused on a dirty odf/.",
    ),
]
PushOption = Annotated[
    bool,
    typer.Option(
        "--push",
        help="Push the commit to the branch's upstream (else origin); when the remote "
        "moved, reconcile again from its tip.",
    ),
]
PushRetriesOption = Annotated[
    int,
    typer.Option(
        "--push-retries",
        min=0,
        help="How many times to reconcile again after a rejected push (default 3).",
    ),
]


@dataclass(frozen=True)
class RunOptions:
    """The options ``reconcile``, ``reconcile apply`` and ``reconcile plan`` share."""

    plan_only: bool = False
    output_format: OutputFormat = OutputFormat.TEXT
    out: Path | None = None
    detailed_exitcode: bool = False
    base: str | None = None
    prune: bool = False
    select: list[str] | None = None
    yes: bool = False
    commit: bool = False
    push: bool = False
    push_retries: int = DEFAULT_PUSH_RETRIES
    saved_plan: Path | None = None

    def given(self) -> list[str]:
        """The options set to other than their defaults, as spelt on the command line."""
        default = RunOptions()
        return [
            flag for name, flag in _FLAGS.items() if getattr(self, name) != getattr(default, name)
        ]


_FLAGS = {
    "plan_only": "--plan",
    "output_format": "--format",
    "out": "--out",
    "detailed_exitcode": "--detailed-exitcode",
    "base": "--base",
    "prune": "--prune",
    "select": "--select",
    "yes": "--yes",
    "commit": "--commit",
    "push": "--push",
    "push_retries": "--push-retries",
    "saved_plan": "--apply",
}


SavedPlanArgument = Annotated[
    Path | None,
    typer.Argument(
        metavar="PLAN",
        help="A saved plan (plan --format json --out FILE) to apply exactly; refused, "
        "naming every difference, when anything it was made from moved.",
    ),
]
SavedPlanOption = Annotated[
    Path | None,
    typer.Option("--apply", metavar="PLAN", help="Apply this saved plan exactly (= apply PLAN)."),
]


def check_push(commit: bool, push: bool) -> None:
    """``--push`` (apply's and push's) pushes what ``--commit`` committed."""
    if push and not commit:
        raise usage_error("--push pushes the commit of --commit: add --commit")


def check_combination(options: RunOptions) -> None:
    """The git loop's options and a saved plan make sense only in an apply, as given."""
    loop = [flag for flag in ("--commit", "--push", "--apply") if flag in options.given()]
    if options.plan_only and loop:
        raise usage_error(f"{loop[0]} applies: it cannot go with --plan")
    check_push(options.commit, options.push)
    if options.detailed_exitcode and not options.plan_only:
        raise usage_error("--detailed-exitcode is a plan's: use it with reconcile plan")
    if options.saved_plan is not None and (options.base or options.prune or options.select):
        raise usage_error(
            "a saved plan keeps the --base, --prune and --select it was made with: "
            "plan again to change them"
        )
