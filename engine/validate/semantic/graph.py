"""Small graph algorithms over `node -> successors` mappings (iterative: flows may be long)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)
Successors = Mapping[N, Sequence[N]]


def reachable(starts: Iterable[N], successors: Successors[N]) -> set[N]:
    """Every node reachable from `starts` (the starts included)."""
    seen: set[N] = set()
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(successors.get(node, ()))
    return seen


def reach_masks(nodes: Sequence[N], successors: Successors[N]) -> dict[N, int]:
    """For each node, every node reachable from it (itself included) as a bitset: bit i is `nodes[i]`.

    One pass over the strongly connected components, sinks first, each OR-ing the sets of the
    components it leads to: O(edges) big-integer ORs, where calling `reachable` once per node
    would walk the graph again for every node (quadratic on dense `needs:`).
    """
    bit = {node: 1 << position for position, node in enumerate(nodes)}
    masks: dict[N, int] = {}
    for component in strongly_connected(nodes, successors):  # a component after those it reaches
        mask = 0
        for member in component:
            mask |= bit[member]
            for target in successors.get(member, ()):
                # a target in this component has no mask yet: its bit is added
                mask |= masks.get(target, 0)
        for member in component:
            masks[member] = mask
    return masks


def bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def reverse(successors: Successors[N]) -> dict[N, list[N]]:
    """The predecessor mapping of a successor mapping."""
    result: dict[N, list[N]] = {}
    for node, targets in successors.items():
        result.setdefault(node, [])
        for target in targets:
            result.setdefault(target, []).append(node)
    return result


def strongly_connected(nodes: Sequence[N], successors: Successors[N]) -> list[list[N]]:
    """Tarjan's strongly connected components, each listed in the order of `nodes`.

    Components come out in reverse topological order (a component before the ones that reach it).
    """
    order = {node: position for position, node in enumerate(nodes)}
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    components: list[list[N]] = []
    counter = 0
    targets_of: dict[N, list[N]] = {}  # filtered once per node: a node is revisited once per target
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[N, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = targets_of.get(node)
            if targets is None:
                targets = targets_of[node] = [t for t in successors.get(node, ()) if t in order]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component: list[N] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component, key=order.__getitem__))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def is_cycle(component: Sequence[N], successors: Successors[N]) -> bool:
    """True when a strongly connected component really loops (several nodes, or a self-edge)."""
    return len(component) > 1 or component[0] in successors.get(component[0], ())


def shortest_path(
    start: N, goal: N, successors: Successors[N], allowed: Callable[[N], bool] = lambda _: True
) -> list[N] | None:
    """The shortest path start -> goal through allowed nodes, both ends included, or None.

    With start == goal this is the shortest cycle through start.
    """
    previous: dict[N, N] = {}
    visited = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in successors.get(node, ()):
            if target == goal:
                path = [goal]
                while node != start:
                    path.append(node)
                    node = previous[node]
                path.append(start)
                return path[::-1]
            if target not in visited and allowed(target):
                visited.add(target)
                previous[target] = node
                queue.append(target)
    return None
