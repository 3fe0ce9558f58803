"""A real GitOps repository in a temporary folder, for plan and apply tests."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import pyarrow as pa
import pyarrow.parquet as pq
from conftest_spark import TEST_SETTINGS

from reconciler.apply.metadata import apply_dataset, delete_dataset
from reconciler.apply.outcome import Outcome
from reconciler.apply.run import apply_plan
from reconciler.config import RepoConfig
from reconciler.engine.session import get_spark
from reconciler.ingest.pull import IngestContext
from reconciler.lineage.openlineage_events import Lineage
from reconciler.odf import Timestamp
from reconciler.odf.models import AddData, ExecuteTransform
from reconciler.odf.repository import Dataset, OdfRepository
from reconciler.plan.builder import PlanOptions, QueryValidator, build_plan, read_actual
from reconciler.plan.desired import load_desired
from reconciler.plan.model import Action, Plan
from reconciler.planning.compose import PlanRequest, make_plan

T0 = Timestamp.parse("2026-01-01T00:00:00Z")


def manifest(name: str, kind: str, events: str) -> str:
    """A DatasetSnapshot document; ``events`` is the YAML list under metadata."""
    body = textwrap.indent(textwrap.dedent(events).strip("\n"), "    ")
    return f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: {kind}\n  metadata:\n{body}\n"


def root_events(
    schema: str = "[a BIGINT, b STRING]", merge: str = "{kind: Append}", extra: str = ""
) -> str:
    return f"""
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "sources/*.csv"}}
      read: {{kind: Csv, header: true, schema: {schema}}}
      merge: {merge}
    - kind: SetInfo
      description: Example data
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
    {extra}"""


def derivative_events(inputs: list[str], query: str) -> str:
    refs = ", ".join(f"{{datasetRef: {i}}}" for i in inputs)
    # The query goes in a literal block, indented to sit under `query: |` below.
    block = "\n".join("          " + line for line in query.splitlines())
    return f"""
    - kind: SetTransform
      inputs: [{refs}]
      transform:
        kind: Sql
        engine: spark
        query: |
{block}
    - kind: SetInfo
      description: Derived data
    - kind: SetLicense
      shortName: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
    """


@dataclass
class GitOpsRepo:
    root: Path

    @classmethod
    def create(cls, root: Path) -> GitOpsRepo:
        (root / "datasets").mkdir(parents=True)
        repo = git.Repo.init(root, initial_branch="main")
        with repo.config_writer() as cw:
            cw.set_value("user", "name", "test")
            cw.set_value("user", "email", "test@example.org")
        return cls(root)

    @property
    def config(self) -> RepoConfig:
        return RepoConfig.load(self.root)

    @property
    def odf(self) -> OdfRepository:
        return OdfRepository(self.config.odf_dir)

    def write(self, name: str, text: str) -> Path:
        path = self.root / "datasets" / f"{name}.yaml"
        path.write_text(text)
        return path

    def allow_env(self, **addresses: list[str]) -> None:
        """A policy letting manifests' templates name these variables, each sent only to
        its addresses (without one, no template passes the plan)."""
        entries = "".join(
            f"      {name}: {json.dumps(where)}\n" for name, where in addresses.items()
        )
        (self.root / "policies").mkdir(exist_ok=True)
        (self.root / "policies" / "env.yaml").write_text(
            "rules:\n  - id: env-templates\n    severity: error\n    message: m\n"
            f"    env_templates:\n{entries}"
        )

    def remove(self, name: str) -> None:
        (self.root / "datasets" / f"{name}.yaml").unlink()

    def commit(self, message: str = "change") -> str:
        repo = git.Repo(self.root)
        # all but the data store's cache, which `reconcile init`'s .gitignore leaves out
        repo.git.add("-A", "--", ".", ":!.reconcile-cache")
        repo.index.commit(message)
        return repo.head.commit.hexsha

    def plan(
        self, validator: QueryValidator | None = None, options: PlanOptions | None = None
    ) -> Plan:
        actual, problems = read_actual(self.odf)
        ids = {str(s.dataset_id): n for n, s in actual.items() if s.dataset_id}
        desired = load_desired(self.config.manifest_paths(), ids)
        return build_plan(
            desired,
            actual,
            validator=validator,
            options=options or PlanOptions(),
            problems=problems,
        )

    def apply(self, system_time: Timestamp = T0) -> Plan:
        """Append the plan's metadata (no ingest), as the first half of ``reconcile``."""
        plan = self.plan()
        ids = {d.name: d.dataset_id for d in plan.datasets if d.dataset_id}
        for ds in plan.datasets:
            if ds.action is Action.DELETE:
                assert delete_dataset(self.odf, ds) is None
            elif ds.action in (Action.CREATE, Action.UPDATE):
                assert apply_dataset(self.odf, ds, system_time, ids).error is None
        return plan


T1 = Timestamp.parse("2026-02-01T12:00:00Z")


def reconcile(
    root: Path,
    system_time: Timestamp | None = T1,
    env: dict[str, str] | None = None,
    lineage: Lineage | None = None,
    fetch_uncacheable: bool = False,
) -> list[Outcome]:
    """``reconcile`` (plan, then apply) in this process, on the test session's Spark;
    ``lineage`` receives its OpenLineage runs (none by default)."""
    # Started here with the test settings: planning may validate a query, and would
    # otherwise start the process's one session with the repository's settings.
    get_spark(TEST_SETTINGS)
    config = RepoConfig.load(root)
    plan = make_plan(config, PlanRequest())
    assert not plan.has_errors, [str(p) for p in plan.problems]
    context = IngestContext(
        spark=lambda: get_spark(TEST_SETTINGS),
        base_dir=root,
        env=env or {},
        system_time=system_time,
        fetch_uncacheable=fetch_uncacheable,
    )
    return apply_plan(
        OdfRepository(config.odf_dir), plan, system_time or T0, context, lineage=lineage
    )


def events(dataset: Dataset) -> list[Any]:
    """The dataset's events, oldest first."""
    return [block.event for _, block in reversed(list(dataset.iter_blocks()))]


def slices(dataset: Dataset) -> list[pa.Table]:
    """Every data slice of the dataset, oldest first, as stored."""
    return [
        pq.read_table(dataset.layout.data_file(e.new_data.physical_hash))
        for e in events(dataset)
        if isinstance(e, AddData | ExecuteTransform) and e.new_data is not None
    ]


def rows(table: pa.Table, *skip: str) -> list[tuple[Any, ...]]:
    """Rows as tuples, without the named columns; timestamps as RFC 3339 strings."""
    names = [n for n in table.column_names if n not in skip]
    out = []
    for record in table.select(names).to_pylist():
        out.append(tuple(_plain(record[n]) for n in names))
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
