"""Promises of the template limits that the mutation run of the `templates` group found unpinned
(docs/testing.md, "Mutation testing"; docs/flows.md, "Limits of templates"): each test fails when the
line that keeps its promise is changed. Boundaries are exact: a value at the limit is made, one past it
is refused, and the refusal names what was too big. Small limits (100 characters, 10 items, 50 steps)
make each boundary one character or item wide."""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jinja2 import nodes

from engine.templates.limits import (
    CEILING,
    DEFAULT,
    INT64_MIN,
    UINT64_MAX,
    Budget,
    LimitExceeded,
    TemplateLimits,
    set_limits,
    using_limits,
)
from engine.templates.render import (
    TemplateError,
    TemplateLimitError,
    constant_problem,
    evaluate,
    parse,
    render,
    render_text,
)

SMALL = TemplateLimits(
    max_string=100, max_items=10, max_int_bits=64, max_iterations=50, timeout=5.0
)
STRING = "exceeds the 100-character limit (limits.template_max_string in blockyard.yaml)"
BITS = "exceeds the 64-bit limit (limits.template_max_int_bits in blockyard.yaml)"
ITERATIONS = "template does more than {:,} loop iterations and calls (limits.template_max_iterations in blockyard.yaml)"
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def small() -> Iterator[None]:
    with using_limits(SMALL):
        yield


def refused(source: str, scope: dict[str, Any] | None = None) -> str:
    with pytest.raises(TemplateLimitError, match=r"limit|iterations") as caught:
        render(source, scope or {})
    return str(caught.value)


def outcome(source: str, scope: dict[str, Any]) -> tuple[str, Any]:
    """The value a template gives, or the message it fails with (the expression itself left out)."""
    try:
        return ("value", render(source, scope))
    except TemplateError as exc:
        return ("error", str(exc).replace(source.strip("{} "), "..."))


# ---- what a refusal names -------------------------------------------------------------------------


@pytest.mark.usefixtures("small")
def test_an_indent_wider_than_the_limit_is_refused_as_the_indent() -> None:
    assert render("{{ ''|indent(100, true) }}", {}) == " " * 100
    assert refused("{{ ''|indent(101, true) }}") == f"indent {STRING}"
    assert refused("{{ ''|indent(width=10**9) }}") == f"indent {STRING}"
    # an indent of nothing adds nothing
    assert render("{{ t|indent(0, true) }}", {"t": "a" * 100}) == "a" * 100
    # the default indent is 4: 39 characters on 20 lines, each line's 4 counted
    assert refused("{{ t|indent }}", {"t": "a\n" * 19 + "a"}) == f"indented string {STRING}"


@pytest.mark.usefixtures("small")
def test_a_joined_item_too_long_as_text_is_named_before_the_join() -> None:
    assert render("{{ [s]|join }}", {"s": "a" * 100}) == "a" * 100
    assert refused("{{ [s]|join('-') }}", {"s": "a" * 101}) == f"joined item {STRING}"
    # a list's text: ['a…']
    assert refused("{{ ['x', l]|join }}", {"l": ["a" * 99]}) == f"joined item {STRING}"
    # str.join: a separator between two items, none for one or none
    assert render("{{ '-'.join([s]) }}", {"s": "a" * 100}) == "a" * 100
    assert render("{{ '-'.join([]) }}", {}) == ""
    assert refused("{{ '-'.join([s, '']) }}", {"s": "a" * 100}) == f"joined string {STRING}"
    with pytest.raises(TemplateError, match="sequence item 1: expected str instance, int found"):
        render("{{ ''.join([s, 1]) }}", {"s": "a" * 100})  # at the limit: Python's own error


