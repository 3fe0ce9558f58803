"""``reconcile verify --integrity --base REF``: only what changed since REF is read.

Each test builds a real git repository holding two root chains (written through the
product's own ``Dataset`` API, no Spark), commits it as the base, changes it, and runs
the real command, in this process (``cli_here``). Damage the base already had is outside
the range: the incremental check does not read it, which the full check (no ``--base``)
proves by failing on the same tree. ``--no-download`` (the full check without
downloading a data store) is tested here for what it leaves alone. The last test pins
the fast reader of data blocks (what makes a full check of a long chain affordable) to
the generic decoding.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from cli_here import reconcile_here

from reconciler.odf import (
    DatasetId,
    Multihash,
    Timestamp,
    block_hash,
    decode_block,
    encode_block,
    models,
)
from reconciler.odf.repository import Dataset, OdfRepository

WEATHER = "org.example.weather"
STOCK = "org.example.stock"
T0 = Timestamp.parse("2026-01-01T00:00:00Z")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def cli(root: Path, *args: str) -> tuple[int, list[str]]:
    """``reconcile -C root verify ARGS`` in this process (``cli_here``): every run here is
    an ``--integrity`` check or a usage error, neither of which starts Spark."""
    done = reconcile_here(["-C", str(root), "verify", *args], spark=False)
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    # the summary line ends in the time verify took, which differs from run to run
    return done.returncode, [re.sub(r" in [\d.]+ s$", " in N s", x) for x in lines]


def create(root: Path, name: str, batches: int) -> Dataset:
    """A root chain: Seed, SetPollingSource, SetDataSchema, then ``batches`` AddData."""
    dataset = OdfRepository(root / "odf").dataset(name)
    seed = models.Seed(dataset_id=DatasetId.generate()[0], dataset_kind=models.DatasetKind.ROOT)
    dataset.create(seed, T0)
    dataset.append_event(
        models.SetPollingSource(
            fetch=models.FetchStepUrl(url="https://example.org/data.csv"),
            read=models.ReadStepCsv(header=True, schema=["t TIMESTAMP", "v BIGINT"]),
            merge=models.MergeStrategyAppend(),
        ),
        T0,
    )
    dataset.append_event(models.SetDataSchema(schema_=b"schema"), T0)
    for _ in range(batches):
        add_batch(dataset)
    return dataset


def add_batch(dataset: Dataset, etag: str = "") -> Multihash:
    """Append an AddData of ten records over a fresh data file; returns its block hash.
    ``etag`` tells apart two batches at the same offsets (two histories of a chain)."""
    state = dataset.state()
    n = state.next_offset
    source = dataset.root.parent / f"incoming-{n}"
    source.write_bytes(b"rows %d..%d" % (n, n + 9))
    physical, size = dataset.add_file(source)
    return dataset.append_event(
        models.AddData(
            prev_offset=state.last_offset,
            new_data=models.DataSlice(
                logical_hash=Multihash.sha3_256(b"logical %d" % n),
                physical_hash=physical,
                offset_interval=models.OffsetInterval(start=n, end=n + 9),
                size=size,
            ),
            new_watermark=Timestamp(1_700_000_000 + n),
            new_source_state=models.SourceState(
                source_name="default", kind="odf/etag", value=f"{n}{etag}"
            ),
        ),
        T0,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository whose base commit holds WEATHER (3 batches) and STOCK (2 batches)."""
    root = tmp_path / "repo"
    (root / "datasets").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.reconciler]\n")
    create(root, WEATHER, 3)
    create(root, STOCK, 2)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def block_file(root: Path, name: str, seq: int) -> Path:
    dataset = OdfRepository(root / "odf").dataset(name)
    hash_ = next(h for h, b in dataset.iter_blocks() if b.sequence_number == seq)
    return dataset.layout.block(hash_)


def head_of(root: Path, name: str) -> str:
    return (root / "odf" / name / "refs" / "head").read_text()


