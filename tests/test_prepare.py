"""Prepare stage: real gzip and zip files and real commands; exact outputs and messages."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import pytest

from reconciler.config import ConfigError, RepoConfig
from reconciler.ingest.prepare import PrepareError, prepare
from reconciler.odf import models

CSV = b"city;population\nA;1000\nB;2000\n"


def steps(*raw: dict[str, object]) -> list[models.PrepStep]:
    source = models.SetPollingSource.model_validate(
        {
            "fetch": {"kind": "Url", "url": "file:x"},
            "prepare": list(raw),
            "read": {"kind": "Csv"},
            "merge": {"kind": "Append"},
        }
    )
    assert source.prepare is not None
    return source.prepare


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_no_steps_return_the_input_itself(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    assert prepare(None, source, tmp_path / "work") == source
    assert prepare([], source, tmp_path / "work") == source
    assert not (tmp_path / "work").exists()


def test_gzip_is_decompressed_into_a_new_file(tmp_path: Path) -> None:
    source = tmp_path / "in.csv.gz"
    source.write_bytes(gzip.compress(CSV))
    before = snapshot(source)

    result = prepare(steps({"kind": "Decompress", "format": "Gzip"}), source, tmp_path / "work")

    assert result.parent == tmp_path / "work"
    assert result.read_bytes() == CSV
    assert snapshot(source) == before


def test_gzip_with_several_members_is_read_to_the_end(tmp_path: Path) -> None:
    source = tmp_path / "in.csv.gz"
    source.write_bytes(gzip.compress(b"a\n") + gzip.compress(b"b\n"))
    result = prepare(steps({"kind": "decompress", "format": "gzip"}), source, tmp_path / "work")
    assert result.read_bytes() == b"a\nb\n"


def test_invalid_gzip_is_a_prepare_error(tmp_path: Path) -> None:
    source = tmp_path / "in.csv.gz"
    source.write_bytes(CSV)
    with pytest.raises(PrepareError) as e:
        prepare(steps({"kind": "Decompress", "format": "Gzip"}), source, tmp_path / "work")
    assert str(e.value) == (
        "prepare step 1 (Decompress Gzip): in.csv.gz is not a valid gzip file: Not a gzipped file (b'ci')"
    )
    assert list((tmp_path / "work").iterdir()) == []


def test_zip_with_one_member_needs_no_sub_path(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"cities500.txt": CSV})
    before = snapshot(source)
    result = prepare(steps({"kind": "Decompress", "format": "Zip"}), source, tmp_path / "work")
    assert result.read_bytes() == CSV
    assert snapshot(source) == before


def test_zip_directories_and_macos_metadata_do_not_count_as_members(tmp_path: Path) -> None:
    source = make_zip(
        tmp_path / "in.zip",
        {"data/": b"", "data/cities.txt": CSV, "__MACOSX/data/._cities.txt": b"junk"},
    )
    result = prepare(steps({"kind": "Decompress", "format": "Zip"}), source, tmp_path / "work")
    assert result.read_bytes() == CSV


def test_zip_sub_path_names_the_member(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"readme.txt": b"read me", "data/cities.csv": CSV})
    result = prepare(
        steps({"kind": "Decompress", "format": "Zip", "subPath": "data/cities.csv"}),
        source,
        tmp_path / "work",
    )
    assert result.read_bytes() == CSV


def test_zip_sub_path_may_be_a_glob_matching_one_member(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"readme.txt": b"read me", "data/cities-2024.csv": CSV})
    result = prepare(
        steps({"kind": "Decompress", "format": "Zip", "subPath": "*.csv"}),
        source,
        tmp_path / "work",
    )
    assert result.read_bytes() == CSV


def test_zip_with_several_members_and_no_sub_path_lists_them(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"a.csv": b"a", "b.csv": b"b", "c.txt": b"c"})
    with pytest.raises(PrepareError) as e:
        prepare(steps({"kind": "Decompress", "format": "Zip"}), source, tmp_path / "work")
    assert str(e.value) == (
        "prepare step 1 (Decompress Zip): in.zip contains several files (a.csv, b.csv, c.txt); "
        "set subPath to the one to read"
    )


def test_zip_sub_path_matching_several_members_is_an_error(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"a.csv": b"a", "b.csv": b"b", "c.txt": b"c"})
    with pytest.raises(PrepareError) as e:
        prepare(
            steps({"kind": "Decompress", "format": "Zip", "subPath": "*.csv"}),
            source,
            tmp_path / "work",
        )
    assert str(e.value) == (
        "prepare step 1 (Decompress Zip): subPath '*.csv' matches several files in in.zip "
        "(a.csv, b.csv); it must match exactly one"
    )


def test_zip_sub_path_matching_nothing_lists_the_members(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"a.csv": b"a", "b.csv": b"b"})
    with pytest.raises(PrepareError) as e:
        prepare(
            steps({"kind": "Decompress", "format": "Zip", "subPath": "cities.csv"}),
            source,
            tmp_path / "work",
        )
    assert str(e.value) == (
        "prepare step 1 (Decompress Zip): no file in in.zip matches subPath 'cities.csv'; it contains a.csv, b.csv"
    )


def test_invalid_zip_is_a_prepare_error(tmp_path: Path) -> None:
    source = tmp_path / "in.zip"
    source.write_bytes(CSV)
    with pytest.raises(PrepareError) as e:
        prepare(steps({"kind": "Decompress", "format": "Zip"}), source, tmp_path / "work")
    assert (
        str(e.value)
        == "prepare step 1 (Decompress Zip): in.zip is not a valid zip archive: File is not a zip file"
    )


def test_pipe_runs_the_command_with_the_file_as_stdin(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    before = snapshot(source)

    result = prepare(
        steps({"kind": "Pipe", "command": ["sed", "-e", "s/;/,/g"]}), source, tmp_path / "work"
    )

    assert result.read_bytes() == b"city,population\nA,1000\nB,2000\n"
    assert snapshot(source) == before


def test_steps_chain_and_intermediate_files_are_removed(tmp_path: Path) -> None:
    source = make_zip(tmp_path / "in.zip", {"inner.csv.gz": gzip.compress(CSV)})
    result = prepare(
        steps(
            {"kind": "Decompress", "format": "Zip"},
            {"kind": "Decompress", "format": "Gzip"},
            {"kind": "Pipe", "command": ["tr", ";", ","]},
            {"kind": "Pipe", "command": ["tr", "a-z", "A-Z"]},
        ),
        source,
        tmp_path / "work",
    )
    assert result.read_bytes() == b"CITY,POPULATION\nA,1000\nB,2000\n"
    assert list((tmp_path / "work").iterdir()) == [result]
    assert result.name.startswith("prepare-4-")


def test_failing_pipe_reports_command_exit_code_and_stderr(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    command = ["sh", "-c", "echo boom >&2; exit 3"]
    with pytest.raises(PrepareError) as e:
        prepare(
            steps({"kind": "Pipe", "command": ["cat"]}, {"kind": "Pipe", "command": command}),
            source,
            tmp_path / "work",
        )
    assert (
        str(e.value)
        == "prepare step 2 (Pipe): sh -c 'echo boom >&2; exit 3' exited with code 3; stderr:\nboom"
    )
    assert (e.value.step, e.value.exit_code, e.value.stderr) == (2, 3, "boom")
    assert list((tmp_path / "work").iterdir()) == []  # neither step 1's output nor step 2's


def test_failing_pipe_keeps_only_the_last_lines_of_stderr(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    command = ["sh", "-c", "for i in $(seq 1 30); do echo line $i >&2; done; exit 1"]
    with pytest.raises(PrepareError) as e:
        prepare(steps({"kind": "Pipe", "command": command}), source, tmp_path / "work")
    assert e.value.stderr == "\n".join(f"line {i}" for i in range(11, 31))


def test_missing_command_is_a_prepare_error(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    with pytest.raises(PrepareError) as e:
        prepare(
            steps({"kind": "Pipe", "command": ["no-such-command-xyz", "-v"]}),
            source,
            tmp_path / "work",
        )
    assert str(e.value) == "prepare step 1 (Pipe): command not found: no-such-command-xyz"


def test_empty_pipe_command_is_a_prepare_error(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(CSV)
    with pytest.raises(PrepareError) as e:
        prepare(steps({"kind": "Pipe", "command": []}), source, tmp_path / "work")
    assert str(e.value) == "prepare step 1 (Pipe): the command is empty"


BOMB_LIMIT = 2**20  # 1 MiB, for the test; the setting's default is 10 GiB


@pytest.mark.parametrize("kind", ["gzip-in-gzip", "zip"])
def test_a_decompression_bomb_stops_at_the_limit_and_leaves_no_file(
    tmp_path: Path, kind: str
) -> None:
    """A few hundred bytes of nested gzip expanded to any size: a pull request adding one
    made the scheduled run unpack it until the runner's disk was full."""
    zeros = bytes(8 * 2**20)
    if kind == "zip":
        source = make_zip(tmp_path / "in.zip", {"data.csv": zeros})
        raw = [{"kind": "Decompress", "format": "Zip"}]
        label = "prepare step 1 (Decompress Zip)"
    else:
        source = tmp_path / "in.csv.gz.gz"
        source.write_bytes(gzip.compress(gzip.compress(zeros)))
        raw = [{"kind": "Decompress", "format": "Gzip"}] * 2
        label = "prepare step 2 (Decompress Gzip)"
    assert source.stat().st_size < 20_000
    work = tmp_path / "work"
    with pytest.raises(PrepareError) as refused:
        prepare(steps(*raw), source, work, BOMB_LIMIT)
    assert str(refused.value) == (
        f"{label}: the file decompresses to more than 1 MiB, the most a prepare step may"
        " write (max_decompressed_size in [tool.reconciler]): a decompression bomb, or a file"
        " that needs the limit raised"
    )
    assert list(work.iterdir()) == []
    exact = tmp_path / "exact.gz"
    exact.write_bytes(gzip.compress(bytes(BOMB_LIMIT)))
    done = prepare(steps({"kind": "Decompress", "format": "Gzip"}), exact, work, BOMB_LIMIT)
    assert done.stat().st_size == BOMB_LIMIT  # the limit itself is allowed


@pytest.mark.parametrize(
    ("value", "size"),
    [(None, 10 * 2**30), ('"512MiB"', 512 * 2**20), ('"2 GiB"', 2 * 2**30), ("4096", 4096)],
)
def test_max_decompressed_size_is_read_from_the_repository_settings(
    tmp_path: Path, value: str | None, size: int
) -> None:
    text = "[tool.reconciler]\n" + (f"max_decompressed_size = {value}\n" if value else "")
    assert RepoConfig.of_pyproject(tmp_path, text, "pyproject.toml").max_decompressed_size == size


@pytest.mark.parametrize("value", ['"10 gigs"', "0", '"0GiB"', "true", '"1.5GiB"'])
def test_a_max_decompressed_size_that_is_not_a_size_is_a_configuration_error(
    tmp_path: Path, value: str
) -> None:
    text = f"[tool.reconciler]\nmax_decompressed_size = {value}\n"
    with pytest.raises(ConfigError) as refused:
        RepoConfig.of_pyproject(tmp_path, text, "pyproject.toml")
    assert str(refused.value).startswith(
        "[tool.reconciler] max_decompressed_size must be a size above 0, in bytes or with a"
        ' unit ("512MiB", "10GiB"), got '
    )