@pytest.mark.usefixtures("small")
def test_an_integer_result_past_the_bits_is_named_result() -> None:
    # sums and differences grow by a bit at most: the result itself is checked
    assert render("{{ x + x }}", {"x": 2**62}) == 2**63
    assert refused("{{ x + x }}", {"x": 2**63}) == f"result {BITS}"
    assert refused("{{ y - x - x }}", {"x": 2**63, "y": 0}) == f"result {BITS}"
    # a product with bits(x) + bits(y) - 1 <= 64 bits may still have one more: computed, then refused
    assert refused("{{ x * y }}", {"x": 2**33 - 1, "y": 2**32 - 1}) == f"result {BITS}"
    # what a filter computes is a template's result: named as an integer result
    assert render("{{ s|sum }}", {"s": [2**62, 2**62]}) == 2**63
    assert refused("{{ s|sum }}", {"s": [2**63, 2**63]}) == f"integer result {BITS}"


@pytest.mark.usefixtures("small")
def test_a_list_a_method_returns_past_the_items_is_named_result() -> None:
    assert render("{{ s.split()|length }}", {"s": "a " * 10}) == 10
    assert refused("{{ s.split() }}", {"s": "a " * 11}) == (
        "result exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"
    )


@pytest.mark.usefixtures("small")
def test_a_block_of_text_past_the_limit_is_refused_as_rendered_text() -> None:
    block = "{% set b %}{{ s }}{{ s }}{% endset %}{{ b|length }}"  # a block's text: joined from its buffer
    assert render(block, {"s": "a" * 50}) == "100"
    assert refused(block, {"s": "a" * 51}) == f"rendered text {STRING}"
    macro = "{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}{{ twice(s)|length }}"
    assert render(macro, {"s": "a" * 50}) == "100"
    assert refused(macro, {"s": "a" * 51}) == f"rendered text {STRING}"


@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "jinja"])
def test_a_list_written_into_text_is_measured_as_a_rendered_value(fast: bool) -> None:
    with pytest.raises(TemplateLimitError, match="limit") as caught:
        render_text("x{{ l }}", {"l": ["a" * 101]}, fast=fast)
    assert str(caught.value) == f"rendered value {STRING}"


@pytest.mark.usefixtures("small")
def test_text_marked_safe_is_measured_as_the_text_it_is() -> None:
    assert render("x{{ s|safe }}", {"s": "a" * 99}) == "x" + "a" * 99
    assert refused("x{{ s|safe }}", {"s": "a" * 101}) == f"rendered text {STRING}"


def test_a_safe_strings_format_reads_attributes_through_the_sandbox() -> None:
    assert render("{{ ('<b>{0.real}</b>'|safe).format(5) }}", {}) == "<b>5</b>"
    with pytest.raises(
        TemplateError, match="access to attribute '__class__' of 'int' object is unsafe"
    ):
        render("{{ ('{0.__class__}'|safe).format(5) }}", {})


def test_format_map_with_more_than_one_argument_says_so() -> None:
    with pytest.raises(
        TemplateError, match=r"format_map\(\) takes exactly one positional argument"
    ):
        render("{{ '{a}'.format_map({'a': 1}, {'b': 2}) }}", {})
    with pytest.raises(
        TemplateError, match=r"format_map\(\) takes exactly one positional argument"
    ):
        render("{{ '{a}'.format_map(a=1) }}", {})
    assert render("{{ '{a}'.format_map({'a': 1}) }}", {}) == "1"


# ---- printf-style and str.format ------------------------------------------------------------------


@pytest.mark.usefixtures("small")
def test_a_precision_given_by_star_is_read_from_its_argument() -> None:
    assert render("{{ '%.*d'|format(90, 5) }}", {}) == "0" * 89 + "5"
    assert refused("{{ '%.*d'|format(101, 5) }}") == f"format width {STRING}"
    assert refused("{{ '%.*d' % (101, 5) }}") == f"format width {STRING}"
    assert refused("{{ '%*.*d' % (3, 101, 5) }}") == f"format width {STRING}"


