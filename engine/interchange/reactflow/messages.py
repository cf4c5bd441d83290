"""Messages: the context key each node writes its message to, and the expression a node reads the last
message from (the closest producers before it)."""

from __future__ import annotations

from engine.interchange.reactflow.model import CONTAINERS, MESSAGE, NEXT, Node
from engine.interchange.reactflow.regions import RegionFinder


class MessageKeys(RegionFinder):
    """Where each node's message is kept, and what a node reads as the last message."""

    def message_keys(self) -> None:
        """The context key holding each node's message (what the next node reads as the last message)."""
        called = {target for targets in self.delegations.values() for target in targets}
        for node in self.nodes.values():
            if node.data.get("block") is not None or node.id in called:
                continue  # a sub-agent answers the agent that calls it, not the flow's context
            if node.type in ("agent", "tool"):
                self.keys[node.id] = node.step
            elif node.type == "smart_node":
                outputs = node.data.get("outputs")
                if (
                    isinstance(outputs, list)
                    and outputs
                    and isinstance(outputs[0], dict)
                    and outputs[0].get("name")
                ):
                    self.keys[node.id] = str(outputs[0]["name"])

    def last_message(self, node_id: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """Expressions for the message(s) that reach `node_id`: the closest producers before it."""
        found: list[str] = []
        for edge in self.incoming[node_id]:
            source = self.nodes[edge.source]
            if source.id in seen or node_id in self.delegations[source.id]:
                continue
            if source.type in CONTAINERS and edge.handle == NEXT:
                found.append(str(source.data.get("as") or "item"))
            elif self.owner.get(source.id) == node_id:
                continue  # a body's end leading back to its container: the container's message is from before
            elif source.id in self.keys:
                found.append(f"context.{self.keys[source.id]}")
            else:
                found.extend(self.last_message(source.id, seen | {node_id}))
        if not found and not seen:
            self.flow_inputs.setdefault(
                MESSAGE, {"type": "string", "description": "The request the flow works on."}
            )
            found.append(f"inputs.{MESSAGE}")
        return list(dict.fromkeys(found))

    def message_binding(self, node: Node, parallel: bool) -> str:
        found = self.last_message(node.id) or [f"inputs.{MESSAGE}"]
        if len(found) == 1:
            return "{{ " + found[0] + " }}"
        if parallel:  # all of them ran: read them all
            return "\n\n".join("{{ " + expr + " }}" for expr in found)
        # one of several ways led here: the message of the way that ran
        keyed = [e for e in found if e.startswith("context.")]
        rest = [e for e in found if not e.startswith("context.")]
        text = rest[0] if rest else "''"
        for expr in reversed(keyed):
            text = f"{expr} | default({text})"
        return "{{ " + text + " }}"
