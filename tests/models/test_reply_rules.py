"""Rule replies: `{when: {contains | regex}, reply}` answers only when the text sent to the model matches."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from engine.cli.flowtests import load_tests
from engine.core.errors import BlockyardError
from engine.models import ModelError, ModelResolver, TurnRequest, scripted
from engine.models.replies import reply_problems
from engine.spec import AgentBlock, ConfigSpec, LlmBlock, ModelProfile, PromptSpec
from tests.models.model_helpers import make_request

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def mock(replies: dict[str, list[Any]]) -> Any:
    profile = ModelProfile(provider="mock", replies=replies)
    return ModelResolver(ConfigSpec(models={"default": profile}), env={}).for_block(
        LlmBlock(block="b", kind="llm", prompt=PromptSpec(user="hi"))
    )


def ask(model: Any, user: str, system: str = "You answer.") -> str:
    request = make_request(ANSWER, step="s", block="b", user=user)
    request = type(request)(**{**request.__dict__, "system": system})
    return str(asyncio.run(model.structured(request))["answer"])


def test_a_rule_fires_only_when_the_sent_text_contains_its_text_ignoring_case() -> None:
    model = mock(
        {
            "s": [
                {"when": {"contains": "ada"}, "reply": {"answer": "Your name is Ada."}},
                {"answer": "I don't know."},
            ]
        }
    )
    assert ask(model, "What is my name?") == "I don't know."
    assert ask(model, "My name is ADA. What is my name?") == "Your name is Ada."
    # system counts
    assert ask(model, "What is my name?", system="The user is Ada Lovelace.") == "Your name is Ada."
    assert ask(model, "Still there?") == "I don't know."  # ordered replies: the last repeats


def test_rules_are_tried_in_order_before_ordered_replies_and_fire_every_time() -> None:
    model = mock(
        {
            "s": [
                {"answer": "first"},
                {"answer": "second"},
                {"when": {"regex": r"order #\d+"}, "reply": {"answer": "an order"}},
                {"when": {"contains": "order"}, "reply": {"answer": "a word"}},
            ]
        }
    )
    assert ask(model, "about order #12") == "an order"
    assert ask(model, "about order #13") == "an order"
    assert ask(model, "about the order") == "a word"
    assert ask(model, "hello") == "first"  # rules did not use up the ordered replies
    assert ask(model, "hello") == "second"


def test_both_conditions_must_hold_and_regex_is_case_sensitive() -> None:
    model = mock(
        {
            "s": [
                {
                    "when": {"contains": "refund", "regex": "(?m)^Q:"},
                    "reply": {"answer": "refund question"},
                },
                {"answer": "other"},
            ]
        }
    )
    assert ask(model, "Q: refund please") == "refund question"
    assert ask(model, "q: refund please") == "other"
    assert ask(model, "Q: hello") == "other"


def test_a_rule_that_matches_nothing_falls_through_to_the_next_key_and_the_generated_output() -> (
    None
):
    model = mock(
        {
            "s": [{"when": {"contains": "zebra"}, "reply": {"answer": "zebra"}}],
            "b": [{"answer": "block"}],
        }
    )
    assert ask(model, "a horse") == "block"
    generated = mock({"s": [{"when": {"contains": "zebra"}, "reply": {"answer": "zebra"}}]})
    assert ask(generated, "a horse") == "b: name=Ada"


def test_agent_turns_match_on_the_whole_conversation() -> None:
    request = TurnRequest(
        flow="f",
        step="s",
        block="b",
        answer_tool="final_answer",
        answer_schema=ANSWER,
        messages=(SystemMessage("helper"), HumanMessage("I am Ada"), HumanMessage("name?")),
        tools=(),
    )
    with scripted(
        "run-rules", {"s": [{"when": {"contains": "i am ada"}, "reply": {"$text": "Ada."}}]}
    ):
        model = ModelResolver(ConfigSpec(), env={}, run_id="run-rules").agent_for_block(
            AgentBlock(block="b", kind="agent", prompt=PromptSpec(user="hi"))
        )
        said = asyncio.run(model.turn(request))
    assert said.content == "Ada."


@pytest.mark.parametrize(
    ("entry", "where", "problem"),
    [
        ({"when": {"contains": "x"}}, ("when",), "needs `reply`"),
        ({"when": "Ada", "reply": "x"}, ("when",), "`when` must be a mapping of conditions"),
        ({"when": {"starts": "x"}, "reply": "x"}, ("when", "starts"), "unknown condition 'starts'"),
        ({"when": {"contains": ""}, "reply": "x"}, ("when", "contains"), "must be non-empty text"),
        ({"when": {"regex": "(unclosed"}, "reply": "x"}, ("when", "regex"), "is not valid RE2"),
        (
            {"when": {"contains": "x"}, "reply": {"$bogus": 1}},
            ("reply", "$bogus"),
            "unknown directive",
        ),
    ],
)
def test_malformed_rules_are_reported_with_their_path(
    entry: dict[str, Any], where: tuple[Any, ...], problem: str
) -> None:
    found = list(reply_problems(entry))
    assert found and found[0][0] == where and problem in found[0][1], found


def test_a_malformed_rule_registered_from_python_fails_the_call_clearly() -> None:
    with pytest.raises(
        ModelError, match=r"malformed scripted reply at when.contains: `contains` must be"
    ):
        ask(mock({"s": [{"when": {"contains": 3}, "reply": "x"}]}), "hi")


def test_flow_test_files_refuse_malformed_rules_at_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    path = tmp_path / "flows" / "chat.test.yaml"
    path.write_text(
        "flow: chat\ntests:\n  - name: t\n    replies:\n      s:\n        - when: {regex: '(x'}\n"
        "          reply: hi\n"
    )
    with pytest.raises(BlockyardError, match="regex '\\(x' is not valid RE2") as caught:
        load_tests(path, tmp_path)
    assert "flows/chat.test.yaml:6:" in str(caught.value) and "BY516" in str(caught.value)
    assert "not valid RE2" in str(caught.value)


def test_blockyard_yaml_refuses_malformed_rules_at_line_and_column(make_yard: Any) -> None:
    from engine.definitions.project import load_project
    from engine.validate.semantic import check_project

    root = make_yard(
        {
            "blockyard.yaml": "models:\n  default:\n    provider: mock\n    replies:\n      s:\n"
            "        - when: {contains: Ada, starts: x}\n          reply: hi\n"
        }
    )
    found = [d.format() for d in check_project(load_project(root))]
    assert found == [
        "blockyard.yaml:6:41: error BY516 model profile 'default', reply 1 for 's': unknown "
        "condition 'starts' (a rule matches on contains, regex)"
    ], found