@pytest.mark.usefixtures("small")
def test_printf_with_too_few_arguments_fails_as_python_says() -> None:
    # a `*` or a field with no argument left to take: Python's error, however long the format (at the limit)
    for source in (
        "{{ ('%.*s' ~ 'x' * 91) % () }}",
        "{{ '%s%*s' % ('a',) }}",
        "{{ '%s%.*f' % ('a',) }}",
    ):
        with pytest.raises(TemplateError, match="not enough arguments for format string"):
            render(source, {})


@pytest.mark.usefixtures("small")
def test_printf_with_a_named_field_and_no_mapping_fails_as_python_says() -> None:
    with pytest.raises(TemplateError, match="format requires a mapping"):
        render("{{ '%(a)s' % ('x',) }}", {})


@pytest.mark.usefixtures("small")
def test_printf_counts_escapes_only_for_r_and_a() -> None:
    assert render("{{ '%X' % x }}", {"x": 2**63}) == "8000000000000000"
    assert render("{{ '%r' % t }}", {"t": "x" * 9}) == "'" + "x" * 9 + "'"
    # up to ten characters each
    assert refused("{{ '%a' % t }}", {"t": "x" * 10}) == f"formatted string {STRING}"


@pytest.mark.usefixtures("small")
def test_printf_past_the_limit_is_refused_before_it_is_built() -> None:
    # each field counts its value and its precision: 120 characters, refused before they are written
    assert refused("{{ '%.60s%.60s' % (t, t) }}", {"t": "x" * 60}) == f"formatted string {STRING}"


@pytest.mark.usefixtures("small")
def test_printf_with_named_fields_measures_each_named_value() -> None:
    # the format's own 11 characters, then each value: 11 + 2 + 87 = 100
    assert render("{{ '%(a)s-%(b)s'|format(a=1, b=t) }}", {"t": "x" * 87}) == "1-" + "x" * 87
    assert (
        refused("{{ '%(a)s-%(b)s'|format(a=1, b=t) }}", {"t": "x" * 88})
        == f"formatted string {STRING}"
    )
    assert refused("{{ '%(b)s' % {'b': t} }}", {"t": "x" * 101}) == f"formatted value {STRING}"


@pytest.mark.usefixtures("small")
def test_str_format_fields_count_what_they_write() -> None:
    # an empty field adds nothing
    assert render("{{ '{}{}'.format(t, '') }}", {"t": "a" * 100}) == "a" * 100
    assert refused("{{ '{}{}'.format(t, 'b') }}", {"t": "a" * 100}) == f"formatted string {STRING}"
    # a list, as text
    assert refused("{{ '{}'.format(l) }}", {"l": ["a" * 101]}) == f"formatted value {STRING}"


@pytest.mark.usefixtures("small")
def test_a_width_of_thousands_of_digits_is_refused_as_a_width_not_a_crash() -> None:
    digits = "9" * 5000  # past the 4,300 digits Python turns into an integer
    assert refused(f"{{{{ '{{:>{digits}}}'.format('a') }}}}") == f"format width {STRING}"
    assert refused(f"{{{{ '%{digits}s' % 'a' }}}}") == f"format width {STRING}"


# ---- arithmetic -------------------------------------------------------------------------------------


@PROPERTY
@given(
    number=st.integers(-(2**70), 2**70),
    boolean=st.booleans(),
    operator=st.sampled_from(["*", "+", "-", "//"]),
    flipped=st.booleans(),
)
@example(number=2**64, boolean=True, operator="*", flipped=False)
@example(number=2**70, boolean=False, operator="*", flipped=True)
@example(number=2**64 - 1, boolean=True, operator="+", flipped=False)
def test_a_boolean_computes_as_the_integer_it_is(
    number: int, boolean: bool, operator: str, flipped: bool
) -> None:
    """true and false are 1 and 0 in arithmetic: a result with one is sized, refused and named as the
    result with the integer is."""
    scope = {"b": boolean, "i": int(boolean), "x": number}
    with_bool, with_int = (
        (f"{{{{ b {operator} x }}}}", f"{{{{ i {operator} x }}}}")
        if flipped
        else (f"{{{{ x {operator} b }}}}", f"{{{{ x {operator} i }}}}")
    )
    assert outcome(with_bool, scope) == outcome(with_int, scope)


