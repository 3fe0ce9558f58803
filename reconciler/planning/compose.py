"""Compose a plan from the repository: chains, manifests, policies, git and the engine.

``reconciler.plan`` decides; this module gathers its inputs from the outside world and
supplies the one service it may call, a query validator that starts Spark only on its
first use.
"""

from __future__ import annotations

import contextlib
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ConfigError, RepoConfig
from ..gitloop import gitops
from ..odf import models
from ..odf.chain import ChainState
from ..odf.codec import decode_block
from ..odf.manifest import ManifestError, load_snapshots
from ..odf.repository import OdfRepository
from ..plan import chain_changes
from ..plan.builder import (
    EngineUnavailableError,
    PlanOptions,
    QueryValidator,
    build_plan,
    read_actual,
)
from ..plan.confinement import manifest_problems, source_problems
from ..plan.desired import (
    NEAR_MISS,
    DesiredDataset,
    polling_source,
    read_manifests,
    resolve_desired,
)
from ..plan.model import Column, DatasetPlan, Location, Plan, Problem, QueryCheck, Severity, Verdict
from ..plan.pending import GlobListings
from ..plan.policies import PolicyError, PolicySet, evaluate, load_policies, read_override
from ..plan.renames import find_renames, renamed
from ..source_paths import Globs, OutsideError, SourceRoots
from .csv_headers import plan_header_problems
from .engine_settings_change import engine_setting_problems
from .ignore_rules import chain_rule_problems, ignored_source_problems
from .linked_paths import chains_behind_link, chains_link_problem, link_problems
from .policy_change import policy_change_problems
from .root_history import history_reader
from .settings_change import settings_problems, store_move_pending, store_problems
from .source_edits import touched_sources

if TYPE_CHECKING:
    from ..engine.session import SparkSettings


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked for on the command line."""

    base_ref: str | None = None
    prune: bool = False
    analysed: frozenset[str] | None = None  # ``PlanOptions.analysed``
    refuse_early: bool = False  # ``PlanOptions.refuse_early``: an apply's plan


def spark_validator(config: RepoConfig, base_ref: str | None = None) -> QueryValidator:
    """Validate queries on the repository's Spark settings, starting Spark lazily; without
    an engine it raises the planner's ``EngineUnavailableError``. With ``base_ref`` the
    settings are the base branch's: a pull request cannot configure the JVM that judges it.

    A check is kept for the process (``_CHECKED``): its answer depends only on the query
    and its inputs' columns (the process has one session, whatever settings a later
    caller passes), and an apply judged by two sets of policies (``plan --base``, then the
    checkout's own) plans twice, which analysed each changed query twice."""

    def validate(
        dataset: str, inputs: Mapping[str, Sequence[Column]], transform: models.TransformSql
    ) -> QueryCheck:
        from ..engine import session
        from ..engine.query_check import check_query

        key = (
            dataset,
            tuple((alias, tuple(columns)) for alias, columns in inputs.items()),
            transform.model_dump_json(),
        )
        if (known := _CHECKED.get(key)) is not None:
            return known
        try:
            spark = session.get_spark(_spark_settings(config, base_ref))
        except session.EngineUnavailableError as e:
            raise EngineUnavailableError(str(e)) from None
        if len(_CHECKED) >= _CHECKS_KEPT:
            _CHECKED.clear()
        checked = _CHECKED[key] = check_query(spark, dataset, inputs, transform)
        return checked

    return validate


_CHECKED: dict[tuple[str, tuple[tuple[str, tuple[Column, ...]], ...], str], QueryCheck] = {}
_CHECKS_KEPT = 1024  # a bound for a long-lived process (the tests plan thousands)


def _spark_settings(config: RepoConfig, base_ref: str | None) -> SparkSettings:
    """``[tool.reconciler.spark]`` of the working tree, or of ``base_ref`` when given."""
    from ..engine.session import SparkSettings

    if base_ref is None:
        return SparkSettings.load(config.root)
    text = gitops.file_at(config.root, base_ref, config.root / "pyproject.toml")
    try:
        document = tomllib.loads(text) if text is not None else {}
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"pyproject.toml at {base_ref}: {e}") from None
    return SparkSettings.of_pyproject(document)


