"""`uses:` steps: run a block; a decide step with `branches:` then picks the next step."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command

from engine.compile.blockstep import BlockStep
from engine.compile.builder import Built, Follower, GraphBuilder, Region
from engine.compile.reduce import Landing
from engine.compile.state import State, applied, combined, record
from engine.compile.wired import executor_for
from engine.executors.model import decision_output
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem, internal
from engine.nodes.events import failed
from engine.nodes.scope import item_index, make_scope
from engine.spec import DecideBlock
from engine.spec.flow import UsesStep, enum_text


def build(builder: GraphBuilder, region: Region, step: UsesStep) -> Built:
    block = builder.block(step.uses, step.id)
    label = builder.label(step.id)
    wired = executor_for(builder, region, step, block, step.uses, label)
    block_step = BlockStep(
        builder.flow,
        step.id,
        label,
        block,
        step.with_,
        region.frames,
        step.outputs,
        executor=wired,
        files=builder.bundle.prompts,
    )
    frames = region.frames
    name = step.id
    talks = block.kind == "agent"  # an agent's conversation goes to the run's `messages`
    landing = Landing(step, frames)

    async def run(
        state: State, runtime: Runtime[RunContext]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        # ... except in a conversation thread's turn: there `messages` is the conversation itself, which
        # gains exactly the turn's message and its reply; the agent's prompt, tool calls and results
        # stay in the turn's trace (appending them, or the history the agent was given, to the append
        # reducer is how a thread ends up holding every message twice)
        said: list[Any] | None = [] if talks and runtime.context.thread_id is None else None
        index = item_index(state, frames)
        outputs = await block_step.run(make_scope(state, frames), runtime, index, said)
        try:
            update = landing.update(outputs, state)
        except Problem as exc:
            raise failed(
                runtime.stream_writer,
                builder.flow,
                label,
                str(exc),
                started=time.monotonic(),
                index=index,
                block=block.block,
            ) from None
        update["results"] = [record(name, block.block, outputs)]
        if said:
            update["messages"] = said
        return outputs, update

    if step.branches is None:
        followers: list[
            Follower
        ] = []  # a router or loop check this step runs inline (set when wired)

        async def node(state: State, runtime: Runtime[RunContext]) -> Any:
            update = (await run(state, runtime))[1]
            if not followers:
                return update
            then = await followers[0](applied(state, update), runtime)
            return Command(update=combined(update, then.update), goto=then.goto)

        builder.add_node(name, node, retry=block_step.policies.retry, inline=not block_step.pauses)
        return Built([name], tail=name, fuse=followers.append)

    if not isinstance(block, DecideBlock):
        raise internal(
            f"{builder.where(step.id)}: branches on {block.kind} block '{block.block}'", "BY310"
        )
    choice = decision_output(block, builder.where(step.id))
    branches = dict(step.branches)
    built = Built([name])

    async def decide(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        outputs, update = await run(state, runtime)
        target = branches.get(enum_text(outputs[choice]))
        goto = region.resolve(target) if target is not None else built.default
        return Command(update=update, goto=list(dict.fromkeys([*goto, *built.after])))

    builder.add_node(name, decide, retry=block_step.policies.retry, inline=not block_step.pauses)
    return built
