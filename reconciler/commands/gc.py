"""``reconcile gc``: delete the objects of a data store outside git that no chain names.

Like ``dvc gc`` and Delta's ``VACUUM``, it decides by what it protects, and says so:
the chains in the working tree and at the tip of every ref (branches, the remotes'
branches after a fetch, tags, the stash), or with ``--all-commits`` in every commit
those reach, which a ``git revert`` of a deletion needs. Objects written less than
``--min-age`` ago stay whatever names them (another clone's run stores its files
before it pushes the blocks naming them). Without ``--delete`` it only lists.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import typer

from ..config import shown_path
from ..gitloop.gitops import GitError, blob_id, block_files, fetch_remotes
from ..odf.lock import RepositoryLockedError
from ..odf.store import StoreError
from ..odf.store_fs import FileSystemStore, StoredObject
from ..odf.store_gc import (
    Judgement,
    UnreadableBlockError,
    judge,
    names_in_blocks,
    working_tree_blocks,
)
from ..wording import count
from .common import Session, fail, usage_error
from .options import DEFAULT_MIN_AGE

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s`` or ``0`` as seconds."""
    found = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if found is None or (found[2] == "" and found[1] != "0"):
        raise usage_error(f"--min-age: {text!r} is not an age like 7d, 12h, 30m or 0")
    return int(found[1]) * _UNITS.get(found[2], 1)


SHORT_AGE = _UNITS["d"]
"""Below it, ``--delete`` needs ``--allow-short-min-age``: a run of another clone may
have stored its files and not pushed the blocks naming them yet (Delta's ``VACUUM``
refuses a retention under the table's likewise, unless its check is turned off)."""


def run(
    session: Session,
    delete: bool,
    min_age: str,
    all_commits: bool,
    no_fetch: bool,
    allow_short: bool = False,
) -> None:
    age = parse_age(min_age)
    if delete and age < SHORT_AGE and not allow_short:
        raise usage_error(
            f"--min-age {min_age} is under a day: --delete would also delete what a run of"
            " another clone stored and has not pushed the blocks of yet; add"
            " --allow-short-min-age where no other clone runs (nothing deleted)"
        )
    config = session.config
    store = session.odf.store
    if not isinstance(store, FileSystemStore):
        typer.echo(
            f"the data store is the dataset folders ({shown_path(config.odf_dir, config.root)}/):"
            " git keeps their files, and a"
            " run removes any file no block names; nothing to collect"
        )
        return
    session.check_store()
    try:
        if not no_fetch:
            for remote in fetch_remotes(config.root):
                session.say(f"fetched {remote}")
        if delete:
            with session.odf.lock("reconcile gc --delete", timeout=session.lock_timeout):
                judgement = judge_objects(session, store, age, all_commits)
                _delete(store, judgement.collect)
        else:
            judgement = judge_objects(session, store, age, all_commits)
    except (GitError, UnreadableBlockError, StoreError, RepositoryLockedError) as e:
        raise fail(f"error: {e}; nothing deleted") from None
    _report(store, judgement, delete, min_age, all_commits)


def judge_objects(
    session: Session, store: FileSystemStore, age: float, all_commits: bool
) -> Judgement:
    """The store's listing against the names of every protected chain. The listing is
    taken after the blocks are read: an object stored meanwhile is young, so kept."""
    config = session.config
    read: set[str] = set()  # git's ids of the working tree's blocks: not read twice

    def recorded(blocks: Iterator[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
        for where, data in blocks:
            read.add(blob_id(data))
            yield where, data

    here = names_in_blocks(recorded(working_tree_blocks(config.odf_dir)))
    named = here | names_in_blocks(block_files(config.root, all_commits, read))
    return judge(store.objects(), named, age, time.time(), here)


def _delete(store: FileSystemStore, objects: list[StoredObject]) -> None:
    """Delete each; a store that fails part way says how far it got (the rest stays
    unnamed, for the next gc)."""
    for done, stored in enumerate(objects):
        try:
            store.delete(stored.path)
        except StoreError as e:
            raise fail(
                f"error: {e}; deleted {done} of {count(len(objects), 'object')}, the others"
                " are left for the next gc"
            ) from None


def _report(
    store: FileSystemStore, judgement: Judgement, deleted: bool, min_age: str, all_commits: bool
) -> None:
    scope = "every commit of every ref" if all_commits else "the tip of every ref"
    typer.echo(
        f"data store {store.shown}: {count(judgement.named, 'object')} named by the chains in the"
        f" working tree or in {scope}"
    )
    if judgement.elsewhere:
        # verify counts these as unnamed (it reads the working tree's chains only)
        them = "it" if judgement.elsewhere == 1 else "them"
        typer.echo(
            f"of those, {count(judgement.elsewhere, 'object')} no chain of the working tree"
            f" names: only other refs keep {them} (a merged branch not deleted, a"
            f" replaced chain on a tag); delete such a ref (git push origin --delete"
            f" BRANCH) for gc to collect {them}"
        )
    if judgement.young:
        typer.echo(
            f"kept {count(len(judgement.young), 'object')} no chain names, written less than"
            f" {min_age} ago (--min-age): a run not pushed yet may name"
            f" {'it' if len(judgement.young) == 1 else 'them'}"
        )
    if foreign := judgement.foreign:
        typer.echo(
            f"kept {count(len(foreign), 'file')} whose name is no object hash: the reconciler"
            " stores objects under their hashes only, so gc never deletes"
            f" {'it' if len(foreign) == 1 else 'them'}:"
        )
        for stored in foreign:
            typer.echo(f"  {stored.path}")
    collect = judgement.collect
    if not collect:
        typer.echo("nothing to delete")
        return
    size = sum(stored.size for stored in collect)
    verb = "deleted" if deleted else "would delete"
    typer.echo(f"{verb} {count(len(collect), 'object')} ({size:,} bytes):")
    for stored in collect:
        typer.echo(f"  {stored.path}")
    if not deleted:
        # The command that deletes exactly these: the same age and scope, and the
        # confirmation an age under a day needs.
        again = ["reconcile gc --delete"]
        if min_age != DEFAULT_MIN_AGE:
            again.append(f"--min-age {min_age}")
            if parse_age(min_age) < SHORT_AGE:
                again.append("--allow-short-min-age")
        if all_commits:
            again.append("--all-commits")
        typer.echo(f"run `{' '.join(again)}` to delete {'it' if len(collect) == 1 else 'them'}")
