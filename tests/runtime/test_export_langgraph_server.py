"""`blockyard export langgraph` under LangGraph's own server (docs/langgraph.md): the example yard,
exported, served by `langgraph dev` (langgraph-cli with the in-memory langgraph-api, the dev extra)
and driven with langgraph-sdk: every exported flow is an assistant, a conversation's model tokens
come through `messages-tuple`, and an approval gate interrupts and resumes with Command(resume=...).
Offline: no tracing, no analytics, the example's mock models."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.conftest import skip_or_fail
from tests.runtime.conftest import subprocess_env
from tests.support.cli import Cli
from tests.support.example import copy_example_yard

STARTUP = 60.0  # seconds `langgraph dev` gets to import the graphs and answer (~15 s on a busy 2-core machine)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/ok", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.fixture
def served(tmp_path: Path, cli: Cli) -> Iterator[tuple[str, list[str]]]:
    """The example yard exported and served by `langgraph dev`: (its URL, the flows exported)."""
    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.is_file():
        skip_or_fail("langgraph-cli is not installed (the dev extra: langgraph-cli[inmem])")
    yard = copy_example_yard(tmp_path / "yard")
    outcome = cli(yard, "export", "langgraph")
    assert outcome.code == 0, outcome.err
    flows = sorted(json.loads((yard / "langgraph.json").read_text())["graphs"])
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **subprocess_env(),
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGSMITH_TRACING_V2": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_AUTH_TYPE"):
        env.pop(name, None)
    log = tmp_path / "langgraph-dev.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(langgraph),
                "dev",
                "--no-browser",
                "--no-reload",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=yard,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP
        while not _answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"`langgraph dev` did not answer (exit code {server.poll()}):\n{log.read_text()[-4000:]}"
                )
            time.sleep(0.3)
        yield url, flows
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)


def _tokens(client: SyncLangGraphClient, thread: str, message: str) -> list[str]:
    """The text of the AI message chunks a support_chat run streams through `messages-tuple`."""
    texts: list[str] = []
    for part in client.runs.stream(
        thread, "support_chat", input={"message": message}, stream_mode="messages-tuple"
    ):
        if part.event == "error":
            pytest.fail(f"the run failed: {part.data}")
        if part.event == "messages":
            chunk, metadata = part.data
            assert (
                metadata["langgraph_node"] == "support_chat"
                and metadata["blockyard_node"] == "answer"
            )
            if chunk["type"] == "AIMessageChunk" and chunk["content"]:
                texts.append(chunk["content"])
    return texts


def test_langgraph_dev_serves_the_exported_example_yard(served: tuple[str, list[str]]) -> None:
    url, flows = served
    client = get_sync_client(url=url)
    # every exported flow loads (the smart block's `research` too: DSPy is in the dev extra)
    assistants = client.assistants.search(limit=100)
    assert sorted(a["graph_id"] for a in assistants) == flows
    assert {"hello", "order_lunch", "research", "support_chat"} <= set(flows)

    # a conversation's model tokens come through LangGraph's messages stream, a chunk per word
    thread = client.threads.create()["thread_id"]
    texts = _tokens(client, thread, "Hello!")
    assert len(texts) > 1
    assert "".join(texts) == "Thanks for writing to ACME support. How can I help you today?"

    # an approval gate interrupts, and Command(resume=...) answers it, with memory in the server's store
    lunch = client.threads.create()["thread_id"]
    client.runs.wait(lunch, "order_lunch", input={"user_id": "ada"})
    state: Any = client.threads.get_state(lunch)
    [ask] = state["interrupts"]
    assert ask["value"]["gate"] == "ask" and sorted(ask["value"]["fields"]) == [
        "dish",
        "restaurant",
    ]
    client.runs.wait(
        lunch,
        "order_lunch",
        command={
            "resume": {
                "decision": "approve",
                "values": {"restaurant": "Chipotle", "dish": "burrito"},
            }
        },
    )
    [remember] = client.threads.get_state(lunch)["interrupts"]
    assert remember["value"]["gate"] == "remember"
    done: Any = client.runs.wait(lunch, "order_lunch", command={"resume": {"decision": "approve"}})
    assert done["order_id"].startswith("LUNCH-") and "burrito" in done["message"]
    assert client.store.search_items(("users", "ada", "preferences"))["items"]
