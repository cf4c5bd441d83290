"""Usage of real provider clients (docs/observability.md, "Model calls" and "Cost"): langchain-openai,
streaming and not, against a loopback OpenAI-compatible server that reports usage as OpenAI does; the
price table; and what is unknown stays unknown."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import Event
from engine.core.usage import ModelCall
from engine.models import calls
from engine.models.pricing import Price, price_of, table_path
from engine.runtime.yard import Yard
from engine.spec import ModelProfile
from engine.spec.common import Pricing
from tests.models.model_helpers import make_request
from tests.models.test_google_provider import TEXT_SCHEMA, google_model
from tests.support.gemini_stub import GeminiReply, GeminiStub
from tests.support.openai_stub import OpenAIStub, Reply

KEY = "sk-usage-test-key-0123456789"

BLOCK = """
block: write
kind: llm
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {user: "Write about {{ topic }}."}
"""
AGENT = """
block: helper
kind: agent
tools: [current_time]
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {user: "Help with {{ topic }}."}
"""
FLOW = """
flow: usage
inputs: {topic: {type: string, default: tides}}
outputs: [text]
steps:
  - {id: draft, uses: write}
  - {id: check, uses: helper, with: {topic: "{{ context.text }}"}}
"""


def _yard(tmp_path: Path, stub: OpenAIStub, pricing: str = "") -> Path:
    root = tmp_path / "yard"
    config = (
        f"models:\n  default:\n    provider: openai\n    name: stub-model\n    base_url: {stub.base_url}\n"
        f"    api_key_env: USAGE_KEY\n{pricing}"
    )
    files = {
        "blocks/write.yaml": BLOCK,
        "blocks/helper.yaml": AGENT,
        "flows/usage.yaml": FLOW,
        "blockyard.yaml": config,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _run(root: Path) -> list[Event]:
    async def go() -> list[Event]:
        with Yard.load(root, env={"USAGE_KEY": KEY}) as yard:
            return [event async for event in yard.astream("usage", {})]

    return asyncio.run(go())


def _calls(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(e.data, step=e.step) for e in events if e.type == "model_call"]


def test_streamed_replies_ask_for_usage_and_the_counts_are_the_servers(tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        stub.queue(
            Reply(structured={"text": "the tides"}, usage=(1200, 80, 1024, 16), chunk_delay=0.02),
            Reply(
                tool_calls=[("final_answer", json.dumps({"text": "checked"}))],
                usage=(300, 20, 0, 0),
            ),
        )
        events = _run(
            _yard(
                tmp_path,
                stub,
                "    pricing: {input_per_mtok: 2.0, output_per_mtok: 8.0, cached_input_per_mtok: 0.5}\n",
            )
        )
        bodies = [request.body for request in stub.requests]
    assert events[-1].type == "run_finished", events[-1].data
    assert all(
        body["stream"] is True and body["stream_options"] == {"include_usage": True}
        for body in bodies
    )
    draft, check = _calls(events)
    assert {
        key: draft[key]
        for key in (
            "step",
            "purpose",
            "provider",
            "model",
            "input_tokens",
            "output_tokens",
            "cached_tokens",
            "reasoning_tokens",
            "price_source",
            "ok",
        )
    } == {
        "step": "draft",
        "purpose": "block",
        "provider": "openai",
        "model": "stub-model",
        "input_tokens": 1200,
        "output_tokens": 80,
        "cached_tokens": 1024,
        "reasoning_tokens": 16,
        "price_source": "profile",
        "ok": True,
    }
    # cached input at its own price: (1200 - 1024) × $2 + 1024 × $0.50 + 80 × $8, per million
    assert draft["cost_usd"] == pytest.approx((176 * 2.0 + 1024 * 0.5 + 80 * 8.0) / 1e6)
    assert draft["ttft_ms"] is not None and 0 < draft["ttft_ms"] < draft["latency_ms"]
    assert (
        check["step"],
        check["purpose"],
        check["turn"],
        check["input_tokens"],
        check["output_tokens"],
    ) == ("check", "agent", 1, 300, 20)


def test_a_server_that_reports_no_usage_gives_unknown_counts_and_cost_never_zero(
    tmp_path: Path,
) -> None:
    with OpenAIStub() as stub:
        stub.queue(
            Reply(structured={"text": "the tides"}, usage=None),
            Reply(tool_calls=[("final_answer", json.dumps({"text": "checked"}))], usage=None),
        )
        root = _yard(tmp_path, stub)
        events = _run(root)
        with Yard.open(root) as yard:
            record = yard.get_run(events[0].run_id)
    calls = _calls(events)
    assert [
        (c["input_tokens"], c["output_tokens"], c["cost_usd"], c["price_source"]) for c in calls
    ] == [(None, None, None, None)] * 2
    assert record is not None and (record.model_calls, record.unpriced_calls, record.cost_usd) == (
        2,
        2,
        0.0,
    )


def test_a_gateway_without_a_stated_price_is_unknown_even_for_a_known_model_name(
    tmp_path: Path,
) -> None:
    with OpenAIStub() as stub:
        stub.queue(
            Reply(structured={"text": "t"}), Reply(tool_calls=[("final_answer", '{"text": "c"}')])
        )
        root = _yard(tmp_path, stub)
        root.joinpath("blockyard.yaml").write_text(
            root.joinpath("blockyard.yaml").read_text().replace("stub-model", "gpt-4o-mini")
        )
        calls = _calls(_run(root))
    assert [(c["model"], c["input_tokens"], c["cost_usd"]) for c in calls] == [
        ("gpt-4o-mini", 10, None)
    ] * 2


def test_failed_calls_are_recorded_too(tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        stub.queue(Reply.error_reply(400, "no such model"))
        events = _run(_yard(tmp_path, stub))
    (call,) = _calls(events)
    assert (call["ok"], call["input_tokens"], call["cost_usd"]) == (False, None, None)
    assert "no such model" in call["error"] and KEY not in json.dumps(call)


def test_the_price_table_is_litellms_for_the_providers_own_endpoints() -> None:
    path = table_path()
    assert path is not None, "LiteLLM's price table (installed with the dspy extra) is missing"
    entry = json.loads(path.read_text(encoding="utf-8"))["gpt-4o-mini"]
    assert price_of(ModelProfile(provider="openai", name="gpt-4o-mini"), "gpt-4o-mini") == Price(
        entry["input_cost_per_token"],
        entry["output_cost_per_token"],
        entry["cache_read_input_token_cost"],
        "litellm",
    )
    assert (
        price_of(ModelProfile(provider="openai", base_url="http://127.0.0.1:9/v1"), "gpt-4o-mini")
        is None
    )
    assert price_of(ModelProfile(provider="openai"), "a-model-nobody-prices") is None
    assert price_of(ModelProfile(provider="mock"), "mock") == Price(0.0, 0.0, 0.0, "mock")
    stated = price_of(
        ModelProfile(
            provider="openai",
            base_url="http://x/v1",
            pricing=Pricing(input_per_mtok=3, output_per_mtok=15),
        ),
        "m",
    )
    assert stated is not None and stated.cost(1_000_000, 100_000, 500_000) == pytest.approx(
        3.0 + 1.5
    )
    assert stated.cost(None, 10, 0) is None  # counts the provider did not report: no cost


class _Calls:
    """A recorder of model calls (engine/models/calls.py), as a block step installs one."""

    def __init__(self) -> None:
        self.made: list[ModelCall] = []

    def before(self, purpose: str) -> None:
        return None

    def after(self, call: ModelCall) -> None:
        self.made.append(call)


@pytest.mark.parametrize("streamed", [False, True])
def test_gemini_reports_its_usage_through_the_google_provider(streamed: bool) -> None:
    with GeminiStub() as gemini:
        gemini.queue(
            GeminiReply.structured_output({"greeting": "Hi"})
            if not streamed
            else GeminiReply.of_text("Hello there, Ada.", chunk_delay=0.01)
        )
        model = google_model(gemini)
        request = make_request(TEXT_SCHEMA)
        if streamed:
            request = dataclasses.replace(request, on_token=lambda piece: None)
        recorder = _Calls()
        with calls.recording(recorder):
            asyncio.run(model.structured(request))
    (call,) = recorder.made
    assert (call.provider, call.input_tokens, call.output_tokens) == ("google", 10, 5)
    assert (call.ttft_ms is not None) == streamed
