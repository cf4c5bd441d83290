"""Which model a block talks to: profile lookup, the `default` profile, one client per profile."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from engine.core.diagnostics import did_you_mean
from engine.models.agentic import AgentModel
from engine.models.base import StructuredModel
from engine.models.cached import generation_settings
from engine.models.calls import Metered
from engine.models.errors import ModelError
from engine.models.pricing import FREE, price_of
from engine.models.providers import make_generator
from engine.models.script import MockScript, script_for
from engine.models.structured import StructuredClient
from engine.spec import ConfigSpec, ModelBlock, ModelProfile

DEFAULT = "default"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
MOCK_NOTE = (
    "no model configured: using the offline mock model "
    "(set OPENAI_API_KEY or add a `default` profile to blockyard.yaml)"
)


class ModelResolver:
    """Resolves a block's `model` to a StructuredModel; build one per run (it is cheap).

    The `default` profile is config.models["default"] if present, else an openai profile when
    OPENAI_API_KEY is set (model from BLOCKYARD_DEFAULT_MODEL, or gpt-4o-mini), else the offline
    mock (and `default_note` says so). Clients are created on first use and cached per profile.
    A MockScript registered for `run_id` sends every call of the run to the mock.
    """

    def __init__(
        self, config: ConfigSpec, env: Mapping[str, str] | None = None, *, run_id: str | None = None
    ) -> None:
        self.config = config
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.run_id = run_id
        self._script = script_for(run_id)
        self._default, self.default_note = _default_profile(config, self.env)
        self._cache: dict[str, StructuredClient] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ModelResolver(profiles={sorted(self.config.models)!r}, run_id={self.run_id!r})"

    def profile(self, block: ModelBlock) -> tuple[str, ModelProfile]:
        """(profile name, profile) used by a block; inline profiles are named `<block>:inline`."""
        model = block.model
        if isinstance(model, ModelProfile):
            return f"{block.block}:inline", model
        name = model or DEFAULT
        if name == DEFAULT:
            return DEFAULT, self._default
        found = self.config.models.get(name)
        if found is None:
            raise ModelError(
                f"block '{block.block}' uses model profile '{name}', which blockyard.yaml does not "
                f"define{did_you_mean(name, [*self.config.models, DEFAULT])}"
            )
        return name, found

    def for_profile(self, name: str | None = None) -> StructuredModel:
        """The structured-output model of a profile of blockyard.yaml (None: `default`), for what
        asks a model outside a block (`blockyard compose`)."""
        wanted = name or DEFAULT
        if wanted != DEFAULT and wanted not in self.config.models:
            raise ModelError(
                f"no model profile '{wanted}' in blockyard.yaml"
                f"{did_you_mean(wanted, [*self.config.models, DEFAULT])}"
            )
        profile = self._default if wanted == DEFAULT else self.config.models[wanted]
        with self._lock:
            model = self._cache.get(wanted)
            if model is None:
                model = StructuredClient(_metered(profile, wanted, self.env, self._script))
                self._cache[wanted] = model
        return model

    def for_block(self, block: ModelBlock) -> StructuredModel:
        """The structured-output model for a block (block.model: a profile name, inline, or None)."""
        return self._client(block)

    def agent_for_block(self, block: ModelBlock) -> AgentModel:
        """The chat model an agent block runs its turns on (same profile, same cached client)."""
        generator: AgentModel = self._client(block).generator  # type: ignore[assignment]
        return generator

    def _client(self, block: ModelBlock) -> StructuredClient:
        name, profile = self.profile(block)
        key = name if not isinstance(block.model, ModelProfile) else profile.model_dump_json()
        with self._lock:
            model = self._cache.get(key)
            if model is None:
                model = StructuredClient(_metered(profile, name, self.env, self._script))
                self._cache[key] = model
        return model


def _metered(
    profile: ModelProfile, name: str, env: Mapping[str, str], script: MockScript | None
) -> Metered:
    """The profile's provider, every call measured and priced (engine/models/calls.py); a run script
    sends calls to the mock, which costs nothing whatever the profile says."""
    generator = make_generator(profile, name, env, run_script=script)
    price = (
        FREE
        if generator.provider == "mock" and profile.pricing is None
        else price_of(profile, generator.model)
    )
    return Metered(generator, profile=name, price=price, settings=generation_settings(profile))


def _default_profile(config: ConfigSpec, env: Mapping[str, str]) -> tuple[ModelProfile, str | None]:
    configured = config.models.get(DEFAULT)
    if configured is not None:
        return configured, None
    if env.get("OPENAI_API_KEY", "").strip():
        name = env.get("BLOCKYARD_DEFAULT_MODEL", "").strip() or DEFAULT_OPENAI_MODEL
        return ModelProfile(provider="openai", name=name), None
    return ModelProfile(provider="mock"), MOCK_NOTE
