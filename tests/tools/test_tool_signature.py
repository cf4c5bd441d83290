"""Type hints to JSON Schema, and docstrings to descriptions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, Union

import pytest

from engine.tools import ToolError
from engine.tools.signature import UnsupportedHint, describe, hint_schema, parse_docstring


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Mapping[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Optional[str], {"type": ["string", "null"]}),  # noqa: UP045 - the typing spelling must work too
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str], {"type": ["integer", "string"]}),  # noqa: UP007 - the typing spelling must work too
        (
            list[int] | None,
            {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        ),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Literal[1, "a"], {"enum": [1, "a"]}),
        (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
    ],
)
def test_hint_schemas(hint: Any, schema: dict[str, Any]) -> None:
    assert hint_schema(hint) == schema


@pytest.mark.parametrize("hint", [bytes, dict[int, str], tuple[int, int], object])
def test_unsupported_hints(hint: Any) -> None:
    with pytest.raises(UnsupportedHint, match=r"^(bytes|dict|tuple|object)$"):
        hint_schema(hint)


def test_docstring_sections() -> None:
    doc = """Look a word up.

    Longer explanation that is not part of the summary.

    Args:
        word: The word.
        lang (str): Language code,
            two letters.
        **extra: Ignored.

    Returns:
        word: not a parameter.
    """
    import inspect

    summary, args = parse_docstring(inspect.cleandoc(doc))
    assert summary == "Look a word up."
    assert args == {"word": "The word.", "lang": "Language code, two letters.", "extra": "Ignored."}


def test_keyword_catch_all_allows_more_properties() -> None:
    def tool(name: str, **options: Any) -> None:
        """Do it."""

    parameters, description = describe(tool, "t")
    assert parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": True,
    }
    assert description == "Do it."


def test_defaults_that_are_not_json_are_left_out() -> None:
    marker = object()

    def tool(value: Any = marker, count: int = 2) -> None:
        pass

    parameters, _ = describe(tool, "t")
    assert parameters["properties"] == {"value": {}, "count": {"type": "integer", "default": 2}}
    assert "required" not in parameters


def test_positional_only_is_refused() -> None:
    def tool(a: int, /) -> None:
        pass

    with pytest.raises(ToolError, match=r"parameter 'a' of .* cannot be passed by keyword"):
        describe(tool, "t")
