"""The one place that talks to git: what a pull request changed, and files at a ref."""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import git

from ..config import RepoConfig, shown_path
from ..odf.names import name_problem

_BLOCK_NAME = re.compile("f1620[0-9a-f]{64}")  # a block file: its SHA3-256 multihash

FileStatus = Literal["added", "modified", "deleted"]
"""What a change did to one file, as ``changed_files`` reports it."""

# git's --name-status letters (renames are split with --no-renames): a type change
# (T) or an unresolved merge (U) leaves a file at the path whose content differs.
_STATUSES: dict[str, FileStatus] = {
    "A": "added",
    "M": "modified",
    "T": "modified",
    "U": "modified",
    "D": "deleted",
}


_EVERY_PATH = ("--no-renames", "--ignore-submodules=none")
"""Diff options that list every changed path: a rename as a deletion and an addition,
and a submodule (gitlink) even when ``.gitmodules`` says ``ignore = all``, which a pull
request writes to hide one."""


class GitError(RuntimeError):
    """The repository or the base ref could not be read."""


def in_checkout(top: Path, path: Path) -> str | None:
    """``path`` relative to the checkout's (resolved) ``top`` as git names it, or None
    outside it: the links on the way to the checkout are followed, none inside it. A pull
    request that made ``odf`` a link to a folder it had filled earlier had every diff
    look there, and the plan saw no change to the chains."""
    absolute = Path(os.path.abspath(path))
    for ancestor in reversed((absolute, *absolute.parents)):
        if ancestor.resolve() == top:
            return absolute.relative_to(ancestor).as_posix()
    return None


