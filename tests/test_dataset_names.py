"""Dataset names by the spec's grammar, and the repository's last check that a name
cannot build a path outside the ODF root."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE_MANIFESTS
from hostile import run

from reconciler.odf.manifest import load_snapshot
from reconciler.odf.multiformat import DatasetId
from reconciler.odf.names import MAX_NAME_BYTES, name_key, name_problem, ref_problem
from reconciler.odf.repository import DatasetPathError, OdfRepository

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "datasets").glob("*.yaml"))
EXPECTED = "expected dot-separated parts of ASCII letters and digits with single inner dashes"

# The spec's own examples of dataset names (Aliases and References).
SPEC_NAMES = [
    "property.parcel-polygons",
    "cities",
    "admin0.countries.10m",
    "census.2016.population",
    "public-safety.ems-incident-dispatch",
    "ny-newyork",
    "NY-NewYork",
    "statcan.gc.ca",
]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_the_spec_examples_are_valid_names(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_bundled_example_datasets_keep_their_names(path: Path) -> None:
    assert load_snapshot(path).name == path.stem


def test_every_kamu_contrib_manifest_name_is_valid() -> None:
    names = [load_snapshot(p).name for p in sorted(FIXTURE_MANIFESTS.glob("*.yaml"))]
    assert len(names) == 20
    assert [n for n in names if name_problem(n) is not None] == []


def test_a_name_of_exactly_255_bytes_is_valid_and_256_is_not() -> None:
    assert name_problem("a" * MAX_NAME_BYTES) is None
    assert name_problem("a" * 256) == (
        "dataset name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'… "
        "(256 characters) is longer than 255 bytes (256)"
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("../x", "'../x'"),
        ("", "''"),
        ("a-", "'a-'"),
        ("a..b", "'a..b'"),
        ("a\nb", "'a\\nb'"),
        ("é", "'é'"),
    ],
)
def test_a_name_outside_the_grammar_says_what_is_expected(name: str, shown: str) -> None:
    assert name_problem(name) == (
        f"{shown} is not a valid dataset name: {EXPECTED} (like org.example.weather)"
    )


def test_names_that_differ_only_in_case_are_one_dataset() -> None:
    assert name_key("ny-newyork") == name_key("NY-NewYork")
    assert name_key("ny-newyork") != name_key("ny-newyork2")


def test_an_input_may_be_a_name_or_a_dataset_id() -> None:
    dataset_id = DatasetId.generate()[0]
    assert ref_problem("org.example.weather") is None
    assert ref_problem(str(dataset_id)) is None
    assert ref_problem("acme/org.example.weather") == (
        "'acme/org.example.weather' is not a dataset reference: expected a dataset name "
        "(dot-separated parts of ASCII letters and digits with single inner dashes) "
        "or a 'did:odf:' id"
    )
    assert ref_problem("did:odf:xyz") == (
        "'did:odf:xyz' is not a valid dataset id: expected 'did:odf:' and the multibase of "
        "an ed25519 public key"
    )


@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped", "..", ".", "", "a/b", "a\\b"])
def test_the_repository_builds_no_path_from_an_invalid_name(tmp_path: Path, name: str) -> None:
    repo = OdfRepository(tmp_path / "odf")
    with pytest.raises(DatasetPathError) as raised:
        repo.dataset(name)
    assert raised.value.name == name
    assert raised.value.reason == name_problem(name)
    assert list(tmp_path.iterdir()) == []


def test_the_repository_refuses_a_dataset_folder_linked_out_of_the_root(tmp_path: Path) -> None:
    (tmp_path / "odf").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "odf" / "org.example.x").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DatasetPathError) as raised:
        OdfRepository(tmp_path / "odf").dataset("org.example.x")
    assert raised.value.reason == LINKED.format(name="org.example.x")


def test_a_link_to_another_folder_of_the_root_is_no_dataset_folder(tmp_path: Path) -> None:
    """Read through, it was that folder's chain under a second name, and a run appended
    to it there."""
    (tmp_path / "odf" / "org.example.real").mkdir(parents=True)
    (tmp_path / "odf" / "org.example.x").symlink_to("org.example.real")
    with pytest.raises(DatasetPathError) as raised:
        OdfRepository(tmp_path / "odf").dataset("org.example.x")
    assert raised.value.reason == LINKED.format(name="org.example.x")


LINKED = (
    "dataset folder '{name}' is a symbolic link: a chain is read and written only in its own"
    " folder, never through a link"
)


def test_chain_folders_with_invalid_names_are_strays_not_datasets(tmp_path: Path) -> None:
    odf = tmp_path / "odf"
    for folder in ["org.example.ok", "bad name", ".hidden", "org.example.link"]:
        if folder != "org.example.link":
            (odf / folder / "refs").mkdir(parents=True)
            (odf / folder / "refs" / "head").write_text("x")
    (odf / "no-chain-here").mkdir()
    (odf / "org.example.link").symlink_to(tmp_path)
    repo = OdfRepository(odf)
    assert repo.names() == ["org.example.ok"]
    assert [(e.name, e.reason) for e in repo.strays()] == [
        (
            ".hidden",
            f"'.hidden' is not a valid dataset name: {EXPECTED} (like org.example.weather)",
        ),
        (
            "bad name",
            f"'bad name' is not a valid dataset name: {EXPECTED} (like org.example.weather)",
        ),
        ("org.example.link", LINKED.format(name="org.example.link")),
    ]


@pytest.mark.parametrize("command", ["log", "verify"])
def test_a_command_given_an_invalid_name_exits_1_without_touching_a_path(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "odf"\n')
    (tmp_path / "datasets").mkdir()
    (tmp_path / "odf").mkdir()
    code, output = run(tmp_path, command, "../../etc")
    assert code == 1
    assert output == (
        f"error: '../../etc' is not a valid dataset name: {EXPECTED} (like org.example.weather)\n"
    )
