"""The value domain (engine/core/values.py): hostile values against every boundary that must refuse
them — and in-range values that every boundary must let through unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.cli.run import gather_inputs, parse_pairs
from engine.core.errors import UsageError
from engine.core.values import INT_MAX, INT_MIN, ValueDomainError, check_value, value_problem
from engine.definitions.load import LoadError, load_bytes, parse_value
from engine.nodes.errors import Problem
from engine.nodes.scope import OutputCheck, checker, plain
from engine.runtime.approvals import ask
from engine.spec import TypeSpec
from engine.spec.common import ValueType
from engine.spec.decisions import DecisionRefused, check_decision
from engine.spec.typecheck import InputError, coerce_inputs

HUGE = 10**30
# (label, value): each is outside the domain, at the top or nested
HOSTILE: list[tuple[str, Any]] = [
    ("2^63", 2**63),
    ("-2^63-1", -(2**63) - 1),
    ("10^30", HUGE),
    ("5000 digits", 10**4999),
    ("lone low surrogate", "caf\udcc3"),
    ("lone high surrogate", "\ud83d"),
    ("nested int", {"lines": [{"qty": 1}, {"qty": 2**64}]}),
    ("nested text", ["ok", {"note": "\udfff"}]),
    ("surrogate key", {"\udcff": 1}),
]
# in the domain: must pass every boundary unchanged
FINE: list[tuple[str, Any]] = [
    ("int max", INT_MAX),
    ("int min", INT_MIN),
    ("unicode", "héllo ✓ 😀 日本"),
    ("big float", 1e300),
    ("nested", {"a": [1, "ü", {"b": INT_MAX}], "ключ": None}),
]
IDS = [label for label, _ in HOSTILE]
VALUES = [value for _, value in HOSTILE]
ANY = TypeSpec(type="any")


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_value_problem_names_where(value: Any) -> None:
    problem = value_problem(value, "x")
    assert problem is not None and "'x" in problem
    problem.encode("utf-8")  # the message itself is printable
    with pytest.raises(ValueDomainError, match=r"^'x"):
        check_value(value, "x")


@pytest.mark.parametrize("value", [v for _, v in FINE], ids=[label for label, _ in FINE])
def test_in_range_values_pass_every_boundary(value: Any) -> None:
    assert value_problem(value) is None
    assert plain(value, "v") == value
    assert checker(ANY)(value, "v", "output") == value
    assert OutputCheck({"v": ANY})({"v": value}) == {"v": value}
    assert coerce_inputs({"v": ANY}, {"v": value}, where="flow 'f'") == {"v": value}
    assert check_decision(
        {"gate": "g", "fields": {"v": {"type": "any"}}}, "approve", {"v": value}, None
    ) == {"v": value}


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_step_outputs_refuse(value: Any) -> None:
    """Where step outputs and bound inputs enter the state: every source (model, tool, template)."""
    with pytest.raises(Problem, match=r"64-bit|surrogate"):
        OutputCheck({"v": ANY})({"v": value})
    with pytest.raises(Problem, match=r"64-bit|surrogate"):
        checker(ANY)(value, "v", "input")
    with pytest.raises(Problem, match=r"64-bit|surrogate"):
        plain(value, "v")


@pytest.mark.parametrize("kind", ["string", "boolean", "array", "object", "number"])
def test_a_huge_integer_of_the_wrong_type_is_described_without_printing_it(kind: ValueType) -> None:
    for spec in (TypeSpec(type=kind), TypeSpec(type="integer", enum=[1, 2])):
        with pytest.raises(Problem, match="output 'v'"):
            OutputCheck({"v": spec})({"v": 10**4999})
        with pytest.raises(DecisionRefused, match="field 'v'"):
            check_decision(
                {"gate": "g", "fields": {"v": spec.model_dump(exclude_unset=True)}},
                "approve",
                {"v": 10**4999},
                None,
            )


@pytest.mark.parametrize(
    "value",
    [v for v in VALUES if type(v) in (int, str)],
    ids=[label for label, v in HOSTILE if type(v) in (int, str)],
)
def test_typed_fast_path_refuses(value: Any) -> None:
    """The fast path for exactly-typed scalars (`integer`, `string`) checks the domain too."""
    spec = TypeSpec(type="integer" if isinstance(value, int) else "string")
    with pytest.raises(Problem, match="output 'v'"):
        OutputCheck({"v": spec})({"v": value})


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_python_api_inputs_refuse(value: Any) -> None:
    with pytest.raises(InputError, match="flow 'f': input") as caught:
        coerce_inputs({"v": ANY}, {"v": value}, where="flow 'f'")
    assert isinstance(caught.value, UsageError)


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_decision_values_and_reasons_refuse(value: Any) -> None:
    with pytest.raises(DecisionRefused, match=r"decision 'values\.v"):
        ask(True, {"v": value}, None, None, None)
    with pytest.raises(DecisionRefused, match="gate 'g': field"):
        check_decision(
            {"gate": "g", "fields": {"v": {"type": "any"}}}, "approve", {"v": value}, None
        )


@pytest.mark.parametrize("field", ["reason", "gate", "actor"])
def test_decision_text_with_surrogates_is_refused(field: str) -> None:
    given = {"reason": None, "gate": None, "actor": None, field: "x\udcff"}
    with pytest.raises(DecisionRefused, match=f"decision '{field}' holds a lone surrogate"):
        ask(False, None, **given)


@pytest.mark.parametrize("kind", ["string", "integer", "number", "array", "object", "boolean"])
def test_python_api_inputs_refuse_whatever_the_declared_type(kind: ValueType) -> None:
    """A string input takes a number as its text: str() of 5000 digits must never be tried."""
    for value in (10**4999, [10**4999], "x\udcff"):
        with pytest.raises(InputError, match="flow 'f': input 'v"):
            coerce_inputs({"v": TypeSpec(type=kind)}, {"v": value}, where="flow 'f'")


def test_an_input_name_with_a_surrogate_is_refused() -> None:
    with pytest.raises(InputError, match="not valid text"):
        coerce_inputs({"v": ANY}, {"\udcff": 1}, where="flow 'f'")


@pytest.mark.parametrize(
    "literal",
    [
        "9223372036854775808",
        "-9223372036854775809",
        "9" * 5000,
        "0x10000000000000000",
        "0o2000000000000000000000",
        "+" + "1" * 30,
    ],
)
def test_yaml_integer_literals_beyond_64_bits_are_a_diagnostic(literal: str) -> None:
    with pytest.raises(
        LoadError, match=r"is outside the 64-bit range \(-2\^63 \.\. 2\^63-1\); quote it"
    ) as caught:
        load_bytes(f"a:\n  b: [1, {literal}]\n".encode(), "f.yaml")
    diagnostic = caught.value.diagnostic
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("BY107", 2, 10)
    assert "64-bit" in diagnostic.message and len(diagnostic.message) < 200


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("9223372036854775807", INT_MAX),
        ("-9223372036854775808", INT_MIN),
        ("000000000000000000000000042", 42),
        ("'100000000000000000000000'", "100000000000000000000000"),
        ("!!float 100000000000000000000000", 1e23),
    ],
)
def test_yaml_literals_in_range_or_quoted_load(literal: str, value: Any) -> None:
    assert load_bytes(f"a: {literal}\n".encode(), "f.yaml").data == {"a": value}


def test_a_huge_integer_mapping_key_stays_text() -> None:
    assert load_bytes(b"100000000000000000000000: 1\n", "f.yaml").data == {
        "100000000000000000000000": 1
    }


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("100000000000000000000000", "64-bit"),
        ("[1, 100000000000000000000000]", "64-bit"),
        ("x\udcff", "surrogate"),
    ],
)
def test_command_line_values_refuse(text: str, match: str) -> None:
    with pytest.raises(ValueDomainError, match=match):
        parse_value(text)
    for option, name in (("--input", "KEY"), ("--set", "FIELD")):
        with pytest.raises(UsageError, match=f"{option} 'n': .*{match}"):
            parse_pairs([f"n={text}"], {}, option, name)
    # a string input takes the text as typed, but a surrogate is still refused
    if "surrogate" in match:
        with pytest.raises(UsageError, match="--input 'n'"):
            parse_pairs([f"n={text}"], {"n": TypeSpec(type="string")}, "--input", "KEY")


def test_a_string_input_keeps_huge_digits_as_text() -> None:
    declared = {"n": TypeSpec(type="string")}
    assert parse_pairs(["n=100000000000000000000000"], declared, "--input", "KEY") == {
        "n": "100000000000000000000000"
    }


@pytest.mark.parametrize(
    "text",
    [
        "n: 100000000000000000000000\n",
        "n: [0x10000000000000000]\n",
        '{"n": 100000000000000000000000}',
    ],
)
def test_inputs_file_with_huge_integers_is_a_usage_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "inputs.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=r"--inputs-file.*64-bit"):
        gather_inputs({"n": ANY}, [], path)
