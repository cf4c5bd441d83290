"""Semantic checks over a loaded project (docs/validation.md): what JSON Schema cannot see.

Blocks are checked on their own (kind requirements, tools, models, templates); each flow is
indexed into regions, then checked for names that do not resolve, step shape, routing, graph
paths (reachability, dead ends, unbounded cycles), dataflow (inputs, context keys, parallel
writers, outputs), templates and its budget. The graph, dataflow and budget checks only run on a
flow whose names resolve and whose steps are well formed: on a broken flow they would report
follow-on noise.
Codes and titles: the code registry, engine/validate/codes.py; reference: docs/flows.md.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from engine.core.diagnostics import Diagnostic
from engine.core.gcpause import collector_paused
from engine.definitions.closure import closure
from engine.definitions.project import CONFIG_FILE, FlowDef, Project
from engine.validate.semantic import control
from engine.validate.semantic.accumulate import check_output_dir, check_reduce
from engine.validate.semantic.agents import check_agent_blocks, check_agent_steps
from engine.validate.semantic.bindings import (
    check_flow_outputs,
    check_inputs,
    check_parallel_writes,
)
from engine.validate.semantic.blocks import check_blocks
from engine.validate.semantic.budgets import check_budgets
from engine.validate.semantic.config import check_config
from engine.validate.semantic.dataflow import Dataflow
from engine.validate.semantic.delegation import (
    DelegationGraph,
    check_block_delegation,
    check_delegation,
    delegation_graph,
)
from engine.validate.semantic.durability import check_durability
from engine.validate.semantic.durations import check_durations
from engine.validate.semantic.emits import check_emits
from engine.validate.semantic.flows import (
    check_flow_defaults,
    check_memory,
    check_subflow_cycles,
    subflow_calls,
)
from engine.validate.semantic.index import Region, build_index
from engine.validate.semantic.paths import check_paths
from engine.validate.semantic.policy import check_policy
from engine.validate.semantic.references import check_references
from engine.validate.semantic.routing import check_routing
from engine.validate.semantic.schedule import check_schedule
from engine.validate.semantic.scope import check_step_templates
from engine.validate.semantic.structure import check_steps

__all__ = ["check_closure", "check_config_file", "check_flow", "check_project"]


def check_project(project: Project) -> list[Diagnostic]:
    """Every semantic problem of every flow and block of the project, sorted by place."""
    return _check(project, None, None)


def check_closure(project: Project, name: str) -> list[Diagnostic]:
    """The semantic problems of the files flow `name` is made of (its closure, engine/definitions/closure.py:
    its blocks, subflows, delegated flows, blockyard.yaml), for `run`: only the closure's flows and
    blocks are checked, not the whole yard. It finds every problem of those files that
    `check_project` finds: each flow's and each block's checks report on that flow's or block's
    own files, and the yard-wide checks (blockyard.yaml, durations, policy, delegation cycles,
    agents' offered names) run whole, as they are cheap. It may report more (the yard-wide
    checks' problems elsewhere): `engine.definitions.closure.flow_problems` picks the flow's."""
    found = closure(project, name)
    # a block file counts for the flows using its file's name too (engine/definitions/closure.py, broken_block_names)
    blocks = found.blocks | {
        block
        for block, versions in project.blocks.items()
        if any(Path(d.display).stem in found.blocks for d in versions.values())
    }
    return _check(project, blocks, found.flows)


def check_config_file(project: Project) -> list[Diagnostic]:
    """The semantic problems `check_project` finds in blockyard.yaml (which every flow needs), with
    no flow or block checked."""
    return [d for d in _check(project, (), ()) if d.file == CONFIG_FILE]


def _check(
    project: Project, blocks: Collection[str] | None, flows: Collection[str] | None
) -> list[Diagnostic]:
    """check_project's checks, on the blocks and flows named (all when None)."""
    # the indexes and facts of every flow stay alive: see engine/core/gcpause.py
    with collector_paused():
        return _check_all(project, blocks, flows)


def _check_all(
    project: Project, blocks: Collection[str] | None, flows: Collection[str] | None
) -> list[Diagnostic]:
    delegation = delegation_graph(project)
    found = [
        *check_config(project),
        *check_blocks(project, blocks),
        *check_block_delegation(project, delegation),
        *check_agent_blocks(project),
        *check_durations(project),
        *check_policy(project),
    ]
    calls = subflow_calls(project)
    for flow, definition in project.flows.items():
        if flows is None or flow in flows:
            found.extend(check_flow(project, definition, calls, delegation))
    return sorted(set(found))


def check_flow(
    project: Project,
    definition: FlowDef,
    calls: dict[str, list[str]] | None = None,
    delegation: DelegationGraph | None = None,
) -> list[Diagnostic]:
    """The semantic problems of one flow (its blocks are checked by check_project)."""
    index = build_index(project, definition)
    check_steps(index)
    check_references(index)
    check_delegation(index, delegation if delegation is not None else delegation_graph(project))
    check_agent_steps(index)
    check_routing(index)
    check_emits(index)
    check_memory(index)
    check_flow_defaults(index)
    check_schedule(index)
    check_subflow_cycles(index, calls if calls is not None else subflow_calls(project))
    check_output_dir(index)
    check_durability(index)
    flow = None
    graphs: dict[Region, control.ControlGraph] | None = None
    if not index.broken:
        check_reduce(index)
        graphs = {region: control.build(region) for region in index.regions}
        check_paths(index, graphs)
        flow = Dataflow(index, graphs)
        check_inputs(index, flow)
        check_parallel_writes(index, flow, graphs)
        check_flow_outputs(index, flow, graphs)
    check_step_templates(index, flow)
    check_budgets(index, graphs)
    return index.found
