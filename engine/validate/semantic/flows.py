"""Flow-level checks that look beyond one flow's steps: memory use, declared defaults and subflow cycles."""

from __future__ import annotations

from engine.definitions.project import Project
from engine.spec.block import MEMORY_KINDS
from engine.spec.walk import walk_steps
from engine.validate.semantic.blocks import prompt_memory_names
from engine.validate.semantic.defaults import default_problems
from engine.validate.semantic.graph import shortest_path
from engine.validate.semantic.index import FlowIndex, quote_list
from engine.validate.semantic.structure import step_gates


def check_memory(index: FlowIndex) -> None:
    """BY357: memory blocks and memory prompt variables need the flow's `memory: {scope: ...}`."""
    if index.definition.spec.memory is not None:
        return
    for node in index.walk():
        if node.block is None:
            continue
        block = node.block.spec
        where = node.at("uses") if node.spec.uses is not None else node.at("map", "uses")
        if block.kind in MEMORY_KINDS:
            index.report(
                where,
                "BY357",
                f"step '{node.id}' uses {block.kind} block '{block.block}', but flow '{index.name}' has "
                'no memory: add memory: {scope: "users/{{ inputs.user_id }}"} (or another scope)',
            )
            continue
        used = prompt_memory_names(node.block, index.project)
        if used:
            index.report(
                where,
                "BY357",
                f"step '{node.id}': the prompt of block '{block.block}' reads {quote_list(used)}, but "
                f"flow '{index.name}' has no memory: add memory: {{scope: ...}} to the flow",
            )


def check_flow_defaults(index: FlowIndex) -> None:
    """BY360 in a flow: the defaults of its inputs and of its approval gates' fields."""
    flow = index.definition.spec
    for name, decl in flow.inputs.items():
        for where, message in default_problems(decl, ("inputs", name), name):
            index.report(where, "BY360", f"flow '{flow.flow}': the default of input {message}")
    for node in index.walk():
        for key, gate in step_gates(node.spec):
            for name, decl in gate.fields.items():
                for where, message in default_problems(decl, node.at(key, "fields", name), name):
                    index.report(
                        where, "BY360", f"step '{node.id}': the default of approval field {message}"
                    )


def subflow_calls(project: Project) -> dict[str, list[str]]:
    """flow -> the flows its steps run (nested steps included), for the cycle check."""
    calls: dict[str, list[str]] = {}
    for name, definition in project.flows.items():
        targets = [
            w.step.flow for w in walk_steps(definition.spec.steps) if w.step.flow is not None
        ]
        calls[name] = [t for t in dict.fromkeys(targets) if t in project.flows]
    return calls


def check_subflow_cycles(index: FlowIndex, calls: dict[str, list[str]]) -> None:
    """BY318: a flow must not run itself, directly or through other flows (nothing would bound it)."""
    for node in index.walk():
        target = node.spec.flow
        if target is None or target not in calls:
            continue
        path = [index.name] if target == index.name else shortest_path(target, index.name, calls)
        if path is None:
            continue
        chain = " -> ".join([index.name, *path])
        index.report(
            node.at("flow"),
            "BY318",
            f"step '{node.id}' runs flow '{target}', which leads back to '{index.name}' ({chain}); "
            "subflows cannot call themselves",
        )
