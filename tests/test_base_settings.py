"""A pull request's plan runs on the base branch's Spark settings, not its own.

Analysing a query starts a JVM with the repository's ``[tool.reconciler.spark]`` conf, and
a conf such as ``spark.driver.extraJavaOptions`` runs code of its author's choosing: a pull
request must not be able to set it for the plan that judges it.
"""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from reconciler.config import RepoConfig
from reconciler.plan.model import Location
from reconciler.planning.compose import PlanRequest, _spark_settings, make_plan
from reconciler.planning.spark_tuning import value_problem

PR_SPARK = """[tool.reconciler.spark]
master = "local[1]"

[tool.reconciler.spark.conf]
"spark.driver.extraJavaOptions" = "-javaagent:/tmp/evil.jar"
"""


def _repo(root: Path, base_pyproject: str | None) -> git.Repo:
    root.mkdir()
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.org")
    (root / "datasets").mkdir()
    (root / "datasets" / "README").write_text("manifests\n")
    if base_pyproject is not None:
        (root / "pyproject.toml").write_text(base_pyproject)
    repo.git.add(A=True)
    repo.index.commit("base")
    repo.git.checkout("-b", "pr")
    (root / "pyproject.toml").write_text(PR_SPARK)
    repo.git.add(A=True)
    repo.index.commit("pr: configure the JVM")
    return repo


def test_a_pull_request_plan_takes_spark_settings_from_the_base_branch(tmp_path: Path) -> None:
    _repo(tmp_path / "repo", '[tool.reconciler.spark]\nmaster = "local[2]"\n')
    config = RepoConfig.load(tmp_path / "repo")
    base = _spark_settings(config, "main")
    assert (base.master, base.conf) == ("local[2]", ())
    own = _spark_settings(config, None)
    assert own.master == "local[1]"
    assert own.conf == (("spark.driver.extraJavaOptions", "-javaagent:/tmp/evil.jar"),)


def test_a_base_without_pyproject_gives_the_default_spark_settings(tmp_path: Path) -> None:
    _repo(tmp_path / "repo", None)
    settings = _spark_settings(RepoConfig.load(tmp_path / "repo"), "main")
    assert (settings.master, settings.conf) == ("local[*]", ())


CODE_CHANGE = (
    "changes in this pull request: outside the tuning settings (partitions, memory, cores,"
    " timeouts) a Spark setting can make the scheduled run load or run code, or send its"
    " data elsewhere, with the runner's credentials. It is a change of code: a maintainer"
    " reviews and merges it as such, since this plan cannot approve it"
)


def test_a_pull_request_changing_spark_settings_that_run_code_fails_its_plan(
    tmp_path: Path,
) -> None:
    """The plan ran nothing of it, but the merge would: the next scheduled run starts
    Spark with the merged settings. Tuning stays free; a removal adds no code."""
    base = (
        "[tool.reconciler]\n\n[tool.reconciler.spark.conf]\n"
        '"spark.sql.shuffle.partitions" = "8"\n"spark.eventLog.enabled" = "true"\n'
    )
    _repo(tmp_path / "repo", base)
    pr = tmp_path / "repo" / "pyproject.toml"
    pr.write_text(
        "[tool.reconciler]\n\n[tool.reconciler.spark]\n"
        'master = "spark://cluster.example.org:7077"\n\n'
        "[tool.reconciler.spark.conf]\n"
        '"spark.sql.shuffle.partitions" = "16"\n'
        '"spark.executor.memory" = "4g"\n'
        '"spark.sql.adaptive.enabled" = "true"\n'
        '"spark.driver.extraJavaOptions" = "-javaagent:sources/agent.jar"\n'
        "spark.plugins = 'org.example.Plugin'\n"
    )
    plan = make_plan(RepoConfig.load(tmp_path / "repo"), PlanRequest(base_ref="main"))
    assert [(p.location, p.field, p.message) for p in plan.problems] == [
        (
            Location(str(pr), 4),
            "tool.reconciler.spark.master",
            f"Spark setting the master URL {CODE_CHANGE}",
        ),
        (
            Location(str(pr), 10),
            "tool.reconciler.spark.conf.spark.driver.extraJavaOptions",
            f"Spark setting spark.driver.extraJavaOptions {CODE_CHANGE}",
        ),
        (
            Location(str(pr), 11),
            "tool.reconciler.spark.conf.spark.plugins",
            f"Spark setting spark.plugins {CODE_CHANGE}",
        ),
    ]
    assert plan.has_errors
    assert make_plan(RepoConfig.load(tmp_path / "repo"), PlanRequest()).problems == ()


