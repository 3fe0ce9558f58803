"""A real GitOps repository in a temporary folder, for plan and apply tests."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.apply_metadata import apply_metadata
from reconciler.config import RepoConfig
from reconciler.odf import Timestamp
from reconciler.odf.repository import OdfRepository
from reconciler.plan.builder import PlanOptions, QueryValidator, build_plan, read_actual
from reconciler.plan.desired import load_desired
from reconciler.plan.model import Plan

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

    def remove(self, name: str) -> None:
        (self.root / "datasets" / f"{name}.yaml").unlink()

    def commit(self, message: str = "change") -> str:
        repo = git.Repo(self.root)
        repo.git.add(A=True)
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
        plan = self.plan()
        results = apply_metadata(self.odf, plan, system_time)
        assert [r.error for r in results if r.error] == []
        return plan