def test_damage_committed_in_the_base_is_not_read_and_only_the_full_check_sees_it(
    root: Path,
) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    base_head = head_of(root, WEATHER)
    add_batch(weather)
    add_batch(weather)
    new_head = head_of(root, WEATHER)
    weather.layout.head_ref.write_text(base_head)
    # The base gets damage of its own: the SetPollingSource of both chains, STOCK's head.
    damaged = [block_file(root, WEATHER, 1), block_file(root, STOCK, 1), block_file(root, STOCK, 4)]
    for path in damaged:
        path.write_bytes(b"garbage")
    git(root, "commit", "-qam", "damage")
    damaged_base = git(root, "rev-parse", "HEAD").strip()
    weather.layout.head_ref.write_text(new_head)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two more batches")

    assert cli(root, "--integrity", "--base", damaged_base) == (
        0,
        [
            f"{WEATHER}: valid (2 blocks)",
            f"checked since {damaged_base}: 2 blocks and 2 files in 1 dataset; "
            "1 dataset unchanged, not read",
            "1 dataset: 1 valid in N s",
        ],
    )
    garbage = block_hash(b"garbage")
    assert cli(root, "--integrity") == (
        1,
        [
            f"{STOCK}: invalid",
            f"  block {damaged[2].name} was changed: its bytes hash to {garbage}",
            f"{WEATHER}: invalid",
            f"  block {damaged[0].name} was changed: its bytes hash to {garbage}",
            "2 datasets: 0 valid, 2 invalid in N s",
        ],
    )


def test_untracked_new_blocks_and_files_are_checked(root: Path) -> None:
    add_batch(OdfRepository(root / "odf").dataset(STOCK))
    assert cli(root, "--integrity", "--base", "HEAD") == (
        0,
        [
            f"{STOCK}: valid (1 block)",
            "checked since HEAD: 1 block and 1 file in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 1 valid in N s",
        ],
    )


def test_a_tampered_new_block_is_caught(root: Path) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    new_head = add_batch(weather)
    path = weather.layout.block(new_head)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    actual = block_hash(bytes(data))
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            f"  block {new_head} was changed: its bytes hash to {actual}",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_new_data_file_with_a_wrong_hash_is_caught(root: Path) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    add_batch(weather)
    event = weather.get_block(weather.head() or "").event
    assert isinstance(event, models.AddData) and event.new_data is not None
    physical = event.new_data.physical_hash
    weather.layout.data_file(physical).write_bytes(b"rows 30..38")  # same size, other bytes
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            f"  block #6: data file bytes do not match physical hash {physical}; "
            "its records cannot be read (ArrowInvalid)",
            "checked since HEAD: 1 block and 1 file in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_an_old_data_file_changed_in_the_range_is_judged_by_the_block_that_names_it(
    root: Path,
) -> None:
    stock = OdfRepository(root / "odf").dataset(STOCK)
    event = stock.get_block(stock.head() or "").event
    assert isinstance(event, models.AddData) and event.new_data is not None
    stock.layout.data_file(event.new_data.physical_hash).unlink()
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{STOCK}: invalid",
            f"  block #4: data file {event.new_data.physical_hash} is missing",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_deleted_old_block_that_the_new_blocks_need_is_caught(root: Path) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    base_head = head_of(root, WEATHER)
    add_batch(weather)
    weather.layout.block(base_head).unlink()
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            f"  block {base_head} is missing",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_new_block_breaking_a_rule_is_judged_against_the_state_at_the_base(root: Path) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    base_head = Multihash(head_of(root, WEATHER))
    block = models.MetadataBlock(  # written past the product's own validation
        system_time=T0,
        prev_block_hash=base_head,
        sequence_number=6,
        event=models.AddData(
            prev_offset=19,
            new_watermark=Timestamp(1_700_000_100),
        ),
    )
    data = encode_block(block)
    weather.layout.block(block_hash(data)).write_bytes(data)
    weather.layout.head_ref.write_text(block_hash(data))
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            "  block #6: prevOffset 19 does not match the chain's last offset 29",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_rewritten_chain_is_refused(root: Path) -> None:
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    base_head = head_of(root, WEATHER)
    earlier = block_file(root, WEATHER, 4).name
    weather.reset_head(Multihash(earlier), Multihash(base_head))
    add_batch(weather, etag="-rewritten")
    new_head = head_of(root, WEATHER)
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            f"  the chain was rewritten: its head at the base, block {base_head}, "
            f"is not an ancestor of its head {new_head}",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_chain_put_back_to_an_older_head_is_told_as_rewritten(root: Path) -> None:
    """A pull request that replaces a chain with an older copy: the base's head block is
    gone with the blocks after the older head. It read as "block … is missing"."""
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    base_head = head_of(root, WEATHER)
    earlier = block_file(root, WEATHER, 4).name
    newer = [weather.layout.block(h) for h, b in weather.iter_blocks() if b.sequence_number > 4]
    weather.reset_head(Multihash(earlier), Multihash(base_head))
    for path in newer:
        path.unlink()
    assert cli(root, "--integrity", "--base", "HEAD") == (
        1,
        [
            f"{WEATHER}: invalid",
            f"  the chain was rewritten: its head at the base, block {base_head}, "
            f"is not an ancestor of its head {earlier}",
            "checked since HEAD: 0 blocks and 0 files in 1 dataset; 1 dataset unchanged, not read",
            "1 dataset: 0 valid, 1 invalid in N s",
        ],
    )


