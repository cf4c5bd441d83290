"""What the spans say, in the OpenTelemetry GenAI semantic conventions (gen_ai.*: workflow, agent,
chat and tool spans) and Blockyard's own attributes (blockyard.*). The attributes of each span are
built here from the events' data; the tree of spans is engine/telemetry/spans.py. No OpenTelemetry
import: the names and values are plain data.

Receivers that speak OpenInference (Arize Phoenix) derive its attributes from the gen_ai ones (an LLM
span from `chat`, its token counts from gen_ai.usage.*): only the spans the conventions have no
operation for, workflows and plain steps, say their OpenInference kind (CHAIN) themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.state.store import RunRecord

AttributeValue = str | bool | int | float
Attributes = dict[str, AttributeValue]

# gen_ai.operation.name values and the span names built on them
WORKFLOW = "invoke_workflow"
AGENT = "invoke_agent"
CHAT = "chat"
TOOL = "execute_tool"
# the provider names of the conventions (gen_ai.provider.name), where ours differ
PROVIDERS = {"azure": "azure.ai.openai", "google": "gcp.gemini"}
# OpenInference's span kind, for the spans without a gen_ai operation (Phoenix draws each kind its own way)
KIND = "openinference.span.kind"
# characters of one captured value; the rest is cut (a read file, a long answer)
CONTENT_LIMIT = 64 * 1024
OTHER_ERROR = "_OTHER"  # error.type when there is no better low-cardinality name


def workflow(flow: str, version: int, digest: str) -> Attributes:
    """The fixed attributes of an execution's root span (those of its flow definition; `run` has its run's)."""
    return {
        "gen_ai.operation.name": WORKFLOW,
        "gen_ai.workflow.name": flow,
        KIND: "CHAIN",
        "blockyard.flow": flow,
        "blockyard.flow.version": version,
        "blockyard.flow.digest": digest,
    }


def run(record: RunRecord) -> Attributes:
    """The attributes of an execution's root span that are its run's: its id, its conversation thread."""
    attributes: Attributes = {"blockyard.run_id": record.id}
    if record.thread_id:
        attributes["gen_ai.conversation.id"] = record.thread_id
        attributes["blockyard.thread_id"] = record.thread_id
    return attributes


def step(label: str, kind: Any, block: Any, flow: Any) -> tuple[str, Attributes]:
    """The name and fixed attributes of a step's span (a `step_started` event's `kind`, `block`, `flow`):
    `invoke_agent <block>` for an agent step, else `step <label>`."""
    attributes: Attributes = {"blockyard.step": label, KIND: "CHAIN"}
    if isinstance(kind, str):
        attributes["blockyard.step.kind"] = kind
    if isinstance(block, str):
        attributes["blockyard.block"] = block
    if kind == "flow" and isinstance(flow, str):
        attributes["blockyard.subflow"] = flow
    if kind == "agent":
        agent = block if isinstance(block, str) else label
        del attributes[KIND]  # an AGENT, from the operation
        attributes.update({"gen_ai.operation.name": AGENT, "gen_ai.agent.name": agent})
        return f"{AGENT} {agent}", attributes
    return f"step {label}", attributes


# a model call's fields that are the same for every call of a block: its span's name and fixed attributes
CHAT_FIXED = ("model", "provider", "purpose", "profile", "block", "price_source")
# a model call's numbers (engine/core/usage.py), each on its span when it is an int or a float: its tokens (only
# those the provider reported), cost, time to first token, agent turn, item of a map
CHAT_NUMBERS = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ("cost_usd", "blockyard.cost_usd"),
    ("ttft_ms", "blockyard.ttft_ms"),
    ("turn", "blockyard.agent.turn"),
    ("index", "blockyard.index"),
)


def chat(data: Mapping[str, Any]) -> tuple[str, Attributes]:
    """The name and fixed attributes of a model call's span (what CHAT_FIXED names of its data)."""
    model = str(data.get("model") or "unknown")
    provider = str(data.get("provider") or "unknown")
    attributes: Attributes = {
        "gen_ai.operation.name": CHAT,
        "gen_ai.provider.name": PROVIDERS.get(provider, provider),
        "gen_ai.request.model": model,
    }
    texts = {
        "blockyard.purpose": data.get("purpose"),
        "blockyard.model_profile": data.get("profile"),
        "blockyard.block": data.get("block"),
        "blockyard.price_source": data.get("price_source"),
    }
    for key, value in texts.items():
        if isinstance(value, str):
            attributes[key] = value
    return f"{CHAT} {model}", attributes


def tool(tool: Any, kind: Any, block: Any) -> tuple[str, Attributes]:
    """The name and fixed attributes of a tool call's span (a `tool_call` event's `tool`, `kind`, `block`):
    a tool, or a step, agent or flow an agent delegates to (`blockyard.tool.kind`). Its call id varies."""
    name = str(tool or "unknown")
    attributes: Attributes = {
        "gen_ai.operation.name": TOOL,
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    attributes["blockyard.tool.kind"] = kind if isinstance(kind, str) else "tool"
    if isinstance(block, str):
        attributes["blockyard.block"] = block
    return f"{TOOL} {name}", attributes


def content(value: Any) -> str:
    """A value captured on a span (capture_content): its JSON, cut to CONTENT_LIMIT characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return (
        text
        if len(text) <= CONTENT_LIMIT
        else text[:CONTENT_LIMIT] + f"... [{len(text)} characters]"
    )


def inputs(attributes: Attributes, value: Any) -> None:
    """Record what a run or step read (capture_content)."""
    attributes["input.value"] = content(value)
    attributes["input.mime_type"] = "application/json"


def outputs(attributes: Attributes, value: Any) -> None:
    """Record what a run or step wrote (capture_content)."""
    attributes["output.value"] = content(value)
    attributes["output.mime_type"] = "application/json"
