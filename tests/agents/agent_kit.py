"""Helpers of the agent tests: yards whose default model is the OpenAI stub, and runs through the
real runtime (SQLite state, the event stream) with the final state at hand."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.events import Event
from engine.runtime.yard import Yard
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply

KEY_ENV = "AGENT_STUB_KEY"
PLANTED_KEY = "sk-planted-AGENT-SECRET-5f3c9a0d1e"


def stub_config(stub: OpenAIStub, extra: str = "") -> str:
    """blockyard.yaml with the default profile on the stub (the key from KEY_ENV)."""
    return (
        f"models:\n  default:\n    provider: openai\n    name: stub-model\n    base_url: {stub.base_url}\n"
        f"    api_key_env: {KEY_ENV}\n    timeout: 20s\n{extra}"
    )


def calls(*pairs: tuple[str, Any]) -> Reply:
    """A reply that calls several tools in one turn; arguments as values (JSON) or raw text."""
    return Reply(
        tool_calls=[
            (name, args if isinstance(args, str) else json.dumps(args)) for name, args in pairs
        ]
    )


def answer(**outputs: Any) -> Reply:
    """A reply that gives the final answer."""
    return Reply.tool_call("final_answer", outputs)


def system_of(request: RecordedRequest) -> str:
    messages = request.messages
    return (
        str(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""
    )


def offered(request: RecordedRequest) -> list[str]:
    body = request.body if isinstance(request.body, dict) else {}
    return [tool["function"]["name"] for tool in body.get("tools") or []]


@dataclass
class Outcome:
    events: list[Event]
    state: dict[str, Any]
    root: Path

    @property
    def last(self) -> Event:
        return self.events[-1]

    @property
    def outputs(self) -> dict[str, Any] | None:
        return self.last.data.get("outputs") if self.last.type == "run_finished" else None

    @property
    def error(self) -> str | None:
        return self.last.data.get("error") if self.last.type == "run_failed" else None

    @property
    def run_id(self) -> str:
        return self.events[0].run_id

    def of(self, kind: str, step: str | None = None) -> list[Event]:
        return [e for e in self.events if e.type == kind and (step is None or e.step == step)]

    def tool_calls(self, step: str | None = None) -> list[dict[str, Any]]:
        """The data of `tool_call` events of tools and sub-agents (not the final answer's)."""
        return [e.data for e in self.of("tool_call", step) if e.data.get("kind") != "answer"]

    def messages(self) -> list[Any]:
        return list(self.state.get("messages") or [])

    def workspace(self) -> Path:
        return self.root / ".blockyard" / "workspaces" / self.run_id


def run_flow(
    root: Path,
    flow: str,
    inputs: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run `flow` through the runtime; its events, and the final state read from the checkpoint."""
    env = {KEY_ENV: PLANTED_KEY} if env is None else env

    async def go() -> tuple[list[Event], dict[str, Any]]:
        with Yard.load(root, env=env) as yard:
            events = [event async for event in yard.astream(flow, inputs or {})]
            compiled = yard.compiled(yard.bundle(flow))
            snapshot = await compiled.graph.aget_state(
                {"configurable": {"thread_id": events[0].run_id}}
            )
            return events, dict(snapshot.values)

    events, state = asyncio.run(go())
    return Outcome(events, state, root)