def _base_policies(config: RepoConfig, base_ref: str) -> PolicySet | None:
    """The base branch's policies; None when it has no policies folder yet."""
    with tempfile.TemporaryDirectory() as tmp:
        if gitops.export_policies(config, base_ref, Path(tmp)) is not None:
            try:
                return load_policies(Path(tmp))
            except PolicyError as e:  # named as in the repository, not the copy's path
                raise _of_base(e, Path(tmp), config, base_ref) from None
    return None


def _of_base(error: PolicyError, copy: Path, config: RepoConfig, base_ref: str) -> PolicyError:
    """``error`` (and those in ``also``) of the base's policies exported to ``copy``,
    naming the file in the repository's policies folder, at ``base_ref``."""
    found = [
        PolicyError(
            config.policies_dir / each.file.relative_to(copy),
            each.line,
            each.policy,
            f"{each.message} (as {base_ref} has it)",
        )
        for each in error.each()
    ]
    found[0].also = tuple(found[1:])
    return found[0]


def _chain_verdicts(config: RepoConfig, base_ref: str, base: PolicySet | None) -> list[Verdict]:
    """The verdicts on what the pull request did to ``odf/``, judged by the base branch's
    policies only: a base without any still gets the default rule, which a pull request
    adding policies/ cannot lower."""
    # A link at the chains' folder or at its top (a dataset's folder) is no file of a
    # chain: git lists it beside the files it deleted there, and the verdict read "adds .
    # in no dataset's folder"; the link's own error (``linked_paths``) names it.
    files = [
        (status, path)
        for status, path in gitops.changed_files(config.root, base_ref, config.odf_dir)
        if len(path.parts) > 1 or not (config.odf_dir / path).is_symlink()
    ]
    # A link deeper in (a dataset's blocks folder) is named as one, never read as a block.
    links = frozenset(path for _, path in files if (config.odf_dir / path).is_symlink())
    new_blocks = {}
    for path in set(chain_changes.added_blocks(files)) - links:
        # one that cannot be read is listed as unreadable: the verdict stands either way
        with contextlib.suppress(OSError, ValueError):
            new_blocks[path] = decode_block((config.odf_dir / path).read_bytes())
    changes = chain_changes.chain_changes(files, new_blocks, links)
    return chain_changes.judge(PolicySet() if base is None else base, changes, config.odf_dir)


def source_roots(config: RepoConfig, base: RepoConfig | None = None) -> SourceRoots:
    """Where the sources of a plan may read: the allow-list of ``base`` (the base
    branch's settings, when judging a pull request: a base without one allows nothing),
    and never the folders of the reconciler's own, wherever either settings put them."""
    allowed = config.source_roots if base is None else base.source_roots
    reserved = config.reserved_folders() + (() if base is None else base.reserved_folders())
    return SourceRoots.of(config.root, allowed, reserved)


def list_globs(config: RepoConfig, manifests: Iterable[DesiredDataset]) -> GlobListings:
    """The names of the files each dataset's ``FilesGlob`` source in force matches now,
    sorted, by the fetch's own confined glob (``source_paths``): entries are listed, never
    opened. A path that leads outside is left out; it is a problem of its own."""
    globs = Globs(source_roots(config), config.root)
    return _names(_glob_matches(globs, _glob_paths(manifests)))


def _names(matched: Mapping[str, Sequence[Path]]) -> GlobListings:
    return {name: tuple(sorted(m.name for m in paths)) for name, paths in matched.items()}


