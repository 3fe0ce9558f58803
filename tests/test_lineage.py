"""The lineage view, from the manifests and chains of a real repository in a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitops_repo import GitOpsRepo, derivative_events, manifest, root_events

from reconciler.lineage.graph import LineageGraph, LineageNode, lineage_graph, render_lineage
from reconciler.odf.models import DatasetKind

JOIN_SQL = "SELECT a.id, a.v, b.w FROM `example.a` a JOIN `example.b` b ON a.id = b.id"
AGG_SQL = "SELECT id, count(*) AS n FROM `example.join` GROUP BY id"


@pytest.fixture
def repo(tmp_path: Path) -> GitOpsRepo:
    """Two roots, a join of both, an aggregation over the join, and an orphaned chain:
    ``example.old`` was applied (its chain reads ``example.a`` by ``did:odf`` id), then
    its manifest was removed."""
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("example.a", manifest("example.a", "Root", root_events("[id BIGINT, v STRING]")))
    repo.write("example.b", manifest("example.b", "Root", root_events("[id BIGINT, w DOUBLE]")))
    repo.write(
        "example.join",
        manifest(
            "example.join", "Derivative", derivative_events(["example.a", "example.b"], JOIN_SQL)
        ),
    )
    repo.write(
        "example.agg",
        manifest("example.agg", "Derivative", derivative_events(["example.join"], AGG_SQL)),
    )
    repo.write(
        "example.old",
        manifest(
            "example.old",
            "Derivative",
            derivative_events(["example.a"], "SELECT * FROM `example.a`"),
        ),
    )
    repo.commit("datasets")
    repo.apply()
    repo.remove("example.old")
    repo.commit("drop example.old")
    return repo


def test_the_graph_holds_manifests_and_orphaned_chains_with_inputs_by_name(
    repo: GitOpsRepo,
) -> None:
    graph = lineage_graph(repo.config)

    assert graph.problems == ()
    assert dict(graph.nodes) == {
        "example.a": LineageNode("example.a", DatasetKind.ROOT),
        "example.agg": LineageNode("example.agg", DatasetKind.DERIVATIVE, ("example.join",)),
        "example.b": LineageNode("example.b", DatasetKind.ROOT),
        "example.join": LineageNode(
            "example.join", DatasetKind.DERIVATIVE, ("example.a", "example.b")
        ),
        "example.old": LineageNode(
            "example.old", DatasetKind.DERIVATIVE, ("example.a",), orphaned=True
        ),
    }
    old_chain_inputs = repo.odf.dataset("example.old").projection().transform
    assert old_chain_inputs is not None
    assert [i.dataset_ref for i in old_chain_inputs.inputs] == [
        str(repo.odf.dataset("example.a").projection().dataset_id)
    ]


def test_text_is_a_tree_per_dataset_with_its_inputs_under_it(repo: GitOpsRepo) -> None:
    assert render_lineage(lineage_graph(repo.config), "text") == (
        "example.a: Root\n"
        "example.agg: Derivative\n"
        "└── example.join: Derivative\n"
        "    ├── example.a: Root\n"
        "    └── example.b: Root\n"
        "example.b: Root\n"
        "example.join: Derivative\n"
        "├── example.a: Root\n"
        "└── example.b: Root\n"
        "example.old: Derivative (orphaned)\n"
        "└── example.a: Root\n"
    )


def test_mermaid_is_a_left_to_right_flowchart_with_sanitized_ids(repo: GitOpsRepo) -> None:
    assert render_lineage(lineage_graph(repo.config), "mermaid") == (
        "graph LR\n"
        '    example_a["example.a"]:::root\n'
        '    example_agg("example.agg"):::derivative\n'
        '    example_b["example.b"]:::root\n'
        '    example_join("example.join"):::derivative\n'
        '    example_old("example.old (orphaned)"):::derivative\n'
        "    example_a --> example_join\n"
        "    example_a --> example_old\n"
        "    example_b --> example_join\n"
        "    example_join --> example_agg\n"
        "    class example_old orphaned\n"
        "    classDef root fill:#e0f2fe,stroke:#0369a1\n"
        "    classDef derivative fill:#dcfce7,stroke:#15803d\n"
        "    classDef orphaned stroke-dasharray: 5 5\n"
        "    classDef unknown fill:#fee2e2,stroke:#b91c1c\n"
    )


def test_dot_is_a_digraph_with_quoted_names(repo: GitOpsRepo) -> None:
    assert render_lineage(lineage_graph(repo.config), "dot") == (
        "digraph lineage {\n"
        "    rankdir=LR;\n"
        "    node [style=filled];\n"
        '    "example.a" [label="example.a\\nRoot", shape=box, fillcolor="#e0f2fe"];\n'
        '    "example.agg" [label="example.agg\\nDerivative", shape=ellipse, fillcolor="#dcfce7"];\n'
        '    "example.b" [label="example.b\\nRoot", shape=box, fillcolor="#e0f2fe"];\n'
        '    "example.join" [label="example.join\\nDerivative", shape=ellipse, fillcolor="#dcfce7"];\n'
        '    "example.old" [label="example.old\\nDerivative (orphaned)", shape=ellipse, fillcolor="#dcfce7", style="filled,dashed"];\n'
        '    "example.a" -> "example.join";\n'
        '    "example.a" -> "example.old";\n'
        '    "example.b" -> "example.join";\n'
        '    "example.join" -> "example.agg";\n'
        "}\n"
    )


def test_an_input_that_names_no_dataset_is_shown_as_unknown_and_reported(
    tmp_path: Path,
) -> None:
    repo = GitOpsRepo.create(tmp_path / "repo")
    repo.write("example.a", manifest("example.a", "Root", root_events()))
    repo.write(
        "example.join",
        manifest(
            "example.join",
            "Derivative",
            derivative_events(["example.a", "example.missing"], "SELECT 1"),
        ),
    )

    graph = lineage_graph(repo.config)

    assert [p.message for p in graph.problems] == [
        "input 'example.missing' of 'example.join' is not a dataset of this repository"
    ]
    assert render_lineage(graph, "text") == (
        "example.a: Root\nexample.join: Derivative\n├── example.a: Root\n└── example.missing: ???\n"
    )
    assert render_lineage(graph, "mermaid").splitlines()[1:6] == [
        '    example_a["example.a"]:::root',
        '    example_join("example.join"):::derivative',
        '    example_missing["example.missing: ???"]:::unknown',
        "    example_a --> example_join",
        "    example_missing --> example_join",
    ]
    assert render_lineage(graph, "dot").splitlines()[5:8] == [
        '    "example.missing" [label="example.missing\\n???", shape=box, fillcolor="#fee2e2", style="filled,dotted"];',
        '    "example.a" -> "example.join";',
        '    "example.missing" -> "example.join";',
    ]


def test_a_repository_without_datasets_renders_empty_views(tmp_path: Path) -> None:
    graph = lineage_graph(GitOpsRepo.create(tmp_path / "repo").config)

    assert graph == LineageGraph(nodes={})
    assert render_lineage(graph, "text") == ""
    assert render_lineage(graph, "dot") == (
        "digraph lineage {\n    rankdir=LR;\n    node [style=filled];\n}\n"
    )
    assert render_lineage(graph, "mermaid").splitlines()[0] == "graph LR"


def test_mermaid_ids_are_distinct_and_never_a_keyword() -> None:
    graph = LineageGraph(
        nodes={
            "a-b": LineageNode("a-b", DatasetKind.ROOT),
            "a.b": LineageNode("a.b", DatasetKind.ROOT),
            "end": LineageNode("end", DatasetKind.DERIVATIVE, ("a-b", "a.b", "9lives")),
        }
    )

    assert render_lineage(graph, "mermaid").splitlines()[:8] == [
        "graph LR",
        '    a_b["a-b"]:::root',
        '    a_b_2["a.b"]:::root',
        '    ds_end("end"):::derivative',
        '    ds_9lives["9lives: ???"]:::unknown',
        "    ds_9lives --> ds_end",
        "    a_b --> ds_end",
        "    a_b_2 --> ds_end",
    ]


def test_a_cycle_is_cut_where_it_closes() -> None:
    graph = LineageGraph(
        nodes={
            "x": LineageNode("x", DatasetKind.DERIVATIVE, ("y",)),
            "y": LineageNode("y", DatasetKind.DERIVATIVE, ("x",)),
        }
    )

    assert render_lineage(graph, "text") == (
        "x: Derivative\n"
        "└── y: Derivative\n"
        "    └── x: Derivative (cycle)\n"
        "y: Derivative\n"
        "└── x: Derivative\n"
        "    └── y: Derivative (cycle)\n"
    )


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown lineage format 'svg'"):
        render_lineage(LineageGraph(nodes={}), "svg")  # type: ignore[arg-type]
