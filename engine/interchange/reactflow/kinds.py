"""Node kinds: the block (and step settings) an agent, tool, smart node or router becomes. Containers
hold a body of steps: steps.py."""

from __future__ import annotations

import json

from engine.core.values import JsonDict
from engine.interchange.blocks import slug
from engine.interchange.reactflow.messages import MessageKeys
from engine.interchange.reactflow.model import END, EXITS, MESSAGE, Node
from engine.spec.flow import ROUTE_CONDITIONS
from engine.templates.render import TemplateError, references


class NodeKinds(MessageKeys):
    """The block and step settings of each kind of node that is not a container."""

    def variables(self, node: Node, text: str) -> list[str]:
        try:
            found = references(text)
        except TemplateError as exc:
            self.fail(f"node '{node.id}': {exc}")
            return []
        return list(dict.fromkeys(path[0] for path in found))

    def declare_input(self, name: str) -> None:
        if name not in self.keys.values() and name != MESSAGE:
            self.flow_inputs.setdefault(name, {"type": "string"})

    def agent(self, node: Node, step: JsonDict, parallel: bool) -> None:
        data = node.data
        system = data.get("system_prompt")
        if system is not None and not isinstance(system, str):
            self.fail(f"agent '{node.id}': `system_prompt` must be text")
            system = None
        tools = data.get("tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            self.fail(f"agent '{node.id}': `tools` must be a list of names")
            tools = []
        agents = {n.id for n in self.nodes.values() if n.type == "agent"}
        agents.update(n.label for n in self.nodes.values() if n.type == "agent")
        own_tools = [t for t in tools if t not in agents]
        variables = self.variables(node, system or "")
        inputs: JsonDict = {MESSAGE: {"type": "string", "description": "The task."}}
        for name in variables:
            inputs.setdefault(name, {"type": "string"})
            self.declare_input(name)
        block: JsonDict = {
            "description": node.label,
            "kind": "agent",
            "inputs": inputs,
            "outputs": {"answer": {"type": "string", "description": "The agent's answer."}},
            "prompt": {**({"system": system} if system else {}), "user": "{{ message }}"},
        }
        if own_tools:
            block["tools"] = own_tools
        self.model_settings(node, block)
        if data.get("max_iterations") is not None:
            block["max_iterations"] = data["max_iterations"]
        step["uses"] = self.placer.place(slug(node.label, "agent"), block)
        sub_agent = any(node.id in self.delegations[n] for n in self.nodes)
        if not sub_agent:
            # a sub-agent is given its message by the agent that calls it, and answers it
            step["with"] = {MESSAGE: self.message_binding(node, parallel)}
            step["outputs"] = {"answer": self.keys[node.id]}

    def model_settings(self, node: Node, block: JsonDict) -> None:
        profile = node.data.get("profile")
        if profile is not None:
            if not isinstance(profile, str):
                self.fail(f"node '{node.id}': `profile` names a model profile of blockyard.yaml")
            else:
                block["model"] = profile

    def tool(self, node: Node, step: JsonDict) -> None:
        name = node.data.get("tool")
        if not isinstance(name, str) or not name:
            self.fail(f"tool '{node.id}': data.tool names the tool it calls")
            return
        args = self.tool_args(node)
        block = {
            "description": node.data.get("label") or f"Call the {name} tool.",
            "kind": "tool",
            "tool": name,
            "inputs": {arg: {"type": "any"} for arg in args},
            "outputs": {"result": {"type": "any", "description": f"What {name} returned."}},
        }
        step["uses"] = self.placer.place(
            slug(name, "tool") if not node.data.get("label") else slug(node.label), block
        )
        step["outputs"] = {"result": self.keys[node.id]}

    def tool_args(self, node: Node) -> JsonDict:
        args = node.data.get("args") or {}
        if not isinstance(args, dict):
            self.fail(f"tool '{node.id}': `args` must be an object")
            return {}
        return args

    def smart(self, node: Node, step: JsonDict, parallel: bool) -> None:
        data = node.data
        declared: dict[str, JsonDict] = {}
        for side in ("inputs", "outputs"):
            fields = data.get(side) or []
            if not isinstance(fields, list) or not all(
                isinstance(f, dict) and isinstance(f.get("name"), str) for f in fields
            ):
                self.fail(f"smart_node '{node.id}': `{side}` must be a list of {{name, desc}}")
                fields = []
            declared[side] = {
                f["name"]: {
                    "type": f.get("type") or "string",
                    **({"description": f["desc"]} if f.get("desc") else {}),
                }
                for f in fields
            }
        if not declared["outputs"]:
            self.fail(f"smart_node '{node.id}': no outputs; a smart node predicts at least one")
        mode = data.get("mode", "Predict")
        modes = {"Predict": "predict", "ChainOfThought": "chain_of_thought"}
        if mode not in modes:
            self.fail(
                f"smart_node '{node.id}': mode {json.dumps(mode)} (known: Predict, ChainOfThought)"
            )
            mode = "Predict"
        goal = data.get("goal")
        block: JsonDict = {
            "description": node.label,
            "kind": "smart",
            "inputs": declared["inputs"],
            "outputs": declared["outputs"],
            "mode": modes[mode],
        }
        if isinstance(goal, str) and goal:
            block["prompt"] = {"system": goal}
        guardrails = data.get("guardrails")
        if guardrails is not None:
            if not isinstance(guardrails, dict):
                self.fail(
                    f"smart_node '{node.id}': `guardrails` is an object {{shape, max_length, attempts}}"
                )
            else:
                block["guardrails"] = guardrails
        self.model_settings(node, block)
        step["uses"] = self.placer.place(slug(node.label, "smart"), block)
        bound: JsonDict = {}
        for name in declared["inputs"]:
            if name == MESSAGE:
                bound[name] = self.message_binding(node, parallel)
            else:
                self.declare_input(name)
        if bound:
            step["with"] = bound

    def router(self, node: Node, parallel: bool) -> JsonDict:
        data = node.data
        by_handle: dict[str, str] = {}
        for edge in self.handled[node.id]:
            if edge.handle not in EXITS:
                if edge.handle in by_handle:
                    self.fail(f"router '{node.id}': two edges leave by handle '{edge.handle}'")
                by_handle[str(edge.handle)] = self.target_of(edge, node)
        routes: list[JsonDict] = []
        for route in data.get("routes") or []:
            if isinstance(route, dict) and route.get("condition") in ROUTE_CONDITIONS:
                routes.append(
                    {
                        str(route["condition"]): route.get("value"),
                        "goto": by_handle.get(str(route.get("target_handle")), END),
                    }
                )
        default = data.get("default_handle")
        spec: JsonDict = {}
        if "value" in data:  # a template (an exported router); null: the rules are expressions
            if data["value"] is not None:
                spec["value"] = data["value"]
        elif isinstance(data.get("field"), str) and data["field"]:
            spec["value"] = "{{ context." + data["field"] + " }}"
        elif any(next(iter(r)) != "expr" for r in routes):
            spec["value"] = self.message_binding(node, parallel)
        spec["routes"] = routes
        spec["default"] = by_handle.get(str(default), END) if default else END
        return spec