def changed_paths(repo_root: Path, base_ref: str, under: Path | None = None) -> set[Path]:
    """Files that differ between ``base_ref`` and the working tree, untracked ones included;
    with ``under``, only those in that folder (git then looks at nothing else: a plan
    wants the manifests, not the chains' hundred thousand blocks).

    Paths are absolute, so callers can compare them with manifest paths directly.
    """
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        base = repo.commit(base_ref)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{repo_root} is not in a git repository: {e}") from None
    except (git.BadName, ValueError) as e:
        raise GitError(f"unknown git ref {base_ref!r}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root)
    specs: list[str] = []
    if under is not None:
        folder = in_checkout(top.resolve(), under)
        if folder is None:
            return set()  # a folder outside the repository has no history to compare
        specs = [folder]
    # The base against the index, then the index against the working tree: git 2.39
    # compares a commit with the working tree under a pathspec in time that grows with
    # the square of a folder's entries (a thousand manifests in datasets/: 8 s, where
    # each of these takes 0.03 s).
    listed = [
        repo.git.diff("--cached", base.hexsha, *_EVERY_PATH, "--name-only", "-z", "--", *specs),
        repo.git.diff(*_EVERY_PATH, "--name-only", "-z", "--", *specs),
        repo.git.ls_files("--others", "--exclude-standard", "-z", "--", *specs),
    ]
    # The checkout's own path resolved, each file's not: a file the change made a link
    # is itself the change (``verify --base`` reports it), not the file it leads to.
    real = top.resolve()
    return {real / path for names in listed for path in names.split("\0") if path}


def export_folder(repo_root: Path, ref: str, folder: Path, target: Path) -> bool:
    """Write ``folder`` as it is at ``ref`` into ``target``; False if it did not exist there.

    Used to judge a pull request by the policies of its base branch: otherwise a change
    could relax the very rules that review it.
    """
    sub = _object_at(repo_root, ref, folder)
    if not isinstance(sub, git.Tree):
        return False
    for item in sub.traverse():
        if isinstance(item, git.Blob):
            path = target / Path(str(item.path)).relative_to(Path(str(sub.path)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(item.data_stream.read())
    return True


def file_at(repo_root: Path, ref: str, path: Path) -> str | None:
    """The text of ``path`` as it is at ``ref``; None if it did not exist there.

    Used to confine a pull request's sources by the base branch's ``source_roots``.
    """
    blob = _object_at(repo_root, ref, path)
    if not isinstance(blob, git.Blob):
        return None
    data: bytes = blob.data_stream.read()
    return data.decode("utf-8", errors="replace")


def config_at(config: RepoConfig, ref: str) -> RepoConfig:
    """The repository's settings as ``ref`` has them (its ``pyproject.toml``, the
    defaults without one): where a pull request's plan finds the policies that judge it
    and the folders its sources may read, neither of which the pull request may move."""
    pyproject = config.root / "pyproject.toml"
    text = file_at(config.root, ref, pyproject)
    return RepoConfig.of_pyproject(config.root, text or "", f"{pyproject} at {ref}")


def export_policies(config: RepoConfig, ref: str, target: Path) -> Path | None:
    """Write the policies folder that ``ref``'s own settings name, as it is at ``ref``,
    into ``target``: the folder (its working-tree path), or None when ``ref`` has none.
    A pull request that points ``policies`` elsewhere is still judged by this folder."""
    base = config_at(config, ref)
    return base.policies_dir if export_folder(base.root, ref, base.policies_dir, target) else None


def _object_at(repo_root: Path, ref: str, path: Path) -> git.Blob | git.Tree | None:
    """The file or folder ``path`` (in the working tree) as it is at ``ref``; None if it
    did not exist there."""
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        tree = repo.commit(ref).tree
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.BadName, ValueError) as e:
        raise GitError(f"cannot read {ref!r} in {repo_root}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root).resolve()
    inside = in_checkout(top, path)
    if inside is None:
        return None
    try:
        found = tree / inside
    except KeyError:
        return None
    return found if isinstance(found, git.Blob | git.Tree) else None


def head_commit(repo_root: Path) -> str | None:
    """The sha of the commit checked out at ``repo_root``; None outside git or before the
    first commit. A plan names it so a reviewer knows which state was judged."""
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        return str(repo.head.commit.hexsha)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None


_FEW = 16
"""Pathspecs given to git as they are; more are narrowed to their top folders."""

_Listing = list[tuple[str, str]]
_SHARED: ContextVar[dict[tuple[str, ...], _Listing] | None] = ContextVar("_SHARED", default=None)


@contextlib.contextmanager
def shared_listings() -> Iterator[None]:
    """Within it (one plan), what git lists of a top folder since a commit (its changes,
    its untracked files) is asked of git once. A pull request's plan asked three times of
    the chains' folder, the slowest to list: for links it adds (the chains', then every
    judged folder's) and for the chain files it changes, 0.35 s each at 100,000 files."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _listed(repo: git.Repo, since: str, tops: Sequence[str]) -> tuple[_Listing, list[str]]:
    """The working tree's changes since ``since`` under ``tops`` (each as git's ``--raw``
    line: the modes and status, then the path) and its untracked files there, listed a
    top at a time so that each is shared (``shared_listings``)."""
    shared = _SHARED.get()
    changes: _Listing = []
    untracked: list[str] = []
    for top in tops:
        key = (str(repo.working_tree_dir), since, top)
        if shared is None or key not in shared:
            raw = repo.git.diff(since, *_EVERY_PATH, "--raw", "-z", "--", top).split("\0")
            listed = [(raw[i], raw[i + 1]) for i in range(0, len(raw) - 1, 2)]
            others = repo.git.ls_files("--others", "--exclude-standard", "-z", "--", top)
            listed += [("?", path) for path in others.split("\0") if path]
            if shared is not None:
                shared[key] = listed
        else:
            listed = shared[key]
        changes += [(meta, path) for meta, path in listed if meta != "?"]
        untracked += [path for meta, path in listed if meta == "?"]
    return changes, untracked


def changed_files(
    repo_root: Path, base_ref: str, under: Path, only: Sequence[Path] = ()
) -> list[tuple[FileStatus, PurePosixPath]]:
    """Files under ``under`` that the working tree adds, modifies or deletes since it
    branched from ``base_ref``, untracked ones included, paths relative to ``under``;
    with ``only``, just those in these folders (under ``under``), which spares a large
    repository's other files.

    Compared with the merge base rather than the tip of ``base_ref``: what the base gained
    since (chains the reconciler advanced on main) is not the pull request's doing, and
    would otherwise read as deleted by it. Renames count as a deletion and an addition.
    """
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        base = repo.commit(base_ref)
        head = repo.head.commit
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{repo_root} is not in a git repository: {e}") from None
    except (git.BadName, ValueError) as e:
        raise GitError(f"unknown git ref {base_ref!r}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root).resolve()
    folder = in_checkout(top, under)
    if folder is None:
        return []  # a folder outside the repository has no history to compare
    specs = [folder]
    if only:
        # resolved only when needed: a thousand folders' realpaths cost a plan 0.1 s
        found = (p if p.is_absolute() and p.is_relative_to(top) else p.resolve() for p in only)
        specs = [p.relative_to(top).as_posix() for p in found if p.is_relative_to(top)]
        if not specs:
            return []
    since = next(iter(repo.merge_base(base, head)), base)
    # git matches every path against every pathspec: a thousand datasets' folders made
    # one diff 0.8 s, their few top folders 0.03 s; the answer is then narrowed here.
    narrowed, asked = len(specs) > _FEW, frozenset(specs)
    tops = sorted({spec.split("/", 1)[0] for spec in specs}) if narrowed else specs
    raw, untracked = _listed(repo, since.hexsha, tops)
    letters = [(meta.split(" ")[-1][:1], path) for meta, path in raw]
    same = same_bytes(repo, top, since.hexsha, [path for letter, path in letters if letter == "M"])
    changes = [(_STATUSES[letter], path) for letter, path in letters if path not in same]
    changes += [("added", path) for path in untracked]
    return sorted(
        (status, PurePosixPath(path).relative_to(folder))
        for status, path in changes
        if not narrowed or not asked.isdisjoint(map(str, PurePosixPath(path).parents))
    )


_LINK_MODE = "120000"


def added_links(repo_root: Path, base_ref: str, folders: Sequence[str]) -> list[tuple[str, str]]:
    """The symbolic links the working tree adds or changes since it branched from
    ``base_ref`` at, above or inside any of ``folders`` (as git names them, from the
    checkout's top: ``in_checkout``), as (path as git names it, where it leads). git and
    a reviewer see a link; a run reads what it leads to: a pull request made ``odf`` a
    link to a copy of the chains it had changed in an earlier one, and
    ``sources/orders`` a link to a copy with an ingested record changed."""
    judged = [folder for folder in folders if folder != "."]
    if not judged:
        return []
    repo = _repo(repo_root)
    try:
        base = repo.commit(base_ref)
    except (git.BadName, ValueError) as e:
        raise GitError(f"unknown git ref {base_ref!r}: {e}") from None
    top = Path(repo.working_tree_dir or repo_root).resolve()
    tops = sorted({folder.split("/", 1)[0] for folder in judged})
    since = next(iter(repo.merge_base(base, repo.head.commit)), base)
    raw, untracked = _listed(repo, since.hexsha, tops)
    paths = [
        path
        for meta, path in raw
        if meta.split(" ")[1:2] == [_LINK_MODE] and not meta.endswith("D")
    ]
    paths += [path for path in untracked if (top / path).is_symlink()]
    return [
        (path, os.readlink(top / path))
        for path in sorted(set(paths))
        if (top / path).is_symlink() and any(crosses(path, folder) for folder in judged)
    ]


def crosses(link: str, folder: str) -> bool:
    """Whether a link at ``link`` is ``folder``, one of its parents, or inside it (both as
    git names paths): the three places a link changes what reading ``folder`` reads."""
    return link == folder or folder.startswith(link + "/") or link.startswith(folder + "/")


_LISTED_AT_ONCE = 1000  # paths per ``git ls-tree``: a command line has its limits


def same_bytes(repo: git.Repo, top: Path, since: str, modified: list[str]) -> set[str]:
    """The ``modified`` files whose bytes on disk are still their blob's at ``since``.

    git compares a file on disk through the clean filter its attributes name now: a
    pull request adding only ``odf/** filter=lfs`` made every chain file read as
    modified (it would now be stored as a pointer) wherever LFS is set up, and the plan
    told the reviewer it "changes 6 blocks". A regular file whose raw bytes hash to the
    blob is not changed; the attributes are judged on their own (``ignore_rules``)."""
    regular = [
        p for p in modified if "\n" not in p and not (top / p).is_symlink() and (top / p).is_file()
    ]
    wanted, blobs = set(regular), {}
    for start in range(0, len(regular), _LISTED_AT_ONCE):
        chunk = regular[start : start + _LISTED_AT_ONCE]
        for entry in repo.git.ls_tree("-z", since, "--", *chunk).split("\0"):
            meta, _, path = entry.partition("\t")
            fields = meta.split()  # mode, kind, sha
            if path in wanted and fields[:2] in (["100644", "blob"], ["100755", "blob"]):
                blobs[path] = fields[2]
    if not blobs:
        return set()
    listing = "".join(f"{path}\n" for path in blobs).encode("utf-8", "surrogateescape")
    hashed = subprocess.run(
        ["git", "-C", str(top), "hash-object", "--no-filters", "--stdin-paths"],
        input=listing,
        capture_output=True,
        check=True,
    ).stdout.split()
    return {path for path, sha in zip(blobs, hashed, strict=True) if sha.decode() == blobs[path]}


def gitlinks(repo_root: Path, folder: str) -> list[str]:
    """The git submodules (index entries of mode 160000) under ``folder``, relative to
    the checkout's top: git commits nothing a run writes beneath one, and a clone has an
    empty folder there, so none may sit in the chains' folder."""
    top = _repo(repo_root).working_tree_dir or str(repo_root)
    # The files of blocks/, data/ and checkpoints/ left out: a hundred thousand entries
    # to read, and a submodule there is a file's place, which no run writes beneath (and
    # ``verify`` reports as a folder); it is a folder's place that must be no submodule.
    escaped = glob_escape(folder)
    files = [f":(exclude,glob){escaped}/*/{kind}/*" for kind in ("blocks", "data", "checkpoints")]
    done = subprocess.run(
        ["git", "-C", top, "ls-files", "--stage", "-z", "--", f":(literal){folder}", *files],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        reason = _first_line(done.stderr.decode("utf-8", "replace"))
        raise GitError(f"cannot list the tracked files: {reason}")
    return [
        entry.partition(b"\t")[2].decode("utf-8", "surrogateescape")
        for entry in done.stdout.split(b"\0")
        if entry.startswith(b"160000 ")
    ]


def glob_escape(path: str) -> str:
    """``path`` as a literal in a ``:(glob)`` pathspec (git's wildmatch escapes with ``\\``)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


def cache_problem(config: RepoConfig) -> str | None:
    """Why the data store's cache (``.reconcile-cache/``) cannot be trusted, or None. A
    run takes a cached file for the object its name promises without hashing it again
    (it was hashed when downloaded), so the cache must be this clone's own: git may carry
    neither a file in it nor a link in its place, which a pull request could fill with
    data of its choosing under a real object's name."""
    cache = config.cache_dir
    shown = shown_path(cache, config.root)
    if cache.is_symlink():
        return (
            f"{shown} is a symbolic link: the data store's cache is this clone's own folder,"
            " whose files are used as the objects they are named after; remove the link"
        )
    try:
        tracked = _repo(config.root).git.ls_files("-z", "--", str(cache)).split("\0")
    except (GitError, git.GitCommandError):
        return None  # outside git, or git cannot say: nothing of it is carried by git
    if tracked[0]:
        return (
            f"git tracks {tracked[0]} in the data store's cache ({shown}/), whose files are"
            " used as the objects they are named after without being hashed again; remove"
            f" it from git (`git rm -r --cached {shlex.quote(shown)}`)"
        )
    return None


def submodule_in_chains(path: str) -> str:
    """What the plan and ``apply --commit`` say of a submodule at ``path``."""
    quoted = shlex.quote(path)
    return (
        f"{path} is a git submodule (a gitlink): git commits no file a run writes beneath"
        " it, and every clone has an empty folder there; remove it with"
        f" `git rm --cached {quoted}` and its entry in .gitmodules"
    )


def resolve_commit(repo_root: Path, ref: str) -> str:
    """The sha of the commit ``ref`` names. A saved plan records its base's, so that a base
    that moved after the plan makes the plan stale."""
    try:
        repo = git.Repo(repo_root, search_parent_directories=True)
        return str(repo.commit(ref).hexsha)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{repo_root} is not in a git repository: {e}") from None
    except (git.BadName, ValueError) as e:
        raise GitError(f"unknown git ref {ref!r}: {e}") from None


def fetch_remotes(repo_root: Path) -> list[str]:
    """Fetch every remote, pruning the branches it no longer has, and name them: before
    ``reconcile gc`` judges which objects the branches name, a clone must know the
    branches the team pushed since it last fetched, or it would delete their data."""
    repo = _repo(repo_root)
    names = [remote.name for remote in repo.remotes]
    for name in names:
        try:
            repo.git.fetch("--prune", "--quiet", name)
        except git.GitCommandError as e:
            raise GitError(f"cannot fetch {name}: {_first_line(str(e.stderr))}") from None
    return names


def block_files(
    repo_root: Path, all_commits: bool, known: AbstractSet[str] = frozenset()
) -> Iterator[tuple[str, bytes]]:
    """The path (as git lists it) and bytes of every block file
    (``<folder>/<dataset>/blocks/<hash>``) at the tip of every ref (branches, remote
    branches, tags, the stash, ``HEAD``), or with ``all_commits`` in every commit they
    reach; each distinct file once, but for those whose ids are in ``known`` (read
    already: most of them are the working tree's). Block files are found by their shape
    wherever they are, not under today's ``odf_root``: another ref may keep its chains
    in another folder (a branch that moved them, or not yet), and the objects its
    blocks name must be kept as well. A shallow clone lacks commits: refused then."""
    repo = _repo(repo_root)
    if all_commits and repo.git.rev_parse("--is-shallow-repository") == "true":
        raise GitError("the clone is shallow: it lacks commits (git fetch --unshallow)")
    # No pathspec: with one, a walk simplifies history and can skip a merged branch's
    # commits. Each object is listed once, with the first path it was seen at.
    walk = [] if all_commits else ["--no-walk"]
    listed = repo.git.rev_list("--objects", *walk, "--all")
    for line in listed.splitlines():
        oid, _, path = line.partition(" ")
        parts = path.split("/")
        if oid in known or len(parts) < 3 or parts[-2] != "blocks":
            continue
        if _BLOCK_NAME.fullmatch(parts[-1]) and name_problem(parts[-3]) is None:
            yield path, repo.odb.stream(bytes.fromhex(oid)).read()


def last_changes(repo_root: Path, paths: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """For each of ``paths`` (relative to the top of the checkout) that ``HEAD`` holds:
    the last commit of ``HEAD``'s history that changed it, and its bytes at ``HEAD``.

    One walk of the history for all of them, ended as soon as each is found (a chain's
    head moves with every run, so the walk is short). A shallow clone's oldest commit
    counts as changing every file it holds."""
    if not paths:
        return {}
    top = str(top_of(repo_root))
    contents = files_at(top, "HEAD", paths)
    found: dict[str, str] = {}
    if contents:
        command = ["git", "-C", top, "-c", "core.quotePath=false", "log", "--format=\x01%H"]
        command += ["--name-only", "--no-renames", "HEAD", "--", *sorted(contents)]
        walk = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert walk.stdout is not None
        try:
            commit = ""
            for raw in walk.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("\x01"):
                    commit = line[1:]
                elif line in contents and line not in found:
                    found[line] = commit
                    if len(found) == len(contents):
                        break
        finally:
            walk.kill()
            walk.wait()
    return {path: (commit, contents[path]) for path, commit in found.items()}


def files_at(repo_root: Path | str, ref: str, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes of those of ``paths`` (relative to the top of the checkout, from
    whichever folder of it ``repo_root`` is: ``<ref>:<path>`` names a path from the
    top) that ``ref`` holds, read by one ``git cat-file`` however many they are; none
    when ``ref`` does not name a commit (before the first one)."""
    if not paths:
        return {}
    done = subprocess.run(
        ["git", "-C", str(repo_root), "cat-file", "--batch"],
        input="".join(f"{ref}:{path}\n" for path in paths).encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:  # no HEAD yet: nothing was committed
        return {}
    out, at, contents = done.stdout, 0, {}
    for path in paths:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) != 3:  # ``<name> missing`` (or ``ambiguous``): no content follows
            continue
        size = int(header[2])
        if header[1] == b"blob":
            contents[path] = out[at : at + size]
        at += size + 1
    return contents


def blob_id(data: bytes) -> str:
    """The id git gives a file of these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _first_line(stderr: str) -> str:
    """git's first complaint, out of GitPython's ``stderr: '…'`` wrapping."""
    text = stderr.strip().removeprefix("stderr:").strip().strip("'")
    return text.splitlines()[0].strip() if text else "no reason given"


def top_of(path: Path) -> Path:
    """The top of the git checkout ``path`` is in (``GitError`` outside one)."""
    repo = _repo(path)
    return Path(repo.working_tree_dir or path).resolve()


def _repo(repo_root: Path) -> git.Repo:
    try:
        return git.Repo(repo_root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"{repo_root} is not in a git repository: {e}") from None


@dataclass(frozen=True)
class Ignored:
    """A path git's ignore rules leave out, and the rule that does: ``.gitignore:3:
    data/`` (a global excludes file names its own path)."""

    path: str
    source: str
    line: int
    pattern: str

    def __str__(self) -> str:
        return f"{self.path} ({self.source}:{self.line}: {self.pattern})"


def chain_paths(top: Path, odf: str, data_in_odf: bool, names: Iterable[str] = ()) -> list[str]:
    """Paths of each kind a run commits (``odf`` relative to the checkout's ``top``), in
    every dataset folder there is and of every name in ``names`` (the manifests', whose
    folders a run may create), or in a made-up ``<dataset>``: an ignore rule or an
    attribute may catch one kind of file only (``data/``), or the folders of some names.
    A file is named as a run names it (``f1620`` and 64 hex digits), and up to
    ``_SAMPLED`` of the files a folder holds are added, so a rule written for hash names
    (``f1620?*``, ``*[0-7]``) is caught too; the commit checks the files it stages.

    A folder (a dataset's, or ``blocks``… in one) that is a symbolic link is left out:
    git holds no file beneath a link, and asked about a path there it stops (``pathspec
    … is beyond a symbolic link``), which stopped the plan before it could report the
    link itself (``planning.linked_paths``)."""
    chains = top / odf
    folders = sorted(
        {
            entry.name
            for entry in chains.glob("*")
            if entry.is_dir() and not entry.name.startswith(".")
        }
        | set(names)
    )
    stores = ["blocks", *(["data", "checkpoints"] if data_in_odf else [])]
    paths = []
    for name in [each for each in folders if not (chains / each).is_symlink()] or ["<dataset>"]:
        for store in [kind for kind in stores if not (chains / name / kind).is_symlink()]:
            made_up = "f1620" + hashlib.sha3_256(f"{name}/{store}".encode()).hexdigest()
            held = heapq.nsmallest(_SAMPLED, _file_names(chains / name / store))
            paths += [f"{odf}/{name}/{store}/{file}" for file in dict.fromkeys([made_up, *held])]
        paths += [
            f"{odf}/{name}/{file}"
            for file in ("refs/head", "info/alias")
            if not (chains / name / file).parent.is_symlink()
        ]
    return paths


_SAMPLED = 16  # files of each kind per folder: enough for a rule that matches some names


def _file_names(folder: Path) -> list[str]:
    """The files a run commits in ``folder``: not a temporary (``.pending-*``) or a lock,
    which a run never commits and ``.gitignore`` rightly ignores, even when a merge
    carried one in."""
    try:
        return [
            entry.name
            for entry in os.scandir(folder)
            if entry.is_file() and not entry.name.startswith(".")
        ]
    except OSError:  # no such folder yet
        return []


def ignored_paths(repo_root: Path, paths: Sequence[str], tracked_too: bool = True) -> list[Ignored]:
    """Those of ``paths`` (relative to the top of the checkout; they need not exist) that
    git's ignore rules leave out, tracked or not (``tracked_too``; else untracked only):
    a rule written for other files (a team's ``data/``) can catch what a run must commit,
    and git then drops it without a word."""
    if not paths:
        return []
    repo = _repo(repo_root)
    top = repo.working_tree_dir or str(repo_root)
    # Always without the index: git 2.39 then took 2.9 s for 1,000 paths in an index of
    # 100,000 files, against 0.01 s; tracked paths are left out below instead.
    done = subprocess.run(
        ["git", "-C", top, "check-ignore", "--no-index", "--verbose", "-z", "--stdin"],
        input="\0".join(paths).encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=False,
    )
    if done.returncode not in (0, 1):  # 1: none of them is ignored
        reason = _first_line(done.stderr.decode("utf-8", "replace"))
        raise GitError(f"cannot read the ignore rules: {reason}")
    out = done.stdout.decode("utf-8", "surrogateescape")
    fields = out.split("\0")
    found = []
    for i in range(0, len(fields) - 3, 4):
        source, line, pattern, path = fields[i : i + 4]
        if not pattern.startswith("!"):  # a negation that matched keeps the path
            found.append(Ignored(path, source, int(line), pattern))
    if found and not tracked_too:
        folders = sorted({PurePosixPath(each.path).parent.as_posix() for each in found})
        listed = subprocess.run(
            ["git", "-C", top, "--literal-pathspecs", "ls-files", "-z", "--", *folders],
            capture_output=True,
            check=False,
        )
        if listed.returncode != 0:
            reason = _first_line(listed.stderr.decode("utf-8", "replace"))
            raise GitError(f"cannot list the tracked files: {reason}")
        tracked = set(listed.stdout.decode("utf-8", "surrogateescape").split("\0"))
        found = [each for each in found if each.path not in tracked]
    return found


@dataclass(frozen=True)
class Converted:
    """A path git would rewrite on commit or checkout, and the attribute that makes it."""

    path: str
    attribute: str
    value: str

    def __str__(self) -> str:
        return f"{self.attribute}={self.value} on {self.path}"


# What makes git rewrite a file's bytes between the repository and the working tree; a
# chain file's name is its hash, so any rewrite breaks it.
_REWRITING = ("text", "eol", "crlf", "filter", "ident", "working-tree-encoding")
# ... but not these: git finds the blocks binary under ``text=auto``, and Git LFS gives
# the working tree the file's own bytes back (the checkout must fetch them, ``lfs: true``).
_KEPT = {("text", "auto"), ("filter", "lfs")}


def attribute_source(repo_root: Path, found: Converted) -> tuple[Path, int] | None:
    """The file and 1-based line that give ``found``'s path its attribute, or None when
    no line names it as set (a macro, the global attributes file).

    ``git check-attr`` says what a path has, not why. The files are read as git ranks
    them, the one that wins first (``info/attributes``, then the ``.gitattributes``
    nearest the path, up to the top one), and in each the last line that sets the
    attribute and whose pattern matches wins; whether a pattern matches is asked of git
    itself, as an ignore rule in an empty repository (the two share their syntax)."""
    repo = _repo(repo_root)
    top = Path(repo.working_tree_dir or repo_root)
    wanted = found.attribute if found.value == "set" else f"{found.attribute}={found.value}"
    parts = PurePosixPath(found.path).parts[:-1]
    files = [(Path(repo.git_dir) / "info" / "attributes", "")]
    files += [
        (top.joinpath(*parts[:depth], ".gitattributes"), "/".join(parts[:depth]))
        for depth in range(len(parts), -1, -1)
    ]
    for file, folder in files:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        setting = [
            (number, fields[0])
            for number, line in enumerate(lines, start=1)
            if (fields := line.split())
            and not fields[0].startswith("#")
            and not fields[0].endswith("/")
            and wanted in fields[1:]
        ]
        relative = found.path[len(folder) + 1 :] if folder else found.path
        matched = _last_match([pattern for _, pattern in setting], relative)
        if matched is not None:
            return file, setting[matched][0]
    return None


def _last_match(patterns: Sequence[str], path: str) -> int | None:
    """The index of the last of ``patterns`` that matches ``path``, by git's rules."""
    if not patterns:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True, capture_output=True)
        (Path(scratch) / ".gitignore").write_text("\n".join(patterns) + "\n", encoding="utf-8")
        done = subprocess.run(
            ["git", "-C", scratch, "check-ignore", "--no-index", "--verbose", "-z", "--stdin"],
            input=path.encode("utf-8", "surrogateescape") + b"\0",
            capture_output=True,
            check=False,
        )
    fields = done.stdout.decode("utf-8", "replace").split("\0")
    if done.returncode != 0 or len(fields) < 4:
        return None
    return int(fields[1]) - 1


def restored_files(repo_root: Path, paths: Sequence[str]) -> set[str]:
    """Those of ``paths`` (relative to ``repo_root``) whose bytes are the ones the path
    held just before the last commit that deleted it: files put back, not new ones.
    Trees only are read from history (a ``blob:none`` clone has them all)."""
    found = set()
    for path in paths:
        deleted = _git_line(repo_root, "log", "-1", "--format=%H", "--diff-filter=D", "--", path)
        if not deleted:
            continue
        before = _git_line(repo_root, "rev-parse", "--verify", "-q", f"{deleted}^:./{path}")
        if before and before == blob_id((repo_root / path).read_bytes()):
            found.add(path)
    return found


def _git_line(repo_root: Path, *args: str) -> str:
    """The first line git prints for ``args`` run in ``repo_root``; empty when it fails."""
    done = subprocess.run(
        ["git", "-C", str(repo_root), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def attributes_unset(odf: str) -> str:
    """The ``.gitattributes`` line, to end the file with, that turns off every rewrite
    ``converted_paths`` finds for the chain folder ``odf``: what each refusal advises."""
    return f"`{odf}/** -text -eol -filter -ident -working-tree-encoding`"


def converted_paths(repo_root: Path, paths: Sequence[str]) -> list[Converted]:
    """Those of ``paths`` (relative to the top of the checkout; they need not exist) that
    git's attributes (``.gitattributes``, ``info/attributes``, the global file) make it
    rewrite: end-of-line conversion, a clean/smudge filter, ``ident`` expansion or a
    working-tree encoding (``_KEPT`` names the harmless ones)."""
    if not paths:
        return []
    repo = _repo(repo_root)
    top = repo.working_tree_dir or str(repo_root)
    done = subprocess.run(
        ["git", "-C", top, "check-attr", "-z", "--stdin", *_REWRITING],
        input="\0".join(paths).encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        reason = _first_line(done.stderr.decode("utf-8", "replace"))
        raise GitError(f"cannot read the git attributes: {reason}")
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    values: dict[str, dict[str, str]] = {}
    for i in range(0, len(fields) - 2, 3):
        path, attribute, value = fields[i : i + 3]
        values.setdefault(path, {})[attribute] = value
    found = []
    for path in paths:
        attributes = values.get(path, {})
        text = attributes.get("text", "unspecified")
        for attribute in _REWRITING:
            value = attributes.get(attribute, "unspecified")
            if value in ("unspecified", "unset") or (attribute, value) in _KEPT:
                continue
            if attribute == "eol" and text == "unset":
                continue  # eol only applies to text
            found.append(Converted(path, attribute, value))
            break
    return found