def test_arithmetic_with_a_float_is_computed() -> None:
    assert render("{{ 2 * 1.5 }}", {}) == 3.0
    assert render("{{ 1.5 * 2 }}", {}) == 3.0


def test_a_power_is_sized_by_its_exponent_whatever_its_size() -> None:
    assert render("{{ 2 ** 0.5 }}", {}) == 2**0.5  # a fractional exponent: nothing to size
    assert render("{{ 2 ** -1 }}", {}) == 0.5
    # an exponent of more than 64 bits is past every limit, even the largest setting
    with using_limits(replace(DEFAULT, max_int_bits=CEILING.max_int_bits)):
        assert refused("{{ 2 ** x }}", {"x": 2**65}) == (
            "power exceeds the 100000-bit limit (limits.template_max_int_bits in blockyard.yaml)"
        )
        assert refused("{{ 3 ** x }}", {"x": 2**64 - 1}).startswith("power exceeds")
        # never a float overflow
        assert refused("{{ 2 ** x }}", {"x": 2**2000}).startswith("power exceeds")
    # x ** 1 is x: sized as x is, refused before it is computed
    assert refused("{{ x ** 1 }}", {"x": 2**65}) == f"power {BITS}"
    # 4 ** 33 has 67 bits: 33 × 2, refused before it is computed
    assert refused("{{ 4 ** 33 }}") == f"power {BITS}"
    assert render("{{ 4 ** 31 }}", {}) == 4**31


def test_an_integer_too_big_to_store_is_shown_by_its_digits_past_thirty() -> None:
    with using_limits(replace(DEFAULT, max_int_bits=256)):
        with pytest.raises(TemplateLimitError, match="outside the 64-bit integer range") as caught:
            evaluate("10 ** 40", {})
        assert str(caught.value).startswith(
            "template result (an integer of about 41 digits) is outside"
        )
        with pytest.raises(TemplateLimitError, match="outside the 64-bit integer range") as caught:
            evaluate("10 ** 29", {})  # 30 digits: written out
        assert str(caught.value).startswith(f"template result {10**29} is outside")
        with pytest.raises(TemplateLimitError, match="outside the 64-bit integer range") as caught:
            evaluate("10 ** 30", {})  # 31: counted
        assert str(caught.value).startswith(
            "template result (an integer of about 31 digits) is outside"
        )


# ---- methods and filters sized before they run ----------------------------------------------------


@pytest.mark.usefixtures("small")
def test_translate_with_a_list_table_is_sized_before_it_runs() -> None:
    # str.translate indexes any table by code point: a list's entries can be as long as a dict's
    table = [""] * 97 + ["x" * 10]  # 'a' (97) -> ten x
    assert render("{{ ('a' * 10).translate(t) }}", {"t": table}) == "x" * 100
    assert (
        refused("{{ ('a' * 10).translate(t) }}", {"t": [*table[:97], "x" * 11]})
        == f"translated string {STRING}"
    )
    assert (
        refused("{{ ('a' * 10).translate(t) }}", {"t": (*table[:97], "x" * 11)})
        == f"translated string {STRING}"
    )
    # a string table: one character for one
    assert render("{{ 'ab'.translate('xyz') }}", {}) == "ab"
    # a table of code points only: one character for one, so a text at the limit translates
    assert render("{{ t.translate({97: 66}) }}", {"t": "a" * 100}) == "B" * 100
    with pytest.raises(
        TemplateError, match=r"translate\(\) takes exactly one argument \(0 given\)"
    ):
        render("{{ 'abc'.translate() }}", {})  # Python's own error, not one of the check's