def test_tuning_is_named_in_full_and_its_values_are_checked(tmp_path: Path) -> None:
    """``spark.task.cpus = 64`` passed the plan, then no task of any scheduled run could
    be scheduled; ``spark.sql.adaptive.customCostEvaluatorClass`` passed as tuning, though
    it loads a class of the pull request's choosing."""
    _repo(tmp_path / "repo", '[tool.reconciler]\n[tool.reconciler.spark]\nmaster = "local[2]"\n')
    pr = tmp_path / "repo" / "pyproject.toml"
    pr.write_text(
        '[tool.reconciler]\n[tool.reconciler.spark]\nmaster = "local[2]"\n\n'
        "[tool.reconciler.spark.conf]\n"
        '"spark.sql.shuffle.partitions" = 4\n'
        '"spark.executor.memory" = "4 gigs"\n'
        '"spark.task.cpus" = "64"\n'
        '"spark.sql.adaptive.enabled" = "yes"\n'
        '"spark.sql.adaptive.customCostEvaluatorClass" = "org.example.Cost"\n'
        '"spark.memory.fraction" = "0.6"\n'
        '"spark.network.timeout" = "120s"\n'
        '"spark.default.parallelism" = "2147483648"\n'
        '"spark.driver.memory" = "512k"\n'
    )
    plan = make_plan(RepoConfig.load(tmp_path / "repo"), PlanRequest(base_ref="main"))
    stop = ": every scheduled run would stop when it starts Spark"
    conf = "tool.reconciler.spark.conf."
    assert [(p.location, p.field, p.message) for p in plan.problems] == [
        (
            Location(str(pr), 7),
            conf + "spark.executor.memory",
            "Spark setting spark.executor.memory = '4 gigs' is not a memory size of at least"
            " 450m (a unit: 512m, 4g)" + stop,
        ),
        (
            Location(str(pr), 9),
            conf + "spark.sql.adaptive.enabled",
            "Spark setting spark.sql.adaptive.enabled = 'yes' is not true or false" + stop,
        ),
        (
            Location(str(pr), 10),
            conf + "spark.sql.adaptive.customCostEvaluatorClass",
            f"Spark setting spark.sql.adaptive.customCostEvaluatorClass {CODE_CHANGE}",
        ),
        (
            Location(str(pr), 13),
            conf + "spark.default.parallelism",
            "Spark setting spark.default.parallelism = '2147483648' is not a whole number from"
            " 1 to 100000" + stop,
        ),
        (
            Location(str(pr), 14),
            conf + "spark.driver.memory",
            "Spark setting spark.driver.memory = '512k' is not a memory size of at least 450m"
            " (a unit: 512m, 4g)" + stop,
        ),
        (
            Location(str(pr), 8),
            conf + "spark.task.cpus",
            "Spark setting spark.task.cpus = '64' asks more cores for each task than the"
            " master 'local[2]' has (2): no task could run",
        ),
    ]
    fixed = pr.read_text().replace('"64"', '"2"').replace("4 gigs", "4g")
    pr.write_text(fixed.replace("2147483648", "8").replace("512k", "1g"))
    fitting = make_plan(RepoConfig.load(tmp_path / "repo"), PlanRequest(base_ref="main"))
    assert [p.field for p in fitting.problems] == [
        conf + "spark.sql.adaptive.enabled",
        conf + "spark.sql.adaptive.customCostEvaluatorClass",
    ]


@pytest.mark.parametrize(
    ("key", "value", "form"),
    [
        ("spark.network.timeout", "0s", "a duration above the executors' 10s heartbeat and"),
        ("spark.network.timeout", "99999999999999999d", "a duration above the executors'"),
        ("spark.driver.maxResultSize", "1b", "0 (no limit) or a size of at least 1m"),
        ("spark.sql.files.maxPartitionBytes", "0", "a size of at least 1m"),
        ("spark.sql.files.maxPartitionBytes", "1", "a size of at least 1m"),
        ("spark.memory.fraction", "0", "a number from 0.01 to 1"),
        ("spark.memory.fraction", "1e-400", "a number from 0.01 to 1"),
        ("spark.sql.shuffle.partitions", "2147483647", "a whole number from 1 to 100000"),
        ("spark.sql.broadcastTimeout", "0", "a duration above 0 and at most a year"),
    ],
)
def test_tuning_values_that_parse_but_stop_every_run_are_refused(
    key: str, value: str, form: str
) -> None:
    """Each passed the plan and then failed every run (a journey on the wheel): a network
    timeout below the heartbeat, a result size no collect fits, no memory for tasks,
    partitions whose bookkeeping exhausted the heap."""
    problem = value_problem(key, value)
    assert problem is not None
    assert problem.startswith(f"Spark setting {key} = {value!r} is not {form}")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.network.timeout", "120s"),
        ("spark.driver.maxResultSize", "0"),
        ("spark.driver.maxResultSize", "2g"),
        ("spark.sql.broadcastTimeout", "-1"),
        ("spark.locality.wait", "0"),
        ("spark.dynamicAllocation.executorIdleTimeout", "5000us"),
        ("spark.executor.memory", "1024"),
        ("spark.sql.autoBroadcastJoinThreshold", "-1"),
    ],
)
def test_tuning_values_spark_takes_pass(key: str, value: str) -> None:
    assert value_problem(key, value) is None
