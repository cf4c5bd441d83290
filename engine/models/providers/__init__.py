"""Providers, one module each; each is imported only when a profile uses it (the SDKs are slow to load)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from engine.models.base import Generator
from engine.models.providers.mock import MockGenerator
from engine.models.script import MockScript
from engine.spec import ModelProfile

PROVIDERS = ("openai", "azure", "anthropic", "google", "mock")
# what the module of every provider but the mock has as `make`: (profile, its name, the environment) -> a Generator
Maker = Callable[[ModelProfile, str, Mapping[str, str]], Generator]

if TYPE_CHECKING:
    # every provider, imported for the checks only: import-linter sees each edge, mypy checks each
    # `make` against Maker (tests/test_registries.py keeps this list in step with PROVIDERS)
    from engine.models.providers import anthropic, azure, google, openai

    _MEMBERS: tuple[Maker, ...] = (openai.make, azure.make, anthropic.make, google.make)


def make_generator(
    profile: ModelProfile,
    name: str,
    env: Mapping[str, str],
    *,
    run_script: MockScript | None = None,
) -> Generator:
    """The generator for a profile. A run script sends every call to the mock, whatever the provider."""
    if run_script is not None or profile.provider == "mock":
        mock_profile = profile if profile.provider == "mock" else ModelProfile(provider="mock")
        return MockGenerator(mock_profile, run_script=run_script)
    make: Maker = importlib.import_module(f"engine.models.providers.{profile.provider}").make
    return make(profile, name, env)
