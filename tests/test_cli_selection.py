"""``--select``'s graph operators on a dependency graph, without a repository."""

from __future__ import annotations

import pytest

from reconciler.plan.selection import (
    SelectionError,
    Selector,
    parse_selectors,
    select,
    with_inputs,
)

# a -> b -> c, a -> e; d stands alone
GRAPH = {"a": (), "b": ("a",), "c": ("b",), "d": (), "e": ("a",)}


def test_a_name_selects_only_itself() -> None:
    assert select(GRAPH, parse_selectors(["b"])) == {"b"}


def test_a_trailing_plus_adds_everything_downstream() -> None:
    assert select(GRAPH, parse_selectors(["a+"])) == {"a", "b", "c", "e"}


def test_a_leading_plus_adds_everything_upstream() -> None:
    assert select(GRAPH, parse_selectors(["+c"])) == {"a", "b", "c"}


def test_plus_on_both_sides_adds_both_directions() -> None:
    assert select(GRAPH, parse_selectors(["+b+"])) == {"a", "b", "c"}


def test_several_selectors_in_one_value_or_repeated_select_their_union() -> None:
    assert select(GRAPH, parse_selectors(["c d", "e,b"])) == {"b", "c", "d", "e"}


def test_every_unknown_name_is_reported_at_once() -> None:
    with pytest.raises(SelectionError) as e:
        select(GRAPH, parse_selectors(["zz+", "a", "+yy"]))
    assert str(e.value) == "no such dataset: yy, zz"
    assert e.value.names == ("yy", "zz")


def test_an_unknown_name_close_to_a_dataset_is_told_which_it_may_mean() -> None:
    graph = {"org.example.orders": (), "org.example.sales": ("org.example.orders",)}
    with pytest.raises(SelectionError) as e:
        select(graph, parse_selectors(["org.example.order+", "org.example.zz"]))
    assert str(e.value) == (
        "no such dataset: org.example.order (did you mean org.example.orders?), org.example.zz"
    )
    assert e.value.names == ("org.example.order", "org.example.zz")


def test_a_plus_inside_a_name_is_not_a_selector() -> None:
    with pytest.raises(SelectionError) as e:
        parse_selectors(["a+b"])
    assert str(e.value) == "not a selector: 'a+b' (expected name, +name, name+ or +name+)"


def test_parsing_keeps_the_operators() -> None:
    assert parse_selectors(["+x+", "y+"]) == [
        Selector("x", upstream=True, downstream=True),
        Selector("y", downstream=True),
    ]


def test_a_selection_with_its_inputs_is_what_its_plan_analyses() -> None:
    assert with_inputs(GRAPH, {"c", "d"}) == {"a", "b", "c", "d"}
    assert with_inputs(GRAPH, {"e"}) == {"a", "e"}
    assert with_inputs({"x": ("did:odf:unknown",)}, {"x"}) == {"x"}
