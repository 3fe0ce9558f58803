"""A setting in ``[tool.reconciler]`` that nothing reads is an error, at its line.

What was seen: ``data_stor = "s3://…"`` (one letter short) planned and applied without a
word, and the data went into git, where the team had meant to keep it out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reconciler.cli import app
from reconciler.config import ConfigError, RepoConfig

KNOWN = (
    "datasets, odf_root, policies, source_roots, data_store, s3, spark, max_decompressed_size,"
    " max_download_size, max_download_seconds"
)


def repo(tmp_path: Path, pyproject: str) -> Path:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        (
            '[project]\nname = "x"\n\n[tool.reconciler]\ndatasets = "datasets"\n'
            'data_stor = "s3://bucket/odf"\n',
            f"{{path}}:6: [tool.reconciler] has no setting 'data_stor' (did you mean"
            f" data_store?); its settings are {KNOWN}",
        ),
        (
            '[tool.reconciler]\n"odf-root" = "chains"\n',
            f"{{path}}:2: [tool.reconciler] has no setting 'odf-root' (did you mean"
            f" odf_root?); its settings are {KNOWN}",
        ),
        (
            "[tool.reconciler]\nlineage = true\n",
            f"{{path}}:2: [tool.reconciler] has no setting 'lineage'; its settings are {KNOWN}",
        ),
        (
            '[tool.reconciler.spark]\nmaster = "local[2]"\nmastr = "local[*]"\n',
            "{path}:3: [tool.reconciler.spark] has no setting 'mastr' (did you mean master?);"
            " its settings are master, app_name, conf, executor_wait",
        ),
        (  # a dotted key has no line of its own to point at
            '[tool]\nreconciler.data_stor = "x"\n',
            f"{{path}}: [tool.reconciler] has no setting 'data_stor' (did you mean"
            f" data_store?); its settings are {KNOWN}",
        ),
    ],
    ids=["misspelt", "quoted", "unknown", "spark", "dotted"],
)
def test_a_setting_nothing_reads_is_an_error_at_its_line(
    tmp_path: Path, pyproject: str, message: str
) -> None:
    root = repo(tmp_path, pyproject)
    expected = message.format(path=root / "pyproject.toml")
    with pytest.raises(ConfigError) as refused:
        RepoConfig.load(root)
    assert str(refused.value) == expected
    result = CliRunner().invoke(app, ["-C", str(root), "plan"])
    assert (result.exit_code, result.output) == (1, f"error: {expected}\n")


def test_every_setting_the_scaffold_shows_is_known(tmp_path: Path) -> None:
    """The scaffold's pyproject.toml, every commented setting switched on, loads."""
    template = Path(__file__).resolve().parents[1] / "reconciler" / "templates" / "pyproject.toml"
    setting = re.compile(r'^# ("?[a-z_.]+"? = \S|\[tool\.)')
    lines = [
        line.removeprefix("# ") if setting.match(line) else line
        for line in template.read_text().splitlines()
    ]
    root = repo(tmp_path, "\n".join(lines) + "\n")
    config = RepoConfig.load(root)
    assert config.data_store == "odf"
    assert dict(config.s3) == {
        "endpoint_url": "https://minio.example.org:9000",
        "region": "eu-central-1",
    }
    assert config.source_roots == (root / "/srv/exports",)
