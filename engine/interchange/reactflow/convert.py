"""convert(): a React Flow graph -> the flow data, stage by stage (read, classify the edges, find the
entry and regions, write the steps), stopping after a stage that found problems."""

from __future__ import annotations

from typing import Any

from engine.core.values import JsonDict
from engine.interchange.blocks import BlockPlacer
from engine.interchange.reactflow.model import Converted, as_dict
from engine.interchange.reactflow.steps import StepWriter


def convert(graph: Any, placer: BlockPlacer, *, name: str, where: str) -> Converted:
    """The flow data of a React Flow graph; raises GraphError naming every node or edge that is wrong."""
    return _Converter(graph, placer, name, where).run()


class _Converter(StepWriter):
    def run(self) -> Converted:
        self.read()
        self.stop()
        self.classify()
        self.stop()
        entry = self.entry()
        self.stop()
        regions = self.regions(entry)
        self.stop()
        settings = as_dict(self.graph.get("flow"))
        self.message_keys()
        steps = self.steps(regions, None)
        self.stop()
        flow: JsonDict = {"flow": self.name}
        flow.update({k: v for k, v in settings.items() if k not in ("flow", "steps")})
        given = as_dict(settings.get("inputs"))
        inputs = {**self.flow_inputs, **given}
        if inputs:
            flow["inputs"] = inputs
        if "outputs" not in settings:
            written = [key for key in dict.fromkeys(self.keys.values())]
            flow["outputs"] = {key: {"optional": True} for key in written}
        if "description" not in settings and isinstance(self.graph.get("description"), str):
            flow["description"] = self.graph["description"]
        flow["steps"] = steps
        return Converted(flow, self.placer)
