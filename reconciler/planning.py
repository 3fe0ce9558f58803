"""Compose a plan from the repository: chains, manifests, policies, git and the engine.

``reconciler.plan`` decides; this module gathers its inputs from the outside world and
supplies the one service it may call, a query validator that starts Spark only on its
first use.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import gitops
from .config import RepoConfig
from .odf import models
from .odf.repository import OdfRepository
from .plan.builder import PlanOptions, QueryValidator, build_plan, read_actual
from .plan.desired import DesiredDataset, load_desired
from .plan.model import Column, DatasetPlan, Plan, QueryCheck, Verdict
from .plan.policies import PolicySet, evaluate, load_policies


@dataclass(frozen=True)
class PlanRequest:
    """What the user asked for on the command line."""

    base_ref: str | None = None
    prune: bool = False


def spark_validator(config: RepoConfig) -> QueryValidator:
    """Validate queries on the repository's Spark settings, starting Spark lazily."""

    def validate(
        dataset: str, inputs: Mapping[str, Sequence[Column]], transform: models.TransformSql
    ) -> QueryCheck:
        from .engine.query_check import check_query
        from .engine.session import EngineUnavailableError, SparkSettings, get_spark

        try:
            spark = get_spark(SparkSettings.load(config.root))
        except EngineUnavailableError as e:
            return QueryCheck(dataset=dataset, ok=False, error=str(e))
        return check_query(spark, dataset, inputs, transform)

    return validate


def _policies(config: RepoConfig, base_ref: str | None) -> PolicySet:
    if base_ref is None:
        return load_policies(config.policies_dir)
    with tempfile.TemporaryDirectory() as tmp:
        if gitops.export_folder(config.root, base_ref, config.policies_dir, Path(tmp)):
            return load_policies(Path(tmp))
    return load_policies(config.policies_dir)  # the base has none yet: this PR adds them


def make_plan(
    config: RepoConfig, request: PlanRequest, validator: QueryValidator | None = None
) -> Plan:
    repo = OdfRepository(config.odf_dir)
    actual, problems = read_actual(repo)
    ids = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}
    desired = load_desired(config.manifest_paths(), ids)
    changed = None
    if request.base_ref is not None:
        paths = gitops.changed_paths(config.root, request.base_ref)
        changed = frozenset(
            ds.name for ds in desired.datasets.values() if Path(ds.loaded.file).resolve() in paths
        )
    policy_set = _policies(config, request.base_ref)

    def judge(ds: DesiredDataset, plan: DatasetPlan) -> list[Verdict]:
        return evaluate(policy_set, ds.loaded, plan)

    options = PlanOptions(prune=request.prune, base_ref=request.base_ref, changed=changed)
    return build_plan(
        desired,
        actual,
        validator=validator if validator is not None else spark_validator(config),
        policies=judge,
        options=options,
        problems=problems,
    )
