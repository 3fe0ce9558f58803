"""``reconcile verify``: check every chain, file and hash, and replay every transform;
with ``--base REF``, only what changed since REF; ``--no-download`` lists a data store
outside git instead of downloading it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..config import ConfigError, shown_path
from ..gitloop.gitops import GitError, config_at
from ..inspection.verify import Verdict, changes_since, verify_change, verify_dataset
from ..odf.integrity import IntegrityProblem
from ..wording import count, printable
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    JavaNotFound,
    Session,
    duration,
    existing,
    fail,
    selection,
    usage_error,
)
from .options import VerifyFormat
from .results import RunResult, verified

if TYPE_CHECKING:
    from ..odf.repository import OdfRepository


def run(
    session: Session,
    names: list[str] | None,
    select: list[str] | None,
    integrity: bool,
    output_format: VerifyFormat,
    base: str | None = None,
    no_download: bool = False,
) -> None:
    """One line per dataset (``-q``: only invalid ones), then the summary line."""
    if base is not None and not integrity:
        raise usage_error("--base checks what changed since a ref: it needs --integrity")
    if no_download and not integrity:
        raise usage_error("--no-download lightens the --integrity check; a replay reads the data")
    if no_download and base is not None:
        raise usage_error("--no-download lightens the full check; --base reads only changes")
    as_json = output_format is VerifyFormat.JSON
    session.check_cache()
    repo = session.odf
    chosen = names or repo.names()
    for name in chosen:
        existing(session, name)
    if select:  # the lineage graph costs a read of every manifest: only when asked
        from ..lineage.graph import lineage_graph  # and its modules a quarter of a second

        graph = {n: node.inputs for n, node in lineage_graph(session.config).nodes.items()}
        picked = selection(graph, select) or frozenset()
        if names and not picked.intersection(names):
            raise usage_error("the names given and --select have no dataset in common")
        chosen = [n for n in chosen if n in picked]
    check: Callable[[str], Verdict]
    if base is not None:
        from ..planning.linked_paths import chain_link_problems

        try:
            linked = chain_link_problems(session.config, base)
            changes = changes_since(repo, session.config.root, base)
        except GitError as e:
            raise fail(f"error: {e}") from None
        if linked:  # nothing is read through the link: what it leads to is not the chains
            raise fail("\n".join(f"error: {problem.message}" for problem in linked))
        _refuse_linked_chains(session)  # a link the base has already
        repo = _store_of_base(session, base)
        checked = [n for n in chosen if n in changes]  # the others are not read at all
        check = lambda name: verify_change(repo, name, changes[name])  # noqa: E731
    else:
        _refuse_linked_chains(session)
        spark = None if integrity else session.spark
        ids = {} if integrity else repo.names_by_id()  # only a replay resolves inputs
        checked = chosen
        work = session.config.work_dir
        check = lambda name: verify_dataset(repo, name, ids, spark, work, no_download)  # noqa: E731
    result = RunResult("verify")
    # A folder that holds a chain, or is a link, but is no dataset's (``strays``: a link
    # a pull request merged past its failed plan) is invalid: the scheduled run verifies
    # before it extends anything, and this check passed over it in silence.
    verdicts = [] if names or select or base is not None else _strays(repo)
    for verdict in verdicts:
        result.datasets.append(verified(verdict, 0.0))
        if not as_json:
            typer.echo(_describe(verdict))
    code = EXIT_OK
    try:
        for name in checked:
            began = time.monotonic()
            verdict = check(name)
            verdicts.append(verdict)
            result.datasets.append(verified(verdict, time.monotonic() - began))
            if not as_json and not (session.quiet and verdict.valid):
                typer.echo(_describe(verdict))
    except JavaNotFound as e:
        result.error, code = str(e), EXIT_FAILED
    except KeyboardInterrupt:
        result.interrupted, code = True, EXIT_INTERRUPTED
        result.error = "interrupted: verify writes nothing"
    everything = base is None and set(checked) == set(repo.names())
    if everything and code == EXIT_OK and all(v.valid for v in verdicts):
        _report_unnamed(session, repo, verdicts, as_json)
    _hint_rewritten(session, verdicts, as_json)
    summary = None
    if base is None and not verdicts and not names and not select:
        # the first scheduled run of a new repository said "0 datasets: 0 valid"
        chains = shown_path(session.config.odf_dir, session.config.root)
        summary = f"no chain in {chains}/ yet: nothing to verify"
    elif base is not None and not checked:
        summary = _unchanged(base, bool(changes), bool(names or select))
    elif base is not None:
        blocks, files = sum(v.blocks for v in verdicts), sum(v.files for v in verdicts)
        session.say(
            f"checked since {base}: {count(blocks, 'block')} and {count(files, 'file')} in "
            f"{count(len(verdicts), 'dataset')}; "
            f"{count(len(chosen) - len(checked), 'dataset')} unchanged, not read",
            err=as_json,
        )
    _finish(session, result, verdicts, code, as_json, summary)


def _refuse_linked_chains(session: Session) -> None:
    """Stop when the chains' folder is, or lies under, a link: what it leads to is not
    the repository's chains. The plan reads none of them, while this check found the
    copy valid, and the scheduled job went on to its apply."""
    from ..planning.linked_paths import chains_link_problem

    if (linked := chains_link_problem(session.config)) is not None:
        raise fail(f"error: {linked.message}")


def _unchanged(base: str, changes: bool, chosen: bool) -> str:
    """The summary of a ``--base`` check with nothing to read, which said ``0 datasets:
    0 valid`` as if datasets had been checked. ``changes``: some folder of the chains
    changed all the same (a deleted dataset's, a folder that is no dataset's, or, with
    ``chosen``, a dataset not chosen)."""
    if not changes:
        return f"no chain changed since {base}: no dataset to check"
    if chosen:
        return f"no chosen dataset's chain changed since {base}: no dataset to check"
    return f"no dataset's chain changed since {base}: no dataset to check"


def _strays(repo: OdfRepository) -> list[Verdict]:
    """An invalid verdict for each folder of the chains' folder that is not read."""
    return [
        Verdict(
            printable(stray.name, one_line=True),
            [IntegrityProblem(f"chain folder not read: {stray.reason}")],
        )
        for stray in repo.strays()
    ]


