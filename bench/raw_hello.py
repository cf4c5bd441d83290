"""The example flow `hello` written by hand in LangGraph: the baseline of the cold-start figure.

What `blockyard run hello` does on the mock, in the fewest lines a LangGraph user would write
for it: a two-node graph (greet: a fake chat model sent a system and a user message; shout:
upper-case the greeting and count its words), durable on LangGraph's SqliteSaver in a file (a
Blockyard run is durable), invoked once, its outputs printed. bench/compare.py times it as a
fresh process against `blockyard run hello`.

    python bench/raw_hello.py STATE_FILE [--no-model]

`--no-model`: the greet node makes its text without a chat model (a lighter baseline, shown too).
"""

from __future__ import annotations

import sys
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    name: str
    greeting: str
    loud: str
    words: int


def main() -> None:
    state_file, *flags = sys.argv[1:]
    if "--no-model" in flags:

        def greet(state: State) -> State:
            return {"greeting": f"greet: name={state['name']}"}
    else:
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import HumanMessage, SystemMessage

        model = FakeListChatModel(responses=["greet: name=World"])

        def greet(state: State) -> State:
            reply = model.invoke(
                [
                    SystemMessage("You write warm, short greetings."),
                    HumanMessage(f"Write a one-line greeting for {state['name']}."),
                ]
            )
            return {"greeting": str(reply.content)}

    def shout(state: State) -> State:
        return {"loud": state["greeting"].upper(), "words": len(state["greeting"].split())}

    graph = StateGraph(State)
    graph.add_node("greet", greet)
    graph.add_node("shout", shout)
    graph.add_edge(START, "greet")
    graph.add_edge("greet", "shout")
    graph.add_edge("shout", END)
    with SqliteSaver.from_conn_string(state_file) as saver:
        app = graph.compile(checkpointer=saver)
        result = app.invoke(
            {"name": "World"}, {"configurable": {"thread_id": "hello"}}, durability="sync"
        )
    for key in ("greeting", "loud", "words"):
        print(f"{key}: {result[key]!r}")


if __name__ == "__main__":
    main()
