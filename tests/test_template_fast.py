"""The fast path of template expressions and text templates (engine/templates/fast.py): the same results
and errors as Jinja's sandbox, on a corpus of hand-written edge cases and on generated expressions and
templates. (How much faster it is: bench/compare.py, its expressions table.)"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.templates.limits import DEFAULT, TemplateLimits, using_limits
from engine.templates.render import (
    TemplateError,
    TemplateLimitError,
    evaluate,
    fast_form,
    fast_text_form,
    render,
    render_text,
)

SMALL = TemplateLimits(
    max_string=100, max_items=16, max_int_bits=64, max_iterations=1000, timeout=5.0
)
Outcome = tuple[Any, ...]


def outcome(expression: str, scope: dict[str, Any], *, fast: bool) -> Outcome:
    """What evaluating gives: the value (type and repr), or the error (its class, its message and the
    kind of the exception underneath: UndefinedError, SecurityError, ZeroDivisionError, ...)."""
    try:
        value = evaluate(expression, scope, fast=fast)
    except TemplateError as exc:
        return ("error", type(exc), str(exc), type(exc.__context__))
    return ("value", type(value), repr(value))


def same_as_jinja(expression: str, scope: dict[str, Any]) -> Outcome:
    fast = outcome(expression, scope, fast=True)
    assert fast == outcome(expression, scope, fast=False), expression
    return fast


class Opaque:
    """An object of the host (not a JSON value): the sandbox hides its private and dunder attributes."""

    public = 1
    _secret = "hidden"

    def method(self) -> int:
        return 2


SCOPE: dict[str, Any] = {
    "n": 3,
    "zero": 0,
    "neg": -7,
    "f": 2.5,
    "fz": 0.0,
    "big": 2**63 - 1,
    "small": -(2**63),
    "huge": 2**64 - 1,
    "s": "abc",
    "empty": "",
    "t": True,
    "no": False,
    "none": None,
    "xs": [1, 2, 3],
    "nested": [[1, 2], {"a": [5]}],
    "noitems": [],
    "inputs": {"a": 1, "items": [5, 6], "keys": "k", "_private": "p", "name": "Ada", "n": 4},
    "context": {
        "items": [7, 8],
        "verdict": "pass",
        "count": 2,
        "score": 0.5,
        "d": {"x": {"y": "deep"}},
    },
    "obj": Opaque(),
    "x": {"_secret": 1, "b": 2},
    "y": 1,
}

CORPUS = [
    # names, constants
    "n",
    "s",
    "none",
    "t",
    "inputs",
    "missing",
    "range",
    "dict",
    "1",
    "-1",
    "1.5",
    "'lit'",
    "true",
    "none is none",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "[]",
    "[1, 'a', none]",
    "(1, 2)",
    "(n,)",
    "{'a': 1, 'b': n}",
    "{n: 1}",
    "{xs: 1}",
    "{'a': 1, 'a': 2}",
    # attribute and item access
    "inputs.a",
    "inputs.items",
    "inputs.keys",
    "inputs.values",
    "inputs.get",
    "inputs._private",
    "inputs.nope",
    "inputs['a']",
    "inputs['nope']",
    "inputs.name.upper",
    "inputs.name.nope",
    "context.items[0]",
    "context.items[-1]",
    "context.items[2]",
    "context.items[-3]",
    "context.d.x.y",
    "context.d['x']['y']",
    "context['d'].x['y']",
    "nested[1].a[0]",
    "nested[0][n - 2]",
    "xs[n]",
    "xs[zero]",
    "xs[-n]",
    "xs['a']",
    "xs[1.0]",
    "xs[t]",
    "xs[none]",
    "s[0]",
    "s[-1]",
    "s[5]",
    "s.upper",
    "s.a",
    "n.real",
    "n.denominator",
    "none.a",
    "none[0]",
    "missing.a",
    "missing[0]",
    "inputs[missing]",
    "xs[xs]",
    "inputs[xs]",
    "x._secret",
    "x.b",
    "obj.public",
    "obj._secret",
    "obj.method",
    "obj.nope",
    "obj['public']",
    "obj['_secret']",
    # arithmetic: division, huge integers, sizes
    "n + 1",
    "n - 1",
    "n * 2",
    "n / 2",
    "n // 2",
    "n % 2",
    "n ** 2",
    "-n",
    "+n",
    "neg // 2",
    "neg % 3",
    "n / zero",
    "n // zero",
    "n % zero",
    "f / fz",
    "f // fz",
    "zero ** -1",
    "2 ** -1",
    "n / 1.5",
    "f * 2",
    "big + 1",
    "big * 2",
    "big * big",
    "huge + 1",
    "huge - 1",
    "small - 1",
    "-small",
    "2 ** 63",
    "2 ** 64",
    "2 ** 65",
    "(-2) ** 63",
    "big ** 2",
    "10 ** 19",
    "10 ** 20",
    "1.5 ** 1000",
    "1e308 * 10",
    "1e308 * 10 - 1e308 * 10",
    "s * 3",
    "3 * s",
    "s * -1",
    "s * 0",
    "s * n * n",
    "'a' * 100",
    "'a' * 101",
    "s * 1000000",
    "s * 10000000",
    "xs * 5",
    "xs * 6",
    "xs * big",
    "s + s",
    "s + n",
    "n + s",
    "xs + xs",
    "xs + s",
    "xs + noitems",
    "'%s-%s' % (n, s)",
    "'%d' % n",
    "'%5000s' % s",
    "'%s' % xs",
    "s % n",
    "n % s",
    "none + 1",
    "t + t",
    "t * 3",
    "missing + 1",
    "1 + missing",
    "missing * 0",
    "-missing",
    "inputs.nope + 1",
    "(n + 1) * (n - 1) // 2",
    "n + 1.5",
    "0.1 + 0.2",
    "n / 3",
    "7 // -2",
    "-7 % 3",
    "2 ** 0.5",
    "(-8) ** (1/3)",
    # comparisons, logic
    "n == 3",
    "n != 3",
    "n > 2",
    "n >= 3",
    "n < 3",
    "n <= 2",
    "1 < n < 5",
    "5 > n > 4",
    "1 < n < s",
    "context.verdict == 'pass'",
    "context.verdict != 'pass'",
    "n * 2 > y",
    "s < 'b'",
    "s < n",
    "xs < xs",
    "xs == [1, 2, 3]",
    "none == none",
    "none < 1",
    "1 in xs",
    "4 in xs",
    "4 not in xs",
    "'a' in s",
    "n in s",
    "'a' in inputs",
    "'nope' not in inputs",
    "n in none",
    "missing == 1",
    "1 == missing",
    "missing != missing",
    "missing in xs",
    "1 in missing",
    "n and s",
    "zero and s",
    "zero or s",
    "n or missing",
    "zero or missing",
    "missing or 1",
    "not n",
    "not zero",
    "not missing",
    "not noitems",
    "t and no",
    "n and missing",
    "empty or 'default'",
    "inputs.nope or 'default'",
    "context.count > 1 and context.verdict == 'pass'",
    "s if n > 1 else xs",
    "s if zero else xs",
    "s if missing else xs",
    "missing if t else 1",
    "1 if no else missing",
    "f == 2.5",
    "fz == 0",
    "fz == -0.0",
    "1 == 1.0",
    "t == 1",
    "big == huge",
    # ~ joins
    "s ~ n",
    "'x' ~ none",
    "s ~ xs",
    "s ~ missing",
    "'a' ~ 'b'",
    "inputs.name ~ '!' ~ n",
    "s ~ (s * 32)",
    "s ~ (s * 33)",
    # hostile: what the sandbox hides
    "x.__class__",
    "obj.__class__",
    "().__class__.__mro__",
    "s.__class__.__mro__[1]",
    "s.__class__",
    "xs.__class__.__base__.__subclasses__",
    "obj.__dict__",
    "obj.method.__globals__",
    "obj.__init__",
    "inputs.__class__",
    "inputs['__class__']",
    "s['__class__']",
    "xs.append",
    "xs.pop",
    "inputs.pop",
    "inputs.update",
    "inputs.clear",
    "s.format",
    "s.mro",
    "n.__add__",
    "range.__globals__",
    "dict.__module__",
    "obj.method.__func__",
    "xs.__len__",
    "s._x",
    "inputs.__getitem__",
    "xs.__setitem__",
]


@pytest.mark.parametrize("limits", [DEFAULT, SMALL], ids=["default-limits", "small-limits"])
def test_corpus_gives_jinja_results_and_errors(limits: TemplateLimits) -> None:
    fast = 0
    with using_limits(limits):
        for expression in CORPUS:
            same_as_jinja(expression, SCOPE)
            fast += fast_form(expression) is not None
    assert fast == len(CORPUS), [e for e in CORPUS if fast_form(e) is None]


@pytest.mark.parametrize(
    "expression",
    [
        "x.__class__",
        "obj._secret",
        "().__class__.__mro__",
        "s.__class__.__mro__[1]",
        "obj.__dict__",
        "xs.append",
        "inputs.pop",
        "obj.method.__globals__",
        "s['__class__']",
        "n.__add__",
    ],
)
def test_hostile_access_is_refused_exactly_as_in_the_sandbox(expression: str) -> None:
    assert fast_form(expression) is not None
    kind, error, message, underneath = same_as_jinja(expression, SCOPE)
    assert kind == "error" and error is TemplateError
    assert underneath.__name__ in ("SecurityError", "UndefinedError"), underneath
    assert "unsafe" in message or "has no attribute" in message, message


def test_data_keys_named_like_private_attributes_are_data() -> None:
    # a JSON object's key is data, whatever its name; an object's private attribute is not
    assert evaluate("x._secret", SCOPE) == 1
    assert "hidden" not in same_as_jinja("obj._secret", SCOPE)[2]


def test_undefined_names_fail_with_jinjas_message() -> None:
    result = same_as_jinja("nope + 1", SCOPE)
    assert result[2] == "cannot evaluate 'nope + 1': 'nope' is undefined"
    assert result[3].__name__ == "UndefinedError"


def test_sizes_at_the_limits() -> None:
    with using_limits(SMALL):
        assert evaluate("'a' * 100", {}) == "a" * 100
        with pytest.raises(TemplateLimitError, match="100-character limit"):
            evaluate("'a' * 101", {})
        with pytest.raises(TemplateLimitError, match="100-character limit"):
            evaluate("s ~ (s * 33)", {"s": "abc"})
        assert evaluate("n * 16", {"n": [0]}) == [0] * 16
        with pytest.raises(TemplateLimitError, match="16-item limit"):
            evaluate("n * 17", {"n": [0]})
    assert evaluate("big + 1", SCOPE) == 2**63
    with pytest.raises(TemplateLimitError, match="64-bit limit"):
        evaluate("huge + 1", SCOPE)


# ---- the fast path is taken --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "n + 1",
        "inputs.a",
        "context.items[0]",
        "context.verdict == 'pass'",
        "x * 2 > y",
        "not done",
        "a ~ b",
        "c if d else e",
        "[a, b]",
        "{'k': v}",
    ],
)
def test_simple_forms_take_the_fast_path(expression: str) -> None:
    compiled = fast_form(expression)
    assert compiled is not None
    before = compiled.calls
    scope = {
        "n": 1,
        "inputs": {"a": 1},
        "context": {"items": [1], "verdict": "pass"},
        "x": 1,
        "y": 1,
        "done": False,
        "a": "a",
        "b": "b",
        "c": 1,
        "d": True,
        "e": 2,
        "v": 0,
    }
    evaluate(expression, scope)
    render("{{ " + expression + " }}", scope)
    evaluate(expression, scope, fast=False)  # the reference path does not count
    assert compiled.calls == before + 2
    assert fast_form(expression) is compiled  # compiled once per source string


@pytest.mark.parametrize(
    "expression",
    [
        "xs | length",
        "x is defined",
        "f(1)",
        "s.upper()",
        "xs[1:2]",
        "a if b",
        "self",
        "loop",
        "range(3)",
        "s | upper == 'A'",
    ],
)
def test_other_forms_go_to_jinja(expression: str) -> None:
    assert fast_form(expression) is None


def test_a_literal_list_is_a_new_list_each_time() -> None:
    first = evaluate("[1, [2]]", {})
    first[1].append(3)
    assert evaluate("[1, [2]]", {}) == [1, [2]]


# ---- generated expressions ---------------------------------------------------------------------------

NAMES = [
    "n",
    "zero",
    "neg",
    "f",
    "big",
    "huge",
    "s",
    "empty",
    "t",
    "none",
    "xs",
    "noitems",
    "inputs",
    "context",
    "nested",
    "missing",
    "obj",
    "x",
]

_atoms = st.one_of(
    st.sampled_from(NAMES),
    st.integers(min_value=-3, max_value=70).map(str),
    st.sampled_from(
        [
            "9223372036854775807",
            "18446744073709551615",
            "4611686018427387904",
            "0.5",
            "1e308",
            "'a'",
            "''",
            "'pass'",
            "none",
            "true",
            "false",
            "[]",
            "[1, 2]",
            "{'a': 1}",
        ]
    ),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(
        inner,
        st.sampled_from(
            [
                "+",
                "-",
                "*",
                "/",
                "//",
                "%",
                "**",
                "~",
                "==",
                "!=",
                "<",
                ">=",
                "in",
                "not in",
                "and",
                "or",
            ]
        ),
        inner,
    )
    return st.one_of(
        binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(
            inner,
            st.sampled_from(
                [
                    "a",
                    "items",
                    "keys",
                    "_private",
                    "__class__",
                    "x",
                    "real",
                    "upper",
                    "verdict",
                    "d",
                    "y",
                    "public",
                    "_secret",
                ]
            ),
        ).map(lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, st.integers(-4, 4)).map(lambda t: f"{t[0]}[{t[1]}]"),
        inner.map(lambda e: f"(not {e})"),
        inner.map(lambda e: f"(-{e})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} < {t[1]} <= {t[2]})"),
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    )


EXPRESSIONS = st.recursive(_atoms, _extend, max_leaves=6)

_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.text(max_size=5),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "_p"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=EXPRESSIONS, value=_json)
def test_generated_expressions_give_jinja_results_and_errors(expression: str, value: Any) -> None:
    scope = {
        **SCOPE,
        "n": value if not isinstance(value, dict) else SCOPE["n"],
        "inputs": {**SCOPE["inputs"], "v": value},
    }
    if isinstance(value, dict):
        scope["context"] = value
    with using_limits(SMALL):
        same_as_jinja(expression, scope)
    try:
        compiled = fast_form(expression)
    except TemplateError:  # a constant part that always fails: reported alike on both paths (above)
        return
    assert compiled is not None


@pytest.mark.parametrize(
    "call",
    [lambda: evaluate("0.a ~ 'x'", {}), lambda: render("a {{ 0.a ~ 'x' }} b", {})],
    ids=["expression", "template"],
)
def test_a_constant_part_that_always_fails_is_a_template_error(call: Any) -> None:
    # Jinja folds constants while it compiles: `0.a ~ 'x'` failed there, outside the evaluation's error handling
    with pytest.raises(TemplateError, match="'int object' has no attribute 'a'"):
        call()


# ---- text templates ------------------------------------------------------------------------------------


def text_outcome(source: str, scope: dict[str, Any], *, fast: bool) -> Outcome:
    try:
        text = render_text(source, scope, fast=fast)
    except TemplateError as exc:
        return ("error", type(exc), str(exc), type(exc.__context__))
    return ("text", text)


def same_text_as_jinja(source: str, scope: dict[str, Any]) -> Outcome:
    fast = text_outcome(source, scope, fast=True)
    assert fast == text_outcome(source, scope, fast=False), source
    return fast


TEXTS = [
    "Think about {{ topic }}.",
    "{{ n }} and {{ s }}",
    "plain text {{ 'lit' }} {{ 1 + 2 }} {{ none }} {{ t }}",
    "{{ xs }} {{ inputs }} {{ nested }} {{ f }} {{ big }}",
    "{{ missing }}",
    "a {{ missing.x }} b",
    "{{ inputs.nope }}",
    "x\r\ny\rz {{ n }}\r\n",
    "trailing newline {{ s }}\n",
    "{{- s -}}  \n  {{ n }}",
    "  {{ s }}  ",
    "{# a comment #}{{ s }}{# another #}",
    "{{ s * 40 }}",
    "{{ s }}{{ s * 33 }}",
    "{{ 'a' * 99 }}xy",
    "{{ n / zero }} after",
    "{{ obj._secret }}",
    "{{ x.__class__ }}",
    "{{ s ~ xs }}",
    "{{ [1, 2] }}",
    "{{ {'a': 1} }}",
    "{{ (1, 2) }}",
    "{{ n if t else missing }}",
    "{{ inputs.name }}: {{ context.verdict == 'pass' }}",
    "é {{ s }} ☃",
    "{{ huge + 1 }}",
    "unicode {{ inputs.name.upper }}",
]


@pytest.mark.parametrize("limits", [DEFAULT, SMALL], ids=["default-limits", "small-limits"])
def test_text_corpus_gives_jinja_results_and_errors(limits: TemplateLimits) -> None:
    with using_limits(limits):
        for source in TEXTS:
            same_text_as_jinja(source, SCOPE)
    # all on the fast path, but for the constants Jinja finalizes while it compiles (lists, dicts, tuples)
    assert [source for source in TEXTS if fast_text_form(source) is None] == [
        "{{ [1, 2] }}",
        "{{ {'a': 1} }}",
        "{{ (1, 2) }}",
    ]


@pytest.mark.parametrize(
    "source",
    [
        "Think about {{ topic }}.",
        "{{ a }}{{ b }}",
        "x {{ n + 1 }} y {{ inputs.a }}",
        "{{- a }} \n {{ b -}} z",
        "no expressions at all {{ 'but a constant' }}",
    ],
)
def test_simple_text_takes_the_fast_path(source: str) -> None:
    compiled = fast_text_form(source)
    assert compiled is not None
    before = compiled.calls
    scope = {"topic": "x", "a": 1, "b": [2], "n": 1, "inputs": {"a": 3}}
    fast = render_text(source, scope)
    assert render(source, scope) == fast  # a binding of mixed text renders the same way
    assert render_text(source, scope, fast=False) == fast  # the reference path does not count
    assert compiled.calls > before
    assert fast_text_form(source) is compiled  # compiled once per source string


@pytest.mark.parametrize(
    "source",
    [
        "{% if a %}x{% endif %}",
        "{{ xs | length }}",
        "{% for i in xs %}{{ i }}{% endfor %}",
        "{{ f(1) }} text",
        "{% set y = 1 %}{{ y }}",
        "{{ {'k': [1]} }} b",
        "{% include 'x' %}",
    ],
)
def test_text_with_tags_filters_or_calls_goes_to_jinja(source: str) -> None:
    assert fast_text_form(source) is None


_TEXT_BITS = st.sampled_from(["", "a", " ", "\n", "é", "{# c #}", "\r\n", "x" * 30, "}", "{"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(
        st.tuples(
            _TEXT_BITS,
            EXPRESSIONS,
            st.sampled_from(["{{ ", "{{- "]),
            st.sampled_from([" }}", " -}}"]),
        ),
        min_size=1,
        max_size=3,
    ),
    tail=_TEXT_BITS,
    value=_json,
)
def test_generated_templates_give_jinja_results_and_errors(
    parts: list[tuple[str, str, str, str]], tail: str, value: Any
) -> None:
    source = (
        "".join(f"{text}{open_}{expression}{close}" for text, expression, open_, close in parts)
        + tail
    )
    scope = {
        **SCOPE,
        "n": value if not isinstance(value, dict) else SCOPE["n"],
        "inputs": {**SCOPE["inputs"], "v": value},
    }
    with using_limits(SMALL):
        same_text_as_jinja(source, scope)
