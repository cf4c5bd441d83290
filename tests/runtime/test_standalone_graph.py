"""Compiled flows as standalone LangGraph graphs (docs/langgraph.md): `yard.compile(name)` runs with
plain invoke/ainvoke/stream on any checkpointer, as a subgraph of hand-written LangGraph code, with
approval gates resumed by `Command(resume=...)`; `blockyard export langgraph` writes a langgraph.json
whose graphs load the way LangGraph's server loads them (by path, then the module's variable)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel import Pregel
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from engine import Yard
from engine.core.errors import UsageError
from engine.executors import smart as smart_executor
from engine.state.memory import unpack
from tests.runtime.conftest import subprocess_env
from tests.support.cli import Cli
from tests.support.example import copy_example_yard


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the example yard at the repository's root."""
    return copy_example_yard(tmp_path)


class Parent(TypedDict, total=False):
    name: str
    greeting: str
    words: int
    log: list[str]


def _parent(flow: Any) -> Any:
    """A hand-written graph with the compiled flow `hello` as one of its nodes."""

    def before(state: Parent) -> Parent:
        return {"name": "Dee", "log": ["before"]}

    def after(state: Parent) -> Parent:
        return {
            "log": [*state.get("log", []), f"after: {state['greeting']} ({state['words']} words)"]
        }

    builder = StateGraph(Parent)
    builder.add_node("before", before)
    builder.add_node("hello", flow)
    builder.add_node("after", after)
    builder.add_edge(START, "before")
    builder.add_edge("before", "hello")
    builder.add_edge("hello", "after")
    builder.add_edge("after", END)
    return builder.compile(checkpointer=InMemorySaver())


EXPECTED = {
    "name": "Dee",
    "greeting": "greet: name=Dee",
    "words": 2,
    "log": ["before", "after: greet: name=Dee (2 words)"],
}


def test_the_example_flow_runs_as_a_subgraph_sync_and_async(example: Path) -> None:
    with Yard.load(example) as yard:
        app = _parent(yard.compile("hello"))
        assert app.invoke({}, {"configurable": {"thread_id": "sync"}}) == EXPECTED
        assert asyncio.run(app.ainvoke({}, {"configurable": {"thread_id": "async"}})) == EXPECTED
        # the flow's steps are the nodes of its subgraph, which LangGraph finds (state, streaming)
        [(node, inner)] = list(yard.compile("hello").get_subgraphs())
        assert node == "hello" and {"greet", "shout"} <= set(inner.get_graph().nodes)
        state = app.get_state({"configurable": {"thread_id": "sync"}})
        assert state.values == EXPECTED and state.next == ()


def test_the_flow_graph_speaks_the_flows_inputs_and_outputs(example: Path) -> None:
    with Yard.load(example) as yard:
        graph = yard.compile("hello")
        assert graph.get_input_jsonschema()["properties"] == {
            "name": {"title": "Name", "type": "string"}
        }
        assert set(graph.get_output_jsonschema()["properties"]) == {"greeting", "loud", "words"}
        assert graph.invoke({"name": "Ada"}) == {
            "greeting": "greet: name=Ada",
            "loud": "GREET: NAME=ADA",
            "words": 2,
        }
        assert graph.invoke({}) == {
            "greeting": "greet: name=World",
            "loud": "GREET: NAME=WORLD",
            "words": 2,
        }
        updates = [chunk for chunk in graph.stream({"name": "Cy"}, stream_mode="updates")]
        assert updates == [
            {"hello": {"greeting": "greet: name=Cy", "loud": "GREET: NAME=CY", "words": 2}}
        ]

        async def custom() -> list[Any]:
            return [
                chunk
                async for _, chunk in graph.astream(
                    {"name": "Cy"}, stream_mode="custom", subgraphs=True
                )
            ]

        # the steps' events come through LangGraph's custom stream mode (from the flow's subgraph)
        assert [(e["type"], e["step"]) for e in asyncio.run(custom()) if e["type"] != "token"] == [
            ("step_started", "greet"),
            ("model_call", "greet"),
            ("step_finished", "greet"),
            ("step_started", "shout"),
            ("step_finished", "shout"),
        ]
    assert not (
        example / ".blockyard" / "state.db"
    ).exists()  # a standalone graph keeps nothing of ours


