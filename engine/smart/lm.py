"""The language model a smart block's DSPy program talks to, from the block's model profile.

- `mock` (and every call of a run with a registered MockScript): DSPy's own DummyLM, answering
  each call with the next scripted reply for the step (`flow.step`, step id, block id — as for
  llm blocks) or else with outputs derived from the inputs, like the mock model. It follows a
  compiled program's demos: an input seen in a demo gets that demo's answer.
- `openai`, `azure`, `anthropic`, `google` (LiteLLM's `gemini/`): `dspy.LM` (LiteLLM) with the
  profile's model, endpoint, sampling settings and timeout, the key read from the environment for
  each call, no cache.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from engine.core.values import JsonDict
from engine.models.base import StructuredRequest
from engine.models.errors import (
    TRANSIENT_KINDS,
    ModelError,
    ModelOutputError,
    failure_kind,
    status_kind,
)
from engine.models.mock_values import fake, seed_of, summarize
from engine.models.providers.google import GEMINI_API_VERSION
from engine.models.providers.mock import MockGenerator
from engine.models.secrets import read_key, redact
from engine.smart import import_dspy
from engine.smart.program import REASONING
from engine.spec import ModelProfile, SmartBlock, parse_duration
from engine.spec.typecheck import outputs_schema

_PREFIX = {"openai": "openai", "azure": "azure", "anthropic": "anthropic", "google": "gemini"}
_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GOOGLE_API_KEY",
}


def lm_for(
    models: Any,
    block: SmartBlock,
    *,
    flow: str,
    step: str,
    inputs: Mapping[str, Any],
    history: tuple[tuple[str, str], ...] = (),
) -> tuple[Any, str]:
    """(a DSPy LM for one execution of `block`, the key to mask in errors: '' for the mock).

    `models` is the run's ModelResolver: its profile lookup, environment and mock scripts.
    """
    generator = models.agent_for_block(block)
    # the provider itself, not its meter (calls.py)
    generator = getattr(generator, "inner", generator)
    if isinstance(generator, MockGenerator):
        request = StructuredRequest(
            flow=flow,
            step=step,
            block=block.block,
            system=None,
            user=None,
            output_schema=outputs_schema(block.outputs),
            inputs=dict(inputs),
            history=history,
        )
        return mock_lm(generator, request, reasoning=block.mode == "chain_of_thought"), ""
    name, profile = models.profile(block)
    return provider_lm(profile, name, models.env)


def mock_lm(
    generator: MockGenerator, request: StructuredRequest, *, reasoning: bool = False
) -> Any:
    """DSPy's DummyLM on the mock's answers (scripted, else derived from the inputs)."""
    import_dspy()
    from dspy.utils.dummies import DummyLM  # the optional extra, imported by import_dspy()

    class MockLM(DummyLM):  # type: ignore[misc]
        """Follows a compiled program's demos when the input was one of them, else answers.
        (DummyLM's own matching misses demos that DSPy marks as incomplete.)"""

        def _use_example(self, messages: Any) -> Any:
            asked = str(messages[-1].get("content", "")).split("\n\nRespond with")[0].strip()
            for question, reply in itertools.pairwise(messages):
                if (
                    asked
                    and question.get("role") == "user"
                    and reply.get("role") == "assistant"
                    and asked in str(question.get("content", ""))
                ):
                    return reply["content"]
            return self._format_answer_fields(next(self.answers))

    return MockLM(_Answers(generator, request, reasoning), follow_examples=True)


class _Answers:
    """One answer per call of the LM: the next scripted reply, else outputs derived from the inputs."""

    def __init__(
        self, generator: MockGenerator, request: StructuredRequest, reasoning: bool
    ) -> None:
        self.generator = generator
        self.request = request
        self.reasoning = reasoning

    def __iter__(self) -> _Answers:
        return self

    def __next__(self) -> JsonDict:
        request = self.request
        if self.generator.run_script is not None:
            self.generator.run_script.record(request)
        value: Any = None
        for script in (self.generator.run_script, self.generator.profile_script):
            found, reply = script.next_reply(request) if script is not None else (False, None)
            if found:
                value = _scripted(reply, request, self.generator.model)
                break
        else:
            value = fake(
                request.output_schema,
                seed=seed_of(request.block, request.inputs),
                label=f"{request.block}: {summarize(request.inputs)}",
            )
        if self.reasoning and REASONING not in value:
            value = {
                REASONING: f"{request.block}: thinking about {summarize(request.inputs)}",
                **value,
            }
        answer: JsonDict = value
        return answer


def _scripted(reply: Any, request: StructuredRequest, model: str) -> JsonDict:
    if isinstance(reply, dict) and "$error" in reply:
        kind = str(reply["$error"])
        message = str(reply.get("message") or f"scripted {kind} error")
        raise ModelError(
            f"mock model '{model}', step '{request.step}': {message}",
            provider="mock",
            model=model,
            kind=kind if kind in TRANSIENT_KINDS else None,
        )
    if isinstance(reply, dict):
        return dict(reply)
    properties = request.output_schema.get("properties") or {}
    return {next(iter(properties)): reply} if len(properties) == 1 else {"value": reply}


def provider_lm(profile: ModelProfile, name: str, env: Mapping[str, str]) -> tuple[Any, str]:
    """dspy.LM for an openai, azure, anthropic or google profile, and the key it holds."""
    dspy: Any = import_dspy()
    provider = profile.provider
    what = f"model profile '{name}' ({provider}, model '{profile.name}')"
    if not profile.name and provider != "openai":
        raise ModelError(f"{what} needs `name`", provider=provider)
    key_env = profile.api_key_env or _KEY_ENV[provider]
    local = provider == "openai" and profile.base_url is not None and profile.api_key_env is None
    key = env.get(key_env, "").strip() or (
        "not-needed" if local else read_key(env, key_env, what=what)
    )
    settings: dict[str, Any] = {
        "api_key": key,
        "cache": False,
        "num_retries": profile.max_retries or 0,
    }
    base = profile.base_url or (env.get("AZURE_OPENAI_ENDPOINT") if provider == "azure" else None)
    if provider == "google" and base:
        # the profile names the API root; LiteLLM wants the version: the one the google provider fixes
        base = base.rstrip("/") + "/" + GEMINI_API_VERSION
    optional = {
        "api_base": base,
        "temperature": profile.temperature,
        "max_tokens": profile.max_tokens,
        "timeout": parse_duration(profile.timeout) if profile.timeout else None,
        "extra_headers": profile.headers,
        "api_version": profile.api_version if provider == "azure" else None,
    }
    settings.update({k: v for k, v in optional.items() if v is not None})
    return dspy.LM(f"{_PREFIX[provider]}/{profile.name or 'gpt-4o-mini'}", **settings), key


def model_failure(exc: BaseException, where: str, key: str) -> ModelError:
    """Whatever a DSPy call raised, as one ModelError (classified for retries, the key masked)."""
    if isinstance(exc, ModelError):
        return exc
    text = redact(" ".join(str(exc).split())[:300], key) or type(exc).__name__
    if type(exc).__name__ == "AdapterParseError":
        return ModelOutputError(
            f"{where}: the model's reply does not fit the block's outputs: {text}"
        )
    status = getattr(exc, "status_code", None)
    kind = status_kind(status) if isinstance(status, int) else failure_kind(exc)
    if kind is None and "Timeout" in type(exc).__name__:
        kind = "timeout"
    if kind is None and "Connection" in type(exc).__name__:
        kind = "connection"
    return ModelError(
        f"{where}: {type(exc).__name__}: {text}",
        kind=kind,
        status=status if isinstance(status, int) else None,
    )