def _store_of_base(session: Session, base: str) -> OdfRepository:
    """The chains with the data store ``base``'s settings name: the check of a pull
    request must not reach a store (an endpoint) the pull request names, and the objects
    its chains may name are those in the base's store."""
    try:
        settings = config_at(session.config, base)
    except (GitError, ConfigError) as e:
        raise fail(f"error: {e}") from None
    return replace(session.config, data_store=settings.data_store, s3=settings.s3).repository()


def _hint_rewritten(session: Session, verdicts: list[Verdict], as_json: bool) -> None:
    """When files' bytes no longer match their hashes and git's attributes rewrite chain
    files, say so: such a checkout reads as tampered with, though git still holds the
    right bytes (a rule like ``odf/** text eol=crlf`` converted them on checkout)."""
    if not any(problem.changed for verdict in verdicts for problem in verdict.problems):
        return
    from ..planning.ignore_rules import rewritten_chain_problems

    try:
        found = rewritten_chain_problems(session.config, pull_request=False)
    except GitError:
        return
    for problem in found:
        where = ""
        if problem.location is not None:
            at = problem.location
            shown = shown_path(Path(at.file), session.config.root)
            where = f"{shown}:{at.line}: " if at.line else f"{shown}: "
        session.say(f"hint: {where}{problem.message}", err=as_json)


def _report_unnamed(
    session: Session, repo: OdfRepository, verdicts: list[Verdict], as_json: bool
) -> None:
    """After every chain checked and valid: the objects of a data store outside git that
    no chain names, from the listing the check made (no request more). Told, never
    removed: another clone's run may have stored one for a block not pushed yet."""
    if repo.store is None:  # the dataset folders: a run removes what no block names
        return
    from ..odf.store import StoreError
    from ..odf.store_verify import unnamed_objects

    try:
        unnamed = unnamed_objects(repo.store, (v.named for v in verdicts))
    except StoreError:  # the check itself reported what it could not reach
        return
    if unnamed:
        session.say(
            f"data store {repo.store.shown}: {count(len(unnamed), 'object')} "
            f"({sum(unnamed.values()):,} bytes) that no chain names, never read: left by a "
            "run killed after storing them, a run whose push lost a race to another's, or "
            "a deleted or recreated dataset (`reconcile gc` lists those no ref of the"
            " repository names either, and says which only a ref keeps)",
            err=as_json,
        )


def _finish(
    session: Session,
    result: RunResult,
    verdicts: list[Verdict],
    code: int,
    as_json: bool,
    summary: str | None = None,
) -> None:
    """The summary line (and the JSON document), then exit: 1 if any dataset is invalid.
    ``summary`` stands for the line when there was nothing to check, nor time to tell."""
    invalid = sum(not v.valid for v in verdicts)
    if code == EXIT_OK and invalid:
        code = EXIT_FAILED
    seconds = session.elapsed()
    line = f"{count(len(verdicts), 'dataset')}: {len(verdicts) - invalid} valid"
    line += f", {invalid} invalid" if invalid else ""
    line = summary or f"{line} in {duration(seconds)}"
    if result.error is not None:
        typer.echo(("" if result.interrupted else "error: ") + result.error, err=True)
    typer.echo(line, err=as_json)
    if as_json:
        sys.stdout.write(result.render(code, line, seconds))
    raise typer.Exit(code)


def _describe(verdict: Verdict) -> str:
    """``name: valid (9 blocks, 1 transform replayed)`` and the problems below it."""
    if verdict.valid:
        replayed = f", {count(verdict.replayed, 'transform')} replayed" if verdict.replayed else ""
        head = f"{verdict.dataset}: valid ({count(verdict.blocks, 'block')}{replayed})"
    else:
        head = f"{verdict.dataset}: invalid"
    problems = [f"  {'' if p.fatal else 'warning: '}{p}" for p in verdict.problems]
    return "\n".join([head, *problems])