def test_center_without_a_width_centers_in_80() -> None:
    with using_limits(replace(SMALL, max_string=80)):
        assert render("{{ 'a'|center }}", {}) == "a".center(80)
    with using_limits(replace(SMALL, max_string=79)):
        assert refused("{{ 'a'|center }}") == (
            "centered string exceeds the 79-character limit (limits.template_max_string in blockyard.yaml)"
        )


@pytest.mark.usefixtures("small")
def test_a_string_method_called_without_its_width_fails_as_python_says() -> None:
    with pytest.raises(TemplateError, match="expected at least 1 argument, got 0"):
        render("{{ 'a'.center() }}", {})


@pytest.mark.usefixtures("small")
def test_replace_with_a_number_writes_the_number() -> None:
    assert render("{{ 'aaa'|replace('a', 5) }}", {}) == "555"


@pytest.mark.usefixtures("small")
def test_wordwrap_without_a_width_wraps_at_79() -> None:
    # 50 characters, one line at the default width: the text and one line break at most
    assert render("{{ s|wordwrap }}", {"s": "word " * 10}) == ("word " * 10).strip()
    # 19 characters at width 10: two lines, one break of 40 (19 + 2 * 40 = 99 at most)
    assert render(
        "{{ s|wordwrap(10, wrapstring=w) }}", {"s": "aaaa bbbb cccc dddd", "w": "-" * 40}
    ) == ("aaaa bbbb" + "-" * 40 + "cccc dddd")


@pytest.mark.usefixtures("small")
def test_a_filter_given_a_value_that_is_not_text_fails_for_that_not_for_a_limit() -> None:
    # the measure of a non-text value is nothing: the filter's own error is what the author needs to see
    with pytest.raises(TemplateError, match="has no attribute 'splitlines'"):
        render("{{ n|wordwrap(10, wrapstring=w) }}", {"n": 5, "w": "x" * 99})
    with pytest.raises(
        TemplateError, match=r"unsupported operand type\(s\) for \+=: 'int' and 'str'"
    ):
        render("{{ n|indent(100) }}", {"n": 5})


def test_lipsum_writes_what_it_is_asked_for() -> None:
    text = render("{{ lipsum(1, false, 2, 6) }}", {})
    assert "<p>" not in text and 2 <= len(text.split()) <= 6


def test_an_evaluation_yielding_more_items_than_the_limit_is_refused() -> None:
    with using_limits(SMALL):
        assert evaluate("s | map('upper')", {"s": ["a"] * 10}) == ["A"] * 10
        with pytest.raises(TemplateLimitError, match="limit") as caught:
            evaluate("s | map('upper')", {"s": ["a"] * 11})
    assert str(caught.value) == (
        "template result exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"
    )


@pytest.mark.usefixtures("small")
def test_sum_of_lists_past_the_items_is_refused_before_it_copies() -> None:
    assert render("{{ s|sum(start=[])|length }}", {"s": [[1] * 5, [1] * 5]}) == 10
    assert refused("{{ s|sum(start=[]) }}", {"s": [[1] * 5, [1] * 6]}) == (
        "sum() exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"
    )


@pytest.mark.usefixtures("small")
def test_sum_of_a_generator_or_of_attributes_is_sized_like_a_list() -> None:
    # select gives a generator and attribute= sums what it looks up: neither may hide the copies
    limit = "sum() exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"
    assert render("{{ (s|select|sum(start=[]))|length }}", {"s": [[1] * 5, [1] * 5]}) == 10
    assert refused("{{ s|select|sum(start=[]) }}", {"s": [[1] * 5, [1] * 6]}) == limit
    rows = [{"xs": [1] * 5}, {"xs": [1] * 6}]
    assert refused("{{ rows|sum(attribute='xs', start=[]) }}", {"rows": rows}) == limit
    assert render("{{ rows|sum(attribute='xs', start=[])|length }}", {"rows": rows[:1]}) == 5
    assert render("{{ rows|sum(attribute='n') }}", {"rows": [{"n": 2}, {"n": 3}]}) == 5
    assert refused("{{ s|select|sum }}", {"s": list(range(1, 12))}) == (
        "summed items exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"
    )


