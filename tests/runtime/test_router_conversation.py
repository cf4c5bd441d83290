"""Routers on the conversation: `last_message` and `messages` in a router's value and rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.definitions.project import load_project
from engine.runtime.yard import Yard
from engine.validate.semantic import check_project

MakeYard = Callable[[dict[str, str]], Path]

SAY = """
block: say
kind: transform
inputs: {text: {type: string}}
outputs: {reply: {type: string}}
compute: {reply: text}
"""
CHAT = """
flow: chat
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - id: route
    router:
      value: "{{ last_message }}"
      routes:
        - {contains: refund, goto: refund}
        - {expr: "messages[-1].content == 'ping'", goto: pong}
        - {expr: "messages | length > 1 and messages[0].content == 'hello'", goto: known}
      default: answer
  - {id: refund, uses: say, with: {text: refunds}, goto: end}
  - {id: pong, uses: say, with: {text: pong}, goto: end}
  - {id: known, uses: say, with: {text: "welcome back, you said {{ inputs.message }}"}, goto: end}
  - {id: answer, uses: say, with: {text: "{{ inputs.message }}"}}
"""


def test_a_router_sees_the_thread_conversation(make_yard: MakeYard) -> None:
    root = make_yard({"blocks/say.yaml": SAY, "flows/chat.yaml": CHAT})
    with Yard.load(root) as yard:
        replies = [
            (yard.run("chat", {"message": text}, thread="t1").outputs or {})["reply"]
            for text in ("hello", "again", "ping", "a refund please")
        ]
        routes = [
            e.data["outputs"]["goto"]
            for e in yard.events(yard.runs(limit=1)[0].id)
            if e.type == "step_finished" and e.step == "route"
        ]
    assert replies == ["hello", "welcome back, you said again", "pong", "refunds"]
    assert routes == ["refund"]


def test_outside_a_thread_the_message_input_is_the_conversation(make_yard: MakeYard) -> None:
    root = make_yard({"blocks/say.yaml": SAY, "flows/chat.yaml": CHAT})
    with Yard.load(root) as yard:
        assert yard.run("chat", {"message": "ping"}).outputs == {"reply": "pong"}
        assert yard.run("chat", {"message": "hello"}).outputs == {
            "reply": "hello"
        }  # one message: not 'known'


def test_a_flow_without_a_message_input_sees_an_empty_conversation(make_yard: MakeYard) -> None:
    flow = CHAT.replace(
        "inputs: {message: {type: string}}", "inputs: {topic: {type: string}}"
    ).replace("inputs.message", "inputs.topic")
    flow = flow.replace(
        'value: "{{ last_message }}"', 'value: "[{{ last_message }}]{{ messages | length }}"'
    )
    flow = flow.replace(
        "messages[-1].content == 'ping'", "messages and messages[-1].content == 'ping'"
    )
    root = make_yard({"blocks/say.yaml": SAY, "flows/chat.yaml": flow})
    with Yard.load(root) as yard:
        result = yard.run("chat", {"topic": "refund"}, run_id="r1")
        value = next(
            e.data["value"]
            for e in yard.events("r1")
            if e.type == "step_finished" and e.step == "route"
        )
    assert (result.outputs, value) == ({"reply": "refund"}, "[]0")


def test_the_conversation_is_only_for_routers(make_yard: MakeYard) -> None:
    flow = CHAT.replace("with: {text: refunds}", 'with: {text: "{{ last_message }}"}')
    project = load_project(make_yard({"blocks/say.yaml": SAY, "flows/chat.yaml": flow}))
    found = [d.format() for d in check_project(project)]
    assert len(found) == 1 and found[0].startswith(
        "flows/chat.yaml:13:42: error BY401 step 'refund': 'last_message' is seen only by a router's `value:`"
    ), found
    clean = load_project(make_yard({"blocks/say.yaml": SAY, "flows/chat.yaml": CHAT}))
    assert [d.format() for d in check_project(clean)] == []


HELPER = """
block: helper
kind: agent
inputs: {task: {type: string}}
outputs: {answer: {type: string}}
prompt: {user: "{{ task }}"}
max_iterations: 3
"""
AFTER_AGENT = """
flow: after
inputs: {task: {type: string}}
outputs: [reply]
steps:
  - {id: work, uses: helper, with: {task: "{{ inputs.task }}"}}
  - id: route
    router:
      value: "{{ messages | length }}"
      routes: [{expr: "messages | length > 0", goto: seen}]
      default: unseen
  - {id: seen, uses: say, with: {text: "saw the agent's messages"}, goto: end}
  - {id: unseen, uses: say, with: {text: "saw no messages"}}
"""


def test_a_router_right_after_an_agent_step_sees_its_messages(make_yard: MakeYard) -> None:
    # The router runs inside the agent step's node (engine/compile/builder.py, `follower`); it sees
    # the state as the agent's update leaves it, messages included, as it would a step later.
    spaced = AFTER_AGENT.replace("flow: after", "flow: spaced").replace(
        "  - id: route\n", "  - {id: mid, uses: say, with: {text: mid}}\n  - id: route\n"
    )
    root = make_yard(
        {
            "blocks/say.yaml": SAY,
            "blocks/helper.yaml": HELPER,
            "flows/after.yaml": AFTER_AGENT,
            "flows/spaced.yaml": spaced,
        }
    )
    with Yard.load(root) as yard:
        for flow in ("after", "spaced"):
            for mode in ("sync", "none"):
                result = yard.run(flow, {"task": "hi"}, durability=mode)
                assert result.outputs == {"reply": "saw the agent's messages"}, (flow, mode)
                route = next(
                    e
                    for e in yard.events(result.run_id)
                    if e.type == "step_finished" and e.step == "route"
                )
                assert int(route.data["value"]) >= 2, (flow, mode)  # the task, the agent's answer
