"""What an agent is offered: the names its model sees, and how deep delegation goes.

An agent's model is offered its tools, its delegates (agent blocks, agent steps of the same list,
flows) and one more function, `final_answer`, that it answers with. BY441: a name offered twice
(a tool and a delegate) would be ambiguous; BY442: no tool or delegate may be called
`final_answer`; BY446: `approve_tools` names only the block's own tools. BY440: agents within
agents go at most MAX_DELEGATION_DEPTH levels deep — each agent, and each flow an agent delegates
to, is one level, counted the way the compiler follows delegation (engine/spec/delegation.py,
which both use: a `flow:` step runs its subflow at the level of the step). Cycles are BY320's.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.core.diagnostics import Diagnostic, did_you_mean
from engine.definitions.load import JsonPath
from engine.definitions.project import Project
from engine.spec import StepSpec
from engine.spec.block import ANSWER_TOOL, MAX_DELEGATION_DEPTH
from engine.spec.delegation import Depth
from engine.spec.walk import step_lists
from engine.validate.semantic.index import FlowIndex, catalog, issue


def check_agent_blocks(project: Project) -> list[Diagnostic]:
    """BY441 and BY442 for the tools and delegates of every agent block."""
    found: list[Diagnostic] = []
    for versions in project.blocks.values():
        for definition in versions.values():
            spec = definition.spec
            if spec.kind != "agent":
                continue
            for path, code, message in _offered(spec.tools, spec.delegates, ()):
                found.append(issue(definition.doc, path, code, f"block '{spec.block}': {message}"))
            for name in spec.approve_tools:
                if name not in spec.tools:
                    offered = ", ".join(spec.tools) or "none"
                    found.append(
                        issue(
                            definition.doc,
                            ("approve_tools", name),
                            "BY446",
                            f"block '{spec.block}': approve_tools names '{name}', which is not one of "
                            f"its tools{did_you_mean(name, spec.tools)} (its tools: {offered}); a "
                            "person decides on calls of the block's own tools only",
                            key=True,
                        )
                    )
    return found


def _offered(
    tools: list[str],
    delegates: list[str],
    prefix: JsonPath,
    *,
    block_tools: list[str] | None = None,
) -> Iterator[tuple[JsonPath, str, str]]:
    """Problems of the names an agent is offered: `tools` (written at prefix/tools, or the block's own
    `block_tools` when the step only adds delegates) and `delegates` (at prefix/delegates)."""
    for position, name in enumerate(tools):
        if name == ANSWER_TOOL:
            yield (*prefix, "tools", position), "BY442", _reserved("tool")
    for position, name in enumerate(delegates):
        if name == ANSWER_TOOL:
            yield (*prefix, "delegates", position), "BY442", _reserved("delegate")
        elif name in (block_tools if block_tools is not None else tools):
            yield (
                (*prefix, "delegates", position),
                "BY441",
                f"'{name}' is offered to the agent both as a tool and as a delegate; its model could not "
                "tell them apart: rename one of them",
            )


def _reserved(what: str) -> str:
    return (
        f"a {what} cannot be called '{ANSWER_TOOL}': that is the name of the function the agent gives its "
        f"final answer with; rename the {what}"
    )


def check_agent_steps(index: FlowIndex) -> None:
    """BY441 and BY442 for the delegates agent steps add; BY440 for chains of agents nested too deep."""
    for node in index.walk():
        block = node.runs_block
        if block is not None and block.kind == "agent" and node.spec.delegates:
            for path, code, message in _offered(
                [], node.spec.delegates, node.path, block_tools=block.tools
            ):
                index.report(path, code, f"step '{node.id}': {message}")
    depth = Depth(catalog(index.project))
    for listed in step_lists(index.definition.spec.steps):
        for position, step, chain in depth.chains(index.name, listed.steps):
            if len(chain) > MAX_DELEGATION_DEPTH:
                where = (*listed.path, position, *_key(step))
                index.report(
                    where,
                    "BY440",
                    f"step '{step.id}': delegation is nested more than {MAX_DELEGATION_DEPTH} levels deep "
                    f"({' -> '.join(chain)}); agents and the flows they delegate to nest at most "
                    f"{MAX_DELEGATION_DEPTH} levels",
                )


def _key(step: StepSpec) -> JsonPath:
    """Where a step names the agent or flow its chain starts at."""
    if step.flow is not None:
        return ("flow",)
    return ("uses",) if step.uses is not None else ("map", "uses")
