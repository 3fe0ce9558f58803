"""Schema evolution that apply carries out: nullable columns added to a root's read schema
or preprocess output, or to a derivative's query output, append a new SetDataSchema with
them at the end before the first data that carries them; older slices read them as null.

Each test builds a real repository, runs ``reconcile`` (plan, then apply) in-process on
the shared Spark session, and reads the chains, slices, ``reconcile sql`` and ``verify``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest_spark import TEST_SETTINGS
from gitops_repo import (
    GitOpsRepo,
    derivative_events,
    events,
    manifest,
    reconcile,
    root_events,
    rows,
    slices,
)
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from reconciler.apply.outcome import Status
from reconciler.cli import app
from reconciler.engine.session import get_spark
from reconciler.inspection.verify import verify_dataset
from reconciler.odf import Timestamp, models
from reconciler.odf.arrow_schema import decode_arrow_schema
from reconciler.odf.integrity import check_integrity
from reconciler.odf.repository import Dataset
from reconciler.plan.model import Action, ChangeClass
from reconciler.planning.compose import PlanRequest, make_plan

pytestmark = pytest.mark.usefixtures("spark")

OBS = "org.example.obs"
ALL = "org.example.obs.all"
WIND = "org.example.obs.wind"
VOCAB = "- kind: SetVocab\n      eventTimeColumn: observed_at"
SCHEMA = "[observed_at TIMESTAMP, station STRING, temp DOUBLE]"
GROWN = "[observed_at TIMESTAMP, station STRING, temp DOUBLE, wind DOUBLE]"
SYSTEM = [
    ("offset", "int64", False),
    ("op", "int32", False),
    ("system_time", "timestamp[ms, tz=UTC]", False),
]
ROOT_COLUMNS = [
    *SYSTEM,
    ("observed_at", "timestamp[ms, tz=UTC]", False),
    ("station", "string", True),
    ("temp", "double", True),
]
DERIVED_COLUMNS = [
    *SYSTEM,
    ("observed_at", "timestamp[ms, tz=UTC]", True),
    ("station", "string", True),
    ("temp", "double", True),
]
WIND_COLUMN = ("wind", "double", True)
STAR = "SELECT * EXCEPT (offset, system_time) FROM `org.example.obs`"
"""Every column of the input but the two a query may not give (op passes through)."""
FILE_1 = "observed_at,station,temp\n2026-01-01T00:00:00Z,a,1.5\n2026-01-01T01:00:00Z,b,2.5\n"
FILE_2 = "observed_at,station,temp,wind\n2026-01-02T00:00:00Z,a,3.5,7.0\n"


def at(day: int) -> Timestamp:
    return Timestamp.parse(f"2026-02-{day:02}T00:00:00Z")


def root(repo: GitOpsRepo, schema: str = SCHEMA, preprocess: str | None = None) -> None:
    events_yaml = root_events(schema=schema, extra=VOCAB)
    if preprocess is not None:
        step = f"      preprocess: {{kind: Sql, engine: spark, query: '{preprocess}'}}\n"
        events_yaml = events_yaml.replace("      merge:", step + "      merge:", 1)
    repo.write(OBS, manifest(OBS, "Root", events_yaml))


def derivative(repo: GitOpsRepo, name: str, query: str) -> None:
    events_yaml = derivative_events([OBS], query) + VOCAB + "\n"
    repo.write(name, manifest(name, "Derivative", events_yaml))


def source(repo: GitOpsRepo, name: str, text: str) -> None:
    folder = repo.root / "sources"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def run(repo: GitOpsRepo, day: int) -> dict[str, Status]:
    repo.commit()
    return {r.dataset: r.status for r in reconcile(repo.root, at(day))}


def dataset(repo: GitOpsRepo, name: str) -> Dataset:
    ds = repo.odf.dataset(name)
    assert check_integrity(ds) == []
    return ds


def kinds(ds: Dataset) -> list[str]:
    return [str(e.kind) for e in events(ds)]


def columns(schema: bytes) -> list[tuple[str, str, bool]]:
    return [(f.name, str(f.type), f.nullable) for f in decode_arrow_schema(schema)]


def schemas(ds: Dataset) -> list[list[tuple[str, str, bool]]]:
    """Every SetDataSchema of the dataset, oldest first, as (name, type, nullable)."""
    return [columns(e.schema_) for e in events(ds) if isinstance(e, models.SetDataSchema)]


def data_rows(ds: Dataset) -> list[list[tuple[Any, ...]]]:
    """Each slice's rows without system_time (the run's clock)."""
    return [rows(t, "system_time") for t in slices(ds)]


def verified(repo: GitOpsRepo, spark: SparkSession, name: str) -> tuple[bool, int, list[str]]:
    """``verify`` of ``name`` with every transform replayed: valid, replays, problems."""
    verdict = verify_dataset(repo.odf, name, repo.odf.names_by_id(), lambda: spark)
    return verdict.valid, verdict.replayed, [str(p) for p in verdict.problems]


def test_a_nullable_column_added_to_a_read_schema_grows_the_root_and_its_select_star_derivative(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    derivative(repo, ALL, STAR)
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED, ALL: Status.CREATED}

    root(repo, schema=GROWN)
    derivative(repo, WIND, "SELECT observed_at, station, wind FROM `org.example.obs`")
    source(repo, "obs-2.csv", FILE_2)
    (change,) = [e for d in repo.plan().datasets if d.name == OBS for e in d.events]
    assert (change.kind, change.change_class, change.reasons) == (
        "SetPollingSource",
        ChangeClass.COMPATIBLE,
        ("adds nullable columns: wind",),
    )
    assert run(repo, 2) == {OBS: Status.UPDATED, ALL: Status.UPDATED, WIND: Status.CREATED}

    obs = dataset(repo, OBS)
    assert kinds(obs)[-5:] == [
        "SetDataSchema",
        "AddData",
        "SetPollingSource",
        "SetDataSchema",
        "AddData",
    ]
    assert schemas(obs) == [ROOT_COLUMNS, [*ROOT_COLUMNS, WIND_COLUMN]]
    assert data_rows(obs) == [
        [(0, 0, "2026-01-01T00:00:00Z", "a", 1.5), (1, 0, "2026-01-01T01:00:00Z", "b", 2.5)],
        [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5, 7.0)],
    ]

    everything = dataset(repo, ALL)
    assert kinds(everything)[-4:] == [
        "SetDataSchema",
        "ExecuteTransform",
        "SetDataSchema",
        "ExecuteTransform",
    ]
    assert schemas(everything) == [DERIVED_COLUMNS, [*DERIVED_COLUMNS, WIND_COLUMN]]
    assert data_rows(everything)[1] == [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5, 7.0)]

    # A derivative that reads both slices in one run sees the older one's wind as null.
    assert data_rows(dataset(repo, WIND)) == [
        [
            (0, 0, "2026-01-01T00:00:00Z", "a", None),
            (1, 0, "2026-01-01T01:00:00Z", "b", None),
            (2, 0, "2026-01-02T00:00:00Z", "a", 7.0),
        ]
    ]

    query = "SELECT offset, station, wind FROM `org.example.obs` ORDER BY offset"
    result = CliRunner().invoke(app, ["-C", str(repo.root), "sql", query, "--format", "csv"])
    assert (result.exit_code, result.stdout) == (0, "offset,station,wind\n0,a,\n1,b,\n2,a,7.0\n")

    assert verified(repo, spark, ALL) == (True, 2, [])
    assert verified(repo, spark, WIND) == (True, 1, [])
    assert run(repo, 3) == {OBS: Status.UP_TO_DATE, ALL: Status.UP_TO_DATE, WIND: Status.UP_TO_DATE}
    assert {d.name: d.action for d in repo.plan().datasets} == {
        OBS: Action.UNCHANGED,
        ALL: Action.UNCHANGED,
        WIND: Action.UNCHANGED,
    }


def test_a_column_inserted_in_the_middle_of_a_read_schema_is_appended_at_the_end(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    derivative(repo, ALL, STAR)
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED, ALL: Status.CREATED}
    root(repo, schema="[observed_at TIMESTAMP, wind DOUBLE, station STRING, temp DOUBLE]")
    (change,) = [e for d in repo.plan().datasets if d.name == OBS for e in d.events]
    assert (change.change_class, change.reasons) == (
        ChangeClass.COMPATIBLE,
        ("adds nullable columns: wind",),
    )
    # The plan shows the columns in the order apply writes them: wind last.
    assert change.schema is not None and change.schema.after is not None
    assert [c.name for c in change.schema.after] == ["observed_at", "station", "temp", "wind"]
    source(repo, "obs-2.csv", "observed_at,wind,station,temp\n2026-01-02T00:00:00Z,7.0,a,3.5\n")
    assert run(repo, 2) == {OBS: Status.UPDATED, ALL: Status.UPDATED}
    source(repo, "obs-3.csv", "observed_at,wind,station,temp\n2026-01-03T00:00:00Z,,b,4.5\n")
    assert run(repo, 3) == {OBS: Status.UPDATED, ALL: Status.UPDATED}
    obs = dataset(repo, OBS)
    assert kinds(obs)[-4:] == ["SetPollingSource", "SetDataSchema", "AddData", "AddData"]
    assert schemas(obs) == [ROOT_COLUMNS, [*ROOT_COLUMNS, WIND_COLUMN]]
    assert data_rows(obs)[1:] == [
        [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5, 7.0)],
        [(3, 0, "2026-01-03T00:00:00Z", "b", 4.5, None)],
    ]
    assert schemas(dataset(repo, ALL)) == [DERIVED_COLUMNS, [*DERIVED_COLUMNS, WIND_COLUMN]]
    assert data_rows(dataset(repo, ALL))[1:] == data_rows(obs)[1:]
    assert verified(repo, spark, ALL) == (True, 3, [])


def test_existing_columns_listed_in_another_order_keep_the_dataset_order(tmp_path: Path) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED}
    root(repo, schema="[observed_at TIMESTAMP, temp DOUBLE, station STRING]")
    source(repo, "obs-2.csv", "observed_at,temp,station\n2026-01-02T00:00:00Z,3.5,a\n")
    (change,) = [e for d in repo.plan().datasets for e in d.events]
    assert (change.change_class, change.reasons) == (
        ChangeClass.COMPATIBLE,
        ("lists columns in another order: the dataset keeps observed_at, station, temp",),
    )
    assert run(repo, 2) == {OBS: Status.UPDATED}
    obs = dataset(repo, OBS)
    assert kinds(obs)[-2:] == ["SetPollingSource", "AddData"]
    assert schemas(obs) == [ROOT_COLUMNS]
    assert data_rows(obs)[1] == [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5)]


def test_the_plan_calls_a_dropped_column_or_a_new_not_null_column_breaking(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED}
    root(repo, schema="[observed_at TIMESTAMP, station STRING, wind DOUBLE NOT NULL]")
    (change,) = [e for d in repo.plan().datasets for e in d.events]
    assert (change.change_class, change.reasons) == (
        ChangeClass.BREAKING,
        ("drops or renames columns: temp", "adds NOT NULL columns: wind"),
    )


def test_a_preprocess_query_that_drops_a_column_fails_the_pull_and_writes_nothing(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo, preprocess="SELECT observed_at, station, temp FROM input")
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED}
    root(repo, preprocess="SELECT observed_at, station, temp > 2 AS warm FROM input")
    source(repo, "obs-2.csv", "observed_at,station,temp\n2026-01-02T00:00:00Z,a,3.5\n")
    repo.commit()
    # The plan compares the new preprocess output with the old one and calls it breaking
    # (the shipped policies then require the override, and the override recreates); this
    # repository has no policies, so apply goes on and the pull refuses the data.
    get_spark(TEST_SETTINGS)
    plan = make_plan(repo.config, PlanRequest())
    (change,) = [e for d in plan.datasets for e in d.events]
    assert (change.change_class, change.reasons[-1]) == (
        ChangeClass.BREAKING,
        "drops or renames columns: temp",
    )
    (result,) = reconcile(repo.root, at(2))
    error = result.message[result.message.index("IncompatibleSchemaError: ") :]
    assert (result.status, error) == (
        Status.FAILED,
        f"IncompatibleSchemaError: {repo.root / 'sources' / 'obs-2.csv'}: the data does not "
        "match the dataset's schema (SetDataSchema): column 'temp' is missing",
    )
    obs = dataset(repo, OBS)
    assert kinds(obs)[-3:] == ["SetDataSchema", "AddData", "SetPollingSource"]
    assert schemas(obs) == [ROOT_COLUMNS]


def test_a_derivative_whose_query_adds_a_nullable_column_appends_a_grown_schema(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    derivative(repo, ALL, "SELECT observed_at, station FROM `org.example.obs`")
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED, ALL: Status.CREATED}

    derivative(repo, ALL, "SELECT observed_at, temp, station FROM `org.example.obs`")
    source(repo, "obs-2.csv", "observed_at,station,temp\n2026-01-02T00:00:00Z,a,3.5\n")
    assert run(repo, 2) == {OBS: Status.UPDATED, ALL: Status.UPDATED}
    ds = dataset(repo, ALL)
    assert kinds(ds)[-5:] == [
        "SetDataSchema",
        "ExecuteTransform",
        "SetTransform",
        "SetDataSchema",
        "ExecuteTransform",
    ]
    before = DERIVED_COLUMNS[:5]
    assert schemas(ds) == [before, [*before, ("temp", "double", True)]]
    assert data_rows(ds) == [
        [(0, 0, "2026-01-01T00:00:00Z", "a"), (1, 0, "2026-01-01T01:00:00Z", "b")],
        [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5)],
    ]
    assert verified(repo, spark, ALL) == (True, 2, [])
    assert run(repo, 3) == {OBS: Status.UP_TO_DATE, ALL: Status.UP_TO_DATE}
    assert {d.name: d.action for d in repo.plan().datasets} == {
        OBS: Action.UNCHANGED,
        ALL: Action.UNCHANGED,
    }


def test_a_preprocess_query_that_adds_a_column_grows_the_root(tmp_path: Path) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo, preprocess="SELECT observed_at, station, temp FROM input")
    source(repo, "obs-1.csv", FILE_1)
    assert run(repo, 1) == {OBS: Status.CREATED}
    root(repo, preprocess="SELECT observed_at, temp * 2 AS double_temp, station, temp FROM input")
    source(repo, "obs-2.csv", "observed_at,station,temp\n2026-01-02T00:00:00Z,a,3.5\n")
    assert run(repo, 2) == {OBS: Status.UPDATED}
    obs = dataset(repo, OBS)
    assert kinds(obs)[-3:] == ["SetPollingSource", "SetDataSchema", "AddData"]
    assert schemas(obs) == [ROOT_COLUMNS, [*ROOT_COLUMNS, ("double_temp", "double", True)]]
    assert data_rows(obs)[1] == [(2, 0, "2026-01-02T00:00:00Z", "a", 3.5, 7.0)]
    assert run(repo, 3) == {OBS: Status.UP_TO_DATE}
    assert {d.name: d.action for d in repo.plan().datasets} == {OBS: Action.UNCHANGED}


def test_a_snapshot_root_that_gains_a_column_corrects_the_rows_that_now_have_a_value(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    events_yaml = root_events(
        schema="[observed_at TIMESTAMP, station STRING]",
        merge="{kind: Snapshot, primaryKey: [station]}",
        extra=VOCAB,
    )
    repo.write(OBS, manifest(OBS, "Root", events_yaml))
    source(
        repo, "obs-1.csv", "observed_at,station\n2026-01-01T00:00:00Z,a\n2026-01-01T00:00:00Z,b\n"
    )
    assert run(repo, 1) == {OBS: Status.CREATED}
    repo.write(
        OBS,
        manifest(
            OBS, "Root", events_yaml.replace("station STRING]", "station STRING, height INT]")
        ),
    )
    source(
        repo,
        "obs-2.csv",
        "observed_at,station,height\n2026-01-01T00:00:00Z,a,12\n2026-01-01T00:00:00Z,b,\n",
    )
    assert run(repo, 2) == {OBS: Status.UPDATED}
    obs = dataset(repo, OBS)
    assert schemas(obs)[-1] == [*ROOT_COLUMNS[:5], ("height", "int32", True)]
    assert data_rows(obs)[1] == [
        (2, 2, "2026-01-01T00:00:00Z", "a", None),
        (3, 3, "2026-01-01T00:00:00Z", "a", 12),
    ]


def test_a_derivative_over_an_input_with_a_schema_but_no_data_records_its_schema(
    tmp_path: Path, spark: SparkSession
) -> None:
    repo = GitOpsRepo.create(tmp_path)
    root(repo)
    derivative(repo, ALL, "SELECT observed_at, station, temp * 2 AS doubled FROM `org.example.obs`")
    source(repo, "obs-1.csv", "observed_at,station,temp\n")
    assert run(repo, 1) == {OBS: Status.CREATED, ALL: Status.CREATED}
    obs, ds = dataset(repo, OBS), dataset(repo, ALL)
    assert kinds(ds)[-2:] == ["SetDataSchema", "ExecuteTransform"]
    assert schemas(ds) == [[*DERIVED_COLUMNS[:5], ("doubled", "double", True)]]
    run_event = events(ds)[-1]
    assert isinstance(run_event, models.ExecuteTransform)
    (used,) = run_event.query_inputs
    assert (used.prev_block_hash, used.new_block_hash, used.prev_offset, used.new_offset) == (
        None,
        obs.head(),
        None,
        None,
    )
    assert (run_event.new_data, run_event.new_watermark) == (None, None)
    assert run_event.new_checkpoint is not None
    assert verified(repo, spark, ALL) == (True, 1, [])

    source(repo, "obs-2.csv", FILE_1)
    assert run(repo, 2) == {OBS: Status.UPDATED, ALL: Status.UPDATED}
    assert kinds(dataset(repo, ALL))[-2:] == ["ExecuteTransform", "ExecuteTransform"]
    assert data_rows(dataset(repo, ALL)) == [
        [(0, 0, "2026-01-01T00:00:00Z", "a", 3.0), (1, 0, "2026-01-01T01:00:00Z", "b", 5.0)]
    ]
