"""DesiredState's dependency queries: readers and everything downstream, in plan order."""

from __future__ import annotations

from pathlib import Path

from gitops_repo import derivative_events, manifest, root_events

from reconciler.plan.desired import DesiredState, load_desired


def diamond(folder: Path) -> DesiredState:
    """a feeds b and c, both feed d; e stands alone."""
    texts = {
        "org.example.a": manifest("org.example.a", "Root", root_events()),
        "org.example.e": manifest("org.example.e", "Root", root_events()),
        **{
            name: manifest(name, "Derivative", derivative_events(inputs, "SELECT 1"))
            for name, inputs in [
                ("org.example.d", ["org.example.b", "org.example.c"]),
                ("org.example.c", ["org.example.a"]),
                ("org.example.b", ["org.example.a"]),
            ]
        },
    }
    for name, text in texts.items():
        (folder / f"{name}.yaml").write_text(text)
    return load_desired(sorted(folder.glob("*.yaml")), {})


def test_all_downstream_is_each_datasets_downstream_in_dependency_order(tmp_path: Path) -> None:
    desired = diamond(tmp_path)
    everything = desired.all_downstream()
    assert everything == {name: desired.downstream(name) for name in desired.datasets}
    assert everything["org.example.a"] == ("org.example.b", "org.example.c", "org.example.d")
    assert everything["org.example.b"] == ("org.example.d",)
    assert everything["org.example.d"] == everything["org.example.e"] == ()
