"""Many ``**`` in a ``FilesGlob`` path cost the folders once each, not to the power ``k``.

pathlib's walk restarted the rest of the pattern from every folder each ``**`` reached:
seven of them over 25 nested folders took a plan minutes, and nine would take hours. Each
(folder, pattern part) is now visited once, so these calls simply finishing is the proof;
the matches, and ``glob_would_match``'s judgement of each file, are what they were.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.source_paths import SourceRoots, glob_matches, glob_would_match

DEPTH = 25
FILES = {
    "x.csv": 1,  # in the first nested folder
    "y.csv": 3,
    "z.csv": DEPTH,  # in the deepest one
    "z.txt": DEPTH,
    ".hidden.csv": DEPTH,
}


def nested(root: Path, depth: int) -> Path:
    return root.joinpath("sources", "g", *["a"] * depth)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``sources/g`` holding 25 folders named ``a``, each inside the one before."""
    root = tmp_path / "repo"
    nested(root, DEPTH).mkdir(parents=True)
    for name, depth in FILES.items():
        (nested(root, depth) / name).write_text("a,b\n1,x\n")
    return root


def stars(k: int) -> str:
    return "/".join(["**"] * k)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (f"sources/g/{stars(9)}/*.csv", [(1, "x.csv"), (3, "y.csv"), (DEPTH, "z.csv")]),
        (f"sources/g/{stars(40)}/z.*", [(DEPTH, "z.csv"), (DEPTH, "z.txt")]),
        ("sources/g/**/a/**/a/**/a/**/*.csv", [(3, "y.csv"), (DEPTH, "z.csv")]),
        ("sources/g/**/a/**/a/**/a/**/a/*.csv", [(DEPTH, "z.csv")]),
        ("sources/g/**/*/**/*/**/*/**/*/**/*.txt", [(DEPTH, "z.txt")]),
        ("sources/g/" + "a/**/" * 12 + "*.csv", [(DEPTH, "z.csv")]),
        ("sources/g/" + "a/**/" * 26 + "*.csv", []),
        ("sources/g/**/**/a/**/**/a/**/**/a/**/**/.hidden.csv", [(DEPTH, ".hidden.csv")]),
    ],
)
def test_many_double_stars_match_exactly_the_files_they_should(
    repo: Path, written: str, expected: list[tuple[int, str]]
) -> None:
    wanted = sorted(nested(repo, depth) / name for depth, name in expected)
    assert glob_matches(written, SourceRoots.of(repo), repo) == wanted
    judged = sorted(
        nested(repo, depth) / name
        for name, depth in FILES.items()
        if glob_would_match(written, repo, nested(repo, depth) / name)
    )
    assert judged == wanted


def test_a_last_double_star_gives_every_folder_once(repo: Path) -> None:
    """``**`` at the end gives the folders (``sources/g`` itself among them), each once
    however many ``**`` are written."""
    expected = [nested(repo, depth) for depth in range(DEPTH + 1)]
    assert glob_matches(f"sources/g/{stars(9)}", SourceRoots.of(repo), repo) == expected
    assert glob_matches("sources/g/**/a/**/a/**", SourceRoots.of(repo), repo) == expected[2:]


def test_a_wide_tree_under_many_double_stars(tmp_path: Path) -> None:
    """Folders side by side as well as nested: ten levels of three folders each would be
    thousands of (folder, part) paths per ``**`` for pathlib."""
    root = tmp_path / "repo"
    leaves = [root / "sources" / "g"]
    for _ in range(4):
        leaves = [leaf / name for leaf in leaves for name in ("a", "b", "c")]
    for leaf in leaves:
        leaf.mkdir(parents=True)
        (leaf / "f.csv").write_text("a,b\n1,x\n")
    expected = sorted(leaf / "f.csv" for leaf in leaves if leaf.parts[-4:].count("b") >= 2)
    written = f"sources/g/{stars(6)}/b/{stars(6)}/b/{stars(6)}/*.csv"
    assert glob_matches(written, SourceRoots.of(root), root) == expected
    assert [
        leaf / "f.csv" for leaf in leaves if glob_would_match(written, root, leaf / "f.csv")
    ] == (expected)
