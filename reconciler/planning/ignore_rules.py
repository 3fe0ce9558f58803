"""Whether git would keep what apply commits, byte for byte: the repository's ignore
rules and attributes, judged by the plan.

``apply --commit`` refuses a checkout whose ignore rules catch the chains' files (a
team's ``data/`` rule matches every ``odf/<dataset>/data/``), since git would commit
blocks without the data they name. A pull request that adds such a rule would pass its
plan and then stop every scheduled run after its merge; so the plan says it first: an
error for a pull request (``--base``), whose merge would break the loop, and a warning
for a local plan, which may be a sandbox never committed. Attributes that make git
rewrite a file (``odf/** text eol=crlf``, a filter) are judged the same way: git would
commit blocks whose bytes no longer hash to their names, and ``apply --commit`` refuses
them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..config import RepoConfig, shown_path
from ..gitloop import gitops
from ..plan.model import Location, Problem, Severity
from ..wording import count, quoted


def chain_rule_problems(
    config: RepoConfig, pull_request: bool, names: Iterable[str] = ()
) -> list[Problem]:
    """The ignore rule and the attribute that would change what a run commits, each at
    its line (``_ignored``, ``_rewritten``), over one listing of the chain files (of the
    folders there are and of ``names``, the manifests' datasets): a thousand folders
    cost 0.45 s to list. None outside git, or when the chains are outside the checkout."""
    checkout = _chain_files(config, names)
    if checkout is None:
        return []
    return (
        _submodules(config, pull_request, checkout[0])
        + _ignored(config, pull_request, *checkout)
        + _rewritten(config, pull_request, *checkout)
    )


def rewritten_chain_problems(config: RepoConfig, pull_request: bool) -> list[Problem]:
    """The attribute check alone, over the chain folders there are (``verify``'s hint)."""
    checkout = _chain_files(config, ())
    return [] if checkout is None else _rewritten(config, pull_request, *checkout)


def _submodules(config: RepoConfig, pull_request: bool, top: Path) -> list[Problem]:
    """One problem for each git submodule in the chains' folder (``gitops.gitlinks``)."""
    odf = config.odf_dir.resolve().relative_to(top).as_posix()
    return [
        Problem(
            gitops.submodule_in_chains(path),
            location=Location(shown_path(top / path, config.root)),
            severity=_severity(pull_request),
        )
        for path in gitops.gitlinks(top, odf)
    ]


def _ignored(config: RepoConfig, pull_request: bool, top: Path, files: list[str]) -> list[Problem]:
    """One problem for the first rule that catches a chain file, at that rule's line."""
    found = gitops.ignored_paths(top, files)
    if not found:
        return []
    first = found[0]
    rules = top / first.source
    shown = shown_path(rules, config.root) if rules.is_file() else first.source
    return [
        Problem(
            f"the rule {quoted(first.pattern)} makes git ignore {first.path}, a file a run"
            f" must commit; add the rule `!{shown_path(config.odf_dir, config.root)}/**`"
            " below it, or apply --commit refuses to run",
            location=Location(str(rules) if rules.is_file() else shown, first.line),
            severity=_severity(pull_request),
        )
    ]


def _rewritten(
    config: RepoConfig, pull_request: bool, top: Path, files: list[str]
) -> list[Problem]:
    """One problem for the first chain file git's attributes would rewrite, at the
    attribute's line when one can be named."""
    found = gitops.converted_paths(top, files)
    if not found:
        return []
    first = found[0]
    shown_odf = shown_path(config.odf_dir, config.root)
    source = gitops.attribute_source(top, first)
    attributes = top / ".gitattributes"
    if source is not None:
        where: Location | None = Location(str(source[0]), source[1])
    else:
        where = Location(str(attributes)) if attributes.is_file() else None
    return [
        Problem(
            f"git attribute {first}, a file a run commits: git would rewrite its"
            " bytes on commit or checkout, and a chain file's name is the hash of its bytes."
            f" End .gitattributes with {gitops.attributes_unset(shown_odf)}"
            " (`git check-attr -a` shows what sets it)",
            location=where,
            severity=_severity(pull_request),
        )
    ]


def ignored_source_problems(
    config: RepoConfig, matched: Mapping[str, Sequence[Path]]
) -> list[Problem]:
    """A warning for each dataset that reads files git ignores (a team's ``*.csv`` rule):
    a local plan lists them as pending, but no pull request carries them, and the
    scheduled run never sees them. Tracked files are not ignored, whatever the rules."""
    try:
        top = gitops.top_of(config.root)
    except gitops.GitError:
        return []
    owners: dict[str, str] = {}
    for name, files in matched.items():
        for file in files:
            path = file.resolve()
            if path.is_relative_to(top):
                owners[path.relative_to(top).as_posix()] = name
    found: dict[str, list[gitops.Ignored]] = {}
    for each in gitops.ignored_paths(top, sorted(owners), tracked_too=False):
        found.setdefault(owners[each.path], []).append(each)
    problems = []
    for name, ignored in sorted(found.items()):
        first = ignored[0]
        rules = top / first.source
        problems.append(
            Problem(
                f"git ignores {count(len(ignored), 'file')} this dataset reads ({first}): no"
                " commit carries them, so neither a pull request nor the scheduled run sees"
                f" them; add `!{shown_path(top / first.path, config.root)}`"
                " below the rule, or move the files",
                dataset=name,
                location=Location(str(rules), first.line) if rules.is_file() else None,
                severity=Severity.WARNING,
            )
        )
    return problems


def _severity(pull_request: bool) -> Severity:
    """An error where a merge would break the loop; a warning for a local plan."""
    return Severity.ERROR if pull_request else Severity.WARNING


def _chain_files(config: RepoConfig, names: Iterable[str]) -> tuple[Path, list[str]] | None:
    """The checkout's top folder and a path of each kind of file a run commits, relative
    to it (``gitops.chain_paths``); None outside git, or with the chains outside."""
    try:
        top = gitops.top_of(config.root)
    except gitops.GitError:
        return None
    odf = config.odf_dir.resolve()
    if not odf.is_relative_to(top):
        return None
    relative = odf.relative_to(top).as_posix()
    return top, gitops.chain_paths(top, relative, config.data_store == "odf", names)