def _glob_paths(manifests: Iterable[DesiredDataset]) -> dict[str, str]:
    """The path of each dataset's ``FilesGlob`` source in force, as written."""
    paths: dict[str, str] = {}
    for ds in manifests:
        _, source = polling_source(ds.snapshot)
        if source is not None and isinstance(source.fetch, models.FetchStepFilesGlob):
            paths[ds.name] = source.fetch.path
    return paths


def _glob_matches(globs: Globs, paths: Mapping[str, str]) -> dict[str, list[Path]]:
    """The files each dataset's ``FilesGlob`` path (``_glob_paths``) matches now."""
    matched: dict[str, list[Path]] = {}
    for name, written in paths.items():
        try:
            matches = globs.matches(written)
        except OutsideError:
            continue
        matched[name] = [m for m in matches if m.is_file()]
    return matched


def _stale_overrides(
    config: RepoConfig, base_ref: str | None, datasets: Iterable[DesiredDataset]
) -> frozenset[str]:
    """The datasets whose manifest the pull request changed but whose override line reads
    as in the base's copy of the same file: written for an earlier change, so an
    approval no one sees in this pull request's diff. A manifest the pull request left
    as it was keeps its override: the change it allows is the base's own, merged and
    not applied yet. Without a base (the scheduled apply), none: the pull request's
    plan was the gate."""
    if base_ref is None:
        return frozenset()
    stale = set()
    for ds in datasets:
        if ds.override is None:
            continue
        path = Path(ds.loaded.file).resolve()
        before = gitops.file_at(config.root, base_ref, path)
        if before is None or before == path.read_text(encoding="utf-8"):
            continue
        if read_override(before) == ds.override:
            stale.add(ds.name)
    return frozenset(stale)


def _removed_manifests(config: RepoConfig, base_ref: str, paths: Iterable[Path]) -> set[str]:
    """The names the base's manifests gave in files the pull request deleted: a chain
    left with no manifest, orphaned or deleted, was changed by the pull request exactly
    when it removed the manifest. The base's files are read as trusted, like its
    policies; one that does not load names nothing."""
    top = config.datasets_dir.resolve()
    names: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="reconcile-base-") as tmp:
        for path in paths:
            if path.suffix not in (".yaml", ".yml") or top not in path.parents or path.exists():
                continue
            text = gitops.file_at(config.root, base_ref, path)
            if text is None:
                continue
            copy = Path(tmp) / path.name
            copy.write_text(text, encoding="utf-8")
            with contextlib.suppress(ManifestError):
                names.update(item.snapshot.name for item in load_snapshots(copy))
    return names


def _read_chains(
    config: RepoConfig, repo: OdfRepository, base_ref: str | None
) -> tuple[dict[str, ChainState], list[Problem], frozenset[str]]:
    """``read_actual``, and the datasets whose chains cannot be read; every one of them
    when the chains' folder (or one above it) is a link: what it leads to is not the
    chains, and planned over it they read "unchanged" beside the link's error, which
    says why none is planned: ``link_problems``' when the pull request made the link,
    else ``chains_link_problem``'s (a scheduled run would append through it)."""
    if base_ref is not None and chains_behind_link(config, base_ref):
        return {}, [], frozenset(repo.names())
    if (linked := chains_link_problem(config)) is not None:
        return {}, [linked], frozenset(repo.names())
    actual, problems = read_actual(repo)
    return actual, problems, frozenset(p.dataset for p in problems if p.dataset is not None)


def make_plan(
    config: RepoConfig, request: PlanRequest, validator: QueryValidator | None = None
) -> Plan:
    """The plan of ``request`` over the repository of ``config``; ``validator``
    analyses new and changed queries (the engine's, started only when one is)."""
    with gitops.shared_listings():  # the chains' folder is listed by git once
        return _plan(config, request, validator)


