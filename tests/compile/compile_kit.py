"""Helpers for compiler tests: small yards built in memory, run on a real InMemorySaver with the
engine's mock model provider and a tool source test double. (Named uniquely: test dirs are not packages.)"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.compile import CompiledFlow, RunContext
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import load_project
from engine.models import ModelResolver, scripted

# Deterministic transform blocks most tests share.
BLOCKS: dict[str, str] = {
    "mark": """
        block: mark
        kind: transform
        description: Append a tag to the `log` list.
        inputs:
          log: {type: array, default: []}
          tag: {type: string}
        outputs:
          log: {type: array}
        compute:
          log: "log + [tag]"
        """,
    "inc": """
        block: inc
        kind: transform
        inputs:
          n: {type: integer, default: 0}
        outputs:
          n: {type: integer}
        compute:
          n: "n + 1"
        """,
    "add": """
        block: add
        kind: transform
        inputs:
          a: {type: number}
          b: {type: number}
        outputs:
          sum: {type: number}
        compute:
          sum: "a + b"
        """,
    "echo": """
        block: echo
        kind: transform
        inputs:
          text: {type: any}
        outputs:
          text: {type: any}
        compute:
          text: "text"
        """,
    "pick": """
        block: pick
        kind: decide
        inputs:
          question: {type: string, default: "?"}
        outputs:
          choice: {type: string, enum: [yes, no, maybe]}
        prompt:
          user: "{{ question }}"
        """,
}


class FakeTools:
    """A ToolSource double: async or sync Python functions by name; records every call."""

    def __init__(self, tools: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.tools = dict(tools or {})
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, name: str) -> Any:
        return self.tools[name]

    async def call(self, name: str, args: Mapping[str, Any]) -> Any:
        self.calls.append((name, dict(args)))
        result = self.tools[name](**args)
        if asyncio.iscoroutine(result):
            result = await result
        return result


@dataclass
class Run:
    state: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    compiled: CompiledFlow | None = None
    model_calls: list[Any] = field(default_factory=list)  # StructuredRequests the mock model saw

    @property
    def context(self) -> dict[str, Any]:
        context: dict[str, Any] = self.state.get("context", {})
        return context

    @property
    def outputs(self) -> dict[str, Any]:
        assert self.compiled is not None
        return self.compiled.outputs(self.state)

    @property
    def steps(self) -> list[str]:
        """Step ids of the results records, in order."""
        return [r["step"] for r in self.state.get("results", [])]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


def yard_bundle(
    make_yard: Callable[[dict[str, str]], Path],
    flows: Mapping[str, str],
    blocks: Mapping[str, str] | None = None,
    name: str | None = None,
) -> Bundle:
    """The bundle of flow `name` (default: the first flow) in a yard of BLOCKS + `blocks` + `flows`."""
    files = {f"blocks/{key}.yaml": text for key, text in {**BLOCKS, **(blocks or {})}.items()}
    files.update({f"flows/{key}.yaml": text for key, text in flows.items()})
    root = make_yard(files)
    project = load_project(root)
    errors = [d.format() for d in project.diagnostics if d.severity == "error"]
    assert not errors, errors
    return make_bundle(project, name or next(iter(flows)))


async def run_async(
    compiled: CompiledFlow,
    inputs: Mapping[str, Any] | None = None,
    *,
    tools: FakeTools | None = None,
    replies: Mapping[str, list[Any]] | None = None,
    run_id: str = "run-1",
) -> Run:
    """Run to the end (or the first failure), collecting the custom events of every graph level."""
    thread = uuid.uuid4().hex  # a fresh thread per run: the saver is shared by the runs of a test
    config = compiled.config(thread)
    run = Run({}, compiled=compiled)
    with scripted(run_id, replies or {}) as script:
        run.model_calls = script.calls
        # the resolver looks up the run's script when it is made
        context = RunContext(
            run_id=run_id,
            models=ModelResolver(compiled.bundle.config, env={}, run_id=run_id),
            tools=tools or FakeTools(),
            workspace=Path("."),
            thread_id=thread,
        )
        try:
            async for _ns, mode, data in compiled.graph.astream(
                compiled.initial_state(dict(inputs or {})),
                config,
                context=context,
                stream_mode=["custom", "updates"],
                subgraphs=True,
            ):
                if mode == "custom":
                    # what engine/nodes/events.py writes
                    run.events.append(cast("dict[str, Any]", data))
        except Exception as exc:  # the test inspects it
            run.error = exc
    snapshot = await compiled.graph.aget_state(config)
    run.state = dict(snapshot.values)
    return run


def run(compiled: CompiledFlow, inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> Run:
    return asyncio.run(run_async(compiled, inputs, **kwargs))
