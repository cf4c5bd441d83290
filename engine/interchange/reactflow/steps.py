"""Steps: each region's step list in order, with `needs`, `goto`, `start`, branches and exits where the
list order does not say it; a node's step, and a container's (its body's steps)."""

from __future__ import annotations

from engine.core.values import JsonDict
from engine.interchange.reactflow.kinds import NodeKinds
from engine.interchange.reactflow.model import (
    BRANCH,
    COMPLETE,
    CONTAINERS,
    END,
    EXITS,
    STEP_KEYS,
    Edge,
    Node,
    Region,
    as_dict,
)
from engine.spec.flow import enum_text


class StepWriter(NodeKinds):
    """The step lists of the flow and of every container's body."""

    def steps(self, regions: dict[str | None, Region], owner: str | None) -> list[JsonDict]:
        region = regions[owner]
        members = set(region.members)
        delegated = {t for m in region.members for t in self.delegations[m]}
        for target in delegated:
            if self.plain_in(target):
                self.fail(
                    f"node '{target}': a sub-agent (an agent's edge leads to it) cannot also follow "
                    "another node (an edge from an agent to an agent delegates; mark one that means "
                    "'then' with data.kind: next)"
                )
        sequence_out = {m: self.sequence_targets(m) for m in region.members}
        needs: set[str] = set()
        changed = True
        while changed:
            changed = False
            for m in region.members:
                outs = [t for t in sequence_out[m] if t in members]
                if (len(outs) > 1 or m in needs) and m not in delegated:
                    for t in outs:
                        if t not in needs:
                            needs.add(t)
                            changed = True
        order = self.order(region, sequence_out, needs, delegated)
        steps: list[JsonDict] = []
        for position, node_id in enumerate(order):
            node = self.nodes[node_id]
            follower = order[position + 1] if position + 1 < len(order) else None
            step = self.step(node, regions, node_id in needs)
            if node_id == region.entry and position != 0:
                step["start"] = True
            if node_id in needs:
                step["needs"] = [e.source for e in self.sequence_in(node_id)]
                step["needs"] = [self.nodes[s].step for s in dict.fromkeys(step["needs"])]
            elif node_id not in delegated:
                self.place_successor(
                    node, step, sequence_out[node_id], follower, needs, delegated, members
                )
            steps.append(step)
        return steps

    def plain_in(self, node_id: str) -> list[Edge]:
        return [e for e in self.incoming[node_id] if e in self.plain[e.source]]

    def sequence_targets(self, node_id: str) -> list[str]:
        """Where a node goes when it has run (plain edges; a container's COMPLETE)."""
        node = self.nodes[node_id]
        edges = [*self.plain[node_id], *(e for e in self.handled[node_id] if e.handle == COMPLETE)]
        targets: list[str] = []
        for edge in edges:
            target = self.nodes[edge.target]
            targets.append(
                END if target.type == "end" or edge.target == self.owner.get(node_id) else target.id
            )
        if node.type in CONTAINERS and len([e for e in edges if e.handle == COMPLETE]) > 1:
            self.fail(f"{node.type} '{node_id}': several COMPLETE edges; one node follows it")
        return list(dict.fromkeys(targets))

    def sequence_in(self, node_id: str) -> list[Edge]:
        return [
            e
            for e in self.incoming[node_id]
            if e in self.plain[e.source] or (e.handle == COMPLETE and e in self.handled[e.source])
        ]

    def order(
        self,
        region: Region,
        sequence_out: dict[str, list[str]],
        needs: set[str],
        delegated: set[str],
    ) -> list[str]:
        """The step list: the entry first, each node before what it leads to where possible, a node
        whose followers all wait for it (`needs`) right before one of them."""
        walked: list[str] = []
        pending = [region.entry]
        members = set(region.members)
        while pending or len(walked) < len(members):
            if not pending:
                pending = [next(m for m in region.members if m not in walked)]
            current = pending.pop()
            if current in walked or current not in members:
                continue
            walked.append(current)
            later = [t for t in self.successors(current) if t in members and t not in walked]
            pending.extend(reversed(sorted(later, key=lambda t: t not in needs)))
        regular = [n for n in walked if n not in needs and n not in delegated]
        waiting = [n for n in walked if n in needs]
        sources = [
            n for n in regular if sequence_out[n] and all(t in needs for t in sequence_out[n])
        ]
        order = [n for n in regular if n not in sources]
        for source in sources:
            order.append(source)
            own = next((t for t in sequence_out[source] if t in waiting), None)
            if own is None and waiting:
                own = waiting[0]
            if own is not None:
                waiting.remove(own)
                order.append(own)
        order.extend(waiting)
        order.extend(n for n in walked if n in delegated)
        return order

    def place_successor(
        self,
        node: Node,
        step: JsonDict,
        targets: list[str],
        follower: str | None,
        needs: set[str],
        delegated: set[str],
        members: set[str],
    ) -> None:
        """`goto` where list order would not say it."""
        if node.type == "router" or any(t in needs for t in targets):
            return
        if not targets:
            if "branches" in step and self.branches_cover(step):
                return
            if follower is not None and follower not in needs:
                step["goto"] = END
            return
        (target,) = targets[:1]
        if len(targets) > 1:
            return
        shown = END if target == END else self.nodes[target].step
        if target != END and target == follower:
            return
        step["goto"] = shown

    def branches_cover(self, step: JsonDict) -> bool:
        block = self.placer.exists(str(step.get("uses") or ""))
        if block is None or len(block.outputs) != 1:
            return False
        (spec,) = block.outputs.values()
        return spec.enum is not None and all(enum_text(v) in step["branches"] for v in spec.enum)

    def step(self, node: Node, regions: dict[str | None, Region], parallel: bool) -> JsonDict:
        data = node.data
        step: JsonDict = {"id": node.step}
        kind = node.type
        self.what_it_does(node, step, regions, parallel)
        # step keys set on the node (data.step), under what its type set
        own = as_dict(data.get("step"))
        for key in STEP_KEYS:
            if key in own and key not in step:
                step[key] = own[key]
        if data.get("require_approval") not in (None, False):
            step["require_approval"] = data["require_approval"]
        if kind == "tool" and data.get("block") is None:
            step.pop("with", None)
            step["with"] = self.tool_args(node)
        self.exits(node, step)
        delegates = [self.nodes[t].step for t in self.delegations[node.id]]
        if delegates:
            step["delegates"] = list(dict.fromkeys([*step.get("delegates", []), *delegates]))
        if not step.get("with"):
            step.pop("with", None)
        return step

    def what_it_does(
        self, node: Node, step: JsonDict, regions: dict[str | None, Region], parallel: bool
    ) -> None:
        """The keys that say what a step does, by its node's type: a block it uses, an agent, a tool, a
        router, a container's body, a gate or a subflow."""
        data, kind = node.data, node.type
        if data.get("block") is not None and kind in ("agent", "tool", "smart_node", "block"):
            ref = str(data["block"])
            if self.placer.exists(ref) is None:
                self.fail(f"node '{node.id}': block '{ref}' is not a block of the yard")
            step["uses"] = ref
            if kind == "tool" and "args" in data:
                step["with"] = data["args"]
        elif kind == "agent":
            self.agent(node, step, parallel)
        elif kind == "tool":
            self.tool(node, step)
        elif kind == "smart_node":
            self.smart(node, step, parallel)
        elif kind == "block":
            self.fail(f"node '{node.id}': a block node names its block in data.block")
        elif kind == "router":
            step["router"] = self.router(node, parallel)
        elif kind in CONTAINERS:
            self.container(node, step, regions)
        elif kind == "approval":
            step["approval"] = {
                k: v
                for k, v in data.items()
                if k in ("message", "fields", "approvers", "timeout", "on_timeout", "on_reject")
            }
        elif kind == "subflow":
            if not isinstance(data.get("flow"), str):
                self.fail(f"node '{node.id}': a subflow node names its flow in data.flow")
            step["flow"] = data.get("flow")

    def exits(self, node: Node, step: JsonDict) -> None:
        branches: dict[str, str] = {}
        for edge in self.handled[node.id]:
            handle = edge.handle or ""
            target = self.target_of(edge, node)
            if handle.startswith(BRANCH):
                branches[handle.removeprefix(BRANCH)] = target
            elif handle == "max_visits":
                step["on_max_visits"] = target
            elif handle in ("reject", "timeout"):
                key = EXITS[handle]
                if "approval" in step:
                    step["approval"][key] = target
                else:
                    gate = step.get("require_approval")
                    gate = dict(gate) if isinstance(gate, dict) else {}
                    gate[key] = target
                    step["require_approval"] = gate
        if branches:
            step["branches"] = branches

    def container(self, node: Node, step: JsonDict, regions: dict[str | None, Region]) -> None:
        data = node.data
        body = self.steps(regions, node.id) if node.id in regions else None
        if node.type == "iterator":
            items = data.get("items")
            if not isinstance(items, str) or not items:
                self.fail(
                    f"iterator '{node.id}': data.items names the context key holding the list"
                )
                items = "items"
            expression = items if "." in items or "[" in items else f"context.{items}"
            spec = {"items": expression, "as": data.get("as") or "item", "steps": body or []}
            if data.get("collect"):
                spec["collect"] = data["collect"]
            step["foreach"] = spec
        elif node.type == "loop":
            spec = {k: data[k] for k in ("until", "max_iterations", "on_exhausted") if k in data}
            spec.setdefault("max_iterations", 3)
            step["loop"] = {**spec, "steps": body or []}
        else:
            spec = {
                k: data[k]
                for k in ("items", "as", "uses", "with", "max_concurrency", "collect")
                if k in data
            }
            if body is not None:
                spec["steps"] = body
            step["map"] = spec
