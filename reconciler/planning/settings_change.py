"""Settings a pull request may not change in ``[tool.reconciler]``: where the chains and
their data live.

A plan is a contract: whatever it shows without an error, apply carries out. Moving
``odf_root`` would leave every committed chain behind and create every dataset anew in
the new folder; moving ``data_store`` from one store beside git to another (or its
``[tool.reconciler.s3]`` endpoint) would send the next run to a store that lacks the
objects the chains already name, and fail there. Neither is a change a pull request can
make by editing one line, so the plan of a pull request (``--base``) reports either as
an error at the line that changes it. Moving from the dataset folders (``"odf"``) into a
store is carried out by apply, and the plan lists the files as pending
(``store_move_pending``); in a pull request it is an error too, as a change of Spark's
master is: the merge would send every file to a store (an endpoint) of the pull
request's choosing and take them out of git, so a maintainer merges it as such.
``source_roots`` may not grow either: the plan judges the pull request by the base's, but
the next one would read the runner's files from the new folders. Nor may
``max_decompressed_size`` rise (it bounds what a decompression bomb of the same pull
request would write on the runner), nor ``max_download_size`` and
``max_download_seconds`` (what a server the pull request names may send, and for how
long). Nor may ``policies``
point elsewhere: the pull request is judged by the base's folder, but the next one would
be judged by a folder this one wrote (``policy_change`` reports edits inside the folder).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..config import RepoConfig, setting_line, shown_path
from ..odf.store_move import in_folder
from ..plan.model import Action, Location, Pending, Plan, Problem
from ..wording import count

# Limits on what a pull request's sources may make a run do, and what each stops: raised,
# they are changes a maintainer merges knowingly.
_LIMITS = (
    (
        "max_decompressed_size",
        "bytes",
        "a decompression bomb in a pull request from filling the runner's disk",
    ),
    ("max_download_size", "bytes", "a server a pull request names from filling the runner's disk"),
    (
        "max_download_seconds",
        "seconds",
        "a server a pull request names from holding the scheduled run for ever, a byte at a time",
    ),
)


def settings_problems(config: RepoConfig, base: RepoConfig) -> list[Problem]:
    """An error for each of the working tree's settings that moves the chains or their
    data away from where ``base`` (the base branch's settings) keeps them."""
    pyproject = config.root / "pyproject.toml"
    problems = []
    if config.odf_dir != base.odf_dir:
        was, now = shown_path(base.odf_dir, base.root), shown_path(config.odf_dir, config.root)
        problems.append(
            Problem(
                f"odf_root changes from {was!r} to {now!r}: the committed chains stay in"
                f" {was!r}, and apply would create every dataset anew in {now!r}. Only"
                " the reconciler writes chains, so they cannot move in a pull request",
                location=_key_location(pyproject, "odf_root"),
                field="tool.reconciler.odf_root",
            )
        )
    # From the dataset folders ("odf") to a store beside git is what apply carries out
    # (``odf/store_move.py``; the plan lists the files as pending); not between stores.
    if _store_place(config) != _store_place(base) and base.data_store != "odf":
        problems.append(
            Problem(
                f"data_store changes from {base.data_store!r} to {config.data_store!r}: the"
                " data and checkpoint files the chains name are in the old store, and the"
                " next run would look for them in the new one. Copy them there first"
                " (see the README, 'Where data lives'), then change the setting",
                location=_key_location(pyproject, "data_store"),
                field="tool.reconciler.data_store",
            )
        )
    elif _store_place(config) != _store_place(base):
        problems.append(
            Problem(
                f"data_store changes from 'odf' to {config.data_store!r}: once merged, the"
                " next run moves every data and checkpoint file out of git into that store"
                " and removes them from the dataset folders, with the runner's credentials."
                " Where the data lives is a maintainer's change: a maintainer reviews and"
                " merges it as such, since this plan cannot approve it",
                location=_key_location(pyproject, "data_store"),
                field="tool.reconciler.data_store",
            )
        )
    elif config.s3 != base.s3 and base.data_store.startswith("s3://"):
        problems.append(
            Problem(
                "[tool.reconciler.s3] changes where the data store is: the data and"
                " checkpoint files the chains name are in the old one. Copy them there"
                " first (see the README, 'Where data lives'), then change the setting",
                location=_key_location(pyproject, "s3"),
                field="tool.reconciler.s3",
            )
        )
    if added := [r for r in config.source_roots if r not in base.source_roots]:
        shown = ", ".join(repr(shown_path(r, config.root)) for r in added)
        problems.append(
            Problem(
                f"source_roots adds {shown}: once merged, any manifest could read the"
                " runner's files there into a chain that everyone can read. It is a"
                " change of what sources may read: a maintainer reviews and merges it as"
                " such, since this plan cannot approve it",
                location=_key_location(pyproject, "source_roots"),
                field="tool.reconciler.source_roots",
            )
        )
    for key, unit, stops in _LIMITS:
        now, was = getattr(config, key), getattr(base, key)
        if now > was:
            problems.append(
                Problem(
                    f"{key} rises from {was} to {now} {unit}: the limit is what stops {stops},"
                    " so a maintainer reviews and merges a higher one as such, since this plan"
                    " cannot approve it",
                    location=_key_location(pyproject, key),
                    field=f"tool.reconciler.{key}",
                )
            )
    if config.policies_dir != base.policies_dir:
        was = shown_path(base.policies_dir, base.root)
        now = shown_path(config.policies_dir, config.root)
        problems.append(
            Problem(
                f"policies changes from {was!r} to {now!r}: this pull request is judged by"
                f" the rules in {was!r}, but the next one would be judged by the rules it"
                " names. It is a change of the rules: a maintainer reviews and merges it as"
                " such, since this plan cannot approve it",
                location=_key_location(pyproject, "policies"),
                field="tool.reconciler.policies",
            )
        )
    return problems


def store_problems(config: RepoConfig) -> list[Problem]:
    """An error, in every plan, for a folder store that is not there (a share not
    mounted, a typing error), and for one inside the repository: git holds
    neither its files (``.gitignore`` may not even cover them) nor the folder, so a CI
    checkout throws them away with the job and every clone's chains name data it lacks,
    while the blocks are committed as if the data were safe."""
    if config.data_store == "odf" or config.data_store.startswith("s3://"):
        return []
    folder = Path(_store_place(config))
    if not folder.is_relative_to(config.root.resolve()):
        if folder.is_dir():
            return []
        # A pull request naming a folder no runner has planned without a word; merged,
        # every run stopped at the store's check, and the scheduled job at its verify.
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        return [
            Problem(
                f"data_store {config.data_store!r} {what}: {folder} must be a folder this"
                f" machine can write (create it with mkdir -p {folder}, or mount the share it"
                " is on)",
                location=_key_location(config.root / "pyproject.toml", "data_store"),
                field="tool.reconciler.data_store",
            )
        ]
    return [
        Problem(
            f"data_store {config.data_store!r} is a folder inside the repository, which git"
            " does not hold: a CI checkout throws its files away with the job, and every"
            " clone's chains would name data it does not have. Leave data_store unset to"
            " keep the data with the chains in git, or name a folder outside the"
            " repository (a shared mount) or an s3:// store",
            location=_key_location(config.root / "pyproject.toml", "data_store"),
            field="tool.reconciler.data_store",
        )
    ]


def _store_place(config: RepoConfig) -> str:
    """Where ``data_store`` puts the objects, as ``store_fs.open_store`` reads it, so
    that spellings of one place (a trailing slash, ``./``) are one store."""
    store = config.data_store
    if store == "odf":
        return store
    if store.startswith("s3://"):
        return "s3://" + store.removeprefix("s3://").strip("/")
    return str((config.root / store).resolve())


def _key_location(pyproject: Path, key: str) -> Location:
    """The file and the line that sets ``key`` (``config.setting_line``), or the file
    alone when no line does (the key was removed)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        text = ""
    return Location(str(pyproject), setting_line(text, "tool.reconciler", key))


def store_move_pending(config: RepoConfig, plan: Plan) -> Plan:
    """With a data store beside git, each dataset whose folder still holds data or
    checkpoint files gets them as pending work: apply moves them into the store."""
    if config.data_store == "odf":
        return plan
    store = config.data_store
    endpoint = dict(config.s3).get("endpoint_url")
    if store.startswith("s3://") and endpoint:
        store += f" at {endpoint}"  # the reviewer sees where the data will go
    datasets = []
    for dataset in plan.datasets:
        files = in_folder(config.odf_dir / dataset.name)
        # apply moves the files of the datasets it runs: not of one it deletes, nor of
        # an orphaned chain (never touched; its files stay readable in its folder)
        if files.files and dataset.action not in (Action.DELETE, Action.ORPHANED):
            detail = (
                f"{count(len(files.files), 'file')} ({files.size:,} bytes) in the dataset"
                f" folder move into the data store {store}"
            )
            dataset = replace(dataset, pending=(*dataset.pending, Pending("store-move", detail)))
        datasets.append(dataset)
    return replace(plan, datasets=tuple(datasets))
