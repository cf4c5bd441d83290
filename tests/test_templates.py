from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

import pytest

from engine.spec.config import ConfigSpec
from engine.templates.limits import DEFAULT, TemplateLimits, using_limits
from engine.templates.render import (
    TemplateError,
    TemplateLimitError,
    evaluate,
    parse,
    references,
    render,
)


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
    with pytest.raises(TemplateError, match=r"^cannot evaluate"):
        evaluate(expression, {"x": {}})


def test_references_follow_attribute_chains_and_skip_locals() -> None:
    source = "{{ steps.a.outputs.x }}{% for i in inputs.rows %}{{ i.name }}{% endfor %}{{ context['k'] }}"
    assert references(source) == [
        ("context", "k"),
        ("inputs", "rows"),
        ("steps", "a", "outputs", "x"),
    ]


# ---- limits (docs/flows.md, "Limits of templates") ---------------------------------------------


def _refused(
    source: str, scope: Mapping[str, object] | None = None, *, expression: bool = False
) -> str:
    """The error of a template over a limit; it must come at once, not after computing the value."""
    began = time.monotonic()
    # each caller checks the message it gets back; every limit's message is one of these
    limits = r"exceeds the .* limit|recurses too deeply|loop iterations|takes longer than|64-bit integer range"
    with pytest.raises(TemplateLimitError, match=limits) as caught:
        if expression:
            evaluate(source, scope or {})
        else:
            render(source, scope or {})
    assert time.monotonic() - began < 2.0, "refused only after computing"
    return str(caught.value)


@pytest.mark.parametrize(
    ("source", "limit"),
    [
        (
            "{{ 'a' * 10**8 }}",
            "1,000,000-character limit (limits.template_max_string in blockyard.yaml)",
        ),
        ("{{ 10**8 * 'a' }}", "template_max_string"),
        ("{{ 'a'|center(10**9) }}", "template_max_string"),
        (
            "{{ 'a'|center(1000000000) }}",
            "template_max_string",
        ),  # a constant: Jinja must not fold it while compiling
        ("{{ 'a'.ljust(10**9) }}", "template_max_string"),
        ("{{ 'a'.zfill(10**9) }}", "template_max_string"),
        ("{{ ('\t' * 1000).expandtabs(10**6) }}", "template_max_string"),
        ("{{ ('a' * 1000)|replace('a', 'b' * 10000) }}", "template_max_string"),
        ("{{ ('ab').replace('', 'x' * 1000000) }}", "template_max_string"),
        ("{{ ('x' * 1000).join(['y' * 1000] * 2000) }}", "template_max_string"),
        ("{{ (['y' * 1000] * 2000)|join('x') }}", "template_max_string"),
        ("{{ '%*d' % (10**9, 1) }}", "template_max_string"),
        ("{{ '%0999999999d' % 1 }}", "template_max_string"),
        ("{{ '%.999999999f' % 1.5 }}", "template_max_string"),
        ("{{ ('%s' * 3000) % (('x' * 1000,) * 3000) }}", "template_max_string"),
        ("{{ '%s'|format('x' * 600000) ~ ('x' * 600000) }}", "template_max_string"),
        ("{{ '{:>999999999}'.format(1) }}", "template_max_string"),
        ("{{ '{0}{0}{0}'.format('x' * 400000) }}", "template_max_string"),
        ("{{ 'a\nb'|indent(10**8) }}", "template_max_string"),
        ("{{ ('a ' * 300000)|wordwrap(1, wrapstring='x' * 1000) }}", "template_max_string"),
        ("{{ (1).to_bytes(10**9, 'big') }}", "template_max_string"),
        ("{{ lipsum(10**6) }}", "template_max_string"),
        ("{% set a = 'x' * 600000 %}{{ a ~ a }}", "template_max_string"),
        ("{% set a = 'x' * 600000 %}{{ a }}{{ a }}", "template_max_string"),
        (
            "{% set a = 'x' * 1000000 %}{% set b %}{% for i in range(1000) %}{{ a }}{% endfor "
            "%}{% endset %}{{ b|length }}",
            "template_max_string",
        ),
        ("{% set l = ['a' * 1000000] * 1000 %}{{ l }}", "template_max_string"),
        ("{% set l = ['a' * 1000000] * 1000 %}{{ l|string|length }}", "template_max_string"),
        ("{% set l = ['a' * 1000000] * 1000 %}{{ l|tojson|length }}", "template_max_string"),
        ("{{ ('x'|e).center(10**9) }}", "template_max_string"),  # Markup's methods too
        ("{{ [1] * 10**9 }}", "100,000-item limit (limits.template_max_items in blockyard.yaml)"),
        ("{{ ([[1] * 100000] * 100000)|sum(start=[])|length }}", "template_max_items"),
        ("{{ range(10**9)|length }}", "template_max_items"),
        ("{{ [1]|batch(10**9, 'x')|list }}", "template_max_items"),
        ("{{ [1]|slice(10**9)|list }}", "template_max_items"),
        ("{{ 2 ** 10**9 }}", "64-bit limit (limits.template_max_int_bits in blockyard.yaml)"),
        ("{{ 10 ** (10 ** 9) > 5 }}", "template_max_int_bits"),
        ("{{ (10 ** 18) * (10 ** 18) }}", "template_max_int_bits"),
        ("{{ ('9' * 4000)|int }}", "template_max_int_bits"),
    ],
)
def test_values_over_a_limit_are_refused_before_they_are_built(source: str, limit: str) -> None:
    assert limit in _refused(source)