@PROPERTY
@given(lists=st.integers(1, 12), length=st.integers(0, 8))
@example(lists=10, length=10)
@example(lists=1, length=1)
def test_sum_of_lists_costs_a_step_for_each_item_it_copies(lists: int, length: int) -> None:
    """sum(start=[]) copies the total so far at every list: lists × total / 2 whole steps, besides a step
    for each list it goes through and one for each filter (two sums, and the step of their `+`: a cost
    rounded the wrong way shows in their total)."""
    scope = {"s": [[1] * length for _ in range(lists)]}
    cost = 2 * (lists * (lists * length) // 2 + lists + 2) + 1
    source = "{{ s|sum(start=[])|length + s|sum(start=[])|length }}"
    with using_limits(replace(SMALL, max_items=1000, max_iterations=cost)):
        assert render(source, scope) == 2 * lists * length
    with using_limits(replace(SMALL, max_items=1000, max_iterations=cost - 1)):
        assert refused(source, scope) == ITERATIONS.format(cost - 1)


# ---- a value's size as text -----------------------------------------------------------------------


@PROPERTY
@given(st.lists(st.integers(INT64_MIN, UINT64_MAX), min_size=1, max_size=12))
@example([UINT64_MAX] * 3)
@example([INT64_MIN] * 3)
def test_a_list_of_integers_longer_as_text_than_the_limit_is_not_stored(numbers: list[int]) -> None:
    """Integers of every size the run's state holds are never measured shorter than they are written."""
    text = json.dumps(numbers)
    limits = replace(SMALL, max_string=len(text) - 1, max_items=100)
    with using_limits(limits), pytest.raises(TemplateLimitError, match="limit") as caught:
        evaluate("s + []", {"s": numbers})
    assert str(caught.value) == (
        f"template result exceeds the {len(text) - 1:,}-character limit "
        "(limits.template_max_string in blockyard.yaml)"
    )


@PROPERTY
@given(st.lists(st.integers(INT64_MIN, UINT64_MAX), min_size=1, max_size=12))
@example([UINT64_MAX] * 4)
@example([0] * 12)
def test_a_list_of_integers_is_measured_within_two_characters_an_item_of_its_text(
    numbers: list[int],
) -> None:
    """The measure is an estimate, never far above the text: what fits is not refused for being guessed long."""
    text = json.dumps(numbers)
    with using_limits(replace(SMALL, max_string=len(text) + 2 * len(numbers) + 2, max_items=100)):
        assert evaluate("s + []", {"s": numbers}) == numbers


@PROPERTY
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=30), min_size=1, max_size=6))
def test_an_object_is_at_least_as_long_as_its_keys_and_values(pairs: dict[str, str]) -> None:
    chars = sum(len(key) + len(value) for key, value in pairs.items())
    with (
        using_limits(replace(SMALL, max_string=max(chars - 1, 0))),
        pytest.raises(TemplateLimitError, match="limit") as caught,
    ):
        evaluate("dict(d)", {"d": pairs})
    assert str(caught.value).startswith("template result exceeds the")


def test_shared_parts_are_measured_once_however_often_they_are_written() -> None:
    # a thousand references to a thousand references to one list: measured in milliseconds, not by
    # walking its 10^9 written items (which, up to the largest string limit, takes half a minute)
    began = time.monotonic()
    with using_limits(CEILING), pytest.raises(TemplateLimitError, match="limit") as caught:
        evaluate("[[[0] * 1000] * 1000] * 1000", {})
    assert time.monotonic() - began < 5.0, "shared parts measured again at every occurrence"
    assert str(caught.value) == (
        "template result exceeds the 100,000,000-character limit "
        "(limits.template_max_string in blockyard.yaml)"
    )