def test_interrupts_at_the_flows_node_work_and_at_its_steps_are_refused(example: Path) -> None:
    with Yard.load(example) as yard:
        graph = yard.compile("hello")
        # a step of the flow is no node of this graph: LangGraph would ignore the name and run to the end
        for call, step in (
            (lambda: graph.invoke({"name": "Ada"}, interrupt_before=["greet"]), "greet"),
            (
                lambda: list(graph.stream({"name": "Ada"}, interrupt_after=["shout", "hello"])),
                "shout",
            ),
            (
                lambda: asyncio.run(graph.ainvoke({"name": "Ada"}, interrupt_before=["greet"])),
                "greet",
            ),
        ):
            with pytest.raises(
                ValueError, match="the graph of flow 'hello' is one node, 'hello'"
            ) as refused:
                call()
            assert f"cannot stop at '{step}'. Interrupt at 'hello' (or '*')" in str(refused.value)
        # its one node, by name or '*': LangGraph stops there, and goes on when invoked again
        stoppable = graph.copy(update={"checkpointer": InMemorySaver()})
        assert type(stoppable) is type(graph)
        config: Any = {"configurable": {"thread_id": "stop"}}
        # stopped: no outputs
        assert not stoppable.invoke({"name": "Ada"}, config, interrupt_before=["hello"])
        assert stoppable.get_state(config).next == ("hello",)
        assert stoppable.invoke(None, config)["greeting"] == "greet: name=Ada"
        after: Any = {"configurable": {"thread_id": "after"}}
        assert (
            stoppable.invoke({"name": "Bo"}, after, interrupt_after="*")["loud"] == "GREET: NAME=BO"
        )
        assert stoppable.get_state(after).next == ()


def test_an_llm_step_runs_on_the_mock_provider_of_the_flows_config(tmp_path: Path) -> None:
    (tmp_path / "blocks").mkdir()
    (tmp_path / "flows").mkdir()
    (tmp_path / "blockyard.yaml").write_text(
        "models:\n  default:\n    provider: mock\n    replies:\n      ask.answer: [{reply: forty-two}]\n"
    )
    (tmp_path / "blocks" / "answer.yaml").write_text(
        "block: answer\nkind: llm\ninputs: {question: {type: string}}\noutputs: {reply: {type: string}}\n"
        "prompt: {user: '{{ question }}'}\n"
    )
    (tmp_path / "flows" / "ask.yaml").write_text(
        "flow: ask\ninputs: {question: {type: string}}\noutputs: [reply]\n"
        "steps:\n  - {id: answer, uses: answer, with: {question: '{{ inputs.question }}'}}\n"
    )
    with Yard.load(tmp_path) as yard:
        graph = yard.compile("ask")
        saver = InMemorySaver()
        app = graph.copy(update={"checkpointer": saver})
        config: Any = {"configurable": {"thread_id": "t"}}
        assert asyncio.run(app.ainvoke({"question": "meaning of life?"}, config)) == {
            "reply": "forty-two"
        }
        assert app.get_state(config).values == {
            "question": "meaning of life?",
            "reply": "forty-two",
        }