def test_a_router_expression_with_a_huge_power_fails_at_once() -> None:
    message = _refused("10 ** (10 ** 9) > 5", expression=True)
    assert (
        message == "power exceeds the 64-bit limit (limits.template_max_int_bits in blockyard.yaml)"
    )


def test_shared_parts_are_counted_as_often_as_they_are_written() -> None:
    # 8 ** 4 references to one 1 MB string: tiny in memory, 4 GB as text or in the state store
    source = (
        "{% set a = ['x' * 1000000] %}{% set b = [a, a, a, a, a, a, a, a] %}"
        "{% set c = [b, b, b, b, b, b, b, b] %}{% set d = [c, c, c, c, c, c, c, c] %}"
        "{% set e = [d, d, d, d, d, d, d, d] %}"
    )
    assert "template_max_string" in _refused(source + "{{ e }}")
    assert "template_max_string" in _refused(source + "{{ e|tojson|length }}")
    scope = {"a": ["x" * 1_000_000]}
    assert "template_max_string" in _refused(
        "[[[a, a, a, a], [a, a, a, a]], [[a, a, a, a], [a, a, a, a]]]", scope, expression=True
    )


def test_nested_loops_run_out_of_iterations() -> None:
    message = _refused(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    )
    assert message == (
        "template does more than 1,000,000 loop iterations and calls "
        "(limits.template_max_iterations in blockyard.yaml)"
    )
    # a loop over a filtered or recursive iterable is counted the same way
    assert "template_max_iterations" in _refused(
        "{% for i in range(100000) %}{% for j in range(100000) if j < 0 %}{% endfor %}{% endfor %}"
    )
    # filters count the items they go through
    with using_limits(replace(DEFAULT, max_iterations=200_001)):
        assert "template_max_iterations" in _refused(
            "{% for i in range(100000) %}{{ range(100000)|select('odd')|list|length }}{% endfor %}"
        )


def test_macros_calling_each_other_count_as_work() -> None:
    # no loop at all: 2 ** 40 calls
    source = "".join(
        f"{{% macro m{n}() %}}{{{{ m{n + 1}() }}}}{{{{ m{n + 1}() }}}}{{% endmacro %}}"
        for n in range(40)
    )
    source += "{% macro m40() %}x{% endmacro %}{{ m0()|length }}"
    # a macro call costs microseconds: keep this fast
    with using_limits(replace(DEFAULT, max_iterations=20_000)):
        assert "more than 20,000 loop iterations and calls" in _refused(source)