def test_a_dataset_added_in_the_range_is_checked_in_full(root: Path) -> None:
    create(root, "org.example.prices", 1)
    assert cli(root, "--integrity", "--base", "HEAD") == (
        0,
        [
            "org.example.prices: valid (4 blocks)",
            "checked since HEAD: 4 blocks and 1 file in 1 dataset; 2 datasets unchanged, not read",
            "1 dataset: 1 valid in N s",
        ],
    )


def test_nothing_changed_reads_nothing_and_says_so(root: Path) -> None:
    """It ended in ``0 datasets: 0 valid``, as if datasets had been checked."""
    assert cli(root, "--integrity", "--base", "HEAD") == (
        0,
        ["no chain changed since HEAD: no dataset to check"],
    )
    code, (document, line) = cli(root, "--integrity", "--base", "HEAD", "--format", "json")
    summary = json.loads(document)["summary"]
    assert (code, summary["datasets"], summary["line"], line) == (
        0,
        0,
        "no chain changed since HEAD: no dataset to check",
        "no chain changed since HEAD: no dataset to check",
    )


def test_a_change_outside_the_datasets_named_reads_nothing_and_says_so(root: Path) -> None:
    add_batch(OdfRepository(root / "odf").dataset(WEATHER))
    assert cli(root, "--integrity", "--base", "HEAD", STOCK) == (
        0,
        ["no chosen dataset's chain changed since HEAD: no dataset to check"],
    )


def test_an_unknown_base_ref_is_an_error(root: Path) -> None:
    code, lines = cli(root, "--integrity", "--base", "no-such-ref")
    assert code == 1
    assert lines[0].startswith("error: unknown git ref 'no-such-ref': ")


def test_base_without_integrity_is_a_usage_error(root: Path) -> None:
    code, lines = cli(root, "--base", "HEAD")
    assert code == 64
    assert lines[-1] == "Error: --base checks what changed since a ref: it needs --integrity"