def test_an_approval_gate_interrupts_and_resumes_with_command(example: Path) -> None:
    with Yard.load(example) as yard:
        store = InMemoryStore()
        app = yard.compile("order_lunch").copy(
            update={"checkpointer": InMemorySaver(), "store": store}
        )
        config: Any = {"configurable": {"thread_id": "lunch"}}
        first = app.invoke({"user_id": "ada"}, config)
        [ask] = first["__interrupt__"]
        assert (ask.value["gate"], ask.value["message"], sorted(ask.value["fields"])) == (
            "ask",
            "No usual lunch saved for ada yet. What should I order on Tuesday?",
            ["dish", "restaurant"],
        )
        assert app.get_state(config).tasks[0].interrupts[0].id == ask.id
        second = app.invoke(
            Command(
                resume={
                    "decision": "approve",
                    "values": {"restaurant": "Chipotle", "dish": "burrito"},
                }
            ),
            config,
        )
        [remember] = second["__interrupt__"]
        assert remember.value["kind"] == "require_approval" and remember.value["gate"] == "remember"

        async def last() -> Any:
            return await app.ainvoke(Command(resume={"decision": "approve"}), config)

        done = asyncio.run(last())
        assert done["order_id"].startswith("LUNCH-TUE-chipotle") and "burrito" in done["message"]
        # memory blocks wrote to the run's store, laid out as Blockyard's own memory
        [lunch] = store.search(("users", "ada", "preferences"))
        assert unpack(lunch.value, preference=True) == {"restaurant": "Chipotle", "dish": "burrito"}
        assert list(unpack(lunch.value, preference=True)) == [
            "restaurant",
            "dish",
        ]  # as written, as yard.run keeps it
        assert [
            i.key for i in store.search(("users", "ada", "flows", "order_lunch", "history"))
        ] == ["lunch"]
        # the next run finds the usual and goes through without a gate
        again = app.invoke({"user_id": "ada"}, {"configurable": {"thread_id": "next"}})
        assert "__interrupt__" not in again and "burrito" in again["message"]


def test_a_standalone_gate_takes_approve_true_as_an_alias_of_the_decision(example: Path) -> None:
    with Yard.load(example) as yard:
        app = yard.compile("order_lunch").copy(
            update={"checkpointer": InMemorySaver(), "store": InMemoryStore()}
        )
        config: Any = {"configurable": {"thread_id": "alias"}}
        assert app.invoke({"user_id": "bo"}, config)["__interrupt__"]
        second = app.invoke(
            Command(resume={"approve": True, "values": {"restaurant": "Noma", "dish": "moss"}}),
            config,
        )
        [remember] = second["__interrupt__"]
        assert remember.value["gate"] == "remember"
        done = app.invoke(Command(resume={"approve": True}), config)
        assert "moss" in done["message"]


def test_a_flow_with_memory_and_no_store_says_what_it_needs(example: Path) -> None:
    with (
        Yard.load(example) as yard,
        pytest.raises(UsageError, match="give its graph a LangGraph store"),
    ):
        yard.compile("order_lunch").invoke({"user_id": "ada"})


def _load_like_langgraph(config_file: Path) -> dict[str, Any]:
    """The graphs of a langgraph.json as LangGraph's server loads them (langgraph_api.graph:
    'path.py:variable' with a '/' is a file, imported under a name made from its path; the
    graph is `module.__dict__[variable]`, a compiled graph or a factory)."""
    graphs: dict[str, Any] = {}
    for graph_id, source in json.loads(config_file.read_text())["graphs"].items():
        path, variable = source.rsplit(":", maxsplit=1)
        assert "/" in path  # a file path, relative to langgraph.json
        file = (config_file.parent / path).resolve()
        name = str(file).replace("/", "__").replace(".py", "").lstrip(".")
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[name]
        graph = module.__dict__[variable]
        # `langgraph dev` refuses graphs that bring a checkpointer or a store of their own
        assert isinstance(graph, Pregel) and graph.checkpointer is None and graph.store is None
        graphs[graph_id] = graph
    return graphs


def test_export_langgraph_writes_graphs_langgraph_can_load(example: Path, cli: Cli) -> None:
    out = example / "deploy" / "langgraph.json"
    outcome = cli(example, "export", "langgraph", "--output", str(out))
    assert outcome.code == 0, outcome.err
    config = json.loads(out.read_text())
    assert config["dependencies"] == ["."]
    assert config["graphs"]["hello"] == "./blockyard_graphs.py:hello"
    graphs = _load_like_langgraph(out)
    assert sorted(graphs) == sorted(
        path.stem
        for path in (example / "flows").glob("*.yaml")
        if not path.name.endswith(".test.yaml")
    )
    # the server gives the graph its own checkpointer and store (graph.copy), and a context of its own
    hello = graphs["hello"].copy(update={"checkpointer": InMemorySaver(), "store": InMemoryStore()})
    result = asyncio.run(
        hello.ainvoke({"name": "Ada"}, {"configurable": {"thread_id": "t"}}, context={})
    )
    assert result == {"greeting": "greet: name=Ada", "loud": "GREET: NAME=ADA", "words": 2}


