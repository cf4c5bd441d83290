from __future__ import annotations

import pytest

from engine.templates import TemplateError, evaluate, references, render


def test_single_expression_keeps_its_type_and_mixed_text_renders() -> None:
    scope = {"x": 3, "items": [1, 2]}
    assert render("{{ x * 2 }}", scope) == 6
    assert render("{{ items }}", scope) == [1, 2]
    assert render("n={{ x }}", scope) == "n=3"
    assert render({"a": ["{{ x }}", "plain"]}, scope) == {"a": [3, "plain"]}


def test_data_keys_win_over_mapping_methods() -> None:
    # a flow input named `items` must not resolve to dict.items
    assert evaluate("inputs.items", {"inputs": {"items": [1, 2]}}) == [1, 2]
    assert render("{{ context.values }}", {"context": {"values": "v"}}) == "v"
    assert evaluate("context.get('missing', 7)", {"context": {}}) == 7


@pytest.mark.parametrize("expression", ["y", "x.__class__", "().__class__.__mro__", "x.nope"])
def test_unknown_names_and_unsafe_attributes_are_errors(expression: str) -> None:
    with pytest.raises(TemplateError):
        evaluate(expression, {"x": {}})


def test_references_follow_attribute_chains_and_skip_locals() -> None:
    source = "{{ steps.a.outputs.x }}{% for i in inputs.rows %}{{ i.name }}{% endfor %}{{ context['k'] }}"
    assert references(source) == [("context", "k"), ("inputs", "rows"), ("steps", "a", "outputs", "x")]
