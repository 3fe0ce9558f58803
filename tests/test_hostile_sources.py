"""Hostile sources and manifests: nothing outside the repository is read, planned or committed.

Each case is a pull request trying to make the scheduled job ingest a file from the
machine that runs it, through a ``FilesGlob`` path, a ``file:`` URL, a symlink or a
manifest that is not one of the repository's. The harness (``tests/hostile.py``) runs the
real plan and apply on it and checks both refuse it, name the manifest (and line), print
nothing of the secret file beside the repository and write nothing anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile import Hostile, assert_refused

EVIL = "datasets/org.example.evil.yaml"
# The fetch step's path or URL is on line 10 of every manifest below.
FIELD_LINE = 10
OUTSIDE = "resolves outside the repository"
# A source reading another dataset's chain would be a derivative no sandbox or lineage sees.
CHAINS = "resolves into odf/, the chains folder: no source may read it"
CACHE = "resolves into .reconcile-cache/, the reconciler's cache: no source may read it"


def manifest(fetch_kind: str, key: str, value: str) -> str:
    """A root dataset whose polling source fetches ``value``; the value is JSON-quoted, a
    valid YAML double-quoted scalar, so backslashes and percent signs arrive as written."""
    return (
        "kind: DatasetSnapshot\n"
        "version: 1\n"
        "content:\n"
        "  name: org.example.evil\n"
        "  kind: Root\n"
        "  metadata:\n"
        "    - kind: SetPollingSource\n"
        "      fetch:\n"
        f"        kind: {fetch_kind}\n"
        f"        {key}: {json.dumps(value)}\n"
        "      read: {kind: Csv, header: true, schema: ['a BIGINT', 'b STRING']}\n"
        "      merge: {kind: Append}\n"
    )


def glob_case(
    id: str, path: str, expect: str = OUTSIDE, symlinks: dict[str, str] | None = None
) -> Hostile:
    return Hostile(
        id,
        files={EVIL: manifest("FilesGlob", "path", path)},
        expect=expect,
        symlinks=symlinks or {},
        line=FIELD_LINE,
    )


def url_case(
    id: str, url: str, expect: str = OUTSIDE, symlinks: dict[str, str] | None = None
) -> Hostile:
    return Hostile(
        id,
        files={EVIL: manifest("Url", "url", url)},
        expect=expect,
        symlinks=symlinks or {},
        line=FIELD_LINE,
    )


def linked_manifest(id: str, symlinks: dict[str, str], expect: str = OUTSIDE) -> Hostile:
    return Hostile(id, files={}, expect=expect, symlinks=symlinks)


GLOB_CASES = [
    glob_case("glob-chain-slices", "odf/*/data/*", expect=CHAINS),
    glob_case("glob-chain-heads", "./odf/org.example.good/refs/head", expect=CHAINS),
    glob_case("glob-chains-through-parent", "sources/../odf/**", expect=CHAINS),
    glob_case("glob-cache", ".reconcile-cache/**/*", expect=CACHE),
    glob_case(
        "glob-match-symlinked-into-chains",
        "sources/leak/*",
        symlinks={"sources/leak/slice": "../../odf/org.example.good/data/x"},
        expect=f"matches sources/leak/slice, which {CHAINS}",
    ),
    glob_case(
        "glob-folder-symlinked-to-chains",
        "sources/all/*/data/*",
        symlinks={"sources/all": "../odf"},
        expect=CHAINS,
    ),
    glob_case("glob-absolute-secret", "{outside}/secret.csv"),
    glob_case("glob-absolute-wildcard", "{outside}/*.csv"),
    glob_case("glob-etc-host-wildcard", "/etc/host*"),
    glob_case("glob-etc-passwd", "/etc/passwd"),
    glob_case("glob-proc-self-environ", "/proc/self/environ"),
    glob_case("glob-root-wildcard", "/*"),
    glob_case("glob-parent", "../outside/secret.csv"),
    glob_case("glob-parent-wildcard", "../outside/*.csv"),
    glob_case("glob-dot-then-parent", "./../outside/secret.csv"),
    glob_case("glob-sources-then-parents", "sources/../../outside/secret.csv"),
    glob_case("glob-deep-parents-wildcard", "sources/good/../../../outside/*.csv"),
    glob_case(
        "glob-parent-after-wildcard",
        "sources/*/../../../outside/secret.csv",
        expect="has '..' after a wildcard",
    ),
    glob_case(
        "glob-parent-after-double-star",
        "sources/**/../../outside/secret.csv",
        expect="has '..' after a wildcard",
    ),
    glob_case("glob-home", "~/secret.csv", expect="starts with ~, a home folder"),
    glob_case("glob-home-of-root", "~root/.profile", expect="starts with ~, a home folder"),
    glob_case("glob-windows-parent", "..\\outside\\secret.csv", expect="contains a backslash"),
    glob_case(
        "glob-windows-sources-parents",
        "sources\\..\\..\\outside\\*.csv",
        expect="contains a backslash",
    ),
    glob_case(
        "glob-match-symlinked-outside",
        "sources/evil/*.csv",
        symlinks={"sources/evil/a.csv": "{outside}/secret.csv"},
        expect="matches sources/evil/a.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-one-match-of-two-symlinked-outside",
        "sources/good/*.csv",
        symlinks={"sources/good/b.csv": "{outside}/secret.csv"},
        expect="matches sources/good/b.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-match-relative-symlink-outside",
        "sources/rel/*.csv",
        symlinks={"sources/rel/a.csv": "../../../outside/secret.csv"},
        expect="matches sources/rel/a.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-match-symlink-chain-outside",
        "sources/chain/*.csv",
        symlinks={
            "sources/chain/a.csv": "b.link",
            "sources/chain/b.link": "{outside}/secret.csv",
        },
        expect="matches sources/chain/a.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-match-symlink-to-etc-passwd",
        "sources/pw/*.csv",
        symlinks={"sources/pw/passwd.csv": "/etc/passwd"},
        expect="matches sources/pw/passwd.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-sources-folder-symlinked-outside",
        "sources/ext/*.csv",
        symlinks={"sources/ext": "{outside}"},
        expect="FilesGlob path 'sources/ext/*.csv' resolves outside the repository",
    ),
    glob_case(
        "glob-top-folder-symlinked-outside",
        "exports/secret.csv",
        symlinks={"exports": "{outside}"},
        expect="FilesGlob path 'exports/secret.csv' resolves outside the repository",
    ),
    glob_case(
        # (`**` never descends into a symlinked folder: test_confinement.py)
        "glob-star-through-folder-symlinked-outside",
        "sources/*/ext/*.csv",
        symlinks={"sources/deep/ext": "../../../outside"},
        expect="matches sources/deep/ext/secret.csv, which resolves outside the repository",
    ),
    glob_case(
        "glob-symlink-then-parent",
        "sources/up/../outside/secret.csv",
        symlinks={"sources/up": ".."},
        expect="FilesGlob path 'sources/up/../outside/secret.csv' resolves outside",
    ),
    glob_case(
        "glob-match-symlink-loop",
        "sources/loop/*.csv",
        symlinks={"sources/loop/a.csv": "a.csv"},
        expect="matches sources/loop/a.csv, which leads into a symlink loop",
    ),
    glob_case(
        "glob-folder-symlink-loop",
        "sources/spin/*.csv",
        symlinks={"sources/spin": "spin"},
        expect="leads into a symlink loop",
    ),
    glob_case(
        "glob-two-symlinks-loop",
        "sources/x/a.csv",
        symlinks={"sources/x": "y", "sources/y": "x"},
        expect="leads into a symlink loop",
    ),
]

URL_CASES = [
    url_case("url-file-chain-head", "file:odf/org.example.good/refs/head", expect=CHAINS),
    url_case(
        "url-file-symlink-into-chains",
        "file:sources/head",
        symlinks={"sources/head": "../odf/org.example.good/refs/head"},
        expect=CHAINS,
    ),
    url_case("url-file-absolute", "file://{outside}/secret.csv"),
    url_case("url-file-single-slash", "file:{outside}/secret.csv"),
    url_case("url-file-localhost", "file://localhost{outside}/secret.csv"),
    url_case("url-file-upper-case-scheme", "FILE://{outside}/secret.csv"),
    url_case("url-file-etc-passwd", "file:///etc/passwd"),
    url_case("url-file-proc-self-environ", "file:///proc/self/environ"),
    url_case("url-file-parent", "file:../outside/secret.csv"),
    url_case("url-file-sources-then-parents", "file:sources/../../outside/secret.csv"),
    url_case("url-file-percent-encoded-parent", "file:%2E%2E/outside/secret.csv"),
    url_case("url-file-percent-encoded-slashes", "file:%2e%2e%2Foutside%2Fsecret.csv"),
    url_case("url-file-home", "file:~/secret.csv", expect="starts with ~, a home folder"),
    url_case(
        "url-file-percent-encoded-backslash",
        "file:..%5Coutside%5Csecret.csv",
        expect="contains a backslash",
    ),
    url_case(
        "url-file-percent-encoded-nul",
        "file:sources/good/a.csv%00/../../../outside/secret.csv",
        expect="contains a NUL character",
    ),
    url_case("url-file-other-host", "file://example.org/etc/passwd", expect="take no host"),
    url_case(
        "url-file-symlink-outside",
        "file:sources/link.csv",
        symlinks={"sources/link.csv": "{outside}/secret.csv"},
    ),
    url_case(
        "url-file-symlink-loop",
        "file:sources/spin.csv",
        symlinks={"sources/spin.csv": "spin.csv"},
        expect="leads into a symlink loop",
    ),
]

MANIFEST_CASES = [
    linked_manifest(
        "manifest-symlinked-outside", {"datasets/evil.yaml": "{outside}/manifest.yaml"}
    ),
    linked_manifest(
        "manifest-relative-symlink-outside",
        {"datasets/evil.yaml": "../../outside/manifest.yaml"},
    ),
    linked_manifest("manifest-symlinked-to-etc-passwd", {"datasets/passwd.yml": "/etc/passwd"}),
    linked_manifest(
        "manifest-symlinked-to-proc-self-environ",
        {"datasets/environ.yaml": "/proc/self/environ"},
    ),
    linked_manifest(
        "manifest-dangling-symlink-outside", {"datasets/gone.yaml": "{outside}/nothing.yaml"}
    ),
    linked_manifest("manifest-symlink-loop", {"datasets/spin.yaml": "spin.yaml"}, "symlink loop"),
    linked_manifest("datasets-folder-symlinked-outside", {"datasets/ext": "{outside}"}),
    linked_manifest("datasets-nested-folder-symlinked-outside", {"datasets/team/ext": "{outside}"}),
    linked_manifest("datasets-folder-symlinked-to-parents", {"datasets/parent": "../.."}),
    linked_manifest("datasets-folder-symlink-loop", {"datasets/spin": "spin"}, "symlink loop"),
    linked_manifest(
        "datasets-folder-symlink-to-itself", {"datasets/again": "."}, "the folder contains itself"
    ),
    linked_manifest(
        "datasets-nested-folder-symlink-to-ancestor",
        {"datasets/team/up": ".."},
        "the folder contains itself",
    ),
    Hostile(
        "manifest-symlinked-out-of-datasets-inside-repository",
        files={"notes/org.example.evil.yaml": manifest("FilesGlob", "path", "sources/good/*")},
        symlinks={"datasets/evil.yaml": "../notes/org.example.evil.yaml"},
        file="datasets/evil.yaml",
        expect="symlink leads out of the datasets folder",
    ),
]

CASES = [*GLOB_CASES, *URL_CASES, *MANIFEST_CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_source_is_refused_by_plan_and_apply_without_reading_it(
    tmp_path: Path, case: Hostile
) -> None:
    assert_refused(tmp_path, case)


def test_the_corpus_has_at_least_forty_distinct_cases() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 40