def _plan(config: RepoConfig, request: PlanRequest, validator: QueryValidator | None) -> Plan:
    repo = OdfRepository(config.odf_dir)
    actual, problems, unreadable = _read_chains(config, repo, request.base_ref)
    ids = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}
    scan = config.scan_manifests()
    manifests = read_manifests(scan.paths, refused=len(scan.refused))
    desired = resolve_desired(manifests, ids)
    renames, rename_problems = find_renames(desired, actual)
    problems += rename_problems
    if renames:  # judged as if the chains had their new names: ids resolve to them
        actual = renamed(actual, renames)
        ids = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}
        desired = resolve_desired(manifests, ids)
    changed = None
    if request.base_ref is not None:
        paths = gitops.changed_paths(config.root, request.base_ref, config.datasets_dir)
        # A manifest may be a link inside the datasets folder: a change to the link or to
        # the file it leads to is a change to that manifest (its path is compared resolved).
        reached = paths | {path.resolve() for path in paths}
        changed = frozenset(
            ds.name for ds in desired.datasets.values() if Path(ds.loaded.file).resolve() in reached
        ) | _removed_manifests(config, request.base_ref, paths)
    # A pull request is judged by its base's settings: the allow-list its sources may
    # read (a base without one allows nothing) and the policies folder.
    base = None if request.base_ref is None else gitops.config_at(config, request.base_ref)
    globbed = Globs(source_roots(config, base), config.root)  # each glob walked once
    problems += manifest_problems(scan.refused)
    problems += source_problems(globbed, desired.datasets.values())
    pull_request = request.base_ref is not None
    if pull_request:  # a misspelt renamed-from there deletes a chain, unreviewed as such
        desired.problems = [
            replace(p, severity=Severity.ERROR) if p.field == NEAR_MISS else p
            for p in desired.problems
        ]
    problems += chain_rule_problems(config, pull_request, desired.datasets)
    problems += store_problems(config)
    if config.data_store != "odf" and (cached := gitops.cache_problem(config)) is not None:
        problems.append(Problem(cached, location=Location(str(config.cache_dir))))
    if base is not None:
        problems += settings_problems(config, base)
        problems += engine_setting_problems(config, str(request.base_ref))
        problems += policy_change_problems(config, str(request.base_ref))
    base_policies = None if request.base_ref is None else _base_policies(config, request.base_ref)
    # without a base, or a base that has no policies yet (this pull request adds them)
    policy_set = load_policies(config.policies_dir) if base_policies is None else base_policies

    def judge(ds: DesiredDataset, plan: DatasetPlan) -> list[Verdict]:
        return evaluate(policy_set, ds.loaded, plan)

    stale = _stale_overrides(config, request.base_ref, desired.datasets.values())
    globs = _glob_paths(desired.datasets.values())
    matched = _glob_matches(globbed, globs)
    if not pull_request:  # a pull request's checkout holds no file git ignores
        problems += ignored_source_problems(config, matched)
    touched = touched_sources(config, request.base_ref, globs, matched, actual)
    if request.base_ref is not None:
        problems += link_problems(config, request.base_ref, globs)
    options = PlanOptions(
        prune=request.prune,
        base_ref=request.base_ref,
        changed=changed,
        stale_overrides=stale,
        touched_sources=touched,
        renames=renames,
        analysed=request.analysed,
        unreadable=unreadable,
        refuse_early=request.refuse_early,
    )
    plan = build_plan(
        desired,
        actual,
        validator=(
            validator if validator is not None else spark_validator(config, request.base_ref)
        ),
        policies=judge,
        options=options,
        problems=problems,
        listings=_names(matched),
        history=history_reader(repo),
    )
    if request.base_ref is not None:
        verdicts = _chain_verdicts(config, request.base_ref, base_policies)
        plan = replace(plan, verdicts=(*plan.verdicts, *verdicts))
    headers = plan_header_problems(plan, desired, matched, actual, touched)
    plan = replace(plan, problems=(*plan.problems, *headers))
    plan = store_move_pending(config, plan)
    return replace(plan, commit=gitops.head_commit(config.root), root=str(config.root))