def test_recursion_without_end_is_a_clear_error() -> None:
    assert "recurses too deeply" in _refused(
        "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(1) }}"
    )
    assert "recurses too deeply" in _refused(
        "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}"
    )


def test_the_deadline_stops_slow_work_the_iteration_count_allows() -> None:
    with using_limits(replace(DEFAULT, timeout=0.2)):
        message = _refused(
            "{% for i in range(100000) %}{{ ('x' * 100000)|replace('x', 'yy')|length }}{% endfor %}"
        )
    assert message == "template takes longer than 0.2s (limits.template_timeout in blockyard.yaml)"


def test_configured_limits_are_honoured() -> None:
    lower = TemplateLimits(
        max_string=100, max_items=10, max_int_bits=64, max_iterations=50, timeout=5.0
    )
    with using_limits(lower):
        assert "100-character limit" in _refused("{{ 'a' * 101 }}")
        assert "10-item limit" in _refused("{{ range(11)|list }}")
        assert "50 loop iterations" in _refused(
            "{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}"
        )
        assert render("{{ 'a' * 100 }}", {}) == "a" * 100
    assert render("{{ 'a' * 101 }}", {}) == "a" * 101  # outside, the defaults again
    higher = replace(DEFAULT, max_int_bits=256)
    with using_limits(higher):
        # big while computing, small as a result
        assert evaluate("(2 ** 100) // (2 ** 90)", {}) == 1024
        message = _refused("2 ** 100", expression=True)
    assert "outside the 64-bit integer range" in message


def test_limits_of_a_config() -> None:
    config = ConfigSpec.model_validate(
        {"limits": {"template_max_string": 10, "template_timeout": "250ms"}}
    )
    limits = TemplateLimits.of(config)
    assert (limits.max_string, limits.max_items, limits.timeout) == (10, 100_000, 0.25)


def test_ordinary_templates_are_not_affected() -> None:
    assert render("{{ '-' * 80 }}", {}) == "-" * 80
    assert render("{{ '%05d|%s|%-4s|' % (42, 'x', 'ab') }}", {}) == "00042|x|ab  |"
    assert render("{{ '{:>5}|{}'.format(1, [1, 2]) }}", {}) == "    1|[1, 2]"
    assert (
        render("{% for i in range(3) %}{{ loop.index }}{% endfor %}{{ [1, 2] ~ 'x' }}", {})
        == "123[1, 2]x"
    )
    assert (
        render(
            "{{ items|join(', ') }} {{ text|center(9) }} {{ text|indent(2, true) }}",
            {"items": [1, 2], "text": "abc"},
        )
        == "1, 2    abc      abc"
    )
    assert evaluate("2 ** 63 + (2 ** 63 - 1)", {}) == 2**64 - 1
    assert evaluate("-(2 ** 63)", {}) == -(2**63)
    assert evaluate("[1, 2] * 3 + [0]", {}) == [1, 2, 1, 2, 1, 2, 0]
    big = "x" * 5_000_000  # data the run already holds passes through whatever its size
    assert (
        evaluate("steps.fetch.outputs.body", {"steps": {"fetch": {"outputs": {"body": big}}}})
        is big
    )
    assert render("{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}{{ twice('ab') }}", {}) == "abab"
    # a lazy result is computed while the evaluation's budget applies
    assert evaluate("items | map('upper')", {"items": ["a", "b"]}) == ["A", "B"]


def test_an_integer_literal_beyond_pythons_digit_limit_is_a_syntax_error_not_a_crash() -> None:
    huge = "1" + "0" * 5000  # Jinja's lexer converts it with int(), which refuses past 4300 digits
    for call in (
        lambda: parse(f"1 + {huge}", expression=True),
        lambda: evaluate(f"1 + {huge}", {}),
        lambda: render(f"{{{{ {huge} }}}}", {}),
    ):
        with pytest.raises(TemplateError, match="an integer literal has too many digits"):
            call()