def test_export_langgraph_leaves_out_broken_flows(example: Path, cli: Cli) -> None:
    (example / "flows" / "broken.yaml").write_text(
        "flow: broken\nsteps:\n  - {id: a, uses: nowhere}\n"
    )
    outcome = cli(example, "export", "langgraph")
    assert outcome.code == 0, outcome.err
    assert "warning: flow 'broken' has errors and is not exported" in outcome.err
    graphs = json.loads((example / "langgraph.json").read_text())["graphs"]
    assert "broken" not in graphs and "hello" in graphs
    assert (example / "blockyard_graphs.py").is_file()


def test_an_exported_flow_that_cannot_be_built_loads_and_says_why_when_run(
    example: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `langgraph dev` stops when one graph fails to load: a flow needing a missing extra must not
    monkeypatch.setattr(smart_executor, "dspy_installed", lambda: False)
    outcome = cli(example, "export", "langgraph")
    assert outcome.code == 0, outcome.err
    assert (
        "warning: flow 'research' cannot be built here" in outcome.err
        and "dspy extra" in outcome.err
    )
    graphs = _load_like_langgraph(example / "langgraph.json")
    assert "research" in graphs and "hello" in graphs
    warned = capsys.readouterr().err
    # once, not per import
    assert warned.count("warning: blockyard: flow 'research' cannot be built here") == 1
    with pytest.raises(
        UsageError, match=r"flow 'research' cannot be built here: .*dspy extra is not installed"
    ):
        asyncio.run(graphs["research"].ainvoke({"topic": "bees"}))
    hello = graphs["hello"].copy(update={"checkpointer": InMemorySaver(), "store": InMemoryStore()})
    assert (
        asyncio.run(hello.ainvoke({"name": "Ada"}, {"configurable": {"thread_id": "t"}}))["words"]
        == 2
    )


def test_the_models_tokens_come_through_langgraphs_messages_stream(example: Path) -> None:
    async def chunks(
        graph: Any, subgraphs: bool
    ) -> list[tuple[tuple[str, ...], Any, dict[str, Any]]]:
        found = []
        async for part in graph.astream(
            {"message": "Hi"}, stream_mode=["messages"], subgraphs=subgraphs
        ):
            ns, _, (chunk, metadata) = part if subgraphs else ((), *part)
            if chunk.content:
                found.append((ns, chunk, metadata))
        return found

    with Yard.load(example) as yard:
        graph = yard.compile("support_chat")
        # the offline mock's words, as the flow's node's tokens: LangGraph's default keeps no subgraph's
        top = asyncio.run(chunks(graph, subgraphs=False))
        assert (
            "".join(chunk.content for _, chunk, _ in top)
            == "Thanks for writing to ACME support. How can I help you today?"
        )
        assert {(ns, meta["langgraph_node"], meta["blockyard_node"]) for ns, _, meta in top} == {
            ((), "support_chat", "answer")
        }
        # with subgraphs, the step's own chat model run, and not twice
        nested = asyncio.run(chunks(graph, subgraphs=True))
        assert [chunk.content for _, chunk, _ in nested] == [chunk.content for _, chunk, _ in top]
        assert all(len(ns) == 1 and meta["langgraph_node"] == "answer" for ns, _, meta in nested)


def test_export_langgraph_refuses_a_folder_as_output(example: Path, cli: Cli) -> None:
    outcome = cli(example, "export", "langgraph", "--output", str(example))
    assert (
        outcome.code == 2
        and outcome.err.startswith("error: --output")
        and "is a folder" in outcome.err
    )


SCRIPT = """
import sys
from engine import Yard
from langgraph.store.memory import InMemoryStore
with Yard.load(sys.argv[1]) as yard:
    graph = yard.compile("order_lunch").copy(update={"store": InMemoryStore()})
    print(graph.invoke({"user_id": "ada"})["__interrupt__"][0].value["gate"])
"""


def test_the_sync_api_ends_with_its_process_and_a_gate_without_checkpointer(example: Path) -> None:
    # the background loop of the sync API must not keep the interpreter from exiting
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(example)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ask\n", "")