# ---- Jinja's own forms, kept ------------------------------------------------------------------------


def test_a_call_block_passes_its_body_as_caller() -> None:
    assert (
        render("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}x{% endcall %}", {})
        == "[x]"
    )


def test_a_recursive_loop_takes_one_list_as_in_jinja() -> None:
    assert (
        render(
            "{% for x in [[1, [2]]] recursive %}{{ x if x is number else loop(x) }}{% endfor %}", {}
        )
        == "12"
    )
    with pytest.raises(TemplateError, match="takes 2 positional arguments but 3 were given"):
        render("{% for x in [1] recursive %}{{ loop([], 5) }}{% endfor %}", {})


# ---- validate's check of constant expressions --------------------------------------------------------


@PROPERTY
@given(left=st.integers(49_990, 50_010), right=st.integers(49_990, 50_010))
@example(left=50_000, right=50_001)
@example(left=50_001, right=50_001)
def test_a_constant_product_always_fails_only_past_the_largest_setting(
    left: int, right: int
) -> None:
    """BY411 says a product always fails only when no `template_max_int_bits` (at most 100,000) allows it:
    powers of two of `left` and `right` bits make a product of exactly left + right - 1 bits."""
    tree = parse(f"{hex(1 << (left - 1))} * {hex(1 << (right - 1))}", expression=True)
    product = tree.find(nodes.Mul)
    assert product is not None
    problem = constant_problem(product)
    if left + right - 1 > CEILING.max_int_bits:
        assert problem == (
            "this expression always fails: its product is larger than any "
            "limits.template_max_int_bits allows"
        )
    else:
        assert problem is None


# ---- where the limits come from, and what a refusal carries -----------------------------------------


def test_limits_set_in_a_tasks_context_hold_there_and_nowhere_else() -> None:
    def task() -> str:
        set_limits(replace(DEFAULT, max_string=10))  # as a run's graph does, in its own task
        assert render("{{ 'a' * 10 }}", {}) == "a" * 10
        return refused("{{ 'a' * 11 }}")

    message = contextvars.copy_context().run(task)
    assert (
        message
        == "repeated string exceeds the 10-character limit (limits.template_max_string in blockyard.yaml)"
    )
    assert render("{{ 'a' * 11 }}", {}) == "a" * 11  # outside that context: the defaults


@pytest.mark.parametrize(
    ("make", "what", "setting"),
    [
        (
            lambda budget: budget.string(101, "padded string"),
            "padded string",
            "template_max_string",
        ),
        (lambda budget: budget.items(11, "range()"), "range()", "template_max_items"),
        (lambda budget: budget.bits(65, "power"), "power", "template_max_int_bits"),
        (lambda budget: budget.tick(51), "work", "template_max_iterations"),
    ],
    ids=["string", "items", "bits", "work"],
)
def test_a_refusal_carries_what_was_too_big_and_the_setting_that_allows_more(
    make: Any, what: str, setting: str
) -> None:
    """`what` and `setting` are what `blockyard validate` words its BY411 from (engine/templates/render.py)."""
    with pytest.raises(LimitExceeded, match=f"limits.{setting} in blockyard.yaml") as caught:
        make(Budget(SMALL))
    assert (caught.value.what, caught.value.setting) == (what, setting)


def test_a_refusal_for_time_carries_its_setting() -> None:
    budget = Budget(replace(SMALL, max_iterations=1000, timeout=0.0))
    time.sleep(0.01)
    with pytest.raises(
        LimitExceeded, match=r"takes longer than 0s \(limits.template_timeout in blockyard.yaml\)"
    ) as caught:
        budget.tick(256)  # the clock is looked at every 256 steps
    assert (caught.value.what, caught.value.setting) == ("time", "template_timeout")