def test_no_download_still_hashes_the_files_in_git(root: Path) -> None:
    """``--no-download`` spares a data store outside git (``test_data_store.py``); the
    default store's files, in the dataset folders, are read where they are: hashed."""
    weather = OdfRepository(root / "odf").dataset(WEATHER)
    newest = next(  # blocks come newest first
        b.event.new_data.physical_hash
        for _, b in weather.iter_blocks()
        if isinstance(b.event, models.AddData) and b.event.new_data is not None
    )
    flipped = weather.layout.data / newest
    flipped.write_bytes(flipped.read_bytes()[::-1])
    expected = (
        1,
        [
            f"{STOCK}: valid (5 blocks)",
            f"{WEATHER}: invalid",
            f"  block #5: data file bytes do not match physical hash {newest};"
            " its records cannot be read (ArrowInvalid)",
            "2 datasets: 1 valid, 1 invalid in N s",
        ],
    )
    assert cli(root, "--integrity", "--no-download") == expected
    assert cli(root, "--integrity") == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--no-download"],
            "--no-download lightens the --integrity check; a replay reads the data",
        ),
        (
            ["--integrity", "--no-download", "--base", "HEAD"],
            "--no-download lightens the full check; --base reads only changes",
        ),
    ],
)
def test_no_download_goes_with_the_full_integrity_check_only(
    root: Path, args: list[str], message: str
) -> None:
    code, lines = cli(root, *args)
    assert (code, lines[-1]) == (64, f"Error: {message}")


@pytest.mark.parametrize("version", [2, 3])
def test_the_fast_data_block_reader_gives_what_the_generic_mapping_gives(version: int) -> None:
    from odf_reference_decode import reference_decode_content

    from reconciler.odf.fbs.Manifest import Manifest

    ids = [DatasetId.generate()[0] for _ in range(2)]
    events = [
        models.AddData(new_watermark=Timestamp(5, 7)),
        models.AddData(
            prev_checkpoint=Multihash.sha3_256(b"c0"),
            prev_offset=4,
            new_data=models.DataSlice(
                logical_hash=Multihash.sha3_256(b"l0"),
                physical_hash=Multihash.sha3_256(b"p0"),
                offset_interval=models.OffsetInterval(start=5, end=2**40),
                size=123,
            ),
            new_checkpoint=models.Checkpoint(physical_hash=Multihash.sha3_256(b"k0"), size=9),
            new_watermark=Timestamp(-86_400 * 400, 1),
            new_source_state=models.SourceState(source_name="src", kind="odf/etag", value="é"),
        ),
        models.ExecuteTransform(
            query_inputs=[
                models.ExecuteTransformInput(dataset_id=ids[0]),
                models.ExecuteTransformInput(
                    dataset_id=ids[1],
                    prev_block_hash=Multihash.sha3_256(b"a"),
                    new_block_hash=Multihash.sha3_256(b"b"),
                    prev_offset=0,
                    new_offset=9,
                ),
            ],
            prev_checkpoint=Multihash.sha3_256(b"c"),
            prev_offset=0,
            new_data=models.DataSlice(
                logical_hash=Multihash.sha3_256(b"l"),
                physical_hash=Multihash.sha3_256(b"p"),
                offset_interval=models.OffsetInterval(start=0, end=0),
                size=0,
            ),
            new_checkpoint=models.Checkpoint(physical_hash=Multihash.sha3_256(b"k"), size=3),
            new_watermark=Timestamp(1_700_000_000, 999_999_999),
        ),
    ]
    for seq, event in enumerate(events):
        block = models.MetadataBlock(
            system_time=T0,
            prev_block_hash=None if seq == 0 else Multihash.sha3_256(b"x"),
            sequence_number=seq,
            event=event,
        )
        data = encode_block(block, version)
        content = Manifest.GetRootAs(data, 0).ContentAsNumpy().tobytes()
        generic = reference_decode_content(content)
        fast = decode_block(data)
        assert fast == generic == block
        assert fast.model_dump(exclude_unset=True) == generic.model_dump(exclude_unset=True)


def test_a_repository_with_no_chain_yet_says_so(tmp_path: Path) -> None:
    """The first scheduled run of a new repository (``reconcile init``, then the job's
    ``verify``) said ``0 datasets: 0 valid``, as if chains had been checked."""
    (tmp_path / "pyproject.toml").write_text('[tool.reconciler]\nodf_root = "chains"\n')
    (tmp_path / "datasets").mkdir()
    for args in (("--integrity", "--no-download"), ("--integrity",)):
        assert cli(tmp_path, *args) == (0, ["no chain in chains/ yet: nothing to verify"])
