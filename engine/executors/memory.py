"""memory_read and memory_write blocks: long-term memory in the run's memory scope.

`memory: {namespace: preferences | history, key: TEMPLATE}` names the item; the key template sees
the block's inputs. The scope is the flow's `memory: {scope: ...}`, rendered when the run starts
(engine/runtime/memory.py keeps it in the run's context).

memory_read: with a key, that item's value (null when there is none); without one, every item —
preferences as a mapping key -> value, history as a list of past runs, oldest first. An input
named `memory_query` (or `query`) narrows a keyless read to the items whose key or value mention
one of its words (all of them for an empty query). One declared output receives the value;
several outputs are picked by name out of a mapping value (missing ones take their defaults).

memory_write: the value written is the block's inputs except those the key template reads — for a
preference the one input left as it is, several as a mapping; a history record is always a
mapping of them. A history write without a key is stored under
`<run id>.<step>` (`[index]` for items), so a step that runs again overwrites rather than
duplicates. It writes no outputs.

Prompts of llm/decide blocks also see `user_preferences` and `user_history` (`prompt_scope`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from engine.core.values import JsonDict, text_problem
from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import Problem
from engine.spec import MemoryReadBlock, MemoryWriteBlock
from engine.templates.render import TemplateError, references, render_text

QUERY_INPUTS = ("memory_query", "query")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def prepare(block: MemoryReadBlock | MemoryWriteBlock, where: str) -> Executor:
    namespace, key_template = block.memory.namespace, block.memory.key
    if isinstance(block, MemoryReadBlock):
        return _reader(block, where, namespace, key_template)
    return _writer(block, where, namespace, key_template)


def _key(template: str | None, inputs: Mapping[str, Any]) -> str | None:
    if template is None:
        return None
    try:
        key = render_text(template, inputs).strip()
    except TemplateError as exc:
        raise Problem(f"memory.key: {exc}") from None
    problem = text_problem(key)
    if problem is not None:
        raise Problem(f"memory.key: the rendered key {problem}")
    if not key:
        raise Problem(f"memory.key '{template}' rendered to an empty key")
    return key


def _memory(call: BlockCall) -> Any:
    memory = call.context.memory
    if memory is None:
        raise Problem(
            f"flow '{call.flow}' has no memory scope: add memory: {{scope: ...}} to the flow"
        )
    return memory


def _reader(
    block: MemoryReadBlock, where: str, namespace: str, key_template: str | None
) -> Executor:
    outputs = list(block.outputs)
    query_input = next((name for name in QUERY_INPUTS if name in block.inputs), None)

    async def run(call: BlockCall) -> JsonDict:
        memory = _memory(call)
        key = _key(key_template, call.inputs)
        value = await memory.read(namespace, key)
        if key is None and query_input is not None:
            value = narrow(value, str(call.inputs.get(query_input) or ""))
        return spread(value, outputs, block)

    return run


def _writer(
    block: MemoryWriteBlock, where: str, namespace: str, key_template: str | None
) -> Executor:
    read_by_key = {path[0] for path in references(key_template)} if key_template else set()
    stored = [name for name in block.inputs if name not in read_by_key]  # never empty (BY444)

    async def run(call: BlockCall) -> JsonDict:
        memory = _memory(call)
        key = _key(key_template, call.inputs)
        if key is None:
            key = f"{call.context.run_id}.{call.label}" + (
                f"[{call.index}]" if call.index is not None else ""
            )
        value = (
            call.inputs[stored[0]]
            if len(stored) == 1 and namespace == "preferences"
            else {name: call.inputs[name] for name in stored}
        )
        await memory.write(namespace, key, value)
        return {}

    return run


def spread(value: Any, outputs: list[str], block: MemoryReadBlock) -> JsonDict:
    """A memory value as the block's outputs: the only output gets it whole; several outputs take
    their names out of a mapping (absent ones are left to their defaults)."""
    if len(outputs) == 1:
        name = outputs[0]
        if value is None and block.outputs[name].has_default:
            return {}
        return {name: value}
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Problem(
            f"the memory item is {type(value).__name__}, not a mapping, so it cannot fill the outputs "
            f"{', '.join(repr(name) for name in outputs)}"
        )
    return {name: value[name] for name in outputs if name in value}


def words(text: str) -> list[str]:
    """Lower-cased words of three letters or more (shorter ones would match almost anything)."""
    return [word.casefold() for word in _WORD.findall(text) if len(word) >= 3]


def narrow(items: Any, query: str) -> Any:
    """The items (a mapping of preferences, or a list of history records) that mention a word of
    `query` in their key or value; everything for an empty query."""
    wanted = words(query)
    if not wanted:
        return items

    def mentions(*parts: Any) -> bool:
        text = " ".join(
            p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, default=str)
            for p in parts
        )
        found = set(words(text))
        return any(word in found or any(word in other for other in found) for word in wanted)

    if isinstance(items, Mapping):
        return {key: value for key, value in items.items() if mentions(key, value)}
    if isinstance(items, list):
        return [item for item in items if mentions(item)]
    return items


def prompt_scope(call: BlockCall) -> JsonDict:
    """What a prompt template sees: the block's inputs, plus `user_preferences` and `user_history`
    when the run has a memory scope (an input of the same name wins)."""
    memory = call.context.memory
    if memory is None:
        return call.inputs
    return {**memory.prompt_values(), **call.inputs}
