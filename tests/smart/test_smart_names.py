"""The names a smart block's inputs and outputs may take (BY359), against the installed DSPy.

Validation never imports DSPy, so it keeps the names DSPy refuses as a list
(engine/validate/semantic/blocks.py, DSPY_RESERVED). These tests build a signature and a module with
each name, as engine/smart/program.py does, so that a DSPy upgrade that refuses another name, or takes
one of the list again, fails here rather than in a user's run."""

from __future__ import annotations

import warnings
from typing import Any

import pydantic
import pytest

from engine.smart import import_dspy
from engine.validate.semantic.blocks import DSPY_RESERVED


def takes(name: str, *, output: bool, mode: str) -> bool:
    """Whether DSPy builds a `mode` module whose signature has a field `name` (an input, or an output)."""
    dspy: Any = import_dspy()
    fields: dict[str, tuple[Any, Any]] = (
        {"other_in": (str, dspy.InputField(desc=""))} if output else {}
    )
    fields[name] = (str, dspy.OutputField(desc="") if output else dspy.InputField(desc=""))
    if not output:
        fields["other_out"] = (str, dspy.OutputField(desc=""))
    try:
        with warnings.catch_warnings():
            # pydantic warns of a field that shadows an attribute it can take
            warnings.simplefilter("ignore")
            signature = dspy.make_signature(fields, "Do it.")
            (dspy.ChainOfThought if mode == "chain_of_thought" else dspy.Predict)(signature)
    # what DSPy and pydantic raise for a name they refuse varies: NameError, TypeError, ...
    except Exception:
        return False
    return name in (signature.output_fields if output else signature.input_fields)


def candidates() -> set[str]:
    """Every public attribute of DSPy's Signature class, of its metaclass, and of pydantic's models."""
    dspy: Any = import_dspy()
    names = set(dir(dspy.Signature)) | set(dir(type(dspy.Signature))) | set(dir(pydantic.BaseModel))
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("mode", ["predict", "chain_of_thought"])
@pytest.mark.parametrize("output", [False, True], ids=["input", "output"])
def test_the_list_is_exactly_the_public_names_dspy_refuses(output: bool, mode: str) -> None:
    refused = {name for name in candidates() if not takes(name, output=output, mode=mode)}
    assert refused == set(DSPY_RESERVED)


@pytest.mark.parametrize("name", ["_draft", "__x"])
def test_a_leading_underscore_is_refused(name: str) -> None:
    assert not takes(name, output=False, mode="predict") and not takes(
        name, output=True, mode="predict"
    )


@pytest.mark.parametrize("name", ["text", "summary-line", "reasoning", "schema", "json", "copy"])
def test_names_validation_lets_through_are_taken(name: str) -> None:
    assert all(
        takes(name, output=output, mode=mode)
        for output in (False, True)
        for mode in ("predict", "chain_of_thought")
    )
