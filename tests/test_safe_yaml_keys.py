"""The duplicate-key check of the bounded YAML loader, on composed documents."""

from __future__ import annotations

from reconciler.odf.safe_yaml import YamlLoader, key_flaws


def test_keys_are_compared_as_values_whatever_their_tag() -> None:
    """A string key is taken as its text, any other as the value it constructs to."""
    loader = YamlLoader('{a: 1, !!str a: 2, "1": 3, 1: 4, 0x1: 5}')
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    assert [(f.column, f.message) for f in key_flaws(node)] == [
        (8, "duplicate key 'a' (first at line 1)"),
        (34, "duplicate key '1' (first at line 1)"),
    ]
