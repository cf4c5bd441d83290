"""Each operation that makes a big result from small inputs is refused before it computes it, exactly past
the limit, with the limit it passed named (engine/templates/checks.py, docs/flows.md "Limits of templates"):
string methods, filters, lipsum(), and the steps a filter going through its input costs. Small limits
(100 characters, 10 items, 50 iterations) make each boundary one character or item wide."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from engine.spec.config import ConfigSpec
from engine.templates.limits import TemplateLimits, using_limits
from engine.templates.render import TemplateLimitError, render

LIMITS = TemplateLimits(
    max_string=100, max_items=10, max_int_bits=64, max_iterations=50, timeout=5.0
)
STRING = "exceeds the 100-character limit (limits.template_max_string in blockyard.yaml)"
ITEMS = "exceeds the 10-item limit (limits.template_max_items in blockyard.yaml)"


@pytest.fixture(autouse=True)
def small_limits() -> Iterator[None]:
    with using_limits(LIMITS):
        yield


def refused(source: str, scope: dict[str, Any] | None = None) -> str:
    with pytest.raises(TemplateLimitError, match=r"limit|iterations") as caught:
        render(source, scope or {})
    return str(caught.value)


# (template at the limit, its result's length; the same just past it, the message's head)
STRING_CASES = [
    ("{{ 'a'.center(100) }}", 100, "{{ 'a'.center(101) }}", "padded string"),
    ("{{ 'a'.ljust(100) }}", 100, "{{ 'a'.ljust(101) }}", "padded string"),
    ("{{ 'a'.rjust(100) }}", 100, "{{ 'a'.rjust(101) }}", "padded string"),
    ("{{ '1'.zfill(100) }}", 100, "{{ '1'.zfill(101) }}", "padded string"),
    # sized as the text and every tab at its widest: 20 + 10 * 8 = 100
    ("{{ ('a\t' * 10).expandtabs(8) }}", 80, "{{ ('a\t' * 10).expandtabs(9) }}", "expanded string"),
    (
        "{{ ('a\t' * 10).expandtabs(tabsize=8) }}",
        80,
        "{{ ('a\t' * 10).expandtabs(tabsize=9) }}",
        "expanded string",
    ),
    ("{{ ('a\t' * 10).expandtabs() }}", 80, "{{ ('a\t' * 11).expandtabs() }}", "expanded string"),
    (
        "{{ ('a\t' * 10).encode().expandtabs(8) }}",
        80,
        "{{ ('a\t' * 10).encode().expandtabs(9) }}",
        "expanded string",
    ),
    (
        "{{ '-'.join(['a' * 30, 'b' * 30, 'c' * 38]) }}",
        100,
        "{{ '-'.join(['a' * 30, 'b' * 30, 'c' * 39]) }}",
        "joined string",
    ),
    ("{{ '--'.join(s) }}", 100, "{{ '---'.join(s) }}", "joined string"),
    (
        "{{ 'abcd'.translate({97: 'x' * 25}) }}",
        28,
        "{{ 'abcd'.translate({97: 'x' * 26}) }}",
        "translated string",
    ),
    ("{{ ('a' * 25).encode() }}", 25, "{{ ('a' * 26).encode() }}", "encoded string"),
    ("{{ 'é' * 25 }}", 25, "{{ ('é' * 26).encode() }}", "encoded string"),
    # sized as the text and a line break for every width's worth and every line: 90 + 10 * 1 = 100
    ("{{ s|wordwrap(10) }}", 89, "{{ s|wordwrap(10, wrapstring='--') }}", "wrapped string"),
    ("{{ s|wordwrap(width=10) }}", 89, "{{ s|wordwrap(width=9) }}", "wrapped string"),
    ("{{ '%s'|format(t) }}", 98, "{{ '%s.'|format(t + '..') }}", "formatted string"),
    ("{{ 'a'|center(100) }}", 100, "{{ 'a'|center(101) }}", "centered string"),
    ("{{ 'a'|center(width=100) }}", 100, "{{ 'a'|center(width=101) }}", "centered string"),
    # the text and every line's indent: 8 + (4 + 1) * 18 = 98
    (
        "{{ 'a\na\na\na\n'|indent(18, true) }}",
        80,
        "{{ 'a\na\na\na\n'|indent(19, true) }}",
        "indented string",
    ),
    (
        "{{ 'a\na\na\na\n'|indent(width=18, first=true) }}",
        80,
        "{{ 'a\na\na\na\n'|indent(width=19) }}",
        "indented string",
    ),
    (
        "{{ 'a\na\na\na\n'|indent('x' * 18, true) }}",
        80,
        "{{ 'a\na\na\na\n'|indent('x' * 19) }}",
        "indented string",
    ),
    (
        "{{ ('a\t' * 50).expandtabs(0) }}",
        50,
        "{{ w.expandtabs(0) }}",
        "expanded string",
    ),  # tabs of 0: the text
    ("{{ ['a' * 50, 'b' * 50]|join }}", 100, "{{ ['a' * 50, 'b' * 51]|join }}", "joined string"),
    (
        "{{ ['a' * 33, 'b' * 33, 'c' * 32]|join(d='-') }}",
        100,
        "{{ ['a' * 33, 'b' * 33, 'c' * 33]|join(d='-') }}",
        "joined string",
    ),
    ("{{ '{:>100}'.format('a') }}", 100, "{{ '{:>101}'.format('a') }}", "format width"),
    ("{{ '{}{}'.format(u, u) }}", 100, "{{ '{}{}-'.format(u, u + 'x') }}", "formatted string"),
    ("{{ ('a' * 16)|e }}", 16, "{{ ('a' * 17)|e }}", "filtered text"),
    ("{{ ('a' * 8)|urlencode }}", 8, "{{ ('a' * 9)|urlencode }}", "filtered text"),
]


@pytest.mark.parametrize(
    ("fits", "length", "over", "what"),
    STRING_CASES,
    ids=[f"{case[3]} {case[0]}" for case in STRING_CASES],
)
def test_a_string_is_made_up_to_the_limit_and_refused_past_it(
    fits: str, length: int, over: str, what: str
) -> None:
    scope = {
        "s": ["a" * 24, "b" * 24, "c" * 24, "d" * 22],
        "t": "x" * 98,
        "u": "y" * 50,
        "w": "a\t" * 51,
    }
    if "wordwrap" in fits:
        scope["s"] = "word " * 18  # 90 characters: 9 or 10 lines of width 10 or 9
    made = render(fits, scope)
    assert len(made if isinstance(made, str | bytes) else str(made)) == length
    assert refused(over, scope) == f"{what} {STRING}"


def test_a_replacement_is_sized_by_what_it_replaces_and_with_what() -> None:
    assert render("{{ 'aaaa'.replace('a', 'x' * 24) }}", {}) == "x" * 96
    assert refused("{{ 'aaaa'.replace('a', 'x' * 26) }}") == f"replaced string {STRING}"
    assert refused("{{ 'aaaa'|replace(old='a', new='x' * 26) }}") == f"replaced string {STRING}"
    assert refused("{{ 'aaaa'|replace('a', new='x' * 26) }}") == f"replaced string {STRING}"
    # a count: only that often
    assert render("{{ 'aaaa'.replace('a', 'x' * 30, 3) }}", {}) == "x" * 90 + "a"


def test_str_format_measures_each_field_and_reads_attributes_through_the_sandbox() -> None:
    assert render("{{ '{0.real}-{1}'.format(5, 'x') }}", {}) == "5-x"
    assert refused("{{ '{:>99999999999999999999}'.format('a') }}") == f"format width {STRING}"
    assert refused("{{ '{:>101}'.format('a') }}") == f"format width {STRING}"


def test_the_limits_of_a_config_are_its_limits_section() -> None:
    config = ConfigSpec.model_validate(
        {
            "limits": {
                "template_max_string": 10,
                "template_max_items": 20,
                "template_max_int_bits": 128,
                "template_max_iterations": 40,
                "template_timeout": "2h",
            }
        }
    )
    # a timeout of an hour at most
    assert TemplateLimits.of(config) == TemplateLimits(10, 20, 128, 40, 3600.0)


def test_a_translation_to_nothing_still_counts_each_character_once() -> None:
    assert render("{{ (t + 'aa').translate({98: ''}) }}", {"t": "a" * 98}) == "a" * 100
    # to a code point: one character each
    assert render("{{ 'abc'.translate({97: 66}) }}", {}) == "Bbc"


def test_an_integers_bytes_are_counted_before_they_are_made() -> None:
    assert render("{{ (5).to_bytes(100, 'big')|length }}", {}) == 100
    assert refused("{{ (5).to_bytes(101, 'big') }}") == f"bytes {STRING}"
    assert refused("{{ (5).to_bytes(length=101, byteorder='big') }}") == f"bytes {STRING}"


@pytest.mark.parametrize(
    ("fits", "over", "what"),
    [
        ("{{ [1, 2, 3]|batch(10)|list|length }}", "{{ [1, 2, 3]|batch(11)|list }}", "batch()"),
        (
            "{{ [1, 2, 3]|batch(linecount=10)|list|length }}",
            "{{ [1, 2, 3]|batch(linecount=11)|list }}",
            "batch()",
        ),
        ("{{ [1, 2, 3]|slice(10)|list|length }}", "{{ [1, 2, 3]|slice(11)|list }}", "slice()"),
        (
            "{{ [1, 2, 3]|slice(slices=10)|list|length }}",
            "{{ [1, 2, 3]|slice(slices=11)|list }}",
            "slice()",
        ),
        ("{{ ('a' * 10)|list|length }}", "{{ ('a' * 11)|list }}", "list"),
        ("{{ '-'.join(ten)|length }}", "{{ '-'.join(eleven) }}", "joined items"),
        ("{{ ten|join('-')|length }}", "{{ eleven|join('-') }}", "joined items"),
    ],
)
def test_items_are_made_up_to_the_limit_and_refused_past_it(
    fits: str, over: str, what: str
) -> None:
    scope = {"ten": ("a",) * 10, "eleven": ("a",) * 11}
    assert int(render(fits, scope)) > 0
    assert refused(over, scope) == f"{what} {ITEMS}"


def test_a_value_turned_into_text_is_sized_as_text() -> None:
    # going through 100 characters costs 101 steps
    with using_limits(replace(LIMITS, max_iterations=1000)):
        assert render("{{ t|string }}", {"t": "x" * 100}) == "x" * 100
        assert refused("{{ t|string }}", {"t": "x" * 101}) == f"filtered value {STRING}"
        assert refused("{{ t|tojson }}", {"t": "x" * 99}).endswith(STRING)  # 101 with its quotes


def test_a_join_filter_counts_the_text_of_its_items_and_separators() -> None:
    # the filter is given its input after the context Jinja passes first: the text is the list's, not the context's
    assert len(render("{{ ['a' * 33, 'b' * 33, 'c' * 32]|join('-') }}", {})) == 100
    assert refused("{{ ['a' * 33, 'b' * 33, 'c' * 33]|join('-') }}") == f"joined string {STRING}"
    assert refused("{{ [1000000000, 2000000000]|join('x' * 81) }}") == f"joined string {STRING}"
    # one item: no separator
    assert render("{{ [s]|join('-' * 50) }}", {"s": "a" * 100}) == "a" * 100


def test_lipsum_is_sized_by_its_words_before_it_is_written() -> None:
    # 1 paragraph of at most 6 words: 96 characters
    assert render("{{ lipsum(1, false, 2, 6)|length }}", {}) > 0
    assert refused("{{ lipsum(1, false, 2, 7) }}") == f"lipsum() {STRING}"
    # min above max: min words
    assert refused("{{ lipsum(1, false, 7, 5) }}") == f"lipsum() {STRING}"
    assert refused("{{ lipsum(2, false, 2, 4) }}") == f"lipsum() {STRING}"  # 2 * 4 * 16 = 128
    assert refused("{{ lipsum(n=1, html=false, min=2, max=7) }}") == f"lipsum() {STRING}"


def test_a_filter_going_through_its_input_costs_a_step_per_item() -> None:
    iterations = (
        "template does more than 50 loop iterations and calls "
        "(limits.template_max_iterations in blockyard.yaml)"
    )
    with using_limits(replace(LIMITS, max_items=1000)):
        going_through(iterations)


def going_through(iterations: str) -> None:
    assert render("{{ (s|sort)[0] }}", {"s": list(range(40))}) == 0
    assert refused("{{ (s|sort)[0] }}", {"s": list(range(60))}) == iterations
    assert refused("{{ s|select|first }}", {"s": list(range(1, 61))}) == iterations
    # a filter that does not go through its input costs one step, whatever its size
    assert render("{{ s|length }}", {"s": list(range(200))}) == 200
    assert render("{{ s|first }}", {"s": list(range(200))}) == 0


def test_operators_are_sized_from_their_operands() -> None:
    assert refused("{{ 'a' * 50 + 'b' * 51 }}") == f"joined string {STRING}"
    assert len(render("{{ 'a' * 50 + 'b' * 50 }}", {})) == 100
    assert refused("{{ [1] * 6 + [2] * 5 }}") == f"joined list {ITEMS}"
    assert render("{{ ([1] * 5 + [2] * 5)|length }}", {}) == 10
    assert render("{{ s * 0 }}", {"s": "a" * 101}) == ""  # repeated no times: nothing made
    # a product has at least bits(x) + bits(y) - 1 bits: refused before it is computed when that passes 64
    assert render("{{ x * y }}", {"x": 2**32, "y": 2**31}) == 2**63
    assert refused("{{ x * y }}", {"x": 2**32, "y": 2**32}) == (
        "product exceeds the 64-bit limit (limits.template_max_int_bits in blockyard.yaml)"
    )


def test_a_replacement_counts_its_count_and_an_empty_pattern_between_every_character() -> None:
    assert render("{{ 'aaaa'|replace('a', 'x' * 30, count=3) }}", {}) == "x" * 90 + "a"
    assert render("{{ 'aaaa'|replace('a', 'x' * 30, 0) }}", {}) == "aaaa"
    # 5 places: around every character
    assert len(render("{{ 'aaaa'.replace('', 'x' * 19) }}", {})) == 99
    assert refused("{{ 'aaaa'.replace('', 'x' * 20) }}") == f"replaced string {STRING}"
    # shorter: never longer than the text
    assert render("{{ s.replace('a', '') }}", {"s": "a" * 100}) == ""


def test_printf_style_formatting_is_measured_field_by_field() -> None:
    assert refused("{{ '%99999999999999999999s'|format('a') }}") == f"format width {STRING}"
    assert len(render("{{ '%*s'|format(97, 'a') }}", {})) == 97
    # with the format's own 3
    assert refused("{{ '%*s'|format(98, 'a') }}") == f"formatted string {STRING}"
    assert refused("{{ '%*s'|format(101, 'a') }}") == f"format width {STRING}"
    # after a %%
    assert refused("{{ '%%%s'|format(t) }}", {"t": "x" * 99}) == f"formatted string {STRING}"
    assert render("{{ '%r'|format(t) }}", {"t": "x" * 9}) == "'xxxxxxxxx'"
    # escapes: 10 each
    assert refused("{{ '%r'|format(t) }}", {"t": "x" * 10}) == f"formatted string {STRING}"


def test_what_a_render_and_a_call_make_is_checked_and_named() -> None:
    assert refused("x{{ s }}", {"s": "a" * 101}) == f"rendered text {STRING}"
    assert refused("{{ s.upper() }}", {"s": "a" * 101}) == f"result {STRING}"
    assert refused("{{ range(11)|list }}") == f"range() {ITEMS}"


def test_str_format_and_format_map_keep_their_arguments_and_markups_escaping() -> None:
    assert render("{{ '{a}-{0}'.format('b', a=1) }}", {}) == "1-b"
    assert render("{{ ('<b>{}</b>'|safe).format('<i>') }}", {}) == "<b>&lt;i&gt;</b>"
    assert render("{{ '{a:>100}'.format_map({'a': 'b'})|length }}", {}) == 100
    assert refused("{{ '{a:>101}'.format_map({'a': 'b'}) }}") == f"format width {STRING}"


def test_the_iteration_limit_is_exact() -> None:
    iterations = (
        "template does more than 50 loop iterations and calls "
        "(limits.template_max_iterations in blockyard.yaml)"
    )
    with using_limits(replace(LIMITS, max_items=100)):
        render("{% for i in s %}{% endfor %}", {"s": list(range(50))})
        assert refused("{% for i in s %}{% endfor %}", {"s": list(range(51))}) == iterations
        # range() itself is a call: one step more
        render("{% for i in range(49) %}{% endfor %}", {})
        assert refused("{% for i in range(50) %}{% endfor %}") == iterations
