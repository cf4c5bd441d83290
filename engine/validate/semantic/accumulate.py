"""Accumulated outputs (`reduce: append | merge` on a step's `outputs:`) and the flow's output folder.

- BY433: append adds a list to a list, merge an object to an object: the block output must be
  declared `type: array` (append) or `type: object` (merge). A subflow's outputs have no declared
  type; a value of the wrong kind fails the step at run time.
- BY434: a key that steps accumulate starts out empty and only grows; a step that writes it another
  way (without `reduce:`, with the other mode, as a `collect:` or an approval field) would replace
  what was gathered, so it is refused.
- BY435: `output_dir` is a folder of the yard: relative, without `..`, overlapping nothing the engine
  reads (engine/definitions/outputdir.py, `reserved`: definitions, code, prompts, configuration); links are checked
  when a run starts, when the folder may exist.
"""

from __future__ import annotations

from engine.definitions.outputdir import output_dir_problem, prompt_files, reserved
from engine.spec import ApprovalSpec
from engine.validate.semantic.index import FlowIndex, StepNode

NEEDS = {"append": "array", "merge": "object"}


def check_reduce(index: FlowIndex) -> None:
    """BY433 and BY434 (on a flow whose names resolve)."""
    modes: dict[
        str, tuple[str, StepNode, str]
    ] = {}  # key -> (mode, first step, output) accumulating it
    for node in index.walk():
        for name in node.spec.outputs:
            mode = node.spec.output_reduce(name)
            if mode is None:
                continue
            _check_type(index, node, name, mode)
            modes.setdefault(node.spec.output_key(name), (mode, node, name))
    if not modes:
        return
    for node in index.walk():
        for key, where, how in _writes(node):
            found = modes.get(key)
            if found is None or how == found[0]:
                continue
            mode, first, _output = found
            other = f"with `reduce: {how}`" if how in NEEDS else how
            index.report(
                where,
                "BY434",
                f"step '{node.id}' writes context key '{key}' {other}, and step '{first.id}' accumulates "
                f"it with `reduce: {mode}`; every step writing an accumulated key must use the same "
                f"`reduce:` (rename one of the outputs)",
            )


def _check_type(index: FlowIndex, node: StepNode, name: str, mode: str) -> None:
    block = node.runs_block
    if block is None or name not in block.outputs:
        return  # a subflow's outputs are untyped (checked at run time); unknown outputs are BY216
    declared = block.outputs[name].type
    if declared != NEEDS[mode]:
        index.report(
            node.at("outputs", name, "reduce"),
            "BY433",
            f"step '{node.id}': `reduce: {mode}` needs output '{name}' of block '{block.block}' to be "
            f"declared `type: {NEEDS[mode]}`, and it is `{declared}`",
        )


def _writes(node: StepNode) -> list[tuple[str, tuple[str | int, ...], str]]:
    """(context key, where in the document, how: append | merge | a description) of what a step writes."""
    spec = node.spec
    found: list[tuple[str, tuple[str | int, ...], str]] = []
    produced: list[str] = []
    if node.action == "uses" and node.runs_block is not None:
        produced = list(node.runs_block.outputs)
    elif node.action == "flow" and node.subflow is not None:
        produced = list(node.subflow.spec.outputs)
    for name in produced:
        mode = spec.output_reduce(name)
        where = node.at("outputs", name) if name in spec.outputs else node.at("id")
        found.append(
            (spec.output_key(name), where, mode or f"as output '{name}' (replacing its value)")
        )
    gates = [(spec.approval, ("approval",))]
    if isinstance(spec.require_approval, ApprovalSpec):
        gates.append((spec.require_approval, ("require_approval",)))
    for gate, path in gates:
        for field in gate.fields if gate is not None else ():
            found.append((field, node.at(*path, "fields", field), "as an approval field"))
    body = spec.map if spec.map is not None else spec.foreach
    if body is not None and body.collect:
        kind = "map" if spec.map is not None else "foreach"
        found.append((body.collect, node.at(kind, "collect"), "as its `collect:`"))
    return found


def check_output_dir(index: FlowIndex) -> None:
    """BY435: `output_dir` names a folder inside the yard that overlaps nothing the engine reads."""
    text = index.definition.spec.output_dir
    if text is None:
        return
    project = index.project
    blocks = (
        definition.spec for versions in project.blocks.values() for definition in versions.values()
    )
    problem = output_dir_problem(text, reserved(project.config, prompt_files(blocks)))
    if problem is not None:
        index.report(("output_dir",), "BY435", f"output_dir '{text}': {problem}")
